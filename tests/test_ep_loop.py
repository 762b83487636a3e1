"""EP as ``init`` / ``step``: a user's own loop over ``step`` runs exactly the sweeps of ``run``
(uninformative pairs masked, Anderson acceleration carried in the state), and a padded problem
gives the unpadded answer. Reference: ``ep.run`` itself, and a dense NumPy posterior from the
sites (``Sigma = (K^-1 + S)^-1``), which shares no code with the loop. In float32 (x64 off) EP
stops at ``EP_TOL32`` and is compared within ``EP_ATOL32`` (``helpers``)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from helpers import EP_ATOL32, assert_close, ep_tol, float32_param

from bayesrank.inference import ep
from bayesrank.kernels import RBF


def problem_with_duplicates(seed=0, n=12, m=30):
    """Entities 0 and 1 share their features: under an RBF kernel their difference has zero
    prior variance, so pair (0, 1) is uninformative and must keep a zero site."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 2))
    X[1] = X[0]
    K = np.asarray(RBF(3.0, 0.8)(X))
    i = rng.integers(0, n, m)
    j = (i + rng.integers(1, n, m)) % n
    pairs = np.r_[[[0, 1]], np.c_[i, j]]
    return jnp.asarray(K), jnp.asarray(pairs)


@pytest.mark.parametrize(  # float32 run (time): accelerated; both pass in float32
    "accelerate", [False, float32_param(True)], ids=["plain", "accelerated"]
)
@pytest.mark.slow  # 3 s or more in the fast loop
def test_a_loop_over_step_is_run(accelerate):
    K, pairs = problem_with_duplicates()
    sweeps = 25
    state = ep.init(K, pairs, accelerate=accelerate)
    assert not bool(state.active[0])  # the duplicate pair is decided uninformative at init
    looped = jax.lax.fori_loop(0, sweeps, lambda _, s: ep.step(s, pairs), state)
    ran = ep.run(K, pairs, max_iter=sweeps, tol=0.0, accelerate=accelerate)
    assert int(looped.n_iter) == int(ran.n_iter) == sweeps
    assert_close(looped.mean, ran.mean, atol=1e-12)
    assert_close(looped.sites.tau, ran.sites.tau, atol=1e-12)
    assert float(looped.sites.tau[0]) == 0.0 and float(looped.sites.nu[0]) == 0.0
    # the state's posterior is the sites' (dense NumPy, Woodbury, no shared code)
    tau, nu = np.asarray(looped.sites.tau, float), np.asarray(looped.sites.nu, float)
    A = np.zeros((len(pairs), K.shape[0]))
    A[np.arange(len(pairs)), np.asarray(pairs[:, 0])] = 1
    A[np.arange(len(pairs)), np.asarray(pairs[:, 1])] = -1
    Kn, G = np.asarray(K, float), np.sqrt(tau)[:, None] * A  # S = G^T G; K is singular: no K^-1
    GK = G @ Kn
    Sigma = Kn - GK.T @ np.linalg.solve(np.eye(len(G)) + GK @ G.T, GK)
    # float32: the state's posterior from its sites against the same in float64 (NumPy) is the
    # round-off of a solve with I + G K G^T (condition ~50) on means ~2: a few ulps of that,
    # 4 * 50 * 2 * eps32 = 5e-5
    assert_close(looped.mean, Sigma @ (A.T @ nu), atol=1e-9, atol32=5e-5)


# passes in float32; not in the float32 run (time)
def test_scan_over_step_converges_to_the_fixed_point_of_fit():
    K, pairs = problem_with_duplicates(1)
    state = ep.init(K, pairs, accelerate=True)
    state, _ = jax.lax.scan(lambda s, _: (ep.step(s, pairs), None), state, None, length=60)
    fit = ep.fit(K, pairs, tol=ep_tol(1e-11), max_iter=500)
    assert_close(state.mean, fit.mean, atol=1e-8, atol32=EP_ATOL32)
    assert int(fit.n_uninformative) == 1


def test_step_options():
    K, pairs = problem_with_duplicates(2)
    with pytest.raises(ValueError, match="residual_tol needs an accelerated state"):
        ep.step(ep.init(K, pairs), pairs, residual_tol=1e-6)
    with pytest.raises(ValueError, match="accelerate=True needs schedule='parallel'"):
        ep.step(ep.init(K, pairs, accelerate=True), pairs, schedule="sequential")
