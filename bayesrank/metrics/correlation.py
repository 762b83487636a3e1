"""Rank correlations and distances between two rankings of the same items.

Kendall's tau-b and distance, Spearman's rho and footrule, and the position error of the top item.
"""

from __future__ import annotations

import jax.numpy as jnp

from ..data.checks import check_bool
from . import checks
from ._common import _average_ranks, _ftype, _positions, _safe_div, _valid

__all__ = [
    "kendall_distance",
    "kendall_tau",
    "position_error",
    "spearman_footrule",
    "spearman_rho",
]


def _check_ab(a, b, mask) -> None:
    """``a`` and ``b`` 1-D of one length (and the mask's); valid concrete entries finite."""
    _, bv, valid = checks.paired(a, b, mask, "a", "b")
    checks.finite(bv, valid, "b")


def _pair_counts(a, b, mask):
    """Counts over unordered valid pairs: (concordant, discordant, tied in a, tied in b,
    tied in both, pairs). O(n**2) memory."""
    a, b = jnp.asarray(a), jnp.asarray(b)
    valid, dt = _valid(a, mask), _ftype(a, b)
    idx = jnp.arange(a.shape[0])
    pair = (idx[:, None] < idx[None, :]) & valid[:, None] & valid[None, :]
    sign = lambda x: (x[:, None] > x[None, :]).astype(jnp.int8) - (x[:, None] < x[None, :])  # noqa: E731
    sa, sb = sign(a), sign(b)
    count = lambda c: jnp.sum(pair & c, dtype=dt)  # noqa: E731
    return (
        count(sa * sb > 0),
        count(sa * sb < 0),
        count(sa == 0),
        count(sb == 0),
        count((sa == 0) & (sb == 0)),
        count(True),
    )


def kendall_tau(a, b, mask=None):
    """Kendall's tau-b between two score vectors, identical to ``scipy.stats.kendalltau(a, b)``.

    ``tau_b = (C - D) / sqrt((N - T_a) (N - T_b))`` with C / D the concordant / discordant pairs,
    N the number of pairs and T_a, T_b the pairs tied in ``a``, in ``b``. O(n**2) memory.

    Args:
      a, b: ``(n,)`` scores of the same items; mask: ``(n,)`` bool, True for real items.

    Returns:
      ``()`` tau-b in [-1, 1]; 0 where scipy returns NaN (``a`` or ``b`` constant, < 2 items).

    Raises:
      ValueError: for shapes that differ or are not 1-D, or naming the first valid (concrete)
        entry of ``a`` or ``b`` that is not finite.
    """
    _check_ab(a, b, mask)
    c, d, tied_a, tied_b, _, n_pairs = _pair_counts(a, b, mask)
    tau = _safe_div(c - d, jnp.sqrt((n_pairs - tied_a) * (n_pairs - tied_b)), 0.0)
    return jnp.clip(tau, -1, 1)


def kendall_distance(a, b, mask=None, normalize=True):
    """Kendall distance (lecture notes' d_K): the number of pairs ordered differently by a and b.

    A discordant pair counts 1, a pair tied in exactly one of the two vectors 1/2, and a pair tied
    in both 0; ``a`` and ``b`` are scores of the same orientation (e.g. truth and prediction, both
    higher = better). With ``normalize``, divided by n(n-1)/2 (1 = reversed ranking). O(n**2).

    Args:
      a, b: ``(n,)`` scores; mask: ``(n,)`` bool, True for real items; normalize: static bool.

    Returns:
      ``()`` distance; 0 with fewer than two valid items.

    Raises:
      ValueError: as ``kendall_tau``, or for a ``normalize`` that is not a bool.
    """
    normalize = check_bool(normalize, "normalize")
    _check_ab(a, b, mask)
    _, d, tied_a, tied_b, tied_both, n_pairs = _pair_counts(a, b, mask)
    distance = d + 0.5 * (tied_a + tied_b - 2 * tied_both)
    return _safe_div(distance, n_pairs, 0.0) if normalize else distance


