"""An ``XPGP`` prior's scales and lengthscale learned from the sparse engine's Laplace evidence:
hyperparameter learning where no dense matrix fits. ``fit_sparse_hyperparameters`` answers with
a prior (not a latent one), so that the model, ``io.save`` and the CLI take it;
``fit_latent_scales`` does the work for any latent prior that a builder gives at a lengthscale
(membership relations, which an ``XPGP`` cannot hold).

The latent prior of ``inference.sparse.from_xpgp`` has one variance per XPGP scale: ``w_1^2``
multiplies the attribute term and its residual variances together, each ``w_r^2`` a relation's
block, ``s^2`` the entity effect. (``sigma`` stays as given: with the entity effect it is one
redundant scale; ``kappa`` and ``beta`` are confounded with the weights; each relation's ``iota``
stays as given.) With ``u`` the logs of these variances relative to the start and ``T`` the 0/1
map from them to the latent prior's terms, the evidence's gradient in ``u`` is ``T^T g``, ``g``
the terms' (``inference.sparse.evidence_gradient``), and the step

    u <- u + log(1 + 2 T^T g / T^T dim),   at most a factor 10 either way,

is EM's for a variance shared by the terms it ties (``learning.sparse_em``'s ``"evidence"``
objective), accelerated by SQUAREM (``learning.squarem``); it stops where no step exceeds
``tol``: a stationary point of the evidence at that lengthscale. The draws are the same at every
step (common random numbers), so the iteration is a deterministic map.

The lengthscale changes the attribute term's features (its pivoted Cholesky root), so it has no
such gradient: its factor from the start is found by a golden-section search on its log within
``[1 / search_range, search_range]``, each point's value the SLQ estimate of the evidence
(``inference.sparse.log_evidence``) at that lengthscale's stationary variances, every point with
the same probes: their error (``se``) is mostly shared, so the search compares points more
finely than ``se``. The best point found, the start included, is the answer.
"""

from __future__ import annotations

import dataclasses
import math
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from ..data.checks import check_float, check_int
from ..data.keys import check_key
from ..data.problem import PreferenceProblem
from ..inference.sparse.evidence import evidence_gradient_core, log_evidence_core
from ..inference.sparse.inputs import check_cg_tol, check_training_pairs
from ..inference.sparse.laplace import mode_core
from ..inference.sparse.precision import diagonal_precision
from ..inference.sparse.prior import LatentPrior, latent_prior, scale_prior
from ..inference.sparse.xpgp import from_xpgp
from ..kernels import ARD, RBF
from ..kernels.xpgp import XPGP, check_prior
from .initialize import initialize
from .layout import stack
from .squarem import squarem

__all__ = ["LatentLearning", "SparseLearning", "fit_latent_scales", "fit_sparse_hyperparameters"]

#: Newton's tolerance for the mode (``inference.sparse.mode``'s default).
_MODE_TOL = 1e-10

_GOLDEN = (math.sqrt(5.0) - 1.0) / 2.0


class SparseLearning(NamedTuple):
    """``prior``: the learned ``XPGP``; ``log_evidence`` and ``se``: the SLQ estimate at it and
    its probes' standard error; ``start_log_evidence``, ``start_se``: the same at the start (the
    median heuristic with unit weights where ``init``), with the same probes; ``factors: (E,)``
    the lengthscale factors evaluated (relative to the start) and ``evidences: (E,)`` theirs;
    ``converged``: the variances' iteration converged at the answer; ``at_bound``: the best
    factor is at the search's bound (widen ``search_range``)."""

    prior: XPGP
    log_evidence: float
    se: float
    start_log_evidence: float
    start_se: float
    factors: np.ndarray
    evidences: np.ndarray
    converged: bool
    at_bound: bool


class LatentLearning(NamedTuple):
    """``fit_latent_scales``' answer: ``latent``, the learned ``LatentPrior``; ``factor``, its
    lengthscale factor (``build``'s argument); ``log_variances: (P,)``, the log of each scale's
    variance relative to ``build``'s (``u``); ``start_kept``: no point beat the start, which is
    the answer; the rest as ``SparseLearning``'s."""

    latent: LatentPrior
    factor: float
    log_variances: np.ndarray
    log_evidence: float
    se: float
    start_log_evidence: float
    start_se: float
    factors: np.ndarray
    evidences: np.ndarray
    converged: bool
    at_bound: bool
    start_kept: bool

    @property
    def variances(self) -> np.ndarray:
        """``(P,)``: each scale's variance relative to ``build``'s, ``exp(log_variances)``."""
        return np.exp(self.log_variances)


