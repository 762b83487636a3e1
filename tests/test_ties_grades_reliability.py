"""Ties, grades and pair weights under careless input (issue 49): a ``ValueError`` naming the
argument and the value at fault, or a result that agrees with an independent reference.

References share no code with the implementation:
- a tie's tilted moments by 1-D quadrature over the *judgement* ``y = d + e``, which under a
  cavity ``d ~ N(m, v)`` is ``N(m, 1 + v)`` and is observed in ``(-eps, eps]``: ``Z`` is its mass
  there, ``E[d | y] = m + v / (1 + v) (y - m)``; this route has no difference of two CDFs, so
  it stays exact at a margin of 1e-30 (the likelihood's own form would cancel to 0);
- one tie on two entities: EP is exact, so its evidence is that ``Z`` under the prior;
- a weighted pair on two entities: the EP fixed point of ``w`` copies of the probit site, solved
  in 40-digit arithmetic (mpmath) from the fit's own answer;
- grades and weights: the test's own reading of the values given (whole, in range, not bool).
"""

import math
import warnings

import jax
import mpmath as mp
import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from scipy import integrate, stats

from bayesrank import PreferenceProblem
from bayesrank.data.checks import max_margin, max_weight
from bayesrank.inference import ep
from bayesrank.likelihoods import outcome_tilted_moments, tie_outcomes

pytestmark = pytest.mark.float32  # dtype-aware: also run with x64 off in CI
X64 = jax.config.jax_enable_x64
DTYPE = np.float64 if X64 else np.float32
PROPERTY = settings(max_examples=30, deadline=None, database=None)


def tie_reference(m, v, eps):
    """``(log Z, mean, var)`` of ``P(tie | d) N(d | m, v) / Z`` by quadrature over ``y``."""
    s = math.sqrt(1.0 + v)
    gain = v / (1.0 + v)

    def moment(p):  # E[(y - m)^p 1{|y| <= eps}], relative to its scale (tiny intervals)
        return integrate.quad(
            lambda y: ((y - m) / s) ** p * stats.norm.pdf(y, m, s) / eps,
            -eps,
            eps,
            epsabs=0.0,
            epsrel=1e-12,
        )[0]

    with warnings.catch_warnings():  # quad doubts its 1e-12 at a wide margin; we ask 1e-9
        warnings.simplefilter("ignore", integrate.IntegrationWarning)
        z, first, second = moment(0), moment(1) / moment(0), moment(2) / moment(0)
    mean = m + gain * s * first
    var = v - gain * v + gain**2 * (1.0 + v) * (second - first**2)
    return math.log(z) + math.log(eps), mean, var


# --- case 6: tiny tie margins ----------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.skipif(not X64, reason="float64: quadrature references to 1e-9")
def test_tiny_tie_margins_keep_their_moments():
    """Margins of 1e-5 down to 1e-300: ``log Z``, mean and variance as quadrature's (before:
    ``-inf`` and NaN from 1e-16 on, and 1e-7 of the variance lost at 1e-8)."""
    ms = np.array([-3.0, 0.0, 0.4, 2.5])
    for v in (0.05, 30.0):
        for eps in (1e-8, 1e-30, 1e-300):
            got = outcome_tilted_moments(
                ms, np.full(4, v), tie_outcomes(np.ones(4, bool), np.ones(4), eps)
            )
            for k, m in enumerate(ms):
                np.testing.assert_allclose(
                    [float(got.log_z[k]), float(got.mean[k]), float(got.var[k])],
                    tie_reference(m, v, eps),
                    rtol=1e-9,
                    atol=1e-12,
                    err_msg=f"m={m}, v={v}, eps={eps}",
                )


