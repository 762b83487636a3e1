"""The probit pair likelihood ``P(i > j | xi_hat) = Phi(xi_hat_i - xi_hat_j)`` and its EP moments.

For a Gaussian "cavity" on the difference ``d = xi_hat_i - xi_hat_j``, ``d ~ N(m, v)``, the tilted
distribution ``Phi(d) N(d | m, v) / Z`` has (Rasmussen & Williams 2006, Eq. 3.58 with ``y = 1``):

    Z     = Phi(z),                      z = m / sqrt(1 + v),
    mean  = m + v r / sqrt(1 + v),       r = phi(z) / Phi(z)   (inverse Mills ratio),
    var   = v - v^2 r (z + r) / (1 + v).

``log Phi`` and ``r`` are computed in log space (``log_ndtr``), so ``z`` of -1e4 or +1e4 gives
finite, accurate results; ``r (z + r)`` lies in ``(0, 1)`` mathematically and is clipped there,
so the tilted variance is always in ``(0, v)``.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import jax
import jax.numpy as jnp
from jax.scipy.special import log_ndtr

__all__ = ["TiltedMoments", "inverse_mills", "log_phi_cdf", "pair_probability", "tilted_moments"]

#: ``log sqrt(2 pi)`` as a Python float: a device constant built at import would carry the dtype
#: of the x64 flag at that moment (float32 if x64 is enabled after ``import bayesrank``).
_LOG_SQRT_2PI = 0.5 * math.log(2 * math.pi)


def log_phi_cdf(z: jax.Array) -> jax.Array:
    """``log Phi(z)``, accurate for large negative ``z`` (no ``log(0)``)."""
    return log_ndtr(z)


def inverse_mills(z: jax.Array) -> jax.Array:
    """``phi(z) / Phi(z)``, evaluated as ``exp(log phi(z) - log Phi(z))``."""
    return jnp.exp(-0.5 * z**2 - _LOG_SQRT_2PI - log_ndtr(z))


def pair_probability(delta_mean: jax.Array, delta_var: jax.Array) -> jax.Array:
    """Predictive ``P(i > j) = Phi(delta_mean / sqrt(1 + delta_var))`` (paper Eq. 13-14)."""
    return jnp.exp(log_ndtr(delta_mean / jnp.sqrt(1.0 + delta_var)))


class TiltedMoments(NamedTuple):
    """``log Z``, mean and variance of ``Phi(d) N(d | m, v) / Z`` (arrays of the input's shape)."""

    log_z: jax.Array
    mean: jax.Array
    var: jax.Array


def tilted_moments(m: jax.Array, v: jax.Array) -> TiltedMoments:
    """Moments of the probit-tilted Gaussian on a pair difference (module docstring).

    Args:
        m: cavity mean of ``d = xi_hat_i - xi_hat_j``; ``v``: cavity variance (> 0).
    """
    s = jnp.sqrt(1.0 + v)
    z = m / s
    r = inverse_mills(z)
    shrink = jnp.clip(r * (z + r), 0.0, 1.0)
    return TiltedMoments(log_ndtr(z), m + v * r / s, v - v**2 * shrink / (1.0 + v))
