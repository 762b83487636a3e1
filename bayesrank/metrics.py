"""Ranking, pairwise and probability metrics of one query, in pure JAX.

Every function scores ONE query (one set of pairs, one set of predictions) given fixed-shape arrays
and an optional boolean ``mask`` of the same leading length (True = real item; None = all real).
Padded entries never change a result, whatever they hold (huge, infinite or NaN values included),
so the functions can be ``jax.vmap``-ed over padded queries. Cut-offs and options (``k``,
``max_k``, ``n_bins``, ``short_query``, ``normalize``) are static Python values: mark them static
under ``jax.jit`` (the library never jits for you). Nothing returns NaN; degenerate inputs get the
value given in the table.

Conventions
-----------

=========================  =======================================================================
ranking                    by score, highest first; equal scores keep index order (the official
                           LETOR scripts stably sort file order); padded items last; NaN scores
                           rank after all real scores
positions                  1-based (position 1 = top)
gain (NDCG)                ``2**label - 1`` (labels 0, 1, 2 -> 0, 1, 3); labels integers >= 0
discount (NDCG)            1 at positions 1 and 2, ``1 / log2(p)`` at position p >= 3 (LETOR's;
                           NOT the ``1 / log2(p + 1)`` of trec_eval or scikit-learn)
no relevant document       NDCG@k = P@k = AP = 0
NDCG@k, k > n documents    0 with ``short_query="letor"`` (official, see ``ndcg_at``);
                           NDCG@n with ``short_query="truncate"``
P@k, k > n documents       holes are irrelevant: (#relevant among the n) / k (LETOR 4.0 script)
relevant (P@k, AP)         ``label >= relevant_threshold`` (default 1)
mean over queries          plain mean over all queries, those without relevant documents included
pairwise error             pair (i, j) means "i preferred to j"; p < 0.5 is an error, p == 0.5 half
                           an error; no valid pair -> 0
pairwise AUC               Mann-Whitney over m positives p and m negatives 1 - p, ties 1/2;
                           no valid pair -> 0.5
Kendall tau                tau-b (``scipy.stats.kendalltau``); 0 where scipy gives NaN (a constant
                           vector, fewer than 2 items)
Kendall distance           discordant pair 1, pair tied in exactly one vector 1/2, tied in both 0;
                           divided by n(n-1)/2 when ``normalize``; fewer than 2 items -> 0
Spearman rho               Pearson correlation of average ranks (``scipy.stats.spearmanr``);
                           0 for a constant vector or fewer than 2 items
footrule, position error   positions as in "ranking"; no valid item -> 0
Brier, log loss            mean over valid items; log loss clips p to [eps, 1 - eps],
                           eps = ``finfo(dtype).eps``; no valid item -> 0
ECE, reliability curve     B equal-width bins, bin b = [b/B, (b+1)/B), the last bin closed (p
                           outside [0, 1] goes to the nearest end bin); empty bins count 0
dtype                      results are floating, of the inputs' dtype promoted with Python float
                           (integer inputs give float64 under jax_enable_x64, else float32)
=========================  =======================================================================
"""

from __future__ import annotations

import operator
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

__all__ = [
    "LetorMetrics",
    "ReliabilityCurve",
    "average_precision",
    "brier_score",
    "expected_calibration_error",
    "kendall_distance",
    "kendall_tau",
    "letor_metrics",
    "log_loss",
    "ndcg_at",
    "pairwise_auc",
    "pairwise_error",
    "pairwise_error_from_scores",
    "position_error",
    "precision_at",
    "reliability_curve",
    "spearman_footrule",
    "spearman_rho",
]

_SHORT_QUERY = ("letor", "truncate")


class LetorMetrics(NamedTuple):
    """The official LETOR measures of one query (see :func:`letor_metrics`)."""

    map: jax.Array  #: ``()`` average precision (its mean over queries is MAP)
    ndcg: jax.Array  #: ``(max_k,)`` NDCG@1 .. NDCG@max_k
    precision: jax.Array  #: ``(max_k,)`` P@1 .. P@max_k


