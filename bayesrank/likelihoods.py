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
    "grade_outcomes",
    "interval_probability",
    "inverse_mills",
    "log_phi_cdf",
    "outcome_curvature",
    "outcome_log_likelihood",
    "outcome_probabilities",
    "outcome_tilted_moments",
    "pair_probability",
    "row_outcomes",
    "tie_outcomes",
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


# --- intervals: ties, grades and weighted judgements -----------------------------------------
#
# Every observation here is a Gaussian judgement falling in an interval: a judge perceives
# ``d + e``, ``e ~ N(0, 1)``, and reports which of a few intervals it fell in,
#
#     P(obs | d) = P(lower < d + e <= upper) = Phi(upper - d) - Phi(lower - d).
#
# - Thurstone-Mosteller with a tie margin (Glenn & David 1960), ``d = xi_hat_i - xi_hat_j``:
#   *i wins* is ``(eps, inf)``, ``P = Phi(d - eps)``; a *tie* is ``(-eps, eps]``,
#   ``P = Phi(eps - d) - Phi(-eps - d)``; ``eps = 0`` without ties is the probit pair model.
# - The ordinal GP (Chu & Ghahramani 2005), ``d = xi_hat_i``: grade ``k`` of ``K`` is
#   ``(b_{k-1}, b_k]`` with thresholds ``b_0 < ... < b_{K-2}``, ``b_{-1} = -inf``,
#   ``b_{K-1} = inf``.
#
# A Gaussian's mass on an interval is log-concave in ``d``, so EP's tilted variances stay in
# ``(0, v)`` and Laplace's curvature is >= 0. Under a cavity ``d ~ N(m, v)`` the tilted normaliser
# is the same form with noise variance ``1 + v`` (``s = sqrt(1 + v)``),
# ``Z = Phi((upper - m) / s) - Phi((lower - m) / s)``, and the tilted moments follow from
# ``g = d log Z / dm``, ``h = d^2 log Z / dm^2``: ``mean = m + v g``, ``var = v + v^2 h``
# (Minka 2001). ``v = 0`` gives the likelihood's own log, slope and curvature (Laplace). A weight
# ``c`` (a judgement made ``c`` times) raises the likelihood to the power ``c``: ``c`` copies.


class Outcomes(NamedTuple):
    """What each observed row says, and how often (a pytree).

    Attributes:
        lower, upper: ``(m,)``: the row's judgement ``d + e`` fell in ``(lower, upper]``
            (``-inf`` / ``inf`` for an open end; ``lower < upper``). Build them with
            ``tie_outcomes`` or ``grade_outcomes``.
        weight: ``(m,)`` float > 0: the likelihood's power, e.g. how many times the judgement
            was made (``c`` copies of a row are one row of weight ``c``).
    """

    lower: jax.Array
    upper: jax.Array
    weight: jax.Array


def tie_outcomes(tie, weight, margin) -> Outcomes:
    """Pairs ``(i, j)``, each *i preferred to j* (``(eps, inf)``) or a tie (``(-eps, eps]``)."""
    tie = jnp.asarray(tie)
    margin = jnp.asarray(margin, jnp.result_type(weight))
    return Outcomes(
        jnp.where(tie, -margin, margin), jnp.where(tie, margin, jnp.inf), jnp.asarray(weight)
    )


def grade_outcomes(grades, weight, thresholds) -> Outcomes:
    """Entities' grades ``0..K-1`` (``(m,)`` int) under thresholds ``b: (K - 1,)`` increasing:
    grade ``k`` is ``(b_{k-1}, b_k]``, with ``b_{-1} = -inf`` and ``b_{K-1} = inf``."""
    b = jnp.asarray(thresholds)
    edges = jnp.concatenate([jnp.array([-jnp.inf], b.dtype), b, jnp.array([jnp.inf], b.dtype)])
    grades = jnp.asarray(grades)
    return Outcomes(edges[grades], edges[grades + 1], jnp.asarray(weight, b.dtype))


def row_outcomes(tie, grade, weight, margin, thresholds) -> Outcomes:
    """A problem's rows (``PreferenceProblem.outcomes``): a pair or a tie where ``grade < 0``
    (``tie_outcomes`` with ``margin``), else the grade's interval (``grade_outcomes`` with
    ``thresholds``; None where no row is graded)."""
    pairs = tie_outcomes(tie, weight, margin)
    if thresholds is None:
        return pairs
    graded = grade >= 0
    grades = grade_outcomes(jnp.where(graded, grade, 0), weight, thresholds)
    return Outcomes(
        jnp.where(graded, grades.lower, pairs.lower),
        jnp.where(graded, grades.upper, pairs.upper),
        pairs.weight,
    )