def _with_lengthscale(prior: XPGP, factor: float) -> XPGP:
    """The prior with its attribute kernel's lengthscales multiplied by ``factor`` (an RBF's
    ``rho`` divided by it)."""
    kernel = prior.attribute
    if isinstance(kernel, RBF):
        kernel = dataclasses.replace(kernel, rho=jnp.asarray(kernel.rho) / factor)
    elif isinstance(kernel, ARD):
        kernel = dataclasses.replace(kernel, lengthscales=jnp.asarray(kernel.lengthscales) * factor)
    return dataclasses.replace(prior, attribute=kernel)


def _scaled(prior: XPGP, u: np.ndarray) -> XPGP:
    """The prior with its scales' variances multiplied by ``exp(u)``: ``[w_1 (with an
    attribute kernel), w_r..., s (with an entity effect)]``."""
    weights = np.ones(1 + len(prior.relations)) if prior.weights is None else prior.weights
    weights = np.array(weights, float)
    k = 0
    if prior.attribute is not None:
        weights[0] *= np.exp(u[0] / 2)
        k = 1
    weights[1:] *= np.exp(u[k : k + len(prior.relations)] / 2)
    entity = prior.entity
    if entity is not None:
        entity = dataclasses.replace(entity, scale=jnp.asarray(entity.scale) * np.exp(u[-1] / 2))
    return dataclasses.replace(prior, weights=jnp.asarray(weights), entity=entity)


def _latent(prior: XPGP, problem: PreferenceProblem, rank: int):
    """``(LatentPrior, T)``: the latent prior with the entity effect as a block of its own, and
    ``T: (1 + K, P)`` the 0/1 map from the ``P`` scales of ``_scaled`` to its terms."""
    latent, _ = from_xpgp(dataclasses.replace(prior, entity=None), problem.X,
                          problem.relations, problem.n, rank)  # fmt: skip
    blocks = list(latent.blocks)
    n_rel = len(prior.relations)
    attribute = prior.attribute is not None
    n_scales = int(attribute) + n_rel + int(prior.entity is not None)
    rows = [np.eye(n_scales)[0] if attribute else np.zeros(n_scales)]
    rows += [np.eye(n_scales)[int(attribute) + r] for r in range(n_rel)]
    if len(blocks) > n_rel:  # the attribute kernel's residual variances: w_1's
        rows.append(np.eye(n_scales)[0])
    if prior.entity is not None:
        c = 1.0 / (2.0 * float(prior.sigma) ** 2)
        variance = c * float(jnp.asarray(prior.entity.scale)) ** 2
        blocks.append(diagonal_precision(np.full(problem.n, variance)))
        rows.append(np.eye(n_scales)[-1])
    features = latent.features if latent.rank else None
    return latent_prior(features, tuple(blocks)), np.array(rows)


