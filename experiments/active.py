"""Active preference exploration (Kersting & Xu 2009, Fig. 4) on OHSUMED, MQ2008 or HetRec
MovieLens users: pairs chosen actively against pairs chosen at random.

For each of ``--queries`` queries (chosen with ``--seed`` among those with at least
``--min-pairs`` labelled pairs: 200 on OHSUMED, 50 on MQ2008; on MovieLens the users with at
least 60 rated movies, ``--max-movies`` of them drawn per user), every pair implied by the
relevance grades (the star ratings) is a candidate (its orientation shuffled, the grades
answering). Starting from no known pair:

1. **Fig. 4 protocol**: ``k = 10`` pairs chosen by the paper's variance ratio, by BALD's mutual
   information, and 20 times at random; the posterior then predicts every remaining labelled
   pair: pairwise error and AUC per query;
2. **learning curves**: the pairwise error on all labelled pairs after each of ``k = 1 ..
   --k-max`` answers, per criterion (random: mean and 10-90% band over the repetitions).

Every (model, criterion, stage) is one call of :func:`bayesrank.active.explore_queries`: all the
queries and their repetitions in one compiled program per size group.

Models (hyperparameters fixed, not learned: RBF ``rho`` from the median heuristic, unit weights,
entity scale 0.1): ``XPGP`` (RBF on the attributes + one regularized Laplacian per relation +
entity effect), ``GP+entity`` (RBF + entity), ``GP`` (RBF alone, 1e-6 jitter). Relations:
OHSUMED's keyword graph; on MovieLens co-director and co-genre (bipartite projections; the
genres are also among the movie attributes); MQ2008 ships none, so only the two GPs run there.

    python experiments/active.py [--data-dir ../shared/data] [--queries 10] [--k-max 50]
        [--collection OHSUMED|MQ2008|MovieLens|all] [--repeats 20] [--engine ep|laplace]
        [--models ...] [--out DIR]
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import jax

jax.config.update("jax_enable_x64", True)
from bayesrank.runtime import enable_compilation_cache  # noqa: E402

enable_compilation_cache()

import numpy as np  # noqa: E402
from accuracy_data import movie_attributes, scale01, user_ratings  # noqa: E402

from bayesrank import active  # noqa: E402
from bayesrank.data.graphs import load_hetrec_relations, ohsumed_keyword_graph  # noqa: E402
from bayesrank.data.letor import load_letor  # noqa: E402
from bayesrank.data.pairs import pairs_from_grades  # noqa: E402
from bayesrank.kernels import RBF, XPGP, Independent, RegularizedLaplacian  # noqa: E402
from bayesrank.learning.initialize import median_distance  # noqa: E402
from bayesrank.metrics import pairwise_auc, pairwise_error  # noqa: E402
from bayesrank.predict import predict_pairs  # noqa: E402

REPO_ROOT = Path(__file__).resolve().parents[1]
CRITERIA = ("variance_ratio", "mutual_information", "random")
COLLECTIONS = ("OHSUMED", "MQ2008", "MovieLens")


def median_rho(X) -> float:
    return 1.0 / median_distance(X)


def covariance(model: str, q) -> np.ndarray:
    rbf = RBF(1.0, median_rho(q["X"]))
    if model == "XPGP":
        prior = XPGP(rbf, tuple(RegularizedLaplacian() for _ in q["W"]), entity=Independent(0.1))
        return np.asarray(prior.covariance(q["X"], prior.prepare(q["W"])))
    if model == "GP+entity":
        return np.asarray(XPGP(rbf, (), entity=Independent(0.1)).covariance(q["X"]))
    return np.asarray(XPGP(rbf, ()).covariance(q["X"])) + 1e-6 * np.eye(len(q["X"]))


def evaluate(mean, cov, truth, asked) -> dict:
    keep = np.ones(len(truth), bool)
    keep[asked] = False
    prob = np.asarray(predict_pairs(mean, cov, truth[keep]).prob)
    return {"err": float(pairwise_error(prob)), "auc": float(pairwise_auc(prob))}


def candidates(queries, seed):
    """Per query: ``truth`` (winner first), the candidates (orientation shuffled), the answers."""
    out = []
    for k, q in enumerate(queries):
        truth = pairs_from_grades(q["grades"])
        flip = np.random.default_rng(seed + k).uniform(size=len(truth)) < 0.5
        out.append((truth, np.where(flip[:, None], truth[:, ::-1], truth), ~flip))
    return out


def run_model(queries, model, args):
    """Both stages for every criterion, each one batched call over queries and repetitions."""
    Ks = [covariance(model, q) for q in queries]
    truths, cands, outcomes = zip(*candidates(queries, args.seed), strict=True)
    key = jax.random.PRNGKey(args.seed)
    options = dict(engine=args.engine)
    rows = [
        {"qid": q["qid"], "n": len(q["X"]), "pairs": len(t), "k10": {}, "curve": {}}
        for q, t in zip(queries, truths, strict=True)
    ]
    for criterion in CRITERIA:
        repeats = args.repeats if criterion == "random" else None
        ten = active.explore_queries(
            Ks, cands, outcomes, 10, criterion, key, repeats=repeats, **options
        )
        curves = active.explore_queries(
            Ks,
            cands,
            outcomes,
            args.k_max,
            criterion,
            key,
            repeats=repeats,
            tests=truths,
            **options,
        )
        for row, one, curve, truth in zip(rows, ten, curves, truths, strict=True):
            reps = (
                [one]
                if repeats is None
                else [jax.tree_util.tree_map(lambda x, r=r: x[r], one) for r in range(repeats)]
            )
            row["k10"][criterion] = [
                evaluate(r.mean, r.cov, truth, np.asarray(r.chosen)) for r in reps
            ]
            row["curve"][criterion] = np.asarray(curve.curve).reshape(-1, args.k_max).tolist()
    return rows


def summary_table(results) -> str:
    lines = [
        "model      query    n  pairs   err VR  err MI  err random (mean+-sd)   AUC VR  AUC random"
    ]
    for model, per_query in results.items():
        for r in per_query:
            k10 = r["k10"]
            rand = np.array([x["err"] for x in k10["random"]])
            rand_auc = np.array([x["auc"] for x in k10["random"]])
            lines.append(
                f"{model:9s} {r['qid']:>6s} {r['n']:4d} {r['pairs']:6d}  "
                f"{k10['variance_ratio'][0]['err']:.3f}   {k10['mutual_information'][0]['err']:.3f}"
                f"   {rand.mean():.3f} +- {rand.std():.3f}            "
                f"{k10['variance_ratio'][0]['auc']:.3f}   {rand_auc.mean():.3f}"
            )
        vr = [r["k10"]["variance_ratio"][0]["err"] for r in per_query]
        mi = [r["k10"]["mutual_information"][0]["err"] for r in per_query]
        rd = [np.mean([x["err"] for x in r["k10"]["random"]]) for r in per_query]
        lines.append(
            f"{model:9s} mean over {len(per_query)} queries: VR {np.mean(vr):.3f}, "
            f"MI {np.mean(mi):.3f}, random {np.mean(rd):.3f}; VR below the random mean in "
            f"{sum(a < b for a, b in zip(vr, rd, strict=True))} of {len(vr)}, MI in "
            f"{sum(a < b for a, b in zip(mi, rd, strict=True))}"
        )
    return "\n".join(lines)


def curve_table(results, k_max: int) -> str:
    """Mean error on all labelled pairs at a few ``k`` per model and criterion, and the ``k``
    from which each active criterion's mean stays below random's."""
    marks = [k for k in (1, 5, 10, 20, 30, 40, 50) if k <= k_max]
    lines = [
        "model      criterion             "
        + "".join(f"  k={k:<4d}" for k in marks)
        + "  below random from k"
    ]
    for model, per_query in results.items():
        mean = {
            c: np.mean([np.mean(r["curve"][c], axis=0) for r in per_query], axis=0)
            for c in CRITERIA
        }
        for c in CRITERIA:
            below = ""
            if c != "random":
                above = np.flatnonzero(mean[c] >= mean["random"])
                last = above[-1] + 2 if len(above) else 1
                below = str(last) if last <= k_max else "never"
            lines.append(
                f"{model:9s}  {c:20s}"
                + "".join(f"  {mean[c][k - 1]:.3f} " for k in marks)
                + f"  {below}"
            )
    return "\n".join(lines)


def plot(results, path: Path, k_max: int) -> None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return
    fig, axes = plt.subplots(1, len(results), figsize=(4.2 * len(results), 3.4), squeeze=False)
    ks = np.arange(1, k_max + 1)
    for ax, (model, per_query) in zip(axes[0], results.items(), strict=True):
        for criterion, color in zip(CRITERIA, ("C3", "C0", "C7"), strict=True):
            curves = np.array([np.mean(r["curve"][criterion], axis=0) for r in per_query])
            ax.plot(ks, curves.mean(0), color=color, label=criterion)
            if criterion == "random":
                every = np.concatenate([np.array(r["curve"]["random"]) for r in per_query])
                lo, hi = np.percentile(every, [10, 90], axis=0)
                ax.fill_between(ks, lo, hi, color=color, alpha=0.2)
        ax.set(title=model, xlabel="pairs asked k", ylabel="pair error (all labelled pairs)")
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def letor_queries(args, ohsumed: bool) -> list[dict]:
    min_pairs = args.min_pairs or (200 if ohsumed else 50)
    if ohsumed:
        fold = args.data_dir / "OHSUMED/QueryLevelNorm/Fold1"
        files = [fold / f"{part}.txt.gz" for part in ("train", "vali", "test")]
    else:
        files = [args.data_dir / f"MQ2008/S{s}.txt.gz" for s in range(1, 6)]
    queries = [q for f in files for q in load_letor(f)]
    eligible = [q for q in queries if len(pairs_from_grades(q.grades)) >= min_pairs]
    pick = np.sort(np.random.default_rng(args.seed).choice(len(eligible), args.queries, False))
    out = []
    for q in (eligible[i] for i in pick):
        W = []
        if ohsumed:
            meta = args.data_dir / "OHSUMED/Meta" / f"query-{q.qid}.xml.gz"
            W = [ohsumed_keyword_graph(meta, doc_ids=q.doc_ids, k=10)[0]]
        out.append({"qid": q.qid, "X": q.X, "grades": q.grades, "W": W})
    return out


def movielens_users(args) -> list[dict]:
    """Users with at least 60 rated movies; ``--max-movies`` of a user's movies drawn at random;
    attributes: the 27 movie features of ``accuracy_data.movie_attributes``, scaled to [0, 1]
    within the user; relations co-director and co-genre."""
    base = args.data_dir / "hetrec2011-movielens-2k"
    ratings = user_ratings(args.data_dir)
    attrs = movie_attributes(args.data_dir)
    users = [u for u in sorted(ratings) if sum(m in attrs for m in ratings[u]) >= 60]
    rng = np.random.default_rng(args.seed)
    out = []
    for u in sorted(rng.choice(users, min(args.queries, len(users)), replace=False)):
        movies = [m for m in sorted(ratings[u]) if m in attrs]
        if len(movies) > args.max_movies:
            movies = sorted(rng.choice(movies, args.max_movies, replace=False).tolist())
        W = load_hetrec_relations(base, movies, ("co_director", "co_genre"))
        out.append(
            {
                "qid": f"user{u}",
                "X": scale01(np.stack([attrs[m] for m in movies])),
                "grades": np.array([ratings[u][m] for m in movies]),
                "W": [W["co_director"], W["co_genre"]],
            }
        )
    return out


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    p.add_argument("--data-dir", type=Path, default=REPO_ROOT / ".." / "shared" / "data")
    p.add_argument("--queries", type=int, default=10)
    p.add_argument("--k-max", type=int, default=50)
    p.add_argument("--repeats", type=int, default=20)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument(
        "--collection", default="OHSUMED", choices=[*COLLECTIONS, "all"], help="all: each in turn"
    )
    p.add_argument("--min-pairs", type=int, default=None, help="default 200 (OHSUMED), 50")
    p.add_argument("--max-movies", type=int, default=100, help="MovieLens: movies per user")
    p.add_argument("--engine", default="ep", choices=list(active.ENGINES))
    p.add_argument("--models", nargs="+", default=None, help="default: all (MQ2008: no XPGP)")
    p.add_argument("--out", type=Path, default=None, help="default experiments/out/active[_...]")
    args = p.parse_args()
    if args.collection == "all":
        for collection in COLLECTIONS:
            out = args.out and args.out / collection.lower()  # --out DIR: one folder each
            run(argparse.Namespace(**{**vars(args), "collection": collection, "out": out}))
    else:
        run(args)


def run(args) -> None:
    """One collection's experiment (``args`` as :func:`main` parses them)."""
    suffix = "" if args.collection == "OHSUMED" else "_" + args.collection.lower()
    if args.engine != "ep":
        suffix += "_" + args.engine
    out = args.out or REPO_ROOT / "experiments/out" / f"active{suffix}"
    has_graph = args.collection != "MQ2008"
    models = args.models or (["XPGP", "GP+entity", "GP"] if has_graph else ["GP+entity", "GP"])
    if not has_graph and "XPGP" in models:
        raise SystemExit("MQ2008 has no relation graph: leave XPGP out")
    if args.collection == "MovieLens":
        queries = movielens_users(args)
    else:
        queries = letor_queries(args, args.collection == "OHSUMED")
    start = time.perf_counter()
    results = {}
    for model in models:
        results[model] = run_model(queries, model, args)
        print(f"{model} done ({time.perf_counter() - start:.0f} s)", flush=True)
    out.mkdir(parents=True, exist_ok=True)
    table = summary_table(results) + "\n\n" + curve_table(results, args.k_max)
    print(table)
    seconds = time.perf_counter() - start
    (out / "results.json").write_text(
        json.dumps(
            {
                "settings": {k: str(v) for k, v in vars(args).items()},
                "seconds": seconds,
                "results": results,
            }
        )
    )
    (out / "table.txt").write_text(table + "\n")
    plot(results, out / "curves.png", args.k_max)
    print(f"written {out} ({seconds:.0f} s)")


if __name__ == "__main__":
    main()