class ReliabilityCurve(NamedTuple):
    """Per-bin statistics of predicted probabilities (see :func:`reliability_curve`)."""

    counts: jax.Array  #: ``(n_bins,)`` integer number of valid predictions in each bin
    mean_prob: jax.Array  #: ``(n_bins,)`` mean predicted probability (0 in an empty bin)
    mean_outcome: jax.Array  #: ``(n_bins,)`` mean outcome, the observed frequency (0 if empty)


# ----------------------------------------------------------------------------------- helpers


def _static_int(name, value, minimum=1):
    try:
        value = operator.index(value)
    except TypeError:
        raise TypeError(
            f"{name} must be a static Python int (mark it static under jax.jit), got {value!r}"
        ) from None
    if value < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {value}")
    return value


def _check_short_query(short_query):
    if short_query not in _SHORT_QUERY:
        raise ValueError(f"short_query must be one of {_SHORT_QUERY}, got {short_query!r}")


def _ftype(*xs):
    return jnp.result_type(*xs, float)


def _valid(x, mask):
    if mask is None:
        return jnp.ones(x.shape[:1], dtype=bool)
    return jnp.asarray(mask, dtype=bool)


def _safe_div(num, den, empty):
    """``num / den`` where ``den > 0``, else ``empty`` (no inf or NaN, not even in gradients)."""
    ok = den > 0
    return jnp.where(ok, num / jnp.where(ok, den, 1), empty)


def _masked_mean(values, valid, empty=0.0):
    return _safe_div(jnp.sum(jnp.where(valid, values, 0)), jnp.sum(valid), empty)


def _sort_valid_first(key, valid):
    """Sort ascending by (padded?, key, index); returns (order, key sorted, padded? sorted)."""
    idx = jnp.arange(key.shape[0])
    padded, skey, order = lax.sort((jnp.logical_not(valid).astype(jnp.int32), key, idx), num_keys=3)
    return order, skey, padded


def _positions(scores, valid):
    """The ranking of one query: ``order[r]`` is the item at 0-based position r (score descending,
    ties by index, padded items last) and ``pos[i]`` the 0-based position of item i."""
    scores = jnp.asarray(scores)
    if scores.dtype == bool or jnp.issubdtype(scores.dtype, jnp.unsignedinteger):
        scores = scores.astype(_ftype(scores))  # so that negation reverses the order
    order, _, _ = _sort_valid_first(-scores, valid)
    pos = jnp.zeros_like(order).at[order].set(jnp.arange(order.shape[0], dtype=order.dtype))
    return order, pos


def _average_ranks(x, valid):
    """1-based ranks of ``x`` ascending among valid items, tied values sharing their mean rank."""
    order, skey, padded = _sort_valid_first(x, valid)
    n = x.shape[0]
    idx = jnp.arange(n)
    change = (skey[1:] != skey[:-1]) | (padded[1:] != padded[:-1])
    first = jnp.concatenate([jnp.ones((1,), bool), change])  # starts a run of equal values
    last = jnp.concatenate([change, jnp.ones((1,), bool)])  # ends one
    start = lax.cummax(jnp.where(first, idx, 0))
    stop = lax.cummin(jnp.where(last, idx, n), reverse=True)
    mean_rank = (start + stop).astype(_ftype(x)) / 2 + 1
    return jnp.zeros(n, mean_rank.dtype).at[order].set(mean_rank)


# ------------------------------------------------------------------------------- LETOR metrics


