"""Within-query pairs for the baseline estimators' ``fit(X, y, qid)``; their checks are
``bayesrank.data.checks`` (``check_X`` is ``check_features``). ``query_codes`` and
``pairs_within_queries`` live in ``bayesrank.data.pairs`` and are re-exported here."""

from __future__ import annotations

import numpy as np

from ..data.checks import check_features as check_X
from ..data.checks import check_grades
from ..data.pairs import pairs_within_queries, query_codes

__all__ = ["check_X", "check_ranking_data", "pairs_within_queries", "query_codes"]


def check_ranking_data(X, y, qid) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``fit(X, y, qid)`` inputs: ``X: (n, d)`` float64 with ``n >= 1``, ``y: (n,)`` float64 and
    ``qid`` as ``(n,)`` int64 codes (``query_codes``). ``ValueError`` names the argument at
    fault."""
    X = check_X(X)
    if X.shape[0] == 0:
        raise ValueError("X has no rows")
    y = check_grades(y, X.shape[0], "y")
    return X, y, query_codes(qid, X.shape[0])