@pytest.mark.slow
@pytest.mark.skipif(not X64, reason="float64: quadrature references to 1e-9")
def test_one_tie_at_a_tiny_margin_has_its_evidence():
    """One tie on two entities at margin 1e-30: EP is exact, its evidence is ``P(tie)`` under
    the prior (before: ``-inf``, the prior's mean and 'raise max_iter')."""
    K = np.array([[1.3, 0.4], [0.4, 0.8]])
    v0 = K[0, 0] + K[1, 1] - 2 * K[0, 1]
    for eps in (1e-30, 1e-200):
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # no ConvergenceWarning
            post = ep.fit(K, np.array([[0, 1]]), ties=np.array([True]), margin=eps)
        log_z, mean, var = tie_reference(0.0, v0, eps)
        assert bool(post.converged)
        np.testing.assert_allclose(float(post.log_evidence), log_z, rtol=1e-10)
        np.testing.assert_allclose(float(post.mean[0] - post.mean[1]), mean, atol=1e-10)
        dvar = post.cov[0, 0] + post.cov[1, 1] - 2 * post.cov[0, 1]
        np.testing.assert_allclose(float(dvar), var, rtol=1e-9)


# --- case 7: grades and graded entities ------------------------------------------------------


@pytest.mark.parametrize(
    ("graded", "match"),
    [
        ([[0, 1e20]], r"graded row 0: grade 1e\+20 is too large"),
        ([[1e20, 1]], r"graded row 0: entity 1e\+20 is out of range for n=3"),
        ([[0, -1e20]], r"graded row 0: grade -1e\+20 is negative"),
        ([[True, 1]], r"graded\[0, 0\] = True is a bool"),
        ([[0, 1], [2, False]], r"graded\[1, 1\] = False is a bool"),
        (np.array([[0, 2**64 - 1]], np.uint64), r"grade 18446744073709551615 is too large"),
    ],
)
def test_graded_values_are_not_cast_silently(graded, match):
    """1e20 was reported as '-9223372036854775808 is negative' (the int64 cast wraps), a bool
    was stored as entity 1."""
    with pytest.raises(ValueError, match=match):
        PreferenceProblem.create([[0, 1]], n=3, graded=graded)


# --- case 8: pair weights --------------------------------------------------------------------


@pytest.mark.parametrize("name", ["weights", "tie_weights", "grade_weights"])
def test_weights_above_the_bound_are_refused_by_name(name):
    rows = dict(weights={}, tie_weights=dict(ties=[[1, 2]]), grade_weights=dict(graded=[[1, 0]]))
    with pytest.raises(ValueError, match=rf"{name}\[0\] = 1e\+12 is above 4\.5e\+09"):
        PreferenceProblem.create([[0, 1]], n=3, **rows[name], **{name: [1e12]})
    with pytest.raises(ValueError, match=rf"{name}\[1\] = True is a bool"):
        PreferenceProblem.create([[0, 1], [0, 2]], n=3, **rows[name], **{name: [2.0, True]})


def test_ep_refuses_weights_it_cannot_fit():
    """At 1e50 EP's mean was 4.7e31, at 1e300 the prior; max_iter=1000 gave NaN or -inf."""
    top = max_weight(DTYPE)
    for w in (1e50, 1e300, 2 * top):
        with pytest.raises(ValueError, match=r"weight\[0\] = .* is above .* largest weight EP"):
            ep.fit(np.eye(2, dtype=DTYPE), np.array([[0, 1]]), weights=np.array([w]))


def ep_copies_fixed_point(w, v0, m_guess, v_guess):
    """The EP fixed point ``(mean, var)`` of ``d`` for ``w`` copies of ``Phi(d)`` under a prior
    ``N(0, v0)``: the posterior ``N(m, v)`` whose one-copy cavity's tilted moments are
    ``(m, v)``, by Newton in 40 digits."""
    mp.mp.dps = 40
    w, v0 = mp.mpf(w), mp.mpf(v0)

    def gap(m, log_v):
        v = mp.exp(log_v)
        tau1, nu1 = (1 / v - 1 / v0) / w, m / v / w  # one copy's site
        vc = 1 / (1 / v - tau1)
        mc = vc * (m / v - nu1)
        s = mp.sqrt(1 + vc)
        z = mc / s
        r = mp.npdf(z) / mp.ncdf(z)
        return [mc + vc * r / s - m, mp.log(vc - vc**2 * r * (z + r) / (1 + vc)) - log_v]

    m, log_v = mp.findroot(gap, (mp.mpf(m_guess), mp.log(v_guess)), solver="mdnewton")
    return float(m), float(mp.exp(log_v))


