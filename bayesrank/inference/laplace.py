"""The Laplace approximation of the probit pair model, on the shared Gaussian factorisation.

Model (as ``bayesrank.inference.ep``): ``xi ~ N(0, K)``, pairs ``s = (i, j)`` with likelihood
``Phi(d_s)``, ``d_s = a_s^T xi = xi_i - xi_j``. Laplace replaces the posterior by a Gaussian at its
mode ``xi_hat`` with the curvature there (Rasmussen & Williams 2006, Sec. 3.4):

    q(xi) = N(xi_hat, (K^-1 + W)^-1),   W = -grad^2 log p(pairs | xi) = A^T diag(w) A,
    r_s = d log Phi(d_s) / d d_s = phi(d_s) / Phi(d_s),   w_s = -d r_s / d d_s = r_s (d_s + r_s).

For pairs ``W`` is a weighted graph Laplacian of the compared pairs, not a diagonal (``w_s >= 0``:
the probit is log-concave). **Newton's step** ``xi <- (K^-1 + W)^-1 (W xi + g)``, ``g = A^T r``,
is exactly the Gaussian ``N(0, K) prod_s site_s`` of EP's rank-one sites with ``tau_s = w_s`` and
``nu_s = w_s d_s + r_s``, so it is computed as EP computes a posterior (``gaussian.factor``): one
``K = M M^T`` per fit, and per step a Cholesky of ``B = I + M^T W M`` (eigenvalues >= 1). ``K`` is
never inverted: ``alpha = K^-1 xi = eta - W xi`` holds at every Newton iterate, and the objective
``Psi(xi) = sum_s log Phi(d_s) - 1/2 xi^T alpha`` is evaluated along the step from ``alpha``
(linear in the step, R&W Algorithm 3.1). A step that lowers ``Psi`` is halved.

The **Laplace evidence** (R&W Eq. 3.32) ``log Z = sum_s log Phi(d_hat_s) - 1/2 xi_hat^T alpha_hat
- 1/2 log|I + K W|`` (``log|B|`` of the factorisation). Its gradient in ``K`` by **implicit
differentiation**, in closed form (``_evidence_bwd``, R&W Sec. 5.5.1 with the Laplacian ``W``):
the Newton loop runs on ``stop_gradient(K)``; at the mode ``Psi`` is stationary, so the gradient
is ``K``'s explicit terms plus the one implicit term, the curvature ``W(xi_hat)`` moving with the
mode. No ``eigh`` and no ``m x m`` factorisation: O(m n) plus one ``n^3`` product, as EP's.

Uninformative pairs (zero prior variance of ``d_s``,
``informative_pairs``) contribute ``log Phi(0)`` and no curvature, as
in EP.

``outcomes`` (``bayesrank.likelihoods.Outcomes``: ties, weights, a tie margin) replace
``log Phi(d_s)`` by each row's weighted outcome log-likelihood, with its slope and curvature
(``outcome_curvature``; log-concave, so ``w_s >= 0`` still). The evidence is differentiable in
``K``; the margin is held fixed (learn it with EP, whose evidence gives its gradient).
"""

from __future__ import annotations

import dataclasses
from typing import ClassVar, NamedTuple

import jax
import jax.numpy as jnp
from jax.scipy.special import log_ndtr

from ..compiler import jit
from ..likelihoods import Outcomes, inverse_mills, outcome_curvature
from ..linalg import prior_root
from ..runtime import is_traced
from .engine import GaussianEngine, check_engine_settings, fit_fields
from .gaussian.factor import covariance, dense, from_root, pseudo_data_precision
from .gaussian.sites import Sites, informative_pairs, marginals, pair_mask_or_all, to_entities
from .posterior import GaussianPosterior

__all__ = [
    "Laplace",
    "LaplacePosterior",
    "LaplaceState",
    "default_tol",
    "fit",
    "log_evidence",
    "mode",
]

#: Step halvings of the Newton line search before a step is given up.
MAX_HALVINGS = 30


