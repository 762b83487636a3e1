"""The baselines' estimators under the jit policy: compilations counted (not timed), padded
against unpadded answers, the scikit-learn face, option checks, and honest convergence on input
that float64 cannot solve."""

import contextlib
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from bayesrank.baselines import RankBoost, RankSVM, rankboost, ranksvm
from bayesrank.baselines._arrays import cast_checked
from bayesrank.baselines._estimator import pairwise_accuracy
from bayesrank.data.batch import bucket_size

needs_x64 = pytest.mark.skipif(not jax.config.jax_enable_x64, reason="float64 references")

COMPILE_EVENT = "/jax/core/compile/backend_compile_duration"
fit_linear = jax.jit(ranksvm.fit_linear, static_argnames=("loss", "smoothing"))
fit_kernel = jax.jit(ranksvm.fit_kernel, static_argnames=("loss", "smoothing"))
boost_fit = jax.jit(rankboost.fit, static_argnames=("n_rounds",))


@contextlib.contextmanager
def count_compiles():
    """Yields a list that gets one entry per XLA compilation inside the block."""
    events = []

    def listener(name, secs, **kwargs):
        if name == COMPILE_EVENT:
            events.append(secs)

    jax.monitoring.register_event_duration_secs_listener(listener)
    try:
        yield events
    finally:
        jax.monitoring.unregister_event_duration_listener(listener)


def problem(seed=3, n_queries=3, per_query=12, d=5):
    """Documents of several queries and their grades; the tests share seed 3's shapes, hence
    its compiled programs."""
    rng = np.random.default_rng(seed)
    n = n_queries * per_query
    X = rng.normal(size=(n, d))
    qid = np.repeat(np.arange(n_queries) * 7 + 1, per_query)
    y = (X @ rng.normal(size=d) + 0.5 * rng.normal(size=n) > 0).astype(int) + (X[:, 0] > 1)
    return X, y, qid


def n_pairs(y, qid):
    return sum(int(np.sum(y[qid == q][:, None] > y[qid == q][None, :])) for q in np.unique(qid))


def subset_in_same_buckets(X, y, qid):
    """Drop one document such that the documents and the pairs stay in their buckets."""
    n, m = len(X), n_pairs(y, qid)
    for r in range(n):
        keep = np.arange(n) != r
        if (
            bucket_size(n - 1) == bucket_size(n)
            and bucket_size(n_pairs(y[keep], qid[keep])) == bucket_size(m)
            and n_pairs(y[keep], qid[keep]) != m
        ):
            return X[keep], y[keep], qid[keep]
    raise AssertionError("no such subset")


def test_the_compile_event_is_counted():
    with count_compiles() as events:
        jax.jit(lambda x: jnp.sin(x) * 3.0)(np.arange(3.0)).block_until_ready()
    assert len(events) >= 1


ESTIMATORS = {
    "ranksvm": (lambda: RankSVM(C=0.5), {"C": 0.3, "tol": 1e-6}),
    "ranksvm-hinge": (lambda: RankSVM(loss="hinge"), {"smoothing": 3e-4, "C": 2.0}),
    "ranksvm-rbf-hinge": (
        lambda: RankSVM(kernel="rbf", loss="hinge", C=0.5),
        {"gamma": 0.05, "C": 2.0, "smoothing": 2e-3},
    ),
    "rankboost": (
        lambda: RankBoost(n_rounds=20, n_thresholds=5),
        {"smoothing": 1e-9, "threshold_method": "quantile"},
    ),
    "rankboost-smooth": (
        lambda: RankBoost(n_rounds=20, n_thresholds=5, temperature=0.1),
        {"temperature": 0.3},
    ),
}


@pytest.mark.parametrize("name", list(ESTIMATORS))
@pytest.mark.slow
def test_refits_of_similar_size_and_new_floats_compile_nothing(name):
    make, other_settings = ESTIMATORS[name]
    X, y, qid = problem()
    Xs, ys, qs = subset_in_same_buckets(X, y, qid)
    first = make().fit(X, y, qid)
    first.predict(X)
    with count_compiles() as events:
        again = make().fit(X, y, qid)  # the same shapes
        np.testing.assert_array_equal(again.predict(X), first.predict(X))
        make().fit(Xs, ys, qs).predict(Xs[:-2])  # other sizes within the buckets
        make().set_params(**other_settings).fit(Xs, ys, qs).predict(X)  # other floats
    assert events == [], f"{len(events)} compilations"


