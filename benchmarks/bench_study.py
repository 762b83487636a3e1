"""A small study as a user runs it: total wall time, compilation included, and accuracy.

Issue 31's measure. The problems: ``experiments/accuracy_data.hetrec_genre_problems`` (8 HetRec
users x 2 seeded splits, 98-216 movies, 150 known pairs, 21 standardised attributes, up to
1,000 held-out pairs each). Each method fits every problem one after another, in one fresh
process, as a study's loop does:

- ``bayesrank``: the README's call, ``XPGPModel(XPGP(RBF())).fit(problem,
  learn_hyperparameters=True)``, with the persistent compilation cache on
  (``bayesrank.runtime.enable_compilation_cache``, as the README's first screen says): a first
  process on a new, empty cache directory (**cold**), then a second process on the same
  directory (**warm**);
- ``bayesrank-plain``: the same with ``start=Start(design=None)`` (BFGS from the median
  heuristic alone, the fit before the global start), cold cache;
- ``bayesrank+e``: ``XPGP(RBF(), entity=Independent())``, the tour's prior, cold then warm;
- ``bayesrank-ard``: ``XPGP(ARD(1.0, ones(d)))`` with BoTorch's hyperpriors
  (``hyperprior="botorch"``: Gamma(2.4, 2.7) on each lengthscale in units of its feature's
  range, a smoothed box on the output scale), BoTorch's own model, cold cache;
- ``botorch``: ``PairwiseGP(X, comparisons)`` with its defaults and ``fit_gpytorch_mll``
  (float64, 2 threads: torch's default on the 2-core machine), ``np.random.seed`` before each
  fit (``inference_accuracy.fit_botorch``); ``botorch-1t``: the same at one thread.

Reported per method: the loop's total wall time (the process's imports and the data's loading
apart), the median and the slowest fit, the mean held-out pair error and log-likelihood
(``P = Phi(dmu / sqrt(1 + dvar))``; BoTorch's ``Phi(dmu / sqrt(2 + dvar))``: its likelihood is
``Phi((f_i - f_j) / sqrt 2)``), the paired difference to BoTorch (wins, Wilcoxon p), and for
bayesrank the design gap (the fit's MAP objective minus the design's best point).

Usage::

    python benchmarks/bench_study.py [--data-dir ../shared/data] [--methods ...]

Writes ``benchmarks/out/bench_study.json``.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import _harness as harness

HERE = Path(__file__).resolve().parent
METHODS = (
    "bayesrank",
    "bayesrank-plain",
    "bayesrank+e",
    "bayesrank-ard",
    "botorch",
    "botorch-1t",
)


def worker(method: str, data_dir: str) -> dict:
    start = time.perf_counter()
    harness.setup_jax(cache=False)  # float64; the cache below, for bayesrank only
    import warnings

    import numpy as np
    from scipy.special import log_ndtr

    sys.path.insert(0, str(HERE.parent / "experiments"))
    from accuracy_data import hetrec_genre_problems

    problems = hetrec_genre_problems(data_dir)
    if method.startswith("bayesrank"):
        from bayesrank import ARD, RBF, XPGP, Independent, PreferenceProblem, Start, XPGPModel
        from bayesrank.runtime import enable_compilation_cache

        enable_compilation_cache()  # BAYESRANK_CACHE_DIR, set by the driver
    else:
        import botorch.fit  # imported before the clock starts
        import botorch.models.pairwise_gp  # noqa: F401
        from inference_accuracy import fit_botorch
    ready = time.perf_counter()

    def fit(p):
        """``(mean, cov, noise variance, extra)`` of one problem's fit."""
        extra = {}
        if method.startswith("bayesrank"):
            prior = XPGP(RBF(), entity=Independent()) if method.endswith("+e") else XPGP(RBF())
            options = {"start": Start(design=None)} if method.endswith("-plain") else {}
            if method.endswith("-ard"):
                prior = XPGP(ARD(1.0, np.ones(p["X"].shape[1])))
                options = {"hyperprior": "botorch"}
            problem = PreferenceProblem.create(p["known"], X=p["X"])
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                post = XPGPModel(prior).fit(problem, learn_hyperparameters=True, **options)
            mean, cov, noise = np.asarray(post.mean), np.asarray(post.cov), 1.0
            extra["objective"] = float(np.asarray(post.learning.trace.objective)[-1])
            extra["design_gap"] = post.learning.design_gap
        else:  # PairwiseGP's defaults, float64, 2 threads, seeded (inference_accuracy.py)
            fitted = fit_botorch(p, 0, threads=1 if method == "botorch-1t" else 2)
            mean, cov, noise = fitted["mean"], fitted["cov"], fitted["noise_var"]
        return mean, cov, noise, extra

    rows = []
    for p in problems:
        seconds, (mean, cov, noise, extra) = harness.timed(fit, p)
        i, j = p["held_out"][:, 0], p["held_out"][:, 1]
        z = (mean[i] - mean[j]) / np.sqrt(noise + cov[i, i] + cov[j, j] - 2 * cov[i, j])
        error = float(np.mean(z < 0) + 0.5 * np.mean(z == 0))
        rows.append(
            dict(
                problem=p["name"],
                n=len(p["X"]),
                seconds=seconds,
                error=error,
                loglik=float(np.mean(log_ndtr(z))),
                **extra,
            )
        )
    return {
        "method": method,
        "setup_s": ready - start,
        "loop_s": time.perf_counter() - ready,
        "rows": rows,
    }


