"""Label ranking (``bayesrank.label_ranking``): Kendall's tau between label orders, the JAX
logistic regression, RPC, constraint classification and the naive-Bayes benchmarks.

The references here share no code with the implementation: Kendall's tau by explicit pair loops
and scipy, the logistic regression by ``scipy.optimize.minimize`` on the same loss written in
NumPy, the voting theorems by enumerating the permutations of three labels, the benchmarks by
scikit-learn's own naive Bayes.
"""

import itertools
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import optimize, stats

from bayesrank.label_ranking import (
    RPC,
    ConstraintClassification,
    fit_logistic,
    label_kendall_distance,
    label_kendall_tau,
    load_label_ranking,
    mean_label_kendall_tau,
    orders_to_positions,
    voting_orders,
)
from bayesrank.label_ranking.constraint import expand_constraints
from bayesrank.metrics import kendall_tau as scores_kendall_tau

needs_x64 = pytest.mark.skipif(not jax.config.jax_enable_x64, reason="float64 references")
PERMS3 = [list(p) for p in itertools.permutations(range(3))]


def _tau_by_loops(order_a, order_b):
    """(C - D) / (c(c-1)/2) from the definition: positions, then every unordered pair."""
    c = len(order_a)
    pa = {label: k for k, label in enumerate(order_a)}
    pb = {label: k for k, label in enumerate(order_b)}
    conc = disc = 0
    for u, v in itertools.combinations(range(c), 2):
        if (pa[u] < pa[v]) == (pb[u] < pb[v]):
            conc += 1
        else:
            disc += 1
    return (conc - disc) / (c * (c - 1) / 2), disc


# ----------------------------------------------------------------------------------------------
# Kendall's tau between label orders
# ----------------------------------------------------------------------------------------------


def test_kendall_tau_hand_worked_examples():
    """Equal orders 1, reversed -1; one adjacent swap of four labels: D = 1, C = 5,
    tau = 4/6; the lecture notes' figure: truth E > B > C > A > D, prediction A > B > E > C > D
    inverts (A,B), (A,E), (A,C), (B,E): d_K = 4, tau = (6 - 4) / 10 = 0.2."""
    A, B, C, D, E = range(5)
    assert label_kendall_tau([[0, 1, 2, 3]], [[0, 1, 2, 3]]).tolist() == [1.0]
    assert label_kendall_tau([[0, 1, 2, 3]], [[3, 2, 1, 0]]).tolist() == [-1.0]
    np.testing.assert_allclose(label_kendall_tau([[0, 1, 2, 3]], [[1, 0, 2, 3]]), [4 / 6])
    lecture_truth, lecture_pred = [[E, B, C, A, D]], [[A, B, E, C, D]]
    assert label_kendall_distance(lecture_truth, lecture_pred).tolist() == [4]
    np.testing.assert_allclose(label_kendall_tau(lecture_truth, lecture_pred), [0.2])
    np.testing.assert_allclose(
        mean_label_kendall_tau([[0, 1, 2], [0, 1, 2]], [[0, 1, 2], [2, 1, 0]]), 0.0
    )


def test_kendall_tau_matches_scipy_loops_and_tau_b_for_total_orders():
    """For total orders tau-a = tau-b: scipy's kendalltau and bayesrank.metrics.kendall_tau on
    the label positions give the label-ranking tau, and so do explicit pair loops."""
    rng = np.random.default_rng(0)
    for c in (2, 3, 5, 8):
        t = np.array([rng.permutation(c) for _ in range(20)])
        p = np.array([rng.permutation(c) for _ in range(20)])
        got = np.asarray(label_kendall_tau(t, p))
        dist = np.asarray(label_kendall_distance(t, p))
        pos_t, pos_p = np.argsort(t, axis=1), np.argsort(p, axis=1)
        if c == 5:  # one size: each size compiles bayesrank.metrics.kendall_tau anew
            tau_b = jax.vmap(scores_kendall_tau)(pos_t.astype(float), pos_p.astype(float))
            np.testing.assert_allclose(got, tau_b, atol=1e-6)
        for i in range(20):
            ref, disc = _tau_by_loops(t[i], p[i])
            assert dist[i] == disc
            np.testing.assert_allclose(got[i], ref, atol=1e-12)
            np.testing.assert_allclose(got[i], stats.kendalltau(pos_t[i], pos_p[i])[0], atol=1e-12)
    np.testing.assert_array_equal(orders_to_positions(t), pos_t)
    np.testing.assert_allclose(jax.jit(label_kendall_tau)(t, p), got)


# ----------------------------------------------------------------------------------------------
# Weighted voting on three labels, by enumeration
# ----------------------------------------------------------------------------------------------


