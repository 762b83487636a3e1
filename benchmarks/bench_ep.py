"""Time bayesrank's EP for the probit pair model against choix and BoTorch, side by side.

    python benchmarks/bench_ep.py [--sizes 150x200,300x600,1000x2000] [--repeats 3]

Peers (``pip install -e .[bench]``, then ``torch==2.13.0`` CPU build, ``botorch``, ``choix``):

1. ``choix.ep_pairwise(n, data, alpha, model="probit")``: EP for the same model with prior
   ``N(0, I / alpha)``. Mapping, read from choix 0.4.1's source (``choix/ep.py``): its probit
   moments (``_match_moments_probit``, from GPML's ``likErf``) use ``z = m_c / sqrt(1 + v_c)``,
   i.e. the likelihood ``Phi(theta_a - theta_b)`` with *no* extra noise scale, exactly ours; the
   data ``(winner, loser)`` are our ``pairs`` rows unchanged, and it returns the posterior
   ``(mean (n,), cov (n, n))`` of ``theta`` itself. So ``K = I / alpha`` (alpha = 1 here) and
   the same pairs give the same posterior: no scaling of ``K`` or the pairs is needed. choix runs
   sequential EP (random site order, from NumPy's global RNG, seeded here) and stops when no site
   parameter moves by more than 1e-4 (``choix.ep.THRESHOLD``); that loose stop bounds the
   agreement near 1e-6. An extra, untimed check at the small sizes re-runs choix with that
   threshold at 1e-11 (patched for that check only) against bayesrank at ``tol=1e-10``.
2. BoTorch ``PairwiseGP``: the Laplace approximation of the probit preference model with a
   ``ScaleKernel(RBFKernel)`` prior. Its likelihood (``PairwiseProbitLikelihood``) is
   ``Phi((f_i - f_j) / sqrt(2))`` (``z`` clamped to [-3, 3]), so ``f = sqrt(2) xi``: bayesrank's
   ``RBF(kappa, rho)`` corresponds to ``outputscale = 2 kappa^2`` and ``lengthscale = 1 / rho``.
   The timed model is BoTorch's default covariance module (same priors and constraints, ARD
   lengthscales) initialised at those values, so "construct" (the MAP/Laplace solve at fixed
   hyperparameters, by scipy ``fsolve``) is the fixed-hyperparameter counterpart of our EP fit
   (different approximation, same model). ``fit_gpytorch_mll`` additionally optimises the
   hyperparameters (L-BFGS-B, one Laplace solve per evaluation): reported for reference only.

Problems: ``X ~ N(0, I_5)``; utility ``u = sin(2 X w1) + cos(X w2)`` (random projections);
``m`` distinct unordered entity pairs drawn uniformly; the winner has the larger ``u + noise``
(difference noise N(0, 1)). All from ``numpy.random.default_rng(seed)``. bayesrank uses
``K = RBF(1, 1/sqrt(5))(X)`` (no jitter) against BoTorch and ``K = I`` against choix, given as its
diagonal ``(n,)`` (EP's diagonal-prior path: ``B = I + R S R`` is built in O(m) and a sweep is a
Cholesky and a triangular inverse, no ``n^3`` product); ``bayesrank-ep[I-dense]`` passes the same
``K`` as a dense ``(n, n)`` matrix, for reference.

Each (method, size) runs in its own subprocess (this script with ``--worker``) so that its peak
resident memory (``ru_maxrss``) is its own; "idle" workers import the same libraries and build the
problem without fitting, giving the import baseline. bayesrank is called as a user calls it,
``ep.fit(K, pairs)`` on host arrays (its façade validates, pads to size buckets and runs one cached
compiled program; no ``jax.jit`` of the benchmark's own), in float64: compile time is the first
call minus the second; run time is the best (and median) of the
steady-state calls (``block_until_ready``). Peers get an untimed warm-up on a tiny problem. A peer
whose single run is predicted (from the previous size) or found to exceed ``--max-single`` seconds
is skipped at that size and the output says so. Results go to ``benchmarks/out/bench_ep.json``.
"""