def default_tol(dtype) -> float:
    """Newton's tolerance on the mode, relative to ``max(1, max|xi|)``: 1e-10 in float64, 1e-5
    in float32."""
    return 1e-10 if jnp.finfo(dtype).bits == 64 else 1e-5


class LaplaceState(NamedTuple):
    """Newton's iterate: the mode estimate and what the next step needs."""

    xi: jax.Array  # (n,)
    alpha: jax.Array  # (n,) K^-1 xi
    objective: jax.Array  # Psi(xi)
    n_iter: jax.Array
    max_change: jax.Array  # largest |change| of xi in the last step


def _curvature(d, outcomes: Outcomes | None = None):
    """``(log Phi(d), r, w)`` per pair: the log-likelihood, its slope and minus its curvature
    (each row's weighted outcome's with ``outcomes``)."""
    if outcomes is not None:
        return outcome_curvature(d, outcomes)
    r = inverse_mills(d)
    return log_ndtr(d), r, jnp.clip(r * (d + r), 0.0, None)


def _third(d, outcomes: Outcomes | None):
    """``w'(d)``: the derivative of minus the curvature, per row."""
    if outcomes is None:
        _, r, w = _curvature(d)
        return -w * (d + r) + r * (1.0 - w)  # the third derivative of log Phi, negated
    return jax.jvp(lambda x: _curvature(x, outcomes)[2], (d,), (jnp.ones_like(d),))[1]


def _differences(xi, pairs):
    return xi[pairs[:, 0]] - xi[pairs[:, 1]]


def _sites(xi, pairs, active, outcomes=None) -> Sites:
    """The rank-one "sites" whose Gaussian with the prior is Newton's step from ``xi``."""
    d = _differences(xi, pairs)
    _, r, w = _curvature(d, outcomes)
    return Sites(jnp.where(active, w, 0.0), jnp.where(active, w * d + r, 0.0))


def _objective(xi, alpha, pairs, active, outcomes=None):
    """``Psi = sum_s log Phi(d_s) - 1/2 xi^T alpha`` (uninformative pairs: ``log Phi(0)``)."""
    log_lik, _, _ = _curvature(_differences(xi, pairs), outcomes)
    return jnp.sum(jnp.where(active, log_lik, 0.0)) - 0.5 * xi @ alpha


def _alpha(sites: Sites, pairs, xi):
    """``K^-1 xi = eta - S xi`` for ``xi`` the mean of ``N(0, K) prod_s site_s`` (no ``K^-1``)."""
    n = xi.shape[0]
    return to_entities(sites.nu - sites.tau * _differences(xi, pairs), pairs, n)


def _newton_point(root, xi, pairs, active, outcomes=None):
    """Newton's full step from ``xi``: ``(xi_new, alpha_new)``."""
    sites = _sites(xi, pairs, active, outcomes)
    xi_new = from_root(root, pairs, sites, active).mean
    return xi_new, _alpha(sites, pairs, xi_new)


def mode(
    K,
    pairs,
    *,
    pair_mask=None,
    max_iter: int = 200,
    tol=None,
    sites: Sites | None = None,
    outcomes: Outcomes | None = None,
) -> LaplaceState:
    """Newton's method for the posterior mode ``xi_hat`` (module docstring). Pure.

    ``tol`` (default ``default_tol``): stop when no entry of ``xi`` moved by more than
    ``tol`` times ``max(1, max|xi|)``. ``sites``: a warm start, e.g. a previous fit's
    (``LaplacePosterior.sites``): Newton starts at the mean of ``N(0, K) prod_s site_s``,
    where ``alpha = K^-1 xi = eta - S xi`` is known without ``K^-1`` (default: zero, the prior
    mode). ``outcomes``: ties, weights and the tie margin (module docstring).
    """
    args = (jnp.asarray(K), jnp.asarray(pairs), pair_mask, max_iter, tol, sites, outcomes)
    return _mode_pure(*args) if is_traced(*args) else _mode_program(*args)


def _mode_pure(K, pairs, pair_mask, max_iter, tol, sites, outcomes) -> LaplaceState:
    active = informative_pairs(K, pairs, pair_mask)
    return _mode(prior_root(K), pairs, active, max_iter, tol, sites, outcomes)


