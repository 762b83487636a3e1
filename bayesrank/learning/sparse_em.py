"""EM for the variances of a ``LatentPrior``'s terms, with the precision-form Laplace as the
E-step: hyperparameter learning where no dense matrix fits.

Every term of the latent prior (``inference.sparse.prior``) has one scale to learn, its
variance ``v_b``: the attribute term ``w ~ N(0, v_0 I_r)`` and each relation or diagonal block
``g_b ~ N(0, v_b Q_b^-1)`` (``scale_prior``); in the XPGP parameterization these are the mixing
weights ``w_b^2 / (2 sigma^2)`` (Eq. 5). With ``q(z) = N(z_hat, H^-1)`` the Laplace posterior
at the current ``v``, EM's M-step (the paper's Eq. 15-16, here in closed form) is

    v_b <- E_q[z_b^T Qbar_b z_b] / dim_b = v_b (z_hat_b^T P_b z_hat_b + tr(P_b Sigma_bb)) / dim_b,

with ``P_b = Qbar_b / v_b`` the block's current precision. The trace is ``dim_b`` (the prior's:
``tr(P_b P_b^-1)``) plus the mean of ``x_b^T P_b x_b - x0_b^T P_b x0_b`` over ``n_samples``
posterior draws ``x ~ N(0, H^-1)`` and prior draws ``x0 ~ N(0, P^-1)`` made from the same normals
(``latent_draws(with_prior=True)``): most of a block's ``dim_b`` directions are barely informed
by the pairs, where ``x`` and ``x0`` nearly coincide, so the difference has a small variance
where the plain mean of ``x_b^T P_b x_b`` has the noise of all ``dim_b`` directions and only the
informed few carry the signal (on a problem of 90 entities in six clusters, the plain mean's
fixed point for the cluster variance moved by a factor of two between keys). The same draws
serve every iteration (fixed ``key``, common random numbers), so the iteration is a
deterministic map whose fixed point it finds. Each iteration warm-starts
Newton's mode from the last. The attribute kernel's lengthscale is not learned here (its
features would change): set it first, e.g. by the median heuristic.
"""

from __future__ import annotations

from typing import NamedTuple

import jax.numpy as jnp
import numpy as np

from ..data.checks import check_choice, check_float, check_int
from ..data.keys import check_key
from ..inference.ep.settings import MAX_ITER_LIMIT
from ..inference.sparse.evidence import evidence_gradient_core, expected_quadratics_core
from ..inference.sparse.inputs import check_cg_tol, check_latent_prior, check_training_pairs
from ..inference.sparse.laplace import SparseMode, mode_core
from ..inference.sparse.prior import LatentPrior, scale_prior
from .squarem import squarem

__all__ = ["SparseEMResult", "em_variances"]


class SparseEMResult(NamedTuple):
    """``prior``: the input prior with the learned scales (``scale_prior(prior, variances)``);
    ``variances: (1 + K,)`` relative to the input prior; ``fit``: the Laplace posterior under
    it; ``trace: (cycles + 1, 1 + K)`` the variances from 1, one row per SQUAREM cycle;
    ``converged``: the last cycle's EM step moved no ``log v_b`` by more than ``tol``."""

    prior: LatentPrior
    variances: np.ndarray
    fit: SparseMode
    trace: np.ndarray
    converged: bool