def _marginals(dist):
    """R[a, b] = P(a before b) under a distribution over the six orders of three labels."""
    R = np.zeros((3, 3))
    for prob, perm in zip(dist, PERMS3, strict=True):
        for i, a in enumerate(perm):
            for b in perm[i + 1 :]:
                R[a, b] += prob
    return R


def _agreement(R, perm):
    """sum over the pairs that ``perm`` puts in order (a before b) of R[a, b]."""
    return sum(R[a, b] for i, a in enumerate(perm) for b in perm[i + 1 :])


def test_voting_minimises_expected_spearman_loss_on_three_labels():
    """What is exact (Hüllermeier et al. 2008, Sec. 5): when R holds the pairwise marginals
    R[a, b] = P(a before b) of a distribution over rankings, the vote S(a) = sum_b R[a, b] is
    c - 1 - E[pos(a)], and the voting order is the order that minimises the expected Spearman
    loss E[sum_a (pos(a) - pos_hat(a))^2]. Checked against all 6 orders of 3 labels for random
    distributions (a tie in the expected positions, which would allow several minimisers, has
    probability zero and is excluded by the margin check)."""
    rng = np.random.default_rng(1)
    for _ in range(200):
        dist = rng.dirichlet(np.ones(6))
        R = _marginals(dist)

        def loss(perm_hat, dist=dist):
            pos_hat = np.argsort(perm_hat)
            return sum(
                pr * np.sum((np.argsort(perm) - pos_hat) ** 2)
                for pr, perm in zip(dist, PERMS3, strict=True)
            )

        losses = sorted((loss(p), p) for p in PERMS3)
        assert losses[1][0] - losses[0][0] > 1e-9
        assert np.asarray(voting_orders(R[None]))[0].tolist() == losses[0][1]


def test_voting_maximises_pair_agreement_only_under_stochastic_transitivity():
    """The Kendall-type target: max over orders of sum_{a before b} R[a, b] (the expected
    number of pairs ordered as in a ranking drawn with marginals R).

    Exact when R[a, b] = G(u_a - u_b) for utilities u and a symmetric cdf G (Bradley-Terry:
    G = sigmoid): then S(a) increases with u_a, so voting orders by u, and the order by u wins
    every pair's larger share. Checked by enumerating the 6 orders of 3 labels.

    NOT exact in general, even for three labels with untied votes and a transitive majority
    relation: R[A, B] = 0.6, R[A, C] = 1, R[C, B] = 0.55 gives votes S = (1.6, 0.85, 0.55),
    the voting order A B C (agreement 2.05), while A C B agrees 2.15. Equal votes go to the lower
    label index."""
    rng = np.random.default_rng(2)
    for _ in range(200):
        u = rng.normal(size=3) * 2
        R = 1 / (1 + np.exp(-(u[:, None] - u[None, :])))
        np.fill_diagonal(R, 0)
        best = max(PERMS3, key=lambda p, R=R: _agreement(R, p))
        assert np.asarray(voting_orders(R[None]))[0].tolist() == best
    R = np.array([[0, 0.6, 1.0], [0.4, 0, 0.45], [0.0, 0.55, 0]])
    assert np.asarray(voting_orders(R[None]))[0].tolist() == [0, 1, 2]
    assert max(PERMS3, key=lambda p: _agreement(R, p)) == [0, 2, 1]
    flat = np.full((1, 3, 3), 0.5)
    assert np.asarray(voting_orders(flat))[0].tolist() == [0, 1, 2]


# ----------------------------------------------------------------------------------------------
# Logistic regression against scipy
# ----------------------------------------------------------------------------------------------


def _reference_logistic(X, y, s, C, fit_intercept):
    d = X.shape[1]

    def split(t):
        return t[:d], (t[d] if fit_intercept else 0.0)

    def fun(t):
        w, b = split(t)
        z = X @ w + b
        return 0.5 * w @ w + C * np.sum(s * (np.logaddexp(0.0, z) - y * z))

    def jac(t):
        w, b = split(t)
        r = C * s * (1 / (1 + np.exp(-(X @ w + b))) - y)
        gw = w + X.T @ r
        return np.append(gw, r.sum()) if fit_intercept else gw

    t0 = np.zeros(d + fit_intercept)
    res = optimize.minimize(fun, t0, jac=jac, method="BFGS", options={"gtol": 1e-11})
    return split(res.x), res.fun


