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

from ...compiler import jit
from ...data.checks import check_int
from ...data.keys import check_key
from ...likelihoods import inverse_mills, pair_probability
from ...querymap import map_in_batches
from ...runtime import is_traced
from .hessian import (
    differences,
    pcg,
    preconditioner,
    solve,
    to_entities,
)
from .inputs import (
    check_cg_tol,
    check_fitted,
    check_latent_prior,
    check_mode_options,
    check_test_pairs,
    check_training_pairs,
    check_z0,
)
from .prior import LatentPrior

__all__ = [
    "SparseMode",
    "mode",
    "mode_core",
    "pair_predictions",
    "pair_predictions_core",
    "sampled_pair_predictions",
    "sampled_pair_predictions_core",
]


class SparseMode(NamedTuple):
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
) -> SparseMode:
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


def mode_core(prior: LatentPrior, pairs, max_iter: int, tol, cg_tol, z0=None) -> SparseMode:
    """``mode``'s core: no checks, for inputs already checked or traced. The start (``z0``,
    default 0) is always an input of the one compiled program, so a cold start and EM's warm
    ones share it (a ``None`` start was a second program, 1.5-3 s of XLA on HetRec's prior)."""
    if z0 is None:
        z0 = np.zeros(prior.size, prior.features.dtype)
    return _mode_from(prior, pairs, max_iter, tol, cg_tol, z0)


@partial(jit, static_argnames=("max_iter",))
def _mode_from(prior: LatentPrior, pairs, max_iter: int, tol, cg_tol, z0) -> SparseMode:
    """``mode_core``'s compiled program, from the start ``z0: (r + K n,)``."""
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
    start = jnp.asarray(z0, dtype)
    z, k, _, last, most = jax.lax.while_loop(
        cond, body, (start, jnp.asarray(0), inf, inf, jnp.asarray(0))
    )
    _, _, w = curvature(z)
    return SparseMode(z, prior.entities(z), w, k, last <= tol, most)


def pair_predictions(prior: LatentPrior, pairs, fit: SparseMode, test, cg_tol=1e-12):
    """``(prob, delta_mean, delta_var)`` of the test pairs ``test: (p, 2)`` under the Laplace
    posterior ``fit`` of ``prior`` and the training ``pairs: (m, 2)``: one CG solve ``H x = J^T
    a*`` per pair (module docstring). Concrete inputs are checked (``ValueError``): the training
    pairs as ``mode`` checks them, the test pairs in ``[0, n)`` (a self pair is ``P = 1/2``),
    ``fit`` of this prior and as many pairs, ``cg_tol`` in ``[sqrt(tiny), 1)``."""
    if is_traced(prior, pairs, fit, test, cg_tol):
        return pair_predictions_core(prior, pairs, fit, test, cg_tol)
    pairs, test = check_fitted(prior, pairs, fit), check_test_pairs(prior, test)
    cg_tol = check_cg_tol(cg_tol, prior.features.dtype)
    return pair_predictions_core(prior, pairs, fit, test, cg_tol)


@jit
def pair_predictions_core(prior: LatentPrior, pairs, fit: SparseMode, test, cg_tol):
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


#: Draws solved together (``vmap``): their CG iterations read the features once for all of
#: them, matrix products instead of matrix-vector ones (HetRec at rank 300: 16 draws in 0.65 s
#: instead of 2.6 s one at a time; where the pairs dominate, rank 64 and 10 pairs per entity,
#: up to 15 % slower: docs/development/tests.md); memory ``DRAW_BATCH`` times CG's vectors.
DRAW_BATCH = 16


def latent_draws(
    prior: LatentPrior, pairs, fit: SparseMode, key, n_samples: int, cg_tol,
    with_prior: bool = False,
):  # fmt: skip
    """``n_samples`` draws of ``z - z_hat`` under the Laplace posterior, ``(S, r + K n)``, by
    ``S`` CG solves of ``H x = P^1/2 z_1 + J^T A^T W^1/2 z_2`` (module docstring), ``DRAW_BATCH``
    at a time. With ``with_prior``, also ``(S, r + K n)`` prior draws ``P^-1 P^1/2 z_1`` from the
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

    return map_in_batches(draw, jax.random.split(key, n_samples), DRAW_BATCH)


def posterior_draws(prior: LatentPrior, pairs, fit: SparseMode, key, n_samples: int, cg_tol):
    """``n_samples`` draws of ``xi - xi_hat``, ``(S, n)`` (``latent_draws`` through ``J``)."""
    return jax.vmap(prior.entities)(latent_draws(prior, pairs, fit, key, n_samples, cg_tol))


#: The CG tolerance of the sampled pair predictions' draws.
SAMPLED_CG_TOL = 1e-10


@partial(jit, static_argnames=("n_samples",))
def posterior_draws_core(prior: LatentPrior, pairs, fit: SparseMode, key, n_samples: int,
                         cg_tol):  # fmt: skip
    """``posterior_draws`` as one compiled program (for inputs already checked)."""
    return posterior_draws(prior, jnp.asarray(pairs), fit, key, n_samples, cg_tol)


def sampled_pair_predictions(
    prior: LatentPrior, pairs, fit: SparseMode, test, key, n_samples: int = 200,
    cg_tol=SAMPLED_CG_TOL,
):  # fmt: skip
    """``(prob, delta_mean, delta_var, var_se)`` of ``test: (p, 2)`` with each pair's variance
    estimated from ``n_samples`` draws of the posterior (module docstring); ``var_se: (p,)`` the
    estimate's standard error (the draws' sd of ``(x_i - x_j)^2`` over ``sqrt(n_samples)``).
    ``prob`` uses the estimated variance. Checked as ``pair_predictions``, and ``key`` a PRNG
    key, ``n_samples >= 2`` (one draw has no standard error)."""
    if is_traced(prior, pairs, fit, test, key, cg_tol):
        return sampled_pair_predictions_core(prior, pairs, fit, test, key, n_samples, cg_tol)
    pairs, test = check_fitted(prior, pairs, fit), check_test_pairs(prior, test)
    cg_tol = check_cg_tol(cg_tol, prior.features.dtype)
    check_key(key)
    check_int(n_samples, "n_samples", low=2)
    return sampled_pair_predictions_core(prior, pairs, fit, test, key, n_samples, cg_tol)


@partial(jit, static_argnames=("n_samples",))
def sampled_pair_predictions_core(
    prior: LatentPrior, pairs, fit: SparseMode, test, key, n_samples: int, cg_tol
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
