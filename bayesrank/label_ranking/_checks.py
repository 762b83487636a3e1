"""Host-side (NumPy) checks of label-ranking inputs, each ``ValueError`` naming its culprit.

A *label ranking* of ``c`` labels is stored as an ORDER: row ``i`` lists the labels ``0..c-1``
from the most to the least preferred (``orders[i, 0]`` is the top label). Its inverse, the
*positions* ``pos[i, label]`` (0 = top), is what ``metrics.orders_to_positions`` gives; both are
``(n, c)`` permutations of ``0..c-1`` row by row, so the checks below cannot tell them apart:
the functions say which one they take.
"""

from __future__ import annotations

import numbers

import numpy as np

from ..data.checks.formatting import as_array, first_bool, index_text, show_value, value_at

__all__ = ["check_C", "check_X", "check_lengths", "check_orders", "check_positive_int"]


def check_X(X, name: str = "X", n_features: int | None = None, owner: str | None = None):
    """``X: (n, d)`` as float64 NumPy, ``n >= 1``, ``d >= 1``, every entry finite.

    Raises:
        ValueError: for a shape that is not ``(n, d)``, a complex or non-numeric dtype, a number
            of features other than ``n_features`` (naming ``owner``, the fitted estimator), or
            naming the first entry that is NaN or infinite (``X[2, 1] = nan``).
    """
    if type(X).__module__.startswith("scipy.sparse"):
        raise ValueError(f"{name} is a sparse {type(X).__name__}; pass {name}.toarray()")
    arr = np.asarray(X)
    if arr.dtype.kind not in "biuf":
        raise ValueError(f"{name} must be a real numeric array, got dtype {arr.dtype}")
    if arr.ndim != 2 or arr.shape[0] == 0 or arr.shape[1] == 0:
        raise ValueError(f"{name} must be 2-D (n, d) with n >= 1 and d >= 1, got shape {arr.shape}")
    arr = arr.astype(np.float64)
    bad = ~np.isfinite(arr)
    if bad.any():
        i, j = (int(k) for k in np.argwhere(bad)[0])
        raise ValueError(f"{name}[{i}, {j}] = {arr[i, j]} is not finite (NaN and inf are refused)")
    if n_features is not None and arr.shape[1] != n_features:
        raise ValueError(
            f"{name} has {arr.shape[1]} features, but {owner or 'the estimator'} was fitted on "
            f"{n_features}"
        )
    return arr


def check_orders(orders, name: str = "rankings", n_labels: int | None = None):
    """``orders: (n, c)`` as int64 NumPy, every row a permutation of ``0..c-1``, ``c >= 2``.

    Integral floats (``2.0``) are accepted, booleans are not (a ``True`` among ints is not the
    label 1).

    Raises:
        ValueError: for ragged rows (naming the first row whose length differs), a shape that is
            not ``(n, c)`` with ``c >= 2`` (or ``c != n_labels``), a bool, naming the first
            entry that is not an integer label in ``0..c-1``, or the first row that is not a
            permutation of ``0..c-1``.
    """
    if isinstance(orders, list | tuple) and (where := first_bool(orders)) is not None:
        value = show_value(value_at(orders, where))
        raise ValueError(f"{name}{index_text(where)} = {value} is a bool, not an integer label")
    arr = as_array(orders, name, "iuf", "an array of integer labels")
    if arr.ndim != 2 or arr.shape[0] == 0 or arr.shape[1] < 2:
        raise ValueError(
            f"{name} must be 2-D (n, c) with n >= 1 rows of c >= 2 labels, got shape {arr.shape}"
        )
    c = arr.shape[1]
    if n_labels is not None and c != n_labels:
        raise ValueError(f"{name} has {c} labels per row, expected {n_labels}")
    if arr.dtype.kind == "f":
        bad = ~np.isfinite(arr) | (arr != np.round(arr))
        if bad.any():
            i, j = (int(k) for k in np.argwhere(bad)[0])
            raise ValueError(f"{name}[{i}, {j}] = {arr[i, j]} is not an integer label")
    bad = (arr < 0) | (arr >= c)  # before the int64 cast, which would wrap a huge float
    if bad.any():
        i, j = (int(k) for k in np.argwhere(bad)[0])
        value = arr[i, j].item()
        raise ValueError(
            f"{name}[{i}, {j}] = {int(value) if isinstance(value, float) else value} is not a "
            f"label: labels are 0..{c - 1} (c = {c} per row)"
        )
    arr = arr.astype(np.int64)
    ok = (np.sort(arr, axis=1) == np.arange(c)).all(axis=1)
    if not ok.all():
        i = int(np.argmin(ok))
        raise ValueError(
            f"{name}[{i}] = {arr[i].tolist()} is not a permutation of 0..{c - 1} (each row lists "
            "every label once, most preferred first)"
        )
    return arr


def check_lengths(X, rankings, x_name: str = "X", r_name: str = "rankings"):
    """``ValueError`` unless ``X`` and ``rankings`` have the same number of rows."""
    if X.shape[0] != rankings.shape[0]:
        raise ValueError(
            f"{x_name} has {X.shape[0]} rows but {r_name} has {rankings.shape[0]}: one ranking "
            "per instance"
        )


def check_C(C, name: str = "C") -> float:
    """A finite real ``> 0`` as a float; ``ValueError`` naming the option otherwise."""
    if isinstance(C, bool) or not isinstance(C, numbers.Real) or not (np.isfinite(C) and C > 0):
        raise ValueError(f"{name} must be a finite number > 0, got {C!r}")
    return float(C)


def check_positive_int(value, name: str) -> int:
    """An integer ``>= 1`` (not a bool); ``ValueError`` naming the option otherwise."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 1:
        raise ValueError(f"{name} must be an integer >= 1, got {value!r}")
    return int(value)
