"""Hyperparameter fitting: bayesrank (EM-EP, EP evidence) vs BoTorch ``PairwiseGP`` (Laplace).

Issue 5's benchmark. Problems as in ``bench_ep.py`` (``X ~ N(0, I_5)``, a smooth utility, noisy
winners), with ``m`` known pairs and ``H`` held-out distinct pairs on the same ``n`` entities.
Each method fits an RBF-ARD prior's hyperparameters on the known pairs, from its own defaults,
and predicts the held-out pairs:

- ``bayesrank-em``: ``fit_hyperparameters(XPGP(ARD()), problem, method="em")`` with its defaults
  (median-heuristic start, MAP-II hyperprior, L-BFGS M-steps);
- ``bayesrank-evidence``: the same with ``method="evidence"``;
- ``bayesrank-laplace``: the same with the Laplace evidence (``inference="laplace"``), the
  approximation BoTorch's ``PairwiseGP`` makes; the held-out log-likelihood from its posterior;
- ``bayesrank-evidence-coarse``: the same with ``coarse=n // 2`` (a first fit on half the
  entities starts the full fit; the same objective);
- ``botorch-fit``: ``PairwiseGP(X, comparisons)`` (its default ``ScaleKernel(RBF-ARD)`` with its
  priors) and ``fit_gpytorch_mll(PairwiseLaplaceMarginalLogLikelihood)``.

Held-out log-likelihood: mean ``log P(observed winner)`` over the held-out pairs, with
``P = Phi(dmu / sqrt(1 + dvar))`` for bayesrank (likelihood ``Phi(xi_i - xi_j)``) and
``Phi(dmu / sqrt(2 + dvar))`` for BoTorch (likelihood ``Phi((f_i - f_j) / sqrt 2)``), each from
its own posterior over the entities' utilities. bayesrank runs under ``jit`` in float64, its
compile time reported apart (first call minus the best later call); torch in float64 with 2
threads. Each method and size runs in its own process.

``--device gpu`` runs both sides on the first GPU: bayesrank on JAX's default (GPU) backend,
BoTorch with its tensors on ``cuda``. The default, ``cpu``, hides GPUs from JAX.

Usage::

    python benchmarks/bench_learning.py [--sizes 150x200,300x600,1000x2000] [--held-out 1000]
        [--repeats 3] [--methods bayesrank-em,bayesrank-evidence,botorch-fit] [--device cpu|gpu]
"""

from __future__ import annotations

import argparse
import datetime
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_ep import SEED, D, machine_info, make_problem

OUT = Path(__file__).resolve().parent / "out" / "bench_learning.json"
METHODS = (
    "bayesrank-em",
    "bayesrank-evidence",
    "bayesrank-evidence-coarse",
    "bayesrank-laplace",
    "botorch-fit",
)


def split_problem(n, m, held_out):
    """``X``, known pairs ``(m, 2)`` and held-out pairs ``(held_out, 2)``, all distinct."""
    X, pairs = make_problem(n, m + held_out)
    return X, pairs[:m], pairs[m:]


def log_phi(z):
    from scipy.special import log_ndtr

    return log_ndtr(z)


def held_out_loglik(mean, cov, pairs, noise_var):
    """Mean ``log Phi(dmu / sqrt(noise_var + dvar))`` over ``pairs`` (winner first)."""
    i, j = pairs[:, 0], pairs[:, 1]
    dmu = mean[i] - mean[j]
    dvar = cov[i, i] + cov[j, j] - 2 * cov[i, j]
    return float(np.mean(log_phi(dmu / np.sqrt(noise_var + dvar))))


