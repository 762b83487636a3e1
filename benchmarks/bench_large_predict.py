"""Where the large experiment's XPGP time goes: the full protocol's split of HetRec (10,197
movies, 10^6 training and 10^5 held-out pooled pairs, seed 0, rank 128, both relations), the
Laplace mode, then the held-out predictions from ``--samples`` posterior draws taken apart:
the draws (one preconditioned CG solve each: its iterations and seconds) and the pairs'
moments from them. Each stage reports wall and CPU seconds; the machine's load average is
read before and after.

    python benchmarks/bench_large_predict.py --data-dir ../shared/data [--samples 64]

Writes ``benchmarks/out/large_predict.json``.
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

import _harness as harness


def stage(name: str, fn, out: dict):
    """``fn()`` timed (wall and process CPU seconds) into ``out[name]``; its result."""
    import jax

    wall, cpu = time.perf_counter(), time.process_time()
    result = jax.block_until_ready(fn())
    out[name] = {"wall_s": time.perf_counter() - wall, "cpu_s": time.process_time() - cpu}
    print(f"{name}: {out[name]['wall_s']:.1f} s wall, {out[name]['cpu_s']:.1f} s CPU",
          flush=True)  # fmt: skip
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data-dir", required=True)
    parser.add_argument("--samples", type=int, default=64)
    parser.add_argument("--n-train", type=int, default=1_000_000)
    parser.add_argument("--n-test", type=int, default=100_000)
    parser.add_argument("--rank", type=int, default=128)
    args = parser.parse_args()
    harness.setup_jax()
    import jax
    import jax.numpy as jnp
    import numpy as np

    from bayesrank.experiments.large import _prior, load
    from bayesrank.inference import sparse as S
    from bayesrank.inference.sparse.hessian import preconditioner, solve
    from bayesrank.inference.sparse.laplace import posterior_draws_core

    out = {"machine": harness.machine_info(), "load_before": os.getloadavg()}
    _, X, pairs, memberships = stage("load", lambda: load(args.data_dir), out)
    order = np.random.default_rng(0).permutation(len(pairs))
    train = pairs[order[: args.n_train]]
    test = pairs[order[args.n_train : args.n_train + args.n_test]]
    prior, _ = stage("prior", lambda: _prior(X, memberships, args.rank, relations=True), out)
    fit = stage("mode", lambda: S.mode(prior, train), out)
    out["newton_iterations"], out["mode_cg_iterations"] = int(fit.n_iter), int(fit.cg_iterations)
    key = jax.random.key(0)
    stage("predict (as the experiment calls it)", lambda: S.sampled_pair_predictions(
        prior, train, fit, test, key, n_samples=args.samples, cg_tol=1e-6), out)  # fmt: skip
    tr = jnp.asarray(train)

    def draw():
        return posterior_draws_core(prior, tr, fit, key, args.samples, 1e-6)

    draws = stage("  the draws alone", draw, out)
    te = jnp.asarray(test)

    def moments():
        return jnp.mean((draws[:, te[:, 0]] - draws[:, te[:, 1]]) ** 2, axis=0)

    stage("  the pairs' moments from the draws", moments, out)
    # one draw's right-hand side, solved alone: CG's iterations per draw and a solve's seconds
    M = preconditioner(prior, tr, fit.w)
    rhs = prior.latent(jnp.zeros(prior.n).at[0].set(1.0).at[1].set(-1.0))
    solve_jit = jax.jit(lambda b: solve(prior, tr, fit.w, b, jnp.zeros_like(b), 1e-6, M))
    stage("  one CG solve (compiled first)", lambda: solve_jit(rhs), out)
    _, iterations = stage("  one CG solve", lambda: solve_jit(rhs), out)
    out["cg_iterations_per_solve"] = int(iterations)
    print(f"CG iterations per solve: {int(iterations)}", flush=True)
    out["load_after"] = os.getloadavg()
    harness.write_json(Path(__file__).parent / "out" / "large_predict.json", out)


if __name__ == "__main__":
    main()
