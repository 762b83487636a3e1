"""The Laplace approximation in precision form: no dense ``n x n`` matrix anywhere.

For the latent ``z ~ N(0, P^-1)`` of a ``LatentPrior`` (``xi = J z``, ``P`` block-diagonal and
sparse) and probit pairs ``s = (i, j)``, ``d_s = xi_i - xi_j = (A J z)_s``, the Laplace posterior
(as ``bayesrank.inference.laplace``, Rasmussen & Williams Sec. 3.4) is

    q(z) = N(z_hat, H^-1),   H = P + J^T A^T diag(w) A J,   w_s = r_s (d_s + r_s),  r_s = phi/Phi,

and ``H`` is applied in ``O(n r + m + nnz(P))`` (``LatentPrior``'s products and ``segment_sum``
over the pairs). With the conjugate gradient method, preconditioned by ``diag(H)``:

- **the mode**: Newton's iteration ``H(z) z_new = J^T A^T (w d + r)`` (the dense engine's step in
  precision form), one CG solve per step warm-started at ``z``, each step halved while it lowers
  ``Psi(z) = sum_s log Phi(d_s) - z^T P z / 2``;
- **a pair's predictive** ``d* ~ N(a*^T xi_hat, a*^T J H^-1 J^T a*)``, one CG solve per pair
  (``vmap`` over the pairs), ``P(i > j) = Phi(mu / sqrt(1 + v))`` (paper Eq. 13-14);
- **or, for many pairs, by sampling**: ``P``'s sparse root and ``A^T W^1/2`` give ``x = H^-1 (P^1/2
  z_1 + J^T A^T W^1/2 z_2) ~ N(0, H^-1)``, so ``S`` CG solves give every pair's variance as the
  mean of ``(J x)_i - (J x)_j)^2``, whatever the number of pairs, with relative standard error
  ``sqrt(2 / S)`` (each estimate's own error is returned);
- **the evidence** ``log Z ~ sum_s log Phi(d_s) - z^T P z / 2 - (log det H - log det P) / 2``,
  both determinants by stochastic Lanczos quadrature (``bayesrank.lanczos``) on the
  preconditioned matrices (``log det H = log det M + log det C^-1 H C^-T``, ``M = C C^T``), with
  the same probes for both, and the estimate's standard error.

CG's tolerance is relative to the right-hand side's norm; every solve reports its iterations.

Each public function checks concrete inputs on the host (``inputs``: a pair index outside
``[0, n)`` would be clamped on read and dropped on write, a silent wrong answer) and calls its
compiled ``*_core`` (no checks), which is also what runs under a caller's ``jit``.
"""

from __future__ import annotations

from functools import partial
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax.scipy.special import log_ndtr

from ...data.checks import check_int
from ...data.keys import check_key
from ...lanczos import slq_logdet_with_probes
from ...likelihoods import inverse_mills, pair_probability
from ...runtime import is_traced
from .hessian import (
    differences,
    hessian_matvec,
    pcg,
    preconditioner,
    solve,
    to_entities,
)
from .inputs import (
    check_cg_tol,
    check_fit,
    check_latent_prior,
    check_mode_options,
    check_test_pairs,
    check_training_pairs,
    check_z0,
)
from .prior import LatentPrior

__all__ = [
    "Evidence",
    "SparseLaplace",
    "evidence_gradient",
    "evidence_gradient_core",
    "expected_quadratics",
    "expected_quadratics_core",
    "log_evidence",
    "log_evidence_core",
    "mode",
    "mode_core",
    "pair_predictions",
    "pair_predictions_core",
    "sampled_pair_predictions",
    "sampled_pair_predictions_core",
]


class SparseLaplace(NamedTuple):
    """The mode ``z: (r + K n,)`` and ``mean = J z: (n,)``, the pairs' curvatures ``w: (m,)``
    (``H = P + J^T A^T diag(w) A J``), Newton's ``n_iter`` and ``converged``, and the most CG
    iterations any Newton step took (``cg_iterations``)."""

    z: jax.Array
    mean: jax.Array
    w: jax.Array
    n_iter: jax.Array
    converged: jax.Array
    cg_iterations: jax.Array


def _psi(prior, z, pairs):
    d = differences(prior.entities(z), pairs)
    return jnp.sum(log_ndtr(d)) - 0.5 * z @ prior.precision_matvec(z)


