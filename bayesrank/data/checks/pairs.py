"""Checks of preference pairs: training pairs (with their counts), prediction pairs, masks; and
of entity indices and group ids one per row (memberships)."""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from .formatting import (
    _has,
    _length,
    _ragged,
    as_array,
    first_bool,
    first_index,
    index_text,
    show_value,
    value_at,
)
from .options import check_int


class PairSummary(NamedTuple):
    """The result of ``check_pairs`` (``bayesrank.validate_pairs``).

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


def _whole(arr: np.ndarray) -> np.ndarray:
    """Where an integer-kind or floating array does NOT hold a whole number (NaN and inf do not)."""
    if arr.dtype.kind in "iu":
        return np.zeros(arr.shape, dtype=bool)
    with np.errstate(invalid="ignore"):
        return ~np.isfinite(arr) | (arr != np.round(arr))


def _integer_array(pairs, name: str, width: int | None = 2) -> np.ndarray:
    """``pairs`` as a NumPy array of a real kind; a bool in a list refused, and in ragged rows
    of ``width`` entries the first row of another length named (not the first that differs
    from row 0, which may be the valid one)."""
    if isinstance(pairs, list | tuple) and (where := first_bool(pairs)) is not None:
        # NumPy casts a bool among ints to 0 or 1: [[0, True]] would be the pair (0, 1)
        raise ValueError(
            f"{name}{index_text(where)} = {value_at(pairs, where)!r} is a bool, not an index"
        )
    if isinstance(pairs, list | tuple) and width is not None and _ragged(pairs) is not None:
        k = next(k for k, row in enumerate(pairs) if _length(row) != width)
        raise ValueError(f"{name}[{k}] {_has(_length(pairs[k]))}: a row has {width} entries")
    return as_array(pairs, name, "iuf", "integer-valued")


def _pair_rows(pairs, name: str) -> np.ndarray:
    """``(m, 2)`` whole-valued, in the input's dtype (range checks must see the values before an
    int64 cast, which would wrap a huge float); messages name the row."""
    arr = _integer_array(pairs, name)
    if arr.ndim == 1 and arr.size == 0:
        arr = arr.reshape(0, 2)
    if arr.ndim != 2 or arr.shape[1] != 2:
        raise ValueError(f"{name} must have shape (m, 2), got {arr.shape}")
    if (bad := first_index(_whole(arr))) is not None:
        raise ValueError(f"{name} row {bad[0]}: value {show_value(arr[bad])} is not an integer")
    return arr


def check_pair_array(pairs, name: str = "pairs") -> np.ndarray:
    """Rows of pairs, without an entity count to check them against (for row selection).

    Args:
        pairs: ``(m, 2)`` integer-valued (whole floats accepted; bool is not); an empty
            sequence ``[]`` is the ``(0, 2)`` array.

    Returns:
        ``(m, 2)`` int64.

    Raises:
        ValueError: ``pairs must have shape (m, 2), got (30, 3)``, ``pairs must be
            integer-valued, got dtype bool``, ``pairs row 1: value nan is not an integer``.
    """
    return _pair_rows(pairs, name).astype(np.int64)


def check_pairs(pairs, n: int, name: str = "pairs") -> PairSummary:
    """Check preference pairs over ``n`` entities and summarise them (``validate_pairs``).

    Rejected (``ValueError`` naming the first offending row): a shape other than ``(m, 2)``; a
    non-integer value (floats are accepted, and cast, when they are whole numbers; NaN is not); an
    index outside ``0 <= i < n``; a self-pair ``(i, i)``. Duplicates and contradictions are kept
    and counted: they are legitimate noisy observations. No pairs at all (``[]`` or a ``(0, 2)``
    array) is accepted: a problem before its first comparison (active learning starts there).

    Args:
        pairs: ``(m, 2)`` integer-valued pairs, winner first.
        n: number of entities, a non-negative integer (``2.5`` and ``True`` are rejected).
        name: what to call ``pairs`` in error messages.

    Returns:
        ``PairSummary`` with the validated int64 pairs (same rows, same order) and counts.
    """
    n = check_int(n, "n")
    if n < 0:
        raise ValueError(f"n={n} must be non-negative")
    raw = _pair_rows(pairs, name)
    if (bad := first_index((raw < 0) | (raw >= n))) is not None:
        raise ValueError(
            f"{name} row {bad[0]}: index {show_value(raw[bad])} is out of range for n={n} entities"
        )
    arr = raw.astype(np.int64)
    self_pairs = np.flatnonzero(arr[:, 0] == arr[:, 1])
    if self_pairs.size:
        row = self_pairs[0]
        raise ValueError(f"{name} row {row} is a self-pair ({arr[row, 0]}, {arr[row, 1]})")

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


def _entities_in_range(arr: np.ndarray, n: int, name: str) -> np.ndarray:
    """``arr`` as int64 where every entry is a whole number in ``[0, n)`` (checked before the
    cast, which would wrap ``1e20``); else ``ValueError`` naming the element."""
    if (bad := first_index(_whole(arr))) is not None:
        raise ValueError(f"{name}{index_text(bad)} = {show_value(arr[bad])} is not an integer")
    if (bad := first_index((arr < 0) | (arr >= n))) is not None:
        raise ValueError(
            f"{name}{index_text(bad)} = {show_value(arr[bad])} is not an entity index (n = {n}): "
            f"out of range [0, {n})"
        )
    return arr.astype(np.int64)


def _entity_indices(pairs, n: int, name: str, lead: int, what: str) -> np.ndarray:
    """``(*lead_shape, m, 2)`` whole, in ``[0, n)``, as int64; messages name the element."""
    arr = _integer_array(pairs, name, 2 if lead == 0 else None)
    if lead == 0 and arr.ndim == 1 and arr.size == 0:
        arr = arr.reshape(0, 2)
    if arr.ndim != 2 + lead or arr.shape[-1] != 2:
        raise ValueError(f"{name} must be {what}, got shape {arr.shape}")
    return _entities_in_range(arr, n, name)


def check_entity_indices(values, n: int, name: str = "entities") -> np.ndarray:
    """Entity indices, one per row (memberships, anchors): ``(k,)`` whole numbers in ``[0, n)``.

    As for pairs, whole floats are taken and a bool is refused (NumPy would read ``True`` as
    entity 1); the range is checked before the int64 cast (which would wrap ``1e20``).

    Returns:
        ``(k,)`` int64.

    Raises:
        ValueError: ``entities[1] = 0.5 is not an integer``; ``entities[1] = 7 is not an entity
            index (n = 5): out of range [0, 5)``.
    """
    n = check_int(n, "n", low=0)
    arr = _integer_array(values, name, width=None)
    if arr.ndim != 1:
        raise ValueError(f"{name} must be one-dimensional (k,), got shape {arr.shape}")
    return _entities_in_range(arr, n, name)


def check_group_ids(groups, k: int, name: str = "groups") -> np.ndarray:
    """Group ids, one per row: ``(k,)`` whole numbers (whole floats taken) or strings.

    A bool is refused (``[True, 1]`` would be one group to NumPy), a fraction too (``0.5`` and
    ``0.7`` are more likely a computed value than two labels), and so are NaN, ``None`` and
    other objects.

    Returns:
        ``(k,)``: int64 for numbers, the strings as NumPy gives them.

    Raises:
        ValueError: ``groups has 3 ids, expected 2: one per entity``; ``groups[0] = 0.5 is not
            an integer or a string id``.
    """
    if isinstance(groups, list | tuple) and (where := first_bool(groups)) is not None:
        raise ValueError(
            f"{name}{index_text(where)} = {value_at(groups, where)!r} is a bool, not a group id"
        )
    if np.ndim(groups) == 0:
        raise ValueError(f"{name} must be a sequence of {k} ids (one per entity), got {groups!r}")
    arr = as_array(groups, name, "iufUS", "integer or string ids")
    if arr.ndim != 1:
        raise ValueError(f"{name} must be one-dimensional (k,), got shape {arr.shape}")
    if arr.shape[0] != k:
        raise ValueError(f"{name} has {arr.shape[0]} ids, expected {k}: one per entity")
    if arr.dtype.kind in "US":
        return arr
    if (bad := first_index(_whole(arr))) is not None:
        raise ValueError(
            f"{name}{index_text(bad)} = {show_value(arr[bad])} is not an integer or a string id"
        )
    if arr.dtype.kind == "f" and (bad := first_index(np.abs(arr) >= 2.0**63)) is not None:
        raise ValueError(
            f"{name}{index_text(bad)} = {show_value(arr[bad])} is beyond int64 (a group id)"
        )
    return arr.astype(np.int64)


def check_index_pairs(pairs, n: int, name: str = "pairs") -> np.ndarray:
    """Pairs to predict: entity indices in range; self-pairs and repeats are allowed.

    ``P(i > i) = 1/2`` is a well-defined query, and a pair may be asked twice, so only the shape,
    integrality and range are checked.

    Args:
        pairs: ``(p, 2)`` integer-valued (whole floats accepted; ``[]`` is ``(0, 2)``).
        n: number of entities.

    Returns:
        ``(p, 2)`` int64.

    Raises:
        ValueError: ``pairs[1, 1] = 9 is not an entity index (n = 7): out of range [0, 7)``.
    """
    n = check_int(n, "n", low=0)
    return _entity_indices(pairs, n, name, 0, "(p, 2)")


def check_pair_mask(mask, shape: tuple[int, ...], name: str = "pair_mask") -> np.ndarray:
    """A boolean mask of real (True) and padded (False) pairs, of the given shape.

    Args:
        mask: bool array of shape ``shape`` (0/1 integers are rejected, not cast), or None for
            all True.
        shape: the pairs' leading shape, ``(m,)`` or ``(B, m)``.

    Returns:
        ``shape`` bool.
    """
    shape = tuple(shape)
    if mask is None:
        return np.ones(shape, dtype=bool)
    arr = np.asarray(mask)
    if arr.dtype != np.bool_ or arr.shape != shape:
        raise ValueError(
            f"{name} must be a bool array of shape {shape}, got dtype {arr.dtype} and shape "
            f"{arr.shape}"
        )
    return arr
