"""The sparse Laplace posterior's evidence and its gradient in the prior's block variances, with
the expectations that EM needs (``laplace`` gives the mode and the predictions).

- **the evidence** ``log Z ~ sum_s log Phi(d_s) - z^T P z / 2 - (log det H - log det P) / 2``,
  both determinants by stochastic Lanczos quadrature (``bayesrank.lanczos``) on the
  preconditioned matrices (``log det H = log det M + log det C^-1 H C^-T``, ``M = C C^T``), with
  the same probes for both, and the estimate's standard error;
- **EM's expectations** ``E_q[z_b^T P_b z_b]`` from posterior draws with prior draws of the same
  normals as a control variate, and the evidence's gradient built from them.

Each public function checks concrete inputs on the host (``inputs``) and calls its compiled
``*_core`` (no checks), which is also what runs under a caller's ``jit``.
"""

from __future__ import annotations

from functools import partial
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax.scipy.special import log_ndtr

from ...compiler import jit
from ...data.checks import check_int
from ...data.keys import check_key
from ...lanczos import slq_logdet_with_probes
from ...likelihoods import inverse_mills
from ...runtime import is_traced
from .hessian import differences, hessian_matvec, preconditioner, solve, to_entities
from .inputs import check_cg_tol, check_fitted
from .laplace import SparseMode, latent_draws
from .prior import LatentPrior

__all__ = [
    "Evidence",
    "evidence_gradient",
    "evidence_gradient_core",
    "expected_quadratics",
    "expected_quadratics_core",
    "log_evidence",
    "log_evidence_core",
]


class Evidence(NamedTuple):
    """The Laplace evidence ``log_z`` and its standard error ``se`` (the probes'), with its
    parts: ``fit_term = sum_s log Phi(d_s) - z^T P z / 2`` (exact) and the log-determinants
    ``logdet_h``, ``logdet_p`` (estimated)."""

    log_z: jax.Array
    se: jax.Array
    fit_term: jax.Array
    logdet_h: jax.Array
    logdet_p: jax.Array


def log_evidence(
    prior: LatentPrior, pairs, fit: SparseMode, key, n_probes: int = 64, n_steps: int = 40
) -> Evidence:
    """The Laplace evidence (R&W Eq. 3.32 in precision form)

        log Z = sum_s log Phi(d_s) - z^T P z / 2 - (log det H - log det P) / 2,

    with ``log det H = log det M + log det C^-1 H C^-T`` (``M = C C^T`` the ``Preconditioner``,
    exact) and ``log det P = sum_k log det Q_k`` likewise with ``Q_k``'s diagonal; the two
    preconditioned determinants by stochastic Lanczos quadrature (``n_probes`` Rademacher probes,
    the same for both, ``n_steps`` Lanczos steps). ``se`` is the standard error of the probes'
    mean of the difference; Lanczos's bias is not in it (small when ``n_steps`` exceeds the
    preconditioned condition number's square root several times).

    The probes' error is that of ``tr log`` of a matrix with large off-diagonal entries in its
    logarithm (the graphs'): on ``n = 500`` entities with two graphs (``tests``) one probe's
    standard deviation is about 19 nats, so 64 probes give about 1.2 nats. Evidences at nearby
    hyperparameters estimated with the same ``key`` share most of it (common probes).

    Concrete inputs are checked (``ValueError``): the pairs as ``mode`` checks them, ``fit`` of
    this prior and as many pairs, ``key`` a PRNG key, ``n_probes >= 2`` (``se`` needs two),
    ``n_steps >= 1``."""
    if not is_traced(prior, pairs, fit, key):
        pairs = check_fitted(prior, pairs, fit)
        check_key(key)
        check_int(n_probes, "n_probes", low=2)
        check_int(n_steps, "n_steps", low=1)
    return log_evidence_core(prior, pairs, fit, key, n_probes, n_steps)


@partial(jit, static_argnames=("n_probes", "n_steps"))
def log_evidence_core(
    prior: LatentPrior, pairs, fit: SparseMode, key, n_probes: int, n_steps: int
) -> Evidence:
    """``log_evidence``'s compiled core: no checks, for inputs already checked or traced."""
    pairs = jnp.asarray(pairs)
    dtype = fit.mean.dtype
    d = differences(fit.mean, pairs)
    fit_term = jnp.sum(log_ndtr(d)) - 0.5 * fit.z @ prior.precision_matvec(fit.z)
    M = preconditioner(prior, pairs, fit.w)
    H = hessian_matvec(prior, pairs, fit.w)
    scale_p = prior.precision_diagonal()  # its attribute block is I

    def whitened_h(v):
        return M.half_solve(H(M.half_solve(v, trans=1)))

    def whitened_p(v):
        return prior.precision_matvec(v / jnp.sqrt(scale_p)) / jnp.sqrt(scale_p)

    probes = jax.random.rademacher(key, (n_probes, prior.size), dtype)
    _, _, per_h = slq_logdet_with_probes(whitened_h, probes, n_steps)
    _, _, per_p = slq_logdet_with_probes(whitened_p, probes, n_steps)
    logdet_h = M.logdet() + jnp.mean(per_h)
    logdet_p = jnp.sum(jnp.log(scale_p)) + jnp.mean(per_p)
    se = 0.5 * jnp.std(per_h - per_p, ddof=1) / jnp.sqrt(n_probes)
    return Evidence(fit_term - 0.5 * (logdet_h - logdet_p), se, fit_term, logdet_h, logdet_p)