def mode(
    prior: LatentPrior, pairs, max_iter: int = 50, tol=1e-10, cg_tol=1e-10, z0=None
) -> SparseLaplace:
    """The Laplace mode of ``prior`` and the probit pairs ``pairs: (m, 2)`` (winner first), by
    Newton's iteration in precision form (module docstring), from ``z0: (r + K n,)`` (default
    0). Stops when no entity's ``xi`` moves by more than ``tol * max(1, max|xi|)``.

    Concrete inputs are checked first (``inputs``): ``ValueError`` for a pair outside ``[0,
    n)``, a self pair, a value that is not a whole number (whole floats are taken, as
    ``PreferenceProblem.create`` takes them), a ``z0`` of another shape, not finite, or so far
    out that Newton's first step is lost (``inputs.check_z0``), ``max_iter < 0``, ``tol`` not
    a finite number ``>= 0``, ``cg_tol`` not in ``[sqrt(tiny), 1)`` (``inputs.check_cg_tol``);
    and a mode that is not finite (an overflow) raises rather than returns. Under a caller's
    ``jit`` the core runs unchecked."""
    if is_traced(prior, pairs, tol, cg_tol, z0):
        return mode_core(prior, pairs, max_iter, tol, cg_tol, z0)
    check_latent_prior(prior)
    max_iter, tol, cg_tol = check_mode_options(max_iter, tol, cg_tol, prior.features.dtype)
    pairs = check_training_pairs(prior, pairs)
    z0 = check_z0(z0, prior, pairs)
    fit = mode_core(prior, pairs, max_iter, tol, cg_tol, z0)
    if not np.all(np.isfinite(np.asarray(fit.z))):
        start = "z0 = 0" if z0 is None else f"z0 (largest |z0| = {np.max(np.abs(z0)):.3g})"
        raise ValueError(
            f"mode: Newton's iteration from {start} did not stay finite (the prior's quadratic "
            "z^T P z or a pair's difference overflowed): start nearer the mode (z0=None) or "
            "rescale the prior"
        )
    return fit


@partial(jax.jit, static_argnames=("max_iter",))
def mode_core(prior: LatentPrior, pairs, max_iter: int, tol, cg_tol, z0) -> SparseLaplace:
    """``mode``'s compiled core: no checks, for inputs already checked or traced."""
    pairs = jnp.asarray(pairs)
    dtype = prior.features.dtype
    n = prior.n

    def curvature(z):
        d = differences(prior.entities(z), pairs)
        r = inverse_mills(d)
        return d, r, r * (d + r)

    def cond(state):
        _, k, change, _, _ = state
        return (k < max_iter) & (change > 0)

    def body(state):
        z, k, _, _, most = state
        d, r, w = curvature(z)
        target, iters = solve(prior, pairs, w, prior.latent(to_entities(w * d + r, pairs, n)),
                               z, cg_tol)  # fmt: skip
        step = target - z
        before = _psi(prior, z, pairs)

        def halve(carry):
            t, _ = carry
            return t / 2, _psi(prior, z + t / 2 * step, pairs)

        t, _ = jax.lax.while_loop(
            lambda c: (c[1] < before) & (c[0] > 2.0**-30),
            halve,
            (jnp.asarray(1.0, dtype), _psi(prior, target, pairs)),
        )
        new = z + t * step
        xi_new, xi = prior.entities(new), prior.entities(z)
        change = jnp.max(jnp.abs(xi_new - xi)) / jnp.maximum(1.0, jnp.max(jnp.abs(xi_new)))
        return new, k + 1, jnp.where(change > tol, change, 0.0), change, jnp.maximum(most, iters)

    inf = jnp.asarray(jnp.inf, dtype)
    start = jnp.zeros(prior.size, dtype) if z0 is None else jnp.asarray(z0, dtype)
    z, k, _, last, most = jax.lax.while_loop(
        cond, body, (start, jnp.asarray(0), inf, inf, jnp.asarray(0))
    )
    _, _, w = curvature(z)
    return SparseLaplace(z, prior.entities(z), w, k, last <= tol, most)


