"""PRank: a hand-worked trace, a plain-Python transcription of Crammer & Singer's Figure 2 (1-based
ranks, as published) over several epochs, the thresholds' order (their Lemma 1), the averaged
iterates, padded vmap against each problem alone, separable data learned exactly, and the
estimator's validation."""

import jax
import numpy as np
import pytest
from helpers import count_compilations

from bayesrank.baselines import prank
from bayesrank.baselines.prank import PRank

needs_x64 = pytest.mark.skipif(not jax.config.jax_enable_x64, reason="float64 references")

fit = jax.jit(prank.fit, static_argnames=("n_grades", "n_epochs", "averaged"))


def reference_prank(X, y, k, orders):
    """Figure 2 of "Pranking with ranking", line by line, in plain Python: ranks ``y + 1`` in
    ``1..k``, ``b[r - 1]`` is the paper's ``b_r`` with ``b_k = +inf``. ``orders``: the rows of
    each epoch. Returns the iterates ``(w^{t+1}, b^{t+1})`` after every step."""
    d = X.shape[1]
    w = [0.0] * d
    b = [0.0] * (k - 1) + [float("inf")]
    path = []
    for order in orders:
        for i in order:
            x = [float(v) for v in X[i]]
            yt = int(y[i]) + 1
            s = 0.0
            for j in range(d):
                s += w[j] * x[j]
            yhat = min(r for r in range(1, k + 1) if s - b[r - 1] < 0)
            if yhat != yt:
                y_r = [-1 if yt <= r else 1 for r in range(1, k)]
                tau = [y_r[r - 1] if (s - b[r - 1]) * y_r[r - 1] <= 0 else 0 for r in range(1, k)]
                w = [w[j] + sum(tau) * x[j] for j in range(d)]
                b = [b[r - 1] - tau[r - 1] for r in range(1, k)] + [float("inf")]
            path.append((np.array(w), np.array(b[: k - 1])))
    return path


