"""A whole collection in one call: OHSUMED, EP's scaling with n against the machine's floor, and
an MSLR-WEB30K-shaped simulation. Prints tables, writes JSON (and a plot, with matplotlib) to
``benchmarks/out/``; ``docs/guide/devices.md`` holds the figures and how to read them.

    python benchmarks/bench_collection.py [--parts ohsumed scaling mslr] [--data-dir ../shared/data]
        [--sizes 150,300,600,1000,2000,3000,5000] [--mslr-queries 1000] [--no-choix] [--float32]

float64 by default; ``--float32`` runs every part in float32 (on a GPU: run both, side by side).

Parts (each in its own fresh process, so that its peak resident memory is its own):

1. ``ohsumed``: all 106 OHSUMED queries (LETOR 3.0, QueryLevelNorm Fold1 train+vali+test),
   XPGP = RBF on the 45 features + a regularized Laplacian on the keyword graph (cosine
   similarity of query-term frequencies, 10 nearest neighbours, from the ``Meta`` files) + an
   independent entity effect; 200 known pairs per query (all, where fewer: one query has none),
   chosen by ``split_pairs`` with key ``fold_in(PRNGKey(0), q)``; EP and the prediction of every
   remaining pair with ``bayesrank.parallel.fit_predict``, called as the README shows. Timed: the
   first call (compilation; cold and then warm persistent cache, two fresh processes), the
   median of 3 later calls; a Python loop of ``XPGPModel(prior).fit(problem).predict_pairs(test)``
   over the queries (after a first loop that compiles); ``choix.ep_pairwise(n, pairs, 1.0,
   "probit")`` in a loop (EP of the probit model with an N(0, I) prior: the peer's own model, on
   the same pairs).
2. ``scaling``: public ``ep.fit(K, pairs)`` at n = 150 ... 5,000, m = 2n (RBF ``K``, random
   pairs), per sweep = (time of ``max_iter = k + 3`` minus ``max_iter = k``) / 3, against the
   floor: one sweep's Cholesky of ``B`` (n x n), its triangular solve with n right-hand sides and
   its ``M^T (S M)`` product (:func:`bayesrank.inference.gaussian.factor.from_root`), each timed
   alone (jitted, steady) in the same run.
3. ``mslr``: a synthetic collection with MSLR-WEB30K's shape (documents per query drawn from a
   log-normal fitted to its published mean and maximum; see ``docs/results/scaling.md`` for the
   figures and their source), 136 features, 200 known pairs and 200 pairs to predict per query
   (fewer where the query has fewer), RBF + entity effect: time per 1,000 queries, padding
   waste, peak memory, and per size group (one call each) the time per query, from which the
   projection for N hosts of this CPU is computed (``docs/results/scaling.md``).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import time
from pathlib import Path

import _harness as harness

REPO_ROOT = Path(__file__).resolve().parents[1]
OUT = REPO_ROOT / "benchmarks" / "out"

# MSLR-WEB30K's shape (docs/guide/devices.md gives the sources)
MSLR_QUERIES = 31_531
MSLR_MEAN_DOCS = 119.6
MSLR_MAX_DOCS = 1_251


def setup_jax(cache_dir: str | None):
    """float64 unless ``--float32``; the compilation cache in ``cache_dir`` (none without)."""
    return harness.setup_jax(x64=os.environ.get("BENCH_FLOAT32") != "1", cache=cache_dir or False)


# --- part 1: OHSUMED ---------------------------------------------------------------------------


def ohsumed_problems(data_dir: Path):
    import jax

    from bayesrank.data.graphs import ohsumed_keyword_graph
    from bayesrank.data.letor import load_letor
    from bayesrank.data.pairs import pairs_from_grades, split_pairs
    from bayesrank.data.problem import PreferenceProblem

    fold = data_dir / "OHSUMED/QueryLevelNorm/Fold1"
    queries = [q for part in ("train", "vali", "test") for q in load_letor(fold / f"{part}.txt.gz")]
    problems, tests = [], []
    key = jax.random.PRNGKey(0)
    for k, q in enumerate(queries):
        meta = data_dir / "OHSUMED/Meta" / f"query-{q.qid}.xml.gz"
        W, _ = ohsumed_keyword_graph(meta, doc_ids=q.doc_ids, k=10)
        pairs = pairs_from_grades(q.grades)
        known, rest = split_pairs(jax.random.fold_in(key, k), pairs, min(200, len(pairs)))
        problems.append(PreferenceProblem.create(known, X=q.X, relations=[W]))
        tests.append(rest)
    return problems, tests


def worker_ohsumed(args) -> dict:
    jax = setup_jax(args.cache_dir)
    import numpy as np

    from bayesrank import XPGPModel, parallel
    from bayesrank.kernels import RBF, XPGP, Independent, RegularizedLaplacian

    problems, tests = ohsumed_problems(Path(args.data_dir))
    prior = XPGP(RBF(), (RegularizedLaplacian(),), entity=Independent(0.1))
    first, result = harness.timed(parallel.fit_predict, prior, problems, tests)
    steady, result = harness.repeat(lambda: parallel.fit_predict(prior, problems, tests), 3)
    out = {
        "queries": len(problems),
        "entities": [int(p.n) for p in problems],
        "known_pairs": int(sum(len(p.pairs) for p in problems)),
        "predicted_pairs": int(sum(len(t) for t in tests)),
        "plan": result.plan.describe(),
        "first_call_s": first,
        "steady_s": statistics.median(steady),
        "steady_all_s": steady,
        "sweeps": int(result.n_iter.sum()),
        "converged": int(result.converged.sum()),
        "heldout_pair_error": float(
            np.mean([np.mean(p.prob < 0.5) for p in result.predictions if len(p.prob)])
        ),
        "peak_rss_mb_after_collection": harness.peak_rss_mb(),
    }
    if args.loop:
        model = XPGPModel(prior)

        def loop():
            preds = [model.fit(p).predict_pairs(t) for p, t in zip(problems, tests, strict=True)]
            jax.block_until_ready(preds)
            return preds

        loops, preds = harness.repeat(loop, 2)  # the first compiles one program per size bucket
        out["loop_first_s"], out["loop_s"] = loops
        out["loop_max_prob_diff"] = float(
            max(
                np.max(np.abs(np.asarray(a.prob) - b.prob), initial=0.0)
                for a, b in zip(preds, result.predictions, strict=True)
            )
        )
    if args.choix:
        import choix

        # choix's own model through the collection: prior N(0, I), no attributes or graph
        from bayesrank.data.problem import PreferenceProblem

        plain = [PreferenceProblem.create(p.pairs, n=p.n) for p in problems]
        iid = XPGP(None, (), entity=Independent(1.0))
        parallel.fit_predict(iid, plain, tests)
        out["collection_iid_prior_s"], _ = harness.timed(parallel.fit_predict, iid, plain, tests)

        def choix_loop():
            for p in problems:
                if len(p.pairs):
                    choix.ep_pairwise(p.n, [tuple(r) for r in p.pairs], 1.0, model="probit")

        out["choix_loop_s"], _ = harness.timed(choix_loop)
    out["peak_rss_mb"] = harness.peak_rss_mb()
    return out


# --- part 2: EP scaling against the floor --------------------------------------------------------


def worker_scaling(args) -> dict:
    jax = setup_jax(args.cache_dir)
    import warnings

    import jax.numpy as jnp
    import numpy as np

    from bayesrank.inference import ep
    from bayesrank.kernels import RBF

    n = args.n
    rng = np.random.default_rng(n)
    X = rng.normal(size=(n, 5))
    K = np.asarray(RBF(1.0, 1.0 / np.sqrt(5))(X)) + 1e-6 * np.eye(n)
    i = rng.integers(0, n, 2 * n)
    j = (i + rng.integers(1, n, 2 * n)) % n
    pairs = np.c_[i, j]
    k = args.k

    def fit(max_iter):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            seconds, post = harness.timed(
                lambda: jax.block_until_ready(
                    ep.fit(K, pairs, max_iter=max_iter, tol=1e-30, rtol=0.0)
                )
            )
            return seconds, int(post.n_iter)

    first, _ = fit(1)
    t_short, s_short = fit(k)
    t_long, s_long = fit(k + 3)
    per_sweep = (t_long - t_short) / (s_long - s_short)

    # the floor: one sweep's n^3 operations, each jitted alone, steady
    A = jnp.asarray(K)
    B = A @ A.T / n + jnp.eye(n)
    L = jnp.linalg.cholesky(B)
    ops = {
        "cholesky": jax.jit(lambda B: jax.lax.linalg.cholesky(B, symmetrize_input=False)),
        "triangular_solve": jax.jit(
            lambda L, M: jax.lax.linalg.triangular_solve(
                L, M, left_side=False, lower=True, transpose_a=True
            )
        ),
        "product": jax.jit(lambda M, SM: M.T @ SM),
    }
    inputs = {"cholesky": (B,), "triangular_solve": (L, A), "product": (A, B)}
    floor = {}
    for name, op in ops.items():
        call = lambda op=op, args=inputs[name]: jax.block_until_ready(op(*args))  # noqa: E731
        call()  # compiles
        floor[name] = min(harness.repeat(call, 3 if n >= 2000 else 7)[0])
    total = sum(floor.values())
    return {
        "n": n,
        "m": 2 * n,
        "first_call_s": first,
        "per_sweep_s": per_sweep,
        "floor_s": total,
        "floor_parts_s": floor,
        "multiple_of_floor": per_sweep / total,
        "gflops_product": 2 * n**3 / floor["product"] / 1e9,
        "peak_rss_mb": harness.peak_rss_mb(),
    }


# --- part 3: an MSLR-WEB30K-shaped collection ----------------------------------------------------


def mslr_sizes(count: int, seed: int = 0):
    """Documents per query: log-normal with sigma 0.75 and the mean of MSLR-WEB30K, capped at its
    maximum (a shape assumption: docs/guide/devices.md)."""
    import numpy as np

    sigma = 0.75
    mu = np.log(MSLR_MEAN_DOCS) - sigma**2 / 2
    n = np.random.default_rng(seed).lognormal(mu, sigma, count)
    return np.clip(np.round(n), 2, MSLR_MAX_DOCS).astype(int)


def mslr_problems(count: int, seed: int = 0):
    import numpy as np

    from bayesrank.data.problem import PreferenceProblem

    rng = np.random.default_rng(seed + 1)
    problems, tests = [], []
    for n in mslr_sizes(count, seed):
        X = rng.normal(size=(n, 136))
        u = X[:, :5].sum(1) + rng.normal(size=n)
        m = min(400, n * (n - 1) // 2)
        i = rng.integers(0, n, m)
        j = (i + rng.integers(1, n, m)) % n
        pairs = np.where((u[i] > u[j])[:, None], np.c_[i, j], np.c_[j, i])
        known = min(200, m // 2)
        problems.append(PreferenceProblem.create(pairs[:known], X=X))
        tests.append(pairs[known:])
    return problems, tests


def worker_mslr(args) -> dict:
    setup_jax(args.cache_dir)
    import numpy as np

    from bayesrank import parallel
    from bayesrank.kernels import RBF, XPGP, Independent

    problems, tests = mslr_problems(args.mslr_queries)
    prior = XPGP(RBF(1.0, 1.0 / np.sqrt(136)), (), entity=Independent(0.1))
    first, result = harness.timed(parallel.fit_predict, prior, problems, tests)
    steady, result = harness.timed(parallel.fit_predict, prior, problems, tests)
    plan = result.plan
    groups = []
    for g in plan.groups:  # each group alone, for the projection
        members = [int(q) for q in g.queries]
        sub_p = [problems[q] for q in members]
        sub_t = [tests[q] for q in members]
        parallel.fit_predict(prior, sub_p, sub_t)
        seconds, _ = harness.timed(parallel.fit_predict, prior, sub_p, sub_t)
        groups.append({"t": g.t, "n": g.n, "queries": len(members), "s": seconds})
    return {
        "queries": len(problems),
        "docs_mean": float(np.mean([p.n for p in problems])),
        "docs_max": int(max(p.n for p in problems)),
        "docs_mean_full_draw": float(mslr_sizes(MSLR_QUERIES).mean()),
        "first_call_s": first,
        "steady_s": steady,
        "per_1000_queries_s": steady / len(problems) * 1000,
        "plan": plan.describe(),
        "padding_waste": plan.padding_waste(),
        "groups": groups,
        "peak_rss_mb": harness.peak_rss_mb(),
    }


def plot_scaling(rows, path: Path) -> None:
    """EP's time per sweep over the floor against n (skipped without matplotlib)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib is not installed: no plot")
        return
    fig, (left, right) = plt.subplots(1, 2, figsize=(9, 3.4))
    n = [r["n"] for r in rows]
    left.loglog(n, [r["per_sweep_s"] for r in rows], "o-", label="EP sweep (ep.fit)")
    left.loglog(n, [r["floor_s"] for r in rows], "s--", label="floor")
    left.set(xlabel="n (m = 2n)", ylabel="seconds")
    left.legend()
    right.plot(n, [r["multiple_of_floor"] for r in rows], "o-")
    right.axhline(3, color="grey", ls="--", label="goal (3x, n >= 1000)")
    right.set(xscale="log", xlabel="n (m = 2n)", ylabel="EP sweep / floor", ylim=(0, None))
    right.legend()
    for ax in (left, right):
        ax.set_xticks(n, [str(x) for x in n], rotation=45)
        ax.minorticks_off()
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    print(f"written {path}")