def _one_sided(z, s):
    """``log Phi(z)`` and its first two derivatives in ``m`` where ``dz/dm = 1/s``."""
    r = inverse_mills(z)
    return log_ndtr(z), r / s, -jnp.clip(r * (z + r), 0.0, 1.0) / s**2


def _two_sided(a, b, s):
    """``(log Z, g, h)`` of ``Z = Phi(b) - Phi(a)``, ``a < b`` finite, ``a = (lower - m) / s``.

    Reflected (``Z = Phi(-a) - Phi(-b)``) so that the interval's centre is <= 0, where the CDFs
    are small and resolve the difference; the densities' differences are taken relative to the
    endpoint nearer 0 (``expm1``), so a narrow interval keeps its relative precision.
    """
    flip = a + b > 0
    a, b = jnp.where(flip, -b, a), jnp.where(flip, -a, b)
    log_b = log_ndtr(b)
    log_z = log_b + jnp.log(-jnp.expm1(log_ndtr(a) - log_b))
    near_a = jnp.abs(a) <= jnp.abs(b)
    x0, x1 = jnp.where(near_a, a, b), jnp.where(near_a, b, a)
    ratio = jnp.expm1(0.5 * (x0**2 - x1**2))  # phi(x1) / phi(x0) - 1, in (-1, 0]
    p0 = jnp.exp(-0.5 * x0**2 - _LOG_SQRT_2PI - log_z)  # phi(x0) / Z
    # phi(a) - phi(b) and a phi(a) - b phi(b), over Z
    dp = jnp.where(near_a, -p0 * ratio, p0 * ratio)
    dq = jnp.where(near_a, p0 * (a - b - b * ratio), p0 * (a - b + a * ratio))
    slope = dp / s  # d log Z / dm, Z in the (possibly reflected) variables
    h = jnp.minimum(dq / s**2 - slope**2, 0.0)
    return log_z, jnp.where(flip, -slope, slope), h


def _narrow(c, w, s):
    """``(log Z, g, h)`` of ``Z = Phi(c + w) - Phi(c - w)`` for a narrow interval, ``w <=
    eps^(1/4)`` (``c = (centre - m) / s``, ``w = half width / s``).

    With ``x = c + t``, ``Z = phi(c) int_{-w}^{w} exp(-c t) exp(-t^2 / 2) dt``; the first factor
    integrates to ``2 w S(u)``, ``S(u) = sinh(u) / u``, ``u = c w``, and the second is
    ``1 - w^2 k(u) / 2 + O(w^4)`` (``k(u) = 1 - 2 L(u) / u`` is ``E[t^2] / w^2`` under
    ``exp(-c t)`` on ``(-w, w)``, ``L(u) = coth(u) - 1/u``), so

        log Z = log phi(c) + log(2 w) + log S(u) + log(1 - w^2 k(u) / 2),
        d log Z / dc = -c + w L(u),   d^2 log Z / dc^2 = -1 + w^2 L'(u),

    with relative errors ``O(w^4) <= eps`` (the correction's own derivatives are ``O(w^4)`` of
    these). ``Z`` is never a difference, so a tie margin of 1e-30 keeps its ``log Z`` (about
    ``log(2 eps phi(c) / s)``) and its moments.
    """
    u = c * w
    small = jnp.abs(u) < 1e-2  # the series' next terms are below 1e-20
    us = jnp.where(small, u, 0.0)  # each form on values that keep it finite (no NaN in grads)
    ab = jnp.abs(jnp.where(small, 1.0, u))
    log_s = jnp.where(
        small,
        us**2 / 6 - us**4 / 180,
        ab + jnp.log(-jnp.expm1(-2 * ab)) - jnp.log(2 * ab),
    )
    ub = jnp.where(small, 1.0, u)
    lang = jnp.where(small, us / 3 - us**3 / 45, 1 / jnp.tanh(ub) - 1 / ub)  # L(u)
    lang_prime = jnp.where(small, 1 / 3 - us**2 / 15, 1 / ub**2 - 1 / jnp.sinh(ub) ** 2)
    k = jnp.where(small, 1 / 3 + 2 * us**2 / 45, 1 - 2 * lang / ub)
    log_z = -0.5 * c**2 - _LOG_SQRT_2PI + jnp.log(2 * w) + log_s + jnp.log1p(-0.5 * w**2 * k)
    return log_z, (c - w * lang) / s, (w**2 * lang_prime - 1) / s**2


