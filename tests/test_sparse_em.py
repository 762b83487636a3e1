"""EM for a latent prior's variances (``bayesrank.learning.sparse_em``) against the same EM
written densely here with NumPy: the dense Laplace engine's mode on ``K = J P^-1 J^T``, the
latent posterior ``N(P^-1 J^T K^-1 xi_hat, (P + J^T A^T W A J)^-1)`` from dense inverses, and
the M-step ``v_b <- v_b (z_b^T P_b z_b + tr(P_b Sigma_bb)) / dim_b``."""

from __future__ import annotations

import jax
import numpy as np
import pytest
from scipy.stats import norm

from bayesrank.inference import laplace
from bayesrank.inference import sparse as S
from bayesrank.kernels import RBF
from bayesrank.kernels.lowrank import pivoted_cholesky
from bayesrank.learning.sparse_em import em_variances

pytestmark = pytest.mark.skipif(
    not jax.config.jax_enable_x64, reason="compares to a dense reference at 1e-3 (float64)"
)


def problem(n=90, m=700, seed=0):
    """Attributes (rank 12), six clusters of 15 entities as a membership relation (``iota =
    2``) and an entity effect; the preferences drawn with variances ``(2.25, 3, 1)`` times the
    model's, so that EM has somewhere to go. Each term is identifiable: a cluster's mean
    differs from an entity's effect and from the smooth attribute term."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 2))
    Phi = np.asarray(pivoted_cholesky(RBF(1.0, 1.0), X, 12).features)
    clusters = np.arange(n) % 6
    L = np.zeros((n, n))
    for g in range(6):
        idx = np.flatnonzero(clusters == g)
        L[np.ix_(idx, idx)] -= 1.0
        L[idx, idx] += len(idx)
    Q1 = L + np.eye(n) / 4.0
    D = np.full(n, 1 / 0.3)
    relation = rng.multivariate_normal(np.zeros(n), 3 * np.linalg.inv(Q1))
    xi = 1.5 * Phi @ rng.normal(size=12) + relation + rng.normal(size=n) * np.sqrt(0.3)
    i = rng.integers(0, n, m)
    j = (i + rng.integers(1, n, m)) % n
    pairs = np.where((xi[i] - xi[j] + rng.normal(size=m) > 0)[:, None], np.c_[i, j], np.c_[j, i])
    blocks = [
        S.membership_precision(np.arange(n), clusters, n, iota=2.0),
        S.diagonal_precision(1 / D),
    ]
    return Phi, Q1, D, pairs, S.latent_prior(Phi, blocks)


def dense_em_step(Phi, Q1, D, pairs, v):
    """One EM step at the variances ``v: (3,)``, densely (module docstring)."""
    n, r = Phi.shape
    A = np.zeros((len(pairs), n))
    A[np.arange(len(pairs)), pairs[:, 0]] = 1
    A[np.arange(len(pairs)), pairs[:, 1]] = -1
    J = np.hstack([Phi, np.eye(n), np.eye(n)])
    sl = [slice(0, r), slice(r, r + n), slice(r + n, r + 2 * n)]
    P = np.zeros((r + 2 * n, r + 2 * n))
    P[sl[0], sl[0]] = np.eye(r) / v[0]
    P[sl[1], sl[1]] = Q1 / v[1]
    P[sl[2], sl[2]] = np.diag(D) / v[2]
    Pinv = np.linalg.inv(P)
    K = J @ Pinv @ J.T
    xi = np.asarray(laplace.fit(K, pairs, tol=1e-12).mean)
    z = Pinv @ J.T @ np.linalg.solve(K, xi)
    d = A @ xi
    ratio = np.exp(norm.logpdf(d) - norm.logcdf(d))
    w = ratio * (d + ratio)
    Sigma = np.linalg.inv(P + J.T @ (A.T * w) @ A @ J)
    q = [z[s] @ P[s, s] @ z[s] + np.trace(P[s, s] @ Sigma[s, s]) for s in sl]
    return v * np.array(q) / np.array([r, n, n]), K


@pytest.mark.slow  # about 12 s
def test_em_ends_at_a_fixed_point_of_the_dense_em():
    """The sparse EM (SQUAREM, 256 common posterior draws) converges, and one exact dense EM
    step from its variances moves none of them by more than 3% (Monte Carlo's share), where
    the same step from the start moves them by far more; its posterior is the dense Laplace
    fit under the learned scales."""
    Phi, Q1, D, pairs, prior = problem()
    got = em_variances(prior, pairs, jax.random.key(0), n_samples=256, max_iter=60, tol=1e-5)
    assert got.converged
    step, K = dense_em_step(Phi, Q1, D, pairs, got.variances)
    assert np.max(np.abs(np.log(step / got.variances))) < 0.03
    first, _ = dense_em_step(Phi, Q1, D, pairs, np.ones(3))
    assert np.max(np.abs(np.log(first))) > 0.1
    np.testing.assert_allclose(got.fit.mean, laplace.fit(K, pairs, tol=1e-12).mean, atol=1e-6)


@pytest.mark.slow
def test_a_term_held_fixed_stays_at_one():
    _, _, _, pairs, prior = problem(n=40, m=200, seed=1)
    got = em_variances(prior, pairs, jax.random.key(0), learn=[True, False, True], max_iter=3)
    assert got.variances[1] == 1.0 and got.trace.shape == (2, 3)
    with pytest.raises(ValueError, match=r"learn must have shape \(3,\)"):
        em_variances(prior, pairs, jax.random.key(0), learn=[True, False])


def dense_evidence(Phi, Q1, D, pairs, v):
    K = v[0] * Phi @ Phi.T + v[1] * np.linalg.inv(Q1) + v[2] * np.diag(1 / D)
    return float(laplace.fit(K, pairs, tol=1e-12).log_evidence)


def dense_gradient(Phi, Q1, D, pairs, v, h=1e-4):
    """Central differences of the dense Laplace evidence in ``log v``."""
    out = []
    for b in range(3):
        up, down = np.array(v, float), np.array(v, float)
        up[b] *= np.exp(h)
        down[b] *= np.exp(-h)
        out.append((dense_evidence(Phi, Q1, D, pairs, up) - dense_evidence(Phi, Q1, D, pairs, down))
                   / (2 * h))  # fmt: skip
    return np.array(out)


@pytest.mark.slow  # about 20 s
def test_the_evidence_gradient_is_the_dense_evidences_finite_difference():
    """``evidence_gradient`` against central differences of the dense Laplace evidence in each
    ``log v_b``, at the start and at other variances: the mean over six keys (1,000 draws
    each) within 4 of its standard errors (the keys' spread) of the difference quotient, where
    the explicit (EM) part alone is off by more than 10% of the largest component."""
    from bayesrank.inference.sparse import evidence_gradient, scale_prior

    Phi, Q1, D, pairs, prior = problem()
    for v in ([1.0, 1.0, 1.0], [2.0, 0.3, 0.8]):
        current = scale_prior(prior, np.array(v))
        fit = S.mode(current, pairs)
        runs = [evidence_gradient(current, pairs, fit, jax.random.key(k), n_samples=1000)
                for k in range(6)]  # fmt: skip
        got = np.array([np.asarray(g) for g, _ in runs])
        q = np.mean([np.asarray(q) for _, q in runs], axis=0)
        want = dense_gradient(Phi, Q1, D, pairs, v)
        scale = np.max(np.abs(want))
        se = got.std(0, ddof=1) / np.sqrt(len(got))
        assert np.all(se < 0.05 * scale)
        assert np.all(np.abs(got.mean(0) - want) <= 4 * se + 1e-3 * scale)
        explicit = 0.5 * (q - np.array([12, 90, 90]))
        assert np.max(np.abs(explicit - want)) > 0.1 * scale  # the implicit term matters


@pytest.mark.slow  # about 15 s
def test_evidence_learning_ends_where_the_dense_evidence_is_flat():
    """``objective="evidence"``: at the learned variances the dense evidence's gradient is below
    a tenth of its size at the start, and the evidence is higher than EM's fixed point's."""
    Phi, Q1, D, pairs, prior = problem()
    got = em_variances(prior, pairs, jax.random.key(0), n_samples=256, max_iter=60, tol=1e-4,
                       objective="evidence")  # fmt: skip
    start = dense_gradient(Phi, Q1, D, pairs, np.ones(3))
    end = dense_gradient(Phi, Q1, D, pairs, got.variances)
    assert np.max(np.abs(end)) < 0.1 * np.max(np.abs(start))
    em = em_variances(prior, pairs, jax.random.key(0), n_samples=256, max_iter=60, tol=1e-4)
    assert dense_evidence(Phi, Q1, D, pairs, got.variances) >= dense_evidence(
        Phi, Q1, D, pairs, em.variances
    )
    with pytest.raises(ValueError, match="objective"):
        em_variances(prior, pairs, jax.random.key(0), objective="bfgs")
