"""EP with 2-D sites against quadrature, a naive dense EP, importance sampling and invariances.

References share no code with ``bayesrank.inference.ep``:
- one pair on two entities: EP is exact, so the posterior of the difference and ``log Z`` equal
  1-D quadrature (``scipy.integrate.quad``); tolerance 1e-8;
- a naive EP in NumPy (dense inverses, site-by-site in moment form, scipy's normal cdf) for
  small problems: same fixed point, tolerance 1e-7;
- importance sampling from the prior: the exact posterior, which EP only approximates; the
  tolerance is 5 Monte Carlo standard errors plus an allowance for EP's approximation error.

In float32 (x64 off) EP stops at ``EP_TOL32`` and results are compared within ``EP_ATOL32``
(``helpers``); where EP is exact (one pair), within float32 round-off.
"""

import itertools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from helpers import (
    EP_ATOL32,
    assert_close,
    ep_tol,
    float32_not_run,
    float32_param,
    float64_only,
)
from quadrature import probit_tilted_moments
from scipy import stats

from bayesrank.diagnostics import ConvergenceWarning
from bayesrank.inference import ep
from bayesrank.inference.ep.fit import validate_problem
from bayesrank.inference.ep.sites import site_natural_parameters

X64 = jax.config.jax_enable_x64
#: One pair: EP is exact in two sweeps, so in float32 its error is round-off alone, a few
#: roundings of the probit ratio, a reciprocal and the posterior update: 16 ulps (relative),
#: 8 ulps of an O(1) ``log Z`` (absolute).
EXACT_RTOL32, LOGZ_ATOL32 = 16 * np.finfo(np.float32).eps, 8 * np.finfo(np.float32).eps


def random_problem(seed, n=5, m=7):
    rng = np.random.default_rng(seed)
    A = rng.normal(size=(n, n))
    K = A @ A.T / n + 0.3 * np.eye(n)
    pairs = []
    while len(pairs) < m:
        i, j = rng.choice(n, 2, replace=False)
        pairs.append((i, j))
    return K, np.array(pairs)


def naive_ep(K, pairs, sweeps=300):
    """Reference EP: sequential, site by site, posterior recomputed by dense inversion."""
    n, m = len(K), len(pairs)
    tau, nu = np.zeros(m), np.zeros(m)
    Kinv = np.linalg.inv(K)
    for _ in range(sweeps):
        for s, (i, j) in enumerate(pairs):
            a = np.zeros(n)
            a[i], a[j] = 1.0, -1.0
            S = sum(t * np.outer(b, b) for t, b in zip(tau, _dirs(pairs, n), strict=True))
            eta = sum(v * b for v, b in zip(nu, _dirs(pairs, n), strict=True))
            Sigma = np.linalg.inv(Kinv + S)
            mu = Sigma @ eta
            v, mm = a @ Sigma @ a, a @ mu
            v_c = 1.0 / (1.0 / v - tau[s])
            m_c = v_c * (mm / v - nu[s])
            z = m_c / np.sqrt(1 + v_c)
            r = stats.norm.pdf(z) / stats.norm.cdf(z)
            mean_hat = m_c + v_c * r / np.sqrt(1 + v_c)
            var_hat = v_c - v_c**2 * r * (z + r) / (1 + v_c)
            tau[s] = 1 / var_hat - 1 / v_c
            nu[s] = mean_hat / var_hat - m_c / v_c
    S = sum(t * np.outer(b, b) for t, b in zip(tau, _dirs(pairs, n), strict=True))
    eta = sum(v * b for v, b in zip(nu, _dirs(pairs, n), strict=True))
    Sigma = np.linalg.inv(Kinv + S)
    return Sigma @ eta, Sigma


def _dirs(pairs, n):
    out = []
    for i, j in pairs:
        a = np.zeros(n)
        a[i], a[j] = 1.0, -1.0
        out.append(a)
    return out


def diff_moments(post, i=0, j=1):
    return (
        post.mean[i] - post.mean[j],
        post.cov[i, i] + post.cov[j, j] - 2 * post.cov[i, j],
    )


