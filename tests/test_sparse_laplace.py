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


def test_the_root_reproduces_the_precision():
    """``Q = sum_e omega_e (e_i - e_j)(e_i - e_j)^T + diag(diagonal)``, summed by hand."""
    W, _ = graph_problem(30, 1)
    Q = S.laplacian_precision(W, beta=0.7, iota=2.0, weight=1.5)
    root = S.laplacian_root(W, beta=0.7, iota=2.0, weight=1.5)
    total = np.diag(np.asarray(root.diagonal))
    for (i, j), omega in zip(np.asarray(root.edges), np.asarray(root.omega), strict=True):
        a = np.zeros(30)
        a[i], a[j] = 1.0, -1.0
        total += omega * np.outer(a, a)
    np.testing.assert_allclose(total, dense(Q), atol=1e-14)


def test_sampled_variances_cover_the_exact_ones_at_their_stated_error():
    """2,000 draws of ``N(0, H^-1)``: each pair's estimated variance within 4.5 of its own
    standard errors of the exact one (CG, checked against the dense engine above); the stated
    error is the draws' rate, ``sqrt(2 / S)`` relative for a Gaussian difference."""
    W, pairs = graph_problem(seed=2)
    Q = S.laplacian_precision(W, beta=1.0, iota=1.5, weight=3.0)
    root = S.laplacian_root(W, beta=1.0, iota=1.5, weight=3.0)
    fit = S.mode(Q, pairs)
    rng = np.random.default_rng(3)
    test = np.c_[rng.integers(0, 200, 30), rng.integers(0, 200, 30)]
    test = test[test[:, 0] != test[:, 1]]
    _, _, exact = S.pair_predictions(Q, pairs, fit, test)
    _, _, var, se = S.sampled_pair_predictions(
        Q, root, pairs, fit, test, jax.random.key(0), n_samples=2000
    )
    z = (np.asarray(var) - np.asarray(exact)) / np.asarray(se)
    assert np.max(np.abs(z)) < 4.5
    np.testing.assert_allclose(se / var, np.sqrt(2 / 2000), rtol=0.15)
