"""Evaluate rankings of many queries the LETOR way: MAP, NDCG@k and P@k, per query and mean.

A host-side wrapper over ``bayesrank.parallel.letor_metrics``: the queries padded to
bucketed shapes, ``bayesrank.metrics.letor_metrics`` mapped over them in one compiled call
(compiled once per bucket of sizes, not once per call). The mean over
queries counts every query, including those without relevant documents (which score 0), as the
official LETOR scripts do.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from .data.letor import Query
from .metrics import check_gain_labels
from .parallel import letor_metrics

__all__ = ["evaluate_queries", "scores_by_query"]


def scores_by_query(queries: Sequence[Query], scores: np.ndarray) -> list[np.ndarray]:
    """Split one score per data line (a LETOR prediction file) into per-query score arrays."""
    scores = np.asarray(scores, dtype=np.float64)
    n_rows = sum(q.n_docs for q in queries)
    if scores.shape != (n_rows,):
        raise ValueError(f"got {scores.shape[0]} scores for {n_rows} documents")
    return [scores[q.rows] for q in queries]


def evaluate_queries(
    queries: Sequence[Query], scores: Sequence[np.ndarray], max_k: int = 10
) -> dict:
    """MAP, NDCG@1..max_k and P@1..max_k of per-query scores.

    Args:
        queries: ``Q`` queries (their ``grades`` are the labels).
        scores: ``Q`` arrays, ``scores[q]: (n_q,)``, higher = ranked earlier.
        max_k: the largest cut-off; it may exceed every query's length: past the longest
            query, with the official scripts' conventions (``bayesrank.metrics.ndcg_at``),
            NDCG@k = 0 (no document at the positions past a query's end) and P@k = (relevant
            documents) / k, so those values follow from the longest's without arrays of
            ``max_k`` columns.

    Returns:
        A dict with the means under ``"MAP"``, ``"NDCG@k"`` and ``"P@k"`` and a ``"per_query"``
        list of dicts (``qid``, ``n_docs`` and the same keys), in the order of ``queries``.

    Raises:
        ValueError: for mismatched lengths, or naming the query and the index (within it) of a
            label whose NDCG gain ``2**label - 1`` is not finite in float64
            (``bayesrank.metrics.check_gain_labels``).
    """
    if len(queries) != len(scores):
        raise ValueError(f"{len(queries)} queries but {len(scores)} score arrays")
    for q, s in zip(queries, scores, strict=True):
        if np.shape(s) != (q.n_docs,):
            raise ValueError(f"query {q.qid}: {np.shape(s)} scores for {q.n_docs} documents")
        check_gain_labels(q.grades, name=f"query {q.qid}: labels")
    longest = max(max((q.n_docs for q in queries), default=1), 1)
    computed = min(max_k, longest)
    result = letor_metrics(scores, [q.grades for q in queries], computed)
    ndcg, precision = np.asarray(result.ndcg), np.asarray(result.precision)
    per_query = []
    for b, q in enumerate(queries):
        row = {"qid": q.qid, "n_docs": q.n_docs, "MAP": float(result.map[b])}
        hits = precision[b, computed - 1] * computed  # relevant documents of the whole query
        row.update(
            {
                f"NDCG@{k}": float(ndcg[b, k - 1]) if k <= computed else 0.0
                for k in range(1, max_k + 1)
            }
        )
        row.update(
            {
                f"P@{k}": float(precision[b, k - 1]) if k <= computed else float(hits / k)
                for k in range(1, max_k + 1)
            }
        )
        per_query.append(row)
    keys = [k for k in per_query[0] if k not in ("qid", "n_docs")]
    out = {k: float(np.mean([row[k] for row in per_query])) for k in keys}
    out["n_queries"] = len(queries)
    out["per_query"] = per_query
    return out
