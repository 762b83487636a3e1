"""The posterior over a utility on a continuous design space, as prediction at new designs
needs it, and its hyperparameters.

The designs shown so far are the entities: ``X: (n, d)`` in the unit cube, ``mask: (n,)`` the
real ones among a padded capacity (padded designs are decoupled, ``kernels.mask_covariance``).
The prior is an ARD RBF kernel ``kappa^2 exp(-1/2 sum_k ((x_k - x'_k) / ell_k)^2)``; its
``theta = (log kappa^2, log ell_1..d)``.

**Prediction at new designs** (``latent``). With a Gaussian posterior from EP or Laplace, whose
sites give ``S: (n, n)`` and ``eta: (n,)`` (``inference.ep.site_precision``), the utility at
new designs ``X_*: (q, d)`` has (``predict.predict_new``)

    mean_* = K_*^T (eta - S mu),    cov_* = K_** - K_*^T (S - S Sigma S) K_*,

and ``Belief`` keeps ``shift = eta - S mu`` and ``middle = S - S Sigma S`` so each new pair
costs ``O(n^2 q)``, differentiable in ``X_*``.

With NUTS's draws ``f^(s)`` at the shown designs (``DrawBelief``), each draw is extended to the
new designs by the prior's conditional, ``f_*^(s) = K_*^T K^-1 f^(s) + C eps^(s)``, ``C C^T =
K_** - K_*^T K^-1 K_*``, with fixed normals ``eps: (S, q)`` (``latent_draws``): draws of the
exact (skew) posterior at the new designs, differentiable in ``X_*``. ``K`` gets a jitter of
``1e-8`` of its mean diagonal (repeated designs make it singular).

**Hyperparameters** (``learn``): Adam steps on the engine's log evidence plus the log
hyperprior, from the previous ``theta``: ``ell_k / r_k ~ Gamma(2.4, 2.7)``, with ``r_k`` the
spread (max minus min) of the shown designs' ``k``-th coordinate, and ``log kappa^2 ~ N(0,
2^2)``. The lengthscale prior is BoTorch ``PairwiseGP``'s default on inputs that its tutorial
scales by the shown designs' bounds (``Normalize(d)``): with few designs shown, the spread is
small and so are the lengthscales the prior favours, and the acquisition explores wider. (On
the unit cube's own scale instead, the prior cost 3 to 10 units of final utility on Ackley,
``docs/results/pbo.md``.) ``theta`` is clipped to ``kappa^2`` in ``[0.01,
10^4]`` and ``ell_k`` in ``[10^-3, 100]``. (A flat prior on ``kappa^2``, BoTorch's, let
noiseless answers drive ``kappa^2`` to its bound, and EUBO then chased the boundary of the
cube on a 1-D quadratic; this one did not, in the same test.)
"""

from __future__ import annotations

import math
from typing import NamedTuple

import jax
import jax.numpy as jnp
import optax

from ...inference import ep, laplace
from ...inference.ep.sites import site_precision
from ...kernels import ARD
from ...kernels.xpgp import mask_covariance
from ...runtime import after

__all__ = [
    "GAUSSIAN_ENGINES",
    "Belief",
    "DrawBelief",
    "from_draws",
    "from_posterior",
    "kernel_of",
    "latent",
    "latent_draws",
    "learn",
    "log_prior",
    "spread",
]

#: The Gaussian engines: name -> pure fit ``(K, pairs, *, sites, pair_mask) -> posterior``.
GAUSSIAN_ENGINES = {"laplace": laplace.fit, "ep": ep.fit_core}

#: The hyperprior's sd of ``log kappa^2``.
SCALE_SD = 2.0

#: The least spread a coordinate's lengthscale prior is measured in (a coordinate that all
#: shown designs share would otherwise make the prior's lengthscale vanish).
MIN_SPREAD = 0.01

#: Bounds of ``log kappa^2`` (BoTorch's outputscale box) and of ``log ell``.
LOG_SCALE_BOUNDS = (math.log(0.01), math.log(1e4))
LOG_LENGTH_BOUNDS = (math.log(1e-3), math.log(100.0))


class Belief(NamedTuple):
    """``X: (n, d)``, ``mask: (n,)``, ``theta: (1 + d,)``, ``shift: (n,)``, ``middle: (n, n)``,
    and the posterior ``mean: (n,)`` at the shown designs (module docstring)."""

    X: jax.Array
    mask: jax.Array
    theta: jax.Array
    shift: jax.Array
    middle: jax.Array
    mean: jax.Array


class DrawBelief(NamedTuple):
    """``X: (n, d)``, ``mask: (n,)``, ``theta``, the Cholesky factor ``root: (n, n)`` of the
    jittered ``K``, ``alpha = K^-1 f: (S, n)`` of the draws, and their ``mean: (n,)``."""

    X: jax.Array
    mask: jax.Array
    theta: jax.Array
    root: jax.Array
    alpha: jax.Array
    mean: jax.Array


def kernel_of(theta) -> ARD:
    """The ARD kernel of ``theta = (log kappa^2, log ell_1..d)``."""
    return ARD(jnp.exp(0.5 * theta[0]), jnp.exp(theta[1:]))


def prior_covariance(theta, X, mask):
    """``K: (n, n)`` of the shown designs, padded ones decoupled."""
    return mask_covariance(kernel_of(theta)(X), mask)


