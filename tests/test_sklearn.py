"""The baselines under scikit-learn: its estimator checks, and ``GridSearchCV`` with query ids.

scikit-learn is not a dependency (it is in the ``bench`` extra): skipped without it (or before
1.8). The checks call ``fit(X, y)`` and ``score(X, y)`` without query ids: ``qid=None`` is one
query. Checked with scikit-learn 1.9.1.
"""

import warnings

import numpy as np
import pytest

# 1.6: __sklearn_tags__ and expected_failed_checks; 1.8: parametrize_with_checks(xfail_strict=)
sklearn = pytest.importorskip("sklearn", minversion="1.8")

from sklearn.model_selection import GridSearchCV, GroupKFold, cross_val_score  # noqa: E402
from sklearn.utils.estimator_checks import parametrize_with_checks  # noqa: E402

from bayesrank.baselines import PRank, RankBoost, RankSVM, SortNet  # noqa: E402

#: The checks that cannot pass, and why (each must fail: ``xfail_strict``).
NOT_APPLICABLE = {
    "check_estimators_unfitted": (
        "wants sklearn.exceptions.NotFittedError itself; bayesrank does not import scikit-learn "
        "and raises ValueError ('this <estimator> is not fitted yet'), NotFittedError's base class"
    ),
    "check_estimators_empty_data_messages": (
        "X with no column is refused with bayesrank's message 'X has shape (12, 0): it needs at "
        "least one feature column'; the check wants scikit-learn's wording"
    ),
    "check_dtype_object": (
        "object arrays are refused, never cast (bayesrank.data.checks does not parse strings as "
        "numbers); pass X.astype(float)"
    ),
}

#: SortNet scores a document by its place in the sort of the documents given together (one
#: query without ``qid``): a subset, or the same rows in another order, is another sort.
SORT_BASED = {
    name: "SortNet's scores are places in the sort of the rows given together"
    for name in ("check_methods_sample_order_invariance", "check_methods_subset_invariance")
}

#: Small settings: the checks fit dozens of times, on new shapes (compiling; the RBF RankSVM's
#: programs take seconds each, so it is left out: the estimator face is the same class).
ESTIMATORS = [RankSVM(), RankBoost(n_rounds=5), PRank(n_epochs=2), SortNet(max_iter=1, n_steps=5)]

with warnings.catch_warnings():
    # Duck-typed estimators (scikit-learn is optional): "does not inherit from BaseEstimator".
    warnings.filterwarnings("ignore", "Estimator .* does not inherit", UserWarning)
    CHECKS = parametrize_with_checks(
        ESTIMATORS,
        expected_failed_checks=lambda est: (
            NOT_APPLICABLE | (SORT_BASED if isinstance(est, SortNet) else {})
        ),
        xfail_strict=True,
    )


@CHECKS
@pytest.mark.slow
def test_sklearn_estimator_checks(estimator, check):
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", "Estimator .* does not inherit", UserWarning)
        check(estimator)


def queries(seed=0, n_queries=6, per_query=10, d=4):
    """Grades from ``X @ w`` within each query; each query's documents are shifted along ``w`` by
    an offset of its own, so that pairs across queries are ordered at random by ``X @ w``."""
    rng = np.random.default_rng(seed)
    n = n_queries * per_query
    qid = np.repeat(np.arange(n_queries) + 100, per_query)
    X = rng.normal(size=(n, d))
    w = rng.normal(size=d)
    y = (X @ w + 0.3 * rng.normal(size=n) > 0).astype(int)
    X += np.outer(5.0 * rng.normal(size=n_queries)[qid - 100], w / (w @ w))
    return X, y, qid


@pytest.mark.slow  # 3 s or more in the fast loop
def test_qid_none_is_one_query():
    X, y, qid = queries()
    one = RankSVM().fit(X, y)
    np.testing.assert_array_equal(one.coef_, RankSVM().fit(X, y, np.zeros(len(y))).coef_)
    assert len(one.pairs_) > len(RankSVM().fit(X, y, qid).pairs_)  # pairs across queries too
    assert one.score(X, y) == one.score(X, y, np.ones(len(y)))


@pytest.mark.slow  # 3 s or more in the fast loop
def test_grid_search_routes_qid_to_fit_and_score():
    """The documented example: metadata routing on, ``groups`` to ``GroupKFold``, ``qid`` to
    ``fit`` and ``score`` (each fold's slice); the scores equal the hand-made folds'."""
    X, y, qid = queries()
    grid = {"C": [0.01, 1.0]}
    with sklearn.config_context(enable_metadata_routing=True):
        search = GridSearchCV(RankSVM(), grid, cv=GroupKFold(3)).fit(X, y, qid=qid, groups=qid)
        scores = cross_val_score(
            RankSVM(C=0.01), X, y, cv=GroupKFold(3), params={"qid": qid, "groups": qid}
        )
    for k, (train, test) in enumerate(GroupKFold(3).split(X, y, qid)):
        for c, C in enumerate(grid["C"]):
            model = RankSVM(C=C).fit(X[train], y[train], qid[train])
            expected = model.score(X[test], y[test], qid[test])
            assert search.cv_results_[f"split{k}_test_score"][c] == pytest.approx(expected)
            if C == 0.01:
                assert scores[k] == pytest.approx(expected)
                assert model.score(X[test], y[test]) < expected  # one query: cross pairs count
    assert search.best_params_["C"] in grid["C"] and search.best_estimator_.converged_