@pytest.mark.float32
@pytest.mark.parametrize("schedule", ["sequential", "parallel"])
@pytest.mark.parametrize(
    ("K", "pair"),
    [
        ([[1.3, 0.4], [0.4, 0.8]], (0, 1)),
        ([[1.3, 0.4], [0.4, 0.8]], (1, 0)),
        ([[25.0, -3.0], [-3.0, 40.0]], (0, 1)),
        ([[0.01, 0.0], [0.0, 0.02]], (1, 0)),
    ],
)
@pytest.mark.slow  # 3 s or more in the fast loop
def test_one_pair_against_quadrature(K, pair, schedule):
    K = np.array(K)
    a = np.zeros(2)
    a[pair[0]], a[pair[1]] = 1, -1
    v0 = a @ K @ a  # prior variance of d = xi_i - xi_j

    m1, var, Z = probit_tilted_moments(v0)
    post = ep.fit(
        jnp.asarray(K), jnp.array([pair]), schedule=schedule, tol=ep_tol(1e-12), max_iter=500
    )
    assert bool(post.converged)
    dm, dv = diff_moments(post, *pair)
    assert_close(dm, m1, rtol=1e-8, atol=1e-10, rtol32=EXACT_RTOL32)
    assert_close(dv, var, rtol=1e-8, atol=1e-10, rtol32=EXACT_RTOL32)
    assert_close(post.log_evidence, np.log(Z), atol=1e-8, atol32=LOGZ_ATOL32)
    # Exact conditioning of the Gaussian prior on d carries over to the individual entities.
    gain = K @ a / v0
    assert_close(post.mean, gain * m1, rtol=1e-8, atol=1e-10, rtol32=EXACT_RTOL32)


@pytest.mark.parametrize("seed", [0, float32_param(1), float32_param(2), 3])  # float32: 2 sizes
@pytest.mark.parametrize("schedule", ["sequential", "parallel"])
def test_against_naive_ep(seed, schedule):
    K, pairs = random_problem(seed, n=4 + seed % 3, m=6 + seed)
    mu_ref, Sigma_ref = naive_ep(K, pairs, sweeps=200)
    post = ep.fit(
        jnp.asarray(K), jnp.asarray(pairs), schedule=schedule, tol=ep_tol(1e-11), max_iter=2000
    )
    assert bool(post.converged)
    assert_close(post.mean, mu_ref, atol=1e-7, atol32=EP_ATOL32)
    assert_close(post.cov, Sigma_ref, atol=1e-7, atol32=EP_ATOL32)
    prec, shift = site_natural_parameters(post.sites)
    assert prec.shape == (len(pairs), 2, 2) and shift.shape == (len(pairs), 2)
    np.testing.assert_allclose(prec[:, 0, 0], -prec[:, 0, 1])  # rank one along [1, -1]


def test_against_importance_sampling():
    """EP approximates the exact posterior: compare with 400k prior samples weighted by the data.
    (Its tolerances, Monte Carlo error and EP's own, are far above float32's round-off.)"""
    K, pairs = random_problem(11, n=4, m=5)
    rng = np.random.default_rng(0)
    xs = rng.multivariate_normal(np.zeros(4), K, size=400_000)
    logw = stats.norm.logcdf(xs[:, pairs[:, 0]] - xs[:, pairs[:, 1]]).sum(1)
    w = np.exp(logw - logw.max())
    w /= w.sum()
    ess = 1 / np.sum(w**2)
    mean_is = w @ xs
    sd_is = np.sqrt(w @ (xs - mean_is) ** 2)
    q = [(i, j) for i, j in itertools.combinations(range(4), 2)]
    prob_is = np.array([w @ stats.norm.cdf(xs[:, i] - xs[:, j]) for i, j in q])
    logz_is = np.log(np.mean(np.exp(logw)))
    post = ep.fit(jnp.asarray(K), jnp.asarray(pairs), tol=ep_tol(1e-10), max_iter=1000)
    se_mean = sd_is / np.sqrt(ess)
    # EP's own error on problems like this is of order 1e-2 in means (Kuss & Rasmussen 2005).
    np.testing.assert_array_less(np.abs(post.mean - mean_is), 5 * se_mean + 0.03)
    np.testing.assert_array_less(np.abs(np.sqrt(np.diag(post.cov)) - sd_is), 5 * se_mean + 0.03)
    dm = np.array([post.mean[i] - post.mean[j] for i, j in q])
    dv = np.array([post.cov[i, i] + post.cov[j, j] - 2 * post.cov[i, j] for i, j in q])
    prob_ep = stats.norm.cdf(dm / np.sqrt(1 + dv))
    np.testing.assert_array_less(np.abs(prob_ep - prob_is), 0.01)
    assert abs(float(post.log_evidence) - logz_is) < 0.02