@pytest.mark.slow  # 3 s or more in the fast loop
@needs_x64
@pytest.mark.parametrize("fit_intercept", [True, False])
def test_logistic_matches_scipy_minimize(fit_intercept):
    """The Newton fit and scipy's BFGS on the same penalised, weighted loss agree to 1e-6, and a
    vmap over targets gives each target's own fit."""
    rng = np.random.default_rng(3)
    X = rng.normal(size=(80, 4)) * [1.0, 3.0, 0.5, 2.0]
    s = rng.uniform(0.2, 2.0, size=80)
    Y = np.stack([(X @ w + 0.4 + rng.normal(size=80) > 0) for w in rng.normal(size=(3, 4))])
    Y = Y.astype(float)
    fit = jax.jit(partial(fit_logistic, fit_intercept=fit_intercept))
    fit_all = jax.jit(jax.vmap(fit, in_axes=(None, 0, None, None)))
    for C in (0.05, 1.0, 20.0):
        fits = fit_all(X, Y, s, C)
        for k, y in enumerate(Y):
            (w, b), _ = _reference_logistic(X, y, s, C, fit_intercept)
            np.testing.assert_allclose(fits.coef[k], w, atol=1e-6)
            np.testing.assert_allclose(fits.intercept[k], b, atol=1e-6)
            assert int(fits.status[k]) == 0
            np.testing.assert_allclose(fit(X, y, s, C).coef, fits.coef[k], atol=1e-10)


@pytest.mark.slow  # 3 s or more in the fast loop
def test_logistic_one_class_and_zero_weights():
    """One class only: no finite minimiser, so w = 0 and b = +-inf (probability 1 or 0, the
    observed frequency); rows of weight 0 change nothing (the estimators' padding)."""
    rng = np.random.default_rng(4)
    fit = jax.jit(fit_logistic)
    X = rng.normal(size=(30, 2))
    ones = np.ones(30)
    up, down = fit(X, ones, ones, 1.0), fit(X, np.zeros(30), ones, 1.0)
    assert bool(up.degenerate) and float(up.intercept) == np.inf
    assert np.all(np.asarray(up.coef) == 0)
    assert float(down.intercept) == -np.inf
    y = (X[:, 0] > 0).astype(float)
    a = fit(X, y, ones, 2.0)
    Xp = np.vstack([X, rng.normal(size=(10, 2)) * 100])
    yp = np.append(y, np.ones(10))
    b = fit(Xp, yp, np.append(np.ones(30), np.zeros(10)), 2.0)
    tol = 1e-6 if jax.config.jax_enable_x64 else 1e-3  # float32: its stopping rule, 1.2e-4
    np.testing.assert_allclose(b.coef, a.coef, rtol=tol, atol=tol)
    np.testing.assert_allclose(b.intercept, a.intercept, rtol=tol, atol=tol)


# ----------------------------------------------------------------------------------------------
# Constraint classification
# ----------------------------------------------------------------------------------------------


def test_expanded_constraint_vectors_follow_har_peled():
    """The slides' example: c = 4 labels, constraint "label 2 before label 4" (1-based) for
    x in R^n gives [0, x, 0, -x] in R^(4n)."""
    x = np.array([[1.0, -2.0, 3.0]])
    Z = np.asarray(expand_constraints(x, np.array([[1, 3]]), 4, fit_intercept=False))
    zero = np.zeros(3)
    np.testing.assert_array_equal(Z[0, 0], np.concatenate([zero, x[0], zero, -x[0]]))


@pytest.mark.parametrize("loss", ["logistic", "perceptron"])
def test_constraint_classification_recovers_a_linear_label_ranking(loss):
    """Orders drawn from a true linear model (labels sorted by w_a . x + b_a) are recovered on
    new instances: mean tau near 1."""
    rng = np.random.default_rng(5)
    W, bias = rng.normal(size=(4, 3)), rng.normal(size=4) * 0.5
    X = rng.normal(size=(400, 3))
    orders = np.argsort(-(X @ W.T + bias), axis=1)
    model = ConstraintClassification(C=100.0, loss=loss, max_iter=30).fit(X[:300], orders[:300])
    assert model.coef_.shape == (4, 3) and model.intercept_.shape == (4,)
    assert model.score(X[300:], orders[300:]) > 0.95


# ----------------------------------------------------------------------------------------------
# Benchmarks and cross-validation
# ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name, shape", [("iris", (150, 4)), ("wine", (178, 13))])
def test_benchmark_construction(name, shape):
    """Shapes; every ranking a permutation; the top label is naive Bayes's argmax; the whole
    ranking sorts the probabilities rounded to 3 decimals, equal ones by label index (the
    published files' rule), or the exact posterior with decimals=None; X min-max scaled."""
    from sklearn import datasets
    from sklearn.naive_bayes import GaussianNB

    X, orders = load_label_ranking(name)
    assert X.shape == shape and orders.shape == (shape[0], 3)
    assert np.all(np.sort(orders, axis=1) == np.arange(3))
    np.testing.assert_allclose(X.min(axis=0), -1.0)
    np.testing.assert_allclose(X.max(axis=0), 1.0)
    X_raw, y = getattr(datasets, f"load_{name}")(return_X_y=True)
    nb = GaussianNB().fit(X_raw, y)
    proba = nb.predict_proba(X_raw)
    np.testing.assert_array_equal(orders[:, 0], nb.predict(X_raw))
    for i in range(len(X_raw)):
        expected = sorted(range(3), key=lambda a, i=i: (-round(proba[i, a], 3), a))
        assert orders[i].tolist() == expected
    _, exact = load_label_ranking(name, decimals=None)
    log_post = nb.predict_log_proba(X_raw)
    ranked = np.take_along_axis(log_post, exact, axis=1)
    assert np.all(np.diff(ranked, axis=1) <= 0)