from __future__ import annotations

import argparse
import math
import subprocess
import tempfile
from pathlib import Path

import _harness as harness
import numpy as np
from _harness import fmt

D = 5
ALPHA = 1.0  # choix prior precision; bayesrank gets K = I / ALPHA
KAPPA = 1.0  # RBF amplitude
RHO = 1.0 / math.sqrt(D)  # RBF inverse lengthscale
MAX_ITER = 500
TOL = 1e-6
SEED = 0
OUT = Path(__file__).resolve().parent / "out" / "bench_ep.json"

# name -> (library family, description); the family selects the idle (import) baseline.
METHODS = {
    "bayesrank-ep[I]": ("jax", "bayesrank EP, parallel (default), diagonal K = I/alpha as (n,)"),
    "bayesrank-ep[I-dense]": (
        "jax",
        "bayesrank EP, parallel, K = I/alpha as a dense (n, n) (ref.)",
    ),
    "bayesrank-ep[I-mixed]": ("jax", "bayesrank EP as bayesrank-ep[I], precision='mixed'"),
    "choix-ep[I]": ("choix", "choix.ep_pairwise probit, prior I/alpha"),
    "bayesrank-ep-seq[I]": ("jax", "bayesrank EP, sequential schedule, K = I/alpha (ref.)"),
    "bayesrank-ep[RBF]": ("jax", "bayesrank EP, parallel (default), RBF K, fixed hyp."),
    "bayesrank-ep[RBF-mixed]": ("jax", "bayesrank EP as bayesrank-ep[RBF], precision='mixed'"),
    "botorch-construct[RBF]": ("torch", "BoTorch PairwiseGP(): Laplace at fixed hyp."),
    "botorch-fit[RBF]": ("torch", "BoTorch fit_gpytorch_mll: hyp. optimisation (ref.)"),
}
# peer -> the bayesrank method it is compared with
BASELINE = {
    "choix-ep[I]": "bayesrank-ep[I]",
    "bayesrank-ep-seq[I]": "bayesrank-ep[I]",
    "bayesrank-ep[I-dense]": "bayesrank-ep[I]",
    "botorch-construct[RBF]": "bayesrank-ep[RBF]",
    "botorch-fit[RBF]": "bayesrank-ep[RBF]",
}
# bayesrank method -> the peer whose time is divided by its time on its own row
VERSUS = {"bayesrank-ep[I-mixed]": "choix-ep[I]", "bayesrank-ep[RBF-mixed]": "botorch-fit[RBF]"}


def make_problem(n: int, m: int, seed: int = SEED):
    """``X: (n, D)``, ``pairs: (m, 2)`` int64, winner first, distinct unordered pairs."""
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, D))
    W = rng.standard_normal((D, 2)) / math.sqrt(D)
    u = np.sin(2.0 * X @ W[:, 0]) + np.cos(X @ W[:, 1])
    iu, ju = np.triu_indices(n, 1)
    sel = rng.choice(iu.size, size=m, replace=False)
    a, b = iu[sel], ju[sel]
    a_wins = u[a] - u[b] + rng.standard_normal(m) > 0
    pairs = np.where(a_wins[:, None], np.stack([a, b], 1), np.stack([b, a], 1))
    return X, pairs.astype(np.int64)


# ---------------------------------------------------------------------------------------------
# Workers (each in its own process)
# ---------------------------------------------------------------------------------------------


