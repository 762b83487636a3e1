"""EM-EP hyperparameter learning on real OHSUMED queries: XPGP (attributes + keyword graph) vs PGP.

The setting of Kersting & Xu (2009), Sec. 6: for each of a few randomly chosen OHSUMED queries,
a random subset of the preference pairs implied by the relevance grades is *known* (e.g. 100 or
200 pairs) and the rest are held out. The hyperparameters are fitted with EM-EP on the known
pairs (one ``theta`` shared by all queries, the usual LETOR setting; optionally one per query),
and the held-out pairs are predicted transductively from the EP posterior (Eq. 13-14).

Models (all with an independent per-entity effect, which keeps duplicate documents apart):

* ``PGP``: attributes only, ``RBF`` on the 45 LETOR features (QueryLevelNorm);
* ``XPGP``: attributes + a regularized-Laplacian kernel on the keyword graph (cosine similarity
  of the query-term frequencies in title + abstract, from the LETOR ``Meta`` files, kNN
  sparsified; documents without any query term are isolated);
* ``placebo``: XPGP on the same graph with the documents shuffled (``permute_graph``): same
  degrees and weights, no information. If it does as well as ``XPGP``, the graph is not helping.

Reported per known-pairs setting and model: held-out pair error rate ERR, AUC, mean held-out
log-likelihood ``mean log P(truth)`` (mean +- sd over queries), fit time (compilation included),
final EP log evidence (summed over queries), and the learned hyperparameters (mixing weights,
RBF ``rho``, Laplacian ``iota``, entity scale). Everything, with the EM traces, goes to
``<out>/results.json``; with matplotlib installed, the evidence traces also to
``<out>/traces.png``.

Usage::

    python experiments/learn_ohsumed.py [--data-dir ../shared/data] [--queries 10|all]
        [--known 100 200] [--seed 0] [--n-iter 20] [--m-steps 5] [--entity-init 0.1]
        [--k 10] [--theta shared per_query]
        [--out experiments/out/learn_ohsumed]
"""

from __future__ import annotations

import argparse
import json
import math
import time
from pathlib import Path

import jax

jax.config.update("jax_enable_x64", True)
from bayesrank.runtime import enable_compilation_cache, pin_to_one_cpu  # noqa: E402

pin_to_one_cpu()  # before the first computation (runtime.pin_to_one_cpu; --all-cpus: not)

enable_compilation_cache()  # compiled programs kept on disk between runs

import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from jax.scipy.special import log_ndtr  # noqa: E402

from bayesrank.data.graphs import ohsumed_keyword_graph, permute_graph  # noqa: E402
from bayesrank.data.letor import load_letor  # noqa: E402
from bayesrank.data.pairs import pairs_from_grades, split_pairs  # noqa: E402
from bayesrank.data.problem import PreferenceProblem  # noqa: E402
from bayesrank.kernels import RBF, XPGP, Independent, RegularizedLaplacian  # noqa: E402
from bayesrank.learning import fit_hyperparameters  # noqa: E402
from bayesrank.metrics import pairwise_auc, pairwise_error  # noqa: E402
from bayesrank.predict import predict_pairs  # noqa: E402

REPO_ROOT = Path(__file__).resolve().parents[1]
FOLD = Path("OHSUMED/QueryLevelNorm/Fold1")
MODELS = ("PGP", "XPGP", "placebo")


# --- data -----------------------------------------------------------------------------------------


def load_queries(data_dir: Path) -> list:
    """All OHSUMED queries (Fold1's train, vali and test files hold the 106 queries once each)."""
    queries = []
    for part in ("train", "vali", "test"):
        queries += load_letor(data_dir / FOLD / f"{part}.txt.gz")
    return queries


