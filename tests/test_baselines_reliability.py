"""The baselines and the evaluate command on the inputs a fuzz run broke: every option checked
(ValueError naming it), features at extreme scales (the problem's own answer, or a flag), query
ids of mixed types, feature matrices without columns, and labels whose NDCG gain overflows.

References share no code with the implementation: scipy's minimiser of the pairwise loss, closed
forms, exact rational arithmetic, Python's strict JSON parser, and the estimator itself only where
the identity it checks (``X s`` with ``C`` is ``X`` with ``C s^2``) is the point.
"""

import json
import math
import warnings
from fractions import Fraction

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.optimize import minimize

from bayesrank.baselines import RankBoost, RankSVM, rankboost, ranksvm
from bayesrank.baselines._data import pairs_within_queries, query_codes
from bayesrank.cli import _json, main
from bayesrank.metrics import check_gain_labels, letor_metrics, ndcg_at

pytestmark = pytest.mark.float32  # dtype-aware: also run with x64 off in CI

needs_x64 = pytest.mark.skipif(not jax.config.jax_enable_x64, reason="float64 scales")


def problem(seed=11, noise=0.8):
    """36 documents, 5 features, 3 queries of 12; ``noise > 0``: no ``w`` orders every pair."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(36, 5))
    qid = np.repeat([4, 9, 2], 12)
    y = (X @ rng.normal(size=5) + noise * rng.normal(size=36) > 0).astype(int) + (X[:, 0] > 1)
    return X, y, qid


def quiet_fit(model, X, y, qid):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        return model.fit(X, y, qid)


def pair_signs(scores, pairs):
    return np.sign(scores[pairs[:, 0]] - scores[pairs[:, 1]])


# -- options ------------------------------------------------------------------------------------

BAD_OPTIONS = [
    (RankBoost, "smoothing", 0),
    (RankBoost, "smoothing", 0.0),
    (RankBoost, "smoothing", -1.0),
    (RankBoost, "smoothing", float("nan")),
    (RankBoost, "smoothing", float("inf")),
    (RankBoost, "smoothing", "1e-12"),
    (RankBoost, "n_rounds", -3),
    (RankBoost, "n_rounds", True),
    (RankBoost, "n_rounds", 5.0),
    (RankBoost, "n_thresholds", 0),
    (RankBoost, "threshold_method", "median"),
    (RankBoost, "temperature", float("nan")),
    (RankBoost, "temperature", float("-inf")),
    (RankBoost, "complements", 1),
    (RankSVM, "C", -1.0),
    (RankSVM, "C", None),
    (RankSVM, "C", 1e400),
    (RankSVM, "tol", 1.0),
    (RankSVM, "tol", -1e-9),
    (RankSVM, "tol", float("nan")),
    (RankSVM, "max_iter", -1),
    (RankSVM, "max_iter", False),
    (RankSVM, "smoothing", 2.0),
    (RankSVM, "smoothing", float("-inf")),
    (RankSVM, "gamma", 0.0),
    (RankSVM, "gamma", float("inf")),
    (RankSVM, "loss", None),
    (RankSVM, "kernel", "linear "),
]


@pytest.mark.parametrize(("make", "option", "value"), BAD_OPTIONS)
def test_each_bad_option_is_a_value_error_naming_option_and_value(make, option, value):
    X, y, qid = problem()
    shown = "nan" if isinstance(value, float) and math.isnan(value) else repr(value)
    if value == 1e400:
        shown = "inf"
    with pytest.raises(ValueError, match=rf"^{option} must be .*got {shown}"):
        make(**{option: value}).fit(X, y, qid)


def test_options_too_small_for_the_working_dtype_are_refused():
    """A positive smoothing below the smallest normal number would make 1 / smoothing inf."""
    X, y, qid = problem()
    tiny = np.finfo(jnp.result_type(float)).tiny
    for model in (RankBoost(smoothing=tiny / 4), RankSVM(loss="hinge", smoothing=tiny / 4)):
        with pytest.raises(ValueError, match=r"^smoothing = .* is below the smallest normal"):
            model.fit(X, y, qid)


def test_the_functional_cores_check_their_concrete_options():
    X, y, qid = problem()
    pairs = pairs_within_queries(y, qid)
    thresholds = rankboost.candidate_thresholds(X, 5)
    with pytest.raises(ValueError, match=r"^smoothing must be > 0.0, got 0"):
        rankboost.fit(X, pairs, thresholds, 3, smoothing=0)
    with pytest.raises(ValueError, match=r"^n_rounds must be a positive integer, got 0"):
        rankboost.fit(X, pairs, thresholds, 0)
    with pytest.raises(ValueError, match=r"^C must be > 0.0, got 0.0"):
        ranksvm.fit_linear(X, pairs, 0.0)
    with pytest.raises(ValueError, match=r"^smoothing must be .*got 5.0"):
        ranksvm.fit_linear(X, pairs, 1.0, loss="hinge", smoothing=5.0)
    with pytest.raises(ValueError, match=r"^max_iter must be a positive integer, got 0"):
        ranksvm.fit_kernel(X @ X.T, pairs, 1.0, max_iter=0)


FLOATS = st.one_of(
    st.sampled_from([0.0, -0.0, -1.0, 1e-320, 1e-300, 1e-30, 1.0, 1e30, 1e300, 1.7e308]),
    st.sampled_from([float("nan"), float("inf"), float("-inf")]),
    st.floats(allow_nan=True, allow_infinity=True),
)
FLOAT_OPTIONS = [
    (RankSVM, "C", {}),
    (RankSVM, "tol", {}),
    (RankSVM, "smoothing", {"loss": "hinge"}),
    (RankSVM, "gamma", {"kernel": "rbf"}),
    (RankBoost, "smoothing", {"n_rounds": 4}),
    (RankBoost, "temperature", {"n_rounds": 4}),
]


@pytest.mark.slow
@settings(max_examples=50, deadline=None)
@given(which=st.sampled_from(range(len(FLOAT_OPTIONS))), value=FLOATS)
def test_any_float_option_is_refused_by_name_or_gives_finite_weights(which, value):
    make, option, fixed = FLOAT_OPTIONS[which]
    X, y, qid = problem()
    try:
        model = quiet_fit(make(**fixed, **{option: value}), X, y, qid)
    except ValueError as err:
        assert str(err).startswith(option), str(err)
        return
    weights = {
        RankSVM: lambda m: m.coef_ if m.kernel == "linear" else m.dual_coef_,
        RankBoost: lambda m: m.alphas_,
    }[make](model)
    assert np.all(np.isfinite(weights))
    assert np.all(np.isfinite(model.predict(X)))
    if make is RankSVM and not model.converged_:  # a flag, never a silent failure
        with pytest.warns(RuntimeWarning, match="RankSVM did not converge"):
            make(**fixed, **{option: value}).fit(X, y, qid)


# -- features at extreme scales ------------------------------------------------------------------


def unregularised_squared_hinge(A):
    """argmin_v sum_p max(0, 1 - A_p v)^2 by scipy (unique when no v orders every pair)."""

    def f(v):
        r = np.maximum(0.0, 1.0 - A @ v)
        return r @ r, -2.0 * A.T @ r

    res = minimize(f, np.zeros(A.shape[1]), jac=True, method="BFGS", options={"gtol": 1e-12})
    return res.x


@needs_x64
@pytest.mark.parametrize("scale", [2.0**700, 1e150, 1e200, 1e300])
def test_huge_features_give_the_hard_margin_limit_not_zero(scale):
    """At ``X s`` the regulariser weighs ``1 / (C s^2)``: ~0, so the answer is the minimiser of
    the loss alone, ``w = v / s``; the scores ``(X s) w = X v`` are those of scipy's ``v``."""
    X, y, qid = problem()
    model = quiet_fit(RankSVM(), X * scale, y, qid)
    A = X[model.pairs_[:, 0]] - X[model.pairs_[:, 1]]
    v = unregularised_squared_hinge(A)
    scores = model.predict(X * scale)
    assert np.all(np.isfinite(model.coef_)) and np.any(model.coef_ != 0)
    np.testing.assert_allclose(model.coef_ * scale, v, rtol=1e-6)
    np.testing.assert_allclose(scores, X @ v, rtol=1e-6, atol=1e-9)
    assert np.all(pair_signs(scores, model.pairs_) == pair_signs(X @ v, model.pairs_))
    # C s^2 beyond float64 (s > ~1e154): the regulariser cannot be represented; said so
    if scale * scale * 1.0 == math.inf:
        with pytest.warns(RuntimeWarning, match=r"overflowed in float64: the regulariser"):
            flagged = RankSVM().fit(X * scale, y, qid)
        assert not flagged.converged_
    else:
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            assert RankSVM().fit(X * scale, y, qid).converged_