@pytest.mark.slow
@pytest.mark.skipif(not X64, reason="float64: the bound 4.5e9 is float64's")
def test_ep_is_right_up_to_the_weight_bound():
    """Below the bound EP reaches the fixed point of ``w`` copies, to its tolerance: it stops
    when a sweep moves the marginals by less than 1e-6, and its sweeps contract by about 0.9
    near the end, so within about 1e-5 of the fixed point (measured: 8e-6 at most)."""
    for w in (3.0, 1e6, 4e9):
        post = ep.fit(np.eye(2), np.array([[0, 1]]), weights=np.array([w]))
        dm = float(post.mean[0] - post.mean[1])
        dv = float(post.cov[0, 0] + post.cov[1, 1] - 2 * post.cov[0, 1])
        want = ep_copies_fixed_point(w, 2.0, dm, dv)
        assert bool(post.converged)
        np.testing.assert_allclose([dm, dv], want, rtol=0, atol=2e-5, err_msg=f"w={w}")


# --- properties over the classes of input ----------------------------------------------------

#: margin classes: 0, the dtypes' edges (smallest normal, tiny / eps), tiny normal, subnormal,
#: moderate, above the bound, negative, NaN, inf, bool, str, array
MARGINS = st.one_of(
    st.just(0.0),
    st.sampled_from([1.1754943508222875e-38, 9.9e-32, 2.2250738585072014e-308, 1.1e-292]),
    st.floats(1e-300, 1e-6),
    st.floats(1e-320, 2e-308, allow_subnormal=True),
    st.floats(1e-3, 50.0),
    st.floats(1e5, 1e300),
    st.floats(-1e300, -1e-300),
    st.sampled_from([math.nan, math.inf, -math.inf, True, False, "0.5", np.array([0.5])]),
)


def margin_is_valid(margin) -> bool:
    """The test's own rule for a tie's margin: a real number > 0, at least the working dtype's
    smallest normal number over its eps (so that a half margin over a noise sd of 1.5 is still
    normal) and at most its ``max_margin`` (a tie is observed)."""
    if isinstance(margin, bool | str | np.ndarray):
        return False
    info = np.finfo(DTYPE)
    return float(info.tiny) / float(info.eps) <= margin <= max_margin(DTYPE)


@pytest.mark.slow  # 3-10 s in the fast loop (many examples, EP compiles)
@PROPERTY
@given(margin=MARGINS)
def test_tie_margins_are_refused_or_fitted_right(margin):
    """One tie on two entities: a ``ValueError`` naming the margin, or EP's exact answer."""
    K = np.array([[1.3, 0.4], [0.4, 0.8]], DTYPE)
    tie = np.array([True])
    if not margin_is_valid(margin):
        with pytest.raises(ValueError, match="margin"):
            ep.fit(K, np.array([[0, 1]]), ties=tie, margin=margin)
        return
    post = ep.fit(K, np.array([[0, 1]]), ties=tie, margin=margin)
    assert np.isfinite(float(post.log_evidence))
    if X64 and margin < 1e-3:  # tiny: the reference's quadrature in float64
        v0 = float(K[0, 0] + K[1, 1] - 2 * K[0, 1])
        np.testing.assert_allclose(
            float(post.log_evidence), tie_reference(0.0, v0, margin)[0], rtol=1e-9
        )


#: The test's own bound on a grade (grades 0..K-1 need K - 1 thresholds): 2**16 levels.
LARGEST_GRADE = 2**16 - 1

#: grade / entity classes: whole int, whole float, fractional, 1e20, -1e20, negative, NaN, inf,
#: Python bool, out of range, str, the largest grade and one above it
GRADE_VALUES = st.one_of(
    st.integers(-2, 4),
    st.integers(0, 4).map(float),
    st.floats(0.1, 3.9).filter(lambda x: x != int(x)),
    st.sampled_from([1e20, -1e20, -1.0, math.nan, math.inf, True, False, 7, "1"]),
    st.sampled_from([LARGEST_GRADE, LARGEST_GRADE + 1, 1e12]),
)