def select_queries(queries, spec: str, need_pairs: int, seed: int) -> tuple[list, list[str]]:
    """Queries with at least ``need_pairs`` pairs; ``spec`` = a count (random, seeded) or 'all'."""
    eligible = [q for q in queries if len(pairs_from_grades(q.grades)) >= need_pairs]
    skipped = [q.qid for q in queries if q not in eligible]
    if spec == "all":
        return eligible, skipped
    count = int(spec)
    if count > len(eligible):
        raise SystemExit(f"--queries {count}: only {len(eligible)} queries are eligible")
    chosen = np.sort(np.random.default_rng(seed).choice(len(eligible), count, replace=False))
    return [eligible[i] for i in chosen], skipped


def keyword_graph(data_dir: Path, query, k: int | None) -> np.ndarray:
    meta = data_dir / "OHSUMED" / "Meta" / f"query-{query.qid}.xml.gz"
    W, _ = ohsumed_keyword_graph(meta, doc_ids=query.doc_ids, stream=3, k=k)
    return W


def graph_stats(W: np.ndarray) -> dict:
    degree = np.count_nonzero(W, axis=1)
    return {
        "edges": int(np.count_nonzero(np.triu(W, k=1))),
        "isolated": int((degree == 0).sum()),
        "mean_degree": float(degree.mean()),
    }


def duplicate_docs(X: np.ndarray) -> int:
    """Documents whose feature vector equals an earlier document's."""
    return int(len(X) - len(np.unique(X, axis=0)))


# --- models ---------------------------------------------------------------------------------------


def make_prior(name: str, entity_init: float = 0.1) -> XPGP:
    entity = Independent(entity_init)
    if name == "PGP":
        return XPGP(RBF(), (), entity=entity)
    return XPGP(RBF(), (RegularizedLaplacian(),), entity=entity)


def hyperparameters(prior: XPGP) -> dict:
    """Learned values (arrays of shape () for a shared fit, (Q,) for per-query fits)."""
    weights = np.asarray(prior.weights)
    out = {
        "w_attr": weights[..., 0],
        "rho": np.asarray(prior.attribute.rho),
        "entity_scale": np.asarray(prior.entity.scale),
    }
    if prior.relations:
        out["w_rel"] = weights[..., 1]
        out["iota"] = np.asarray(prior.relations[0].iota)
    return out


# --- evaluation -----------------------------------------------------------------------------------


def evaluate(mean, cov, held_out) -> dict:
    """ERR, AUC and mean log P(truth) over the held-out pairs of one query."""
    pred = predict_pairs(mean, cov, jnp.asarray(held_out))
    log_prob = log_ndtr(pred.delta_mean / jnp.sqrt(1.0 + pred.delta_var))  # = log(pred.prob)
    return {
        "err": float(pairwise_error(pred.prob)),
        "auc": float(pairwise_auc(pred.prob)),
        "loglik": float(jnp.mean(log_prob)),
    }


def summarize(values) -> dict:
    values = np.asarray(values, dtype=float)
    return {"mean": float(values.mean()), "sd": float(values.std(ddof=1)) if len(values) > 1 else 0}


def to_json(x):
    if isinstance(x, dict):
        return {k: to_json(v) for k, v in x.items()}
    if isinstance(x, list | tuple):
        return [to_json(v) for v in x]
    if isinstance(x, np.ndarray | jax.Array):
        return to_json(np.asarray(x).tolist())
    if isinstance(x, float) and not math.isfinite(x):
        return str(x)
    if isinstance(x, np.generic):
        return x.item()
    return x


_COMPILED: set = set()