@jit
def _mode_program(*args) -> LaplaceState:  # concrete inputs: one program per shape
    return _mode_pure(*args)


def _mode(root, pairs, active, max_iter, tol, sites, outcomes=None) -> LaplaceState:
    """``mode`` given ``K``'s root (``K = M M^T``) and the active pairs."""
    dtype = root.dtype
    tol = default_tol(dtype) if tol is None else tol
    n = root.shape[0]
    if sites is None:
        xi, alpha = jnp.zeros(n, dtype), jnp.zeros(n, dtype)
    else:
        sites = Sites(jnp.where(active, sites.tau, 0.0), jnp.where(active, sites.nu, 0.0))
        xi = from_root(root, pairs, sites, active).mean
        alpha = _alpha(sites, pairs, xi)
    state = LaplaceState(xi, alpha, _objective(xi, alpha, pairs, active, outcomes), 0, jnp.inf)

    def step(s: LaplaceState) -> LaplaceState:
        xi_new, alpha_new = _newton_point(root, s.xi, pairs, active, outcomes)

        def trial(t):
            x = s.xi + t * (xi_new - s.xi)
            a = s.alpha + t * (alpha_new - s.alpha)
            return x, a, _objective(x, a, pairs, active, outcomes)

        # a step may not lower Psi beyond its round-off (near the mode a full Newton step
        # changes Psi by ~1e-18, below what float arithmetic resolves)
        floor = s.objective - 64 * jnp.finfo(dtype).eps * (1.0 + jnp.abs(s.objective))

        def shorter(c):
            _, _, _, f, k = c
            return (~(f >= floor) | ~jnp.isfinite(f)) & (k < MAX_HALVINGS)

        def halve(c):
            t, _, _, _, k = c
            x, a, f = trial(0.5 * t)
            return 0.5 * t, x, a, f, k + 1

        x, a, f = trial(1.0)
        _, x, a, f, _ = jax.lax.while_loop(shorter, halve, (jnp.asarray(1.0, dtype), x, a, f, 0))
        ok = jnp.isfinite(f) & (f >= floor)
        x, a, f = jnp.where(ok, x, s.xi), jnp.where(ok, a, s.alpha), jnp.where(ok, f, s.objective)
        change = jnp.where(ok, jnp.max(jnp.abs(x - s.xi)), 0.0)
        return LaplaceState(x, a, f, s.n_iter + 1, change)

    def going(s: LaplaceState):
        scale = jnp.maximum(1.0, jnp.max(jnp.abs(s.xi)))
        return (s.n_iter < max_iter) & ~(s.max_change <= tol * scale)

    return jax.lax.while_loop(going, step, state)


@jax.custom_vjp
def _evidence(K, value, cov, pairs, r, w, dw, active):
    """``log Z`` (``value``, computed at the mode) as a function of ``K`` whose VJP is the closed
    form below: the mode is stationary in ``Psi``, so only ``K``'s explicit terms and the
    curvature's move with the mode (the implicit term) remain."""
    del K, cov, pairs, r, w, dw, active
    return value


def _evidence_fwd(K, value, cov, pairs, r, w, dw, active):
    return value, (cov, pairs, r, w, dw, active)


def _evidence_bwd(res, ct):
    """``d log Z / dK = 1/2 g g^T - 1/2 (W - W Sigma W) - 1/2 sym(u g^T)`` at the mode.

    ``g = A^T r = K^-1 xi_hat`` (stationarity), ``Sigma = (K^-1 + W)^-1``; ``d log|I + K W|`` in
    ``K`` is ``W - W Sigma W``; the mode moves as ``d xi = (I + K W)^-1 dK g``, and with it each
    ``w_s`` (by ``dw_s = w'(d_s) d d_s``), which moves the log-determinant by ``v_s w'_s`` per
    pair (``v_s = a_s^T Sigma a_s``): ``b = A^T (v * w')``, ``u = (I + W K)^-1 b = b - W Sigma b``.
    ``W`` is applied sparsely (O(m n)); one ``n^3`` product (``W Sigma W``).
    """
    cov, pairs, r, w, dw, active = res
    n = cov.shape[0]
    r, w, dw = (jnp.where(active, x, 0.0) for x in (r, w, dw))
    g = to_entities(r, pairs, n)
    _, v = marginals(jnp.zeros(n, cov.dtype), cov, pairs)
    b = to_entities(v * dw, pairs, n)
    u = b - to_entities(w * _differences(cov @ b, pairs), pairs, n)  # (I - W Sigma) b
    R = pseudo_data_precision(cov, pairs, Sites(w, w))  # W - W Sigma W
    grad = 0.5 * jnp.outer(g, g) - 0.5 * R - 0.25 * (jnp.outer(u, g) + jnp.outer(g, u))
    grad = 0.5 * (grad + grad.T)
    return ct * grad, None, None, None, None, None, None, None


