"""NUTS effective samples per second on ~150-document queries: one query per call vs batched.

    python benchmarks/bench_nuts.py [--n 150] [--m 200] [--batch 8] [--warmup 500]
        [--samples 500] [--chains 4] [--repeats 2]

Problems (as ``bench_ep.py``): ``X ~ N(0, I_5)``; utility ``u = sin(2 X w1) + cos(X w2)``;
``m`` distinct random entity pairs, the winner has the larger ``u + noise`` (difference noise
N(0, 1)); prior ``K = RBF(1, 1/sqrt(5))(X) + 0.01 I``, fixed hyperparameters. Seeded NumPy
``Generator``; query ``b`` of the batch uses seed ``b``.

* ``single``: ``nuts.sample`` on query 0 (``--chains`` vmapped chains);
* ``batched (vmap)``: ``nuts.sample_batch`` on ``--batch`` queries in one compiled call, queries
  and chains ``vmap``ped (every NUTS iteration waits for the batch's longest trajectory);
* ``batched (map)``: the same with ``method="map"`` (queries in a ``lax.map``, chains vmapped).

Times are wall-clock seconds of a whole call (warm-up + sampling, ``block_until_ready``), best of
``--repeats`` calls after a first (compiling) call whose time is reported as ``first``. ESS is
NumPyro's (all chains) of each entity's ``xi_hat``: ``min`` (the worst entity) and ``median``;
for the batch, ESS/s sums each query's ESS over the queries (what a user evaluating many queries
gets per second). The script pins itself to one CPU (the jaxlib 0.10 deadlock note in
``experiments/README.md``; ``--all-cpus`` to skip). Results: ``benchmarks/out/bench_nuts.json``.
"""

from __future__ import annotations

import argparse
import platform
from pathlib import Path

import _harness as harness

jax = harness.setup_jax(pin=True)  # float64, one CPU (--all-cpus: not), programs cached on disk

import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

from bayesrank.inference import nuts  # noqa: E402
from bayesrank.kernels import RBF  # noqa: E402

D = 5
OUT = Path(__file__).resolve().parent / "out" / "bench_nuts.json"


def problem(seed: int, n: int, m: int):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, D))
    w1, w2 = rng.normal(size=(2, D))
    u = np.sin(2 * X @ w1) + np.cos(X @ w2)
    seen, pairs = set(), []
    while len(pairs) < m:
        i, j = rng.choice(n, 2, replace=False)
        if (min(i, j), max(i, j)) in seen:
            continue
        seen.add((min(i, j), max(i, j)))
        pairs.append((i, j) if u[i] - u[j] + rng.normal() > 0 else (j, i))
    K = RBF(jnp.asarray(1.0), jnp.asarray(1 / np.sqrt(D)))(jnp.asarray(X))
    return np.asarray(K) + 0.01 * np.eye(n), np.array(pairs)


def timed(fn, repeats: int):
    """``fn(0)`` (compiling), then ``fn(1)`` ... ``fn(repeats)``: the last result, the first
    call's seconds and the best later call's."""

    def call(r):
        out = fn(r)
        jax.block_until_ready(out[0].samples)
        return out

    first, out = harness.timed(call, 0)
    times = []
    for r in range(repeats):
        t, out = harness.timed(call, r + 1)
        times.append(t)
    return out, first, min(times)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=150)
    parser.add_argument("--m", type=int, default=200)
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--warmup", type=int, default=500)
    parser.add_argument("--samples", type=int, default=500)
    parser.add_argument("--chains", type=int, default=4)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--all-cpus", action="store_true")
    args = parser.parse_args(argv)
    settings = dict(num_warmup=args.warmup, num_samples=args.samples, num_chains=args.chains)
    probs = [problem(b, args.n, args.m) for b in range(args.batch)]
    K = np.stack([p[0] for p in probs])
    pairs = np.stack([p[1] for p in probs])

    def single(r):
        return [nuts.sample(jax.random.key(r), K[0], pairs[0], **settings)]

    def batched(r):
        return nuts.sample_batch(jax.random.key(r), K, pairs, **settings)

    def mapped(r):
        return nuts.sample_batch(jax.random.key(r), K, pairs, method="map", **settings)

    rows = {}
    runs = (
        ("single", single, 1),
        (f"batched x{args.batch} (vmap)", batched, None),
        (f"batched x{args.batch} (map)", mapped, None),
    )
    for name, fn, queries in runs:
        posts, first, best = timed(fn, args.repeats)
        ess_min = np.array([np.min(p.diagnostics.ess) for p in posts])
        ess_med = np.array([np.median(p.diagnostics.ess) for p in posts])
        rows[name] = {
            "queries": queries or args.batch,
            "first_s": first,
            "run_s": best,
            "s_per_query": best / len(posts),
            "ess_min_per_query": float(ess_min.mean()),
            "ess_median_per_query": float(ess_med.mean()),
            "min_ess_per_s": float(ess_min.sum() / best),
            "median_ess_per_s": float(ess_med.sum() / best),
            "max_r_hat": float(max(np.max(p.diagnostics.r_hat) for p in posts)),
            "divergences": int(sum(p.diagnostics.divergences.sum() for p in posts)),
            "mean_leapfrog_steps": float(np.mean([p.diagnostics.num_steps for p in posts])),
        }
        print(f"{name}: {rows[name]}", flush=True)

    print(
        f"\nn={args.n}, m={args.m}, {args.chains} chains x {args.samples} draws after "
        f"{args.warmup} warm-up, float64, CPU ({platform.processor() or platform.machine()}, "
        f"{harness.cores()} CPU(s))\n"
    )
    print(
        "| run | queries | first call s | run s | s / query | min ESS / query | "
        "median ESS / query | min-ESS / s | median-ESS / s | max R-hat | div. | leapfrog / draw |"
    )
    print("|---" * 12 + "|")
    for name, r in rows.items():
        print(
            f"| {name} | {r['queries']} | {r['first_s']:.1f} | {r['run_s']:.1f} | "
            f"{r['s_per_query']:.2f} | {r['ess_min_per_query']:.0f} | "
            f"{r['ess_median_per_query']:.0f} | {r['min_ess_per_s']:.0f} | "
            f"{r['median_ess_per_s']:.0f} | {r['max_r_hat']:.3f} | {r['divergences']} | "
            f"{r['mean_leapfrog_steps']:.1f} |"
        )
    s1 = rows["single"]
    for name, r in list(rows.items())[1:]:
        print(
            f"{name} / single: min-ESS/s x{r['min_ess_per_s'] / s1['min_ess_per_s']:.2f}, "
            f"median-ESS/s x{r['median_ess_per_s'] / s1['median_ess_per_s']:.2f}"
        )
    payload = {
        "date": harness.utc_now("auto"),
        "config": vars(args),
        "versions": harness.versions("jax", "jaxlib", "numpyro"),
        "machine": platform.machine(),
        "results": rows,
    }
    print(f"wrote {harness.write_json(OUT, payload, indent=1)}")


if __name__ == "__main__":
    main()