def _block_expectations(prior: LatentPrior, fit: SparseMode, post, prior_draws):
    """``E_q[z_b^T P_b z_b]: (1 + K,)``: the trace part as ``dim_b`` (the prior's, exact) plus the
    mean difference between posterior draws and prior draws of the same normals."""
    quadratics = jax.vmap(prior.block_quadratics)
    shrink = jnp.mean(quadratics(post) - quadratics(prior_draws), axis=0)
    return prior.block_quadratics(fit.z) + prior.block_sizes() + shrink


def expected_quadratics(
    prior: LatentPrior, pairs, fit: SparseMode, key, n_samples: int = 16, cg_tol=1e-6
):
    """EM's ``E_q[z_b^T P_b z_b]: (1 + K,)`` from ``n_samples`` posterior draws with prior draws
    of the same normals as a control variate (``latent_draws(with_prior=True)``). Checked as
    ``pair_predictions``, and ``key`` a PRNG key, ``n_samples >= 1``."""
    if not is_traced(prior, pairs, fit, key, cg_tol):
        pairs = _checked_draws(prior, pairs, fit, key, n_samples, cg_tol)
    return expected_quadratics_core(prior, pairs, fit, key, n_samples, cg_tol)


def _checked_draws(prior, pairs, fit, key, n_samples, cg_tol) -> np.ndarray:
    """``_checked``, and ``key`` a PRNG key, ``n_samples >= 1`` (``ValueError``)."""
    pairs = check_fitted(prior, pairs, fit)
    check_cg_tol(cg_tol, prior.features.dtype)  # in (0, 1): no int to overflow JAX's parsing
    check_key(key)
    check_int(n_samples, "n_samples", low=1)
    return pairs


@partial(jit, static_argnames=("n_samples",))
def expected_quadratics_core(
    prior: LatentPrior, pairs, fit: SparseMode, key, n_samples: int, cg_tol
):
    """``expected_quadratics``' compiled core: no checks, for inputs already checked or traced."""
    pairs = jnp.asarray(pairs)
    post, prior_draws = latent_draws(prior, pairs, fit, key, n_samples, cg_tol, with_prior=True)
    return _block_expectations(prior, fit, post, prior_draws)


def evidence_gradient(
    prior: LatentPrior, pairs, fit: SparseMode, key, n_samples: int = 16, cg_tol=1e-6
):
    """``(gradient, quadratics)``: the Laplace evidence's gradient in ``log v_b``, each term's
    log-variance (``prior.scale_prior``), ``(1 + K,)``, and the EM quantities ``E_q[z_b^T P_b
    z_b]`` it is built from. With ``P = blockdiag(Pbar_b / v_b)`` and ``z_hat`` stationary,

        d log Z / d log v_b = (E_q[z_b^T P_b z_b] - dim_b) / 2  -  u_b^T P_b z_hat_b / 2,
        u = H^-1 J^T A^T (w' sigma^2),

    the first term the explicit one (EM's: ``z_hat^T P z_hat``, ``log det P`` and ``tr(H^-1
    dH)``), the second the mode's move through ``log det H``'s curvatures (R&W Eq. 5.23 in
    precision form): ``sigma_s^2`` each training pair's posterior variance, ``w'_s = dw/dd``.
    The expectations come from ``n_samples`` posterior draws with prior draws of the same normals
    as a control variate (``latent_draws(with_prior=True)``), ``sigma^2`` from the same draws.
    Checked as ``expected_quadratics``."""
    if not is_traced(prior, pairs, fit, key, cg_tol):
        pairs = _checked_draws(prior, pairs, fit, key, n_samples, cg_tol)
    return evidence_gradient_core(prior, pairs, fit, key, n_samples, cg_tol)


@partial(jit, static_argnames=("n_samples",))
def evidence_gradient_core(prior: LatentPrior, pairs, fit: SparseMode, key, n_samples: int, cg_tol):
    """``evidence_gradient``'s compiled core: no checks, for inputs already checked or traced."""
    pairs = jnp.asarray(pairs)
    n = prior.n
    post, prior_draws = latent_draws(prior, pairs, fit, key, n_samples, cg_tol, with_prior=True)
    q = _block_expectations(prior, fit, post, prior_draws)
    sigma2 = jnp.mean(jax.vmap(lambda x: differences(prior.entities(x), pairs) ** 2)(post), 0)
    d = differences(fit.mean, pairs)
    r = inverse_mills(d)
    dw = -fit.w * (d + r) + r * (1.0 - fit.w)
    g = prior.latent(to_entities(dw * sigma2, pairs, n))
    u, _ = solve(prior, pairs, fit.w, g, jnp.zeros_like(g), cg_tol)
    gradient = 0.5 * (q - prior.block_sizes()) - 0.5 * prior.block_quadratics(u, fit.z)
    return gradient, q