def graded_reading(rows, n):
    """The test's own reading: the int rows, or None where a value is not a whole number
    (bool and str are not), an entity is outside ``[0, n)`` or a grade is negative."""
    out = []
    for entity, grade in rows:
        for v in (entity, grade):
            if isinstance(v, bool | str) or not math.isfinite(v) or v != int(v):
                return None
        if not (0 <= entity < n and 0 <= grade <= LARGEST_GRADE):
            return None
        out.append([int(entity), int(grade)])
    return out


@PROPERTY
@example(rows=[[True, 1]])
@example(rows=[[0, 1e20]])
@example(rows=[[0, 1e12]])
@given(rows=st.lists(st.tuples(GRADE_VALUES, GRADE_VALUES).map(list), min_size=1, max_size=3))
def test_graded_rows_are_refused_or_kept_exactly(rows):
    want = graded_reading(rows, 5)
    if want is None:
        with pytest.raises(ValueError, match="graded"):
            PreferenceProblem.create([[0, 1]], n=5, graded=rows)
        return
    got = PreferenceProblem.create([[0, 1]], n=5, graded=rows).graded
    assert got.dtype == np.int64
    assert got.tolist() == want


@pytest.mark.parametrize(
    ("graded", "match"),
    [
        ([[0, 1e12]], r"graded row 0: grade 1000000000000 is too large: above 65535"),
        ([[0, 1], [1, LARGEST_GRADE + 1]], r"graded row 1: grade 65536 is too large"),
    ],
)
def test_grades_too_many_for_their_thresholds_are_refused(graded, match):
    """Issue 49: a grade of 1e12 was taken, and the fit then asked for 1e12 thresholds ("Unable
    to allocate 7.28 TiB"); grades 0..65535 are the bound, and the largest is kept."""
    with pytest.raises(ValueError, match=match):
        PreferenceProblem.create([[0, 1]], n=3, graded=graded)
    kept = PreferenceProblem.create([[0, 1]], n=3, graded=[[2, LARGEST_GRADE]]).graded
    assert kept.tolist() == [[2, LARGEST_GRADE]]


def test_an_empty_graded_list_is_no_grades_as_empty_pairs_and_ties_are():
    """Issue 49: ``graded=[]`` was refused ("got float64 (0,)") while ``pairs=[]`` and
    ``ties=[]`` were taken."""
    problem = PreferenceProblem.create([], n=3, ties=[], graded=[], grade_weights=[])
    assert problem.graded.shape == (0, 2) and problem.graded.dtype == np.int64
    assert not problem.anchored and problem.ties.shape == (0, 2)


@pytest.mark.parametrize("build", ["from_grades", "from_ratings"])
@pytest.mark.parametrize(
    ("values", "index"),
    [
        ([True, False, True], 0),  # was read as grades 1, 0, 1 (ratings too)
        ([0, 2, True], 2),
        (np.array([True, False]), 0),
        (["1", "0"], 0),  # was parsed as numbers
        ([1, "0"], 1),
        ([1 + 0j, 0], 0),  # from_grades: TypeError from float()
        ([0, None], 1),
    ],
)
def test_grades_and_ratings_refuse_bools_strings_and_complex_naming_the_index(
    build, values, index
):
    """Issue 49: ``from_grades`` read bools as grades and parsed strings, and raised TypeError
    for a complex number; ``from_ratings`` read bools as ratings. Both name the entry now."""
    name = "grades" if build == "from_grades" else "ratings"
    with pytest.raises(ValueError, match=rf"{name}\[{index}\] = "):
        getattr(PreferenceProblem, build)(values)


