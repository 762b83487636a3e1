"""Where the large experiment's XPGP time goes: the full protocol's split of HetRec (10,197
movies, 10^6 training and 10^5 held-out pooled pairs, seed 0, rank 128, both relations), the
Laplace mode, then the held-out predictions from ``--samples`` posterior draws taken apart:
the draws (one preconditioned CG solve each, at the experiment's ``DRAWS_CG_TOL``: its
iterations and seconds) and the pairs' moments from them; with ``--cg-tols`` the predictions
at other CG tolerances against 1e-6's; with ``--choix`` choix's fit on the same pairs. Each
stage reports wall and CPU seconds; the machine's load average is
read before and after.

    python benchmarks/bench_large_predict.py --data-dir ../shared/data [--samples 64]
        [--cg-tols 1e-3,1e-4] [--choix] [--only-tols]

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
    parser.add_argument(
        "--cg-tols",
        default="",
        help="comma-separated CG tolerances for the draws, each timed and compared with 1e-6's "
        "predictions (the same key): the pair variances' change in units of their Monte Carlo "
        "error, and the held-out error and log-likelihood",
    )
    parser.add_argument("--only-tols", action="store_true", help="skip the stages after them")
    parser.add_argument(
        "--choix",
        action="store_true",
        help="also time choix's fit on the same pairs (ilsr_pairwise, alpha 0.01, as the "
        "experiment calls it; needs the bench extra)",
    )
    args = parser.parse_args()
    harness.setup_jax()
    import jax
    import jax.numpy as jnp
    import numpy as np

    from bayesrank.experiments.large import DRAWS_CG_TOL, _prior, load
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

    def predict(tol):
        return S.sampled_pair_predictions(prior, train, fit, test, key, args.samples, tol)

    stage("predict (as the experiment calls it)", lambda: predict(DRAWS_CG_TOL), out)
    reference = None
    if args.cg_tols:
        reference = stage("predict, draws at cg_tol=1e-06 (the reference)",
                          lambda: predict(1e-6), out)  # fmt: skip
    out["tolerances"] = {}
    for tol in [float(t) for t in args.cg_tols.split(",") if t]:
        name = f"predict, draws at cg_tol={tol:g}"
        got = stage(name, lambda tol=tol: predict(tol), out)
        row = {"seconds": out[name]}
        for label, (prob, *_) in (("1e-06", reference), (f"{tol:g}", got)):
            p = np.clip(np.asarray(prob), 1e-300, 1.0)
            row[label] = {"error": float(np.mean((p < 0.5) + 0.5 * (p == 0.5))),
                          "log_likelihood": float(np.mean(np.log(p)))}  # fmt: skip
        change = np.abs(np.asarray(got[2]) - np.asarray(reference[2])) / np.asarray(reference[3])
        row["variance_change_in_se"] = {"median": float(np.median(change)),
                                        "max": float(np.max(change))}  # fmt: skip
        out["tolerances"][f"{tol:g}"] = row
        print(f"  {row}", flush=True)
    if args.choix:
        from bayesrank.experiments.large import _choix

        row = stage("choix (as the experiment calls it)",
                    lambda: _choix(len(X), train, test, 0), out)  # fmt: skip
        out["choix"] = row
        print(f"  choix: error {row['error']:.4f}, fit {row['fit_s']:.1f} s", flush=True)
    if args.only_tols:
        out["load_after"] = os.getloadavg()
        harness.write_json(Path(__file__).parent / "out" / "large_predict.json", out)
        return
    tr = jnp.asarray(train)

    def draw():
        return posterior_draws_core(prior, tr, fit, key, args.samples, DRAWS_CG_TOL)

    draws = stage("  the draws alone", draw, out)
    te = jnp.asarray(test)

    def moments():
        return jnp.mean((draws[:, te[:, 0]] - draws[:, te[:, 1]]) ** 2, axis=0)

    stage("  the pairs' moments from the draws", moments, out)
    # one draw's right-hand side, solved alone: CG's iterations per draw and a solve's seconds
    M = preconditioner(prior, tr, fit.w)
    rhs = prior.latent(jnp.zeros(prior.n).at[0].set(1.0).at[1].set(-1.0))
    solve_jit = jax.jit(lambda b: solve(prior, tr, fit.w, b, jnp.zeros_like(b), DRAWS_CG_TOL, M))
    stage("  one CG solve (compiled first)", lambda: solve_jit(rhs), out)
    _, iterations = stage("  one CG solve", lambda: solve_jit(rhs), out)
    out["cg_iterations_per_solve"] = int(iterations)
    print(f"CG iterations per solve: {int(iterations)}", flush=True)
    out["load_after"] = os.getloadavg()
    harness.write_json(Path(__file__).parent / "out" / "large_predict.json", out)


if __name__ == "__main__":
    main()
