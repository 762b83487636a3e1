"""Preference pairs: building them from graded documents, subsampling, splitting, validating.

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

__all__ = ["PairSummary", "pairs_from_grades", "sample_pairs", "split_pairs", "validate_pairs"]


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