#: per-entity value classes: whole int, whole float, fraction, NaN (no value), inf, negative,
#: huge (1e20, 1e300, one above the largest grade), the largest grade, bool, str, complex, None
VALUES = st.one_of(
    st.integers(0, 3),
    st.integers(0, 3).map(float),
    st.floats(0.1, 2.9).filter(lambda x: x != int(x)),
    st.sampled_from([math.nan, math.inf, -math.inf, -1, -2.0, 1e20, 1e300]),
    st.sampled_from([LARGEST_GRADE, LARGEST_GRADE + 1]),
    st.sampled_from([True, False, "1", "a", 1 + 0j, 2j, None]),
)


def _not_a_number(v) -> bool:
    return isinstance(v, bool | str | complex) or v is None


@PROPERTY
@given(values=st.lists(VALUES, min_size=1, max_size=4))
def test_from_grades_refuses_or_reads_every_grade_exactly(values):
    """The test's own reading: a grade per non-NaN entry, a whole number in [0, 65535]; any
    bool, str, complex or None is refused naming ``grades[i]`` of one of them."""
    wrong_type = [i for i, v in enumerate(values) if _not_a_number(v)]
    if wrong_type:
        with pytest.raises(ValueError, match=r"grades\[(\d+)\]") as error:
            PreferenceProblem.from_grades(values)
        assert int(error.value.args[0].split("grades[")[1].split("]")[0]) in wrong_type
        return
    graded = [(i, v) for i, v in enumerate(values) if not math.isnan(v)]
    if not all(math.isfinite(v) and v == int(v) and 0 <= v <= LARGEST_GRADE for _, v in graded):
        with pytest.raises(ValueError, match="grade"):
            PreferenceProblem.from_grades(values)
        return
    got = PreferenceProblem.from_grades(values)
    assert got.n == len(values) and got.graded.dtype == np.int64
    assert got.graded.tolist() == [[i, int(v)] for i, v in graded]


@PROPERTY
@given(values=st.lists(VALUES, min_size=1, max_size=4))
def test_from_ratings_refuses_or_gives_every_implied_pair(values):
    """The test's own reading: every two rated entities with different finite ratings give a
    pair, the higher first; inf, bool, str, complex and None are refused naming the entry."""
    wrong_type = [i for i, v in enumerate(values) if _not_a_number(v)]
    if wrong_type:
        with pytest.raises(ValueError, match=r"ratings\[(\d+)\]") as error:
            PreferenceProblem.from_ratings(values)
        assert int(error.value.args[0].split("ratings[")[1].split("]")[0]) in wrong_type
        return
    if any(math.isinf(v) for v in values):
        with pytest.raises(ValueError, match=r"ratings\[\d+\] = -?inf is not finite"):
            PreferenceProblem.from_ratings(values)
        return
    got = PreferenceProblem.from_ratings(values)
    rated = [i for i, v in enumerate(values) if not math.isnan(v)]
    want = {(i, j) for i in rated for j in rated if values[i] > values[j]}
    assert got.n == len(values)
    assert sorted(map(tuple, got.pairs.tolist())) == sorted(want)


# --- merged(): one row per distinct judgement, within the weight bound -----------------------


def _weight_bound(dtype) -> float:
    """The test's own reading of the largest weight a row may carry (EP's tolerance over eps)."""
    return {np.float64: 1e-6, np.float32: 1e-3}[dtype] / float(np.finfo(dtype).eps)


def test_merged_splits_a_total_above_the_weight_bound_into_rows_below_it():
    """Issue 49: merging two rows of weight 4e9 gave one of 8e9, above the bound, so the merged
    problem (which ``merged()`` promises fits the same) was refused at fit time naming
    ``weight[0]``, a weight the user never gave."""
    problem = PreferenceProblem.create([[0, 1], [0, 1]], n=3, weights=[4e9, 4e9])
    merged = problem.merged(np.float64)
    assert merged.pairs.tolist() == [[0, 1], [0, 1]] and merged.weights.tolist() == [4e9, 4e9]
    triple = PreferenceProblem.create([[1, 2]] * 3, n=3, weights=[4e9] * 3).merged(np.float64)
    assert triple.pairs.tolist() == [[1, 2]] * 3 and triple.weights.tolist() == [4e9] * 3