@needs_x64
@pytest.mark.slow
def test_padded_problems_give_the_unpadded_answer():
    """The estimators pad documents and pairs (and trace C, tol, smoothing, gamma); the cores
    here get the unpadded problem with Python floats."""
    X, y, qid = problem()  # (the squared hinge: test_ranksvm's estimator test)
    est = RankSVM(C=0.7, loss="hinge", smoothing=1e-4).fit(X, y, qid)
    core = fit_linear(X, est.pairs_, 0.7, loss="hinge", smoothing=1e-4)
    np.testing.assert_allclose(est.coef_, core.w, rtol=1e-10, atol=1e-12)
    assert est.n_iter_ == int(core.info.n_iter) and est.converged_
    rbf = RankSVM(C=0.7, kernel="rbf", gamma=0.2, loss="hinge", smoothing=1e-4).fit(X, y, qid)
    K = ranksvm.rbf_kernel(X, X, 0.2)
    ref = fit_kernel(K, rbf.pairs_, 0.7, loss="hinge", smoothing=1e-4)
    np.testing.assert_allclose(rbf.dual_coef_, ref.beta, rtol=1e-10, atol=1e-12)
    assert rbf.n_iter_ == int(ref.info.n_iter) and rbf.converged_


@pytest.mark.slow  # 3 s or more in the fast loop
@needs_x64
def test_rankboost_padding_of_documents_pairs_and_candidates_changes_no_round():
    X, y, qid = problem()
    est = RankBoost(n_rounds=20, n_thresholds=None).fit(X, y, qid)  # 36 candidates, padded to 40
    assert est.candidates_.shape == (5, 36)
    model, info = boost_fit(X, est.pairs_, est.candidates_, n_rounds=20)  # unpadded
    np.testing.assert_array_equal(est.features_, model.features)
    np.testing.assert_array_equal(est.thresholds_, model.thresholds)
    np.testing.assert_array_equal(est.signs_, model.signs)
    np.testing.assert_allclose(est.alphas_, model.alphas, rtol=1e-10)
    np.testing.assert_allclose(est.info_.loss, info.loss, rtol=1e-10)


@pytest.mark.slow  # 3 s or more in the fast loop
def test_estimator_face_repr_params_and_score():
    assert repr(RankSVM()) == "RankSVM()"
    assert repr(RankSVM(C=0.1, kernel="rbf")) == "RankSVM(C=0.1, kernel='rbf')"
    assert repr(RankBoost(n_rounds=50, complements=False)) == (
        "RankBoost(n_rounds=50, complements=False)"
    )
    est = RankSVM(C=2)  # an int equal in value is not shown as changed
    assert repr(est) == "RankSVM(C=2)" and est.get_params()["C"] == 2
    assert est.set_params(C=1.0, loss="hinge") is est and repr(est) == "RankSVM(loss='hinge')"
    with pytest.raises(ValueError, match="unknown parameter 'alpha'"):
        RankBoost().set_params(alpha=1)
    X, y, qid = problem()
    for model in (RankSVM(C=0.5), RankBoost(n_rounds=20, n_thresholds=5)):
        assert model.fit(X, y, qid) is model
        assert sorted(k for k in vars(model) if not k.endswith("_")) == sorted(model.get_params())
        assert 0.8 < model.score(X, y, qid) <= 1.0


def test_pairwise_accuracy_by_hand():
    qid = np.array([1, 1, 2, 2, 2])
    y = np.array([1, 0, 2, 1, 0])  # query 1: one pair; query 2: three pairs
    assert pairwise_accuracy(y, y, qid) == 1.0
    assert pairwise_accuracy(-y, y, qid) == 0.0
    assert pairwise_accuracy(np.zeros(5), y, qid) == 0.5  # ties count 1/2
    # query 1 right; query 2: rows (2, 3) wrong, (2, 4) wrong, (3, 4) a tie -> 0.5 / 3
    scores = np.array([1.0, 0.0, 1.0, 2.0, 2.0])
    assert pairwise_accuracy(scores, y, qid) == pytest.approx((1.0 + 0.5 / 3) / 2)