def graded(seed, n=25, d=3, k=4, noise=1.0):
    """Random documents with grades ``0..k-1`` from a noisy linear score (PRank makes mistakes
    every epoch: plenty of updates)."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    score = X @ rng.normal(size=d) + noise * rng.normal(size=n)
    y = np.searchsorted(np.quantile(score, np.linspace(0, 1, k + 1)[1:-1]), score)
    return X, y.astype(np.int32)


@pytest.mark.slow  # 3 s or more in the fast loop
def test_hand_worked_updates():
    # K = 3 grades (the paper's ranks 1..3), b = (b_1, b_2), b_3 = +inf; two epochs of the rows
    # in order. Grades g are 0-based: y_r = -1 iff g <= r - 1, i.e. y_r = -1 for r > g.
    X = np.array([[1.0, 0.0], [0.0, 1.0], [2.0, 1.0]])
    y = np.array([2, 0, 1])
    expected = [
        # t=0: w = (0, 0), b = (0, 0)
        ([0, 0], [0, 0]),
        # t=1: x=(1,0), g=2. s = 0; s - b = (0, 0), none < 0 -> yhat = 2 = g: no update.
        ([0, 0], [0, 0]),
        # t=2: x=(0,1), g=0. s = 0 -> yhat = 2 != 0. y_r = (-1, -1); (s - b_r) y_r = (0, 0) <= 0
        #      -> tau = (-1, -1). w = (0,0) + (-2)(0,1) = (0,-2); b = (0,0) - (-1,-1) = (1, 1).
        ([0, -2], [1, 1]),
        # t=3: x=(2,1), g=1. s = 0*2 + (-2)*1 = -2; s - b = (-3, -3), first < 0 at r=0 -> yhat=0.
        #      y_r = (+1, -1); (s - b_r) y_r = (-3, 3) -> tau = (1, 0).
        #      w = (0,-2) + 1*(2,1) = (2,-1); b = (1,1) - (1,0) = (0, 1).
        ([2, -1], [0, 1]),
        # t=4: x=(1,0), g=2. s = 2; s - b = (2, 1), none < 0 -> yhat = 2 = g: no update.
        ([2, -1], [0, 1]),
        # t=5: x=(0,1), g=0. s = -1; s - b = (-1, -2) -> yhat = 0 = g: no update.
        ([2, -1], [0, 1]),
        # t=6: x=(2,1), g=1. s = 4 - 1 = 3; s - b = (3, 2) -> yhat = 2 != 1. y_r = (+1, -1);
        #      (s - b_r) y_r = (3, -2) -> tau = (0, -1). w = (2,-1) + (-1)(2,1) = (0,-2);
        #      b = (0,1) - (0,-1) = (0, 2).
        ([0, -2], [0, 2]),
    ]
    steps = np.array([0, 1, 2, 0, 1, 2])
    for t, (w, b) in enumerate(expected):
        model = prank.fit(X, y, 3, order=steps[:t].astype(np.int32))
        np.testing.assert_array_equal(model.w, np.array(w, float), err_msg=f"w after step {t}")
        np.testing.assert_array_equal(model.b, np.array(b, float), err_msg=f"b after step {t}")
    # The same two epochs through n_epochs; the average of the six iterates (t = 1..6):
    # w: ((0,0) + (0,-2) + 3 (2,-1) + (0,-2)) / 6 = (6, -7) / 6;
    # b: ((0,0) + (1,1) + 3 (0,1) + (0,2)) / 6 = (1, 6) / 6. The sums are exact: only the
    # division rounds (half an ulp of the working dtype).
    model = prank.fit(X, y, 3, n_epochs=2, averaged=True)
    eps = np.finfo(model.w_avg.dtype).eps
    np.testing.assert_array_equal(model.w, [0.0, -2.0])
    np.testing.assert_array_equal(model.b, [0.0, 2.0])
    np.testing.assert_allclose(model.w_avg, np.array([6.0, -7.0]) / 6, rtol=eps)
    np.testing.assert_allclose(model.b_avg, np.array([1.0, 6.0]) / 6, rtol=eps)
    # The rank rule: s = (0, -2, -2); s - b: (0, -2), (-2, -4), (-2, -4) -> grades (1, 0, 0).
    np.testing.assert_array_equal(prank.predict_scores(model, X), [0.0, -2.0, -2.0])
    np.testing.assert_array_equal(prank.predict_grades(model, X), [1, 0, 0])


@needs_x64
@pytest.mark.parametrize("per_epoch_order", [False, True])
def test_matches_plain_python_reference_over_epochs(per_epoch_order):
    X, y = graded(0, n=25, d=3, k=4)
    n_epochs = 5
    rng = np.random.default_rng(1)
    if per_epoch_order:
        order = np.stack([rng.permutation(len(X)) for _ in range(n_epochs)]).astype(np.int32)
        orders = order
    else:
        order = None
        orders = [range(len(X))] * n_epochs
    model = fit(X, y, n_grades=4, n_epochs=n_epochs, order=order)
    w_ref, b_ref = reference_prank(X, y, 4, orders)[-1]
    assert np.any(w_ref != 0)
    np.testing.assert_allclose(model.w, w_ref, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(model.b, b_ref, rtol=1e-12, atol=1e-12)


def test_thresholds_stay_ordered_after_every_step():
    # Every iterate of the JAX core: the data repeated over 4 epochs, the t-th problem masks all
    # rows from t on, so it stops after t steps (t = 0..4n), all in one vmap.
    n, k, epochs = 20, 5, 4
    X, y = graded(2, n=n, d=3, k=k, noise=3.0)
    Xs, ys = np.tile(X, (epochs, 1)), np.tile(y, epochs)
    masks = np.arange(epochs * n + 1)[:, None] > np.arange(epochs * n)[None, :]
    models = jax.vmap(lambda m: prank.fit(Xs, ys, k, mask=m))(masks)
    b = np.asarray(models.b)  # (4n + 1, k - 1)
    assert np.ptp(b, axis=0).max() > 0, "the thresholds never moved"
    assert np.all(np.diff(b, axis=1) >= 0), "Lemma 1: b_1 <= ... <= b_{k-1}"
    np.testing.assert_array_equal(b, np.round(b))  # each update moves a threshold by 0 or 1


@needs_x64
def test_averaged_is_the_mean_of_the_reference_iterates():
    X, y = graded(3, n=25, d=3, k=4)
    n_epochs = 3
    order = np.stack([np.random.default_rng(e).permutation(len(X)) for e in range(n_epochs)])
    model = fit(X, y, n_grades=4, n_epochs=n_epochs, order=order.astype(np.int32), averaged=True)
    path = reference_prank(X, y, 4, order)
    assert len(path) == n_epochs * len(X)
    np.testing.assert_allclose(model.w_avg, np.mean([w for w, _ in path], axis=0), rtol=1e-12)
    np.testing.assert_allclose(model.b_avg, np.mean([b for _, b in path], axis=0), rtol=1e-12)
    np.testing.assert_allclose(model.w, path[-1][0], rtol=1e-12, atol=1e-12)
    g_avg = prank.predict_grades(model, X, averaged=True)
    w_mean, b_mean = np.mean([w for w, _ in path], axis=0), np.mean([b for _, b in path], axis=0)
    s = X @ w_mean
    np.testing.assert_array_equal(g_avg, np.sum(s[:, None] >= b_mean[None, :], axis=1))


@pytest.mark.slow  # 3 s or more in the fast loop
def test_vmap_over_padded_problems_equals_each_alone():
    (X1, y1), (X2, y2) = graded(4, n=9, k=3), graded(5, n=14, k=3)
    size = 16
    Xs = np.zeros((2, size, 3))
    ys = np.zeros((2, size), np.int32)
    masks = np.zeros((2, size), bool)
    for q, (X, y) in enumerate([(X1, y1), (X2, y2)]):
        Xs[q, : len(X)], ys[q, : len(y)], masks[q, : len(X)] = X, y, True
    ys[:, -1] = 2  # a grade on a padded row changes nothing
    both = jax.vmap(lambda X, y, m: prank.fit(X, y, 3, n_epochs=3, averaged=True, mask=m))(
        Xs, ys, masks
    )
    for q, (X, y) in enumerate([(X1, y1), (X2, y2)]):
        alone = prank.fit(X, y, 3, n_epochs=3, averaged=True)
        for name in prank.PRankModel._fields:
            np.testing.assert_allclose(
                getattr(both, name)[q], getattr(alone, name), rtol=1e-12, err_msg=name
            )


def test_learns_separable_ordinal_data_exactly():
    # Grades from thresholds (-1, 0.5, 1.5) of x . w_true; points within 0.15 of a threshold
    # dropped: a margin, so the perceptron's mistake bound makes PRank converge.
    rng = np.random.default_rng(6)
    X = rng.normal(size=(200, 3))
    s = X @ np.array([1.0, -2.0, 0.5])
    cuts = np.array([-1.0, 0.5, 1.5])
    keep = np.min(np.abs(s[:, None] - cuts[None, :]), axis=1) > 0.15
    X, s = X[keep], s[keep]
    y = np.searchsorted(cuts, s)
    assert set(y) == {0, 1, 2, 3}
    est = PRank(n_epochs=100, shuffle=True, random_state=0).fit(X, y)
    np.testing.assert_array_equal(est.predict_grade(X), y)
    assert np.all(np.diff(est.thresholds_) >= 0)
    assert est.score(X, y) == 1.0


@needs_x64
def test_estimator_matches_the_core_and_shuffles_reproducibly():
    X, y = graded(7, n=30, k=4)
    n_epochs, seed = 4, 11
    rng = np.random.default_rng(seed)
    order = np.stack([rng.permutation(len(X)) for _ in range(n_epochs)]).astype(np.int32)
    core = fit(X, y, n_grades=4, n_epochs=n_epochs, order=order, averaged=True)
    qid = np.repeat([3, 1, 2], 10)  # checked, then ignored
    est = PRank(n_epochs=n_epochs, shuffle=True, random_state=seed).fit(X, y, qid)
    np.testing.assert_allclose(est.coef_, core.w, rtol=1e-12)
    np.testing.assert_allclose(est.thresholds_, core.b, rtol=1e-12)
    assert est.n_grades_ == 4 and est.n_features_in_ == 3
    avg = PRank(n_epochs=n_epochs, averaged=True, shuffle=True, random_state=seed).fit(X, y)
    np.testing.assert_allclose(avg.coef_, core.w_avg, rtol=1e-12)
    np.testing.assert_allclose(avg.thresholds_, core.b_avg, rtol=1e-12)
    np.testing.assert_allclose(avg.predict(X), X @ core.w_avg, rtol=1e-12)
    np.testing.assert_array_equal(avg.predict_grade(X), prank.predict_grades(core, X, True))
    in_order = PRank(n_epochs=n_epochs).fit(X, y)
    np.testing.assert_allclose(in_order.coef_, fit(X, y, 4, n_epochs=n_epochs).w, rtol=1e-12)
    assert repr(avg) == f"PRank(n_epochs={n_epochs}, averaged=True, shuffle=True, random_state=11)"


def test_refit_in_the_same_bucket_compiles_nothing():
    X, y = graded(8, n=30, k=3)
    est = PRank(n_epochs=2, shuffle=True, random_state=0).fit(X, y)
    est.predict_grade(X)
    with count_compilations() as n:
        est.fit(X[:-1], y[:-1]).predict_grade(X[:-2])
    assert n[0] == 0


def test_bad_input():
    X, y = graded(9, n=6, d=2, k=3)
    with pytest.raises(ValueError, match=r"not fitted yet"):
        PRank().predict(X)
    with pytest.raises(ValueError, match=r"not fitted yet"):
        PRank().predict_grade(X)
    with pytest.raises(ValueError, match=r"y\[3\] = 1\.5 is not an integer grade"):
        PRank().fit(X, [0, 1, 2, 1.5, 0, 1])
    with pytest.raises(ValueError, match=r"y\[1\] = -1 is a negative grade"):
        PRank().fit(X, [0, -1, 2, 1, 0, 1])
    X_nan = X.copy()
    X_nan[4, 1] = np.nan
    with pytest.raises(ValueError, match=r"X\[4, 1\] = nan is not finite"):
        PRank().fit(X_nan, y)
    est = PRank().fit(X, y)
    with pytest.raises(ValueError, match=r"X has 3 features, but PRank is expecting 2 features"):
        est.predict(np.zeros((4, 3)))
    with pytest.raises(ValueError, match=r"X\[0, 0\] = nan is not finite"):
        est.predict_grade(np.full((1, 2), np.nan))
    with pytest.raises(ValueError, match=r"n_epochs must be a positive integer, got 0"):
        PRank(n_epochs=0).fit(X, y)
    with pytest.raises(ValueError, match=r"random_state must be None, an integer"):
        PRank(shuffle=True, random_state="seed").fit(X, y)
    # the functional core
    with pytest.raises(ValueError, match=r"y\[2\] = 3 is not a grade in 0\.\.2"):
        prank.fit(X, np.array([0, 1, 3, 0, 0, 0]), 3)
    with pytest.raises(ValueError, match=r"y must hold integer grades"):
        prank.fit(X, y.astype(float), 3)
    with pytest.raises(ValueError, match=r"order has shape \(2, 6\)"):
        prank.fit(X, y, 3, n_epochs=3, order=np.zeros((2, 6), np.int32))
    with pytest.raises(ValueError, match=r"order holds row 6, outside 0\.\.5"):
        prank.fit(X, y, 3, order=np.array([0, 6], np.int32))
    with pytest.raises(ValueError, match=r"averaged=True needs a model fitted with averaged"):
        prank.predict_scores(prank.fit(X, y, 3), X, averaged=True)