_evidence.defvjp(_evidence_fwd, _evidence_bwd)


def _evidence_at(K, xi_hat, pairs, active, valid, logdet, cov, outcomes=None):
    """``log Z`` at the (stopped) mode ``xi_hat``, differentiable in ``K`` (closed-form VJP).

    ``logdet = log|I + K W|`` and ``cov = (K^-1 + W)^-1`` of the mode's curvature (the
    factorisation ``gaussian.factor.from_root`` of its sites gives both)."""
    n = xi_hat.shape[0]
    d = _differences(xi_hat, pairs)
    log_lik, r, w = _curvature(d, outcomes)
    r, w = jnp.where(active, r, 0.0), jnp.where(active, w, 0.0)  # padded, uninformative: none
    alpha = to_entities(r, pairs, n)  # K^-1 xi_hat = A^T r at the mode
    log_flat = _curvature(jnp.zeros_like(d), outcomes)[0]  # log P(outcome | d = 0)
    flat = jnp.sum(jnp.where(valid & ~active, log_flat, 0.0))
    value = jnp.sum(jnp.where(active, log_lik, 0.0)) - 0.5 * xi_hat @ alpha - 0.5 * logdet
    return _evidence(K, value + flat, cov, pairs, r, w, _third(d, outcomes), active)


def log_evidence(
    K, pairs, *, pair_mask=None, max_iter: int = 200, tol=None, outcomes=None
) -> jax.Array:
    """The Laplace approximation of ``log P(pairs | K)`` (R&W Eq. 3.32), differentiable in
    ``K`` by implicit differentiation (module docstring). Pure."""
    args = (jnp.asarray(K), jnp.asarray(pairs), pair_mask, max_iter, tol, outcomes)
    return _log_evidence_pure(*args) if is_traced(*args) else _log_evidence_program(*args)


def _log_evidence_pure(K, pairs, pair_mask, max_iter, tol, outcomes) -> jax.Array:
    K = dense(K)
    outcomes = None if outcomes is None else jax.lax.stop_gradient(outcomes)
    valid = pair_mask_or_all(pairs, pair_mask)
    K0 = jax.lax.stop_gradient(K)
    active = informative_pairs(K0, pairs, valid)
    root = prior_root(K0)  # one factorisation for Newton and the evidence
    xi = _mode(root, pairs, active, max_iter, tol, None, outcomes).xi
    post = from_root(root, pairs, _sites(xi, pairs, active, outcomes), active)
    cov = covariance(post, False)
    return _evidence_at(K, xi, pairs, active, valid, post.logdet, cov, outcomes)


@jit
def _log_evidence_program(*args) -> jax.Array:  # concrete inputs: one program per shape
    return _log_evidence_pure(*args)


_LaplaceFields = fit_fields("_LaplaceFields", n_uninformative=jax.Array)


class LaplacePosterior(_LaplaceFields, GaussianPosterior):
    """The Laplace posterior ``N(mean, cov)``: ``mean = xi_hat: (n,)``, ``cov = (K^-1 + W)^-1:
    (n, n)``, the Laplace evidence, the ``sites`` at the mode (``tau = w``, ``nu = w d + r``:
    ``N(0, K) prod_s site_s`` is Newton's next iterate, the mode itself at convergence; a warm
    start for the next fit), Newton's iterations, ``converged``, ``max_change`` and the number of
    uninformative pairs. Predicts through
    ``GaussianPosterior`` (Eq. 13-14 from its moments)."""

    __slots__ = ()


