"""The Laplace approximation (``inference/laplace.py``) against references that share no code with
it: the two-entity closed form (a 1-D root by scipy's brentq), a brute-force dense Newton solve
in NumPy (explicit ``K^-1``), central finite differences of the re-converged evidence, and EP's
prediction formula on its moments. In float32 (x64 off) the float64 round-off tolerances are
scaled to float32 (``helpers.assert_close``) or, where the float64 one is not a round-off
tolerance, ``NEWTON_ATOL32``."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from helpers import assert_close, count_compilations, float32_not_run, float64_only
from scipy import optimize, special, stats

from bayesrank.inference import laplace
from bayesrank.inference.posterior import GaussianPosterior
from bayesrank.kernels import RBF
from bayesrank.predict import predict_pairs

EPS32 = float(np.finfo(np.float32).eps)
#: Newton converges quadratically (its float32 tolerance, 1e-5 on the step, leaves ~1e-10 of
#: the mode), so in float32 its error is round-off: a few ulps times cond(K) (< 50 in these
#: problems) on modes below 2: 4 * 50 * 2 * eps32 = 5e-5.
NEWTON_ATOL32 = 4 * 50 * 2 * EPS32


def mills(d):
    return np.exp(stats.norm.logpdf(d) - special.log_ndtr(d))


@pytest.mark.slow
@pytest.mark.float32
def test_two_entities_against_the_closed_form():
    """One pair: the mode of ``d = xi_0 - xi_1`` solves ``r(d) = d / v0`` (``v0`` its prior
    variance); variance ``1 / (1/v0 + w)``; evidence
    ``log Phi(d) - d^2 / (2 v0) - log(1 + v0 w) / 2``."""
    K = np.array([[1.3, 0.4], [0.4, 0.9]])
    v0 = K[0, 0] + K[1, 1] - 2 * K[0, 1]
    d = optimize.brentq(lambda d: mills(d) - d / v0, -10, 10, xtol=1e-15)
    w = mills(d) * (d + mills(d))
    post = laplace.fit(jnp.asarray(K), jnp.asarray([[0, 1]]))
    assert bool(post.converged)
    assert_close(post.mean[0] - post.mean[1], d, atol=1e-12)
    var = post.cov[0, 0] + post.cov[1, 1] - 2 * post.cov[0, 1]
    assert_close(var, 1 / (1 / v0 + w), rtol=1e-10, rtol32=16 * EPS32)  # a 1 x 1 Newton system
    expected = special.log_ndtr(d) - d**2 / (2 * v0) - 0.5 * np.log1p(v0 * w)
    assert_close(post.log_evidence, expected, rtol=1e-12)


def problem(seed, n=9, m=25):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 2))
    K = np.asarray(RBF(1.5, 0.8)(X)) + 0.3 * np.eye(n)
    i = rng.integers(0, n, m)
    j = (i + rng.integers(1, n, m)) % n
    u = X[:, 0]
    pairs = np.where((u[i] + 0.5 * rng.normal(size=m) > u[j])[:, None], np.c_[i, j], np.c_[j, i])
    return X, K, pairs


def numpy_laplace(K, pairs):
    """Dense Newton with ``K^-1`` (R&W Sec. 3.4 written out), run to machine precision."""
    n = len(K)
    A = np.zeros((len(pairs), n))
    A[np.arange(len(pairs)), pairs[:, 0]] = 1
    A[np.arange(len(pairs)), pairs[:, 1]] = -1
    Kinv = np.linalg.inv(K)
    xi = np.zeros(n)
    for _ in range(100):
        d = A @ xi
        r = mills(d)
        W = A.T @ np.diag(r * (d + r)) @ A
        step = np.linalg.solve(Kinv + W, A.T @ r - Kinv @ xi)
        xi = xi + step
        if np.max(np.abs(step)) < 1e-14:
            break
    d = A @ xi
    r = mills(d)
    W = A.T @ np.diag(r * (d + r)) @ A
    cov = np.linalg.inv(Kinv + W)
    logZ = (
        np.sum(special.log_ndtr(d))
        - 0.5 * xi @ Kinv @ xi
        - 0.5 * np.linalg.slogdet(np.eye(n) + K @ W)[1]
    )
    return xi, cov, logZ


@pytest.mark.slow  # 3 s or more in the fast loop
@pytest.mark.float32
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_mode_covariance_and_evidence_against_dense_newton(seed):
    _, K, pairs = problem(seed)
    post = jax.jit(laplace.fit)(jnp.asarray(K), jnp.asarray(pairs))
    xi, cov, logZ = numpy_laplace(K, pairs)
    assert bool(post.converged) and int(post.n_iter) < 20
    assert_close(post.mean, xi, atol=1e-10, atol32=NEWTON_ATOL32)
    assert_close(post.cov, cov, atol=1e-10, atol32=NEWTON_ATOL32)
    assert_close(post.log_evidence, logZ, rtol=1e-11)


@pytest.mark.float32
def test_a_concrete_fit_compiles_once_per_shape():
    """The façade on concrete arrays runs one compiled program per shape (it compiled its
    Newton loop again at every call, 0.65 s each, around single operations run eagerly): a
    second problem of the same shapes compiles nothing, and both match dense Newton."""
    for seed in (5, 6):
        _, K, pairs = problem(seed)
        with count_compilations() as n:
            post = jax.block_until_ready(laplace.fit(K, pairs))
        if seed == 6:
            assert n[0] == 0
        xi, cov, logZ = numpy_laplace(K, pairs)
        assert_close(post.mean, xi, atol=1e-10, atol32=NEWTON_ATOL32)
        assert_close(post.cov, cov, atol=1e-10, atol32=NEWTON_ATOL32)
        assert_close(post.log_evidence, logZ, rtol=1e-11)


@pytest.mark.slow
@float64_only(
    "central differences at h = 1e-5 checked to 1e-6: float32 rounds log Z (~10) by ~1e-6, "
    "~0.1 in the difference quotient"
)
def test_evidence_gradient_against_finite_differences():
    """``d log Z / d (amplitude, inverse lengthscale)`` through ``K``: implicit differentiation
    (the mode moves with ``K``) against central differences of the re-converged evidence."""
    X, _, pairs = problem(3)

    def evidence(params):
        K = RBF(params[0], params[1])(jnp.asarray(X)) + 0.3 * jnp.eye(len(X))
        return laplace.log_evidence(K, jnp.asarray(pairs))

    theta = jnp.array([1.5, 0.8])
    grad = np.asarray(jax.grad(evidence)(theta))
    h = 1e-5
    fd = [
        (float(evidence(theta + h * e)) - float(evidence(theta - h * e))) / (2 * h)
        for e in np.eye(2)
    ]
    np.testing.assert_allclose(grad, fd, rtol=1e-6)
    assert np.all(np.abs(grad) > 1e-3)


@pytest.mark.slow
@float32_not_run(
    "slow; float32 Laplace is checked against the closed form and the dense Newton solve above"
)
def test_the_shared_prediction_face_and_vmap():
    _, K, pairs = problem(4)
    post = laplace.fit(jnp.asarray(K), jnp.asarray(pairs))
    assert isinstance(post, GaussianPosterior)
    test = np.array([[0, 1], [3, 2], [5, 5]])
    ref = predict_pairs(post.mean, post.cov, jnp.asarray(test))
    np.testing.assert_allclose(post.predict_pairs(test).prob, ref.prob, rtol=1e-12)
    Ks = jnp.stack([jnp.asarray(K), 2.0 * jnp.asarray(K)])
    batched = jax.vmap(laplace.fit, in_axes=(0, None))(Ks, jnp.asarray(pairs))
    for b in range(2):
        single = laplace.fit(Ks[b], jnp.asarray(pairs))
        np.testing.assert_allclose(batched.mean[b], single.mean, atol=1e-10)


# passes in float32; not in the float32 run (time)
@pytest.mark.slow  # 3 s or more in the fast loop
def test_duplicates_and_an_uninformative_pair():
    """Two identical documents under an attribute-only kernel: ``K`` is singular and the pair
    between them uninformative (likelihood 1/2): a finite mode, no curvature from that pair."""
    X = np.array([[0.0, 0.0], [0.0, 0.0], [1.0, 0.5], [-0.4, 1.0]])
    K = jnp.asarray(RBF(1.0, 1.0)(X))
    pairs = jnp.asarray([[0, 1], [2, 0], [1, 3]])
    post = laplace.fit(K, pairs)
    assert int(post.n_uninformative) == 1
    assert bool(post.converged)
    assert np.all(np.isfinite(np.asarray(post.mean))) and np.isfinite(float(post.log_evidence))
    assert_close(post.mean[0], post.mean[1], atol=1e-10, atol32=NEWTON_ATOL32)


@pytest.mark.slow
@float64_only(
    "the optimum is compared with Nelder-Mead's to 1e-6 in log Z and 1e-4 in the log "
    "hyperparameters: float32 rounds log Z (~50) by ~5e-6, so neither optimiser can place the "
    "optimum that finely"
)
def test_laplace_evidence_maximisation_reaches_an_independent_optimiser():
    """``fit_hyperparameters(..., inference="laplace")``: BFGS on the Laplace evidence (gradient
    by implicit differentiation) reaches the optimum Nelder-Mead finds on the re-converged Laplace
    evidence of a NumPy-built ``K`` (derivative-free)."""
    from scipy import optimize
    from test_learning_bfgs import numpy_covariance, problems

    from bayesrank.kernels import XPGP, Independent
    from bayesrank.learning import BFGS, Start, fit_hyperparameters

    probs = problems(5, n_queries=2, n=20, m=50)
    start = XPGP(RBF(1.0, 1.0), (), jnp.ones(1), entity=Independent(0.3))
    fit = fit_hyperparameters(
        start,
        probs,
        method="evidence",
        optimizer=BFGS(max_steps=100, tol=1e-9),
        start=Start(init=False),
        hyperprior_scale=None,
        inference="laplace",
    )
    assert fit.converged
    evidence = jax.jit(laplace.log_evidence)

    def negative(v):  # v = log (w, rho, s)
        w, rho, s = np.exp(v[0]), np.exp(v[1]), np.exp(v[2])
        return -sum(
            float(evidence(jnp.asarray(numpy_covariance(p.X, w, rho, s)), jnp.asarray(p.pairs)))
            for p in probs
        )

    ref = optimize.minimize(
        negative,
        np.log([1.0, 1.0, 0.3]),
        method="Nelder-Mead",
        options={"xatol": 1e-7, "fatol": 1e-10, "maxiter": 4000},
    )
    assert ref.success
    got = fit.prior
    v = np.log([float(got.weights[0]), float(got.attribute.rho), float(got.entity.scale)])
    assert float(fit.trace.objective[-1]) == pytest.approx(-ref.fun, abs=1e-6)
    np.testing.assert_allclose(v, ref.x, atol=1e-4)
    assert type(fit.posteriors).__name__ == "LaplacePosterior"