def fit_latent_scales(
    build,
    pairs,
    *,
    key=None,
    lengthscale: bool = True,
    max_steps: int = 30,
    tol: float = 1e-3,
    n_samples: int = 16,
    n_probes: int = 64,
    cg_tol: float = 1e-6,
    search_range: float = 8.0,
    search_tol: float = 0.05,
) -> LatentLearning:
    """The module docstring's learning for any latent prior: ``build(factor) -> (LatentPrior,
    T)`` gives the latent prior at the lengthscale factor ``factor`` (``build(1.0)``: the start)
    and ``T: (1 + K, P)``, the 0/1 map from the ``P`` learned scales to its terms (features
    first, then each block; a row of zeros: a term kept as built). Every call must give the
    same shapes. ``lengthscale``: search the factor (else only ``build(1.0)``). For priors that
    an ``XPGP`` cannot state (the membership relations of ``experiments.large``);
    ``fit_sparse_hyperparameters`` is its ``XPGP`` face, with the settings' meaning there.

    ``ValueError`` for pairs out of range (``inputs.check_training_pairs``), a ``T`` of the
    wrong shape, not 0/1, with a term tied to two scales or a scale tied to none, a later
    ``build`` of other shapes, a bad key or setting (each named)."""
    key, tol, search_range, search_tol, cg_tol = _check_settings(
        key, max_steps, tol, n_samples, n_probes, search_range, search_tol, cg_tol
    )
    latent0, T = build(1.0)
    T = _check_map(T, latent0)
    pairs = jnp.asarray(check_training_pairs(latent0, pairs))

    def evidence(latent, fit) -> tuple[float, float]:
        ev = log_evidence_core(latent, pairs, fit, key, n_probes, 40)
        return float(ev.log_z), float(ev.se)

    def stationary(t: float, u0: np.ndarray):
        """The variances' stationary point at the lengthscale factor ``exp(t)``."""
        latent = latent0 if t == 0.0 else _same_shapes(build(math.exp(t))[0], latent0, t)
        sizes = np.maximum(np.asarray(latent.block_sizes(), float), 1.0)
        dims = np.maximum(T.T @ sizes, 1.0)
        state = {"z": None, "v0": 1.0}

        def current(u):
            return scale_prior(latent, np.exp(T @ u))

        def warm(u):
            z, v0 = state["z"], float(np.exp(T @ u)[0])
            if z is not None:  # xi = sqrt(v_0) Phi w: keep xi where v_0 moved
                z = z.at[: latent.rank].multiply(math.sqrt(state["v0"] / v0))
            return z, v0

        def step(u):
            z, v0 = warm(u)
            scaled = current(u)
            fit = mode_core(scaled, pairs, 50, _MODE_TOL, _MODE_TOL, z)
            if not np.all(np.isfinite(np.asarray(fit.z))):
                return np.full_like(u, np.nan)
            state.update(z=fit.z, v0=v0)
            g, _ = evidence_gradient_core(scaled, pairs, fit, key, n_samples, cg_tol)
            ratio = np.clip(1.0 + 2.0 * (T.T @ np.asarray(g)) / dims, 0.1, 10.0)
            return u + np.log(ratio)

        u, _, converged = squarem(step, u0, max_steps, tol)
        z, _ = warm(u)
        scaled = current(u)
        fit = mode_core(scaled, pairs, 50, _MODE_TOL, _MODE_TOL, z)
        return u, converged, *evidence(scaled, fit)

    n_scales = T.shape[1]
    fit0 = mode_core(latent0, pairs, 50, _MODE_TOL, _MODE_TOL, None)
    start_z, start_se = evidence(latent0, fit0)
    points = {0.0: stationary(0.0, np.zeros(n_scales))}

    def value(t: float) -> float:
        if t not in points:
            nearest = min(points, key=lambda s: abs(s - t))
            points[t] = stationary(t, points[nearest][0])
        return points[t][2]

    bound = math.log(search_range)
    if lengthscale and bound > 0:
        a, b = -bound, bound
        c, d = b - _GOLDEN * (b - a), a + _GOLDEN * (b - a)
        while b - a > search_tol:
            if value(c) >= value(d):
                b, d = d, c
                c = b - _GOLDEN * (b - a)
            else:
                a, c = c, d
                d = a + _GOLDEN * (b - a)
    ts = np.array(sorted(points))
    finite = [t for t in points if np.isfinite(points[t][2])]
    best = max(finite, key=lambda t: points[t][2]) if finite else 0.0
    at_bound = bool(lengthscale and abs(best) > bound - search_tol)
    u, converged, log_z, se = points[best]
    start_kept = not log_z >= start_z  # the start is kept where nothing beat it (or NaN)
    if start_kept:
        best, u, converged, log_z, se = 0.0, np.zeros(n_scales), True, start_z, start_se
    latent = latent0 if best == 0.0 else build(math.exp(best))[0]
    return LatentLearning(
        scale_prior(latent, np.exp(T @ u)),
        math.exp(best),
        u,
        log_z,
        se,
        start_z,
        start_se,
        np.exp(ts),
        np.array([points[t][2] for t in ts]),
        bool(converged),
        at_bound,
        start_kept,
    )


def _check_settings(key, max_steps, tol, n_samples, n_probes, search_range, search_tol, cg_tol):
    """``(key, tol, search_range, search_tol, cg_tol)`` checked (each bad one named)."""
    key = jax.random.key(0) if key is None else check_key(key)
    check_int(max_steps, "max_steps", low=0)
    tol = check_float(tol, "tol", low=0.0)
    check_int(n_samples, "n_samples", low=1)
    check_int(n_probes, "n_probes", low=2)
    search_range = check_float(search_range, "search_range", low=1.0)
    search_tol = check_float(search_tol, "search_tol", low=0.0, low_open=True)
    return key, tol, search_range, search_tol, check_cg_tol(cg_tol, jnp.result_type(float))


def _same_shapes(latent, first, t: float):
    """``latent`` if it has ``first``'s entities, rank and blocks (``build``'s promise)."""
    got = (latent.n, latent.rank, len(latent.blocks))
    want = (first.n, first.rank, len(first.blocks))
    if got != want:
        raise ValueError(
            f"build({math.exp(t):.4g}) gave a latent prior of (n, rank, blocks) = {got}, "
            f"build(1.0) one of {want}: every call must give the same shapes"
        )
    return latent