def worker_bayesrank(n, m, held_out, method, repeats, device):
    import os

    if device == "cpu":
        os.environ["JAX_PLATFORMS"] = "cpu"
    import jax

    jax.config.update("jax_enable_x64", True)
    from bayesrank.runtime import enable_compilation_cache

    enable_compilation_cache()  # compiled programs kept on disk between runs
    import jax.numpy as jnp

    from bayesrank import ARD, XPGP, PreferenceProblem
    from bayesrank.learning import fit_hyperparameters

    X, known, test = split_problem(n, m, held_out)
    problem = PreferenceProblem.create(known, X=X)
    prior = XPGP(ARD(1.0, jnp.ones(D)), ())

    coarse, inference = None, "ep"
    if method == "evidence-coarse":
        method, coarse = "evidence", n // 2
    if method == "laplace":
        method, inference = "evidence", "laplace"

    def call():
        fit = fit_hyperparameters(prior, problem, method=method, coarse=coarse, inference=inference)
        return jax.block_until_ready(fit)

    times = []
    for _ in range(repeats + 1):
        start = time.perf_counter()
        fit = call()
        times.append(time.perf_counter() - start)
    post = jax.tree_util.tree_map(lambda x: np.asarray(x[0]), fit.posteriors)
    fitted = fit.prior
    return {
        "first_call_s": times[0],
        "times_s": times[1:],
        "compile_s": times[0] - min(times[1:]),
        "held_out_loglik": held_out_loglik(post.mean, post.cov, test, 1.0),
        "train_loglik_ep_evidence": float(post.log_evidence),
        "iterations": int(fit.trace.objective.shape[0]),
        "ep_converged": bool(post.converged),
        "fitted": {
            "w": np.asarray(fitted.weights).tolist(),
            "lengthscales": np.asarray(fitted.attribute.lengthscales).ravel().tolist(),
        },
        "versions": {"jax": jax.__version__},
        "device": str(jax.devices()[0].device_kind),
    }