def worker_bayesrank(n, m, kernel, schedule, repeats, budget, save, precision="full"):
    jax = harness.setup_jax()  # x64, compiled programs kept on disk between runs
    import jax.numpy as jnp

    from bayesrank.inference import ep
    from bayesrank.kernels import RBF

    X, pairs = make_problem(n, m)
    if kernel == "I":  # a diagonal prior, given as its diagonal (EP's sparse-B path)
        K = np.ones(n) / ALPHA
    elif kernel == "I-dense":
        K = np.eye(n) / ALPHA
    else:
        K = np.asarray(RBF(KAPPA, RHO)(jnp.asarray(X)))
    kw = {"max_iter": MAX_ITER, "tol": TOL, "schedule": schedule, "precision": precision}

    def call():  # the public façade, as the README calls it
        return jax.block_until_ready(ep.fit(K, pairs, **kw))

    first, post = harness.timed(call)
    # further calls until `repeats` or the budget; one at least (the compile time needs it)
    times, post = harness.repeat(call, repeats, budget=budget, first=first, min_calls=1)
    if save:
        np.savez(save, mean=np.asarray(post.mean), cov=np.asarray(post.cov))
    return {
        "first_call_s": first,
        "compile_s": first - times[0],
        "times_s": times,
        "iterations": int(post.n_iter),
        "converged": bool(post.converged),
        "extra": {
            "max_change": float(post.max_change),
            "n_skipped": int(post.n_skipped),
            "n_clipped": int(post.n_clipped),
            "log_evidence": float(post.log_evidence),
        },
        "versions": {"jax": jax.__version__, "numpy": np.__version__},
    }


def worker_choix(n, m, repeats, budget, save):
    import choix
    import choix.ep

    _, pairs = make_problem(n, m)
    data = [(int(a), int(b)) for a, b in pairs]
    warm = [(int(a), int(b)) for a, b in make_problem(20, 30, seed=1)[1]]
    choix.ep_pairwise(20, warm, ALPHA, model="probit")

    def call():
        np.random.seed(SEED)  # noqa: NPY002 (choix draws its site order from the global RNG)
        return choix.ep_pairwise(n, data, ALPHA, model="probit", max_iter=MAX_ITER)

    first, out = harness.timed(call)
    iters = choix.ep._ep_pairwise.iterations
    times, _ = harness.repeat(call, repeats - 1, budget=budget, first=first)
    if save:
        np.savez(save, mean=out[0], cov=out[1])
    return {
        "first_call_s": first,
        "compile_s": None,
        "times_s": [first, *times],
        "iterations": int(iters),
        "converged": True,  # choix raises RuntimeError if it does not converge
        "extra": {"threshold": choix.ep.THRESHOLD},
        "versions": {**harness.versions("choix"), "numpy": np.__version__},
    }


def _botorch_model(X, pairs):
    """``PairwiseGP`` with BoTorch's default covariance module, at bayesrank's hyperparameters."""
    import torch
    from botorch.models.pairwise_gp import PairwiseGP
    from gpytorch.constraints import GreaterThan, Interval
    from gpytorch.kernels import RBFKernel, ScaleKernel
    from gpytorch.priors import GammaPrior, SmoothedBoxPrior

    Xt = torch.tensor(X, dtype=torch.float64)
    comp = torch.tensor(pairs, dtype=torch.long)
    ls_prior = GammaPrior(concentration=2.4, rate=2.7)
    covar = ScaleKernel(
        RBFKernel(
            ard_num_dims=Xt.shape[-1],
            lengthscale_prior=ls_prior,
            lengthscale_constraint=GreaterThan(lower_bound=1e-4, transform=None),
        ),
        outputscale_prior=SmoothedBoxPrior(a=1e-2, b=1e2),
        outputscale_constraint=Interval(lower_bound=0.5e-2, upper_bound=2e2),
    ).to(torch.float64)
    covar.base_kernel.lengthscale = torch.full((1, Xt.shape[-1]), 1.0 / RHO, dtype=torch.float64)
    covar.outputscale = torch.tensor(2.0 * KAPPA**2, dtype=torch.float64)  # f = sqrt(2) xi
    np.random.seed(SEED)  # noqa: NPY002 (PairwiseGP perturbs its fsolve start with it)
    return PairwiseGP(Xt, comp, covar_module=covar)