def _finite(lo, up, m, s):
    """``(log Z, g, h)`` of a finite interval ``(lo, up]``: ``_narrow`` where its standardised
    half width is below ``eps^(1/4)`` (there ``_two_sided``'s difference of two CDFs would lose
    ``eps / w`` of its precision; at a half width below ``eps`` it would be 0), else
    ``_two_sided``."""
    w = 0.5 * (up - lo) / s
    narrow = w <= jnp.finfo(w.dtype).eps ** 0.25
    c = jnp.where(narrow, (0.5 * lo + 0.5 * up - m) / s, 0.0)
    near = _narrow(c, jnp.where(narrow, w, 1e-3), s)
    wide = _two_sided(jnp.where(narrow, -1.0, lo - m) / s, jnp.where(narrow, 1.0, up - m) / s, s)
    return tuple(jnp.where(narrow, x, y) for x, y in zip(near, wide, strict=True))


def _log_z_derivatives(m, v, outcomes: Outcomes):
    """``(log Z, g, h)`` of each row's tilted normaliser (see above), one copy of each row."""
    s = jnp.sqrt(1.0 + v)
    lower, upper = outcomes.lower, outcomes.upper
    open_above, open_below = jnp.isinf(upper), jnp.isinf(lower)
    # each branch on values that keep it finite where it is not the one taken (no NaN in grads)
    lo = jnp.where(open_below, 0.0, lower)
    up = jnp.where(open_above, 0.0, upper)
    above = _one_sided((m - lo) / s, s)  # (lower, inf): Phi((m - lower) / s)
    log_b, g_b, h_b = _one_sided((up - m) / s, s)  # (-inf, upper]: Phi((upper - m) / s)
    below = (log_b, -g_b, h_b)
    both = open_above | open_below
    finite = _finite(jnp.where(both, -1.0, lo), jnp.where(both, 1.0, up), m, s)
    return tuple(
        jnp.where(open_above, x, jnp.where(open_below, y, z))
        for x, y, z in zip(above, below, finite, strict=True)
    )


def outcome_tilted_moments(m: jax.Array, v: jax.Array, outcomes: Outcomes) -> TiltedMoments:
    """Moments of ``P(obs | d) N(d | m, v) / Z`` for one copy of each row (module notes).

    Args:
        m, v: ``(m,)`` cavity means and variances (> 0) of the rows' ``d``.
        outcomes: each row's interval; the weight is not applied here (EP's site update does).
    """
    log_z, g, h = _log_z_derivatives(m, v, outcomes)
    var = jnp.clip(v + v**2 * h, jnp.finfo(v.dtype).tiny, v)
    return TiltedMoments(log_z, m + v * g, var)


def outcome_curvature(d: jax.Array, outcomes: Outcomes):
    """``(log P, slope, -curvature)`` of each row's likelihood at ``d`` (weights applied).

    ``log P(obs | d)``, its derivative in ``d`` and minus its second derivative (>= 0),
    each times the row's weight: Laplace's ``(log Phi(d), r, w)`` for outcomes.
    """
    log_p, g, h = _log_z_derivatives(d, jnp.zeros_like(d), outcomes)
    c = outcomes.weight
    return c * log_p, c * g, -c * h


def outcome_log_likelihood(d: jax.Array, outcomes: Outcomes) -> jax.Array:
    """``c_s log P(obs_s | d_s)`` per row (``d``: the rows' ``d``)."""
    return outcome_curvature(d, outcomes)[0]


def interval_probability(mean, var, lower, upper) -> jax.Array:
    """Predictive ``P(lower < d + e <= upper)`` for ``d ~ N(mean, var)``: the interval's mass
    under ``N(mean, 1 + var)``, in log space (keeps its relative precision when small)."""
    rows = Outcomes(lower, upper, jnp.ones_like(mean))
    return jnp.exp(_log_z_derivatives(mean, var, rows)[0])


def outcome_probabilities(delta_mean, delta_var, margin):
    """Predictive ``(P(i > j), P(tie), P(j > i))`` from ``d ~ N(delta_mean, delta_var)``:
    ``P(i > j) = Phi((dm - eps) / s)``, ``P(j > i) = Phi((-dm - eps) / s)``,
    ``s = sqrt(1 + dv)``, and the tie the interval ``(-eps, eps]``'s mass."""
    margin = jnp.asarray(margin, jnp.result_type(delta_mean))
    s = jnp.sqrt(1.0 + delta_var)
    win = jnp.exp(log_ndtr((delta_mean - margin) / s))
    loss = jnp.exp(log_ndtr((-delta_mean - margin) / s))
    return win, interval_probability(delta_mean, delta_var, -margin, margin), loss