def test_merged_keeps_no_weights_when_nothing_repeats():
    """Issue 49: ``merged()`` of a problem without weights or repeats returned all-ones weights,
    and the engines that take pairs only (sparse, NUTS learning) refused it as weighted."""
    merged = PreferenceProblem.create([[0, 1], [1, 2]], n=3, ties=[[0, 2]]).merged()
    assert merged.weights is None and merged.tie_weights is None
    assert merged.pairs.tolist() == [[0, 1], [1, 2]]
    PreferenceProblem.create([[0, 1], [1, 2]], n=3).merged().require_pairs_only("the test")


#: weight classes of a row: 1, fractional, large, at the float64 bound, None (no weights at all)
ROW_WEIGHTS = st.sampled_from([1.0, 0.25, 3e3, 9e3, 4e9, _weight_bound(np.float64)])


@PROPERTY
@given(
    rows=st.lists(st.sampled_from([(0, 1), (1, 0), (1, 2), (2, 1)]), min_size=1, max_size=5),
    weights=st.one_of(st.none(), st.lists(ROW_WEIGHTS, min_size=5, max_size=5)),
    dtype=st.sampled_from([np.float64, np.float32]),
)
def test_merged_keeps_each_pairs_total_weight_within_the_bound(rows, weights, dtype):
    """The test's own sums per directed pair: the merged rows of a pair carry its total (to
    round-off), each at most the bound of ``dtype`` where every row given was, and no more rows
    than given; no weights when none were given and no row repeats. Classes: repeats or not,
    weights or none, totals below or above the float32 and float64 bounds, a row given above
    the float32 bound."""
    given_weights = None if weights is None else weights[: len(rows)]
    if given_weights is not None and max(given_weights) > _weight_bound(np.float64):
        return
    problem = PreferenceProblem.create(rows, n=3, weights=given_weights)
    want: dict = {}
    for row, w in zip(rows, given_weights or [1.0] * len(rows), strict=True):
        want[row] = want.get(row, 0.0) + w
    merged = problem.merged(dtype)
    if given_weights is None and len(set(rows)) == len(rows):
        assert merged.weights is None
        assert sorted(map(tuple, merged.pairs.tolist())) == sorted(rows)
        return
    fits = given_weights is None or max(given_weights) <= _weight_bound(dtype)
    assert len(merged.pairs) <= len(rows)
    got: dict = {}
    for row, w in zip(map(tuple, merged.pairs.tolist()), merged.weights.tolist(), strict=True):
        assert 0 < w and (w <= _weight_bound(dtype) or not fits)
        got.setdefault(row, []).append(w)
    assert got.keys() == want.keys()
    for row, total in want.items():  # fsum: a total split in 1e6 parts is summed exactly
        assert math.isclose(math.fsum(got[row]), total, rel_tol=1e-14)


#: weight classes: 0, tiny, moderate, near and above the bound, negative, NaN, inf, bool, str
WEIGHTS = st.one_of(
    st.just(0.0),
    st.floats(1e-300, 1e-3),
    st.floats(0.5, 1e3),
    st.floats(1e9, 4.4e9),
    st.floats(5e9, 1e300),
    st.floats(-1e300, -1e-300),
    st.sampled_from([math.nan, math.inf, -math.inf, True, "2"]),
)


def weight_is_valid(w) -> bool:
    """The test's own rule: a real number > 0, at most float64's bound (4.5e9)."""
    return not isinstance(w, bool | str) and 0 < w <= 1e-6 / np.finfo(np.float64).eps


@PROPERTY
@given(weights=st.lists(WEIGHTS, min_size=2, max_size=2))
def test_weights_are_refused_or_kept_exactly(weights):
    bad = [str(k) for k, w in enumerate(weights) if not weight_is_valid(w)]
    if bad:
        with pytest.raises(ValueError, match=rf"weights(\[({'|'.join(bad)})\]| must be)"):
            PreferenceProblem.create([[0, 1], [1, 2]], n=3, weights=weights)
        return
    got = PreferenceProblem.create([[0, 1], [1, 2]], n=3, weights=weights).weights
    assert got.tolist() == [float(w) for w in weights]