@pytest.mark.parametrize(
    ("make", "option", "value"),
    [
        (RankSVM, "C", 0.0),
        (RankSVM, "C", float("nan")),
        (RankSVM, "C", float("inf")),
        (RankSVM, "kernel", "poly"),
        (RankSVM, "gamma", -1.0),
        (RankSVM, "loss", "logistic"),
        (RankSVM, "tol", 0.0),
        (RankSVM, "max_iter", 0),
        (RankSVM, "max_iter", 2.5),
        (RankSVM, "smoothing", 0.0),
        (RankBoost, "n_rounds", 0),
        (RankBoost, "n_rounds", 2.5),
        (RankBoost, "n_thresholds", 0),
        (RankBoost, "threshold_method", "random"),
        (RankBoost, "temperature", -0.5),
        (RankBoost, "smoothing", 0.0),
        (RankBoost, "smoothing", -1e-12),
        (RankBoost, "complements", "yes"),
    ],
)
def test_every_option_is_checked_naming_option_and_value(make, option, value):
    X, y, qid = problem(5, n_queries=2, per_query=4)
    with pytest.raises(ValueError, match=rf"^{option} must be .*got {value!r}"):
        make(**{option: value}).fit(X, y, qid)


def test_unfitted_and_bad_predict_arguments():
    X, y, qid = problem()
    with pytest.raises(ValueError, match="RankBoost is not fitted"):
        RankBoost().predict(X)
    with pytest.raises(ValueError, match="n_rounds must be None or an integer >= 0"):
        RankBoost(n_rounds=20, n_thresholds=5).fit(X, y, qid).predict(X, n_rounds=-1)


def test_values_the_working_dtype_cannot_hold_are_refused():
    with pytest.raises(ValueError, match=r"X\[1, 0\] = 1e\+200 overflows in float32"):
        cast_checked(np.array([[1.0], [1e200]]), np.float32)
    with pytest.raises(ValueError, match=r"X\[0, 1\] = 1e-200 underflows to 0 in float32"):
        cast_checked(np.array([[1.0, 1e-200]]), np.float32)


@needs_x64
@pytest.mark.parametrize("loss", ["squared_hinge", "hinge"])
def test_overflowing_features_are_not_reported_converged(loss):
    """The Newton matrix overflows (status NONFINITE); the solver keeps its last finite iterate."""
    X, y, qid = problem()
    with pytest.warns(RuntimeWarning, match="overflowed in float64"):
        est = RankSVM(loss=loss).fit(X * 1e200, y, qid)
    assert not est.converged_ and np.all(np.isfinite(est.coef_)) and np.isfinite(est.objective_)


@pytest.mark.slow  # 3 s or more in the fast loop
@needs_x64
@pytest.mark.parametrize(("kernel", "loss"), [("linear", "squared_hinge"), ("rbf", "hinge")])
def test_scores_that_underflow_are_not_reported_converged(kernel, loss):
    """Linear: X w underflows; rbf: K = 1 everywhere, no pair can be separated."""
    X, y, qid = problem()
    with pytest.warns(RuntimeWarning, match="tie on every training pair"):
        est = RankSVM(kernel=kernel, loss=loss).fit(X * 1e-200, y, qid)
    assert not est.converged_
    assert len(np.unique(est.predict(X * 1e-200))) == 1  # a constant ranker


@needs_x64
def test_small_but_representable_features_converge_to_a_ranking():
    """Scale 1e-12: the old max(1, .) floor stopped at w = 0; the optimum here is ~ C sum dx."""
    X, y, qid = problem()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        est = RankSVM().fit(X * 1e-12, y, qid)
    assert est.converged_ and np.all(est.coef_ != 0)
    A = X[est.pairs_[:, 0]] - X[est.pairs_[:, 1]]
    w_ref = 2.0 * A.sum(0) * 1e-12  # w = 2 C A' (1 - A w) and A w ~ 1e-22
    np.testing.assert_allclose(est.coef_, w_ref, rtol=1e-9)
    assert est.score(X, y, qid) > 0.8


def test_an_unreachable_tolerance_warns():
    """tol is traced (this reuses the compiled fit): Newton ends in rounding noise, max_iter."""
    X, y, qid = problem()
    with pytest.warns(RuntimeWarning, match="max_iter=100 Newton iterations ended"):
        est = RankSVM(tol=1e-300).fit(X, y, qid)
    assert not est.converged_ and est.n_iter_ == 100
