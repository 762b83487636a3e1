"""RankBoost: round by round against a plain NumPy transcription of the seed notes' pseudo-code,
the exponential ranking loss falling every round, jit / vmap / loop agreement, smooth scores,
and the estimator's validation."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from bayesrank.baselines import RankBoost, rankboost
from bayesrank.data.letor import load_letor
from bayesrank.data.pairs import pairs_from_grades

needs_x64 = pytest.mark.skipif(not jax.config.jax_enable_x64, reason="float64 references")

SMOOTHING = 1e-12
fit = jax.jit(rankboost.fit, static_argnames=("n_rounds", "complements"))


def problem(seed=0, n=30, d=4, n_pairs=60):
    """Random documents and random preference pairs (winner first, no self-pairs)."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    utility = X @ rng.normal(size=d) + 0.5 * rng.normal(size=n)
    i, j = rng.integers(0, n, size=(2, 3 * n_pairs))
    keep = i != j
    i, j = i[keep][:n_pairs], j[keep][:n_pairs]
    pairs = np.where((utility[i] > utility[j])[:, None], np.c_[i, j], np.c_[j, i])
    thresholds = np.sort(rng.normal(size=(d, 7)), axis=1)
    return X, pairs, thresholds


def numpy_rankboost(X, pairs, thresholds, T, complements):
    """The seed's RANKBOOST: x'_p = winner, x_p = loser, y_p = +1; every candidate h is tried."""
    m = len(pairs)
    D = np.full(m, 1.0 / m)
    candidates = [(+1, k, t) for k in range(X.shape[1]) for t in thresholds[k]]
    if complements:
        candidates += [(-1, k, t) for k in range(X.shape[1]) for t in thresholds[k]]
    rounds = []
    for _ in range(T):
        values, us = [], []
        for sign, k, t in candidates:
            h = (X[:, k] > t) if sign > 0 else (X[:, k] <= t)
            u = h[pairs[:, 0]].astype(float) - h[pairs[:, 1]]
            values.append(-np.sum(D * u))  # eps- - eps+
            us.append(u)
        # the smallest; values within 1e-12 of it (equal up to rounding) go to the first
        first = next(c for c, v in enumerate(values) if v <= min(values) + 1e-12)
        (sign, k, t), u = candidates[first], us[first]
        eps_plus, eps_minus = D[u > 0].sum(), D[u < 0].sum()
        eps_zero = D[u == 0].sum()
        alpha = 0.5 * np.log((eps_plus + SMOOTHING) / (eps_minus + SMOOTHING))
        Z = eps_zero + 2 * np.sqrt(eps_plus * eps_minus)
        D = D * np.exp(-alpha * u)
        # the seed's normaliser (up to the smoothing: eps- = 0 leaves sqrt(s eps+) behind)
        np.testing.assert_allclose(D.sum(), Z, rtol=1e-12, atol=2 * np.sqrt(SMOOTHING))
        D = D / Z
        rounds.append((k, t, sign, alpha))
    return rounds


