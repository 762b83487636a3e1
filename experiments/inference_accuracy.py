"""How accurate are bayesrank's engines and fits? EP, Laplace, NUTS; against BoTorch and choix.

Problems: 32 real ones by default (``accuracy_data.py``): 12 OHSUMED queries (150 known pairs),
10 MQ2008 queries (60 known pairs), 10 HetRec MovieLens users (300 known pairs, 27 movie
attributes), up to 1,000 held-out pairs each, all seeded. Features scaled to ``[0, 1]``.

**Part 1: engines at the same hyperparameters.** For each problem, the prior fitted by the
default fit (below) is fixed and its posterior computed by EP, Laplace and a long NUTS run
(``--chains`` x ``--samples`` draws after ``--warmup``), all through
``XPGPModel(prior, inference=...).fit(problem)``; on the held-out pairs: mean and max ``|dp|``
of each engine's ``P(i > j)`` against NUTS's, pair error, log-likelihood, ECE and Brier.

**Part 2: fitted models.** Each method fits its own hyperparameters on the known pairs and
predicts the held-out ones:

- ``bayesrank`` (the default, exactly as the README shows it): an RBF kernel on the attributes
  plus a per-entity effect, ``prior = XPGP(RBF(), entity=Independent())``, then
  ``XPGPModel(prior).fit(problem, learn_hyperparameters=True)`` (EP-evidence maximisation);
- ``bayesrank-laplace``: the same with ``inference="laplace"`` (Laplace evidence and posterior);
- ``bayesrank-em``: ``learn_hyperparameters="em"`` (EM-EP);
- ``bayesrank-no-entity``: the default without the entity effect, ``XPGP(RBF())``;
- ``bayesrank-ard``: the default with an ``ARD`` attribute kernel (one lengthscale per feature);
- ``bayesrank-ard-botorch``: BoTorch's model in bayesrank: ``XPGP(ARD(...))`` with
  ``hyperprior="botorch"`` (Gamma(2.4, 2.7) on each lengthscale in units of its feature's range,
  a smoothed box on the output scale), no entity effect;
- ``bayesrank-plain``: ``XPGP(RBF())`` with ``design=None`` (BFGS from the median heuristic
  alone, without the global start);
- ``botorch``: ``PairwiseGP(X, comparisons)`` (its default ARD ``ScaleKernel(RBF)`` with Gamma
  priors) fitted by ``fit_gpytorch_mll`` on ``PairwiseLaplaceMarginalLogLikelihood``, float64;
- ``choix-cv``: ``choix.ep_pairwise(n, pairs, alpha, model="probit")`` (no features: an
  independent ``N(0, 1/alpha)`` prior per entity) with ``alpha`` chosen by 5-fold
  cross-validated held-out log-likelihood over a grid.

Metrics on the held-out pairs, each pair shown in a random orientation (seeded) so that the
outcome is 0 or 1: pair error (``P`` on the wrong side of 1/2; 1/2 counts half), mean
log-likelihood of the observed outcomes, ECE (10 bins) and Brier score; over all entities of
the problem, NDCG@10 and Kendall's tau of the posterior mean against the grades. The
probabilities: ``Phi(dmu / sqrt(1 + dvar))`` for bayesrank and choix (likelihood
``Phi(xi_i - xi_j)``), ``Phi(dmu / sqrt(2 + dvar))`` for BoTorch (``Phi((f_i - f_j) / sqrt 2)``).
Each method against ``bayesrank``: the mean paired difference and a two-sided Wilcoxon
signed-rank test over the problems.

Usage::

    python experiments/inference_accuracy.py [--data-dir ../shared/data] [--seed 0]
        [--warmup 1000] [--samples 2000] [--chains 4] [--skip-nuts] [--skip-peers]
        [--methods bayesrank,bayesrank-laplace,...] [--out experiments/out/inference_accuracy]

Writes ``fits.json`` (part 2) and ``engines.json`` (part 1) and prints the tables of
``docs/results/inference.md`` (``--tables``: from the saved files only).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import warnings
from pathlib import Path

import jax

jax.config.update("jax_enable_x64", True)
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from scipy.special import log_ndtr, ndtr  # noqa: E402
from scipy.stats import wilcoxon  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from accuracy_data import hetrec_genre_problems  # noqa: E402
from accuracy_data import problems as load_problems  # noqa: E402

from bayesrank import ARD, RBF, XPGP, Independent, PreferenceProblem, XPGPModel  # noqa: E402
from bayesrank.metrics import (  # noqa: E402
    brier_score,
    expected_calibration_error,
    kendall_tau,
    ndcg_at,
    pairwise_error,
)
from bayesrank.runtime import clear_compiled, enable_compilation_cache  # noqa: E402

METHODS = (
    "bayesrank",
    "bayesrank-laplace",
    "bayesrank-em",
    "bayesrank-no-entity",
    "bayesrank-plain",
    "bayesrank-ard",
    "bayesrank-ard-botorch",
    "botorch",
    "choix-cv",
)
ENGINES = ("ep", "laplace", "nuts")


# ---- metrics ---------------------------------------------------------------------------------


def orient(rng, pairs):
    """Each pair in a random orientation: ``(pairs', y)`` with ``y = 1`` where the first wins."""
    flip = rng.random(len(pairs)) < 0.5
    shown = np.where(flip[:, None], pairs[:, ::-1], pairs)
    return shown, (~flip).astype(float)


def pair_metrics(p, y):
    """Pair error, mean log-likelihood, ECE (10 bins) and Brier of probabilities ``p`` of the
    outcomes ``y``; all but the log-likelihood are :mod:`bayesrank.metrics`'."""
    p = np.clip(np.asarray(p, float), 1e-300, 1 - 1e-16)
    ll = np.where(y == 1, np.log(p), np.log1p(-p))
    return {
        "pair_error": float(pairwise_error(np.where(y == 1, p, 1 - p))),
        "loglik": float(np.mean(ll)),
        "ece": float(expected_calibration_error(p, y)),
        "brier": float(brier_score(p, y)),
    }


def ranking_metrics(score, grades):
    score, grades = jnp.asarray(score), jnp.asarray(grades)
    return {
        "ndcg10": float(ndcg_at(score, grades, 10)),
        "kendall": float(kendall_tau(score, grades)),
    }


def pair_z(mean, cov, pairs, noise_var):
    """``dmu / sqrt(noise_var + dvar)`` of each pair: ``P(i > j) = Phi(z)``."""
    i, j = pairs[:, 0], pairs[:, 1]
    dvar = cov[i, i] + cov[j, j] - 2 * cov[i, j]
    return (mean[i] - mean[j]) / np.sqrt(noise_var + dvar)


def gaussian_probs(mean, cov, pairs, noise_var):
    return ndtr(pair_z(mean, cov, pairs, noise_var))


# ---- methods ---------------------------------------------------------------------------------


def attribute_prior(kind, d):
    """``"rbf"`` or ``"ard"`` on the attributes, ``"+e"`` adds a per-entity effect."""
    attribute = RBF() if kind.startswith("rbf") else ARD(1.0, jnp.ones(d))
    entity = Independent(1.0) if kind.endswith("+e") else None
    return XPGP(attribute, entity=entity)


def fit_bayesrank(p, *, kind="rbf+e", inference="ep", learn=True, **options):
    problem = PreferenceProblem.create(p["known"], X=p["X"])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        post = XPGPModel(attribute_prior(kind, p["X"].shape[1]), inference=inference).fit(
            problem, learn_hyperparameters=learn, **options
        )
    mean, cov = np.asarray(post.mean), np.asarray(post.cov)
    return {
        "mean": mean,
        "cov": cov,
        "noise_var": 1.0,
        "prior": post.prior,
        "converged": bool(post.learning.converged),
        "steps": int(np.asarray(post.learning.trace.objective).shape[-1]),
        "design_gap": post.learning.design_gap,
        "warnings": [str(w.message)[:200] for w in caught],
    }


def fit_botorch(p, seed):
    import torch
    from botorch.fit import fit_gpytorch_mll
    from botorch.models.pairwise_gp import PairwiseGP, PairwiseLaplaceMarginalLogLikelihood

    torch.set_num_threads(2)
    np.random.seed(seed)  # noqa: NPY002 (PairwiseGP perturbs its fsolve start with it)
    torch.manual_seed(seed)
    X = torch.tensor(p["X"], dtype=torch.float64)
    model = PairwiseGP(X, torch.tensor(p["known"], dtype=torch.long))
    mll = PairwiseLaplaceMarginalLogLikelihood(model.likelihood, model)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fit_gpytorch_mll(mll)
    model.eval()
    with torch.no_grad():
        post = model.posterior(X)
        mean = post.mean.squeeze(-1).numpy()
        cov = post.covariance_matrix.numpy()
    return {"mean": mean, "cov": cov, "noise_var": 2.0}


def _choix_fit(n, pairs, alpha):
    import choix

    mean, cov = choix.ep_pairwise(n, [tuple(r) for r in pairs], alpha, model="probit")
    return np.asarray(mean), np.asarray(cov)


def fit_choix_cv(p, seed, grid=(0.01, 0.03, 0.1, 0.3, 1.0, 3.0, 10.0), folds=5):
    """choix's EP with ``alpha`` (prior precision) by ``folds``-fold CV log-likelihood."""
    n, pairs = p["X"].shape[0], p["known"]
    rng = np.random.default_rng(seed)
    fold = rng.permutation(len(pairs)) % folds
    scores = []
    for alpha in grid:
        ll = 0.0
        for f in range(folds):
            mean, cov = _choix_fit(n, pairs[fold != f], alpha)
            ll += np.sum(log_ndtr(pair_z(mean, cov, pairs[fold == f], 1.0)))
        scores.append(ll)
    alpha = grid[int(np.argmax(scores))]
    mean, cov = _choix_fit(n, pairs, alpha)
    return {"mean": mean, "cov": cov, "noise_var": 1.0, "alpha": alpha}


def run_method(name, p, seed):
    start = time.perf_counter()
    if name == "bayesrank":
        out = fit_bayesrank(p)
    elif name == "bayesrank-laplace":
        out = fit_bayesrank(p, inference="laplace")
    elif name == "bayesrank-em":
        out = fit_bayesrank(p, learn="em")
    elif name == "bayesrank-no-entity":
        out = fit_bayesrank(p, kind="rbf")
    elif name == "bayesrank-plain":
        out = fit_bayesrank(p, kind="rbf", design=None)
    elif name == "bayesrank-ard":
        out = fit_bayesrank(p, kind="ard+e")
    elif name == "bayesrank-ard-botorch":
        out = fit_bayesrank(p, kind="ard", hyperprior="botorch")
    elif name == "botorch":
        out = fit_botorch(p, seed)
    elif name == "choix-cv":
        out = fit_choix_cv(p, seed)
    else:
        raise ValueError(f"unknown method {name!r}")
    out["seconds"] = time.perf_counter() - start
    return out


# ---- the two parts ---------------------------------------------------------------------------


def part_fits(problems, methods, seed, path, settings):
    """Every method on every problem; ``path`` is rewritten after each problem, and a rerun
    skips the (problem, method) rows it already holds."""
    rows = json.loads(path.read_text())["rows"] if path.exists() else []
    done = {(r["problem"], r["method"]) for r in rows if "error" not in r}
    rows = [r for r in rows if (r["problem"], r["method"]) in done]
    for k, p in enumerate(problems):
        if all((p["name"], name) in done for name in methods):
            continue
        rng = np.random.default_rng(seed + k)
        shown, y = orient(rng, p["held_out"])
        for name in methods:
            if (p["name"], name) in done:
                continue
            try:
                out = run_method(name, p, seed + k)
            except Exception as err:  # a peer failing is a result, not a crash
                rows.append({"problem": p["name"], "method": name, "error": repr(err)[:300]})
                print(f"  {p['name']:<18} {name:<18} ERROR {err!r}"[:200], flush=True)
                continue
            prob = gaussian_probs(out["mean"], out["cov"], shown, out["noise_var"])
            row = {"problem": p["name"], "method": name, "seconds": out["seconds"]}
            row.update(pair_metrics(prob, y))
            row.update(ranking_metrics(out["mean"], p["grades"]))
            for key in ("converged", "steps", "alpha", "warnings", "design_gap"):
                if key in out:
                    row[key] = out[key]
            rows.append(row)
            print(
                f"  {p['name']:<18} {name:<18} err {row['pair_error']:.3f} "
                f"ll {row['loglik']:+.3f} ece {row['ece']:.3f} {row['seconds']:6.2f}s",
                flush=True,
            )
        path.write_text(json.dumps({"settings": settings, "rows": rows}, indent=1))
        clear_compiled()  # one process compiles ~100 programs: keep its memory bounded
    return rows


def part_engines(problems, args):
    rows = []
    nuts_options = dict(num_warmup=args.warmup, num_samples=args.samples, num_chains=args.chains)
    for k, p in enumerate(problems):
        rng = np.random.default_rng(args.seed + k)
        shown, y = orient(rng, p["held_out"])
        problem = PreferenceProblem.create(p["known"], X=p["X"])
        prior = fit_bayesrank(p)["prior"]
        probs = {}
        for engine in ENGINES:
            start = time.perf_counter()
            if engine == "nuts":
                model = XPGPModel(prior, inference="nuts", nuts_options=nuts_options)
                post = model.fit(problem, key=jax.random.key(args.seed + k))
            else:
                post = XPGPModel(prior, inference=engine).fit(problem)
            probs[engine] = np.asarray(post.predict_pairs(shown).prob)
            row = {"problem": p["name"], "engine": engine}
            row["seconds"] = time.perf_counter() - start
            row.update(pair_metrics(probs[engine], y))
            if engine == "nuts":
                result = post.result.diagnostics
                row["min_ess"] = float(np.min(np.asarray(result.ess)))
                row["max_rhat"] = float(np.max(np.asarray(result.r_hat)))
                row["divergences"] = int(np.sum(np.asarray(result.divergences)))
            rows.append(row)
        for row in rows[-3:]:
            dp = np.abs(probs[row["engine"]] - probs["nuts"])
            row["mean_abs_dp"], row["max_abs_dp"] = float(dp.mean()), float(dp.max())
        print(
            f"  {p['name']:<18} |dp| EP {rows[-3]['mean_abs_dp']:.4f}/{rows[-3]['max_abs_dp']:.4f}"
            f"  Laplace {rows[-2]['mean_abs_dp']:.4f}/{rows[-2]['max_abs_dp']:.4f}"
            f"  NUTS {rows[-1]['seconds']:.0f}s ess {rows[-1]['min_ess']:.0f}",
            flush=True,
        )
    return rows


# ---- tables ----------------------------------------------------------------------------------

FIT_METRICS = ("pair_error", "loglik", "ece", "brier", "ndcg10", "kendall", "seconds")


def fits_table(rows, methods, reference="bayesrank"):
    ok = [r for r in rows if "error" not in r]
    by = {(r["problem"], r["method"]): r for r in ok}
    names = sorted({r["problem"] for r in ok})
    lines = [
        "| method | problems | pair error | log-lik | ECE | Brier | NDCG@10 | Kendall | s/fit |"
        " pair err. - ref (p) | log-lik - ref (p) |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for groups in (None, "OHSUMED", "MQ2008", "HetRec:", "HetRec21"):
        subset = [n for n in names if groups is None or n.startswith(groups)]
        if not subset:
            continue
        if groups is not None:
            lines.append(f"| *{groups.rstrip(':')}* | | | | | | | | | | |")
        for m in methods:
            both = [n for n in subset if (n, m) in by and (n, reference) in by]
            have = [n for n in subset if (n, m) in by]
            if not have:
                continue
            means = [np.mean([by[n, m][key] for n in have]) for key in FIT_METRICS]
            cells = [
                f"{v:.3f}" if key != "loglik" else f"{v:+.3f}"
                for key, v in zip(FIT_METRICS, means, strict=True)
            ]
            paired = []
            for key in ("pair_error", "loglik"):
                if m == reference or len(both) < 2:
                    paired.append("-")
                    continue
                d = np.array([by[n, m][key] - by[n, reference][key] for n in both])
                pval = wilcoxon(d).pvalue if np.any(d != 0) else 1.0
                paired.append(f"{d.mean():+.3f} ({pval:.2g})")
            lines.append(f"| {m} | {len(have)} | " + " | ".join(cells + paired) + " |")
    gaps = [r["design_gap"] for r in ok if r.get("design_gap") is not None]
    if gaps:
        lines.append(
            f"\nDesign gap (a fit's MAP objective minus its global start's best design point): "
            f"min {min(gaps):+.3f}, median {np.median(gaps):+.3f} nats over {len(gaps)} fits."
        )
    return "\n".join(lines)


def engines_table(rows):
    lines = [
        "| engine | mean abs dp vs NUTS | max abs dp vs NUTS | pair error | log-lik | ECE | Brier |"
        " s/problem |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for groups in (None, "OHSUMED", "MQ2008", "HetRec"):
        if groups is not None:
            lines.append(f"| *{groups}* | | | | | | | |")
        for e in ENGINES:
            sel = [
                r
                for r in rows
                if r["engine"] == e and (groups is None or r["problem"].startswith(groups))
            ]
            if not sel:
                continue

            def mean(key, sel=sel):
                return np.mean([r[key] for r in sel])

            lines.append(
                f"| {e} | {mean('mean_abs_dp'):.4f} | {max(r['max_abs_dp'] for r in sel):.4f} | "
                f"{mean('pair_error'):.3f} | {mean('loglik'):+.3f} | {mean('ece'):.3f} | "
                f"{mean('brier'):.3f} | {mean('seconds'):.2f} |"
            )
    ep = {r["problem"]: r["mean_abs_dp"] for r in rows if r["engine"] == "ep"}
    la = {r["problem"]: r["mean_abs_dp"] for r in rows if r["engine"] == "laplace"}
    wins = sum(ep[n] < la[n] for n in ep)
    d = np.array([ep[n] - la[n] for n in ep])
    pval = wilcoxon(d).pvalue if len(d) > 1 and np.any(d != 0) else 1.0
    lines.append(
        f"\nEP closer to NUTS than Laplace (mean |dp|) on {wins} of {len(ep)} problems; "
        f"paired Wilcoxon p = {pval:.2g}."
    )
    return "\n".join(lines)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--data-dir", type=Path, default=Path(__file__).parents[2] / "shared/data")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--warmup", type=int, default=1000)
    parser.add_argument("--samples", type=int, default=2000)
    parser.add_argument("--chains", type=int, default=4)
    parser.add_argument("--skip-nuts", action="store_true", help="skip part 1 (engines vs NUTS)")
    parser.add_argument("--skip-fits", action="store_true", help="skip part 2 (fitted models)")
    parser.add_argument("--methods", default=",".join(METHODS), help="part 2's methods")
    parser.add_argument("--limit", type=int, default=None, help="first N problems only")
    parser.add_argument(
        "--problems",
        default="default",
        choices=("default", "hetrec21", "all"),
        help="the 32 problems, the 16 HetRec splits with 21 standardised attributes "
        "(accuracy_data.hetrec_genre_problems), or both",
    )
    parser.add_argument(
        "--out", type=Path, default=Path(__file__).parent / "out/inference_accuracy"
    )
    parser.add_argument(
        "--tables", action="store_true", help="only print the tables of the saved results"
    )
    args = parser.parse_args()
    enable_compilation_cache()  # BAYESRANK_CACHE_DIR=off turns it off
    args.out.mkdir(parents=True, exist_ok=True)
    settings = {k: str(v) for k, v in vars(args).items()}
    methods = [m for m in args.methods.split(",") if m]
    fits, engines = args.out / "fits.json", args.out / "engines.json"
    if not args.tables:
        problems = []
        if args.problems in ("default", "all"):
            problems += load_problems(args.data_dir, args.seed)
        if args.problems in ("hetrec21", "all"):
            problems += hetrec_genre_problems(args.data_dir, args.seed)
        problems = problems[: args.limit]
        print(f"{len(problems)} problems")
        if not args.skip_fits:
            print("Part 2: fitted models")
            part_fits(problems, methods, args.seed, fits, settings)
        if not args.skip_nuts:
            print("Part 1: engines at the same hyperparameters")
            rows = part_engines(problems, args)
            engines.write_text(json.dumps({"settings": settings, "rows": rows}, indent=1))
    if fits.exists():
        print("\n" + fits_table(json.loads(fits.read_text())["rows"], methods))
    if engines.exists():
        print("\n" + engines_table(json.loads(engines.read_text())["rows"]))


if __name__ == "__main__":
    main()