def spearman_rho(a, b, mask=None):
    """Spearman's rho, identical to ``scipy.stats.spearmanr(a, b)``: the Pearson correlation of
    the ranks of ``a`` and ``b``, tied values given their average rank.

    Args:
      a, b: ``(n,)`` scores of the same items; mask: ``(n,)`` bool, True for real items.

    Returns:
      ``()`` rho in [-1, 1]; 0 where scipy returns NaN (a constant vector, < 2 items).

    Raises:
      ValueError: as ``kendall_tau``.
    """
    _check_ab(a, b, mask)
    a, b = jnp.asarray(a), jnp.asarray(b)
    valid = _valid(a, mask)
    dt = _ftype(a, b)
    mean = (jnp.sum(valid).astype(dt) + 1) / 2  # mean of the ranks 1..n_valid
    ca = jnp.where(valid, _average_ranks(a, valid).astype(dt) - mean, 0)
    cb = jnp.where(valid, _average_ranks(b, valid).astype(dt) - mean, 0)
    rho = _safe_div(jnp.sum(ca * cb), jnp.sqrt(jnp.sum(ca * ca) * jnp.sum(cb * cb)), 0.0)
    return jnp.clip(rho, -1, 1)


def spearman_footrule(a, b, mask=None, normalize=False):
    """Spearman's footrule: ``sum_i |pos_a(i) - pos_b(i)|`` over valid items.

    ``pos_x(i)`` is the position of item i when ranked by ``x`` (1 = highest score, ties broken by
    index; no averaging of tied ranks). With ``normalize``, divided by its maximum floor(n**2 / 2)
    (1 = reversed ranking).

    Args:
      a, b: ``(n,)`` scores; mask: ``(n,)`` bool, True for real items; normalize: static bool.

    Returns:
      ``()`` footrule (float); 0 with no valid item.

    Raises:
      ValueError: as ``kendall_tau``, or for a ``normalize`` that is not a bool.
    """
    normalize = check_bool(normalize, "normalize")
    _check_ab(a, b, mask)
    a, b = jnp.asarray(a), jnp.asarray(b)
    valid = _valid(a, mask)
    dt = _ftype(a, b)
    gap = jnp.abs(_positions(a, valid)[1] - _positions(b, valid)[1])
    footrule = jnp.sum(jnp.where(valid, gap, 0)).astype(dt)
    if not normalize:
        return footrule
    n = jnp.sum(valid)
    return _safe_div(footrule, (n * n // 2).astype(dt), 0.0)


def position_error(scores, labels, mask=None):
    """Position error (lecture notes' d_PE): the number of items ranked above the target item.

    The target is the most relevant true item (highest label; the first by index if several).
    The result is its 1-based position in the predicted ranking (by ``scores`` descending, ties by
    index) minus 1, so 0 means the target is ranked first.

    Args:
      scores: ``(n,)`` predicted scores; labels: ``(n,)`` true grades (higher = more relevant);
      mask: ``(n,)`` bool, True for real items; None = all.

    Returns:
      ``()`` position error (float) in [0, n - 1]; 0 with no valid item.

    Raises:
      ValueError: for shapes that differ or are not 1-D, or naming the first valid (concrete)
        score or label that is not finite.
    """
    _, lv, valid = checks.paired(scores, labels, mask)
    checks.finite(lv, valid, "labels")
    scores, labels = jnp.asarray(scores), jnp.asarray(labels)
    valid = _valid(labels, mask)
    dt = _ftype(scores, labels)
    if labels.shape[0] == 0:
        return jnp.zeros((), dt)
    target = jnp.argmax(jnp.where(valid, labels.astype(dt), -jnp.inf))
    return jnp.where(jnp.any(valid), _positions(scores, valid)[1][target], 0).astype(dt)