# passes in float32; not in the float32 run (time)
def test_schedules_agree_and_order_and_entity_permutation_invariance():
    K, pairs = random_problem(3, n=6, m=10)
    tol, close = ep_tol(1e-11), {"atol": 1e-8, "atol32": EP_ATOL32}
    ref = ep.fit(jnp.asarray(K), jnp.asarray(pairs), schedule="sequential", tol=tol)
    par = ep.fit(jnp.asarray(K), jnp.asarray(pairs), schedule="parallel", tol=tol, max_iter=1000)
    assert_close(par.mean, ref.mean, **close)
    assert_close(par.cov, ref.cov, **close)
    assert_close(par.log_evidence, ref.log_evidence, **close)
    order = np.random.default_rng(1).permutation(len(pairs))
    shuffled = ep.fit(jnp.asarray(K), jnp.asarray(pairs[order]), schedule="sequential", tol=tol)
    assert_close(shuffled.mean, ref.mean, **close)
    assert_close(shuffled.log_evidence, ref.log_evidence, **close)
    perm = np.random.default_rng(2).permutation(6)  # entity perm[k] becomes entity k
    inv = np.argsort(perm)
    moved = ep.fit(jnp.asarray(K[np.ix_(perm, perm)]), jnp.asarray(inv[pairs]), tol=tol)
    assert_close(moved.mean, ref.mean[perm], **close)
    assert_close(moved.cov, ref.cov[np.ix_(perm, perm)], **close)


@pytest.mark.parametrize("schedule", [float32_param("sequential"), "parallel"])  # float32: one
def test_padding_gives_the_unpadded_answer(schedule):
    from bayesrank.kernels import mask_covariance

    K, pairs = random_problem(4, n=5, m=6)
    tol = ep_tol(1e-11)
    ref = ep.fit(jnp.asarray(K), jnp.asarray(pairs), schedule=schedule, tol=tol, max_iter=1000)
    n_pad, m_pad = 8, 9
    Kp = np.full((n_pad, n_pad), 0.7)
    Kp[:5, :5] = K
    mask = np.arange(n_pad) < 5
    pairs_p = np.vstack([pairs, [[0, 1]] * (m_pad - 6)])
    pmask = np.arange(m_pad) < 6
    post = ep.fit(
        mask_covariance(jnp.asarray(Kp), jnp.asarray(mask)),
        jnp.asarray(pairs_p),
        pair_mask=jnp.asarray(pmask),
        schedule=schedule,
        tol=tol,
        max_iter=1000,
    )
    assert_close(post.mean[:5], ref.mean, atol=1e-9, atol32=EP_ATOL32)
    assert_close(post.cov[:5, :5], ref.cov, atol=1e-9, atol32=EP_ATOL32)
    assert_close(post.log_evidence, ref.log_evidence, atol=1e-9, atol32=EP_ATOL32)
    assert_close(post.cov[5:, 5:], np.eye(3), atol=1e-9, atol32=EP_ATOL32)


# passes in float32; not in the float32 run (time)
@pytest.mark.slow
def test_jit_vmap_and_loop_agree_and_no_retrace():
    problems = [random_problem(s, n=5, m=7) for s in range(3)]
    Ks = jnp.asarray(np.stack([p[0] for p in problems]))
    Ps = jnp.asarray(np.stack([p[1] for p in problems]))
    traces = []

    def one(K, pairs):
        traces.append(1)
        return ep.fit(K, pairs, tol=ep_tol(1e-10), max_iter=500)

    batched = jax.jit(jax.vmap(one))(Ks, Ps)
    jitted = jax.jit(one)
    for b in range(3):
        eager = ep.fit(Ks[b], Ps[b], tol=ep_tol(1e-10), max_iter=500)
        single = jitted(Ks[b], Ps[b])
        for out in (single, jax.tree_util.tree_map(lambda x, b=b: x[b], batched)):
            assert_close(out.mean, eager.mean, atol=1e-9, atol32=EP_ATOL32)
            assert_close(out.log_evidence, eager.log_evidence, atol=1e-9, atol32=EP_ATOL32)
    n_traces = len(traces)
    jitted(Ks[0] * 1.1, Ps[0])  # same shapes: no new trace
    assert len(traces) == n_traces