def fit(
    K,
    pairs,
    *,
    pair_mask=None,
    max_iter: int = 200,
    tol=None,
    sites: Sites | None = None,
    outcomes: Outcomes | None = None,
) -> LaplacePosterior:
    """The Laplace approximation of the posterior and its evidence (differentiable in ``K``).
    Pure (jit, vmap, grad). ``sites``: a warm start (``mode``); ``outcomes``: ties, weights
    and the tie margin (module docstring). Concrete inputs run as one program per shape."""
    args = (jnp.asarray(K), jnp.asarray(pairs), pair_mask, max_iter, tol, sites, outcomes)
    return _fit_pure(*args) if is_traced(*args) else _fit_program(*args)


def _fit_pure(K, pairs, pair_mask, max_iter, tol, sites, outcomes) -> LaplacePosterior:
    outcomes = None if outcomes is None else jax.lax.stop_gradient(outcomes)
    valid = pair_mask_or_all(pairs, pair_mask)
    K0 = jax.lax.stop_gradient(K)
    active = informative_pairs(K0, pairs, valid)
    root = prior_root(K0)  # one factorisation for Newton, the posterior and the evidence
    state = _mode(root, pairs, active, max_iter, tol, sites, outcomes)
    sites = _sites(state.xi, pairs, active, outcomes)
    post = from_root(root, pairs, sites, active)
    dtype = K.dtype
    tol = default_tol(dtype) if tol is None else tol
    scale = jnp.maximum(1.0, jnp.max(jnp.abs(state.xi)))
    cov = covariance(post, K.ndim == 1)
    return LaplacePosterior(
        mean=state.xi,
        cov=cov,
        log_evidence=_evidence_at(
            dense(K), state.xi, pairs, active, valid, post.logdet, cov, outcomes
        ),
        sites=sites,
        n_iter=state.n_iter,
        converged=state.max_change <= tol * scale,
        max_change=state.max_change,
        n_uninformative=jnp.sum(valid & ~active).astype(jnp.int32),
    )


@jit
def _fit_program(*args) -> LaplacePosterior:  # concrete inputs: one program per shape
    return _fit_pure(*args)


@dataclasses.dataclass(frozen=True)
class Laplace(GaussianEngine):
    """The Laplace approximation as an engine (``bayesrank.inference.engine``).

    Attributes:
        max_iter: at most that many Newton steps (200).
        tol: Newton's tolerance on the mode, relative to ``max(1, max|xi|)``; ``None``: 1e-10 in
            float64, 1e-5 in float32 (``default_tol``).

    Both are traced (changing them compiles nothing). Its sites at the mode (``tau = w``,
    ``nu = w d + r``) make it a Gaussian engine: prediction at new entities, collections and
    evidence-based learning work as with EP.
    """

    name: ClassVar[str] = "laplace"
    traced: ClassVar[tuple[str, ...]] = ("max_iter", "tol")
    advice: ClassVar[str] = "raise max_iter (Newton's iterations)"

    max_iter: int = 200
    tol: float | None = None

    def __post_init__(self):
        check_engine_settings(self)

    def default_tol(self, dtype) -> float:
        return default_tol(dtype)

    def learning_engine(self) -> Laplace:
        """``Laplace()``: learning runs Newton at its own defaults."""
        return Laplace()

    def large(self, n: int | None, rank: int):
        """``SparseLaplace`` at this engine's settings and ``rank``."""
        from .engines import SparseLaplace  # the engines' module builds on this one

        return SparseLaplace(rank, self.max_iter, 1e-10 if self.tol is None else self.tol)

    def fit(self, K, rows, *, pair_mask=None, sites=None, outcomes=None) -> LaplacePosterior:
        """``fit`` at these settings (pure)."""
        return fit(K, rows, pair_mask=pair_mask, max_iter=self.max_iter, tol=self.tol,
                   sites=sites, outcomes=outcomes)  # fmt: skip