def worker_botorch(n, m, fit, repeats, budget, save):
    import warnings

    torch = harness.setup_torch()
    import botorch
    import gpytorch
    from botorch.fit import fit_gpytorch_mll
    from botorch.models.pairwise_gp import PairwiseLaplaceMarginalLogLikelihood

    X, pairs = make_problem(n, m)

    def do_fit(model):
        mll = PairwiseLaplaceMarginalLogLikelihood(model.likelihood, model)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            fit_gpytorch_mll(mll)
        return mll, caught

    Xw, pw = make_problem(20, 30, seed=1)
    do_fit(_botorch_model(Xw, pw))  # warm-up: first-use costs of torch, gpytorch, scipy

    if not fit:

        def call():
            return _botorch_model(X, pairs)

        first, model = harness.timed(call)
        times, _ = harness.repeat(call, repeats - 1, budget=budget, first=first)
        if save:
            np.savez(save, mean=model.utility.detach().numpy() / math.sqrt(2.0))
        iterations, converged, extra = None, None, {}
    else:
        times, spent, first = [], 0.0, None
        while len(times) < repeats and (not times or spent + times[-1] <= budget):
            model = _botorch_model(X, pairs)
            solves = [0]
            update = model._update

            def counted(*args, _update=update, _solves=solves, **kwargs):
                _solves[0] += 1
                return _update(*args, **kwargs)

            model._update = counted
            t, (mll, caught) = harness.timed(do_fit, model)
            first = t if first is None else first
            times.append(t)
            spent += t
        opt_warnings = [
            str(w.message)[:200] for w in caught if "Optimization" in w.category.__name__
        ]
        iterations, converged = solves[0], (not mll.training) and not opt_warnings
        base = model.covar_module.base_kernel
        extra = {
            "laplace_solves_in_fit": solves[0],
            "fitted_outputscale": float(model.covar_module.outputscale),
            "fitted_lengthscales": base.lengthscale.detach().numpy().ravel().tolist(),
            "optimization_warnings": opt_warnings,
        }
    return {
        "first_call_s": first,
        "compile_s": None,
        "times_s": times if fit else [first, *times],
        "iterations": iterations,
        "converged": converged,
        "extra": extra,
        "versions": {
            "torch": torch.__version__,
            "botorch": botorch.__version__,
            "gpytorch": gpytorch.__version__,
        },
    }


def worker_idle(n, m, family):
    """Import the family's libraries and build the problem, without fitting (memory baseline)."""
    if family == "jax":
        jax = harness.setup_jax()  # x64, compiled programs kept on disk between runs
        from bayesrank.inference import ep  # noqa: F401
        from bayesrank.kernels import RBF

        X, _ = make_problem(n, m)
        jax.block_until_ready(RBF(KAPPA, RHO)(jax.numpy.asarray(X)))
    elif family == "choix":
        import choix  # noqa: F401

        make_problem(n, m)
    else:
        harness.setup_torch()
        from botorch.fit import fit_gpytorch_mll  # noqa: F401
        from botorch.models.pairwise_gp import PairwiseGP  # noqa: F401

        make_problem(n, m)
    return {}


def worker_agreement(n, m):
    """Untimed: choix with its stop threshold tightened to 1e-11 vs bayesrank at tol 1e-10."""
    jax = harness.setup_jax()  # x64, compiled programs kept on disk between runs
    import choix
    import choix.ep

    from bayesrank.inference import ep

    _, pairs = make_problem(n, m)
    choix.ep._converged.__defaults__ = (1e-11,)
    np.random.seed(SEED)  # noqa: NPY002 (choix's site order)
    data = [(int(a), int(b)) for a, b in pairs]
    c_mean, c_cov = choix.ep_pairwise(n, data, ALPHA, model="probit", max_iter=1000)
    post = ep.fit(jax.numpy.eye(n) / ALPHA, pairs, max_iter=2000, tol=1e-10)
    return {
        "max_abs_mean_diff": float(np.abs(np.asarray(post.mean) - c_mean).max()),
        "max_abs_cov_diff": float(np.abs(np.asarray(post.cov) - c_cov).max()),
        "choix_iterations": int(choix.ep._ep_pairwise.iterations),
        "bayesrank_iterations": int(post.n_iter),
        "bayesrank_converged": bool(post.converged),
    }