def _letor_curves(scores, labels, mask, relevant_threshold):
    """Curves over positions 1..n of one query: NDCG, #relevant so far, and AP and #valid."""
    scores, labels = jnp.asarray(scores), jnp.asarray(labels)
    valid = _valid(labels, mask)
    if labels.shape[0] == 0:  # a static empty query: one padded slot keeps indexing simple
        scores, labels = jnp.zeros(1, scores.dtype), jnp.zeros(1, labels.dtype)
        valid = jnp.zeros(1, bool)
    dt = _ftype(scores, labels)
    order, _ = _positions(scores, valid)
    position = jnp.arange(1, order.shape[0] + 1, dtype=dt)
    discount = jnp.log(jnp.asarray(2.0, dt)) / jnp.log(jnp.maximum(position, 2))
    gain = jnp.where(valid, jnp.exp2(labels.astype(dt)) - 1, 0)
    dcg = jnp.cumsum(gain[order] * discount)
    ideal_dcg = jnp.cumsum(-jnp.sort(-gain) * discount)
    ndcg = _safe_div(dcg, ideal_dcg, 0.0)
    relevant = (valid & (labels >= relevant_threshold))[order]
    hits = jnp.cumsum(relevant.astype(dt))
    ap = _safe_div(jnp.sum(jnp.where(relevant, hits / position, 0)), hits[-1], 0.0)
    return ndcg, hits, ap, jnp.sum(valid)


def _at_cutoffs(ndcg, hits, n_valid, ks, short_query):
    """NDCG@k and P@k for the static cut-offs ``ks``; the curves are flat past the valid items."""
    idx = np.minimum(ks, ndcg.shape[0]) - 1
    ndcg_k = ndcg[idx]
    if short_query == "letor":
        ndcg_k = jnp.where(ks <= n_valid, ndcg_k, 0)
    return ndcg_k, hits[idx] / ks.astype(hits.dtype)


def ndcg_at(scores, labels, k, mask=None, short_query="letor"):
    """NDCG@k of one query, exactly as the official LETOR scripts (Eval-Score-3.0/4.0.pl).

    ``DCG@k = sum_{p<=k} (2**label_p - 1) * d_p`` over the documents ranked by ``scores`` (ties by
    index), with ``d_p = 1`` for p = 1, 2 and ``1 / log2(p)`` for p >= 3; NDCG@k = DCG@k divided
    by the DCG@k of the labels sorted descending, and 0 when that ideal DCG@k is 0 (no relevant
    document).

    **Short queries (n < k), read this**: the official scripts compute NDCG only at positions 1..n
    and average a per-query array in which the missing positions count 0, so with the default
    ``short_query="letor"`` NDCG@k = 0 for every k > n, even for a perfect ranking. Pass
    ``short_query="truncate"`` for the common alternative NDCG@k = NDCG@n for k > n.

    The scripts' gain table covers the grades 0, 1, 2 of the LETOR 3.0/4.0 data; here any grade
    l >= 0 gains ``2**l - 1`` (the script would give grades above 2 a gain of 0).

    Args:
      scores: ``(n,)`` predicted scores, higher is better.
      labels: ``(n,)`` integer relevance grades >= 0.
      k: static int >= 1, the cut-off.
      mask: ``(n,)`` bool, True for real documents; None = all.
      short_query: ``"letor"`` or ``"truncate"``, as above.

    Returns:
      ``()`` NDCG@k in [0, 1].
    """
    k = _static_int("k", k)
    _check_short_query(short_query)
    ndcg, hits, _, n_valid = _letor_curves(scores, labels, mask, 1)
    return _at_cutoffs(ndcg, hits, n_valid, np.array([k]), short_query)[0][0]


def precision_at(scores, labels, k, mask=None, relevant_threshold=1):
    """P@k of one query as the LETOR 4.0 script: #relevant among the top k, divided by k.

    A document is relevant when ``label >= relevant_threshold``. When the query has n < k
    documents, the missing positions count as irrelevant: P@k = (#relevant among all n) / k (the
    LETOR 4.0 script and the 2009 update of the 3.0 one; the first 3.0 script reported 0).

    Args:
      scores: ``(n,)`` predicted scores, higher is better (ties by index).
      labels: ``(n,)`` relevance grades.
      k: static int >= 1, the cut-off.
      mask: ``(n,)`` bool, True for real documents; None = all.
      relevant_threshold: the smallest relevant label.

    Returns:
      ``()`` P@k in [0, 1]; 0 when no document is relevant.
    """
    k = _static_int("k", k)
    ndcg, hits, _, n_valid = _letor_curves(scores, labels, mask, relevant_threshold)
    return _at_cutoffs(ndcg, hits, n_valid, np.array([k]), "letor")[1][0]