def _cv_tau(model, X, orders, folds=10):
    from sklearn.model_selection import KFold

    taus = []
    for train, test in KFold(folds, shuffle=True, random_state=0).split(X):
        model.fit(X[train], orders[train])
        taus.append(float(mean_label_kendall_tau(orders[test], model.predict(X[test]))))
    return float(np.mean(taus)), float(np.std(taus))


@pytest.mark.slow  # 3 s or more in the fast loop
@pytest.mark.parametrize("name", ["iris", "wine"])
def test_rpc_ten_fold_cross_validation(name):
    """RPC (C = 1) in 10-fold CV (shuffled, seed 0), the protocol of Cheng et al. (2009), on
    the benchmarks as they build them. Measured: iris 0.849 +- 0.106, wine 0.951 +- 0.029 (mean
    +- std over the folds); the published figures differ in learner details (Weka's logistic
    regression), so only a sanity floor is asserted. The pair relation is reciprocal."""
    X, orders = load_label_ranking(name)
    model = RPC(C=1.0)
    mean, _ = _cv_tau(model, X, orders)
    assert mean > 0.8
    R = model.predict_proba_pairs(X[:5])
    np.testing.assert_allclose(R + np.swapaxes(R, 1, 2), np.broadcast_to(1 - np.eye(3), R.shape))


# ----------------------------------------------------------------------------------------------
# Estimators: conventions and bad input
# ----------------------------------------------------------------------------------------------


def test_estimator_conventions():
    """__init__ stores parameters only; fit returns self; learned attributes end in _; clone."""
    from sklearn.base import clone

    model = RPC(C=0.5)
    assert vars(model) == {"C": 0.5, "max_iter": 100, "tol": None}
    assert repr(model) == "RPC(C=0.5)"
    assert clone(model).get_params() == model.get_params()
    X, orders = load_label_ranking("iris")
    assert model.fit(X, orders) is model
    assert model.coef_.shape == (3, 4) and model.pairs_.tolist() == [[0, 1], [0, 2], [1, 2]]
    assert model.predict(X).shape == (150, 3)


@pytest.mark.slow  # 3 s or more in the fast loop
@pytest.mark.parametrize("Model", [RPC, ConstraintClassification])
def test_bad_input_names_the_culprit(Model):
    """A ranking row that is not a permutation, mismatched lengths, a NaN in X, a bad option,
    an unfitted model and a wrong number of features each get a ValueError naming the culprit;
    training rankings that all agree are reproduced (RPC: the one-outcome pair models predict
    that outcome with probability 1)."""
    X = np.random.default_rng(6).normal(size=(6, 2))
    orders = np.array([[0, 1, 2]] * 6)
    bad = orders.copy()
    bad[3] = [0, 0, 2]
    with pytest.raises(ValueError, match=r"rankings\[3\] = \[0, 0, 2\] is not a permutation"):
        Model().fit(X, bad)
    with pytest.raises(ValueError, match="X has 6 rows but rankings has 5"):
        Model().fit(X, orders[:5])
    Xn = X.copy()
    Xn[2, 1] = np.nan
    with pytest.raises(ValueError, match=r"X\[2, 1\] = nan is not finite"):
        Model().fit(Xn, orders)
    with pytest.raises(ValueError, match="C must be a finite number > 0"):
        Model(C=-1.0).fit(X, orders)
    with pytest.raises(ValueError, match="not fitted"):
        Model().predict(X)
    model = Model().fit(X, orders)  # every pair ordered one way: RPC's b = +inf, p = 1
    np.testing.assert_array_equal(model.predict(X), orders)
    if Model is RPC:
        assert np.all(model.intercept_ == np.inf) and model.converged_.all()
        assert np.all(model.predict_proba_pairs(X)[:, 0, 1:] == 1.0)
    with pytest.raises(ValueError, match="X has 3 features, but"):
        model.predict(np.zeros((2, 3)))
    with pytest.raises(ValueError, match=r"orders_pred\[0\] = \[1, 1, 2\]"):
        label_kendall_tau(orders[:1], [[1, 1, 2]])
    assert jnp.shape(label_kendall_tau(orders, orders)) == (6,)
