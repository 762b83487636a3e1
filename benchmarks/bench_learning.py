"""Hyperparameter fitting: bayesrank (EM-EP, EP evidence) vs BoTorch ``PairwiseGP`` (Laplace).

Issue 5's benchmark, in two modes.

**Synthetic problems (the default).** Problems as in ``bench_ep.py`` (``X ~ N(0, I_5)``, a
smooth utility, noisy winners), with ``m`` known pairs and ``H`` held-out distinct pairs on the
same ``n`` entities. Each method fits an RBF-ARD prior's hyperparameters on the known pairs, from
its own defaults, and predicts the held-out pairs:

- ``bayesrank-em``: ``fit_hyperparameters(XPGP(ARD()), problem, method="em")`` with its defaults
  (median-heuristic start, MAP-II hyperprior, L-BFGS M-steps);
- ``bayesrank-evidence``: the same with ``method="evidence"`` (the default since issue 18, with
  its default ``coarse="auto"``: a first fit on half the entities from 500 touched entities on);
- ``bayesrank-laplace``: the same with the Laplace evidence (``inference="laplace"``), the
  approximation BoTorch's ``PairwiseGP`` makes; the held-out log-likelihood from its posterior;
- ``bayesrank-evidence-coarse``: the same with ``start=Start(coarse=n // 2)`` (a first fit on
  half the entities starts the full fit; the same objective);
- ``botorch-fit``: ``PairwiseGP(X, comparisons)`` (its default ``ScaleKernel(RBF-ARD)`` with its
  priors) and ``fit_gpytorch_mll(PairwiseLaplaceMarginalLogLikelihood)``.

Each bayesrank method and size runs in two fresh processes on one new, empty compilation cache
directory (``BAYESRANK_CACHE_DIR``): the first (cold) compiles and writes the cache in its first
call, the second (warm) loads the compiled programs from disk in its first call. Reported: the
first fit call's wall time in each (``first_call_cold_s``, ``first_call_warm_s``; imports
excluded, ``import_s`` apart: from the process's spawn to its imports done, interpreter start
included), and the steady state ``best_s``, the best of the later calls of both processes
(``compile_s`` = cold first call minus ``best_s``). BoTorch compiles nothing: its first call in a
fresh process (``first_call_s``, after its imports, before any warm-up) is its first-call figure;
its steady state is the best of the calls after an untimed warm-up. Ratios: BoTorch's best over
ours (steady state) and BoTorch's first call over our cold and our warm first calls.

Held-out pair error (the fraction of held-out pairs whose probability of the observed winner is
below 0.5) and log-likelihood: mean ``log P(observed winner)`` over the held-out pairs, with
``P = Phi(dmu / sqrt(1 + dvar))`` for bayesrank (likelihood ``Phi(xi_i - xi_j)``) and
``Phi(dmu / sqrt(2 + dvar))`` for BoTorch (likelihood ``Phi((f_i - f_j) / sqrt 2)``), each from
its own posterior over the entities' utilities. bayesrank runs the public API (its façades' own
``jit``, none added here) in float64; torch in float64 with 2 threads.

**OHSUMED, every query its own fit (``--ohsumed [DATA_DIR]``).** All 106 LETOR 3.0 OHSUMED
queries (the union of ``QueryLevelNorm/Fold1/{train,vali,test}``, 45 features as ``X``). Per query:
all preference pairs from the grades (``pairs_from_grades``) and a seeded random split
(``split_pairs``) into at most 150 known pairs (at least a fifth of a query's pairs held out), the
rest held out; queries with no pair are skipped (reported). Each in a fresh process, the wall
time of fitting all queries, compilation included (imports apart):

- ``bayesrank-{laplace,ep}-ard``: one call, ``fit_hyperparameters(XPGP(ARD(1.0, ones(45)), ()),
  problems, per_query=True, method="evidence", inference="laplace" | "ep")``, every query's own
  hyperparameters; a cold cache, then a second process on the same cache (warm);
- ``bayesrank-{laplace,ep}-rbf``: the same with the isotropic ``XPGP(RBF(1.0, 1.0), ())`` (2
  hyperparameters a query instead of 46), cold cache only;
- ``botorch-loop``: a Python loop over the queries, ``PairwiseGP(X, comparisons)`` (default
  ``ScaleKernel(RBF-ARD)`` over the 45 features) and ``fit_gpytorch_mll``, ``np.random.seed``
  before each; its predictions are timed apart (``predict_s``).

Per method: the mean over queries of the held-out pair error (the fraction of held-out pairs whose
predicted probability of the observed winner is below 0.5) and of the mean held-out
log-likelihood (the conventions above; bayesrank's ``1`` is ``2 sigma^2`` of the fitted prior),
and BoTorch's loop time over ours. ``--max-queries K`` keeps the first ``K`` queries (a quick
check). Written to ``benchmarks/out/bench_learning_ohsumed.json``, per-query figures included.

``--device gpu`` runs both sides on the first GPU: bayesrank on JAX's default (GPU) backend,
BoTorch with its tensors on ``cuda``. The default, ``cpu``, hides GPUs from JAX
(``JAX_PLATFORMS=cpu``).

Usage::

    python benchmarks/bench_learning.py [--sizes 150x200,300x600,1000x2000] [--held-out 1000]
        [--repeats 2] [--methods bayesrank-em,bayesrank-evidence,botorch-fit] [--device cpu|gpu]
    python benchmarks/bench_learning.py --ohsumed [DATA_DIR] [--max-queries K]
        [--methods bayesrank-laplace-ard,bayesrank-ep-ard,botorch-loop] [--timeout S]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _harness as harness
from _harness import fmt
from bench_ep import SEED, D, make_problem

OUT = Path(__file__).resolve().parent / "out" / "bench_learning.json"
OUT_OHSUMED = Path(__file__).resolve().parent / "out" / "bench_learning_ohsumed.json"
DATA_DIR = Path(__file__).resolve().parents[1].parent / "shared" / "data"
METHODS = (
    "bayesrank-em",
    "bayesrank-evidence",
    "bayesrank-evidence-coarse",
    "bayesrank-laplace",
    "botorch-fit",
)
# OHSUMED mode: name -> (attribute kernel, inference engine, also run with the cache warm)
OHSUMED_METHODS = {
    "bayesrank-laplace-ard": ("ard", "laplace", True),
    "bayesrank-ep-ard": ("ard", "ep", True),
    "bayesrank-laplace-rbf": ("rbf", "laplace", False),
    "bayesrank-ep-rbf": ("rbf", "ep", False),
    "botorch-loop": (None, None, False),
}
OHSUMED_KNOWN = 150  # known pairs per query, at most
OHSUMED_FILES = ("train", "vali", "test")


def split_problem(n, m, held_out):
    """``X``, known pairs ``(m, 2)`` and held-out pairs ``(held_out, 2)``, all distinct."""
    X, pairs = make_problem(n, m + held_out)
    return X, pairs[:m], pairs[m:]


def log_phi(z):
    from scipy.special import log_ndtr

    return log_ndtr(z)


def held_out_loglik(mean, cov, pairs, noise_var):
    """Mean ``log Phi(dmu / sqrt(noise_var + dvar))`` over ``pairs`` (winner first)."""
    return held_out_scores(mean, cov, pairs, noise_var)[0]


def held_out_scores(mean, cov, pairs, noise_var):
    """``(mean log P(winner), fraction of pairs with P(winner) < 0.5)`` over ``pairs``."""
    i, j = pairs[:, 0], pairs[:, 1]
    dmu = mean[i] - mean[j]
    dvar = cov[i, i] + cov[j, j] - 2 * cov[i, j]
    z = dmu / np.sqrt(noise_var + dvar)
    return float(np.mean(log_phi(z))), float(np.mean(z < 0))


def cache_entries():
    """Files in ``BAYESRANK_CACHE_DIR`` (the worker's compilation cache), or ``None``."""
    path = os.environ.get("BAYESRANK_CACHE_DIR")
    if not path or path == "off" or not Path(path).is_dir():
        return None
    return sum(len(files) for _, _, files in os.walk(path))


# ---------------------------------------------------------------------------------------------
# Workers (each in its own process)
# ---------------------------------------------------------------------------------------------


def worker_bayesrank(n, m, held_out, method, repeats, device):
    jax = harness.setup_jax(cache=False, platforms="cpu" if device == "cpu" else None)
    from bayesrank.runtime import enable_compilation_cache

    cache = enable_compilation_cache()  # BAYESRANK_CACHE_DIR, a directory set by the driver
    import jax.numpy as jnp

    from bayesrank import ARD, XPGP, PreferenceProblem
    from bayesrank.learning import Start, fit_hyperparameters

    import_s = harness.since_spawn()
    X, known, test = split_problem(n, m, held_out)
    problem = PreferenceProblem.create(known, X=X)
    prior = XPGP(ARD(1.0, jnp.ones(D)), ())

    options = {"inference": "ep"}  # the library's defaults otherwise (coarse="auto")
    if method == "evidence-coarse":
        method, options["start"] = "evidence", Start(coarse=n // 2)
    if method == "laplace":
        method, options["inference"] = "evidence", "laplace"

    def call():
        fit = fit_hyperparameters(prior, problem, method=method, **options)
        return jax.block_until_ready(fit)

    times, fit = harness.repeat(call, repeats + 1)  # the first call, then the steady state
    post = jax.tree_util.tree_map(lambda x: np.asarray(x[0]), fit.posteriors)
    fitted = fit.prior
    return {
        "import_s": import_s,
        "first_call_s": times[0],
        "times_s": times[1:],
        "held_out_loglik": held_out_loglik(post.mean, post.cov, test, 1.0),
        "held_out_error": held_out_scores(post.mean, post.cov, test, 1.0)[1],
        "train_loglik_ep_evidence": float(post.log_evidence),
        "iterations": int(fit.trace.objective.shape[0]),
        "ep_converged": bool(post.converged),
        "fitted": {
            "w": np.asarray(fitted.weights).tolist(),
            "lengthscales": np.asarray(fitted.attribute.lengthscales).ravel().tolist(),
        },
        "cache_dir": None if cache is None else str(cache),
        "cache_entries": cache_entries(),
        "versions": {"jax": jax.__version__},
        "device": str(jax.devices()[0].device_kind),
    }


def botorch_fit(PairwiseGP, MLL, fit_gpytorch_mll, Xt, comp):
    """``PairwiseGP(Xt, comp)`` fitted by ``fit_gpytorch_mll``, warnings suppressed."""
    import warnings

    np.random.seed(SEED)  # noqa: NPY002 (PairwiseGP perturbs its fsolve start with it)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = PairwiseGP(Xt, comp)
        fit_gpytorch_mll(MLL(model.likelihood, model))
    return model


def worker_botorch(n, m, held_out, repeats, device):
    torch = harness.setup_torch()
    dev = torch.device("cuda" if device == "gpu" else "cpu")
    import botorch
    from botorch.fit import fit_gpytorch_mll
    from botorch.models.pairwise_gp import PairwiseGP, PairwiseLaplaceMarginalLogLikelihood

    import_s = harness.since_spawn()
    X, known, test = split_problem(n, m, held_out)
    Xt = torch.tensor(X, dtype=torch.float64, device=dev)
    comp = torch.tensor(known, dtype=torch.long, device=dev)

    def call(Xt, comp):
        model = botorch_fit(
            PairwiseGP, PairwiseLaplaceMarginalLogLikelihood, fit_gpytorch_mll, Xt, comp
        )
        if dev.type == "cuda":
            torch.cuda.synchronize()
        return model

    first, _ = harness.timed(call, Xt, comp)  # the first call here: first-use costs included
    Xw, pw, _ = split_problem(20, 30, 0)
    warm = torch.tensor(Xw, dtype=torch.float64, device=dev), torch.tensor(pw, device=dev)
    call(*warm)  # warm-up (first-use costs at another shape)
    times, model = harness.repeat(lambda: call(Xt, comp), repeats)
    model.eval()
    with torch.no_grad():
        post = model.posterior(Xt)
        mean = post.mean.squeeze(-1).cpu().numpy()
        cov = post.covariance_matrix.cpu().numpy()
    return {
        "import_s": import_s,
        "first_call_s": first,
        "times_s": times,
        "compile_s": None,
        "held_out_loglik": held_out_loglik(mean, cov, test, 2.0),
        "held_out_error": held_out_scores(mean, cov, test, 2.0)[1],
        "fitted": {
            "outputscale": float(model.covar_module.outputscale),
            "lengthscales": model.covar_module.base_kernel.lengthscale.detach()
            .cpu()
            .numpy()
            .ravel()
            .tolist(),
        },
        "versions": {"torch": torch.__version__, "botorch": botorch.__version__},
        "device": torch.cuda.get_device_name(dev) if dev.type == "cuda" else "cpu",
    }


def load_ohsumed_npz(path):
    """``(qids, [(X, known, held_out), ...])`` as the driver wrote them."""
    with np.load(path) as z:
        qids = [str(q) for q in z["qids"]]
        queries = [(z[f"X_{k}"], z[f"known_{k}"], z[f"held_{k}"]) for k in range(len(qids))]
    return qids, queries


def worker_ohsumed_bayesrank(data, kernel, engine, device):
    jax = harness.setup_jax(cache=False, platforms="cpu" if device == "cpu" else None)
    from bayesrank.runtime import enable_compilation_cache

    cache = enable_compilation_cache()  # BAYESRANK_CACHE_DIR, a directory set by the driver
    import jax.numpy as jnp

    from bayesrank import ARD, RBF, XPGP, PreferenceProblem
    from bayesrank.learning import fit_hyperparameters

    import_s = harness.since_spawn()
    qids, queries = load_ohsumed_npz(data)
    d = queries[0][0].shape[1]
    problems = [PreferenceProblem.create(known, X=X) for X, known, _ in queries]
    prior = XPGP(ARD(1.0, jnp.ones(d)), ()) if kernel == "ard" else XPGP(RBF(1.0, 1.0), ())

    def call():
        fit = fit_hyperparameters(
            prior, problems, per_query=True, method="evidence", inference=engine
        )
        return jax.block_until_ready(fit)

    total, fit = harness.timed(call)

    post = jax.device_get(fit.posteriors)  # leading query axis, entities padded
    fitted = jax.device_get(fit.prior)
    sigma = np.broadcast_to(np.asarray(fitted.sigma, dtype=float).reshape(-1), (len(queries),))
    per_query = []
    for b, (X, _, held) in enumerate(queries):
        n = X.shape[0]
        ll, err = held_out_scores(
            post.mean[b, :n], post.cov[b, :n, :n], held, 2.0 * float(sigma[b]) ** 2
        )
        per_query.append({"qid": qids[b], "ll": ll, "pair_error": err})
    att = fitted.attribute  # its kappa is frozen by default (the weight w is the scale)
    if kernel == "rbf":
        scale = {"rho": np.asarray(att.rho).reshape(len(queries), -1)[:, 0].tolist()}
    else:
        ell = np.asarray(att.lengthscales).reshape(len(queries), -1)
        scale = {"lengthscales_median": np.median(ell, axis=1).tolist()}
    return {
        "import_s": import_s,
        "total_s": total,
        "queries": len(queries),
        "mean_pair_error": float(np.mean([r["pair_error"] for r in per_query])),
        "mean_loglik": float(np.mean([r["ll"] for r in per_query])),
        "converged": int(np.sum(np.asarray(fit.converged))),
        "trace_length": int(np.asarray(fit.trace.objective).shape[-1]),
        "entities_padded_to": int(post.mean.shape[1]),
        "per_query": per_query,
        "fitted": {
            "w": np.asarray(fitted.weights).reshape(len(queries), -1)[:, 0].tolist(),
            **scale,
        },
        "cache_dir": None if cache is None else str(cache),
        "cache_entries": cache_entries(),
        "versions": {"jax": jax.__version__},
        "device": str(jax.devices()[0].device_kind),
    }


def worker_ohsumed_botorch(data, device):
    torch = harness.setup_torch()
    dev = torch.device("cuda" if device == "gpu" else "cpu")
    import botorch
    from botorch.fit import fit_gpytorch_mll
    from botorch.models.pairwise_gp import PairwiseGP, PairwiseLaplaceMarginalLogLikelihood

    import_s = harness.since_spawn()
    qids, queries = load_ohsumed_npz(data)
    tensors = [
        (
            torch.tensor(X, dtype=torch.float64, device=dev),
            torch.tensor(known, dtype=torch.long, device=dev),
        )
        for X, known, _ in queries
    ]

    models, errors, per_query_s = [], {}, []
    start = time.perf_counter()
    for k, (Xt, comp) in enumerate(tensors):
        t0 = time.perf_counter()
        try:
            model = botorch_fit(
                PairwiseGP, PairwiseLaplaceMarginalLogLikelihood, fit_gpytorch_mll, Xt, comp
            )
        except Exception as exc:  # reported, and the loop goes on
            model, errors[qids[k]] = None, f"{type(exc).__name__}: {exc}"[:500]
        models.append(model)
        per_query_s.append(time.perf_counter() - t0)
    if dev.type == "cuda":
        torch.cuda.synchronize()
    total = time.perf_counter() - start

    start = time.perf_counter()
    per_query = []
    for k, (model, (Xt, _)) in enumerate(zip(models, tensors, strict=True)):
        if model is None:
            continue
        model.eval()
        with torch.no_grad():
            post = model.posterior(Xt)
            mean = post.mean.squeeze(-1).cpu().numpy()
            cov = post.covariance_matrix.cpu().numpy()
        ll, err = held_out_scores(mean, cov, queries[k][2], 2.0)
        per_query.append(
            {
                "qid": qids[k],
                "ll": ll,
                "pair_error": err,
                "outputscale": float(model.covar_module.outputscale),
            }
        )
    predict = time.perf_counter() - start
    return {
        "import_s": import_s,
        "total_s": total,
        "predict_s": predict,
        "queries": len(queries),
        "failed": errors,
        "mean_pair_error": float(np.mean([r["pair_error"] for r in per_query])),
        "mean_loglik": float(np.mean([r["ll"] for r in per_query])),
        "per_query_s": per_query_s,
        "per_query": per_query,
        "versions": {"torch": torch.__version__, "botorch": botorch.__version__},
        "device": torch.cuda.get_device_name(dev) if dev.type == "cuda" else "cpu",
    }


def run_worker(args):
    if args.data:
        kernel, engine, _ = OHSUMED_METHODS[args.worker]
        if args.worker == "botorch-loop":
            out = worker_ohsumed_botorch(args.data, args.device)
        else:
            out = worker_ohsumed_bayesrank(args.data, kernel, engine, args.device)
    elif args.worker == "botorch-fit":
        out = worker_botorch(args.n, args.m, args.held_out, args.repeats, args.device)
    else:
        method = args.worker.split("-", 1)[1]
        out = worker_bayesrank(args.n, args.m, args.held_out, method, args.repeats, args.device)
    out["peak_rss_mb"] = harness.peak_rss_mb()
    harness.emit(out)


# ---------------------------------------------------------------------------------------------
# Driver
# ---------------------------------------------------------------------------------------------


def spawn(method, args, cache=None, extra=()):
    """Run one worker in a fresh process; its JSON result, or ``{"error": ...}``."""
    argv = [Path(__file__).resolve(), "--worker", method, "--device", args.device, *extra]
    env = {"BAYESRANK_CACHE_DIR": str(cache) if cache else "off"}
    if args.device == "cpu":
        env["JAX_PLATFORMS"] = "cpu"
    try:
        return harness.spawn(*argv, env=env, timeout=args.timeout)
    except subprocess.TimeoutExpired:
        return {"error": f"timed out after {args.timeout} s"}
    except harness.WorkerError as err:
        return {"error": str(err)[-3000:]}


def spawn_size(method, n, m, args, cache=None):
    extra = ["--n", n, "--m", m, "--held-out", args.held_out, "--repeats", args.repeats]
    return spawn(method, args, cache, extra)


def cold_and_warm(method, n, m, args):
    """A bayesrank method at one size: a cold and a warm process on a new cache directory."""
    runs = {state: spawn_size(method, n, m, args, dir_) for state, dir_ in harness.cold_and_warm()}
    cold, warm = runs["cold"], runs["warm"]
    if "error" in cold:
        return {"error": cold["error"], "warm": warm}
    rec = dict(cold)
    rec["first_call_cold_s"] = cold["first_call_s"]
    rec["import_cold_s"] = cold["import_s"]
    rec["cache_entries_cold"] = cold["cache_entries"]
    times = list(cold["times_s"])
    if "error" in warm:
        rec["warm_error"] = warm["error"]
    else:
        rec["first_call_warm_s"] = warm["first_call_s"]
        rec["import_warm_s"] = warm["import_s"]
        rec["warm_times_s"] = warm["times_s"]
        rec["held_out_loglik_warm"] = warm["held_out_loglik"]
        rec["cache_entries_warm"] = warm["cache_entries"]
        rec["peak_rss_mb_warm"] = warm["peak_rss_mb"]
        times += warm["times_s"]
    if times:
        rec["best_s"] = min(times)
        rec["compile_s"] = cold["first_call_s"] - rec["best_s"]
    return rec


def main_driver(args):
    sizes = harness.parse_sizes(args.sizes)
    methods = [mth for mth in METHODS if not args.methods or mth in args.methods.split(",")]
    info = harness.machine_info()
    print(f"machine: {info['cpu']}, {info['cores']} cores; held-out pairs {args.held_out}")
    print(f"device: {args.device}")
    records = []
    for n, m in sizes:
        for mth in methods:
            if mth == "botorch-fit":
                out = spawn_size(mth, n, m, args)
            else:
                out = cold_and_warm(mth, n, m, args)
            rec = {"n": n, "m": m, "method": mth, **out}
            if rec.get("times_s") and "best_s" not in rec:
                rec["best_s"] = min(rec["times_s"])
            records.append(rec)
            status = rec.get("error", rec.get("warm_error", "ok"))
            print(f"  done n={n} m={m} {mth}: {status[-300:]}", flush=True)
    index = {(r["n"], r["m"], r["method"]): r for r in records}
    for r in records:
        peer = index.get((r["n"], r["m"], "botorch-fit"))
        if r["method"] == "botorch-fit" or not peer or "best_s" not in peer or "best_s" not in r:
            continue
        r["botorch_over_bayesrank"] = peer["best_s"] / r["best_s"]
        r["botorch_first_over_cold"] = peer["first_call_s"] / r["first_call_cold_s"]
        if "first_call_warm_s" in r:
            r["botorch_first_over_warm"] = peer["first_call_s"] / r["first_call_warm_s"]
        r["loglik_minus_botorch"] = r["held_out_loglik"] - peer["held_out_loglik"]
    head = (
        f"{'n':>5} {'m':>5}  {'method':<25} {'import s':>8} {'1st cold':>8} {'1st warm':>8} "
        f"{'best s':>8} {'held-out ll':>11} {'error':>6} {'peak MB':>7}  {'BoTorch/us: best':>16} "
        f"{'1st/cold':>8} {'1st/warm':>8} {'ll - BoTorch':>12}"
    )
    print("\n" + head + "\n" + "-" * len(head))
    for r in records:
        lead = f"{r['n']:>5} {r['m']:>5}  {r['method']:<25}"
        if "best_s" not in r:
            print(f"{lead} ERROR {r.get('error', '')[-300:]}")
            continue
        dll = r.get("loglik_minus_botorch")
        cold = r.get("first_call_cold_s", r["first_call_s"])  # BoTorch: its fresh first call
        print(
            f"{lead} {fmt(r.get('import_s'), '8.2f')} {cold:8.3f} "
            f"{fmt(r.get('first_call_warm_s'), '8.3f')} {r['best_s']:8.3f} "
            f"{r['held_out_loglik']:11.4f} {fmt(r.get('held_out_error'), '6.3f')} "
            f"{r['peak_rss_mb']:7.0f}  "
            f"{fmt(r.get('botorch_over_bayesrank'), '16.2f')} "
            f"{fmt(r.get('botorch_first_over_cold'), '8.2f')} "
            f"{fmt(r.get('botorch_first_over_warm'), '8.2f')} "
            f"{'-' if dll is None else f'{dll:+.4f}':>12}"
        )
        if "warm_error" in r:
            print(f"{'':>13}warm run failed: {r['warm_error'][-300:]}")
    print(
        "\n1st cold / 1st warm: the first fit call in a fresh process with an empty / a filled "
        "compilation cache\n(BoTorch, which compiles nothing: its first call in a fresh process, "
        "in the cold column); imports\napart (import s: spawn to imports done, cold process). "
        "best s: the best later call (steady state).\nBoTorch/us = BoTorch's time / ours: best "
        "= steady state; 1st/cold, 1st/warm = BoTorch's fresh first call\nover our cold, warm "
        "first call. ll = mean held-out log P."
    )
    payload = {
        "date": harness.utc_now(),
        "machine": info,
        "settings": {
            "d": D,
            "seed": SEED,
            "held_out": args.held_out,
            "repeats": args.repeats,
            "device": args.device,
        },
        "results": records,
    }
    print(f"wrote {harness.write_json(args.out, payload)}")


def prepare_ohsumed(data_dir, max_queries, path):
    """Load every OHSUMED query, build and split its pairs, write them to ``path`` (npz)."""
    import jax

    from bayesrank.data.letor import load_letor
    from bayesrank.data.pairs import pairs_from_grades, split_pairs

    fold = Path(data_dir) / "OHSUMED" / "QueryLevelNorm" / "Fold1"
    queries = []
    for name in OHSUMED_FILES:
        queries += load_letor(fold / f"{name}.txt.gz", n_features=45)
    qids = [q.qid for q in queries]
    if len(set(qids)) != len(qids):
        raise SystemExit(f"{fold}: a qid appears in more than one of {OHSUMED_FILES}")
    if len(qids) != 106:
        print(f"warning: {len(qids)} distinct qids in {fold}, expected 106")
    queries.sort(key=lambda q: int(q.qid) if q.qid.isdigit() else q.qid)
    key = jax.random.key(SEED)
    arrays, kept, skipped, summary = {}, [], [], []
    for q in queries:
        pairs = pairs_from_grades(q.grades)
        m = pairs.shape[0]
        if m < 2:  # no pair to know and one to hold out
            skipped.append(q.qid)
            continue
        if max_queries is not None and len(kept) >= max_queries:
            continue
        n_known = min(OHSUMED_KNOWN, m - max(1, m // 5))
        known, held = split_pairs(jax.random.fold_in(key, int(q.qid)), pairs, n_known=n_known)
        k = len(kept)
        arrays[f"X_{k}"], arrays[f"known_{k}"], arrays[f"held_{k}"] = q.X, known, held
        kept.append(q.qid)
        summary.append({"qid": q.qid, "n": q.n_docs, "known": n_known, "held_out": m - n_known})
    np.savez(path, qids=np.array(kept), **arrays)
    return {
        "distinct_qids": len(qids),
        "queries": len(kept),
        "skipped_no_pairs": skipped,
        "documents": int(sum(r["n"] for r in summary)),
        "known_pairs": int(sum(r["known"] for r in summary)),
        "held_out_pairs": int(sum(r["held_out"] for r in summary)),
        "per_query": summary,
    }


def main_ohsumed(args):
    if args.device == "cpu":
        os.environ["JAX_PLATFORMS"] = "cpu"  # the driver's own JAX (pair splits only)
    names = [m for m in OHSUMED_METHODS if not args.methods or m in args.methods.split(",")]
    info = harness.machine_info()
    print(f"machine: {info['cpu']}, {info['cores']} cores; device: {args.device}")
    records = []
    with tempfile.TemporaryDirectory() as tmpdir:
        tmp = Path(tmpdir)
        data = tmp / "ohsumed.npz"
        prep = prepare_ohsumed(args.ohsumed, args.max_queries, data)
        print(
            f"OHSUMED ({args.ohsumed}): {prep['distinct_qids']} distinct qids, "
            f"{prep['queries']} queries fitted, {len(prep['skipped_no_pairs'])} skipped (no "
            f"pairs: qid {', '.join(prep['skipped_no_pairs']) or '-'}); "
            f"{prep['documents']} documents, {prep['known_pairs']} known and "
            f"{prep['held_out_pairs']} held-out pairs"
        )
        extra = ["--data", str(data)]
        for name in names:
            _, _, warm = OHSUMED_METHODS[name]
            if name == "botorch-loop":
                runs = [("-", spawn(name, args, None, extra))]
            else:
                runs = [(s, spawn(name, args, c, extra)) for s, c in harness.cold_and_warm(warm)]
            for cache_state, out in runs:
                records.append({"method": name, "cache": cache_state, **out})
                print(f"  done {name} ({cache_state}): {out.get('error', 'ok')[-300:]}", flush=True)
    peer = next((r for r in records if r["method"] == "botorch-loop" and "total_s" in r), None)
    for r in records:
        if peer and r is not peer and "total_s" in r:
            r["botorch_over_bayesrank"] = peer["total_s"] / r["total_s"]
    head = (
        f"{'method':<23} {'cache':<5} {'total s':>8} {'import s':>8} {'queries':>7} "
        f"{'pair error':>10} {'mean ll':>8} {'peak MB':>7} {'BoTorch/us':>10}"
    )
    print("\n" + head + "\n" + "-" * len(head))
    for r in records:
        lead = f"{r['method']:<23} {r['cache']:<5}"
        if "total_s" not in r:
            print(f"{lead} ERROR\n{r.get('error', '')}")
            continue
        print(
            f"{lead} {r['total_s']:8.2f} {fmt(r.get('import_s'), '8.2f')} {r['queries']:7d} "
            f"{r['mean_pair_error']:10.4f} {r['mean_loglik']:8.4f} {r['peak_rss_mb']:7.0f} "
            f"{fmt(r.get('botorch_over_bayesrank'), '10.2f')}"
        )
        if r.get("failed"):
            print(f"{'':>24}{len(r['failed'])} queries failed: {next(iter(r['failed'].values()))}")
        if "converged" in r:
            print(f"{'':>24}converged {r['converged']} of {r['queries']} per-query fits")
    print(
        "\ntotal s: wall time of fitting every query in a fresh process, compilation included "
        "(imports apart:\nspawn to imports done). pair error, mean ll: means over queries of "
        "the held-out pair error and\nmean log P(winner). BoTorch/us: the BoTorch loop's total "
        "over ours."
    )
    if peer:
        slow = int(np.argmax(peer["per_query_s"]))
        print(
            f"BoTorch: predictions {peer['predict_s']:.2f} s (untimed above); slowest query: qid "
            f"{prep['per_query'][slow]['qid']}, {peer['per_query_s'][slow]:.2f} s"
        )
    payload = {
        "date": harness.utc_now(),
        "machine": info,
        "settings": {
            "data_dir": str(args.ohsumed),
            "files": [f"OHSUMED/QueryLevelNorm/Fold1/{f}.txt.gz" for f in OHSUMED_FILES],
            "seed": SEED,
            "max_known": OHSUMED_KNOWN,
            "max_queries": args.max_queries,
            "device": args.device,
        },
        "data": prep,
        "results": records,
    }
    print(f"wrote {harness.write_json(args.out or OUT_OHSUMED, payload)}")


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    p.add_argument("--sizes", default="150x200,300x600,1000x2000", help="n x m, comma-separated")
    p.add_argument("--held-out", type=int, default=1000, help="held-out pairs per problem")
    p.add_argument("--repeats", type=int, default=2, help="timed fits after the first")
    p.add_argument(
        "--methods",
        default="",
        help=f"comma-separated subset of: {','.join(METHODS)}; with --ohsumed, of: "
        f"{','.join(OHSUMED_METHODS)}",
    )
    p.add_argument("--device", choices=("cpu", "gpu"), default="cpu", help="where both sides run")
    p.add_argument("--out", default=None, help="JSON results file")
    p.add_argument(
        "--ohsumed",
        nargs="?",
        const=str(DATA_DIR),
        default=None,
        metavar="DATA_DIR",
        help=f"fit every OHSUMED query its own hyperparameters (data: default {DATA_DIR})",
    )
    p.add_argument("--max-queries", type=int, default=None, help="--ohsumed: the first K only")
    p.add_argument("--timeout", type=float, default=None, help="seconds per worker process")
    p.add_argument("--worker", help=argparse.SUPPRESS)
    p.add_argument("--n", type=int, help=argparse.SUPPRESS)
    p.add_argument("--m", type=int, help=argparse.SUPPRESS)
    p.add_argument("--data", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.worker:
        run_worker(args)
    elif args.ohsumed:
        main_ohsumed(args)
    else:
        args.out = args.out or str(OUT)
        main_driver(args)


if __name__ == "__main__":
    main()