def pair_predictions(prior: LatentPrior, pairs, fit: SparseLaplace, test, cg_tol=1e-12):
    """``(prob, delta_mean, delta_var)`` of the test pairs ``test: (p, 2)`` under the Laplace
    posterior ``fit`` of ``prior`` and the training ``pairs: (m, 2)``: one CG solve ``H x = J^T
    a*`` per pair (module docstring). Concrete inputs are checked (``ValueError``): the training
    pairs as ``mode`` checks them, the test pairs in ``[0, n)`` (a self pair is ``P = 1/2``),
    ``fit`` of this prior and as many pairs, ``cg_tol`` in ``[sqrt(tiny), 1)``."""
    if is_traced(prior, pairs, fit, test, cg_tol):
        return pair_predictions_core(prior, pairs, fit, test, cg_tol)
    pairs, test = _checked(prior, pairs, fit), check_test_pairs(prior, test)
    cg_tol = check_cg_tol(cg_tol, prior.features.dtype)
    return pair_predictions_core(prior, pairs, fit, test, cg_tol)


def _checked(prior, pairs, fit) -> np.ndarray:
    """The training pairs, checked with the prior and the fit (``ValueError``)."""
    check_latent_prior(prior)
    pairs = check_training_pairs(prior, pairs)
    check_fit(fit, prior, pairs)
    return pairs


@jax.jit
def pair_predictions_core(prior: LatentPrior, pairs, fit: SparseLaplace, test, cg_tol):
    """``pair_predictions``' compiled core: no checks, for inputs already checked or traced."""
    pairs, test = jnp.asarray(pairs), jnp.asarray(test)
    dtype = fit.mean.dtype
    M = preconditioner(prior, pairs, fit.w)

    def one(pair):
        a = jnp.zeros(prior.n, dtype).at[pair[0]].add(1.0).at[pair[1]].add(-1.0)
        b = prior.latent(a)
        x, _ = solve(prior, pairs, fit.w, b, jnp.zeros_like(b), cg_tol, M)
        return b @ x

    var = jax.vmap(one)(test)
    mean = differences(fit.mean, test)
    return pair_probability(mean, var), mean, var


def latent_draws(
    prior: LatentPrior, pairs, fit: SparseLaplace, key, n_samples: int, cg_tol,
    with_prior: bool = False,
):  # fmt: skip
    """``n_samples`` draws of ``z - z_hat`` under the Laplace posterior, ``(S, r + K n)``, by
    ``S`` CG solves of ``H x = P^1/2 z_1 + J^T A^T W^1/2 z_2`` (module docstring), one at a
    time. With ``with_prior``, also ``(S, r + K n)`` prior draws ``P^-1 P^1/2 z_1`` from the
    same ``z_1`` (one CG solve with ``P`` each): where the pairs say little the two nearly
    coincide, so the prior draws are a control variate for posterior expectations."""
    n = prior.n
    dtype = fit.mean.dtype
    M = preconditioner(prior, pairs, fit.w)
    diag_p = prior.precision_diagonal()

    def draw(key):
        k_prior, k_pairs = jax.random.split(key)
        z_p = jax.random.normal(k_pairs, (pairs.shape[0],), dtype) * jnp.sqrt(fit.w)
        root = prior.precision_root_draw(k_prior)
        rhs = root + prior.latent(to_entities(z_p, pairs, n))
        x, _ = solve(prior, pairs, fit.w, rhs, jnp.zeros_like(rhs), cg_tol, M)
        if not with_prior:
            return x
        x0, _ = pcg(prior.precision_matvec, root, jnp.zeros_like(root), lambda v: v / diag_p,
                    cg_tol, 10 * prior.size)  # fmt: skip
        return x, x0

    return jax.lax.map(draw, jax.random.split(key, n_samples))


def posterior_draws(prior: LatentPrior, pairs, fit: SparseLaplace, key, n_samples: int, cg_tol):
    """``n_samples`` draws of ``xi - xi_hat``, ``(S, n)`` (``latent_draws`` through ``J``)."""
    return jax.vmap(prior.entities)(latent_draws(prior, pairs, fit, key, n_samples, cg_tol))


def sampled_pair_predictions(
    prior: LatentPrior, pairs, fit: SparseLaplace, test, key, n_samples: int = 200, cg_tol=1e-10
):
    """``(prob, delta_mean, delta_var, var_se)`` of ``test: (p, 2)`` with each pair's variance
    estimated from ``n_samples`` draws of the posterior (module docstring); ``var_se: (p,)`` the
    estimate's standard error (the draws' sd of ``(x_i - x_j)^2`` over ``sqrt(n_samples)``).
    ``prob`` uses the estimated variance. Checked as ``pair_predictions``, and ``key`` a PRNG
    key, ``n_samples >= 2`` (one draw has no standard error)."""
    if is_traced(prior, pairs, fit, test, key, cg_tol):
        return sampled_pair_predictions_core(prior, pairs, fit, test, key, n_samples, cg_tol)
    pairs, test = _checked(prior, pairs, fit), check_test_pairs(prior, test)
    cg_tol = check_cg_tol(cg_tol, prior.features.dtype)
    check_key(key)
    check_int(n_samples, "n_samples", low=2)
    return sampled_pair_predictions_core(prior, pairs, fit, test, key, n_samples, cg_tol)


