"""Host-side checks and within-query pairs for the baseline estimators' ``fit(X, y, qid)``."""

from __future__ import annotations

import numpy as np

from ..data.pairs import pairs_from_grades

__all__ = ["check_X", "check_ranking_data", "pairs_within_queries"]


def check_X(X, n_features: int | None = None, name: str = "X") -> np.ndarray:
    """``X`` as a finite 2-D float array; ``ValueError`` naming the first bad entry."""
    X = np.asarray(X, dtype=np.float64)
    if X.ndim != 2:
        raise ValueError(f"{name} must be 2-D (n_samples, n_features), got shape {X.shape}")
    bad = np.argwhere(~np.isfinite(X))
    if bad.size:
        row, col = bad[0]
        raise ValueError(f"{name}[{row}, {col}] = {X[row, col]} is not finite")
    if n_features is not None and X.shape[1] != n_features:
        raise ValueError(f"{name} has {X.shape[1]} features; the model was fitted on {n_features}")
    return X


def check_ranking_data(X, y, qid) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Validate ``X: (n, d)``, grades ``y: (n,)`` and query ids ``qid: (n,)`` (any hashable dtype).

    Raises ``ValueError`` for mismatched lengths, non-finite features or grades (naming the
    index), and an empty ``X``.
    """
    X = check_X(X)
    n = X.shape[0]
    if n == 0:
        raise ValueError("X has no rows")
    y = np.asarray(y)
    qid = np.asarray(qid)
    if y.shape != (n,):
        raise ValueError(f"y has shape {y.shape}; X has {n} rows, so y must have shape ({n},)")
    if qid.shape != (n,):
        raise ValueError(f"qid has shape {qid.shape}; X has {n} rows, so qid must be ({n},)")
    y = y.astype(np.float64)
    bad = np.flatnonzero(~np.isfinite(y))
    if bad.size:
        raise ValueError(f"y[{bad[0]}] = {y[bad[0]]} is not finite")
    return X, y, qid


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
