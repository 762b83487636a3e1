"""Pairwise metrics of held-out preferences: error rate (ERR) and AUC of the XPGP paper."""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np

from ..data.checks import check_pair_array
from ..data.checks.formatting import show_value
from . import checks
from ._common import _average_ranks, _ftype, _masked_mean, _safe_div, _valid

__all__ = ["pairwise_auc", "pairwise_error", "pairwise_error_from_scores"]


def _pair_errors(winner, loser):
    return jnp.where(winner < loser, 1.0, jnp.where(winner == loser, 0.5, 0.0))


def _check_pair_probs(probs, mask) -> None:
    """``probs`` 1-D, the mask of its length; valid concrete ones finite in [0, 1]."""
    probs, values = checks.vector(probs, "probs")
    valid = checks.mask_values(mask, np.shape(probs)[0], "probs")
    checks.probabilities(values, valid, "probs")


def _check_scored_pairs(scores, pairs, mask):
    """Shapes always; where concrete: valid pairs' indices in [0, n) (naming the row and the
    index) and the scores they refer to finite. Returns ``pairs`` (``(m, 2)`` int where
    concrete)."""
    scores, values = checks.vector(scores, "scores")
    n = np.shape(scores)[0]
    if checks.is_traced(pairs):
        if np.ndim(pairs) != 2 or np.shape(pairs)[1] != 2:
            raise ValueError(f"pairs must have shape (m, 2), got {np.shape(pairs)}")
        checks.mask_values(mask, np.shape(pairs)[0], "pairs")
        return pairs
    arr = check_pair_array(pairs, "pairs")
    valid = checks.mask_values(mask, arr.shape[0], "pairs")
    if valid is None:
        return arr
    if (bad := np.argwhere(((arr < 0) | (arr >= n)) & valid[:, None])).size:
        row, col = (int(i) for i in bad[0])
        raise ValueError(
            f"pairs row {row}: index {show_value(arr[row, col])} is out of range for n={n} scores"
        )
    if values is not None:
        used = np.zeros(n, dtype=bool)
        used[arr[valid].reshape(-1)] = True
        checks.finite(values, used, "scores")
    return arr


def pairwise_error(probs, mask=None):
    """ERR of the XPGP paper: the fraction of held-out pairs predicted the wrong way round.

    Args:
      probs: ``(m,)`` predicted P(i preferred to j) for held-out pairs (i, j) whose truth is
        "i preferred to j". ``p < 0.5`` is an error, ``p == 0.5`` counts as half an error.
      mask: ``(m,)`` bool, True for real pairs; None = all.

    Returns:
      ``()`` error rate in [0, 1]; 0 when there is no valid pair.

    Raises:
      ValueError: naming the first valid (concrete) probability not finite in [0, 1], or for a
        mask of another length.
    """
    _check_pair_probs(probs, mask)
    probs = jnp.asarray(probs)
    errors = _pair_errors(probs, 0.5).astype(_ftype(probs))
    return _masked_mean(errors, _valid(probs, mask))


def pairwise_error_from_scores(scores, pairs, mask=None):
    """Pairwise error of entity scores: pair (i, j) ("i preferred to j") is an error when
    ``scores[i] < scores[j]`` and half an error when they are equal.

    Args:
      scores: ``(n,)`` entity scores; pairs: ``(m, 2)`` int indices in [0, n) into ``scores``;
      mask: ``(m,)`` bool, True for real pairs (padded pairs may hold any index); None = all.

    Returns:
      ``()`` error rate in [0, 1]; 0 when there is no valid pair.

    Raises:
      ValueError: for shapes other than ``(n,)``, ``(m, 2)``, ``(m,)``; where concrete, naming
        the row and index of a valid pair outside [0, n) (``pairs row 0: index 9 is out of range
        for n=5 scores``) or the first non-finite score that a valid pair uses.
    """
    pairs = _check_scored_pairs(scores, pairs, mask)
    scores, pairs = jnp.asarray(scores), jnp.asarray(pairs)
    take = lambda i: jnp.take(scores, i, mode="clip")  # noqa: E731
    errors = _pair_errors(take(pairs[:, 0]), take(pairs[:, 1])).astype(_ftype(scores))
    return _masked_mean(errors, _valid(pairs, mask))


def pairwise_auc(probs, mask=None):
    """AUC of the XPGP paper over held-out pairs, as a Mann-Whitney statistic.

    Each held-out pair (i, j) with truth "i preferred to j" and prediction p = P(i > j) gives a
    positive example (i, j) scored p and a negative example (j, i) scored 1 - p. With m pairs,
    ``AUC = (1 / m**2) sum_{a, b} ([p_a > 1 - p_b] + 0.5 [p_a == 1 - p_b])``: the probability that
    a random positive outscores a random negative, ties counted 1/2. Computed from ranks,
    O(m log m).

    Args:
      probs: ``(m,)`` predicted probabilities that the truly preferred item wins.
      mask: ``(m,)`` bool, True for real pairs; None = all.

    Returns:
      ``()`` AUC in [0, 1]; 0.5 when there is no valid pair.

    Raises:
      ValueError: as ``pairwise_error``.
    """
    _check_pair_probs(probs, mask)
    probs = jnp.asarray(probs)
    valid = _valid(probs, mask)
    p = jnp.where(valid, probs, 0.5).astype(_ftype(probs))
    # U = (rank sum of the positives among all 2m examples) - m(m+1)/2, ties at their mean rank
    ranks = _average_ranks(jnp.concatenate([p, 1 - p]), jnp.concatenate([valid, valid]))
    m = jnp.sum(valid).astype(p.dtype)
    u = jnp.sum(jnp.where(valid, ranks[: p.shape[0]], 0)) - m * (m + 1) / 2
    return _safe_div(u, m * m, 0.5)
