"""The probit pair likelihood ``P(i > j | xi_hat) = Phi(xi_hat_i - xi_hat_j)`` and its EP moments;
its extension to ties and weighted (repeated) judgements (``Outcomes``).

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

__all__ = [
    "Outcomes",
    "TiltedMoments",
    "inverse_mills",
    "log_phi_cdf",
    "outcome_curvature",
    "outcome_log_likelihood",
    "outcome_probabilities",
    "outcome_tilted_moments",
    "pair_probability",
    "tilted_moments",
]

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


# --- ties and weighted judgements ------------------------------------------------------------
#
# Thurstone-Mosteller with a tie margin (Glenn & David 1960): a judge perceives
# ``d + e``, ``d = xi_hat_i - xi_hat_j``, ``e ~ N(0, 1)``, and says *i wins* above ``eps``,
# *tie* within ``[-eps, eps]``:
#
#     P(i > j | d) = Phi(d - eps),   P(tie | d) = Phi(eps - d) - Phi(-eps - d).
#
# Both are log-concave in ``d`` (a Gaussian CDF, and a Gaussian's mass on an interval), so EP's
# tilted variances stay in ``(0, v)`` and Laplace's curvature is >= 0. ``eps = 0`` without ties
# is the probit pair model above. Under a cavity ``d ~ N(m, v)`` the tilted normaliser
# is the same form with the noise variance ``1 + v`` (``s = sqrt(1 + v)``):
#
#     win:  Z = Phi((m - eps) / s),
#     tie:  Z = Phi((eps - m) / s) - Phi((-eps - m) / s),
#
# and the tilted moments follow from ``g = d log Z / dm`` and ``h = d^2 log Z / dm^2``:
# ``mean = m + v g``, ``var = v + v^2 h`` (Minka 2001). ``v = 0`` gives the likelihood's own
# log, slope and curvature (Laplace). A weight ``c`` (a judgement made ``c`` times) raises the
# likelihood to the power ``c``: the same as ``c`` copies.


class Outcomes(NamedTuple):
    """What each observed pair says, and how often (a pytree).

    Attributes:
        tie: ``(m,)`` bool: row ``(i, j)`` is a tie (otherwise *i preferred to j*).
        weight: ``(m,)`` float > 0: the likelihood's power, e.g. how many times the judgement
            was made (``c`` copies of a row are one row of weight ``c``).
        margin: ``()`` float: the tie margin ``eps`` (> 0 where a tie is observed).
    """

    tie: jax.Array
    weight: jax.Array
    margin: jax.Array


def _log_z_derivatives(m, v, outcomes: Outcomes):
    """``(log Z, g, h)`` of each row's tilted normaliser (see above), one copy of each row."""
    s = jnp.sqrt(1.0 + v)
    eps = outcomes.margin
    # win: Z = Phi(z), z = (m - eps) / s
    z = (m - eps) / s
    r = inverse_mills(z)
    win = (log_ndtr(z), r / s, -jnp.clip(r * (z + r), 0.0, 1.0) / (1.0 + v))
    # tie: Z = Phi(b) - Phi(a), a = (-eps - |m|) / s, b = (eps - |m|) / s (symmetric in m's
    # sign, so the interval is taken on the side where the CDFs are small and resolve it)
    safe = jnp.where(outcomes.tie, eps, 1.0)  # no log(0) in the unused branch
    mu = jnp.abs(m)
    a, b = (-safe - mu) / s, (safe - mu) / s
    log_b = log_ndtr(b)
    log_z = log_b + jnp.log(-jnp.expm1(log_ndtr(a) - log_b))
    # phi(a) / phi(b) = exp(delta), delta = (b^2 - a^2) / 2 = -2 eps |m| / s^2
    delta = -2.0 * safe * mu / (1.0 + v)
    phi_b = jnp.exp(-0.5 * b**2 - _LOG_SQRT_2PI - log_z)  # phi(b) / Z
    slope = phi_b * jnp.expm1(delta) / s  # (phi(a) - phi(b)) / (s Z), for m >= 0
    second = phi_b * (a * jnp.expm1(delta) + (a - b)) / (1.0 + v)  # (a phi(a) - b phi(b)) / (s^2 Z)
    tie = (log_z, jnp.sign(m) * slope, jnp.minimum(second - slope**2, 0.0))
    return tuple(jnp.where(outcomes.tie, t, w) for t, w in zip(tie, win, strict=True))


def outcome_tilted_moments(m: jax.Array, v: jax.Array, outcomes: Outcomes) -> TiltedMoments:
    """Moments of ``P(outcome | d) N(d | m, v) / Z`` for one copy of each row (module notes).

    Args:
        m, v: ``(m,)`` cavity means and variances (> 0) of the rows' differences.
        outcomes: each row's outcome; the weight is not applied here (EP's site update does).
    """
    log_z, g, h = _log_z_derivatives(m, v, outcomes)
    var = jnp.clip(v + v**2 * h, jnp.finfo(v.dtype).tiny, v)
    return TiltedMoments(log_z, m + v * g, var)


def outcome_curvature(d: jax.Array, outcomes: Outcomes):
    """``(log P, slope, -curvature)`` of each row's likelihood at ``d`` (weights applied).

    ``log P(outcome | d)``, its derivative in ``d`` and minus its second derivative (>= 0),
    each times the row's weight: Laplace's ``(log Phi(d), r, w)`` for outcomes.
    """
    log_p, g, h = _log_z_derivatives(d, jnp.zeros_like(d), outcomes)
    c = outcomes.weight
    return c * log_p, c * g, -c * h


def outcome_log_likelihood(d: jax.Array, outcomes: Outcomes) -> jax.Array:
    """``c_s log P(outcome_s | d_s)`` per row (``d``: the rows' differences)."""
    return outcome_curvature(d, outcomes)[0]


def outcome_probabilities(delta_mean, delta_var, margin):
    """Predictive ``(P(i > j), P(tie), P(j > i))`` from ``d ~ N(delta_mean, delta_var)``.

    ``P(i > j) = Phi((dm - eps) / s)``, ``P(j > i) = Phi((-dm - eps) / s)``,
    ``s = sqrt(1 + dv)``, and the tie the rest (computed as an interval's mass, not as
    ``1 - win - loss``, so it keeps its relative precision when small).
    """
    s = jnp.sqrt(1.0 + delta_var)
    win = jnp.exp(log_ndtr((delta_mean - margin) / s))
    loss = jnp.exp(log_ndtr((-delta_mean - margin) / s))
    tie = Outcomes(jnp.ones_like(delta_mean, bool), jnp.ones_like(delta_mean), margin)
    log_tie = _log_z_derivatives(delta_mean, delta_var, tie)[0]
    return win, jnp.exp(log_tie), loss
