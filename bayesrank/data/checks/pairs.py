"""Checks of preference pairs: training pairs (with their counts), prediction pairs, masks; and
of entity indices and group ids one per row (memberships)."""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from ._format import (
    _as_array,
    _at,
    _first,
    _first_bool,
    _has,
    _is_bool,
    _length,
    _ragged,
    _show,
    _value_at,
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
    if isinstance(pairs, list | tuple) and (where := _first_bool(pairs)) is not None:
        # NumPy casts a bool among ints to 0 or 1: [[0, True]] would be the pair (0, 1)
        raise ValueError(
            f"{name}{_at(where)} = {_value_at(pairs, where)!r} is a bool, not an index"
        )
    if isinstance(pairs, list | tuple) and width is not None and _ragged(pairs) is not None:
        k = next(k for k, row in enumerate(pairs) if _length(row) != width)
        raise ValueError(f"{name}[{k}] {_has(_length(pairs[k]))}: a row has {width} entries")
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
    arr = _integer_array(pairs, name, 2 if lead == 0 else None)
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
    arr = _integer_array(values, name)
    if arr.ndim != 1:
        raise ValueError(f"{name} must be one-dimensional (k,), got shape {arr.shape}")
    if (bad := _first(_whole(arr))) is not None:
        raise ValueError(f"{name}{_at(bad)} = {_show(arr[bad])} is not an integer")
    if (bad := _first((arr < 0) | (arr >= n))) is not None:
        raise ValueError(
            f"{name}{_at(bad)} = {_show(arr[bad])} is not an entity index (n = {n}): "
            f"out of range [0, {n})"
        )
    return arr.astype(np.int64)


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
    if isinstance(groups, list | tuple) and (where := _first_bool(groups)) is not None:
        raise ValueError(
            f"{name}{_at(where)} = {_value_at(groups, where)!r} is a bool, not a group id"
        )
    if np.ndim(groups) == 0:
        raise ValueError(f"{name} must be a sequence of {k} ids (one per entity), got {groups!r}")
    arr = _as_array(groups, name, "iufUS", "integer or string ids")
    if arr.ndim != 1:
        raise ValueError(f"{name} must be one-dimensional (k,), got shape {arr.shape}")
    if arr.shape[0] != k:
        raise ValueError(f"{name} has {arr.shape[0]} ids, expected {k}: one per entity")
    if arr.dtype.kind in "US":
        return arr
    if (bad := _first(_whole(arr))) is not None:
        raise ValueError(f"{name}{_at(bad)} = {_show(arr[bad])} is not an integer or a string id")
    if arr.dtype.kind == "f" and (bad := _first(np.abs(arr) >= 2.0**63)) is not None:
        raise ValueError(f"{name}{_at(bad)} = {_show(arr[bad])} is beyond int64 (a group id)")
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


#: The error a weighted EP site may carry, by float width: EP's default tolerances
#: (``inference.ep.default_tol``), which a weight's rounding error must stay below (``max_weight``).
_WEIGHT_ERROR = {64: 1e-6, 32: 1e-3}


def max_weight(dtype=np.float64) -> float:
    """The largest weight a row may have when fitted in ``dtype``: ``4.5e9`` in float64,
    ``8.4e3`` in float32.

    A row of weight ``w`` is ``w`` copies; EP computes one copy's site as a difference of two
    precisions that differ by about ``1 / w`` of their size, then multiplies it by ``w``, so the
    round-off of the working precision ``eps`` grows ``w``-fold: the marginals carry an error of
    about ``w * eps``. The bound keeps it below EP's default tolerance (1e-6 in float64, 1e-3 in
    float32): ``w <= tol / eps``. (Measured in float64 on two entities against the fixed point
    solved to 50 digits: correct to 1e-5 up to ``w = 1e10``; from ``1e11`` EP stalls, at ``1e20``
    its mean is ``1.7e32``.) Merge fewer judgements into a row, or rescale the weights (a
    tempered likelihood) to stay below it.
    """
    info = np.finfo(dtype)
    return _WEIGHT_ERROR.get(info.bits, _WEIGHT_ERROR[64]) / float(info.eps)


def check_weights(weight, m: int, name: str = "weight", dtype=np.float64) -> np.ndarray:
    """Rows' weights: ``(m,)`` reals in ``(0, max_weight(dtype)]`` (a count of repeated
    judgements, or any positive power of the likelihood); bool, complex and strings are
    refused. Returns float64.

    Raises:
        ValueError: ``weights[3] = -1.0 is not a finite number > 0``; ``weights[0] = 1e+12 is
            above 4.5e+09, the largest weight EP fits correctly in float64``.
    """
    if isinstance(weight, list | tuple) and (where := _first_bool(weight)) is not None:
        # NumPy casts a bool among numbers to 0 or 1: [2.0, True] would be the weights (2, 1)
        value = _value_at(weight, where)
        raise ValueError(f"{name}{_at(where)} = {value!r} is a bool, not a weight")
    arr = np.asarray(weight)
    if arr.dtype.kind not in "iuf" or arr.shape != (m,):
        raise ValueError(
            f"{name} must be a real array of shape ({m},), one per row, got {arr.dtype} "
            f"{arr.shape}"
        )
    arr = arr.astype(np.float64)
    if (bad := np.flatnonzero(~(np.isfinite(arr) & (arr > 0)))).size:
        raise ValueError(
            f"{name}[{bad[0]}] = {arr[bad[0]]} is not a finite number > 0 (a row's weight is "
            "how many times it was judged; leave a row out to give it none)"
        )
    top = max_weight(dtype)
    if (bad := np.flatnonzero(arr > top)).size:
        raise ValueError(
            f"{name}[{bad[0]}] = {arr[bad[0]]:.6g} is above {top:.2g}, the largest weight EP fits "
            f"correctly in {np.dtype(dtype).name} (its round-off grows with the weight: "
            "bayesrank.data.checks.max_weight); merge fewer judgements into one row"
        )
    return arr


def max_margin(dtype=np.float64) -> float:
    """The largest tie margin fitted in ``dtype``: ``6.7e4`` in float64, ``92`` in float32.

    A margin ``eps`` is in units of the judgement noise's sd (1). A win at margin ``eps`` puts
    the probit's argument near ``z = -eps``, where the inverse Mills ratio ``phi(z) / Phi(z)`` is
    ``exp`` of the difference of two logs of size ``z^2 / 2``: its relative error is about
    ``eps_machine * z^2``. The bound keeps that below EP's default tolerance (1e-6 in float64,
    1e-3 in float32): ``eps <= sqrt(tol / eps_machine)``. (Measured in float64 with a win and a
    tie on two entities: at 1e8 the fit is 11 % off and at 1e20 it ignores the margin, both
    reported as converged; above 1e154 the evidence is ``-inf``.)
    """
    info = np.finfo(dtype)
    return float(np.sqrt(_WEIGHT_ERROR.get(info.bits, _WEIGHT_ERROR[64]) / float(info.eps)))


def check_margin(margin, name: str = "margin", dtype=np.float64) -> float:
    """A tie margin: a real number, 0 or in ``[tiny / eps, max_margin(dtype)]`` (``finfo(dtype)``;
    1e-292 in float64, 9.9e-32 in float32: below, the margin over a pair's noise sd
    ``sqrt(1 + v)`` is no longer a normal number, and CPUs flush it to 0; above ``max_margin`` a
    win's moments lose their precision). bool and strings are refused. Returns a ``float``."""
    arr = np.asarray(margin) if not isinstance(margin, str | bytes) else None
    if arr is None or arr.ndim != 0 or arr.dtype.kind not in "iuf" or _is_bool(margin):
        raise ValueError(f"{name} must be a real number >= 0, got {margin!r}")
    out = float(arr)
    if not (np.isfinite(out) and out >= 0):
        raise ValueError(f"{name} = {out} must be a finite number >= 0")
    info = np.finfo(dtype)
    if 0 < out < (low := float(info.tiny / info.eps)):
        raise ValueError(
            f"{name} = {out:g} is below {low:.2g}, the smallest tie margin in {info.dtype.name} "
            "(the smallest normal number over eps: the margin over the noise sd of a pair must "
            "stay a normal number); a tie's probability is about 2 * margin * phi(d), computed "
            "exactly from there up"
        )
    if out > (top := max_margin(dtype)):
        raise ValueError(
            f"{name} = {out:g} is above {top:.2g}, the largest tie margin fitted correctly in "
            f"{info.dtype.name} (in units of the judgement noise, sd 1; "
            "bayesrank.data.checks.max_margin)"
        )
    return out


def check_outcomes(
    tie, weight, margin, m: int, *, weight_name: str = "weight", dtype=np.float64
) -> tuple[np.ndarray, np.ndarray, float]:
    """Each row's outcome: ``tie`` ``(m,)`` bool (None: no tie), ``weight`` ``(m,)`` finite
    reals in ``(0, max_weight(dtype)]`` (None: all 1; ``check_weights``, messages naming
    ``weight_name``), ``margin`` a real >= 0 (``check_margin``), > 0 where a tie is observed
    (a tie has probability 0 at margin 0). Returns ``(tie, weight, margin)`` as bool, float64,
    float.
    """
    tie = check_pair_mask(np.zeros(m, bool) if tie is None else tie, (m,), name="tie")
    weight = np.ones(m) if weight is None else check_weights(weight, m, weight_name, dtype)
    margin = check_margin(margin, dtype=dtype)
    if margin == 0 and tie.any():
        raise ValueError(
            f"margin = 0 gives a tie probability 0, but pair {np.flatnonzero(tie)[0]} is a tie: "
            "give a tie margin > 0"
        )
    return tie, weight, margin


def check_intervals(
    lower, upper, weight, m: int, *, dtype=np.float64
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Each row's interval ``(lower, upper]`` and weight (``bayesrank.likelihoods.Outcomes``):
    ``(m,)`` reals each, ``lower < upper`` (``-inf`` / ``inf`` for an open end, never NaN),
    weights in ``(0, max_weight(dtype)]`` (``check_weights``). Returns float64 arrays."""
    out = []
    for name, values in (("lower", lower), ("upper", upper)):
        arr = np.asarray(values)
        if arr.dtype.kind not in "iuf" or arr.shape != (m,):
            raise ValueError(
                f"outcomes.{name} must be a real array of shape ({m},), one per row, got "
                f"{arr.dtype} {arr.shape}"
            )
        out.append(arr.astype(np.float64))
    lower, upper = out
    weight = check_weights(weight, m, "outcomes.weight", dtype)
    if (bad := np.flatnonzero(~(lower < upper))).size:
        k = bad[0]
        raise ValueError(
            f"row {k}'s interval (outcomes.lower, outcomes.upper] = ({lower[k]}, {upper[k]}] is "
            "empty or not a number: lower < upper"
        )
    return lower, upper, weight


#: The largest grade: grades ``0..K-1`` are the levels of an ordinal scale, and each level
#: above the first needs a threshold of its own (the ordinal prior's ``K - 1`` thresholds, learned
#: with the kernel; PRank's ``K - 1`` thresholds), allocated and compiled with the model.
#: ``2**16`` levels hold every rating scale (percentages, scores out of 1000); a larger "grade"
#: is a score (``PreferenceProblem.from_ratings`` takes its order) or a code to map onto
#: ``0..K-1``, and at 1e12 its thresholds alone would take terabytes.
MAX_GRADE = 2**16 - 1

_ABOVE_MAX_GRADE = (
    f"too large: above {MAX_GRADE}, the largest grade (grades 0..K-1 need K - 1 thresholds: "
    "bayesrank.data.checks.MAX_GRADE); map the values onto 0, 1, ..., K - 1, or give them as "
    "ratings (PreferenceProblem.from_ratings)"
)


def _show_whole(value) -> str:
    """A whole number as messages show it: ``3.0`` as ``3``, ``1e20`` as ``1e+20``."""
    return _show(int(value) if abs(value) < 2**53 else value)


def check_grade_levels(grades, name: str = "grades") -> np.ndarray:
    """Grades of an ordinal scale: ``(m,)`` real (bool is not a grade) whole numbers in
    ``[0, MAX_GRADE]``, checked before the int64 cast (which would wrap ``1e20`` to a negative
    number). Returns ``(m,)`` int64.

    Raises:
        ValueError: ``y[3] = 1e+20 is too large: above 65535, the largest grade ...``;
            ``y[1] = -1 is a negative grade``; ``y[2] = 1.5 is not an integer grade``.
    """
    if isinstance(grades, list | tuple) and (where := _first_bool(grades)) is not None:
        value = _value_at(grades, where)
        raise ValueError(f"{name}{_at(where)} = {value!r} is a bool, not a grade")
    arr = _as_array(grades, name, "iuf", "whole numbers >= 0 (grades)")
    if arr.ndim != 1:
        raise ValueError(f"{name} must be (m,) grades, got shape {arr.shape}")
    fraction = _whole(arr)  # NaN and inf included
    for what, bad in (
        ("not an integer grade", fraction),
        ("a negative grade", ~fraction & (arr < 0)),
        (_ABOVE_MAX_GRADE, ~fraction & (arr > MAX_GRADE)),
    ):
        if (where := np.flatnonzero(bad)).size:
            i = int(where[0])
            shown = _show(arr[i]) if fraction[i] else _show_whole(arr[i])
            raise ValueError(f"{name}[{i}] = {shown} is {what}")
    return arr.astype(np.int64)


def check_graded(graded, n: int) -> np.ndarray:
    """Grades of entities: ``(m_g, 2)`` rows ``(entity, grade)``, entities in ``[0, n)``, grades
    whole numbers in ``[0, MAX_GRADE]`` (``ValueError`` naming the row); ``[]`` is no rows.
    Returns ``(m_g, 2)`` int64.

    As for pairs (``check_pairs``), a bool is not an entity or a grade (``[[True, 1]]`` is
    refused, not read as entity 1), and the range is checked before the int64 cast (which would
    wrap ``1e20`` to a negative number)."""
    arr = _integer_array(graded, "graded")
    if arr.ndim == 1 and arr.size == 0:  # [] is no graded rows, as pairs=[] is no pairs
        arr = arr.reshape(0, 2)
    if arr.ndim != 2 or arr.shape[1] != 2:
        raise ValueError(
            f"graded must be (m_g, 2) rows (entity, grade) of numbers, got {arr.dtype} {arr.shape}"
        )
    if (bad := np.flatnonzero(_whole(arr).any(axis=1))).size:
        row = arr[bad[0]]
        if not np.isfinite(row.astype(np.float64)).all():
            raise ValueError(f"graded row {bad[0]}: {row.tolist()} is not finite")
        raise ValueError(
            f"graded row {bad[0]}: grade {_show(row[1])} of entity {_show(row[0])} is not an "
            "integer (grades are 0, 1, ..., K - 1; map other labels onto them)"
        )
    show = _show_whole  # whole here
    if (bad := np.flatnonzero((arr[:, 0] < 0) | (arr[:, 0] >= n))).size:
        raise ValueError(
            f"graded row {bad[0]}: entity {show(arr[bad[0], 0])} is out of range for n={n} "
            "entities"
        )
    if (bad := np.flatnonzero(arr[:, 1] < 0)).size:
        raise ValueError(f"graded row {bad[0]}: grade {show(arr[bad[0], 1])} is negative (0..K-1)")
    if (bad := np.flatnonzero(arr[:, 1] > MAX_GRADE)).size:
        raise ValueError(f"graded row {bad[0]}: grade {show(arr[bad[0], 1])} is {_ABOVE_MAX_GRADE}")
    return arr.astype(np.int64)