@pytest.mark.slow
@float64_only(
    "central differences at h = 1e-5 checked to 1e-5: float32 rounds log Z (~5) by ~5e-7, "
    "so the difference quotient carries ~5e-2 of round-off"
)
def test_evidence_gradient_against_finite_differences_of_reconverged_evidence():
    from bayesrank.kernels import RBF

    rng = np.random.default_rng(5)
    X = rng.normal(size=(6, 2))
    _, pairs = random_problem(5, n=6, m=9)
    pairs = jnp.asarray(pairs)

    def evidence(log_rho):
        K = RBF(1.5, jnp.exp(log_rho))(X) + 1e-3 * jnp.eye(6)
        return ep.fit(K, pairs, tol=1e-12, max_iter=2000).log_evidence

    x0, h = 0.2, 1e-5
    grad = jax.grad(evidence)(x0)
    fd = (evidence(x0 + h) - evidence(x0 - h)) / (2 * h)
    np.testing.assert_allclose(grad, fd, rtol=1e-5)


def dense_log_evidence(K, pairs, tau, nu):
    """Reference ``log Z_EP`` by dense inverses (the textbook formula; differentiable by jax)."""
    n, m = K.shape[0], len(pairs)
    A = jnp.zeros((m, n)).at[jnp.arange(m), pairs[:, 0]].set(1.0)
    A = A.at[jnp.arange(m), pairs[:, 1]].set(-1.0)
    S = A.T @ (tau[:, None] * A)
    Sigma = jnp.linalg.inv(jnp.linalg.inv(K) + S)
    mu = Sigma @ (A.T @ nu)
    mm, v = A @ mu, jnp.diag(A @ Sigma @ A.T)
    v_c = 1.0 / (1.0 / v - tau)
    m_c = v_c * (mm / v - nu)
    terms = (
        jax.scipy.stats.norm.logcdf(m_c / jnp.sqrt(1 + v_c))
        + 0.5 * jnp.log(1 + tau * v_c)
        - 0.5 * mm**2 / v
        + 0.5 * m_c**2 / v_c
    )
    _, logdet = jnp.linalg.slogdet(jnp.eye(n) + K @ S)
    return jnp.sum(terms) - 0.5 * logdet + 0.5 * mu @ (A.T @ nu)


@pytest.mark.slow
@float32_not_run(
    "slow (autodiff through dense inverses); float32's log Z is checked against quadrature in "
    "test_one_pair_against_quadrature and under padding"
)
def test_evidence_and_its_closed_form_gradient_at_arbitrary_sites():
    """Away from a fixed point too: value and dlogZ/dK against autodiff of dense inverses."""
    K, pairs = random_problem(11, n=6, m=9)
    rng = np.random.default_rng(11)
    sites = ep.Sites(jnp.asarray(rng.uniform(0.05, 0.6, 9)), jnp.asarray(rng.normal(size=9)))
    mask = np.ones(9, dtype=bool)
    mask[4] = False  # a padded pair: no site, no term
    keep = np.flatnonzero(mask)
    K, pairs = jnp.asarray(K), jnp.asarray(pairs)

    def ours(K):
        return ep.log_evidence(K, pairs, sites, jnp.asarray(mask))

    def ref(K):
        return dense_log_evidence(K, pairs[keep], sites.tau[keep], sites.nu[keep])

    np.testing.assert_allclose(ours(K), ref(K), rtol=1e-10)
    g_ref = jax.grad(ref)(K)
    np.testing.assert_allclose(jax.grad(ours)(K), 0.5 * (g_ref + g_ref.T), atol=1e-9)
    # through a kernel's hyperparameter, under jit
    direction = jnp.asarray(rng.normal(size=(6, 6)))
    direction = direction @ direction.T
    d_ours = jax.jit(jax.grad(lambda t: ours(K + t * direction)))(0.0)
    d_ref = jax.grad(lambda t: ref(K + t * direction))(0.0)
    np.testing.assert_allclose(d_ours, d_ref, rtol=1e-9)