@needs_x64
@pytest.mark.parametrize("complements", [True, False])
def test_reproduces_numpy_pseudocode_round_by_round(complements):
    X, pairs, thresholds = problem(0)
    T = 25
    model, info = fit(X, pairs, thresholds, n_rounds=T, complements=complements)
    ref = numpy_rankboost(X, pairs, thresholds, T, complements)
    for t, (k, theta, sign, alpha) in enumerate(ref):
        assert int(model.features[t]) == k, f"round {t}"
        assert float(model.thresholds[t]) == theta, f"round {t}"
        assert int(model.signs[t]) == sign, f"round {t}"
        np.testing.assert_allclose(float(model.alphas[t]), alpha, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(info.eps_plus + info.eps_minus + info.eps_zero, 1.0, rtol=1e-12)


@pytest.mark.slow  # 3 s or more in the fast loop
@needs_x64
def test_exponential_loss_decreases_every_round():
    X, pairs, thresholds = problem(1, n=40, n_pairs=120)
    T = 40
    model, info = fit(X, pairs, thresholds, n_rounds=T, complements=True)
    losses = [
        float(rankboost.exp_loss(rankboost.predict(model, X, n_rounds=t), pairs))
        for t in range(T + 1)
    ]
    assert losses[0] == 1.0
    assert np.all(np.diff(losses) < 0), np.diff(losses)
    np.testing.assert_allclose(info.loss, losses[1:], rtol=1e-10)
    np.testing.assert_allclose(np.cumprod(info.Z), losses[1:], rtol=1e-10)  # loss = prod Z_t


@needs_x64
@pytest.mark.slow
def test_jit_vmap_loop_agree_with_padding():
    queries = [problem(s, n=n, n_pairs=m) for s, n, m in [(2, 12, 20), (3, 20, 35), (4, 9, 0)]]
    n_pad, m_pad = 24, 40
    Xs = np.zeros((3, n_pad, 4))
    Ps = np.zeros((3, m_pad, 2), int)
    masks = np.zeros((3, m_pad), bool)
    for b, (X, P, _) in enumerate(queries):
        Xs[b, : len(X)] = X
        Ps[b, : len(P)] = P
        masks[b, : len(P)] = True
    thresholds = queries[0][2]  # shared candidates
    batched = jax.jit(
        jax.vmap(lambda X, P, M: rankboost.fit(X, P, thresholds, 15, M)[0]),
    )(Xs, Ps, masks)
    for b, (X, P, _) in enumerate(queries[:2]):
        loop = fit(X, P, thresholds, n_rounds=15)[0]
        for name in ("features", "thresholds", "signs"):
            np.testing.assert_array_equal(getattr(batched, name)[b], getattr(loop, name))
        np.testing.assert_allclose(batched.alphas[b], loop.alphas, rtol=1e-12)
    assert np.all(np.asarray(batched.alphas[2]) == 0)  # a query without pairs learns nothing


@pytest.mark.slow  # 3 s or more in the fast loop
@needs_x64
def test_smooth_scores_tend_to_hard_scores_and_are_differentiable():
    X, pairs, thresholds = problem(5)
    model, _ = fit(X, pairs, thresholds, n_rounds=10)
    hard = rankboost.predict(model, X)
    soft = rankboost.predict(model, X, temperature=1e-6)
    np.testing.assert_allclose(soft, hard, atol=1e-6)
    g = jax.grad(lambda X: jnp.sum(rankboost.predict(model, X, temperature=0.3) ** 2))(X)
    assert np.all(np.isfinite(g)) and np.any(g != 0)
    E = np.zeros_like(X)
    E[2, int(model.features[0])] = 1e-6
    smooth = lambda X: jnp.sum(rankboost.predict(model, X, temperature=0.3) ** 2)  # noqa: E731
    fd = (smooth(X + E) - smooth(X - E)) / 2e-6
    np.testing.assert_allclose(g[2, int(model.features[0])], fd, rtol=1e-6)


@pytest.mark.slow  # 3 s or more in the fast loop
@needs_x64
def test_estimator_matches_functional_core():
    X, _, _ = problem(6)
    rng = np.random.default_rng(6)
    qid = np.repeat([5, 3], 15)  # non-contiguous ids are fine; pairs only within a query
    y = rng.integers(0, 3, size=30)
    est = RankBoost(n_rounds=12, n_thresholds=5).fit(X, y, qid)
    within = est.pairs_
    assert np.all(qid[within[:, 0]] == qid[within[:, 1]])
    assert np.all(y[within[:, 0]] > y[within[:, 1]])
    model, _ = fit(X, within, rankboost.candidate_thresholds(X, 5), n_rounds=12)
    np.testing.assert_allclose(est.predict(X), rankboost.predict(model, X))
    np.testing.assert_allclose(est.predict(X, n_rounds=3), rankboost.predict(model, X, n_rounds=3))
    th = est.candidates_
    np.testing.assert_allclose(th[:, 0], X.min(0))
    np.testing.assert_allclose(th[:, -1], X.max(0))


def test_bad_input():
    X, _, _ = problem(7)
    y, qid = np.zeros(30), np.zeros(30)
    with pytest.raises(ValueError, match=r"qid has shape \(29,\)"):
        RankBoost().fit(X, y, qid[:-1])
    Xb = X.copy()
    Xb[4, 1] = np.nan
    with pytest.raises(ValueError, match=r"X\[4, 1\] = nan"):
        RankBoost().fit(Xb, y, qid)
    with pytest.raises(ValueError, match="n_rounds must be"):
        RankBoost(n_rounds=0).fit(X, y, qid)
    with pytest.raises(ValueError, match="not fitted"):
        RankBoost().predict(X)


@needs_x64
@pytest.mark.shared_data
@pytest.mark.slow
@pytest.mark.parametrize("complements", [True, False])
def test_reproduces_numpy_pseudocode_on_ohsumed_queries(shared_data, complements):
    """Real data: tied feature values, constant features, thresholds equal to data values."""
    path = shared_data / "OHSUMED" / "QueryLevelNorm" / "Fold1" / "vali.txt.gz"
    for q in load_letor(path)[:2]:
        pairs = pairs_from_grades(q.grades)
        th = rankboost.candidate_thresholds(q.X, 10)
        model, _ = fit(q.X, pairs, th, n_rounds=8, complements=complements)
        ref = numpy_rankboost(q.X, pairs, th, 8, complements)
        for t, (k, theta, sign, alpha) in enumerate(ref):
            got = (int(model.features[t]), float(model.thresholds[t]), int(model.signs[t]))
            assert got == (k, theta, sign), f"query {q.qid}, round {t}"
            np.testing.assert_allclose(float(model.alphas[t]), alpha, rtol=1e-9)


def test_second_call_with_same_shapes_does_not_retrace():
    X, pairs, thresholds = problem(8, n=10, n_pairs=12)
    traces = []

    def f(X, P, th):
        traces.append(1)
        return rankboost.fit(X, P, th, 5)[0].alphas

    jitted = jax.jit(f)
    jitted(X, pairs, thresholds)
    jitted(X + 1.0, pairs[::-1], thresholds * 2)
    assert len(traces) == 1