def _check_map(T, latent) -> np.ndarray:
    """``T`` as a float array if it is ``(1 + K, P)`` for ``latent``'s ``K`` blocks, 0/1, with
    at most one scale per term (row) and every scale tying some term."""
    T = np.asarray(T, float)
    terms = 1 + len(latent.blocks)
    if T.ndim != 2 or T.shape[0] != terms or T.shape[1] < 1:
        raise ValueError(f"T must be (1 + K, P) = ({terms}, P >= 1) for this prior, got {T.shape}")
    if not np.all((T == 0) | (T == 1)):
        raise ValueError("T must be 0/1: each term (row) is a scale's or none's")
    if np.any(T.sum(1) > 1):
        raise ValueError(f"T ties terms {np.flatnonzero(T.sum(1) > 1).tolist()} to more than "
                         "one scale: at most one scale per term (row)")  # fmt: skip
    if np.any(T.sum(0) < 1):
        raise ValueError(f"T's scales {np.flatnonzero(T.sum(0) < 1).tolist()} tie no term: "
                         "every scale (column) needs one")  # fmt: skip
    return T


def fit_sparse_hyperparameters(
    prior: XPGP,
    problem: PreferenceProblem,
    *,
    rank: int = 256,
    key=None,
    init: bool = True,
    lengthscale: bool = True,
    max_steps: int = 30,
    tol: float = 1e-3,
    n_samples: int = 16,
    n_probes: int = 64,
    cg_tol: float = 1e-6,
    search_range: float = 8.0,
    search_tol: float = 0.05,
) -> SparseLearning:
    """The module docstring's learning of ``prior``'s mixing weights, entity effect and (where
    ``lengthscale``) attribute lengthscale on ``problem`` (strict pairs only), the attribute
    kernel at ``rank`` (``SparseLaplace``'s). ``init``: start from the median heuristic and
    unit weights (``learning.initialize``), else from ``prior``'s values. ``key`` (default
    ``key(0)``) seeds the draws (``n_samples``, CG tolerance ``cg_tol``) and the evidence's
    ``n_probes`` probes; ``max_steps`` caps the variances' steps at each lengthscale;
    ``search_tol`` is the search's final bracket in ``log`` of the factor. The work is
    ``fit_latent_scales``' on this prior's latent form.

    ``ValueError`` before any compilation for: a problem with ties or grades, a prior the
    sparse engine cannot take (``from_xpgp``), ``lengthscale`` with an attribute kernel other
    than ``RBF`` or ``ARD``, a bad key or setting (each named)."""
    if not isinstance(problem, PreferenceProblem):
        raise ValueError(f"problem must be a PreferenceProblem, got {type(problem).__name__}")
    if problem.has_outcomes:
        raise ValueError("the sparse engine's learning takes strict pairs only (no ties or grades)")
    check_prior(prior, None if problem.X is None else problem.X.shape[1])
    if prior.margin is not None or prior.threshold is not None:
        raise ValueError("the sparse engine has no tie margin or thresholds to learn: drop them")
    if lengthscale and prior.attribute is not None and not isinstance(prior.attribute, RBF | ARD):
        raise ValueError(
            f"lengthscale=True learns an RBF's or ARD's lengthscale, not "
            f"{type(prior.attribute).__name__}'s: pass lengthscale=False"
        )
    rank = check_int(rank, "rank", low=1)
    _check_settings(key, max_steps, tol, n_samples, n_probes, search_range, search_tol, cg_tol)
    start = initialize(prior, stack([problem])) if init else prior

    def build(factor: float):  # checks the relations (from_xpgp)
        return _latent(_with_lengthscale(start, factor), problem, rank)

    learn_length = lengthscale and prior.attribute is not None
    out = fit_latent_scales(
        build, problem.pairs, key=key, lengthscale=learn_length, max_steps=max_steps, tol=tol,
        n_samples=n_samples, n_probes=n_probes, cg_tol=cg_tol, search_range=search_range,
        search_tol=search_tol,
    )  # fmt: skip
    learned = start
    if not out.start_kept:
        learned = _scaled(_with_lengthscale(start, out.factor), out.log_variances)
    return SparseLearning(
        learned,
        out.log_evidence,
        out.se,
        out.start_log_evidence,
        out.start_se,
        out.factors,
        out.evidences,
        out.converged,
        out.at_bound,
    )
