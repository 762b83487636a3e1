"""EP with ``precision="mixed"``: float32 sweeps, then float64 to the same fixed point.

References share no code with the float32 phase: the naive dense NumPy EP of ``test_ep.py``
(small problems) and, for larger ones, the full-precision path run to a tight tolerance (whose
own references are in ``test_ep.py`` and ``test_ep_diagonal.py``).

With x64 off there is no float64: ``precision="mixed"`` is then float32 EP (``ep.run``), which
the float32 run checks against the naive EP; the tests of the float32-then-float64 path itself
are float64's (``MIXED``).
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from helpers import EP_ATOL32, assert_close, ep_tol, float64_only
from test_ep import naive_ep
from test_ep_diagonal import random_pairs

from bayesrank.inference import ep

#: Why the tests of the mixed path itself are float64's.
MIXED = float64_only(
    "tests the float32-then-float64 path, which needs float64 input: with x64 off "
    'precision="mixed" is float32 EP, the same computation as precision="full"'
)


def rbf(rng, n, d=3, lengthscale=1.0):
    X = rng.normal(size=(n, d))
    d2 = np.sum((X[:, None] - X[None]) ** 2, axis=-1)
    return np.exp(-0.5 * d2 / lengthscale**2)


@pytest.mark.float32
@pytest.mark.slow
def test_small_problem_against_naive_ep():
    """(float32: ``precision="mixed"`` with x64 off is float32 EP, and reaches its accuracy.)"""
    rng = np.random.default_rng(0)
    n, m = 6, 9
    K = rbf(rng, n) + 0.1 * np.eye(n)
    pairs = random_pairs(rng, n, m)
    mu_ref, Sigma_ref = naive_ep(K, pairs, sweeps=200)
    tol = ep_tol(1e-11)
    post = ep.fit(jnp.asarray(K), jnp.asarray(pairs), tol=tol, max_iter=2000, precision="mixed")
    assert bool(post.converged)
    assert_close(post.mean, mu_ref, atol=1e-8, atol32=EP_ATOL32)
    assert_close(post.cov, Sigma_ref, atol=1e-8, atol32=EP_ATOL32)


@pytest.mark.parametrize("prior", ["diagonal", "rbf"])
@pytest.mark.slow
@MIXED
def test_mixed_reaches_the_float64_fixed_point(prior):
    """At the default tol both paths are within ~1e-7 of the tight fixed point; at a tight tol
    the mixed path reaches it to float64 accuracy (float32 round-off does not persist). The
    evidence gradient is a function of the sites and ``K`` alone (``_evidence``), so equal sites
    give equal gradients."""
    rng = np.random.default_rng(1)
    n, m = 200, 400  # n > 128: the diagonal path's blocked inverse
    K = rng.uniform(0.5, 3.0, n) if prior == "diagonal" else 2.0 * rbf(rng, n, lengthscale=0.7)
    K, pairs = jnp.asarray(K), jnp.asarray(random_pairs(rng, n, m))
    ref = ep.fit(K, pairs, tol=1e-12, max_iter=500)
    tight = ep.fit(K, pairs, tol=1e-12, max_iter=500, precision="mixed")
    assert bool(tight.converged)
    np.testing.assert_allclose(tight.mean, ref.mean, atol=1e-10)
    np.testing.assert_allclose(tight.cov, ref.cov, atol=1e-10)
    np.testing.assert_allclose(tight.log_evidence, ref.log_evidence, rtol=1e-12)
    default = ep.fit(K, pairs, precision="mixed")
    assert bool(default.converged)
    assert default.mean.dtype == jnp.float64 and default.cov.dtype == jnp.float64
    # tol bounds the last sweep's change, not the distance to the fixed point: with the
    # contraction rate r of these problems (< 0.5) that distance is below tol r / (1 - r) plus
    # round-off; 5 tol leaves room for a slower rate where float32 is coarser (a GPU's TF32)
    np.testing.assert_allclose(default.mean, ref.mean, atol=5e-6)
    np.testing.assert_allclose(default.cov, ref.cov, atol=5e-6)
    np.testing.assert_allclose(default.log_evidence, ref.log_evidence, rtol=1e-8)


@pytest.mark.slow
@MIXED
def test_warm_start_and_vmap_with_padding():
    """Warm-started from converged sites, mixed EP stays there; vmap with padding equals a loop.

    (From converged sites one float32 sweep, then two float64 ones to wash out float32's
    round-off: a warm start near the fixed point gains nothing from the mixed path.)"""
    rng = np.random.default_rng(2)
    n, m_max = 80, 160
    Ks, pairs, masks, refs = [], [], [], []
    for m in (160, 40):
        K = rbf(rng, n, lengthscale=0.8)
        p = random_pairs(rng, n, m)
        refs.append(ep.fit(jnp.asarray(K), jnp.asarray(p), tol=1e-10, max_iter=500))
        Ks.append(K)
        pairs.append(np.concatenate([p, np.zeros((m_max - m, 2), int)]))
        masks.append(np.arange(m_max) < m)
    warm = ep.fit(jnp.asarray(Ks[0]), jnp.asarray(pairs[0]), sites=refs[0].sites, precision="mixed")
    assert int(warm.n_iter) <= 3
    np.testing.assert_allclose(warm.mean, refs[0].mean, atol=1e-7)

    def one(K, p, k):
        return ep.fit(K, p, pair_mask=k, tol=1e-10, max_iter=500, precision="mixed")

    batched = jax.jit(jax.vmap(one))(
        jnp.asarray(np.stack(Ks)), jnp.asarray(np.stack(pairs)), jnp.asarray(np.stack(masks))
    )
    for b, ref in enumerate(refs):
        assert bool(batched.converged[b])
        np.testing.assert_allclose(batched.mean[b], ref.mean, atol=1e-8)
        np.testing.assert_allclose(batched.cov[b], ref.cov, atol=1e-8)


@pytest.mark.slow
@float64_only(
    "the float64 restart after float32 overflows is the thing tested; with x64 off there is no "
    "float64 to restart in (and the prior variance 1e39 is inf in float32)"
)
def test_float32_overflow_starts_over_in_float64():
    """An entity in no pair with a prior variance beyond float32's range: float32 overflows, the
    float64 restart does not, and the result equals full precision."""
    rng = np.random.default_rng(4)
    n, m = 8, 12
    d = rng.uniform(0.5, 2.0, n + 1)
    d[n] = 1e39  # entity n is in no pair
    pairs = jnp.asarray(random_pairs(rng, n, m))
    full = ep.fit(jnp.asarray(d), pairs, tol=1e-10, max_iter=500)
    mixed = ep.fit(jnp.asarray(d), pairs, tol=1e-10, max_iter=500, precision="mixed")
    assert bool(full.converged) and bool(mixed.converged)
    assert np.all(np.isfinite(mixed.cov)) and np.isfinite(mixed.log_evidence)
    np.testing.assert_allclose(mixed.mean, full.mean, atol=1e-9)
    np.testing.assert_allclose(mixed.cov[:n, :n], full.cov[:n, :n], atol=1e-9)
    np.testing.assert_allclose(mixed.cov[n, n], 1e39, rtol=1e-12)
    np.testing.assert_allclose(mixed.log_evidence, full.log_evidence, rtol=1e-12)


@pytest.mark.slow
@pytest.mark.parametrize("scale", [1e-6, 1e4])
@MIXED
def test_extreme_kernel_scales(scale):
    """Tiny and large scales (float32's relative noise floor): same fixed point as full."""
    rng = np.random.default_rng(5)
    n, m = 30, 60
    K = scale * (rbf(rng, n, lengthscale=1.5) + 0.1 * np.eye(n))
    pairs = jnp.asarray(random_pairs(rng, n, m))
    full = ep.fit(jnp.asarray(K), pairs, max_iter=500)
    mixed = ep.fit(jnp.asarray(K), pairs, max_iter=500, precision="mixed")
    assert bool(full.converged) and bool(mixed.converged)
    np.testing.assert_allclose(mixed.mean, full.mean, atol=1e-5 * max(1.0, scale**0.5))
    np.testing.assert_allclose(mixed.log_evidence, full.log_evidence, rtol=1e-7)


def test_precision_is_checked():
    with pytest.raises(ValueError, match="precision must be 'full' or 'mixed', got 'half'"):
        ep.fit(jnp.ones(3), jnp.asarray([[0, 1]]), precision="half")
