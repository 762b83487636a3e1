"""Pairwise metrics of held-out preferences: error rate (ERR) and AUC of the XPGP paper."""

from __future__ import annotations

import jax.numpy as jnp

from ._common import _average_ranks, _ftype, _masked_mean, _safe_div, _valid

__all__ = ["pairwise_auc", "pairwise_error", "pairwise_error_from_scores"]


def _pair_errors(winner, loser):
    return jnp.where(winner < loser, 1.0, jnp.where(winner == loser, 0.5, 0.0))


def pairwise_error(probs, mask=None):
    """ERR of the XPGP paper: the fraction of held-out pairs predicted the wrong way round.

    Args:
      probs: ``(m,)`` predicted P(i preferred to j) for held-out pairs (i, j) whose truth is
        "i preferred to j". ``p < 0.5`` is an error, ``p == 0.5`` counts as half an error.
      mask: ``(m,)`` bool, True for real pairs; None = all.

    Returns:
      ``()`` error rate in [0, 1]; 0 when there is no valid pair.
    """
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
    """
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
    """
    probs = jnp.asarray(probs)
    valid = _valid(probs, mask)
    p = jnp.where(valid, probs, 0.5).astype(_ftype(probs))
    # U = (rank sum of the positives among all 2m examples) - m(m+1)/2, ties at their mean rank
    ranks = _average_ranks(jnp.concatenate([p, 1 - p]), jnp.concatenate([valid, valid]))
    m = jnp.sum(valid).astype(p.dtype)
    u = jnp.sum(jnp.where(valid, ranks[: p.shape[0]], 0)) - m * (m + 1) / 2
    return _safe_div(u, m * m, 0.5)
