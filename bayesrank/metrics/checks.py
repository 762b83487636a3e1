"""Host-side checks of the metrics' inputs, at their public entry points (``ordering`` and
``order_learning`` check their masks and arrays with the same functions).

Shapes are static, so they are checked always (under ``jit`` and ``vmap`` too); values only where
the arrays are concrete (a tracer has none). Entries that a ``mask`` marks as padding are never
checked: they may hold anything. Every failure is a ``ValueError`` naming the argument, the index
and the value at fault.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from ..data.checks import check_float, check_int
from ..data.checks.formatting import as_array, show_value
from ..runtime import is_traced

#: The largest cut-off ``k`` / ``max_k`` accepted (larger ones would only allocate memory).
MAX_CUTOFF = 10**6
#: The largest ``n_bins`` accepted (the bins cost an ``(m, n_bins)`` membership matrix).
MAX_BINS = 10**4


class StaticArgumentError(TypeError, ValueError):
    """A static option (``k``, ``max_k``, ``n_bins``) passed as a traced value under ``jit``.

    Both a ``TypeError`` (it is one, for JAX) and a ``ValueError`` (the package's contract)."""


def static_int(name: str, value, low: int = 1, high: int = MAX_CUTOFF) -> int:
    """A static integer option in ``[low, high]``; ``ValueError`` naming it otherwise."""
    if is_traced(value):
        raise StaticArgumentError(
            f"{name} must be a static Python int (mark it static under jax.jit), got a traced value"
        )
    return check_int(value, name, low=low, high=high)


def threshold(value, name: str = "relevant_threshold"):
    """A finite real threshold (checked where concrete)."""
    if is_traced(value):
        return value
    check_float(value, name)
    return value


def as_numpy(x, name: str) -> np.ndarray:
    """A concrete real array as NumPy (bfloat16 and friends widened to float32)."""
    if isinstance(x, jax.Array) and jnp.issubdtype(x.dtype, jnp.floating):
        if np.dtype(x.dtype).kind != "f":
            x = x.astype(jnp.float32)
    return as_array(x, name, "biuf", "a real numeric array")


def vector(x, name: str):
    """``x`` (unchanged) after checking it is a 1-D real array; returns ``(x, values)`` with
    ``values`` its NumPy copy, or None where ``x`` is traced."""
    if is_traced(x):
        if np.ndim(x) != 1:
            raise ValueError(f"{name} must be 1-D, got shape {np.shape(x)}")
        return x, None
    arr = as_numpy(x, name)
    if arr.ndim != 1:
        raise ValueError(f"{name} must be 1-D, got shape {arr.shape}")
    return x, arr


def same_length(name_a: str, a, name_b: str, b) -> None:
    """``a`` and ``b`` (1-D) have the same shape."""
    sa, sb = np.shape(a), np.shape(b)
    if sa != sb:
        raise ValueError(
            f"{name_b} has shape {sb} but {name_a} has shape {sa}: they must have the same length"
        )


def mask_values(mask, n: int, ref: str):
    """The mask's concrete boolean values (all True for None), or None where it is traced.

    ``mask`` must have shape ``(n,)`` (the length of ``ref``) and hold booleans (or 0/1)."""
    if mask is None:
        return np.ones(n, dtype=bool)
    if is_traced(mask):
        if np.shape(mask) != (n,):
            raise ValueError(
                f"mask has shape {np.shape(mask)} but {ref} has shape ({n},): they must have "
                "the same length"
            )
        return None
    arr = as_array(mask, "mask", "biuf", "a bool array")
    if arr.shape != (n,):
        raise ValueError(
            f"mask has shape {arr.shape} but {ref} has shape ({n},): they must have the same length"
        )
    if arr.dtype.kind != "b":
        bad = ~np.isin(arr, (0, 1))
        if bad.any():
            i = int(np.argmax(bad))
            raise ValueError(f"mask[{i}] = {show_value(arr[i])} is not a bool (True or False)")
    return arr.astype(bool)


def _first_bad(bad: np.ndarray, valid) -> int | None:
    bad = bad if valid is None else bad & valid
    return int(np.argmax(bad)) if bad.any() else None


def finite(values, valid, name: str) -> None:
    """Every valid entry of ``values`` finite."""
    if values is None or valid is None:
        return
    with np.errstate(invalid="ignore"):
        i = _first_bad(~np.isfinite(values.astype(np.float64)), valid)
    if i is not None:
        raise ValueError(f"{name}[{i}] = {show_value(values[i])} is not finite")


def probabilities(values, valid, name: str) -> None:
    """Every valid entry finite and in [0, 1]."""
    finite(values, valid, name)
    if values is None or valid is None:
        return
    v = values.astype(np.float64)
    if (i := _first_bad((v < 0) | (v > 1), valid)) is not None:
        raise ValueError(
            f"{name}[{i}] = {show_value(values[i])} is not a probability: outside [0, 1]"
        )


def outcomes01(values, valid, name: str = "outcomes") -> None:
    """Every valid entry 0 or 1 (or a bool)."""
    if values is None or valid is None or values.dtype.kind == "b":
        return
    if (i := _first_bad(~np.isin(values, (0, 1)), valid)) is not None:
        raise ValueError(f"{name}[{i}] = {show_value(values[i])} is not an outcome: must be 0 or 1")


def relevance(values, valid, name: str = "labels", *, grades: bool = False) -> None:
    """Every valid entry finite and >= 0; with ``grades``, also a whole number."""
    finite(values, valid, name)
    if values is None or valid is None:
        return
    v = values.astype(np.float64)
    if (i := _first_bad(v < 0, valid)) is not None:
        raise ValueError(
            f"{name}[{i}] = {show_value(values[i])} is negative: relevance labels must be >= 0"
        )
    if grades and (i := _first_bad(v != np.round(v), valid)) is not None:
        raise ValueError(
            f"{name}[{i}] = {show_value(values[i])} is not an integer: relevance grades are whole "
            "numbers >= 0"
        )


def paired(a, b, mask, name_a: str = "scores", name_b: str = "labels"):
    """Two 1-D arrays of one length with an optional mask: shapes always, ``a`` finite where
    concrete. Returns ``(a values, b values, valid)`` (None where traced)."""
    a, av = vector(a, name_a)
    b, bv = vector(b, name_b)
    same_length(name_a, a, name_b, b)
    valid = mask_values(mask, np.shape(a)[0], name_a)
    finite(av, valid, name_a)
    return av, bv, valid