def run_worker(args) -> None:
    method, n, m = args.worker, args.n, args.m
    kw = {"repeats": args.repeats, "budget": args.budget, "save": args.save}
    if method.startswith("idle:"):
        result = worker_idle(n, m, method.split(":", 1)[1])
    elif method == "agreement":
        result = worker_agreement(n, m)
    elif method == "bayesrank-ep[I]":
        result = worker_bayesrank(n, m, "I", "parallel", **kw)
    elif method == "bayesrank-ep[I-dense]":
        result = worker_bayesrank(n, m, "I-dense", "parallel", **kw)
    elif method == "bayesrank-ep[I-mixed]":
        result = worker_bayesrank(n, m, "I", "parallel", precision="mixed", **kw)
    elif method == "bayesrank-ep[RBF-mixed]":
        result = worker_bayesrank(n, m, "RBF", "parallel", precision="mixed", **kw)
    elif method == "bayesrank-ep-seq[I]":
        result = worker_bayesrank(n, m, "I", "sequential", **kw)
    elif method == "bayesrank-ep[RBF]":
        result = worker_bayesrank(n, m, "RBF", "parallel", **kw)
    elif method == "choix-ep[I]":
        result = worker_choix(n, m, **kw)
    elif method == "botorch-construct[RBF]":
        result = worker_botorch(n, m, False, **kw)
    elif method == "botorch-fit[RBF]":
        result = worker_botorch(n, m, True, **kw)
    else:
        raise SystemExit(f"unknown method {method!r}")
    result["peak_rss_mb"] = harness.peak_rss_mb()
    harness.emit(result)


# ---------------------------------------------------------------------------------------------
# Driver
# ---------------------------------------------------------------------------------------------


def spawn(method, n, m, args, tmp: Path, save=False, timeout=None):
    """One worker in a fresh process: its result, ``{"skipped": ...}`` or ``{"error": ...}``."""
    save_path = tmp / f"{method}-{n}-{m}.npz" if save else None
    argv = [Path(__file__).resolve(), "--worker", method, "--n", n, "--m", m]
    argv += ["--repeats", args.repeats, "--budget", args.budget]
    if save_path:
        argv += ["--save", save_path]
    try:
        wall, out = harness.timed(harness.spawn, *argv, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"skipped": f"killed after {timeout:.0f} s (single run > {args.max_single:.0f} s)"}
    except harness.WorkerError as err:
        return {"error": str(err)[-2000:]}
    out["wall_s"] = wall
    out["save"] = str(save_path) if save_path else None
    return out


def cost_scale(n, m, n0, m0):
    """Conservative growth of one run's cost: dense O(n^3) or O(m n^2) per sweep."""
    return max((n / n0) ** 3, (n / n0) ** 2 * (m / m0))


