"""Anderson-accelerated parallel EP (``accelerate=True``): EP's fixed point in fewer sweeps.

References: the sequential schedule (rank-one updates, a separate code path) and the naive dense
NumPy EP of ``test_ep``; a Python loop over queries for ``vmap`` with padding.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from test_ep import naive_ep, random_problem

from bayesrank.inference import ep
from bayesrank.kernels import RBF

pytestmark = pytest.mark.skipif(not jax.config.jax_enable_x64, reason="float64 references")


def separable(seed, n=25, scale=300.0, rho=0.3):
    """Pairs consistent with a linear utility under a large RBF scale: slow parallel EP."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 2))
    K = RBF(np.sqrt(scale), rho)(jnp.asarray(X)) + 1e-6 * jnp.eye(n)
    u = X @ rng.normal(size=2)
    pairs = np.array([rng.choice(n, 2, replace=False) for _ in range(4 * n)])
    flip = u[pairs[:, 0]] < u[pairs[:, 1]]
    pairs[flip] = pairs[flip][:, ::-1]
    return K, jnp.asarray(pairs)


def test_accelerated_fixed_point_is_eps_in_fewer_sweeps():
    K, pairs = separable(0)
    plain = ep.fit(K, pairs, max_iter=2000, tol=1e-9)
    fast = ep.fit(K, pairs, max_iter=2000, tol=1e-9, accelerate=True)
    sequential = ep.fit(K, pairs, max_iter=2000, tol=1e-9, schedule="sequential")
    assert bool(plain.converged) and bool(fast.converged) and bool(sequential.converged)
    assert int(fast.n_iter) < int(plain.n_iter)
    sd = float(jnp.sqrt(jnp.max(jnp.diag(K))))
    np.testing.assert_allclose(fast.mean, sequential.mean, atol=1e-6 * sd)
    np.testing.assert_allclose(fast.cov, sequential.cov, atol=1e-6 * sd**2)
    np.testing.assert_allclose(fast.log_evidence, sequential.log_evidence, rtol=1e-8)


def test_accelerated_against_naive_ep():
    K, pairs = random_problem(3)
    mean, cov = naive_ep(np.asarray(K), np.asarray(pairs))[:2]
    fast = ep.fit(K, pairs, tol=1e-10, max_iter=500, accelerate=True)
    np.testing.assert_allclose(fast.mean, mean, atol=1e-8)
    np.testing.assert_allclose(fast.cov, cov, atol=1e-8)


def test_accelerated_vmap_with_padding_matches_a_loop():
    problems = [separable(s, n=n) for s, n in ((4, 8), (5, 12))]
    n, m = 12, 48
    Ks = jnp.stack([jnp.eye(n).at[: K.shape[0], : K.shape[0]].set(K) for K, _ in problems])
    pairs = jnp.stack([jnp.zeros((m, 2), int).at[: len(p)].set(p) for _, p in problems])
    mask = jnp.stack([jnp.arange(m) < len(p) for _, p in problems])
    batched = jax.vmap(lambda K, p, k: ep.fit(K, p, pair_mask=k, tol=1e-9, accelerate=True))(
        Ks, pairs, mask
    )
    single = jax.jit(lambda K, p: ep.fit(K, p, tol=1e-9, accelerate=True))
    for b, (K, p) in enumerate(problems):
        one = single(K, p)
        k = K.shape[0]
        np.testing.assert_allclose(batched.mean[b, :k], one.mean, atol=1e-8)
        np.testing.assert_allclose(batched.log_evidence[b], one.log_evidence, rtol=1e-9)


def test_accelerate_needs_the_parallel_schedule():
    K, pairs = random_problem(0)
    with pytest.raises(ValueError, match="parallel"):
        ep.fit(K, pairs, schedule="sequential", accelerate=True)