def average_precision(scores, labels, mask=None, relevant_threshold=1):
    """Average precision of one query (its mean over queries is LETOR's MAP).

    ``AP = (1 / R) sum_{relevant positions p} (#relevant in the top p) / p`` over the documents
    ranked by ``scores`` (ties by index), R = #relevant documents (``label >= relevant_threshold``).

    Args:
      scores: ``(n,)`` predicted scores; labels: ``(n,)`` relevance grades;
      mask: ``(n,)`` bool, True for real documents; None = all.

    Returns:
      ``()`` AP in [0, 1]; 0 when no document is relevant.
    """
    return _letor_curves(scores, labels, mask, relevant_threshold)[2]


def letor_metrics(scores, labels, mask=None, max_k=10, short_query="letor", relevant_threshold=1):
    """All official LETOR measures of one query in one pass: AP, NDCG@1..max_k, P@1..max_k.

    Same definitions as :func:`average_precision`, :func:`ndcg_at` (mind the short-query quirk:
    NDCG@k = 0 for k > n by default) and :func:`precision_at`. For a collection, ``jax.vmap`` this
    over padded queries and take the plain mean over all queries (the official mean counts every
    query, those without relevant documents included).

    Args:
      scores: ``(n,)`` predicted scores; labels: ``(n,)`` integer grades >= 0;
      mask: ``(n,)`` bool, True for real documents; None = all.
      max_k: static int >= 1 (the LETOR 4.0 script reports 10).

    Returns:
      :class:`LetorMetrics` ``(map: (), ndcg: (max_k,), precision: (max_k,))``.
    """
    ks = np.arange(1, _static_int("max_k", max_k) + 1)
    _check_short_query(short_query)
    ndcg, hits, ap, n_valid = _letor_curves(scores, labels, mask, relevant_threshold)
    ndcg_k, precision_k = _at_cutoffs(ndcg, hits, n_valid, ks, short_query)
    return LetorMetrics(map=ap, ndcg=ndcg_k, precision=precision_k)


# ---------------------------------------------------------------------------- pairwise metrics


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