def main_driver(args) -> None:
    sizes = harness.parse_sizes(args.sizes)
    methods = [mth for mth in METHODS if not args.methods or mth in args.methods.split(",")]
    info = harness.machine_info()
    print(f"machine: {info['cpu']}, {info['cores']} cores, {info['memory_gib']} GiB; ", end="")
    print(f"repeats {args.repeats}, budget {args.budget:.0f} s, max single {args.max_single:.0f} s")
    records, agreement, versions = [], [], {}
    last_time = {}  # method -> (n, m, best single run) at the previous size
    with tempfile.TemporaryDirectory() as tmpdir:
        tmp = Path(tmpdir)
        for n, m in sizes:
            idle = {}
            for fam in sorted({METHODS[mth][0] for mth in methods}):
                res = spawn(f"idle:{fam}", n, m, args, tmp, timeout=600)
                idle[fam] = res.get("peak_rss_mb")
            for mth in methods:
                fam, desc = METHODS[mth]
                rec = {"n": n, "m": m, "method": mth, "description": desc}
                prev = last_time.get(mth)
                estimate = prev and prev[2] * cost_scale(n, m, prev[0], prev[1])
                if estimate and estimate > args.max_single:
                    rec["skipped"] = (
                        f"estimated single run {estimate:.0f} s > {args.max_single:.0f} s "
                        f"(from {prev[2]:.1f} s at n={prev[0]}, m={prev[1]})"
                    )
                else:
                    save = mth in ("bayesrank-ep[I]", "choix-ep[I]", "bayesrank-ep[RBF]")
                    save = save or mth == "bayesrank-ep[I-mixed]"
                    save = save or mth == "botorch-construct[RBF]"
                    timeout = 3 * args.max_single + 120
                    rec.update(spawn(mth, n, m, args, tmp, save=save, timeout=timeout))
                if "times_s" in rec:
                    rec.update(harness.best_and_median(rec["times_s"]))
                    rec["idle_rss_mb"] = idle.get(fam)
                    versions.update(rec.pop("versions", {}))
                    single = max(rec["best_s"], rec["first_call_s"] - (rec["compile_s"] or 0))
                    last_time[mth] = (n, m, single)
                    if single > args.max_single:
                        rec["note"] = f"single run {single:.0f} s > {args.max_single:.0f} s"
                records.append(rec)
                status = rec.get("skipped") or rec.get("error", "")[-300:] or "ok"
                print(f"  done n={n} m={m} {mth}: {status}", flush=True)
            by = {r["method"]: r for r in records if r["n"] == n and r["m"] == m}
            agreement.append(compare(n, m, by))
            if n <= args.tight_max_n and {"choix-ep[I]", "bayesrank-ep[I]"} <= set(methods):
                tight = spawn("agreement", n, m, args, tmp, timeout=600)
                agreement[-1]["tight"] = tight if "error" not in tight else tight["error"]
            for rec in by.values():
                rec.pop("save", None)
    summary = summarise(records)
    report(records, agreement, summary, info, args)
    payload = {
        "date": harness.utc_now(),
        "machine": info,
        "versions": versions,
        "settings": {
            "d": D,
            "alpha": ALPHA,
            "rbf_kappa": KAPPA,
            "rbf_rho": RHO,
            "max_iter": MAX_ITER,
            "tol": TOL,
            "seed": SEED,
            "repeats": args.repeats,
            "budget_s": args.budget,
            "max_single_s": args.max_single,
        },
        "results": records,
        "agreement": agreement,
        "summary": summary,
    }
    harness.write_json(OUT, payload)
    print(f"\nwrote {OUT}")


def compare(n, m, by):
    """Posterior agreement: bayesrank vs choix (same model) and vs BoTorch's Laplace MAP."""
    out = {"n": n, "m": m}

    def load(method):
        rec = by.get(method)
        return np.load(rec["save"]) if rec and rec.get("save") else None

    ours, theirs = load("bayesrank-ep[I]"), load("choix-ep[I]")
    if ours is not None and theirs is not None:
        out["choix_max_abs_mean_diff"] = float(np.abs(ours["mean"] - theirs["mean"]).max())
        out["choix_max_abs_cov_diff"] = float(np.abs(ours["cov"] - theirs["cov"]).max())
    mixed = load("bayesrank-ep[I-mixed]")
    if mixed is not None and theirs is not None:
        out["choix_mixed_max_abs_mean_diff"] = float(np.abs(mixed["mean"] - theirs["mean"]).max())
    if mixed is not None and ours is not None:
        out["mixed_full_max_abs_mean_diff"] = float(np.abs(mixed["mean"] - ours["mean"]).max())
    ours, laplace = load("bayesrank-ep[RBF]"), load("botorch-construct[RBF]")
    if ours is not None and laplace is not None:
        a, b = ours["mean"], laplace["mean"]
        out["botorch_laplace_max_abs_mean_diff"] = float(np.abs(a - b).max())
        out["botorch_laplace_mean_corr"] = float(np.corrcoef(a, b)[0, 1])
    return out