def run_fit(name, problems, splits, n_iter, m_steps, per_query, entity_init=0.1) -> dict:
    """Fit one model (shared or per-query theta) and evaluate every query's held-out pairs.

    The first fit of each model structure and problem shape is preceded by a one-iteration
    warm-up fit, so that ``fit_seconds`` is run time and ``warmup_seconds`` holds compilation.
    """
    signature = (
        name == "PGP",
        per_query,
        max(p.n for p in problems),
        max(len(p.pairs) for p in problems),
        len(problems),
    )
    warmup = 0.0
    if signature not in _COMPILED:
        start = time.perf_counter()
        fit = fit_hyperparameters(
            make_prior(name, entity_init),
            problems,
            n_iter=1,
            m_steps=m_steps,
            per_query=per_query,
        )
        jax.block_until_ready(fit.posteriors.mean)
        warmup = time.perf_counter() - start
        _COMPILED.add(signature)
    start = time.perf_counter()
    fit = fit_hyperparameters(
        make_prior(name, entity_init),
        problems,
        method="em",
        n_iter=n_iter,
        m_steps=m_steps,
        per_query=per_query,
    )
    jax.block_until_ready(fit.posteriors.mean)
    seconds = time.perf_counter() - start
    post = fit.posteriors
    mean, cov, evidence = post.mean, post.cov, post.log_evidence
    if per_query:  # leading axes (query, 1)
        mean, cov, evidence = mean[:, 0], cov[:, 0], evidence[:, 0]
    rows = []
    for b, (problem, (_, held_out)) in enumerate(zip(problems, splits, strict=True)):
        n = problem.n
        rows.append(evaluate(mean[b, :n], cov[b, :n, :n], held_out))
    trace = fit.trace
    m_step_gain = np.asarray(trace.objective) - np.asarray(trace.objective_before)
    log_ev = np.asarray(trace.log_evidence)
    return {
        "per_query": rows,
        "err": summarize([r["err"] for r in rows]),
        "auc": summarize([r["auc"] for r in rows]),
        "loglik": summarize([r["loglik"] for r in rows]),
        "fit_seconds": seconds,
        "warmup_seconds": warmup,
        "final_log_evidence": float(np.sum(evidence)),
        "final_log_evidence_per_query": np.asarray(evidence),
        "hyperparameters": hyperparameters(fit.prior),
        "trace": {
            "log_evidence": log_ev,
            "objective": np.asarray(trace.objective),
            "objective_before": np.asarray(trace.objective_before),
            "ep_iterations": np.asarray(trace.ep_iterations),
            "ep_converged": np.asarray(trace.ep_converged),
            "params": hyperparameters(trace.params),
        },
        "diagnostics": {
            "m_step_decreases": int(np.sum(m_step_gain < -1e-6 * (1 + np.abs(trace.objective)))),
            "evidence_decreases": int(np.sum(np.diff(log_ev, axis=-1) < -1e-6)),
            "ep_not_converged": int(np.sum(~np.asarray(trace.ep_converged))),
            "final_ep_not_converged": int(np.sum(~np.asarray(post.converged))),
            "non_finite": bool(
                not (np.all(np.isfinite(log_ev)) and np.all(np.isfinite(np.asarray(mean))))
            ),
            "n_skipped": int(np.sum(post.n_skipped)),
            "n_uninformative": int(np.sum(post.n_uninformative)),
        },
    }


# --- reporting ------------------------------------------------------------------------------------


def fmt(stat: dict, digits: int = 3) -> str:
    return f"{stat['mean']:.{digits}f}±{stat['sd']:.{digits}f}"


def fmt_hyper(h: dict, key: str) -> str:
    if key not in h:
        return "-"
    v = np.asarray(h[key])
    if v.ndim == 0:
        return f"{float(v):.3g}"
    return f"{np.median(v):.3g}[{v.min():.2g},{v.max():.2g}]"


def paired_test(a, b) -> str:
    """Wins of ``b`` over ``a`` (lower is better) and a Wilcoxon signed-rank p-value if scipy."""
    a, b = np.asarray(a), np.asarray(b)
    text = f"{int(np.sum(b < a))}/{len(a)} lower, {int(np.sum(b > a))} higher"
    try:
        from scipy.stats import wilcoxon

        if np.any(a != b) and len(a) > 1:
            text += f", Wilcoxon p={wilcoxon(a, b).pvalue:.3g}"
    except ImportError:
        pass
    return text


