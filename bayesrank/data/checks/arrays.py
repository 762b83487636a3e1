"""Checks of arrays: matrices, relation graphs, attributes, grades and query ids."""

from __future__ import annotations

from collections.abc import Hashable, Sequence

import numpy as np

from .formatting import (
    as_array,
    first_bool,
    first_index,
    index_text,
    show_typed,
    show_value,
    value_at,
)

#: of arithmetic, so only rounding-level asymmetry is forgiven).
ADJACENCY_SYMMETRY_RTOL = 1e-10


def check_matrix(M, name: str = "M", *, square: bool = False, nonnegative: bool = False):
    """A finite real matrix as a float64 copy: ``(n, p)``, or ``(n, n)`` with ``square``.

    ``M``'s dtype must be bool, integer or floating (exactly representable as float64 for the
    sizes that occur). With ``nonnegative``, negative entries are rejected.

    Returns:
        ``(n, p)`` float64, a new array (callers may write into it).

    Raises:
        ValueError: for a dtype that is not real, a shape that is not 2-D (or not square), or
            naming the first (row-major) entry that is not finite (``V[1, 0] = nan is not
            finite``) or negative (``A[0, 1] = -2.0 is negative``).
    """
    arr = np.array(as_array(M, name, "biuf", "a real numeric array"), dtype=np.float64)
    if arr.ndim != 2:
        raise ValueError(f"{name} must be 2-D, got shape {arr.shape}")
    if square and arr.shape[0] != arr.shape[1]:
        raise ValueError(f"{name} must be square (n, n), got shape {arr.shape}")
    if (bad := first_index(~np.isfinite(arr))) is not None:
        raise ValueError(f"{name}{index_text(bad)} = {show_value(arr[bad])} is not finite")
    if nonnegative and (bad := first_index(arr < 0)) is not None:
        raise ValueError(f"{name}{index_text(bad)} = {show_value(arr[bad])} is negative")
    return arr


def check_distinct(values: Sequence[Hashable], name: str = "nodes") -> dict[Hashable, int]:
    """Distinct hashable ids (node labels, entity ids) -> their positions.

    Ids are compared with ``==`` and hashing (``1`` and ``"1"`` differ, ``1`` and ``1.0`` do not).

    Raises:
        ValueError: ``nodes[2] = 1 repeats nodes[0]``.
    """
    index: dict[Hashable, int] = {}
    for position, value in enumerate(values):
        try:
            earlier = index.get(value)
        except TypeError:
            raise ValueError(f"{name}[{position}] = {value!r} is not hashable") from None
        if earlier is not None:
            raise ValueError(f"{name}[{position}] = {value!r} repeats {name}[{earlier}]")
        index[value] = position
    return index


def check_adjacency(W, name: str = "W") -> np.ndarray:
    """Check a weighted undirected adjacency matrix and return it in canonical form.

    Args:
        W: ``(n, n)`` array-like (NumPy or JAX; bool, integer or floating): finite, non-negative,
            symmetric up to ``|W[i, j] - W[j, i]| <= 1e-10 * max|W|``. ``n = 0`` is allowed.
        name: what to call ``W`` in error messages.

    Returns:
        ``(n, n)`` float64 copy, exactly symmetric (``(W + W^T) / 2``), with the diagonal set to
        zero: self-loops are dropped, not rejected (the Laplacian ``D - W`` ignores them anyway).

    Raises:
        ValueError: for a non-real dtype, a non-square or non-2-D input, naming the first
            index ``(i, j)`` and value that is not finite, negative, or differs from ``W[j, i]``,
            or the first row whose degree (sum of weights) overflows.
    """
    W = check_matrix(W, name, square=True, nonnegative=True)
    tolerance = ADJACENCY_SYMMETRY_RTOL * (float(W.max()) if W.size else 0.0)
    if (bad := first_index(np.abs(W - W.T) > tolerance)) is not None:
        i, j = bad
        raise ValueError(
            f"{name} is not symmetric: {name}[{i}, {j}] = {show_value(W[i, j])} but "
            f"{name}[{j}, {i}] = {show_value(W[j, i])}"
        )
    W = W / 2 + W.T / 2  # not (W + W^T) / 2: that overflows for weights near 1e308
    np.fill_diagonal(W, 0.0)
    with np.errstate(over="ignore"):
        degrees = W.sum(axis=1)
    if (bad := first_index(~np.isfinite(degrees))) is not None:
        (i,) = bad
        raise ValueError(
            f"{name}'s row {i} sums to inf (its weights reach {show_value(W[i].max())}): a graph "
            "kernel needs finite degrees; rescale the weights"
        )
    return W


