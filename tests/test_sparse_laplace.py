"""The precision-form Laplace (bayesrank.inference.sparse_laplace) against the dense engine on
``K = Q^-1`` (inverted here with NumPy): the mode and the pair predictions, and the precision's
matrix-vector product against the dense matrix."""

from __future__ import annotations

import jax
import numpy as np
import pytest
import scipy.sparse as sp

from bayesrank.inference import laplace
from bayesrank.inference import sparse_laplace as S

pytestmark = pytest.mark.skipif(
    not jax.config.jax_enable_x64, reason="compares modes to 1e-8 (float64)"
)


def graph_problem(n=200, m=600, seed=0):
    rng = np.random.default_rng(seed)
    W = sp.random(n, n, density=4 / n, random_state=seed)
    W = ((W + W.T) > 0).astype(float)
    u = rng.normal(size=n)
    i = rng.integers(0, n, m)
    j = (i + rng.integers(1, n, m)) % n
    pairs = np.where((u[i] + rng.normal(size=m) > u[j])[:, None], np.c_[i, j], np.c_[j, i])
    return W, pairs


def dense(Q: S.SparsePrecision) -> np.ndarray:
    out = np.zeros((Q.n, Q.n))
    np.add.at(out, (np.asarray(Q.rows), np.asarray(Q.cols)), np.asarray(Q.values))
    return out


def test_the_precision_is_the_regularized_laplacians_inverse():
    """``Q = (beta / w) (L + I / iota^2)`` with ``L = D - W``, built by hand; ``matvec`` and
    ``diagonal`` are the dense matrix's."""
    W, _ = graph_problem(40, 1)
    Q = S.laplacian_precision(W, beta=1.3, iota=0.7, weight=2.0)
    Wd = W.toarray()
    L = np.diag(Wd.sum(1)) - Wd
    want = 1.3 / 2.0 * (L + np.eye(40) / 0.7**2)
    np.testing.assert_allclose(dense(Q), want, atol=1e-14)
    v = np.random.default_rng(1).normal(size=40)
    np.testing.assert_allclose(Q.matvec(v), want @ v, atol=1e-12)
    np.testing.assert_allclose(Q.diagonal(), np.diag(want), atol=1e-14)


@pytest.mark.parametrize("seed", [0, 1])
def test_the_mode_and_predictions_equal_the_dense_engines(seed):
    W, pairs = graph_problem(seed=seed)
    Q = S.laplacian_precision(W, beta=1.0, iota=1.5, weight=3.0)
    fit = S.mode(Q, pairs)
    ref = laplace.fit(np.linalg.inv(dense(Q)), pairs, tol=1e-12)
    assert bool(fit.converged)
    np.testing.assert_allclose(fit.mean, ref.mean, atol=1e-8)
    rng = np.random.default_rng(seed + 10)
    test = np.c_[rng.integers(0, 200, 40), rng.integers(0, 200, 40)]
    test = test[test[:, 0] != test[:, 1]]
    prob, mean, var = S.pair_predictions(Q, pairs, fit, test)
    want = ref.predict_pairs(test)
    np.testing.assert_allclose(var, want.delta_var, rtol=1e-8)
    np.testing.assert_allclose(mean, want.delta_mean, atol=1e-8)
    np.testing.assert_allclose(prob, want.prob, atol=1e-8)


def test_a_bad_adjacency_is_refused():
    with pytest.raises(ValueError, match="square"):
        S.laplacian_precision(np.ones((3, 4)))
