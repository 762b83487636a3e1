"""Host-side validation at the library's boundary: one NumPy check per kind of input.

Readers, public constructors and façades check their inputs here, once, before anything is traced
or compiled (inside compiled code nothing is checked). Every check either returns the input in a
canonical form (dtype and shape stated in its docstring) or raises ``ValueError`` with a message
that names the argument, the offending index and its value, e.g.
``pairs[3, 1] = 12 is not an entity index (n = 10): out of range [0, 10)``.

Nothing is cast lossily: a float where an integer is expected is accepted only when it is whole
(and never for an option such as ``n_rounds=2.5``); ``bool`` is not an integer; complex, string and
object arrays are rejected rather than cast (NumPy would drop an imaginary part with a mere warning
and parse strings as numbers).

Two message dialects exist for pairs, both kept because they are published, tested contracts:
:func:`check_pairs` (alias ``validate_pairs``) and :func:`check_pair_array` speak of *rows*
(``pairs row 1: index 5 is out of range for n=5 entities``); the prediction and problem checks
name the element (``pairs[1, 1] = 9 is not an entity index (n = 7): ...``).

This module is layer 0: it imports NumPy only.
"""

from __future__ import annotations

import operator
from collections.abc import Hashable, Sequence
from typing import NamedTuple

import numpy as np

__all__ = [
    "ADJACENCY_SYMMETRY_RTOL",
    "COVARIANCE_PSD_RTOL",
    "COVARIANCE_SYMMETRY_RTOL",
    "PairSummary",
    "check_adjacency",
    "check_bool",
    "check_choice",
    "check_covariance",
    "check_distinct",
    "check_features",
    "check_float",
    "check_grades",
    "check_index_pairs",
    "check_int",
    "check_matrix",
    "check_pair_array",
    "check_pair_mask",
    "check_pairs",
    "check_problem",
    "check_query_ids",
    "check_ranking_data",
]

#: Adjacency symmetry: ``|W[i, j] - W[j, i]| <= 1e-10 * max|W|`` (weights are data, not results
#: of arithmetic, so only rounding-level asymmetry is forgiven).
ADJACENCY_SYMMETRY_RTOL = 1e-10

#: Covariance symmetry: ``|K[i, j] - K[j, i]| <= 1e-8 * max(1, max|K|)`` (a kernel matrix is the
#: result of arithmetic, possibly in float32).
COVARIANCE_SYMMETRY_RTOL = 1e-8

#: Covariance 2x2 minors: ``K[i, j]^2 <= K[i, i] K[j, j] (1 + 1e-6) + eps max(1, max|K|)^2``, with
#: ``eps`` the machine epsilon of K's dtype. The relative slack covers float32 rounding of a
#: perfectly correlated pair (about 4 eps = 5e-7); the absolute one lets an entity of zero variance
#: keep rounding-level covariances.
COVARIANCE_PSD_RTOL = 1e-6


# --- formatting -----------------------------------------------------------------------------------


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


# --- options --------------------------------------------------------------------------------------


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
        raise ValueError(f"{name} must be {phrase}, got {_show_typed(value)}")
    try:
        out = operator.index(value)
    except TypeError:
        raise ValueError(f"{name} must be {phrase}, got {_show_typed(value)}") from None
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
    if not (_is_bool(value) or isinstance(value, str | bytes)):
        try:
            arr = np.asarray(value)
        except (TypeError, ValueError):
            arr = None
    if arr is None or arr.ndim != 0 or arr.dtype.kind not in "iuf":
        raise ValueError(f"{name} must be {phrase}, got {_show_typed(value)}")
    out = float(arr)
    if np.isnan(out):
        if allow_nan:
            return out
        raise ValueError(f"{name} must be {phrase}, got nan")
    below = low is not None and (out <= low if low_open else out < low)
    above = high is not None and (out >= high if high_open else out > high)
    if below or above:
        raise ValueError(f"{name} must be {bound}, got {_show(out)}")
    if np.isinf(out) and not allow_inf:
        raise ValueError(f"{name} must be {phrase}, got {_show(out)}")
    return out


def check_bool(value, name: str) -> bool:
    """A flag: Python or NumPy ``bool`` (or a 0-d bool array), returned as a Python ``bool``.

    ``0`` / ``1`` and strings such as ``"false"`` are rejected: a truthy value is not a flag.
    """
    if _is_bool(value) and np.ndim(value) == 0:
        return bool(value)
    raise ValueError(f"{name} must be True or False, got {_show_typed(value)}")


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
    shown = [_show(c) for c in choices]
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
    raise ValueError(f"{name} must be {_or_list(choices)}, got {_show(value)}")


# --- generic arrays -------------------------------------------------------------------------------


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
    arr = np.array(_as_array(M, name, "biuf", "a real numeric array"), dtype=np.float64)
    if arr.ndim != 2:
        raise ValueError(f"{name} must be 2-D, got shape {arr.shape}")
    if square and arr.shape[0] != arr.shape[1]:
        raise ValueError(f"{name} must be square (n, n), got shape {arr.shape}")
    if (bad := _first(~np.isfinite(arr))) is not None:
        raise ValueError(f"{name}{_at(bad)} = {_show(arr[bad])} is not finite")
    if nonnegative and (bad := _first(arr < 0)) is not None:
        raise ValueError(f"{name}{_at(bad)} = {_show(arr[bad])} is negative")
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


