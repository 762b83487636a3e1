"""Within-query pairs for the baseline estimators' ``fit(X, y, qid)``; their checks are
``bayesrank.data.checks`` (``check_X`` is ``check_features``), plus ``query_codes``, which
turns query ids of any hashable kind (ints, strings, a mix of both) into integer codes."""

from __future__ import annotations

import numpy as np

from ..data.checks import check_features as check_X
from ..data.checks import check_grades
from ..data.pairs import pairs_from_grades

__all__ = ["check_X", "check_ranking_data", "pairs_within_queries", "query_codes"]


def _missing(value) -> bool:
    """None and NaN: ids that match nothing (NaN is not even equal to itself)."""
    if value is None:
        return True
    try:
        return bool(value != value)
    except (TypeError, ValueError):  # e.g. objects whose comparison is not a bool
        return False


def query_codes(qid, n: int | None = None, name: str = "qid") -> np.ndarray:
    """Query ids as integer codes ``0, 1, ...`` in order of first appearance.

    Ids are compared as Python values (``==`` and hashing): ``1`` and ``1.0`` are one query,
    ``1`` and ``"1"`` two, so a list mixing strings and integers works. A list is read element by
    element (``np.asarray`` would turn ``[1, "a"]`` into strings and merge ``1`` with ``"1"``).

    Args:
        qid: ``(n,)`` ids, a sequence or an array of any dtype.
        n: the required length, or None.

    Returns:
        ``(n,)`` int64 codes.

    Raises:
        ValueError: for a shape other than ``(n,)``, or naming the first id that is None, NaN
            or not hashable (``qid[3] = nan is not a query id``).
    """
    arr = np.asarray(qid, dtype=object) if isinstance(qid, list | tuple) else np.asarray(qid)
    if arr.ndim != 1 or (n is not None and arr.shape != (n,)):
        expected = f"({n},)" if n is not None else "(n,)"
        raise ValueError(f"{name} has shape {arr.shape}, expected {expected}: one id per row")
    if arr.dtype.kind == "f" and np.isnan(arr).any():
        i = int(np.argmax(np.isnan(arr)))
        raise ValueError(f"{name}[{i}] = nan is not a query id")
    if arr.dtype.kind in "biufUS":  # one NumPy type: np.unique orders and compares them
        _, first, inverse = np.unique(arr, return_index=True, return_inverse=True)
        rank = np.empty(len(first), np.int64)
        rank[np.argsort(first)] = np.arange(len(first))
        return rank[inverse.reshape(-1)]
    codes = np.empty(len(arr), np.int64)
    seen: dict = {}
    for i, value in enumerate(arr.tolist()):
        if _missing(value):
            raise ValueError(f"{name}[{i}] = {value!r} is not a query id")
        try:
            codes[i] = seen.setdefault(value, len(seen))
        except TypeError:
            raise ValueError(f"{name}[{i}] = {value!r} is not hashable") from None
    return codes


def check_ranking_data(X, y, qid) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``fit(X, y, qid)`` inputs: ``X: (n, d)`` float64 with ``n >= 1``, ``y: (n,)`` float64 and
    ``qid`` as ``(n,)`` int64 codes (``query_codes``). ``ValueError`` names the argument at
    fault."""
    X = check_X(X)
    if X.shape[0] == 0:
        raise ValueError("X has no rows")
    y = check_grades(y, X.shape[0], "y")
    return X, y, query_codes(qid, X.shape[0])


def pairs_within_queries(y: np.ndarray, qid: np.ndarray) -> np.ndarray:
    """All ``(i, j)`` with ``qid[i] == qid[j]`` and ``y[i] > y[j]``, as global row indices.

    Queries need not be contiguous; a query with one document (or one grade) gives no pairs.

    Args:
        y: ``(n,)`` grades; qid: ``(n,)`` query ids of any hashable kind (``query_codes``).

    Returns:
        ``(m, 2)`` int64, winner first, grouped by query in order of first appearance.
    """
    inverse = query_codes(qid, len(y))
    chunks = []
    for g in range(int(inverse.max(initial=-1)) + 1):
        rows = np.flatnonzero(inverse == g)
        p = pairs_from_grades(y[rows])
        if len(p):
            chunks.append(rows[p])
    if not chunks:
        return np.zeros((0, 2), dtype=np.int64)
    return np.concatenate(chunks).astype(np.int64)