def summarise(records):
    """Ratios peer / bayesrank (steady state and first call) and the issue's goal at the top."""
    index = {(r["n"], r["m"], r["method"]): r for r in records}
    for r in records:
        base = index.get((r["n"], r["m"], BASELINE.get(r["method"])))
        if base and "best_s" in r and "best_s" in base:
            r["ratio_steady"] = r["best_s"] / base["best_s"]
            r["ratio_vs_first_call"] = r["best_s"] / base["first_call_s"]
        peer = index.get((r["n"], r["m"], VERSUS.get(r["method"])))
        if peer and "best_s" in r and "best_s" in peer:
            r["ratio_steady"] = peer["best_s"] / r["best_s"]
            r["ratio_vs_first_call"] = peer["best_s"] / r["first_call_s"]
    goal = {}
    n, m = 1000, 2000
    choix_r = index.get((n, m, "choix-ep[I]"), {}).get("ratio_steady")
    fit_r = index.get((n, m, "botorch-fit[RBF]"), {}).get("ratio_steady")
    if choix_r is not None:
        goal["choix_over_bayesrank"] = choix_r
        goal["choix_goal_30x_met"] = choix_r >= 30
    if fit_r is not None:
        goal["botorch_fit_over_bayesrank"] = fit_r
        goal["botorch_fit_goal_10x_met"] = fit_r >= 10
    for mixed, key in (
        ("bayesrank-ep[I-mixed]", "choix"),
        ("bayesrank-ep[RBF-mixed]", "botorch_fit"),
    ):
        r = index.get((n, m, mixed), {}).get("ratio_steady")
        if r is not None:
            goal[f"{key}_over_bayesrank_mixed"] = r
    return {"goal_n1000_m2000": goal}


