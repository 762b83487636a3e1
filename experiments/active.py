"""Active preference exploration on OHSUMED or MQ2008 (Kersting & Xu 2009, Fig. 4): pairs chosen
actively against pairs chosen at random.

For each of ``--queries`` queries (chosen with ``--seed`` among those with at least
``--min-pairs`` labelled pairs: 200 on OHSUMED, 50 on MQ2008), every pair implied by the
relevance grades is a candidate (its orientation shuffled, the grades answering). Starting from
no known pair:

1. **Fig. 4 protocol**: ``k = 10`` pairs chosen by the paper's variance ratio, by BALD's mutual
   information, and 20 times at random; the EP posterior then predicts every remaining labelled
   pair: pairwise error and AUC per query;
2. **learning curves**: the pairwise error on all labelled pairs after each of ``k = 1 ..
   --k-max`` answers, per criterion (random: mean and 10-90% band over the repetitions).

Models (hyperparameters fixed, not learned: RBF ``rho`` from the median heuristic, unit weights,
entity scale 0.1): ``XPGP`` (RBF on the 45 features + regularized Laplacian on the keyword graph
+ entity effect), ``GP+entity`` (RBF + entity), ``GP`` (RBF alone, 1e-6 jitter).

    python experiments/active.py [--data-dir ../shared/data] [--collection OHSUMED|MQ2008]
        [--queries 10] [--k-max 50] [--repeats 20] [--models XPGP GP+entity GP] [--out DIR]

MQ2008 (LETOR 4.0) ships no relation graph, so only the two GPs run there.
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

from bayesrank import active  # noqa: E402
from bayesrank.data.graphs import ohsumed_keyword_graph  # noqa: E402
from bayesrank.data.letor import load_letor  # noqa: E402
from bayesrank.data.pairs import pairs_from_grades  # noqa: E402
from bayesrank.kernels import RBF, XPGP, Independent, RegularizedLaplacian  # noqa: E402
from bayesrank.metrics import pairwise_auc, pairwise_error  # noqa: E402
from bayesrank.predict import predict_pairs  # noqa: E402

REPO_ROOT = Path(__file__).resolve().parents[1]
CRITERIA = ("variance_ratio", "mutual_information", "random")


def median_rho(X) -> float:
    d = np.sqrt(((X[:, None] - X[None]) ** 2).sum(-1))[np.triu_indices(len(X), 1)]
    return 1.0 / float(np.median(d[d > 0]))


def covariance(model: str, q, W) -> np.ndarray:
    rbf = RBF(1.0, median_rho(q.X))
    if model == "XPGP":
        prior = XPGP(rbf, (RegularizedLaplacian(),), entity=Independent(0.1))
        spectrum = prior.relations[0].prepare(W)
        return np.asarray(prior.covariance(q.X, [spectrum]))
    if model == "GP+entity":
        return np.asarray(XPGP(rbf, (), entity=Independent(0.1)).covariance(q.X))
    return np.asarray(XPGP(rbf, ()).covariance(q.X)) + 1e-6 * np.eye(len(q.X))


def evaluate(mean, cov, truth, asked) -> dict:
    keep = np.ones(len(truth), bool)
    keep[asked] = False
    prob = np.asarray(predict_pairs(mean, cov, truth[keep]).prob)
    return {"err": float(pairwise_error(prob)), "auc": float(pairwise_auc(prob))}


def run_query(q, W, model, args, seed):
    rng = np.random.default_rng(seed)
    truth = pairs_from_grades(q.grades)  # winner first
    flip = rng.uniform(size=len(truth)) < 0.5
    candidates = np.where(flip[:, None], truth[:, ::-1], truth)
    outcome = ~flip
    K = covariance(model, q, W)
    key = jax.random.PRNGKey(seed)
    out = {"qid": q.qid, "n": len(q.X), "pairs": len(truth), "k10": {}, "curve": {}}
    for criterion in CRITERIA:
        repeats = args.repeats if criterion == "random" else None
        ten = active.explore(K, candidates, outcome, 10, criterion, key, repeats=repeats)
        rows = []
        for r in range(args.repeats if repeats else 1):
            one = jax.tree_util.tree_map(lambda x, r=r: x[r], ten) if repeats else ten
            rows.append(evaluate(one.mean, one.cov, truth, np.asarray(one.chosen)))
        out["k10"][criterion] = rows
        curve = active.explore(
            K, candidates, outcome, args.k_max, criterion, key, repeats=repeats, test=truth
        )
        out["curve"][criterion] = np.asarray(curve.curve).reshape(-1, args.k_max).tolist()
    return out


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


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    p.add_argument("--data-dir", type=Path, default=REPO_ROOT / ".." / "shared" / "data")
    p.add_argument("--queries", type=int, default=10)
    p.add_argument("--k-max", type=int, default=50)
    p.add_argument("--repeats", type=int, default=20)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--collection", default="OHSUMED", choices=["OHSUMED", "MQ2008"])
    p.add_argument("--min-pairs", type=int, default=None, help="default 200 (OHSUMED), 50")
    p.add_argument("--models", nargs="+", default=None, help="default: all (MQ2008: no XPGP)")
    p.add_argument("--out", type=Path, default=None, help="default experiments/out/active[_mq2008]")
    args = p.parse_args()
    if args.out is None:
        suffix = "" if args.collection == "OHSUMED" else "_" + args.collection.lower()
        args.out = REPO_ROOT / "experiments/out" / f"active{suffix}"
    ohsumed = args.collection == "OHSUMED"
    if args.models is None:  # MQ2008 ships no relation graph
        args.models = ["XPGP", "GP+entity", "GP"] if ohsumed else ["GP+entity", "GP"]
    if not ohsumed and "XPGP" in args.models:
        raise SystemExit("MQ2008 has no relation graph: leave XPGP out")
    min_pairs = args.min_pairs or (200 if ohsumed else 50)
    if ohsumed:
        fold = args.data_dir / "OHSUMED/QueryLevelNorm/Fold1"
        files = [fold / f"{part}.txt.gz" for part in ("train", "vali", "test")]
    else:
        files = [args.data_dir / f"MQ2008/S{s}.txt.gz" for s in range(1, 6)]
    queries = [q for f in files for q in load_letor(f)]
    eligible = [q for q in queries if len(pairs_from_grades(q.grades)) >= min_pairs]
    pick = np.sort(np.random.default_rng(args.seed).choice(len(eligible), args.queries, False))
    chosen = [eligible[i] for i in pick]
    graphs = {
        q.qid: ohsumed_keyword_graph(
            args.data_dir / "OHSUMED/Meta" / f"query-{q.qid}.xml.gz", doc_ids=q.doc_ids, k=10
        )[0]
        if ohsumed
        else None
        for q in chosen
    }
    start = time.perf_counter()
    results = {}
    for model in args.models:
        results[model] = []
        for k, q in enumerate(chosen):
            results[model].append(run_query(q, graphs[q.qid], model, args, args.seed + k))
            print(f"{model} query {q.qid} done ({time.perf_counter() - start:.0f} s)", flush=True)
    args.out.mkdir(parents=True, exist_ok=True)
    table = summary_table(results)
    print(table)
    (args.out / "results.json").write_text(
        json.dumps({"settings": {k: str(v) for k, v in vars(args).items()}, "results": results})
    )
    (args.out / "table.txt").write_text(table + "\n")
    plot(results, args.out / "curves.png", args.k_max)
    print(f"written {args.out} ({time.perf_counter() - start:.0f} s)")


if __name__ == "__main__":
    main()
