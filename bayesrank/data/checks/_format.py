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
        raise ValueError(f"{name} must be {what}: {err}") from None
    if arr.dtype.kind not in kinds:
        raise ValueError(f"{name} must be {what}, got dtype {arr.dtype}")
    return arr


def _is_bool(value) -> bool:
    return isinstance(value, bool | np.bool_) or getattr(value, "dtype", None) == np.bool_
