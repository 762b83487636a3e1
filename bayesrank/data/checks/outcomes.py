"""Checks of what each row of a problem says beyond "i beat j": its weight (a count of repeated
judgements), the tie margin, the intervals of the outcome model, and graded entities with their
grade levels. Each bound is the one where the engines' arithmetic stays right, stated with it.
"""

from __future__ import annotations

import numpy as np

from .formatting import _is_bool, as_array, first_bool, index_text, show_value, value_at
from .pairs import _integer_array, _whole, check_pair_mask

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
    if isinstance(weight, list | tuple) and (where := first_bool(weight)) is not None:
        # NumPy casts a bool among numbers to 0 or 1: [2.0, True] would be the weights (2, 1)
        value = value_at(weight, where)
        raise ValueError(f"{name}{index_text(where)} = {value!r} is a bool, not a weight")
    arr = np.asarray(weight)
    if arr.dtype.kind not in "iuf" or arr.shape != (m,):
        raise ValueError(
            f"{name} must be a real array of shape ({m},), one per row, got {arr.dtype} {arr.shape}"
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
    return show_value(int(value) if abs(value) < 2**53 else value)


def check_grade_levels(grades, name: str = "grades") -> np.ndarray:
    """Grades of an ordinal scale: ``(m,)`` real (bool is not a grade) whole numbers in
    ``[0, MAX_GRADE]``, checked before the int64 cast (which would wrap ``1e20`` to a negative
    number). Returns ``(m,)`` int64.

    Raises:
        ValueError: ``y[3] = 1e+20 is too large: above 65535, the largest grade ...``;
            ``y[1] = -1 is a negative grade``; ``y[2] = 1.5 is not an integer grade``.
    """
    if isinstance(grades, list | tuple) and (where := first_bool(grades)) is not None:
        value = value_at(grades, where)
        raise ValueError(f"{name}{index_text(where)} = {value!r} is a bool, not a grade")
    arr = as_array(grades, name, "iuf", "whole numbers >= 0 (grades)")
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
            shown = show_value(arr[i]) if fraction[i] else _show_whole(arr[i])
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
            f"graded row {bad[0]}: grade {show_value(row[1])} of entity {show_value(row[0])} is "
            "not an integer (grades are 0, 1, ..., K - 1; map other labels onto them)"
        )
    show = _show_whole  # whole here
    if (bad := np.flatnonzero((arr[:, 0] < 0) | (arr[:, 0] >= n))).size:
        raise ValueError(
            f"graded row {bad[0]}: entity {show(arr[bad[0], 0])} is out of range for n={n} entities"
        )
    if (bad := np.flatnonzero(arr[:, 1] < 0)).size:
        raise ValueError(f"graded row {bad[0]}: grade {show(arr[bad[0], 1])} is negative (0..K-1)")
    if (bad := np.flatnonzero(arr[:, 1] > MAX_GRADE)).size:
        raise ValueError(f"graded row {bad[0]}: grade {show(arr[bad[0], 1])} is {_ABOVE_MAX_GRADE}")
    return arr.astype(np.int64)