def print_table(results: dict, modes: list[str]) -> None:
    header = (
        f"{'model':<8} {'ERR':>13} {'AUC':>13} {'held-out LL':>15} {'time s':>7} "
        f"{'log Z':>10} {'w_attr':>16} {'w_rel':>16} {'rho':>16} {'iota':>16} {'entity s':>16}"
    )
    for setting, by_mode in results.items():
        for mode in modes:
            block = by_mode[mode]
            print(f"\n== {setting} known pairs, {mode} theta ==")
            print(header)
            for name in MODELS:
                r = block[name]
                h = r["hyperparameters"]
                print(
                    f"{name:<8} {fmt(r['err']):>13} {fmt(r['auc']):>13} {fmt(r['loglik']):>15} "
                    f"{r['fit_seconds']:>7.1f} {r['final_log_evidence']:>10.1f} "
                    + " ".join(
                        f"{fmt_hyper(h, k):>16}"
                        for k in ("w_attr", "w_rel", "rho", "iota", "entity_scale")
                    )
                )
            errs = {name: [q["err"] for q in block[name]["per_query"]] for name in MODELS}
            print(f"ERR XPGP vs PGP:     {paired_test(errs['PGP'], errs['XPGP'])}")
            print(f"ERR XPGP vs placebo: {paired_test(errs['placebo'], errs['XPGP'])}")
            odd = {
                name: {k: v for k, v in block[name]["diagnostics"].items() if v} for name in MODELS
            }
            odd = {k: v for k, v in odd.items() if v}
            if odd:
                print(f"diagnostics: {odd}")


def save_plot(results: dict, modes: list[str], path: Path) -> bool:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    settings = list(results)
    fig, axes = plt.subplots(
        len(modes), len(settings), figsize=(5 * len(settings), 3.5 * len(modes)), squeeze=False
    )
    for row, mode in enumerate(modes):
        for col, setting in enumerate(settings):
            ax = axes[row, col]
            for name in MODELS:
                trace = np.asarray(results[setting][mode][name]["trace"]["log_evidence"])
                ax.plot(
                    np.arange(1, trace.shape[-1] + 1),
                    trace.reshape(-1, trace.shape[-1]).sum(0),
                    label=name,
                )
            ax.set_title(f"{setting} known pairs, {mode} theta")
            ax.set_xlabel("EM iteration")
            ax.set_ylabel("EP log evidence (sum over queries)")
            ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    return True


