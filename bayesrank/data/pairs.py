"""Preference pairs: building them from graded documents (of one query, or of many told apart by
query ids: ``query_codes``, ``pairs_within_queries``), subsampling, splitting, validating.

A set of preference pairs is an ``(m, 2)`` integer array; row ``(i, j)`` means entity ``i`` is
preferred to entity ``j`` (winner first). Duplicate rows and contradicting rows (both ``(i, j)``
and ``(j, i)``) are legitimate noisy observations: they are kept, and ``validate_pairs``
(``bayesrank.data.checks.check_pairs`` under its public name) counts them.

These are host-side NumPy functions (the number of pairs is data-dependent); randomness comes from
an explicit ``jax.random`` key, so results are deterministic given the key. Bad input raises
``ValueError`` naming the offending index or row.
"""

from __future__ import annotations

import numpy as np

from .checks import PairSummary, check_grades, check_int, check_pair_array, check_pairs
from .keys import check_key, permutation

__all__ = [
    "PairSummary",
    "pairs_from_grades",
    "pairs_within_queries",
    "query_codes",
    "sample_pairs",
    "split_pairs",
    "validate_pairs",
]


def pairs_from_grades(grades) -> np.ndarray:
    """All preference pairs implied by the relevance grades of one query.

    Returns every ``(i, j)`` with ``grades[i] > grades[j]`` (equal grades give no pair), in
    lexicographic ``(i, j)`` order.

    Args:
        grades: ``(n,)`` finite real grades, higher is better.

    Returns:
        ``(m, 2)`` int64 array, ``m = #{(i, j): grades[i] > grades[j]}``.
    """
    grades = check_grades(grades)
    winners, losers = np.nonzero(grades[:, None] > grades[None, :])  # row-major: lexicographic
    return np.stack([winners, losers], axis=1).astype(np.int64)


def _random_partition(key, m: int, k: int, name: str) -> tuple[np.ndarray, np.ndarray]:
    """Split ``range(m)`` into a uniformly random ``k``-subset and its complement, both sorted.

    The subset is the first ``k`` entries of ``jax.random.permutation(key, m)``.
    """
    k = check_int(k, name)
    if k < 0:
        raise ValueError(f"{name}={k} must be non-negative")
    if k > m:
        raise ValueError(
            f"{name}={k} exceeds the number of pairs m={m} (drawn without replacement)"
        )
    perm = permutation(key, m)
    return np.sort(perm[:k]), np.sort(perm[k:])


def split_pairs(key, pairs, n_known: int) -> tuple[np.ndarray, np.ndarray]:
    """Random split of the rows of ``pairs`` into ``known`` and ``held_out``.

    Rows are split by position (a duplicated row may land on both sides), so the two parts are
    disjoint as sets of rows and their union is the input multiset. Each part keeps the input's
    row order. ``known`` is a uniformly random ``n_known``-subset of the rows.

    Args:
        key: ``jax.random`` key; the split is a deterministic function of it.
        pairs: ``(m, 2)`` integer-valued pairs.
        n_known: ``0 <= n_known <= m``.

    Returns:
        ``known: (n_known, 2)`` and ``held_out: (m - n_known, 2)``, int64 arrays.
    """
    check_key(key)
    arr = check_pair_array(pairs)
    known, held_out = _random_partition(key, arr.shape[0], n_known, "n_known")
    return arr[known], arr[held_out]


def sample_pairs(key, pairs, size: int) -> np.ndarray:
    """Uniformly random subset of ``size`` rows of ``pairs``, drawn without replacement.

    Equal to ``split_pairs(key, pairs, size)[0]``: the rows keep the input's order.

    Args:
        key: ``jax.random`` key; the sample is a deterministic function of it.
        pairs: ``(m, 2)`` integer-valued pairs.
        size: ``0 <= size <= m``.

    Returns:
        ``(size, 2)`` int64 array.
    """
    arr = check_pair_array(pairs)
    chosen, _ = _random_partition(key, arr.shape[0], size, "size")
    return arr[chosen]


#: ``validate_pairs(pairs, n) -> PairSummary``: the public name of ``check_pairs``.
validate_pairs = check_pairs


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