def check_features(X, n_features: int | None = None, name: str = "X", n: int | None = None):
    """Entity attributes as a finite float64 matrix.

    Args:
        X: ``(n, d)`` bool, integer or floating, ``d >= 1``.
        n_features: the required ``d`` (e.g. what an estimator was fitted on), or None.
        name: what to call ``X`` in error messages.
        n: the required number of rows (entities), or None.

    Returns:
        ``(n, d)`` float64 (``X`` itself, not a copy, when it already is a float64 NumPy array).

    Raises:
        ValueError: for a non-real dtype, a shape that is not 2-D, no columns, the wrong number
            of rows or features, or naming the first entry that is not finite
            (``X[2, 1] = inf is not finite``).
    """
    X = np.asarray(as_array(X, name, "biuf", "a real numeric array"), dtype=np.float64)
    if X.ndim != 2:
        raise ValueError(f"{name} must be 2-D (n, d), got shape {X.shape}")
    if X.shape[1] == 0:
        raise ValueError(f"{name} has shape {X.shape}: it needs at least one feature column")
    if n is not None and X.shape[0] != n:
        raise ValueError(f"{name} has {X.shape[0]} rows, expected n = {n} (one per entity)")
    if (bad := first_index(~np.isfinite(X))) is not None:
        raise ValueError(f"{name}{index_text(bad)} = {show_value(X[bad])} is not finite")
    if n_features is not None and X.shape[1] != n_features:
        raise ValueError(f"{name} has {X.shape[1]} features; the model was fitted on {n_features}")
    return X


def _first_not_real(values, kinds: str):
    """``(index, value)`` of the first scalar entry of a 1-D sequence or array whose own dtype
    kind is not in ``kinds`` (a str, a complex, None; a bool where ``kinds`` lacks ``b``), or
    None: names the culprit when the whole array's dtype is refused."""
    if not isinstance(values, list | tuple | np.ndarray) or np.ndim(values) != 1:
        return None
    for i, value in enumerate(values):
        kind = "U" if isinstance(value, str | bytes) else np.asarray(value).dtype.kind
        if np.ndim(value) == 0 and kind not in kinds:
            return i, value
    return None


def check_grades(
    grades, n: int | None = None, name: str = "grades", *, missing: bool = False, bools: bool = True
) -> np.ndarray:
    """Relevance grades (or any per-entity real values) as a finite float64 vector.

    Args:
        grades: ``(n,)`` bool, integer or floating; ``n = 0`` is allowed.
        n: the required length, or None.
        missing: whether NaN marks an entity without a value (kept as NaN); inf is never taken.
        bools: whether a bool is a value (``True`` as 1); False refuses it, naming the index
            (labels and ratings are numbers, not flags).

    Returns:
        ``(n,)`` float64.

    Raises:
        ValueError: for a non-real dtype (naming the first entry that is not a real number:
            ``grades[0] = '1' (str)``), a shape other than ``(n,)``, or naming the first entry
            that is not finite (``grades[2] = nan is not finite``).
    """
    kinds = "biuf" if bools else "iuf"
    if not bools and isinstance(grades, list | tuple):  # NumPy would read True among ints as 1
        if (where := first_bool(grades)) is not None:
            value = value_at(grades, where)
            raise ValueError(f"{name}{index_text(where)} = {value!r} is a bool, not a number")
    try:
        arr = np.asarray(as_array(grades, name, kinds, "a real numeric array"), dtype=np.float64)
    except ValueError as error:
        if (found := _first_not_real(grades, kinds)) is None:
            raise
        i, value = found
        shown = show_typed(value)
        raise ValueError(f"{error}: {name}[{i}] = {shown} is not a real number") from None
    if arr.ndim != 1:
        raise ValueError(f"{name} must be 1-D, got shape {arr.shape}")
    if n is not None and arr.shape != (n,):
        raise ValueError(f"{name} has shape {arr.shape}, expected ({n},): one value per row")
    bad = ~np.isfinite(arr) & ~(missing & np.isnan(arr))
    if (found := first_index(bad)) is not None:
        why = " (NaN marks a missing value)" if missing else ""
        raise ValueError(f"{name}{index_text(found)} = {show_value(arr[found])} is not finite{why}")
    return arr


