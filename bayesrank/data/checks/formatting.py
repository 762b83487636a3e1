"""Message formatting and array coercion shared by every host-side check of the package (those
of ``data.checks`` and the metrics', orderings' and label rankers' own): a value as a message shows
it (``show_value``), an index as ``[3, 1]`` (``index_text``), the first index where a mask holds
(``first_index``), an array of the expected dtype kinds or a ``ValueError`` naming the dtype
(``as_array``), and the first bool hidden in nested lists (``first_bool``, ``value_at``)."""

from __future__ import annotations

import numpy as np


def show_value(value) -> str:
    """A value as messages show it: ``1.0``, ``nan``, ``-inf``, ``12``, ``'a'``, ``True``."""
    if isinstance(value, np.generic):
        value = value.item()
    return repr(value)


def show_typed(value) -> str:
    """``show_value`` plus the type, for values of the wrong kind: ``2.5 (float)``."""
    return f"{show_value(value)} ({type(value).__name__})"


def index_text(index) -> str:
    """``(3, 1)`` -> ``[3, 1]``."""
    return "[" + ", ".join(str(int(i)) for i in index) + "]"


def first_index(bad: np.ndarray) -> tuple[int, ...] | None:
    """The first (row-major) index where ``bad`` holds, or None."""
    if not bad.any():
        return None
    return tuple(int(i) for i in np.argwhere(bad)[0])


def as_array(x, name: str, kinds: str, what: str) -> np.ndarray:
    """``np.asarray(x)`` if its dtype kind is in ``kinds``, else ``ValueError`` naming the dtype."""
    try:
        arr = np.asarray(x)
    except (TypeError, ValueError) as err:  # ragged nested sequences
        if (ragged := _ragged(x)) is not None:
            where, length, first, expected = ragged
            raise ValueError(
                f"{name} must be {what}: {err}; {name}{index_text(where)} {_has(length)} but "
                f"{name}{index_text(first)} {_has(expected)} (rows of equal length are needed)"
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


def first_bool(items, where=()):
    """The index path of the first bool in nested lists or tuples (None: none): NumPy would cast
    a bool among ints to 0 or 1 without a word."""
    for i, item in enumerate(items):
        if _is_bool(item):
            return (*where, i)
        if isinstance(item, list | tuple) and (found := first_bool(item, (*where, i))):
            return found
    return None


def value_at(items, where):
    for i in where:
        items = items[i]
    return items