def spawn(method, data_dir, cache):
    env = {"BAYESRANK_CACHE_DIR": cache, "JAX_PLATFORMS": "cpu"}
    return harness.spawn(__file__, "--worker", method, "--data-dir", data_dir, env=env)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--data-dir", default=str(HERE.parents[1] / "shared" / "data"))
    parser.add_argument("--methods", default=",".join(METHODS))
    parser.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        harness.emit(worker(args.worker, args.data_dir))
        return
    import numpy as np
    from scipy.stats import wilcoxon

    runs = []
    for method in args.methods.split(","):
        for state, cache in harness.cold_and_warm(warm=method in ("bayesrank", "bayesrank+e")):
            runs.append({**spawn(method, args.data_dir, cache), "cache": state})
        print(f"done: {method}", file=sys.stderr, flush=True)
    peer = next((r for r in runs if r["method"] == "botorch"), None)
    peer_1t = next((r for r in runs if r["method"] == "botorch-1t"), None)
    print(
        "| method | cache | loop s | median fit s | slowest fit s | pair error | log-lik |"
        " error - BoTorch (wins, p) | loop: BoTorch / ours (1 thread) |"
        " median fit: BoTorch / ours (1 thread) | min design gap |"
    )
    print("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")

    def ratios(key, mine):
        """BoTorch's (2 threads, then 1) over ours, for the loop or the median fit."""
        out = [f"{key(q) / mine:.2f}x" for q in (peer, peer_1t) if q is not None]
        return f"{out[0]} ({out[1]})" if len(out) == 2 else (out[0] if out else "-")

    def median_fit(r):
        return float(np.median([row["seconds"] for row in r["rows"]]))

    for r in runs:
        sec = [row["seconds"] for row in r["rows"]]
        err = np.array([row["error"] for row in r["rows"]])
        ll = np.mean([row["loglik"] for row in r["rows"]])
        versus, loop_ratio, fit_ratio = "-", "-", "-"
        if peer is not None and r["method"] not in ("botorch", "botorch-1t"):
            d = err - np.array([row["error"] for row in peer["rows"]])
            p = wilcoxon(d).pvalue if np.any(d != 0) else 1.0
            versus = f"{d.mean():+.4f} ({int(np.sum(d < 0))}/{len(d)}, p={p:.2g})"
        if r["method"] not in ("botorch", "botorch-1t"):
            loop_ratio = ratios(lambda q: q["loop_s"], r["loop_s"])
            fit_ratio = ratios(median_fit, median_fit(r))
        gaps = [row.get("design_gap") for row in r["rows"] if row.get("design_gap") is not None]
        gap = f"{min(gaps):+.2f}" if gaps else "-"
        print(
            f"| {r['method']} | {r.get('cache', '-')} | {r['loop_s']:.2f} | "
            f"{np.median(sec):.3f} | {max(sec):.2f} | {err.mean():.4f} | {ll:+.4f} | "
            f"{versus} | {loop_ratio} | {fit_ratio} | {gap} |"
        )
    harness.write_json(HERE / "out" / "bench_study.json", runs, indent=1)


if __name__ == "__main__":
    main()
