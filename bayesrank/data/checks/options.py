"""Checks of scalar options: integers, floats, flags and choices, named in every message."""

from __future__ import annotations

import operator
from collections.abc import Sequence

import numpy as np

from .formatting import _is_bool, show_typed, show_value

#: The largest seed (``random_state``, ``--seed``) taken: ``jax.random.key`` holds an int64 (a
#: larger one is an ``OverflowError``), NumPy's generators any non-negative integer.
MAX_SEED = 2**63 - 1


def _int_phrase(low, high, allow_none: bool) -> str:
    if low is not None and high is not None:
        phrase = f"an integer in [{low}, {high}]"
    elif low == 0:
        phrase = "a non-negative integer"
    elif low == 1:
        phrase = "a positive integer"
    elif low is not None:
        phrase = f"an integer >= {low}"
    elif high is not None:
        phrase = f"an integer <= {high}"
    else:
        phrase = "an integer"
    return phrase + (" or None" if allow_none else "")


def check_int(
    value, name: str, low: int | None = None, high: int | None = None, *, allow_none: bool = False
) -> int | None:
    """An integer option in ``[low, high]`` (either bound may be None), as a Python ``int``.

    Accepted: Python and NumPy integers and 0-d integer arrays (NumPy or concrete JAX). Rejected:
    ``bool`` (``True`` is not a count), every float (``2.0`` included: an option is typed, not
    computed), strings, arrays with dimensions. ``None`` is returned as is with ``allow_none``.

    Raises:
        ValueError: ``k must be a positive integer, got 1.5 (float)``.
    """
    if value is None and allow_none:
        return None
    phrase = _int_phrase(low, high, allow_none)
    if _is_bool(value):
        raise ValueError(f"{name} must be {phrase}, got {show_typed(value)}")
    try:
        out = operator.index(value)
    except TypeError:
        raise ValueError(f"{name} must be {phrase}, got {show_typed(value)}") from None
    if (low is not None and out < low) or (high is not None and out > high):
        raise ValueError(f"{name} must be {phrase}, got {out}")
    return out


def _bound_phrase(low, high, low_open: bool, high_open: bool) -> str:
    if low is not None and high is not None:
        return f"in {'(' if low_open else '['}{low}, {high}{')' if high_open else ']'}"
    if low is not None:
        return f"{'>' if low_open else '>='} {low}"
    if high is not None:
        return f"{'<' if high_open else '<='} {high}"
    return ""


def check_float(
    value,
    name: str,
    low: float | None = None,
    high: float | None = None,
    *,
    low_open: bool = False,
    high_open: bool = False,
    allow_inf: bool = False,
    allow_nan: bool = False,
    allow_none: bool = False,
) -> float | None:
    """A real option in ``[low, high]`` (``(`` / ``)`` with ``low_open`` / ``high_open``).

    Accepted: Python and NumPy integers and floats and 0-d real arrays (NumPy or concrete JAX),
    returned as a Python ``float``. Rejected: ``bool``, complex, strings, arrays with dimensions,
    NaN (unless ``allow_nan``: then NaN is returned unchecked) and +-inf (unless ``allow_inf``, and
    then only within the bounds). ``None`` is returned as is with ``allow_none``.

    Raises:
        ValueError: ``damping must be in (0, 1], got 0.0``; ``C must be a finite number > 0,
            got nan``.
    """
    if value is None and allow_none:
        return None
    bound = _bound_phrase(low, high, low_open, high_open)
    phrase = ("a number" if allow_inf else "a finite number") + (f" {bound}" if bound else "")
    phrase += " or None" if allow_none else ""
    arr = None
    if isinstance(value, int) and not _is_bool(value):  # a Python int of any size
        try:
            arr = np.asarray(float(value))
        except OverflowError:
            arr = np.asarray(np.inf if value > 0 else -np.inf)
    elif not (_is_bool(value) or isinstance(value, str | bytes)):
        try:
            arr = np.asarray(value)
        except (TypeError, ValueError):
            arr = None
    if arr is None or arr.ndim != 0 or arr.dtype.kind not in "iuf":
        raise ValueError(f"{name} must be {phrase}, got {show_typed(value)}")
    out = float(arr)
    if np.isnan(out):
        if allow_nan:
            return out
        raise ValueError(f"{name} must be {phrase}, got nan")
    below = low is not None and (out <= low if low_open else out < low)
    above = high is not None and (out >= high if high_open else out > high)
    if below or above:
        raise ValueError(f"{name} must be {bound}, got {show_value(out)}")
    if np.isinf(out) and not allow_inf:
        raise ValueError(f"{name} must be {phrase}, got {show_value(out)}")
    return out


def check_bool(value, name: str) -> bool:
    """A flag: Python or NumPy ``bool`` (or a 0-d bool array), returned as a Python ``bool``.

    ``0`` / ``1`` and strings such as ``"false"`` are rejected: a truthy value is not a flag.
    """
    if _is_bool(value) and np.ndim(value) == 0:
        return bool(value)
    raise ValueError(f"{name} must be True or False, got {show_typed(value)}")


def _same(a, b) -> bool:
    a = a.item() if isinstance(a, np.generic) else a
    b = b.item() if isinstance(b, np.generic) else b
    if isinstance(a, str) and isinstance(b, str):
        return a == b
    try:
        return type(a) is type(b) and bool(a == b)
    except (TypeError, ValueError):
        return False


def _or_list(choices: Sequence) -> str:
    shown = [show_value(c) for c in choices]
    if len(shown) == 1:
        return shown[0]
    if len(shown) == 2:
        return f"{shown[0]} or {shown[1]}"
    return f"one of {', '.join(shown[:-1])} or {shown[-1]}"


def check_choice(value, name: str, choices: Sequence):
    """One of ``choices``, compared by type and value (``1.0`` is not ``1``, ``True`` is not ``1``;
    NumPy scalars match their Python equivalents). Returns the matching element of ``choices``.

    Raises:
        ValueError: ``precision must be 'full' or 'mixed', got 'half'``.
    """
    choices = tuple(choices)
    for choice in choices:
        if _same(value, choice):
            return choice
    raise ValueError(f"{name} must be {_or_list(choices)}, got {show_value(value)}")


def check_representable(value, name: str, dtype) -> float:
    """A real option that ``dtype`` holds as a finite number and, unless it is 0, as a normal one.

    For an option already checked (e.g. by ``check_float``) that is about to be cast to a
    working dtype such as float32: a value that overflows there becomes ``inf``, and one below the
    smallest normal number (``finfo(dtype).tiny``) loses its precision or becomes 0, so e.g.
    ``1 / value`` is no longer finite. Returns ``value`` as a Python ``float``.

    Raises:
        ValueError: ``smoothing = 1e-40 is below the smallest normal float32 (1.18e-38)``.
    """
    out = float(value)
    info = np.finfo(dtype)
    if np.isfinite(out) and abs(out) > float(info.max):
        raise ValueError(
            f"{name} = {show_value(out)} overflows {info.dtype.name} (max {info.max:.3g})"
        )
    if out != 0 and abs(out) < float(info.tiny):
        raise ValueError(
            f"{name} = {show_value(out)} is below the smallest normal {info.dtype.name} "
            f"({info.tiny:.3g})"
        )
    return out