def spread(X, mask):
    """``r: (d,)``, each coordinate's max minus min over the shown designs, at least
    ``MIN_SPREAD``."""
    high = jnp.max(jnp.where(mask[:, None], X, -jnp.inf), axis=0)
    low = jnp.min(jnp.where(mask[:, None], X, jnp.inf), axis=0)
    return jnp.maximum(high - low, MIN_SPREAD)


def log_prior(theta, r=None):
    """The log hyperprior at ``theta``: each ``ell_k / r_k ~ Gamma(2.4, 2.7)`` as a density on
    ``ell_k / r_k`` (BoTorch's MAP: no Jacobian of the log, so its mode is ``1.4 / 2.7``), and
    ``log kappa^2 ~ N(0, SCALE_SD^2)``. ``r: (d,)`` the designs' ``spread`` (default 1)."""
    a, b = 2.4, 2.7
    log_ell = theta[1:] if r is None else theta[1:] - jnp.log(r)
    return jnp.sum((a - 1.0) * log_ell - b * jnp.exp(log_ell)) - 0.5 * (theta[0] / SCALE_SD) ** 2


def clip(theta):
    """``theta`` clipped to its bounds (module docstring)."""
    first = jnp.arange(theta.shape[0]) == 0
    low = jnp.where(first, LOG_SCALE_BOUNDS[0], LOG_LENGTH_BOUNDS[0]).astype(theta.dtype)
    high = jnp.where(first, LOG_SCALE_BOUNDS[1], LOG_LENGTH_BOUNDS[1]).astype(theta.dtype)
    return jnp.clip(theta, low, high)


def fit(theta, X, mask, pairs, pair_mask, sites=None, engine: str = "laplace"):
    """The engine's posterior at ``theta`` (``sites``: a warm start)."""
    K = prior_covariance(theta, X, mask)
    return GAUSSIAN_ENGINES[engine](K, pairs, sites=sites, pair_mask=pair_mask)


def from_posterior(theta, X, mask, pairs, pair_mask, post) -> Belief:
    """The ``Belief`` of a Gaussian posterior ``post`` (with ``mean``, ``cov``, ``sites``)."""
    S, eta = site_precision(X.shape[0], pairs, post.sites, pair_mask)
    middle = S - S @ post.cov @ S
    return Belief(X, mask, theta, eta - S @ post.mean, 0.5 * (middle + middle.T), post.mean)


def latent(belief: Belief, X_new):
    """The posterior ``(mean: (q,), cov: (q, q))`` of the utility at ``X_new: (q, d)``."""
    kernel = kernel_of(belief.theta)
    K_cross = jnp.where(belief.mask[:, None], kernel(belief.X, X_new), 0.0)
    mean = K_cross.T @ belief.shift
    cov = kernel(X_new) - K_cross.T @ belief.middle @ K_cross
    return mean, 0.5 * (cov + cov.T)


def from_draws(theta, X, mask, draws) -> DrawBelief:
    """The ``DrawBelief`` of posterior draws ``(S, n)`` at the shown designs."""
    K = prior_covariance(theta, X, mask)
    jitter = 1e-8 * jnp.mean(jnp.diag(K))
    root = jnp.linalg.cholesky(K + jitter * jnp.eye(K.shape[0], dtype=K.dtype))
    alpha = jax.scipy.linalg.cho_solve((root, True), draws.T).T
    return DrawBelief(X, mask, theta, root, alpha, jnp.mean(draws, axis=0))


def latent_draws(belief: DrawBelief, X_new, base):
    """Draws ``(S, q)`` of the utility at ``X_new: (q, d)`` (module docstring); ``base: (S, q)``
    standard normals, fixed across calls so the draws are smooth in ``X_new``."""
    kernel = kernel_of(belief.theta)
    K_cross = jnp.where(belief.mask[:, None], kernel(belief.X, X_new), 0.0)
    # after the draws' solve with the same root, which may be in the same program (runtime.after)
    V = jax.scipy.linalg.solve_triangular(belief.root, after(K_cross, belief.alpha), lower=True)
    cov = kernel(X_new) - V.T @ V
    q = cov.shape[0]
    jitter = 1e-10 * jnp.maximum(jnp.trace(cov) / q, jnp.finfo(cov.dtype).tiny)
    C = jnp.linalg.cholesky(0.5 * (cov + cov.T) + jitter * jnp.eye(q, dtype=cov.dtype))
    return belief.alpha @ K_cross + base @ C.T


def learn(theta, X, mask, pairs, pair_mask, sites=None, *, steps: int, learning_rate=0.1,
          engine: str = "laplace"):  # fmt: skip
    """``steps`` Adam steps on ``-(log Z(theta) + log_prior(theta, spread(X, mask)))`` from
    ``theta``; returns the last ``theta`` (clipped to its bounds). Pure; ``steps`` and
    ``engine`` static."""
    opt = optax.adam(learning_rate)
    r = spread(X, mask)

    def loss(t):
        post = fit(t, X, mask, pairs, pair_mask, sites, engine)
        return -(post.log_evidence + log_prior(t, r))

    def step(carry, _):
        t, state = carry
        value, grad = jax.value_and_grad(loss)(t)
        grad = jnp.where(jnp.isfinite(grad), grad, 0.0)
        updates, state = opt.update(grad, state)
        return (clip(optax.apply_updates(t, updates)), state), value

    (theta, _), _ = jax.lax.scan(step, (theta, opt.init(theta)), None, length=steps)
    return theta
