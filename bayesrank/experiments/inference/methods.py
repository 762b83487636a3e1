"""The inference study's fits and measures: bayesrank's ways of fitting the hyperparameters (part
2, the default and its variants), the three engines at one prior (part 1), and the measures of a
fit on the held-out pairs.

A *fitted* method is a dict with the posterior ``mean: (n,)`` and ``cov: (n, n)`` of the
preference degrees and ``noise_var``, the variance of the pair noise in their units:
``P(i > j) = Phi(dmu / sqrt(noise_var + dvar))`` (1 for bayesrank's and choix's likelihood
``Phi(xi_i - xi_j)``, 2 for BoTorch's ``Phi((f_i - f_j) / sqrt 2)``); a peer method (a function
``(problem, seed) -> fitted``, passed in by a front end) returns the same.
"""

from __future__ import annotations

import time
import warnings

import numpy as np

from ...compiler import jit
from ...data.batch import bucket_size, pad_rows
from ...inference.engines import EP, NUTS, Laplace, names
from ...metrics import (
    brier_score,
    check_gain_labels,
    checks,
    expected_calibration_error,
    kendall_tau,
    ndcg_at,
    pairwise_error,
)

__all__ = [
    "ENGINES",
    "METHODS",
    "calibration_error",
    "engine_rows",
    "fit_method",
    "fit_shared",
    "hyperparameters",
    "pair_metrics",
    "ranking_metrics",
]

#: bayesrank's methods: ``(attribute prior, engine, learn_hyperparameters, learning options)``
#: (``"start"``: the fields of ``bayesrank.learning.Start``, built in ``_options``);
#: the attribute prior ``"rbf"`` or ``"ard"``, ``"+e"`` adding the per-entity effect.
METHODS = {
    "bayesrank": ("rbf+e", "ep", True, {}),
    "bayesrank-laplace": ("rbf+e", "laplace", True, {}),
    "bayesrank-em": ("rbf+e", "ep", "em", {}),
    "bayesrank-no-entity": ("rbf", "ep", True, {}),
    "bayesrank-plain": ("rbf", "ep", True, {"start": {"design": None}}),
    "bayesrank-ard": ("ard+e", "ep", True, {}),
    "bayesrank-ard-botorch": ("ard", "ep", True, {"hyperprior": "botorch"}),
}

#: Part 1's engines, NUTS (the reference) last.
ENGINES = names()


def orient(rng, pairs):
    """Each pair in a random orientation: ``(pairs', y)`` with ``y = 1`` where the first wins."""
    flip = rng.random(len(pairs)) < 0.5
    shown = np.where(flip[:, None], pairs[:, ::-1], pairs)
    return shown, (~flip).astype(float)


@jit
def _pair_numbers(correct, p, y, mask):
    """``pair_metrics``' measures of the ``mask`` entries, in one compiled program."""
    return {
        "pair_error": pairwise_error(correct, mask),
        "ece": expected_calibration_error(p, y, mask),
        "brier": brier_score(p, y, mask),
    }


@jit
def _ranking_numbers(score, grades, mask):
    """``ranking_metrics``' measures of the ``mask`` entries, in one compiled program."""
    return {"ndcg10": ndcg_at(score, grades, 10, mask), "kendall": kendall_tau(score, grades, mask)}


@jit
def _calibration(p, y, mask):
    return expected_calibration_error(p, y, mask)


def _bucket(t: int) -> tuple[int, np.ndarray]:
    """The padded length of ``t`` measured entries, ``bucket_size(t, 4)``, and its mask."""
    size = bucket_size(t, 4)
    return size, np.arange(size) < t


def calibration_error(p, y) -> float:
    """The ECE (10 bins) of the probabilities ``p: (t,)`` of the outcomes ``y: (t,)``, one
    program per padded length (``pair_metrics``)."""
    p, y = np.asarray(p, float), np.asarray(y, float)
    _check_probabilities(p, y)
    size, mask = _bucket(len(p))
    return float(_calibration(pad_rows(p, size, fill=0.5), pad_rows(y, size), mask))


def _check_probabilities(p, y) -> None:
    """The metrics' own host checks (inside the compiled programs their inputs are traced, so
    unchecked): one length, ``p`` finite in [0, 1], ``y`` 0 or 1; errors name the index."""
    pv, yv, valid = checks.paired(p, y, None, "probs", "outcomes")
    checks.probabilities(pv, valid, "probs")
    checks.outcomes01(yv, valid, "outcomes")