def report(records, agreement, summary, info, args) -> None:
    head = (
        f"{'n':>5} {'m':>5}  {'method':<23} {'compile s':>9} {'best s':>8} {'median s':>8} "
        f"{'runs':>4} {'iters':>5} {'conv':>5} {'peak MB':>8} {'-idle MB':>8} "
        f"{'ratio':>7} {'ratio1st':>8}"
    )
    print("\n" + head + "\n" + "-" * len(head))
    for r in records:
        lead = f"{r['n']:>5} {r['m']:>5}  {r['method']:<23}"
        if "best_s" not in r:
            print(f"{lead} SKIPPED: {r.get('skipped') or r.get('error', '')[-200:]}")
            continue
        extra = None
        if r.get("idle_rss_mb") is not None:
            extra = r["peak_rss_mb"] - r["idle_rss_mb"]
        conv = "-" if r["converged"] is None else str(r["converged"])
        print(
            f"{lead} {fmt(r['compile_s'], '9.2f')} {r['best_s']:8.3f} {r['median_s']:8.3f} "
            f"{len(r['times_s']):>4} {fmt(r['iterations'], '>5')} {conv:>5} "
            f"{r['peak_rss_mb']:8.0f} {fmt(extra, '8.0f')} "
            f"{fmt(r.get('ratio_steady'), '7.3g')} {fmt(r.get('ratio_vs_first_call'), '8.3g')}"
        )
        if r.get("note"):
            print(f"{'':13}note: {r['note']}")
    print(
        "\nratio = peer best / bayesrank best (steady state); ratio1st = peer best / bayesrank "
        "first call (compile + run).\nPeers: choix-ep[I], bayesrank-ep[I-dense] and "
        "bayesrank-ep-seq[I] vs bayesrank-ep[I]; botorch-* vs bayesrank-ep[RBF];\n"
        "on the *-mixed rows: choix-ep[I] or botorch-fit[RBF] / that row.\n'iters' = EP "
        "sweeps (bayesrank, choix) "
        "or Laplace solves in the fit (botorch-fit). botorch-construct = MAP/Laplace at fixed "
        "hyperparameters;\nbotorch-fit = hyperparameter optimisation, for reference only. "
        "'-idle MB' subtracts an import-only process."
    )
    skipped = [r for r in records if "skipped" in r]
    if not skipped:
        print(f"no peer skipped (no single run predicted or found above {args.max_single:.0f} s)")
    print("\nposterior agreement:")
    for a in agreement:
        parts = [f"n={a['n']} m={a['m']}:"]
        if "choix_max_abs_mean_diff" in a:
            parts.append(
                f"choix vs bayesrank (K=I): max|dmean| {a['choix_max_abs_mean_diff']:.2e}, "
                f"max|dcov| {a['choix_max_abs_cov_diff']:.2e}"
            )
        if "choix_mixed_max_abs_mean_diff" in a:
            parts.append(f"[mixed: vs choix {a['choix_mixed_max_abs_mean_diff']:.2e}")
            parts.append(f"vs full {a.get('mixed_full_max_abs_mean_diff', float('nan')):.2e}]")
        tight = a.get("tight")
        if isinstance(tight, dict):
            parts.append(
                f"[tight stops: {tight['max_abs_mean_diff']:.1e}, {tight['max_abs_cov_diff']:.1e}]"
            )
        if "botorch_laplace_mean_corr" in a:
            parts.append(
                f"| Laplace MAP/sqrt2 vs EP mean (RBF): max|d| "
                f"{a['botorch_laplace_max_abs_mean_diff']:.2e}, "
                f"corr {a['botorch_laplace_mean_corr']:.5f}"
            )
        print("  " + " ".join(parts))
    goal = summary["goal_n1000_m2000"]
    if goal:
        print(
            "\ngoal at n=1000, m=2000 (bayesrank EP >= 30x faster than choix, >= 10x than "
            "BoTorch fit):"
        )
        if "choix_over_bayesrank" in goal:
            met = "MET" if goal["choix_goal_30x_met"] else "NOT met"
            print(f"  choix / bayesrank = {goal['choix_over_bayesrank']:.2f}x -> {met}")
        if "botorch_fit_over_bayesrank" in goal:
            met = "MET" if goal["botorch_fit_goal_10x_met"] else "NOT met"
            print(f"  BoTorch fit / bayesrank = {goal['botorch_fit_over_bayesrank']:.2f}x -> {met}")
        for key, name in (("choix", "choix"), ("botorch_fit", "BoTorch fit")):
            r = goal.get(f"{key}_over_bayesrank_mixed")
            if r is not None:
                print(f"  {name} / bayesrank (precision='mixed') = {r:.2f}x")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    p.add_argument("--sizes", default="150x200,300x600,1000x2000", help="n x m, comma-separated")
    p.add_argument("--repeats", type=int, default=3, help="steady-state calls per method/size")
    p.add_argument("--budget", type=float, default=60.0, help="seconds of repeats per method/size")
    p.add_argument("--max-single", type=float, default=120.0, help="skip a run beyond this (s)")
    p.add_argument("--methods", default="", help="comma-separated subset of: " + ",".join(METHODS))
    p.add_argument("--tight-max-n", type=int, default=300, help="tight choix check up to this n")
    p.add_argument("--worker", help=argparse.SUPPRESS)
    p.add_argument("--n", type=int, help=argparse.SUPPRESS)
    p.add_argument("--m", type=int, help=argparse.SUPPRESS)
    p.add_argument("--save", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.worker:
        run_worker(args)
    else:
        main_driver(args)


if __name__ == "__main__":
    main()