def project_hosts(groups, hosts_list=(1, 8, 64)) -> dict:
    """Seconds for all MSLR_QUERIES queries on N devices like this CPU: each query of a full
    draw costs the measured time per query of its size (interpolated in log-log over the groups'
    entity counts ``n``; EP's ``t`` is at most 400 here, set by the 200 known pairs), and the plan
    deals each size group over the N devices; the answer is the most loaded device's total."""
    import numpy as np

    from bayesrank.parallel.plan import make_plan

    n_meas = np.array([g["n"] for g in groups], float)
    cost = np.array([g["s"] / g["queries"] for g in groups])
    order = np.argsort(n_meas)
    n = mslr_sizes(MSLR_QUERIES)
    known = np.minimum(200, np.minimum(400, n * (n - 1) // 2) // 2)
    t = np.maximum(2, np.round(n * (1 - (1 - 1 / n) ** (2 * known)))).astype(int)  # E[touched]
    per_query = np.exp(np.interp(np.log(n), np.log(n_meas[order]), np.log(cost[order])))
    sizes = np.c_[n, known, np.full_like(n, 200), t]
    out = {}
    for hosts in hosts_list:
        plan = make_plan(sizes, np.zeros(len(n), int), 1, hosts, "map")
        load = np.zeros(hosts)
        for g in plan.groups:
            np.add.at(load, g.rows // g.rows_per_device, per_query[g.queries])
        out[str(hosts)] = {"seconds": float(load.max()), "balance": float(load.max() / load.mean())}
    return out


# --- driver --------------------------------------------------------------------------------------


def run_worker(part: str, extra: list[str]) -> dict:
    try:
        return harness.spawn(__file__, "--worker", part, *extra)
    except harness.WorkerError as err:
        raise SystemExit(f"{part} worker failed:\n{err}") from None


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    p.add_argument("--parts", nargs="+", default=["ohsumed", "scaling", "mslr"])
    p.add_argument("--data-dir", default=str(REPO_ROOT / ".." / "shared" / "data"))
    p.add_argument("--sizes", default="150,300,600,1000,2000,3000,5000")
    p.add_argument("--mslr-queries", type=int, default=1000)
    p.add_argument("--no-choix", dest="choix", action="store_false")
    p.add_argument("--no-loop", dest="loop", action="store_false")
    p.add_argument("--float32", action="store_true", help="every part in float32")
    p.add_argument("--worker", help=argparse.SUPPRESS)
    p.add_argument("--cache-dir", help=argparse.SUPPRESS)
    p.add_argument("--n", type=int, help=argparse.SUPPRESS)
    p.add_argument("--k", type=int, default=3, help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.float32:
        os.environ["BENCH_FLOAT32"] = "1"  # the workers inherit it
    if args.worker:
        fn = {"ohsumed": worker_ohsumed, "scaling": worker_scaling, "mslr": worker_mslr}
        harness.emit(fn[args.worker](args))
        return

    import jax

    path = OUT / ("bench_collection_float32.json" if args.float32 else "bench_collection.json")
    report = json.loads(path.read_text()) if path.exists() else {}  # other parts' last runs
    report |= {
        "machine": {
            "platform": platform.platform(),
            "cpus": os.cpu_count(),
            "jax": jax.__version__,
            "backend": jax.default_backend(),
        },
        "date": time.strftime("%Y-%m-%d"),
    }
    common = ["--data-dir", args.data_dir, "--mslr-queries", str(args.mslr_queries)]
    common += [] if args.choix else ["--no-choix"]
    common += [] if args.loop else ["--no-loop"]
    if "ohsumed" in args.parts:
        runs = {}  # the warm process times the collection only
        for state, cache in harness.cold_and_warm():
            skip = ["--no-choix", "--no-loop"] if state == "warm" else []
            runs[state] = run_worker("ohsumed", [*common, "--cache-dir", cache, *skip])
        cold, warm = runs["cold"], runs["warm"]
        row = dict(cold)
        row["compile_cold_s"] = cold["first_call_s"] - cold["steady_s"]
        row["compile_warm_cache_s"] = warm["first_call_s"] - warm["steady_s"]
        row["steady_warm_process_s"] = warm["steady_s"]
        if "loop_s" in row:
            row["loop_over_collection"] = row["loop_s"] / row["steady_s"]
        if "choix_loop_s" in row:
            row["choix_over_collection"] = row["choix_loop_s"] / row["steady_s"]
            row["choix_over_collection_same_model"] = (
                row["choix_loop_s"] / row["collection_iid_prior_s"]
            )
        report["ohsumed"] = row
        print(f"OHSUMED: {row['plan']}")
        print(f"  fit_predict after compilation  {row['steady_s']:.2f} s (goal < 2 s)")
        print(
            f"  compile: cold {row['compile_cold_s']:.1f} s,",
            f"warm cache {row['compile_warm_cache_s']:.1f} s",
        )
        print(f"  peak RSS {row['peak_rss_mb']:.0f} MB")
        if "loop_s" in row:
            print(
                f"  loop of XPGPModel.fit: {row['loop_s']:.2f} s",
                f"({row['loop_over_collection']:.1f}x), first loop {row['loop_first_s']:.1f} s",
            )
        if "choix_loop_s" in row:
            print(
                f"  choix loop: {row['choix_loop_s']:.1f} s",
                f"({row['choix_over_collection']:.0f}x; goal >= 50x); on choix's own model",
                f"(prior N(0, I)) the collection takes {row['collection_iid_prior_s']:.2f} s",
                f"({row['choix_over_collection_same_model']:.0f}x)",
            )
    if "scaling" in args.parts:
        rows = []
        print("EP scaling:   n    per sweep    floor   multiple (goal <= 3 from n = 1000)")
        for n in [int(s) for s in args.sizes.split(",")]:
            r = run_worker("scaling", ["--n", str(n), "--k", "2" if n >= 2000 else "3"])
            rows.append(r)
            print(
                f"          {n:5d}  {r['per_sweep_s'] * 1e3:9.1f} ms",
                f"{r['floor_s'] * 1e3:8.1f} ms  {r['multiple_of_floor']:5.2f}",
                flush=True,
            )
        report["scaling"] = rows
        plot_scaling(rows, path.with_name(path.stem + "_scaling.png"))
    if "plot" in args.parts:  # again from the last scaling run's JSON
        plot_scaling(report["scaling"], path.with_name(path.stem + "_scaling.png"))
    if "mslr" in args.parts:
        r = run_worker("mslr", common)
        r["projection_hosts"] = project_hosts(r["groups"])
        report["mslr"] = r
        print(f"MSLR-shaped: {r['plan']}")
        print(
            f"  {r['per_1000_queries_s']:.1f} s per 1,000 queries after compilation",
            f"(first call {r['first_call_s']:.1f} s), peak RSS {r['peak_rss_mb']:.0f} MB",
        )
        for hosts, proj in r["projection_hosts"].items():
            print(
                f"  projected, all {MSLR_QUERIES} queries on {hosts} device(s) like this CPU:",
                f"{proj['seconds'] / 60:.2f} min (busiest device / mean {proj['balance']:.2f})",
            )
    print(f"written {harness.write_json(path, report, indent=1)}")


if __name__ == "__main__":
    main()