def pair_metrics(p, y) -> dict:
    """Pair error, mean log-likelihood, ECE (10 bins) and Brier of the probabilities ``p: (t,)``
    of the outcomes ``y: (t,)``; all but the log-likelihood are :mod:`bayesrank.metrics`'.

    The metrics run as one program over the pairs padded to ``bucket_size(t, 4)`` and masked
    (the metrics ignore masked entries), so that every problem of a similar size shares it: run
    operation by operation on the host, each new length compiled every operation again (599
    programs in ``tests/test_experiment_inference.py``)."""
    p = np.clip(np.asarray(p, float), 1e-300, 1 - 1e-16)
    y = np.asarray(y, float)
    _check_probabilities(p, y)
    ll = np.where(y == 1, np.log(p), np.log1p(-p))
    size, mask = _bucket(len(p))
    correct = np.where(y == 1, p, 1 - p)
    numbers = _pair_numbers(
        pad_rows(correct, size, fill=0.5), pad_rows(p, size, fill=0.5), pad_rows(y, size), mask
    )
    return {
        "pair_error": float(numbers["pair_error"]),
        "loglik": float(np.mean(ll)),
        "ece": float(numbers["ece"]),
        "brier": float(numbers["brier"]),
    }


def ranking_metrics(score, grades) -> dict:
    """NDCG@10 and Kendall's tau of ``score: (n,)`` against ``grades: (n,)``, as one program over
    the entries padded to ``bucket_size(n, 4)`` and masked (``pair_metrics``)."""
    score, grades = np.asarray(score), np.asarray(grades)
    # the metrics' host checks (traced inside the program): one length, finite scores, grades
    # whole numbers >= 0 with a finite gain
    _, values, _ = checks.paired(score, grades, None, "scores", "labels")
    check_gain_labels(values)
    size, mask = _bucket(len(score))
    numbers = _ranking_numbers(pad_rows(score, size), pad_rows(grades, size), mask)
    return {k: float(v) for k, v in numbers.items()}


def gaussian_probs(mean, cov, pairs, noise_var):
    """``Phi(dmu / sqrt(noise_var + dvar))`` of each row ``(i, j)`` of ``pairs: (t, 2)``."""
    from scipy.special import ndtr

    i, j = pairs[:, 0], pairs[:, 1]
    dvar = cov[i, i] + cov[j, j] - 2 * cov[i, j]
    return ndtr((mean[i] - mean[j]) / np.sqrt(noise_var + dvar))


def attribute_prior(kind: str, d: int):
    """``"rbf"`` or ``"ard"`` on the ``d`` attributes, ``"+e"`` adds a per-entity effect."""
    import jax.numpy as jnp

    from ...kernels import ARD, RBF, XPGP, Independent

    attribute = RBF() if kind.startswith("rbf") else ARD(1.0, jnp.ones(d))
    entity = Independent(1.0) if kind.endswith("+e") else None
    return XPGP(attribute, entity=entity)


def hyperparameters(prior) -> dict:
    """The learned values of a (per-query slice of a) fitted prior: ``kappa``, ``rho`` (RBF) or
    ``lengthscales`` (ARD, a list), ``weight`` (the attribute kernel's), ``entity`` (the
    per-entity effect's scale; absent without one), ``sigma`` (the pair noise; not learned)."""
    a = prior.attribute
    values = {"kappa": a.kappa}
    if hasattr(a, "rho"):
        values["rho"] = a.rho
    else:
        values["lengthscales"] = a.lengthscales
    values.update(weight=np.asarray(prior.weights)[..., 0], sigma=prior.sigma)
    if prior.entity is not None:
        values["entity"] = prior.entity.scale
    return {k: np.asarray(v, float).tolist() for k, v in values.items()}


def _options(options: dict) -> dict:
    """The learning options with ``"start"``'s fields made a ``Start`` (imported here: this
    module loads without JAX)."""
    from ...learning import Start

    return {k: Start(**v) if k == "start" else v for k, v in options.items()}


def _problem(p):
    from ...data.problem import PreferenceProblem

    return PreferenceProblem.create(p["known"], X=p["X"])


