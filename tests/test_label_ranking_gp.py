"""The GP label ranker (bayesrank.label_ranking.gp): its training pairs against the orders' own
positions, its pair probabilities against quadrature of the predictive Gaussian, its orders
against brute-force enumeration of the three labels' orders, and a fit that recovers a known
label ranking."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from scipy import integrate, stats

from bayesrank.label_ranking import mean_label_kendall_tau
from bayesrank.label_ranking.gp import GPLabelRanker, entity_features, ranking_pairs


def linear_label_data(seed, n=40, c=3, d=2):
    """Orders of ``c`` labels by utilities ``x . W_a`` (a true linear label ranking)."""
    rng = np.random.default_rng(seed)
    X = rng.uniform(-1, 1, size=(n, d))
    W = rng.normal(size=(d, c)) * 2
    return X, np.argsort(-(X @ W), axis=1, kind="stable")


def test_entities_and_pairs_follow_the_orders():
    orders = np.array([[2, 0, 1], [1, 2, 0]])
    pairs = ranking_pairs(orders)
    assert len(pairs) == 2 * 3
    for i, order in enumerate(orders):
        position = {int(label): p for p, label in enumerate(order)}
        want = {
            (i * 3 + a, i * 3 + b)
            for a, b in itertools.permutations(range(3), 2)
            if position[a] < position[b]
        }
        assert {tuple(p) for p in pairs if p[0] // 3 == i} == want
    Z = entity_features(np.array([[0.5, -1.0], [2.0, 3.0]]), 3)
    np.testing.assert_array_equal(Z[4], [2.0, 3.0, 0.0, 1.0, 0.0])  # instance 1, label 1


@pytest.mark.slow  # a learned fit
def test_probabilities_and_orders_against_quadrature_and_enumeration():
    X, orders = linear_label_data(0)
    model = GPLabelRanker().fit(X[:30], orders[:30])
    Xt = X[30:]
    P = model.predict_proba_pairs(Xt)
    np.testing.assert_allclose(
        P + np.swapaxes(P, 1, 2), np.broadcast_to(1.0 - np.eye(3), P.shape), atol=1e-14
    )
    mean, cov = model._utilities(Xt)
    for i in range(2):
        for a, b in ((0, 1), (2, 0)):
            dm = mean[i, a] - mean[i, b]
            dv = cov[i, a, a] + cov[i, b, b] - 2 * cov[i, a, b]
            want = integrate.quad(
                lambda d, dm=dm, dv=dv: stats.norm.pdf(d, dm, np.sqrt(dv)) * stats.norm.cdf(d),
                dm - 12 * np.sqrt(dv),
                dm + 12 * np.sqrt(dv),
            )[0]
            np.testing.assert_allclose(P[i, a, b], want, rtol=1e-8)
    # the predicted order: the one of the 3! orders whose respected pairs' probabilities sum
    # highest (enumerated)
    predicted = model.predict(Xt)
    for i in range(len(Xt)):
        best = max(
            itertools.permutations(range(3)),
            key=lambda o, i=i: sum(P[i, o[s], o[t]] for s in range(3) for t in range(s + 1, 3)),
        )
        assert tuple(predicted[i]) == best
    # a known linear label ranking is recovered on held-out instances
    assert float(mean_label_kendall_tau(orders[30:], predicted)) > 0.8


def test_bad_input_names_the_culprit():
    X, orders = linear_label_data(1, n=6)
    with pytest.raises(ValueError, match="learn must be True or False"):
        GPLabelRanker(learn=1).fit(X, orders)
    with pytest.raises(ValueError, match="not fitted"):
        GPLabelRanker().predict(X)
    bad = orders.copy()
    bad[2] = [0, 0, 1]
    with pytest.raises(ValueError, match="2"):
        GPLabelRanker(learn=False).fit(X, bad)