# --- main -----------------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", type=Path, default=REPO_ROOT / ".." / "shared" / "data")
    parser.add_argument("--queries", default="10", help="number of random queries, or 'all'")
    parser.add_argument("--known", type=int, nargs="+", default=[100, 200])
    parser.add_argument(
        "--min-held-out", type=int, default=100, help="held-out pairs a query needs to be eligible"
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--n-iter", type=int, default=20, help="EM iterations")
    parser.add_argument(
        "--m-steps",
        type=int,
        default=5,
        help="L-BFGS steps per M-step (5 gives the same EM progress as 20 at a third of the time)",
    )
    parser.add_argument(
        "--entity-init",
        type=float,
        default=0.1,
        help="initial scale of the per-document effect (EM barely moves it from 0.1; try 1.0)",
    )
    parser.add_argument("--k", type=int, default=10, help="kNN sparsification (0: complete graph)")
    parser.add_argument(
        "--theta",
        nargs="+",
        choices=["shared", "per_query"],
        default=["shared"],
        help="one theta shared by all queries and/or one theta per query",
    )
    parser.add_argument(
        "--all-cpus",
        action="store_true",
        help="do not pin the process to one CPU (risks the jaxlib 0.10 deadlock, see the top)",
    )
    parser.add_argument("--out", type=Path, default=REPO_ROOT / "experiments/out/learn_ohsumed")
    args = parser.parse_args(argv)
    data_dir = args.data_dir.resolve()
    k = args.k or None
    modes = list(dict.fromkeys(args.theta))
    wall = time.perf_counter()

    queries, skipped = select_queries(
        load_queries(data_dir), args.queries, max(args.known) + args.min_held_out, args.seed
    )
    print(f"data: {data_dir / FOLD}")
    print(
        f"{len(queries)} queries (seed {args.seed}); {len(skipped)} ineligible "
        f"(< {max(args.known) + args.min_held_out} pairs): {' '.join(skipped)}"
    )
    key = jax.random.key(args.seed)
    info, graphs, placebos, all_pairs = [], [], [], []
    for q in queries:
        W = keyword_graph(data_dir, q, k)
        W_perm, _ = permute_graph(jax.random.fold_in(key, 10_000 + int(q.qid)), W)
        pairs = pairs_from_grades(q.grades)
        graphs.append(W)
        placebos.append(W_perm)
        all_pairs.append(pairs)
        info.append(
            {
                "qid": q.qid,
                "n_docs": q.n_docs,
                "n_pairs": len(pairs),
                "grades": np.bincount(q.grades, minlength=3),
                "duplicate_docs": duplicate_docs(q.X),
                "graph": graph_stats(W),
            }
        )
        g = info[-1]["graph"]
        print(
            f"  q{q.qid:>3}: n={q.n_docs:>3} pairs={len(pairs):>5} grades={info[-1]['grades']} "
            f"dup={info[-1]['duplicate_docs']:>2} graph edges={g['edges']:>4} "
            f"isolated={g['isolated']:>3}"
        )

    results: dict = {}
    for n_known in args.known:
        splits = [
            split_pairs(
                jax.random.fold_in(jax.random.fold_in(key, n_known), int(q.qid)), p, n_known
            )
            for q, p in zip(queries, all_pairs, strict=True)
        ]
        relations = {
            "PGP": [()] * len(queries),
            "XPGP": [[W] for W in graphs],
            "placebo": [[W] for W in placebos],
        }
        results[n_known] = {}
        for mode in modes:
            results[n_known][mode] = {}
            for name in MODELS:
                problems = [
                    PreferenceProblem.create(known, X=q.X, relations=rel)
                    for q, (known, _), rel in zip(queries, splits, relations[name], strict=True)
                ]
                r = run_fit(
                    name,
                    problems,
                    splits,
                    args.n_iter,
                    args.m_steps,
                    mode == "per_query",
                    args.entity_init,
                )
                results[n_known][mode][name] = r
                print(
                    f"[{n_known} known, {mode}] {name:<7} ERR {fmt(r['err'])} "
                    f"AUC {fmt(r['auc'])} ({r['fit_seconds']:.1f} s)",
                    flush=True,
                )

    print(
        f"\nOHSUMED Fold1 QueryLevelNorm, {len(queries)} queries, EM-EP {args.n_iter} "
        f"iterations ({args.m_steps} L-BFGS steps per M-step), keyword graph k={k}, "
        f"entity effect initialised at {args.entity_init}.\n"
        "mean±sd over queries; time = fit run time (compilation excluded); log Z = final EP log "
        "evidence summed over queries; per-query hyperparameters as median[min,max]"
    )
    print_table(results, modes)
    seconds = time.perf_counter() - wall
    print(f"\ntotal {seconds:.0f} s")

    args.out.mkdir(parents=True, exist_ok=True)
    payload = {
        "config": {**{k_: str(v) for k_, v in vars(args).items()}, "modes": modes},
        "queries": info,
        "results": {str(s): v for s, v in results.items()},
        "total_seconds": seconds,
    }
    (args.out / "results.json").write_text(json.dumps(to_json(payload), indent=1))
    print(f"wrote {args.out / 'results.json'}")
    if save_plot(results, modes, args.out / "traces.png"):
        print(f"wrote {args.out / 'traces.png'}")


if __name__ == "__main__":
    main()