def fit_method(name: str, p: dict) -> dict:
    """bayesrank's method ``name`` on the problem ``p`` alone, through the public face:
    ``XPGPModel(prior, engine).fit(problem, learn_hyperparameters=..., **options)``."""
    from ...model import XPGPModel

    kind, inference, learn, options = METHODS[name]
    start = time.perf_counter()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        post = XPGPModel(attribute_prior(kind, p["X"].shape[1]), inference).fit(
            _problem(p), learn_hyperparameters=learn, **_options(options)
        )
    return {
        "mean": np.asarray(post.mean),
        "cov": np.asarray(post.cov),
        "noise_var": 1.0,
        "prior": post.prior,
        "converged": bool(post.learning.converged),
        "steps": int(np.asarray(post.learning.trace.objective).shape[-1]),
        "design_gap": post.learning.design_gap,
        "warnings": [str(w.message)[:200] for w in caught],
        "seconds": time.perf_counter() - start,
    }


def fit_shared(name: str, problems: list[dict]) -> list[dict]:
    """bayesrank's method ``name`` with one ``theta`` for all ``problems`` (one
    ``fit_hyperparameters`` call; they must share a feature width); one fitted dict each, the
    posteriors the fit's own at the learned ``theta``, ``seconds`` its share of the fit."""
    import jax

    from ...learning import fit_hyperparameters

    widths = sorted({p["X"].shape[1] for p in problems})
    if len(widths) > 1:
        raise ValueError(
            f"--theta shared needs problems of one feature width, got widths {widths}: "
            "use --theta per-query"
        )
    kind, inference, learn, options = METHODS[name]
    start = time.perf_counter()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fit = fit_hyperparameters(
            attribute_prior(kind, widths[0]),
            [_problem(p) for p in problems],
            method="em" if learn == "em" else "evidence",
            engine=inference,
            **_options(options),
        )
    seconds = (time.perf_counter() - start) / len(problems)
    out = []
    for b, p in enumerate(problems):
        post = fit.posteriors
        if np.ndim(post.mean) == 2:  # batched over the problems
            post = jax.tree_util.tree_map(lambda x, b=b: np.asarray(x)[b], post)
        n = p["X"].shape[0]
        gap = None if fit.design_gap is None else float(np.asarray(fit.design_gap))
        out.append(
            {
                "mean": np.asarray(post.mean)[:n],
                "cov": np.asarray(post.cov)[:n, :n],
                "noise_var": 1.0,
                "prior": fit.prior,
                "converged": bool(np.all(np.asarray(fit.converged))),
                "steps": int(np.asarray(fit.trace.objective).shape[-1]),
                "design_gap": gap,
                "warnings": [str(w.message)[:200] for w in caught],
                "seconds": seconds,
            }
        )
    return out


def engine_rows(p: dict, prior, shown, y, key, nuts_options: dict) -> tuple[list, dict]:
    """Part 1 on problem ``p``: the posterior at ``prior`` by EP, Laplace and NUTS
    (``XPGPModel(prior, engine).fit``; NUTS with ``key`` and ``nuts_options``); one row
    each with the measures of ``pair_metrics`` on the held-out pairs ``shown`` (outcomes ``y``)
    and ``|dp|`` against NUTS; NUTS's row with its smallest ESS, largest split R-hat and
    divergences. Returns ``(rows, {engine: probabilities})``."""
    from ...inference.posterior import SamplePosterior
    from ...model import XPGPModel

    problem, rows, probs = _problem(p), [], {}
    engines = {e.name: e for e in (EP(), Laplace(), NUTS(**nuts_options))}  # the rows' names
    for name, engine in engines.items():
        start = time.perf_counter()
        post = XPGPModel(prior, engine).fit(problem, key=key)
        probs[name] = np.asarray(post.predict_pairs(shown).prob)
        row = {"problem": p["name"], "engine": name}
        row["seconds"] = time.perf_counter() - start
        row.update(pair_metrics(probs[name], y))
        if isinstance(post.result, SamplePosterior):  # NUTS's diagnostics
            result = post.result.diagnostics
            row["min_ess"] = float(np.min(np.asarray(result.ess)))
            row["max_rhat"] = float(np.max(np.asarray(result.r_hat)))
            row["divergences"] = int(np.sum(np.asarray(result.divergences)))
        rows.append(row)
    for row in rows:
        dp = np.abs(probs[row["engine"]] - probs[NUTS.name])
        row["mean_abs_dp"], row["max_abs_dp"] = float(dp.mean()), float(dp.max())
    return rows, probs
