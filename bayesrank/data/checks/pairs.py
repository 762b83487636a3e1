"""Checks of preference pairs: training pairs (with their counts), prediction pairs, masks."""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from ._format import _as_array, _at, _first, _first_bool, _show, _value_at
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


def _integer_array(pairs, name: str) -> np.ndarray:
    if isinstance(pairs, list | tuple) and (where := _first_bool(pairs)) is not None:
        # NumPy casts a bool among ints to 0 or 1: [[0, True]] would be the pair (0, 1)
        raise ValueError(
            f"{name}{_at(where)} = {_value_at(pairs, where)!r} is a bool, not an index"
        )
    return _as_array(pairs, name, "iuf", "integer-valued")


def _pair_rows(pairs, name: str) -> np.ndarray:
    """``(m, 2)`` whole-valued, in the input's dtype (range checks must see the values before an
    int64 cast, which would wrap a huge float); messages name the row."""
    arr = _integer_array(pairs, name)
    if arr.ndim == 1 and arr.size == 0:
        arr = arr.reshape(0, 2)
    if arr.ndim != 2 or arr.shape[1] != 2:
        raise ValueError(f"{name} must have shape (m, 2), got {arr.shape}")
    if (bad := _first(_whole(arr))) is not None:
        raise ValueError(f"{name} row {bad[0]}: value {_show(arr[bad])} is not an integer")
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
    if (bad := _first((raw < 0) | (raw >= n))) is not None:
        raise ValueError(
            f"{name} row {bad[0]}: index {_show(raw[bad])} is out of range for n={n} entities"
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


def _entity_indices(pairs, n: int, name: str, lead: int, what: str) -> np.ndarray:
    """``(*lead_shape, m, 2)`` whole, in ``[0, n)``, as int64; messages name the element."""
    arr = _integer_array(pairs, name)
    if lead == 0 and arr.ndim == 1 and arr.size == 0:
        arr = arr.reshape(0, 2)
    if arr.ndim != 2 + lead or arr.shape[-1] != 2:
        raise ValueError(f"{name} must be {what}, got shape {arr.shape}")
    if (bad := _first(_whole(arr))) is not None:
        raise ValueError(f"{name}{_at(bad)} = {_show(arr[bad])} is not an integer")
    if (bad := _first((arr < 0) | (arr >= n))) is not None:
        raise ValueError(
            f"{name}{_at(bad)} = {_show(arr[bad])} is not an entity index (n = {n}): "
            f"out of range [0, {n})"
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


def check_outcomes(tie, weight, margin, m: int) -> tuple[np.ndarray, np.ndarray, float]:
    """Each row's outcome: ``tie`` ``(m,)`` bool (None: no tie), ``weight`` ``(m,)`` finite
    reals > 0 (None: all 1), ``margin`` a finite real >= 0, > 0 where a tie is observed (a tie
    has probability 0 at margin 0). Returns ``(tie, weight, margin)`` as bool, float64, float.
    """
    tie = check_pair_mask(np.zeros(m, bool) if tie is None else tie, (m,), name="tie")
    if weight is None:
        weight = np.ones(m)
    else:
        weight = np.asarray(weight)
        if weight.dtype.kind not in "iuf" or weight.shape != (m,):
            raise ValueError(
                f"weight must be a real array of shape ({m},), one per pair, got "
                f"{weight.dtype} {weight.shape}"
            )
        weight = weight.astype(np.float64)
        if (bad := np.flatnonzero(~(np.isfinite(weight) & (weight > 0)))).size:
            raise ValueError(
                f"weight[{bad[0]}] = {weight[bad[0]]} is not a finite number > 0 (a pair's "
                "weight is how many times it was judged; leave a pair out to give it none)"
            )
    arr = np.asarray(margin)
    if arr.ndim != 0 or arr.dtype.kind not in "iuf":
        raise ValueError(f"margin must be a real number >= 0, got {margin!r}")
    margin = float(arr)
    if not (np.isfinite(margin) and margin >= 0):
        raise ValueError(f"margin = {margin} must be a finite number >= 0")
    if margin == 0 and tie.any():
        raise ValueError(
            f"margin = 0 gives a tie probability 0, but pair {np.flatnonzero(tie)[0]} is a tie: "
            "give a tie margin > 0"
        )
    return tie, weight, margin


def check_intervals(lower, upper, weight, m: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Each row's interval ``(lower, upper]`` and weight (``bayesrank.likelihoods.Outcomes``):
    ``(m,)`` reals each, ``lower < upper`` (``-inf`` / ``inf`` for an open end, never NaN),
    weights finite and > 0. Returns float64 arrays."""
    out = []
    for name, values in (("lower", lower), ("upper", upper), ("weight", weight)):
        arr = np.asarray(values)
        if arr.dtype.kind not in "iuf" or arr.shape != (m,):
            raise ValueError(
                f"outcomes.{name} must be a real array of shape ({m},), one per row, got "
                f"{arr.dtype} {arr.shape}"
            )
        out.append(arr.astype(np.float64))
    lower, upper, weight = out
    if (bad := np.flatnonzero(~(lower < upper))).size:
        k = bad[0]
        raise ValueError(
            f"row {k}'s interval (outcomes.lower, outcomes.upper] = ({lower[k]}, {upper[k]}] is "
            "empty or not a number: lower < upper"
        )
    if (bad := np.flatnonzero(~(np.isfinite(weight) & (weight > 0)))).size:
        raise ValueError(f"outcomes.weight[{bad[0]}] = {weight[bad[0]]} is not a finite number > 0")
    return lower, upper, weight


def check_graded(graded, n: int) -> np.ndarray:
    """Grades of entities: ``(m_g, 2)`` rows ``(entity, grade)``, entities in ``[0, n)``, grades
    whole numbers ``>= 0`` (``ValueError`` naming the row). Returns int64."""
    arr = np.asarray(graded)
    if arr.ndim != 2 or arr.shape[1] != 2 or arr.dtype.kind not in "iuf":
        raise ValueError(
            f"graded must be (m_g, 2) rows (entity, grade) of numbers, got {arr.dtype} {arr.shape}"
        )
    values = arr.astype(np.float64)
    if (bad := np.flatnonzero(~np.isfinite(values).all(axis=1))).size:
        raise ValueError(f"graded row {bad[0]}: {values[bad[0]].tolist()} is not finite")
    if (bad := np.flatnonzero((values != np.round(values)).any(axis=1))).size:
        row = values[bad[0]]
        raise ValueError(
            f"graded row {bad[0]}: grade {row[1]} of entity {row[0]:g} is not an integer (grades "
            "are 0, 1, ..., K - 1; map other labels onto them)"
        )
    out = values.astype(np.int64)
    if (bad := np.flatnonzero((out[:, 0] < 0) | (out[:, 0] >= n))).size:
        raise ValueError(
            f"graded row {bad[0]}: entity {out[bad[0], 0]} is out of range for n={n} entities"
        )
    if (bad := np.flatnonzero(out[:, 1] < 0)).size:
        raise ValueError(f"graded row {bad[0]}: grade {out[bad[0], 1]} is negative (0..K-1)")
    return out