# --------------------------------------------------------------------------- rank correlations


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
    """
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
    """
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
    """
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
    """
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
    """
    scores, labels = jnp.asarray(scores), jnp.asarray(labels)
    valid = _valid(labels, mask)
    dt = _ftype(scores, labels)
    if labels.shape[0] == 0:
        return jnp.zeros((), dt)
    target = jnp.argmax(jnp.where(valid, labels.astype(dt), -jnp.inf))
    return jnp.where(jnp.any(valid), _positions(scores, valid)[1][target], 0).astype(dt)


# --------------------------------------------------------------------------------- calibration


def brier_score(probs, outcomes, mask=None):
    """Brier score: the mean of ``(p - outcome)**2`` over valid predictions.

    Args:
      probs: ``(m,)`` predicted probabilities of the event; outcomes: ``(m,)`` 1 if it happened,
      else 0; mask: ``(m,)`` bool, True for real predictions; None = all.

    Returns:
      ``()`` score in [0, 1] (lower is better); 0 with no valid prediction.
    """
    probs, outcomes = jnp.asarray(probs), jnp.asarray(outcomes)
    dt = _ftype(probs, outcomes)
    return _masked_mean((probs.astype(dt) - outcomes) ** 2, _valid(probs, mask))


def log_loss(probs, outcomes, mask=None):
    """Mean negative log-likelihood ``-[o log p + (1 - o) log(1 - p)]`` over valid predictions.

    ``p`` is clipped to ``[eps, 1 - eps]`` with ``eps = jnp.finfo(dtype).eps`` of the computation
    dtype (2.2e-16 in float64, 1.2e-7 in float32; scikit-learn's ``eps="auto"``), so a confident
    wrong prediction costs at most ``-log(eps)`` (36.0 in float64, 15.9 in float32).

    Args:
      probs: ``(m,)`` predicted probabilities; outcomes: ``(m,)`` 1 if the event happened, else 0;
      mask: ``(m,)`` bool, True for real predictions; None = all.

    Returns:
      ``()`` log loss >= 0; 0 with no valid prediction.
    """
    probs, outcomes = jnp.asarray(probs), jnp.asarray(outcomes)
    dt = _ftype(probs, outcomes)
    valid = _valid(probs, mask)
    eps = jnp.finfo(dt).eps
    p = jnp.clip(jnp.where(valid, probs, 0.5).astype(dt), eps, 1 - eps)
    o = jnp.where(valid, outcomes, 0).astype(dt)
    return _masked_mean(-(o * jnp.log(p) + (1 - o) * jnp.log1p(-p)), valid)


def reliability_curve(probs, outcomes, mask=None, n_bins=10):
    """Reliability diagram data: per equal-width bin, the count, mean prediction and mean outcome.

    Bin b (0-based) of B = ``n_bins`` holds the p in ``[b/B, (b+1)/B)``; the last bin is closed,
    ``[(B-1)/B, 1]``; p < 0 or p > 1 fall into the first or the last bin.

    Args:
      probs: ``(m,)`` predicted probabilities; outcomes: ``(m,)`` 1 if the event happened, else 0;
      mask: ``(m,)`` bool, True for real predictions; None = all; n_bins: static int >= 1.

    Returns:
      :class:`ReliabilityCurve` of ``(n_bins,)`` arrays; the means are 0 in empty bins (``counts``
      tells which bins are empty).
    """
    n_bins = _static_int("n_bins", n_bins)
    probs, outcomes = jnp.asarray(probs), jnp.asarray(outcomes)
    dt = _ftype(probs, outcomes)
    valid = _valid(probs, mask)
    p = probs.astype(dt)
    # b / B computed (correctly rounded) by numpy: XLA may turn a division into a multiplication
    inner_edges = np.arange(1, n_bins, dtype=dt) / np.asarray(n_bins, dt)
    bins = jnp.sum(p[:, None] >= inner_edges, axis=1)  # number of inner edges <= p
    member = (bins[:, None] == jnp.arange(n_bins)) & valid[:, None]  # (m, n_bins)
    counts = jnp.sum(member, axis=0)
    sum_p = jnp.sum(jnp.where(member, p[:, None], 0), axis=0)
    sum_o = jnp.sum(jnp.where(member, outcomes[:, None].astype(dt), 0), axis=0)
    return ReliabilityCurve(counts, _safe_div(sum_p, counts, 0.0), _safe_div(sum_o, counts, 0.0))


def expected_calibration_error(probs, outcomes, mask=None, n_bins=10):
    """Expected calibration error ``ECE = sum_b (n_b / N) |mean(outcome_b) - mean(p_b)|``.

    Bins as in :func:`reliability_curve` (B equal-width bins on [0, 1], last bin closed); N is the
    number of valid predictions and empty bins contribute 0.

    Args:
      probs: ``(m,)`` predicted probabilities; outcomes: ``(m,)`` 1 if the event happened, else 0;
      mask: ``(m,)`` bool, True for real predictions; None = all; n_bins: static int >= 1.

    Returns:
      ``()`` ECE in [0, 1]; 0 with no valid prediction.
    """
    curve = reliability_curve(probs, outcomes, mask, n_bins)
    weight = _safe_div(curve.counts.astype(curve.mean_prob.dtype), jnp.sum(curve.counts), 0.0)
    return jnp.sum(weight * jnp.abs(curve.mean_outcome - curve.mean_prob))