def check_variances(variances, name: str = "variances", dtype=np.float64) -> np.ndarray:
    """Variances whose precisions (reciprocals) are used: ``(n,)`` finite reals > 0, bools
    refused, each ``1 / variances[i]`` a finite normal number of ``dtype`` (the working dtype:
    beyond, the precision is ``inf`` or flushed to 0 and the prior term silently vanishes or
    pins its entity at 0). In float64 that is ``[5.6e-309, 4.5e+307]``.

    Returns:
        ``(n,)`` float64.

    Raises:
        ValueError: ``variances[0] = 1e-320: its precision 1 / variances[0] = inf is not a
            finite normal float64``.
    """
    if isinstance(variances, list | tuple) and (where := first_bool(variances)) is not None:
        value = value_at(variances, where)
        raise ValueError(f"{name}{index_text(where)} = {value!r} is a bool, not a variance")
    arr = check_grades(np.asarray(as_array(variances, name, "iuf", "a real array")), name=name)
    if (bad := first_index(~(arr > 0))) is not None:
        raise ValueError(
            f"{name}{index_text(bad)} = {show_value(arr[bad])} is not positive (a variance > 0)"
        )
    info = np.finfo(dtype)
    with np.errstate(over="ignore", divide="ignore"):
        precision = 1.0 / arr
    if (bad := first_index(~((precision >= info.tiny) & (precision <= info.max)))) is not None:
        raise ValueError(
            f"{name}{index_text(bad)} = {show_value(arr[bad])}: its precision 1 / "
            f"{name}{index_text(bad)} = "
            f"{precision[bad]:.3g} is not a finite normal {info.dtype.name} (variances in "
            f"[{1 / info.max:.2g}, {1 / info.tiny:.2g}]); rescale the prior"
        )
    return arr


def check_query_ids(qid, n: int, name: str = "qid") -> np.ndarray:
    """Query ids of ``n`` rows: ``(n,)`` of any dtype whose values hash (ints, strings).

    Raises:
        ValueError: ``qid has shape (39,), expected (40,): one id per row``.
    """
    arr = np.asarray(qid)
    if arr.shape != (n,):
        raise ValueError(f"{name} has shape {arr.shape}, expected ({n},): one id per row")
    return arr


def check_ranking_data(X, y, qid) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The ``fit(X, y, qid)`` inputs of a ranking estimator, checked together.

    Args:
        X: ``(n, d)`` features (``check_features``), ``n >= 1``.
        y: ``(n,)`` finite grades (``check_grades``).
        qid: ``(n,)`` query ids (``check_query_ids``).

    Returns:
        ``(X: (n, d) float64, y: (n,) float64, qid: (n,))``.
    """
    X = check_features(X)
    if X.shape[0] == 0:
        raise ValueError("X has no rows")
    y = check_grades(y, X.shape[0], "y")
    qid = check_query_ids(qid, X.shape[0])
    return X, y, qid


def check_fits_dtype(arr, name: str, dtype) -> np.ndarray:
    """``arr`` (finite, already checked) unless an entry overflows ``dtype``, the working dtype
    it is about to be cast to (float32 with JAX's x64 off): ``ValueError`` naming the first one
    (``K[0, 0] = 1e+200 overflows float32``). Returns ``arr``."""
    arr = np.asarray(arr)
    info = np.finfo(dtype)
    if arr.dtype.kind == "f" and np.finfo(arr.dtype).max > info.max:
        if (bad := first_index(np.abs(arr) > info.max)) is not None:
            raise ValueError(
                f"{name}{index_text(bad)} = {show_value(arr[bad])} overflows {info.dtype.name} "
                f"(max {info.max:.3g}); rescale it, or enable float64 "
                "(jax.config.update('jax_enable_x64', True))"
            )
    return arr