# --- relation graphs ------------------------------------------------------------------------------


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
        ValueError: for a non-real dtype, a non-square or non-2-D input, or naming the first
            index ``(i, j)`` and value that is not finite, negative, or differs from ``W[j, i]``.
    """
    W = check_matrix(W, name, square=True, nonnegative=True)
    tolerance = ADJACENCY_SYMMETRY_RTOL * (float(W.max()) if W.size else 0.0)
    if (bad := _first(np.abs(W - W.T) > tolerance)) is not None:
        i, j = bad
        raise ValueError(
            f"{name} is not symmetric: {name}[{i}, {j}] = {_show(W[i, j])} but "
            f"{name}[{j}, {i}] = {_show(W[j, i])}"
        )
    W = (W + W.T) / 2
    np.fill_diagonal(W, 0.0)
    return W


# --- attributes and grades ------------------------------------------------------------------------


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
    X = np.asarray(_as_array(X, name, "biuf", "a real numeric array"), dtype=np.float64)
    if X.ndim != 2:
        raise ValueError(f"{name} must be 2-D (n, d), got shape {X.shape}")
    if X.shape[1] == 0:
        raise ValueError(f"{name} has shape {X.shape}: it needs at least one feature column")
    if n is not None and X.shape[0] != n:
        raise ValueError(f"{name} has {X.shape[0]} rows, expected n = {n} (one per entity)")
    if (bad := _first(~np.isfinite(X))) is not None:
        raise ValueError(f"{name}{_at(bad)} = {_show(X[bad])} is not finite")
    if n_features is not None and X.shape[1] != n_features:
        raise ValueError(f"{name} has {X.shape[1]} features; the model was fitted on {n_features}")
    return X


def check_grades(grades, n: int | None = None, name: str = "grades") -> np.ndarray:
    """Relevance grades (or any per-entity real values) as a finite float64 vector.

    Args:
        grades: ``(n,)`` bool, integer or floating; ``n = 0`` is allowed.
        n: the required length, or None.

    Returns:
        ``(n,)`` float64.

    Raises:
        ValueError: for a non-real dtype, a shape other than ``(n,)``, or naming the first
            entry that is not finite (``grades[2] = nan is not finite``).
    """
    arr = np.asarray(_as_array(grades, name, "biuf", "a real numeric array"), dtype=np.float64)
    if arr.ndim != 1:
        raise ValueError(f"{name} must be 1-D, got shape {arr.shape}")
    if n is not None and arr.shape != (n,):
        raise ValueError(f"{name} has shape {arr.shape}, expected ({n},): one value per row")
    if (bad := _first(~np.isfinite(arr))) is not None:
        raise ValueError(f"{name}{_at(bad)} = {_show(arr[bad])} is not finite")
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
        X: ``(n, d)`` features (:func:`check_features`), ``n >= 1``.
        y: ``(n,)`` finite grades (:func:`check_grades`).
        qid: ``(n,)`` query ids (:func:`check_query_ids`).

    Returns:
        ``(X: (n, d) float64, y: (n,) float64, qid: (n,))``.
    """
    X = check_features(X)
    if X.shape[0] == 0:
        raise ValueError("X has no rows")
    y = check_grades(y, X.shape[0], "y")
    qid = check_query_ids(qid, X.shape[0])
    return X, y, qid


# --- preference pairs -----------------------------------------------------------------------------


