"""Message formatting and array coercion shared by the checks."""

from __future__ import annotations

import numpy as np


def _show(value) -> str:
    """A value as messages show it: ``1.0``, ``nan``, ``-inf``, ``12``, ``'a'``, ``True``."""
    if isinstance(value, np.generic):
        value = value.item()
    return repr(value)


def _show_typed(value) -> str:
    """``_show`` plus the type, for values of the wrong kind: ``2.5 (float)``."""
    return f"{_show(value)} ({type(value).__name__})"


def _at(index) -> str:
    """``(3, 1)`` -> ``[3, 1]``."""
    return "[" + ", ".join(str(int(i)) for i in index) + "]"


def _first(bad: np.ndarray) -> tuple[int, ...] | None:
    """The first (row-major) index where ``bad`` holds, or None."""
    if not bad.any():
        return None
    return tuple(int(i) for i in np.argwhere(bad)[0])


def _as_array(x, name: str, kinds: str, what: str) -> np.ndarray:
    """``np.asarray(x)`` if its dtype kind is in ``kinds``, else ``ValueError`` naming the dtype."""
    try:
        arr = np.asarray(x)
    except (TypeError, ValueError) as err:  # ragged nested sequences
        if (ragged := _ragged(x)) is not None:
            where, length, first, expected = ragged
            raise ValueError(
                f"{name} must be {what}: {err}; {name}{_at(where)} {_has(length)} but "
                f"{name}{_at(first)} {_has(expected)} (rows of equal length are needed)"
            ) from None
        raise ValueError(f"{name} must be {what}: {err}") from None
    if arr.dtype.kind not in kinds:
        raise ValueError(f"{name} must be {what}, got dtype {arr.dtype}")
    return arr


def _is_bool(value) -> bool:
    return isinstance(value, bool | np.bool_) or getattr(value, "dtype", None) == np.bool_


def _length(item) -> int | None:
    """The length of a nested row (a list, tuple or array), None for a scalar or a string."""
    if isinstance(item, str | bytes) or not hasattr(item, "__len__"):
        return None
    return len(item)


def _has(length: int | None) -> str:
    return "is a scalar" if length is None else f"has length {length}"


def _ragged(items, where=()):
    """``(index, length, first index, its length)`` of the first row of nested sequences whose
    length (None: a scalar) differs from the first row's at the same depth; None if none."""
    lengths = [_length(item) for item in items] if _length(items) is not None else []
    for k, length in enumerate(lengths):
        if length != lengths[0]:
            return (*where, k), length, (*where, 0), lengths[0]
    for k, length in enumerate(lengths):
        if length and (found := _ragged(items[k], (*where, k))) is not None:
            return found
    return None


def _first_bool(items, where=()):
    """The index path of the first bool in nested lists or tuples (None: none): NumPy would cast
    a bool among ints to 0 or 1 without a word."""
    for i, item in enumerate(items):
        if _is_bool(item):
            return (*where, i)
        if isinstance(item, list | tuple) and (found := _first_bool(item, (*where, i))):
            return found
    return None


def _value_at(items, where):
    for i in where:
        items = items[i]
    return items
