"""The public façades as a user meets them: repeated calls, new splits, a fresh process.

    python benchmarks/bench_facades.py [--repeats 7] [--out benchmarks/out/bench_facades.json]

Everything is called exactly as the README shows, on host (NumPy) inputs, with no ``jax.jit`` of
the benchmark's own: the façades run their own cached compiled programs.

1. ``ep.fit(K, pairs)`` at ``n = 300``, ``m = 600`` against ``choix.ep_pairwise`` (the ``bench``
   extra), side by side in one process: the same probit model with prior ``N(0, I)`` (``K``
   given as its diagonal ``(n,)``; choix's ``alpha = 1``), the same pairs; and, for reference,
   ``ep.fit`` with a dense RBF ``K``. First call (compilation included) and the median of the
   repeated calls. Goal: repeated ``ep.fit`` at least 10x faster than choix.
   ``laplace.fit(K, pairs)`` on the same RBF ``K`` and pairs: first call and the median of the
   repeated calls (the façade compiled its Newton loop again at every call until 2026-12-04).
2. ``XPGPModel(prior).fit(problem)`` at ``n = 30`` (RBF prior, 60 pairs), repeated on new random
   problems of the same size (a new split each call). Goal: under 20 ms.
3. A fresh process fitting ``n = 150`` (``XPGPModel.fit``, RBF plus entity effect, 300 pairs)
   with the persistent compilation cache (:func:`bayesrank.runtime.enable_compilation_cache`),
   cold (an empty cache directory) and warm (a second process, same directory): the fit's wall
   time in each, imports excluded (reported apart). Goal: warm under 1 s.

Problems: ``X ~ N(0, I_5)``; utility ``u = sin(2 X w1) + cos(X w2)``; distinct unordered pairs
drawn uniformly, the winner has the larger ``u + noise``. Seeded.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
from pathlib import Path

import _harness as harness
import numpy as np

OUT = Path(__file__).resolve().parent / "out" / "bench_facades.json"


def make_problem(n: int, m: int, seed: int):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 5))
    w1, w2 = rng.normal(size=(2, 5))
    u = np.sin(2 * X @ w1) + np.cos(X @ w2)
    iu, ju = np.triu_indices(n, 1)
    pick = rng.choice(iu.size, size=m, replace=False)
    i, j = iu[pick], ju[pick]
    win = u[i] - u[j] + rng.normal(size=m) > 0
    pairs = np.where(win[:, None], np.c_[i, j], np.c_[j, i])
    return X, pairs


def bench_ep_vs_choix(repeats: int) -> dict:
    import jax

    from bayesrank.inference import ep
    from bayesrank.kernels import RBF

    n, m = 300, 600
    X, pairs = make_problem(n, m, seed=0)
    K_diag = np.ones(n)
    K_rbf = np.asarray(RBF(1.0, 1.0 / np.sqrt(5))(X))
    rows = {}
    for name, K in (
        ("bayesrank ep.fit, K = I as (n,)", K_diag),
        ("bayesrank ep.fit, RBF K", K_rbf),
    ):
        call = lambda K=K: jax.block_until_ready(ep.fit(K, pairs))  # noqa: E731
        first, post = harness.timed(call)
        times, _ = harness.repeat(call, repeats)
        rows[name] = {
            "first_s": first,
            "median_s": statistics.median(times),
            "times_s": times,
            "sweeps": int(post.n_iter),
            "converged": bool(post.converged),
        }
    choix = harness.optional("choix", say=False)
    if choix is None:
        rows["choix.ep_pairwise"] = {"skipped": "choix is not installed (pip install choix)"}
        return rows
    data = [tuple(p) for p in pairs]

    def run_choix():
        np.random.seed(0)  # noqa: NPY002 (choix draws its site order from the global RNG)
        return choix.ep_pairwise(n, data, 1.0, model="probit")

    first, (mean, _) = harness.timed(run_choix)
    times, _ = harness.repeat(run_choix, repeats)
    rows["choix.ep_pairwise"] = {
        "first_s": first,
        "median_s": statistics.median(times),
        "times_s": times,
    }
    agreement = float(np.max(np.abs(mean - np.asarray(ep.fit(K_diag, pairs).mean))))
    rows["choix.ep_pairwise"]["max_abs_mean_difference"] = agreement
    return rows


def bench_laplace(repeats: int) -> dict:
    import jax

    from bayesrank.inference import laplace
    from bayesrank.kernels import RBF

    X, pairs = make_problem(300, 600, seed=0)
    K = np.asarray(RBF(1.0, 1.0 / np.sqrt(5))(X))
    call = lambda: jax.block_until_ready(laplace.fit(K, pairs))  # noqa: E731
    first, post = harness.timed(call)
    times, _ = harness.repeat(call, repeats)
    return {"first_s": first, "median_s": statistics.median(times), "times_s": times,
            "newton_steps": int(post.n_iter), "converged": bool(post.converged)}  # fmt: skip


def bench_model_n30(repeats: int) -> dict:
    import jax.numpy as jnp

    from bayesrank import RBF, XPGP, PreferenceProblem, XPGPModel

    model = XPGPModel(XPGP(RBF(1.0, 0.5), weights=jnp.array([2.0])))
    problems = []
    for seed in range(repeats + 1):
        X, pairs = make_problem(30, 60, seed)
        problems.append(PreferenceProblem.create(pairs, X=X))
    first, _ = harness.timed(lambda: model.fit(problems[0]).mean)
    times = [harness.timed(lambda p=p: model.fit(p).mean)[0] for p in problems[1:]]
    return {"first_s": first, "median_s": statistics.median(times), "times_s": times}


WORKER = r"""
import json, sys, time
t0 = time.perf_counter()
import jax
jax.config.update("jax_enable_x64", True)
import bayesrank
from bayesrank import RBF, XPGP, Independent, PreferenceProblem, XPGPModel
sys.path.insert(0, {here!r})
from bench_facades import make_problem
bayesrank.runtime.enable_compilation_cache({cache!r})
imported = time.perf_counter() - t0
X, pairs = make_problem(150, 300, 0)
problem = PreferenceProblem.create(pairs, X=X)
model = XPGPModel(XPGP(RBF(1.0, 0.5), weights=jax.numpy.array([2.0]), entity=Independent(0.5)))
t1 = time.perf_counter()
post = model.fit(problem)
jax.block_until_ready(post.mean)
fit = time.perf_counter() - t1
print(json.dumps({{"import_s": imported, "fit_s": fit, "converged": bool(post.result.converged)}}))
"""


def bench_fresh_process() -> dict:
    here = str(Path(__file__).resolve().parent)
    out = {}
    for state, cache in harness.cold_and_warm():
        code = WORKER.format(here=here, cache=cache)
        out[f"{state} cache"] = harness.spawn("-c", code, env={"PYTHONUNBUFFERED": "1"})
        if state == "warm":
            out["cache_files"] = len(os.listdir(cache))
    return out


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args(argv)

    jax = harness.setup_jax(cache=False)
    results = {
        "machine": {
            "platform": platform.platform(),
            "cpus": os.cpu_count(),
            "jax": jax.__version__,
        },
        "ep_vs_choix_n300_m600": bench_ep_vs_choix(args.repeats),
        "laplace_fit_n300_m600": bench_laplace(args.repeats),
        "xpgpmodel_fit_n30": bench_model_n30(args.repeats),
        "fresh_process_n150": bench_fresh_process(),
    }
    ep_rows = results["ep_vs_choix_n300_m600"]
    print("1. ep.fit at n = 300, m = 600, repeated (public façade, no user jit)")
    print(f"   {'method':36s} {'first s':>9s} {'median s':>9s}")
    for name, row in ep_rows.items():
        if "skipped" in row:
            print(f"   {name:36s} skipped: {row['skipped']}")
            continue
        print(f"   {name:36s} {row['first_s']:9.3f} {row['median_s']:9.4f}")
    if "median_s" in ep_rows.get("choix.ep_pairwise", {}):
        choix_s = ep_rows["choix.ep_pairwise"]["median_s"]
        for name, row in ep_rows.items():
            if name.startswith("bayesrank"):
                print(f"   choix / {name}: {choix_s / row['median_s']:.1f}x")
        gap = ep_rows["choix.ep_pairwise"]["max_abs_mean_difference"]
        print(f"   max |mean difference| to choix: {gap:.2e}")
    lap = results["laplace_fit_n300_m600"]
    print(
        f"   laplace.fit, RBF K: first {lap['first_s']:.3f} s, median {lap['median_s']:.4f} s "
        f"({lap['newton_steps']} Newton steps, converged {lap['converged']})"
    )
    m30 = results["xpgpmodel_fit_n30"]
    print(
        f"2. XPGPModel.fit at n = 30, a new split each call: first {m30['first_s']:.3f} s, "
        f"median {1e3 * m30['median_s']:.2f} ms (goal < 20 ms)"
    )
    fresh = results["fresh_process_n150"]
    for label in ("cold cache", "warm cache"):
        row = fresh[label]
        print(
            f"3. fresh process, n = 150, {label}: fit {row['fit_s']:.3f} s "
            f"(imports {row['import_s']:.2f} s)"
        )
    print(f"written {harness.write_json(args.out, results)}")


if __name__ == "__main__":
    main()