@pytest.mark.float32
@pytest.mark.parametrize("schedule", ["sequential", "parallel"])
@pytest.mark.parametrize("scale", [1e-6, 1.0, 1e4])
def test_hard_cases_converge_without_nan(schedule, scale):
    rng = np.random.default_rng(6)
    n = 8
    A = rng.normal(size=(n, n))
    K = scale * (A @ A.T / n + 0.1 * np.eye(n))
    pairs = np.array(
        [[0, 1], [1, 0], [0, 1], [0, 1]]  # contradicting and duplicated
        + [[0, k] for k in range(2, n)]  # many pairs on one entity
        + [[k, 0] for k in range(2, 4)]
        + [[3, 4]] * 5
    )
    tol = ep_tol(1e-8)
    post = ep.fit(jnp.asarray(K), jnp.asarray(pairs), schedule=schedule, tol=tol, max_iter=500)
    for leaf in jax.tree_util.tree_leaves(post):
        assert np.all(np.isfinite(leaf))
    assert bool(post.converged)
    # float32: eigvalsh's backward error, ~n eps |cov| with |cov| < |K| ~ 3 scale: 1e-5 scale
    floor = 1e-9 if X64 else 1e-5
    assert np.linalg.eigvalsh(np.asarray(post.cov)).min() > -floor * scale


def test_validate_problem():
    K, pairs = random_problem(0, n=3, m=2)
    with pytest.raises(ValueError, match="self"):
        validate_problem(K, [[1, 1]])
    with pytest.raises(ValueError, match="range"):
        validate_problem(K, [[0, 3]])
    bad = K.copy()
    bad[0, 2] += 1
    with pytest.raises(ValueError, match=r"K is not symmetric: K\[0, 2\]"):
        validate_problem(bad, pairs)
    bad = K.copy()
    bad[1, 1] = np.nan
    with pytest.raises(ValueError, match=r"K\[1, 1\] = nan is not finite"):
        validate_problem(bad, pairs)
    with pytest.raises(ValueError, match="schedule"):
        ep.fit(jnp.asarray(K), jnp.asarray(pairs), schedule="random")
    with pytest.raises(ValueError, match="damping"):
        ep.fit(jnp.asarray(K), jnp.asarray(pairs), damping=0.0)


@pytest.mark.slow
@float32_not_run(
    "slow (300-sweep fits); float32 EP's two schedules are checked against the naive EP in "
    "test_against_naive_ep"
)
def test_adaptive_damping_rescues_an_oscillating_parallel_ep():
    """Separable pairs under a large RBF scale: undamped parallel EP oscillates forever; the
    default (damping halved when the marginals' change grows) converges to the sequential
    schedule's fixed point."""
    from bayesrank.kernels import RBF

    rng = np.random.default_rng(6)
    n = int(rng.integers(5, 30))
    X = rng.normal(size=(n, 2))
    scale, rho = 10.0 ** rng.uniform(0, 4), 10.0 ** rng.uniform(-2, 1)
    K = RBF(np.sqrt(scale), rho)(jnp.asarray(X)) + 1e-6 * jnp.eye(n)
    m = int(rng.integers(n, 10 * n))
    u = X @ rng.normal(size=2)
    pairs = np.array([rng.choice(n, 2, replace=False) for _ in range(m)])
    flip = u[pairs[:, 0]] < u[pairs[:, 1]]
    pairs[flip] = pairs[flip][:, ::-1]
    pairs = jnp.asarray(pairs)
    with pytest.warns(ConvergenceWarning, match="EP fit did not converge"):
        undamped = ep.fit(K, pairs, max_iter=300, adapt_damping=False)
    assert not bool(undamped.converged)
    adaptive = ep.fit(K, pairs, max_iter=300, tol=1e-9)
    sequential = ep.fit(K, pairs, max_iter=300, tol=1e-9, schedule="sequential")
    assert bool(adaptive.converged) and bool(sequential.converged)
    np.testing.assert_allclose(adaptive.mean, sequential.mean, atol=1e-6 * scale**0.5)
