"""Preference pairs: building them from graded documents, subsampling, splitting, validating.

A set of preference pairs is an ``(m, 2)`` integer array; row ``(i, j)`` means entity ``i`` is
preferred to entity ``j`` (winner first). Duplicate rows and contradicting rows (both ``(i, j)``
and ``(j, i)``) are legitimate noisy observations: they are kept, and :func:`validate_pairs`
counts them.

These are host-side NumPy functions (the number of pairs is data-dependent); randomness comes from
an explicit ``jax.random`` key, so results are deterministic given the key. Bad input raises
``ValueError`` naming the offending index or row.
"""

from __future__ import annotations

import operator
from typing import NamedTuple

import jax
import numpy as np

__all__ = ["PairSummary", "pairs_from_grades", "sample_pairs", "split_pairs", "validate_pairs"]


class PairSummary(NamedTuple):
    """The result of :func:`validate_pairs`.

    Attributes:
        pairs: ``(m, 2)`` int64 array, the input's rows in the input's order.
        n_pairs: ``m``.
        n_duplicates: rows equal to an earlier row (``m`` minus the number of distinct rows).
        n_contradictions: unordered entity pairs ``{i, j}`` observed in both directions.
        n_entities_touched: distinct entities appearing in at least one row.
    """

    pairs: np.ndarray
    n_pairs: int
    n_duplicates: int
    n_contradictions: int
    n_entities_touched: int


def pairs_from_grades(grades) -> np.ndarray:
    """All preference pairs implied by the relevance grades of one query.

    Returns every ``(i, j)`` with ``grades[i] > grades[j]`` (equal grades give no pair), in
    lexicographic ``(i, j)`` order.

    Args:
        grades: ``(n,)`` finite real grades, higher is better.

    Returns:
        ``(m, 2)`` int64 array, ``m = #{(i, j): grades[i] > grades[j]}``.
    """
    grades = np.asarray(grades, dtype=float)
    if grades.ndim != 1:
        raise ValueError(f"grades must be 1-D, got shape {grades.shape}")
    bad = np.flatnonzero(~np.isfinite(grades))
    if bad.size:
        raise ValueError(f"grades[{bad[0]}] = {grades[bad[0]]} is not finite")
    winners, losers = np.nonzero(grades[:, None] > grades[None, :])  # row-major: lexicographic
    return np.stack([winners, losers], axis=1).astype(np.int64)


def _check_pair_array(pairs) -> np.ndarray:
    """Check that ``pairs`` is ``(m, 2)`` and integer-valued; return it as a NumPy array (no cast).

    Floating-point arrays are accepted when every value is a whole number.
    """
    arr = np.asarray(pairs)
    if arr.ndim != 2 or arr.shape[1] != 2:
        raise ValueError(f"pairs must have shape (m, 2), got {arr.shape}")
    if np.issubdtype(arr.dtype, np.integer):
        return arr
    if not np.issubdtype(arr.dtype, np.floating):
        raise ValueError(f"pairs must be integer-valued, got dtype {arr.dtype}")
    not_whole = ~np.isfinite(arr) | (arr != np.round(arr))
    if not_whole.any():
        row, col = np.argwhere(not_whole)[0]
        raise ValueError(f"pairs row {row}: value {arr[row, col]} is not an integer")
    return arr


def _random_partition(key, m: int, k: int, name: str) -> tuple[np.ndarray, np.ndarray]:
    """Split ``range(m)`` into a uniformly random ``k``-subset and its complement, both sorted.

    The subset is the first ``k`` entries of ``jax.random.permutation(key, m)``.
    """
    k = operator.index(k)
    if k < 0:
        raise ValueError(f"{name}={k} must be non-negative")
    if k > m:
        raise ValueError(
            f"{name}={k} exceeds the number of pairs m={m} (drawn without replacement)"
        )
    perm = np.asarray(jax.random.permutation(key, m))
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
    arr = _check_pair_array(pairs).astype(np.int64)
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
    arr = _check_pair_array(pairs).astype(np.int64)
    chosen, _ = _random_partition(key, arr.shape[0], size, "size")
    return arr[chosen]


def validate_pairs(pairs, n: int) -> PairSummary:
    """Check preference pairs over ``n`` entities and summarise them.

    Rejected (``ValueError`` naming the first offending row): a shape other than ``(m, 2)``; a
    non-integer value (floats are accepted, and cast, when they are whole numbers; NaN is not); an
    index outside ``0 <= i < n``; a self-pair ``(i, i)``. Duplicates and contradictions are kept and
    counted.

    Args:
        pairs: ``(m, 2)`` integer-valued pairs, winner first.
        n: number of entities.

    Returns:
        :class:`PairSummary` with the validated int64 pairs (same rows, same order) and counts.
    """
    n = operator.index(n)
    if n < 0:
        raise ValueError(f"n={n} must be non-negative")
    arr = _check_pair_array(pairs)
    out_of_range = (arr < 0) | (arr >= n)
    if out_of_range.any():
        row, col = np.argwhere(out_of_range)[0]
        raise ValueError(
            f"pairs row {row}: index {arr[row, col]} is out of range for n={n} entities"
        )
    arr = arr.astype(np.int64)
    self_pairs = np.flatnonzero(arr[:, 0] == arr[:, 1])
    if self_pairs.size:
        row = self_pairs[0]
        raise ValueError(f"pairs row {row} is a self-pair ({arr[row, 0]}, {arr[row, 1]})")

    codes = np.unique(arr[:, 0] * n + arr[:, 1])  # distinct directed pairs
    winners, losers = np.divmod(codes, max(n, 1))  # n = 0 admits no rows
    reversed_seen = np.isin(losers * n + winners, codes)
    return PairSummary(
        pairs=arr,
        n_pairs=int(arr.shape[0]),
        n_duplicates=int(arr.shape[0] - codes.size),
        n_contradictions=int(np.sum(reversed_seen & (winners < losers))),
        n_entities_touched=int(np.unique(arr).size),
    )