@needs_x64
@pytest.mark.parametrize("loss", ["squared_hinge", "hinge"])
@pytest.mark.parametrize("scale", [2.0**-40, 1e-7, 2.0**30, 1e40])
def test_scaled_features_are_the_problem_with_C_times_scale_squared(scale, loss):
    """``J(w; X s, C) = J(s w; X, C s^2) / s^2``: the scores agree and ``w`` differs by ``s``."""
    X, y, qid = problem(noise=0.0)
    C = 0.5
    scaled = quiet_fit(RankSVM(C=C, loss=loss), X * scale, y, qid)
    plain = quiet_fit(RankSVM(C=C * scale**2, loss=loss), X, y, qid)
    assert scaled.converged_ == plain.converged_
    np.testing.assert_allclose(scaled.coef_ * scale, plain.coef_, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(scaled.predict(X * scale), plain.predict(X), rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(scaled.objective_ * scale**2, plain.objective_, rtol=1e-9)


@needs_x64
@pytest.mark.parametrize(("scale", "converged"), [(1e-150, True), (1e-200, False)])
def test_tiny_features_give_the_closed_form_limit(scale, converged):
    """``C s^2 -> 0``: the margins vanish and ``w -> C sum_p l'(1) dx_p = 2 C sum_p dx_p``
    (squared hinge). At 1e-150 the scores (~1e-300) are representable; at 1e-200 they underflow
    and the fit says so, though ``coef_`` (~1e-200) is still the right one."""
    X, y, qid = problem()
    Xs = X * scale
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model = RankSVM(C=0.3).fit(Xs, y, qid)
    A = Xs[model.pairs_[:, 0]] - Xs[model.pairs_[:, 1]]
    np.testing.assert_allclose(model.coef_, 2 * 0.3 * A.sum(0), rtol=1e-9)
    assert model.converged_ is converged
    if converged:
        assert not caught
        ref = X @ A.sum(0)
        assert np.all(pair_signs(model.predict(Xs), model.pairs_) == pair_signs(ref, model.pairs_))
    else:
        assert "tie on every training pair" in str(caught[0].message)


@pytest.mark.slow
@needs_x64
@pytest.mark.parametrize("scale", [1e150, 1e200, 1e300])
def test_rbf_at_huge_scales_is_the_identity_kernel_not_nan(scale):
    """``gamma ||x - x'||^2`` overflows: ``K = I``, whose kernel RankSVM is the linear one on
    the identity features (``f = beta``)."""
    X, y, qid = problem()
    K = np.asarray(ranksvm.rbf_kernel(X * scale, X * scale, 0.2))
    np.testing.assert_array_equal(K, np.eye(len(X)))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        model = RankSVM(kernel="rbf").fit(X * scale, y, qid)
    ref = RankSVM().fit(np.eye(len(X)), y, qid)
    assert model.converged_
    np.testing.assert_allclose(model.dual_coef_, ref.coef_, atol=1e-9)
    np.testing.assert_allclose(model.predict(X * scale), ref.coef_, atol=1e-9)


def test_rbf_kernel_is_invariant_to_a_power_of_two_scale():
    X, _, _ = problem()
    K = ranksvm.rbf_kernel(X, X[:7], 0.3)
    for k in (-20, 3, 40):
        s = 2.0**k
        np.testing.assert_array_equal(ranksvm.rbf_kernel(X * s, X[:7] * s, 0.3 / s**2), K)


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
@pytest.mark.parametrize("make", [RankSVM, RankBoost])
def test_non_finite_features_name_the_index(make, bad):
    X, y, qid = problem()
    Xb = X.copy()
    Xb[5, 3] = bad
    with pytest.raises(ValueError, match=r"X\[5, 3\] = .* is not finite"):
        make().fit(Xb, y, qid)
    model = quiet_fit(make(**({"n_rounds": 4} if make is RankBoost else {})), X, y, qid)
    with pytest.raises(ValueError, match=r"X\[5, 3\] = .* is not finite"):
        model.predict(Xb)


@needs_x64
def test_rankboost_candidates_of_a_feature_spanning_more_than_float64():
    X, y, qid = problem()
    Xh = X.copy()
    Xh[0, 0], Xh[1, 0] = 1.7e308, -1.7e308
    for method in ("uniform", "quantile"):
        cand = rankboost.candidate_thresholds(Xh, 5, method)
        first = cand[0][np.isfinite(cand[0])]
        assert len(first) == 5 and first[0] == -1.7e308 and first[-1] == 1.7e308
        assert np.all(np.diff(first) > 0)
        model = RankBoost(n_rounds=6, threshold_method=method).fit(Xh, y, qid)
        assert np.all(np.isfinite(model.alphas_)) and np.all(np.isfinite(model.predict(Xh)))


# -- query ids and shapes ------------------------------------------------------------------------


@pytest.mark.slow  # 3 s or more in the fast loop
def test_mixed_query_ids_are_categories_one_and_the_string_one_differ():
    X, y, _ = problem()
    ids = ["a", 1, "1", 2.0] * 9  # 1 and "1" are two queries; 2.0 and 2 would be one
    codes = [{"a": 0, 1: 1, "1": 2, 2.0: 3}[q] for q in ids]
    pairs = pairs_within_queries(y, query_codes(ids))
    ref = [
        (i, j)
        for g in range(4)
        for i in range(36)
        for j in range(36)
        if codes[i] == codes[j] == g and y[i] > y[j]
    ]
    assert sorted(map(tuple, pairs)) == sorted(ref)
    for make in (RankSVM, RankBoost):
        model = quiet_fit(make(), X, y, ids)
        assert sorted(map(tuple, model.pairs_)) == sorted(ref)
        assert 0.0 <= model.score(X, y, ids) <= 1.0
        assert model.score(X, y, ids) == model.score(X, y, np.asarray(codes))
    obj = np.array(ids, dtype=object)
    np.testing.assert_array_equal(query_codes(obj), codes)


@pytest.mark.parametrize(
    ("qid", "match"),
    [
        ([1] * 35 + [None], r"qid\[35\] = None is not a query id"),
        ([1.0] * 3 + [float("nan")] * 33, r"qid\[3\] = nan is not a query id"),
        ([[1]] * 18 + [[2, 3]] * 18, r"qid\[0\] = \[1\] is not hashable"),
        ([1] * 35, r"qid has shape \(35,\), expected \(36,\)"),
    ],
)
def test_bad_query_ids_are_value_errors_naming_the_index(qid, match):
    X, y, _ = problem()
    for make in (RankSVM, RankBoost):
        with pytest.raises(ValueError, match=match):
            make().fit(X, y, qid)


@pytest.mark.parametrize(
    "call",
    [
        lambda X, y, q: RankSVM().fit(X, y, q),
        lambda X, y, q: RankSVM(kernel="rbf").fit(X, y, q),
        lambda X, y, q: RankBoost().fit(X, y, q),
        lambda X, y, q: rankboost.candidate_thresholds(X),
        lambda X, y, q: RankSVM().score(X, y, q),
        lambda X, y, q: ranksvm.fit_linear(X, pairs_within_queries(y, q), 1.0),
        lambda X, y, q: rankboost.fit(X, pairs_within_queries(y, q), np.zeros((0, 3)), 2),
    ],
)
def test_feature_matrices_without_columns_name_the_shape(call):
    _, y, qid = problem()
    with pytest.raises(ValueError, match=r"X has shape \(36, 0\)"):
        call(np.zeros((36, 0)), y, qid)


# -- labels whose NDCG gain overflows, and strict JSON --------------------------------------------


def exact_ndcg(labels, order, k):
    """NDCG@k in exact rationals (LETOR discounts as floats only at the end)."""
    gains = [2 ** int(label) - 1 for label in labels]
    disc = [1.0 if p < 2 else 1 / math.log2(p + 1) for p in range(len(labels))]
    ideal = sorted(gains, reverse=True)
    dcg = sum(Fraction(gains[i]) * Fraction(disc[p]) for p, i in enumerate(order[:k]))
    idcg = sum(Fraction(g) * Fraction(disc[p]) for p, g in enumerate(ideal[:k]))
    return float(dcg / idcg)


def test_gain_labels_beyond_float64_are_refused_naming_index_and_value():
    scores = np.array([3.0, 2.0, 1.0, 0.0])
    for f in (lambda lab: ndcg_at(scores, lab, 2), lambda lab: letor_metrics(scores, lab)):
        with pytest.raises(ValueError, match=r"labels\[2\] = 1024.0: its NDCG gain"):
            f(np.array([0, 3, 1024, 1]))
        with pytest.raises(ValueError, match=r"labels\[0\] = inf"):
            f(np.array([np.inf, 3, 1, 1]))
        with pytest.raises(ValueError, match=r"labels\[3\] = -inf"):
            f(np.array([0.0, 3, 1, -np.inf]))
    check_gain_labels([1, 5000], mask=[True, False])  # padding is not checked


@needs_x64
def test_large_gains_stay_finite_and_exact_under_jit():
    """Traced labels cannot be checked; their gains (and sums) must still not overflow."""
    labels = np.array([1023, 0, 1023, 1000, 5])
    scores = np.array([0.1, 0.9, 0.3, 0.5, 0.0])
    order = list(np.argsort(-scores, kind="stable"))
    got = jax.jit(ndcg_at, static_argnames="k")(scores, labels, k=4)
    assert got == pytest.approx(exact_ndcg(labels, order, 4), rel=1e-12)


def write(tmp_path, labels):
    data = tmp_path / "data.txt"
    data.write_text("".join(f"{lab} qid:{1 + i // 3} 1:{i}\n" for i, lab in enumerate(labels)))
    pred = tmp_path / "pred.txt"
    pred.write_text("".join(f"{s}\n" for s in range(len(labels))))
    return str(data), str(pred)


def strict_json(text):
    def refuse(constant):
        raise AssertionError(f"{constant} is not JSON")

    return json.loads(text, parse_constant=refuse)


def test_evaluate_refuses_overflowing_labels_and_prints_no_nan(tmp_path, capsys):
    data, pred = write(tmp_path, [0, 2000, 1, 0, 1, 2])
    assert main(["evaluate", data, pred, "--json", "--max-k", "2"]) == 2
    out, err = capsys.readouterr()
    assert out == "" and "NaN" not in err
    assert "query 1: labels[1] = 2000.0: its NDCG gain 2**label - 1 is not finite" in err


def test_evaluate_json_is_strict_for_the_largest_finite_gains(tmp_path, capsys):
    data, pred = write(tmp_path, [0, 1023, 1023, 0, 1, 2])
    assert main(["evaluate", data, pred, "--json", "--max-k", "3"]) == 0
    result = strict_json(capsys.readouterr().out)
    # query 1 ranked by score: labels 1023, 1023, 0 (the ideal order)
    assert result["per_query"][0]["NDCG@3"] == pytest.approx(1.0, abs=1e-12)


def test_the_json_writer_names_a_non_finite_number_instead_of_writing_nan():
    with pytest.raises(ValueError, match=r"\['per_query'\]\[1\]\['MAP'\] is not a finite"):
        _json({"MAP": 0.5, "per_query": [{"MAP": 1.0}, {"MAP": float("nan")}]})
    assert strict_json(_json({"a": [1.0, 2, "x"]})) == {"a": [1.0, 2, "x"]}


# ---------------------------------------------------------------------------------------------
# Seeds (issue 49): SortNet(random_state=2**64).fit raised JAX's OverflowError (jax.random.key
# holds an int64); ConstraintClassification's perceptron likewise. The test's reading: a seed is
# a Python or NumPy integer, not a bool, in [0, 2**63 - 1].
SEED_CLASSES = {
    "zero": [0],
    "ordinary": [7, np.int64(12), np.uint8(3)],
    "largest": [2**63 - 1, np.uint64(2**63 - 1)],
    "past int64": [2**63, np.uint64(2**64 - 1), 2**64, 2**200],
    "negative": [-1, np.int32(-5)],
    "float": [3.0, 1.5, math.nan],
    "bool": [True, np.True_],
    "other": ["3", None, [1]],
}
SEEDS = [v for vs in SEED_CLASSES.values() for v in vs]


def _valid_seed(v) -> bool:
    integer = isinstance(v, int | np.integer) and not isinstance(v, bool | np.bool_)
    return integer and 0 <= int(v) <= 2**63 - 1


def _seeded_estimators(seed):
    from bayesrank.baselines import SortNet
    from bayesrank.label_ranking import ConstraintClassification

    return [
        (SortNet(max_iter=1, n_steps=1, random_state=seed), lambda m: m.fit("X", [0, 1])),
        (ConstraintClassification(loss="perceptron", random_state=seed),
         lambda m: m.fit(np.zeros((2, 1)), None)),
        (ConstraintClassification(random_state=seed), lambda m: m.fit(np.zeros((2, 1)), None)),
    ]  # fmt: skip


@pytest.mark.parametrize("seed", SEEDS, ids=[repr(v) for v in SEEDS])
def test_a_seed_is_an_integer_jax_takes_or_refused_by_name(seed):
    """Every seeded estimator: an invalid seed is a ValueError naming random_state and the
    value; a valid one passes to the next check (bad data given on purpose, so nothing fits
    or compiles), whose message names the data instead."""
    for model, fit in _seeded_estimators(seed):
        with pytest.raises(ValueError) as caught:
            fit(model)
        message = str(caught.value)
        if _valid_seed(seed):
            assert "random_state" not in message, (model, message)
        else:
            assert "random_state" in message, (model, message)


def test_sortnet_seed_past_int64_is_refused_before_fitting():
    """Issue 49, the probe itself: OverflowError from jax.random.key."""
    from bayesrank.baselines import SortNet

    X = np.random.default_rng(0).normal(size=(6, 2))
    with pytest.raises(ValueError, match=r"random_state must be an integer in \[0, "):
        SortNet(max_iter=1, n_steps=1, random_state=2**64).fit(X, [0, 1, 2, 1, 0, 1])