@partial(jax.jit, static_argnames=("n_samples",))
def sampled_pair_predictions_core(
    prior: LatentPrior, pairs, fit: SparseLaplace, test, key, n_samples: int, cg_tol
):
    """``sampled_pair_predictions``' compiled core: no checks, for inputs already checked or
    traced."""
    pairs, test = jnp.asarray(pairs), jnp.asarray(test)
    draws = posterior_draws(prior, pairs, fit, key, n_samples, cg_tol)
    squares = jax.vmap(lambda x: differences(x, test) ** 2)(draws)  # (S, p)
    var = jnp.mean(squares, axis=0)
    var_se = jnp.std(squares, axis=0) / jnp.sqrt(n_samples)
    mean = differences(fit.mean, test)
    return pair_probability(mean, var), mean, var, var_se


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
    prior: LatentPrior, pairs, fit: SparseLaplace, key, n_probes: int = 64, n_steps: int = 40
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
        pairs = _checked(prior, pairs, fit)
        check_key(key)
        check_int(n_probes, "n_probes", low=2)
        check_int(n_steps, "n_steps", low=1)
    return log_evidence_core(prior, pairs, fit, key, n_probes, n_steps)


@partial(jax.jit, static_argnames=("n_probes", "n_steps"))
def log_evidence_core(
    prior: LatentPrior, pairs, fit: SparseLaplace, key, n_probes: int, n_steps: int
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


def _block_expectations(prior: LatentPrior, fit: SparseLaplace, post, prior_draws):
    """``E_q[z_b^T P_b z_b]: (1 + K,)``: the trace part as ``dim_b`` (the prior's, exact) plus the
    mean difference between posterior draws and prior draws of the same normals."""
    quadratics = jax.vmap(prior.block_quadratics)
    shrink = jnp.mean(quadratics(post) - quadratics(prior_draws), axis=0)
    return prior.block_quadratics(fit.z) + prior.block_sizes() + shrink


def expected_quadratics(
    prior: LatentPrior, pairs, fit: SparseLaplace, key, n_samples: int = 16, cg_tol=1e-6
):
    """EM's ``E_q[z_b^T P_b z_b]: (1 + K,)`` from ``n_samples`` posterior draws with prior draws
    of the same normals as a control variate (``latent_draws(with_prior=True)``). Checked as
    ``pair_predictions``, and ``key`` a PRNG key, ``n_samples >= 1``."""
    if not is_traced(prior, pairs, fit, key, cg_tol):
        pairs = _checked_draws(prior, pairs, fit, key, n_samples, cg_tol)
    return expected_quadratics_core(prior, pairs, fit, key, n_samples, cg_tol)


def _checked_draws(prior, pairs, fit, key, n_samples, cg_tol) -> np.ndarray:
    """``_checked``, and ``key`` a PRNG key, ``n_samples >= 1`` (``ValueError``)."""
    pairs = _checked(prior, pairs, fit)
    check_cg_tol(cg_tol, prior.features.dtype)  # in (0, 1): no int to overflow JAX's parsing
    check_key(key)
    check_int(n_samples, "n_samples", low=1)
    return pairs


@partial(jax.jit, static_argnames=("n_samples",))
def expected_quadratics_core(
    prior: LatentPrior, pairs, fit: SparseLaplace, key, n_samples: int, cg_tol
):
    """``expected_quadratics``' compiled core: no checks, for inputs already checked or traced."""
    pairs = jnp.asarray(pairs)
    post, prior_draws = latent_draws(prior, pairs, fit, key, n_samples, cg_tol, with_prior=True)
    return _block_expectations(prior, fit, post, prior_draws)


def evidence_gradient(
    prior: LatentPrior, pairs, fit: SparseLaplace, key, n_samples: int = 16, cg_tol=1e-6
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


@partial(jax.jit, static_argnames=("n_samples",))
def evidence_gradient_core(
    prior: LatentPrior, pairs, fit: SparseLaplace, key, n_samples: int, cg_tol
):
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