class PairSummary(NamedTuple):
    """The result of :func:`check_pairs` (``bayesrank.validate_pairs``).

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
        :class:`PairSummary` with the validated int64 pairs (same rows, same order) and counts.
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


# --- covariances and whole problems ---------------------------------------------------------------


def check_covariance(K, name: str = "K", *, batched: bool = False) -> np.ndarray:
    """A prior covariance: full ``(n, n)`` or diagonal ``(n,)``; ``(B, n, n)`` / ``(B, n)`` batched.

    Checked: a real floating dtype (integer, bool, complex and object are rejected); ``n >= 1``
    (and ``B >= 1``); finite entries; a non-negative diagonal; and, for a full matrix, symmetry
    up to ``|K[i, j] - K[j, i]| <= 1e-8 * max(1, max|K|)`` (per problem) and the 2x2 principal
    minors ``K[i, j]^2 <= K[i, i] K[j, j] (1 + 1e-6) + eps * max(1, max|K|)^2``, a necessary
    condition for positive semi-definiteness that costs ``O(n^2)`` (no eigendecomposition: a
    matrix that passes may still be indefinite).

    Args:
        K: the covariance (NumPy or JAX array).
        name: what to call ``K`` in error messages.
        batched: a leading problem axis ``B``.

    Returns:
        ``K`` as a NumPy array of its own dtype (float32 stays float32).

    Raises:
        ValueError: naming the shape or dtype, or the first offending entry: ``K[1, 1] = nan is
            not finite``, ``K[2] = -1.0 is negative: a variance must be >= 0``, ``K is not
            symmetric: K[0, 2] = 1.5 but K[2, 0] = 0.5``, ``K is not positive semi-definite:
            K[0, 1] = 2.0 but K[0, 0] * K[1, 1] = 1.0 * 1.0 < K[0, 1]^2``.
    """
    arr = _as_array(K, name, "f", "a real floating array")
    lead = 1 if batched else 0
    full = arr.ndim == 2 + lead and arr.shape[-1] == arr.shape[-2]
    if not (full or arr.ndim == 1 + lead):
        square, diagonal = ("(B, n, n)", "(B, n)") if batched else ("(n, n)", "(n,)")
        raise ValueError(
            f"{name} must be square {square} or a diagonal {diagonal}, got shape {arr.shape}"
        )
    if arr.size == 0:
        need = "at least one problem and one entity" if batched else "at least one entity"
        raise ValueError(f"{name} has shape {arr.shape}: a covariance needs {need}")
    if (bad := _first(~np.isfinite(arr))) is not None:
        raise ValueError(f"{name}{_at(bad)} = {_show(arr[bad])} is not finite")
    diag = np.diagonal(arr, axis1=-2, axis2=-1) if full else arr
    if (bad := _first(diag < 0)) is not None:
        where = (*bad, bad[-1]) if full else bad
        raise ValueError(
            f"{name}{_at(where)} = {_show(diag[bad])} is negative: a variance must be >= 0"
        )
    if not full:
        return arr
    x = arr.astype(np.float64)
    scale = np.maximum(1.0, np.abs(x).max(axis=(-2, -1), keepdims=True))
    xt = np.swapaxes(x, -1, -2)
    if (bad := _first(np.abs(x - xt) > COVARIANCE_SYMMETRY_RTOL * scale)) is not None:
        ij, ji = bad, (*bad[:-2], bad[-1], bad[-2])
        raise ValueError(
            f"{name} is not symmetric: {name}{_at(ij)} = {_show(arr[ij])} but "
            f"{name}{_at(ji)} = {_show(arr[ji])}"
        )
    d = np.diagonal(x, axis1=-2, axis2=-1)
    bound = d[..., :, None] * d[..., None, :] * (1 + COVARIANCE_PSD_RTOL)
    bound += np.finfo(arr.dtype).eps * scale**2
    upper = np.triu(np.ones(x.shape[-2:], dtype=bool), k=1)
    if (bad := _first((x * xt > bound) & upper)) is not None:  # x * xt: K_ij^2, symmetrised
        *b, i, j = bad
        ii, jj, ij = (*b, i, i), (*b, j, j), (*b, i, j)
        raise ValueError(
            f"{name} is not positive semi-definite: {name}{_at(ij)} = {_show(arr[ij])} but "
            f"{name}{_at(ii)} * {name}{_at(jj)} = {_show(arr[ii])} * {_show(arr[jj])} < "
            f"{name}{_at(ij)}^2 (a correlation above 1)"
        )
    return arr


def check_problem(
    K, pairs, pair_mask=None, *, batched: bool = False
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The inputs of an inference engine (EP, NUTS): prior covariance, training pairs, pair mask.

    ``K`` as in :func:`check_covariance`. Every pair, padded ones included, must hold entity
    indices in ``[0, n)`` (padded pairs are still gathered inside compiled code); real pairs
    (``pair_mask`` True) must not be self-pairs. Duplicates and contradictions are allowed. With
    ``batched``, the pairs' leading axis must equal ``K``'s.

    Args:
        K: ``(n, n)`` or ``(n,)``; batched ``(B, n, n)`` or ``(B, n)``.
        pairs: ``(m, 2)``, batched ``(B, m, 2)``, integer-valued; ``[]`` is ``(0, 2)``.
        pair_mask: ``(m,)`` / ``(B, m)`` bool, True for real pairs; None for all.

    Returns:
        ``(K, pairs, pair_mask)``: ``K`` as a NumPy array of its dtype, ``pairs`` int64,
        ``pair_mask`` bool.

    Raises:
        ValueError: as the checks above, or ``pairs[0, 1] = 3 is not an entity index (n = 3):
            out of range [0, 3)``, ``pairs[1] = (3, 3) is a self-pair``.
    """
    K = check_covariance(K, "K", batched=batched)
    n = K.shape[-1]
    what = "(B, m, 2) with B = K.shape[0]" if batched else "(m, 2)"
    raw = _integer_array(pairs, "pairs")
    if batched and (raw.ndim != 3 or raw.shape[0] != K.shape[0]):
        raise ValueError(f"pairs must be {what}, got shape {raw.shape}")
    pairs = _entity_indices(raw, n, "pairs", 1 if batched else 0, what)
    pair_mask = check_pair_mask(pair_mask, pairs.shape[:-1])
    if (bad := _first((pairs[..., 0] == pairs[..., 1]) & pair_mask)) is not None:
        i = int(pairs[bad][0])
        raise ValueError(f"pairs{_at(bad)} = ({i}, {i}) is a self-pair")
    return K, pairs, pair_mask