def em_variances(
    prior: LatentPrior,
    pairs,
    key,
    *,
    learn=None,
    max_iter: int = 30,
    tol: float = 1e-3,
    n_samples: int = 16,
    cg_tol: float = 1e-6,
    objective: str = "em",
) -> SparseEMResult:
    """The EM iteration of the module docstring from the variances of ``prior`` (all 1),
    ``pairs: (m, 2)`` winner first, accelerated by SQUAREM (Varadhan & Roland 2008, scheme S3,
    on ``log v``: EM for variance components converges linearly, often at a rate near 1;
    one SQUAREM cycle is three EM steps); ``max_iter`` counts EM steps. ``learn: (1 + K,)``
    bool marks the terms to learn (default all; the attribute term only where there are
    features).

    ``objective="evidence"`` finds a stationary point of the Laplace evidence instead of EM's
    fixed point: the step ``log v_b += log(1 + 2 g_b / dim_b)`` with ``g`` the evidence's
    gradient in ``log v`` (``inference.sparse.evidence_gradient``), which is EM's step
    ``log(q_b / dim_b)`` plus the mode's move through ``log det H`` (R&W Eq. 5.23); a step is
    at most ``log 10`` either way.

    Checked before any compilation (``ValueError``): ``pairs`` as ``inference.sparse.mode``
    checks them (in ``[0, n)``, no self pair, whole numbers); ``key`` a PRNG key; ``learn``
    bools (``0`` / ``1`` are not); ``max_iter >= 0``, ``tol`` a finite number ``>= 0``,
    ``n_samples >= 1``, ``cg_tol`` in ``[sqrt(tiny), 1)`` of the prior's dtype, ``objective``
    ``"em"`` or ``"evidence"``."""
    check_choice(objective, "objective", ("em", "evidence"))
    check_latent_prior(prior)
    pairs = jnp.asarray(check_training_pairs(prior, pairs))
    check_key(key)
    check_int(max_iter, "max_iter", low=0, high=MAX_ITER_LIMIT)
    tol = check_float(tol, "tol", low=0.0)
    check_int(n_samples, "n_samples", low=1)
    cg_tol = check_cg_tol(cg_tol, prior.features.dtype)
    n_terms = 1 + len(prior.blocks)
    learn = np.ones(n_terms, bool) if learn is None else np.asarray(learn)
    if learn.shape != (n_terms,):
        raise ValueError(f"learn must have shape ({n_terms},) = 1 + blocks, got {learn.shape}")
    if learn.dtype != np.bool_:
        raise ValueError(f"learn must be True or False per term, got dtype {learn.dtype}")
    if prior.rank == 0:
        learn = learn & (np.arange(n_terms) > 0)
    sizes = np.maximum(np.asarray(prior.block_sizes(), float), 1.0)
    state = {"z": None, "v": np.ones(n_terms)}

    def em_step(x):
        """``log v -> log v_new``: one E-step (warm-started) and M-step."""
        v = np.exp(x)
        current = scale_prior(prior, v)
        z = state["z"]
        if z is not None:  # xi = sqrt(v_0) Phi w: keep xi where v_0 moved
            z = z.at[: prior.rank].multiply(np.sqrt(state["v"][0] / v[0]))
        fit = mode_core(current, pairs, 50, 1e-10, 1e-10, z)  # mode's defaults
        if np.all(np.isfinite(np.asarray(fit.z))):  # a refused proposal leaves the warm start
            state.update(z=fit.z, v=v)
        if objective == "evidence":
            g, _ = evidence_gradient_core(current, pairs, fit, key, n_samples, cg_tol)
            ratio = np.clip(1.0 + 2.0 * np.asarray(g) / sizes, 0.1, 10.0)
            return np.where(learn, x + np.log(ratio), x)
        q = np.asarray(expected_quadratics_core(current, pairs, fit, key, n_samples, cg_tol))
        with np.errstate(invalid="ignore", divide="ignore"):  # q <= 0: NaN, handled below
            return np.where(learn, x + np.log(q / sizes), x)

    x, trace, converged = squarem(em_step, np.zeros(n_terms), max_iter, tol)
    trace = [np.exp(t) for t in trace]
    v = np.exp(x)
    final = scale_prior(prior, v)
    z = (
        None
        if state["z"] is None
        else state["z"].at[: prior.rank].multiply(np.sqrt(state["v"][0] / v[0]))
    )
    fit = mode_core(final, pairs, 50, 1e-10, 1e-10, z)
    return SparseEMResult(final, v, fit, np.array(trace), converged)