def worker_botorch(n, m, held_out, repeats, device):
    import warnings

    import torch

    torch.set_num_threads(2)
    dev = torch.device("cuda" if device == "gpu" else "cpu")
    import botorch
    from botorch.fit import fit_gpytorch_mll
    from botorch.models.pairwise_gp import PairwiseGP, PairwiseLaplaceMarginalLogLikelihood

    X, known, test = split_problem(n, m, held_out)
    Xt = torch.tensor(X, dtype=torch.float64, device=dev)
    comp = torch.tensor(known, dtype=torch.long, device=dev)

    def call(Xt, comp):
        np.random.seed(SEED)  # noqa: NPY002 (PairwiseGP perturbs its fsolve start with it)
        model = PairwiseGP(Xt, comp)
        mll = PairwiseLaplaceMarginalLogLikelihood(model.likelihood, model)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            fit_gpytorch_mll(mll)
        return model

    Xw, pw, _ = split_problem(20, 30, 0)
    warm = torch.tensor(Xw, dtype=torch.float64, device=dev), torch.tensor(pw, device=dev)
    call(*warm)  # warm-up (first-use costs)
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        model = call(Xt, comp)
        if dev.type == "cuda":
            torch.cuda.synchronize()
        times.append(time.perf_counter() - start)
    model.eval()
    with torch.no_grad():
        post = model.posterior(Xt)
        mean = post.mean.squeeze(-1).cpu().numpy()
        cov = post.covariance_matrix.cpu().numpy()
    return {
        "first_call_s": times[0],
        "times_s": times,
        "compile_s": None,
        "held_out_loglik": held_out_loglik(mean, cov, test, 2.0),
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


def run_worker(args):
    if args.worker == "botorch-fit":
        out = worker_botorch(args.n, args.m, args.held_out, args.repeats, args.device)
    else:
        method = args.worker.split("-", 1)[1]
        out = worker_bayesrank(args.n, args.m, args.held_out, method, args.repeats, args.device)
    out["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0
    Path(args.result).write_text(json.dumps(out))


def spawn(method, n, m, args, tmp):
    result = tmp / f"{method}-{n}-{m}.json"
    cmd = [sys.executable, str(Path(__file__).resolve()), "--worker", method, "--n", str(n)]
    cmd += ["--m", str(m), "--held-out", str(args.held_out), "--repeats", str(args.repeats)]
    cmd += ["--result", str(result), "--device", args.device]
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if proc.returncode != 0 or not result.exists():
        return {"error": (proc.stderr or proc.stdout)[-2000:]}
    return json.loads(result.read_text())


def main_driver(args):
    sizes = [tuple(int(v) for v in s.lower().split("x")) for s in args.sizes.split(",")]
    methods = [mth for mth in METHODS if not args.methods or mth in args.methods.split(",")]
    info = machine_info()
    print(f"machine: {info['cpu']}, {info['cores']} cores; held-out pairs {args.held_out}")
    print(f"device: {args.device}")
    records = []
    with tempfile.TemporaryDirectory() as tmpdir:
        for n, m in sizes:
            for mth in methods:
                rec = {"n": n, "m": m, "method": mth, **spawn(mth, n, m, args, Path(tmpdir))}
                if "times_s" in rec:
                    rec["best_s"] = min(rec["times_s"])
                records.append(rec)
                print(f"  done n={n} m={m} {mth}: {rec.get('error', 'ok')[-300:]}", flush=True)
    index = {(r["n"], r["m"], r["method"]): r for r in records}
    for r in records:
        peer = index.get((r["n"], r["m"], "botorch-fit"))
        if r["method"] != "botorch-fit" and peer and "best_s" in peer and "best_s" in r:
            r["botorch_over_bayesrank"] = peer["best_s"] / r["best_s"]
            r["loglik_minus_botorch"] = r["held_out_loglik"] - peer["held_out_loglik"]
    head = (
        f"{'n':>5} {'m':>5}  {'method':<19} {'compile s':>9} {'best s':>8} {'held-out ll':>11} "
        f"{'peak MB':>8} {'BoTorch/us':>10} {'ll - BoTorch':>12}"
    )
    print("\n" + head + "\n" + "-" * len(head))
    for r in records:
        lead = f"{r['n']:>5} {r['m']:>5}  {r['method']:<19}"
        if "best_s" not in r:
            print(f"{lead} ERROR {r.get('error', '')[-200:]}")
            continue
        comp = "-" if r["compile_s"] is None else f"{r['compile_s']:.2f}"
        ratio = r.get("botorch_over_bayesrank")
        dll = r.get("loglik_minus_botorch")
        print(
            f"{lead} {comp:>9} {r['best_s']:8.3f} {r['held_out_loglik']:11.4f} "
            f"{r['peak_rss_mb']:8.0f} {'-' if ratio is None else f'{ratio:.2f}':>10} "
            f"{'-' if dll is None else f'{dll:+.4f}':>12}"
        )
    print("\nBoTorch/us = BoTorch's best fit time / ours (steady state); ll = mean held-out log P.")
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    payload = {
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
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
    out.write_text(json.dumps(payload, indent=2))
    print(f"wrote {out}")


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    p.add_argument("--sizes", default="150x200,300x600,1000x2000", help="n x m, comma-separated")
    p.add_argument("--held-out", type=int, default=1000, help="held-out pairs per problem")
    p.add_argument("--repeats", type=int, default=2, help="timed fits after the first")
    p.add_argument("--methods", default="", help="comma-separated subset of: " + ",".join(METHODS))
    p.add_argument("--device", choices=("cpu", "gpu"), default="cpu", help="where both sides run")
    p.add_argument("--out", default=str(OUT), help="JSON results file")
    p.add_argument("--worker", help=argparse.SUPPRESS)
    p.add_argument("--n", type=int, help=argparse.SUPPRESS)
    p.add_argument("--m", type=int, help=argparse.SUPPRESS)
    p.add_argument("--result", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.worker:
        run_worker(args)
    else:
        main_driver(args)


if __name__ == "__main__":
    main()
