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

**Hyperparameters** (``learn``): Adam steps on the engine's log evidence plus the log
hyperprior, BoTorch ``PairwiseGP``'s defaults: ``ell_k ~ Gamma(2.4, 2.7)`` and ``kappa^2`` flat
on ``[0.01, 100]`` (``theta`` is clipped there), from the previous ``theta``.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import optax

from ...inference import ep, laplace
from ...inference.ep.sites import site_precision
from ...kernels import ARD
from ...kernels.xpgp import mask_covariance

__all__ = ["ENGINES", "Belief", "from_posterior", "kernel_of", "latent", "learn", "log_prior"]

#: The engines: name -> pure fit ``(K, pairs, *, sites, pair_mask) -> posterior``.
ENGINES = {"laplace": laplace.fit, "ep": ep.fit_core}

#: The hyperprior's sd of ``log kappa^2``.
SCALE_SD = 1.0

#: Bounds of ``log kappa^2`` (BoTorch's outputscale box) and of ``log ell``.
LOG_SCALE_BOUNDS = (jnp.log(0.01), jnp.log(100.0))
LOG_LENGTH_BOUNDS = (jnp.log(1e-3), jnp.log(100.0))


class Belief(NamedTuple):
    """``X: (n, d)``, ``mask: (n,)``, ``theta: (1 + d,)``, ``shift: (n,)``, ``middle: (n, n)``,
    and the posterior ``mean: (n,)`` at the shown designs (module docstring)."""

    X: jax.Array
    mask: jax.Array
    theta: jax.Array
    shift: jax.Array
    middle: jax.Array
    mean: jax.Array


def kernel_of(theta) -> ARD:
    """The ARD kernel of ``theta = (log kappa^2, log ell_1..d)``."""
    return ARD(jnp.exp(0.5 * theta[0]), jnp.exp(theta[1:]))


def prior_covariance(theta, X, mask):
    """``K: (n, n)`` of the shown designs, padded ones decoupled."""
    return mask_covariance(kernel_of(theta)(X), mask)


def log_prior(theta):
    """The log hyperprior: ``Gamma(2.4, 2.7)`` on each ``ell_k`` (as a density on
    ``log ell_k``, the Jacobian included); ``log kappa^2 ~ N(0, SCALE_SD^2)``."""
    a, b = 2.4, 2.7
    log_ell = theta[1:]
    return jnp.sum(a * log_ell - b * jnp.exp(log_ell)) - 0.5 * (theta[0] / SCALE_SD) ** 2


def clip(theta):
    """``theta`` clipped to its bounds (module docstring)."""
    low = jnp.concatenate(
        [LOG_SCALE_BOUNDS[0][None], jnp.full(theta.shape[0] - 1, LOG_LENGTH_BOUNDS[0])]
    )
    high = jnp.concatenate(
        [LOG_SCALE_BOUNDS[1][None], jnp.full(theta.shape[0] - 1, LOG_LENGTH_BOUNDS[1])]
    )
    return jnp.clip(theta, low.astype(theta.dtype), high.astype(theta.dtype))


def fit(theta, X, mask, pairs, pair_mask, sites=None, engine: str = "laplace"):
    """The engine's posterior at ``theta`` (``sites``: a warm start)."""
    K = prior_covariance(theta, X, mask)
    return ENGINES[engine](K, pairs, sites=sites, pair_mask=pair_mask)


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


def learn(theta, X, mask, pairs, pair_mask, sites=None, *, steps: int, learning_rate=0.1,
          engine: str = "laplace"):  # fmt: skip
    """``steps`` Adam steps on ``-(log Z(theta) + log_prior(theta))`` from ``theta``; returns
    the last ``theta`` (clipped to its bounds). Pure; ``steps`` and ``engine`` static."""
    opt = optax.adam(learning_rate)

    def loss(t):
        post = fit(t, X, mask, pairs, pair_mask, sites, engine)
        return -(post.log_evidence + log_prior(t))

    def step(carry, _):
        t, state = carry
        value, grad = jax.value_and_grad(loss)(t)
        grad = jnp.where(jnp.isfinite(grad), grad, 0.0)
        updates, state = opt.update(grad, state)
        return (clip(optax.apply_updates(t, updates)), state), value

    (theta, _), _ = jax.lax.scan(step, (theta, opt.init(theta)), None, length=steps)
    return theta
