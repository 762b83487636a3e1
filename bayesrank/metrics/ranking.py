"""The official LETOR measures of one query: NDCG@k, P@k, average precision (MAP).

Conventions (gain, discount, ties, short queries) in ``bayesrank.metrics``.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from ..data.checks import check_choice
from . import checks
from ._common import _ftype, _positions, _safe_div, _static_int, _valid

__all__ = [
    "LetorMetrics",
    "average_precision",
    "check_gain_labels",
    "letor_metrics",
    "ndcg_at",
    "precision_at",
]

_SHORT_QUERY = ("letor", "truncate")


class LetorMetrics(NamedTuple):
    """The official LETOR measures of one query (see ``letor_metrics``)."""

    map: jax.Array  #: ``()`` average precision (its mean over queries is MAP)
    ndcg: jax.Array  #: ``(max_k,)`` NDCG@1 .. NDCG@max_k
    precision: jax.Array  #: ``(max_k,)`` P@1 .. P@max_k


def check_gain_labels(labels, mask=None, name: str = "labels") -> None:
    """Host-side check that every real document's label is a grade NDCG can use: finite, a whole
    number >= 0, and with a gain ``2**label - 1`` finite in float64 (so ``label < 1024``).

    Args:
        labels: ``(n,)`` relevance grades (NumPy, or concrete JAX arrays).
        mask: ``(n,)`` bool, True for real documents; None = all. Padded entries are not checked.
        name: what to call ``labels`` in the message.

    Raises:
        ValueError: naming the first offending index and value,
            ``labels[3] = 2000.0: its NDCG gain 2**label - 1 is not finite in float64``,
            ``labels[0] = -1 is negative: relevance labels must be >= 0``.
    """
    _, raw = checks.vector(labels, name)
    valid = checks.mask_values(mask, raw.shape[0], name)
    checks.relevance(raw, valid, name, grades=True)
    labels = raw.astype(np.float64)
    with np.errstate(over="ignore", invalid="ignore"):  # the overflow is the test
        bad = valid & ~(np.isfinite(labels) & np.isfinite(np.exp2(labels) - 1))
    if bad.any():
        i = int(np.argmax(bad))
        raise ValueError(
            f"{name}[{i}] = {float(labels[i])!r}: its NDCG gain 2**label - 1 is not finite in "
            "float64 (a label must be finite and below 1024)"
        )


def _check_inputs(scores, labels, mask, *, grades: bool, relevant_threshold=1):
    """Shapes always (``scores``, ``labels`` and ``mask`` of one length); where concrete, valid
    scores finite and labels non-negative (whole numbers with a finite gain with ``grades``,
    ``check_gain_labels``), and ``relevant_threshold`` finite."""
    _, lv, valid = checks.paired(scores, labels, mask)
    if grades and lv is not None and valid is not None:
        check_gain_labels(lv, valid)
    else:
        checks.relevance(lv, valid, "labels")
    checks.threshold(relevant_threshold)


def _check_short_query(short_query):
    check_choice(short_query, "short_query", _SHORT_QUERY)


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
    # Gains relative to 2**top (NDCG is a ratio, so the factor cancels) once the largest label
    # is large enough for 2**label - 1, or their sum, to overflow; below that, 2**label - 1.
    grade = labels.astype(dt)
    top = jnp.max(jnp.where(valid, grade, 0))
    shift = jnp.where(top > jnp.finfo(dt).maxexp // 2, top, 0)
    gain = jnp.where(valid, jnp.exp2(grade - shift) - jnp.exp2(-shift), 0)
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
    l >= 0 gains ``2**l - 1`` (the script would give grades above 2 a gain of 0). Concrete labels
    whose gain is not finite in float64 (``l >= 1024``, or not finite) raise ``ValueError``
    naming the index (``check_gain_labels``); traced ones cannot be checked, and large gains
    are computed relative to the largest, so the result stays finite.

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
    _check_inputs(scores, labels, mask, grades=True)
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
    _check_inputs(scores, labels, mask, grades=False, relevant_threshold=relevant_threshold)
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
    _check_inputs(scores, labels, mask, grades=False, relevant_threshold=relevant_threshold)
    return _letor_curves(scores, labels, mask, relevant_threshold)[2]


def letor_metrics(scores, labels, mask=None, max_k=10, short_query="letor", relevant_threshold=1):
    """All official LETOR measures of one query in one pass: AP, NDCG@1..max_k, P@1..max_k.

    Same definitions as ``average_precision``, ``ndcg_at`` (mind the short-query quirk:
    NDCG@k = 0 for k > n by default) and ``precision_at``. For a collection, ``jax.vmap`` this
    over padded queries and take the plain mean over all queries (the official mean counts every
    query, those without relevant documents included).

    Args:
      scores: ``(n,)`` predicted scores; labels: ``(n,)`` integer grades >= 0 (concrete ones are
        checked as in ``ndcg_at``); mask: ``(n,)`` bool, True for real documents; None = all.
      max_k: static int >= 1 (the LETOR 4.0 script reports 10).

    Returns:
      ``LetorMetrics`` ``(map: (), ndcg: (max_k,), precision: (max_k,))``.
    """
    ks = np.arange(1, _static_int("max_k", max_k) + 1)
    _check_short_query(short_query)
    _check_inputs(scores, labels, mask, grades=True, relevant_threshold=relevant_threshold)
    ndcg, hits, ap, n_valid = _letor_curves(scores, labels, mask, relevant_threshold)
    ndcg_k, precision_k = _at_cutoffs(ndcg, hits, n_valid, ks, short_query)
    return LetorMetrics(map=ap, ndcg=ndcg_k, precision=precision_k)
