"""Within-query pairs for the baseline estimators' ``fit(X, y, qid)``; their checks are
:mod:`bayesrank.data.checks` (``check_X`` is ``check_features``)."""

from __future__ import annotations

import numpy as np

from ..data.checks import check_features as check_X
from ..data.checks import check_ranking_data
from ..data.pairs import pairs_from_grades

__all__ = ["check_X", "check_ranking_data", "pairs_within_queries"]


def pairs_within_queries(y: np.ndarray, qid: np.ndarray) -> np.ndarray:
    """All ``(i, j)`` with ``qid[i] == qid[j]`` and ``y[i] > y[j]``, as global row indices.

    Queries need not be contiguous; a query with one document (or one grade) gives no pairs.

    Returns:
        ``(m, 2)`` int64, winner first, grouped by query in order of first appearance.
    """
    _, first, inverse = np.unique(qid, return_index=True, return_inverse=True)
    order = np.argsort(first)  # queries in order of first appearance
    chunks = []
    for g in order:
        rows = np.flatnonzero(inverse == g)
        p = pairs_from_grades(y[rows])
        if len(p):
            chunks.append(rows[p])
    if not chunks:
        return np.zeros((0, 2), dtype=np.int64)
    return np.concatenate(chunks).astype(np.int64)
