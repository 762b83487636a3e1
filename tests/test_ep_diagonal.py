"""EP's diagonal-prior path (``K`` given as its diagonal ``(n,)``); its linear algebra is tested
in ``test_linalg.py``.

References share no code with the path under test:
- one pair: EP is exact, so the difference's posterior and ``log Z`` equal 1-D quadrature;
- small problems: the naive dense NumPy EP of ``test_ep.py`` (imported, not re-implemented);
- larger problems (``n > 128``, where the blocked inverse is used): the dense-``K`` path, whose
  own references are in ``test_ep.py`` (it shares the site update with the diagonal path, not
  the factorisation, the triangular inverse, the marginals or the Gram product);
- the evidence gradient against central finite differences of the re-converged evidence.

In float32 (x64 off) EP stops at ``EP_TOL32`` and results are compared within ``EP_ATOL32``
(``helpers``); where EP is exact (one pair), within float32 round-off.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from helpers import EP_ATOL32, assert_close, ep_tol, float32_not_run, float64_only
from quadrature import probit_tilted_moments
from test_ep import EXACT_RTOL32, LOGZ_ATOL32, naive_ep

from bayesrank.inference import ep
from bayesrank.inference.ep.fit import validate_problem


def random_pairs(rng, n, m):
    """``m`` distinct unordered pairs of ``n`` entities, random orientation."""
    iu, ju = np.triu_indices(n, 1)
    sel = rng.choice(iu.size, size=m, replace=False)
    flip = rng.random(m) < 0.5
    a, b = iu[sel], ju[sel]
    return np.where(flip[:, None], np.stack([b, a], 1), np.stack([a, b], 1))


@pytest.mark.slow  # 3 s or more in the fast loop
@pytest.mark.float32
@pytest.mark.parametrize("schedule", ["sequential", "parallel"])
@pytest.mark.parametrize(("d", "pair"), [((1.3, 0.8), (0, 1)), ((25.0, 0.02), (1, 0))])
def test_one_pair_against_quadrature(d, pair, schedule):
    v0 = d[0] + d[1]
    m1, var, Z = probit_tilted_moments(v0)
    post = ep.fit(
        jnp.asarray(d), jnp.array([pair]), schedule=schedule, tol=ep_tol(1e-12), max_iter=500
    )
    assert bool(post.converged)
    i, j = pair
    assert_close(post.mean[i] - post.mean[j], m1, rtol=1e-8, atol=1e-10, rtol32=EXACT_RTOL32)
    dv = post.cov[i, i] + post.cov[j, j] - 2 * post.cov[i, j]
    assert_close(dv, var, rtol=1e-8, atol=1e-10, rtol32=EXACT_RTOL32)
    assert_close(post.log_evidence, np.log(Z), atol=1e-8, atol32=LOGZ_ATOL32)


@pytest.mark.float32
@pytest.mark.parametrize("seed", range(3))
def test_small_problems_against_naive_ep(seed):
    rng = np.random.default_rng(seed)
    n, m = 5, 7
    d = rng.uniform(0.2, 3.0, n)
    pairs = random_pairs(rng, n, m)
    mu_ref, Sigma_ref = naive_ep(np.diag(d), pairs, sweeps=200)
    post = ep.fit(jnp.asarray(d), jnp.asarray(pairs), tol=ep_tol(1e-11), max_iter=2000)
    assert bool(post.converged)
    assert_close(post.mean, mu_ref, atol=1e-7, atol32=EP_ATOL32)
    assert_close(post.cov, Sigma_ref, atol=1e-7, atol32=EP_ATOL32)


@pytest.mark.parametrize(("n", "m"), [(300, 600)])
@pytest.mark.slow
@float32_not_run(
    "slow (n = 300); float32's diagonal path is checked against the naive EP above, its "
    "blocked inverse in test_linalg.py"
)
def test_large_problems_match_the_dense_path(n, m):
    rng = np.random.default_rng(n)
    d = rng.uniform(0.5, 4.0, n)
    pairs = jnp.asarray(random_pairs(rng, n, m))
    kw = {"tol": 1e-11, "max_iter": 500}
    diag = ep.fit(jnp.asarray(d), pairs, **kw)
    dense = ep.fit(jnp.diag(jnp.asarray(d)), pairs, **kw)
    assert bool(diag.converged) and bool(dense.converged)
    np.testing.assert_allclose(diag.mean, dense.mean, atol=1e-9)
    np.testing.assert_allclose(diag.cov, dense.cov, atol=1e-9)
    np.testing.assert_allclose(diag.log_evidence, dense.log_evidence, rtol=1e-11)
    g_diag = jax.grad(lambda d: ep.fit(d, pairs, **kw).log_evidence)(jnp.asarray(d))
    g_dense = jax.grad(lambda K: ep.fit(K, pairs, **kw).log_evidence)(jnp.diag(jnp.asarray(d)))
    np.testing.assert_allclose(g_diag, jnp.diag(g_dense), atol=1e-9)


@float64_only(
    "central differences at h = 1e-5 checked to 1e-6: float32 rounds log Z (~5) by ~5e-7, "
    "~5e-2 in the difference quotient"
)
@pytest.mark.slow  # 3 s or more in the fast loop
def test_evidence_gradient_against_finite_differences():
    rng = np.random.default_rng(7)
    n = 6
    d = rng.uniform(0.5, 2.0, n)
    pairs = jnp.asarray(random_pairs(rng, n, 9))

    @jax.jit
    def evidence(d):
        return ep.fit(d, pairs, tol=1e-13, max_iter=2000).log_evidence

    grad = np.asarray(jax.grad(evidence)(jnp.asarray(d)))
    h = 1e-5
    for k in range(n):
        e = np.zeros(n)
        e[k] = h
        fd = (evidence(jnp.asarray(d + e)) - evidence(jnp.asarray(d - e))) / (2 * h)
        np.testing.assert_allclose(grad[k], fd, rtol=1e-6, atol=1e-8)


@pytest.mark.slow
@float32_not_run("slow (n = 200, m = 400); float32 EP with padded pairs: test_ep.py's padding test")
def test_vmap_with_padding_matches_a_loop():
    """A batch of diagonal priors with padded pairs: vmap equals unpadded fits one by one."""
    rng = np.random.default_rng(3)
    n, m_max = 200, 400
    ds, pairs, masks, refs = [], [], [], []
    for m in (400, 90):
        d = rng.uniform(0.5, 2.0, n)
        p = random_pairs(rng, n, m)
        refs.append(ep.fit(jnp.asarray(d), jnp.asarray(p)))
        ds.append(d)
        pairs.append(np.concatenate([p, np.zeros((m_max - m, 2), int)]))
        masks.append(np.arange(m_max) < m)
    batched = jax.jit(jax.vmap(lambda d, p, k: ep.fit(d, p, pair_mask=k)))(
        jnp.asarray(np.stack(ds)), jnp.asarray(np.stack(pairs)), jnp.asarray(np.stack(masks))
    )
    for b, ref in enumerate(refs):
        assert bool(batched.converged[b])
        np.testing.assert_allclose(batched.mean[b], ref.mean, atol=1e-9)
        np.testing.assert_allclose(batched.cov[b], ref.cov, atol=1e-9)
        np.testing.assert_allclose(batched.log_evidence[b], ref.log_evidence, rtol=1e-10)


def test_validate_problem_names_a_bad_diagonal_entry():
    with pytest.raises(ValueError, match=r"K\[2\] = -1.0"):
        validate_problem(np.array([1.0, 2.0, -1.0]), [[0, 1]])
    with pytest.raises(ValueError, match=r"K\[0\] = nan"):
        validate_problem(np.array([np.nan, 2.0]), [[0, 1]])
    validate_problem(np.array([1.0, 0.0]), [[0, 1]])
