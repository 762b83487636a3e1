"""Preferential optimisation over new designs (``bayesrank.active.designs``).

References: the Gaussian's own draws and quadrature for EUBO; the engine's posterior with the
new designs added as entities that no pair touches, for the prediction at new designs; central
finite differences for the gradients; the prior's closed form for a known maximiser; brute
force over a pool; the optimum of a 1-D quadratic for the loop.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from helpers import float64_only
from scipy import integrate, stats

from bayesrank.active.designs import acquisition as A
from bayesrank.active.designs import belief as B
from bayesrank.active.designs.loop import Settings, initial_theta, run_batch
from bayesrank.active.designs.search import best_in_pool, maximize, mixed
from bayesrank.kernels.xpgp import mask_covariance

pytestmark = float64_only("finite differences and 1e-8 agreement with the engine")

THETA = jnp.array([0.3, -1.0, -0.7])


def _problem(seed=0, n=10, real=8, m=7):
    """Shown designs (the last ``n - real`` padded) and answered pairs (the last padded)."""
    rng = np.random.default_rng(seed)
    X = jnp.asarray(rng.random((n, 2)))
    mask = jnp.arange(n) < real
    pairs = np.array([rng.choice(real, 2, replace=False) for _ in range(m)])
    pair_mask = jnp.arange(m) < m - 1
    return X, mask, jnp.asarray(pairs, jnp.int32), pair_mask


@pytest.mark.slow
@pytest.mark.parametrize("engine", ["laplace", "ep"])
def test_latent_at_new_designs_is_the_posterior_with_them_as_untouched_entities(engine):
    X, mask, pairs, pair_mask = _problem()
    tight = {"tol": 1e-12} if engine == "ep" else {}
    K = B.prior_covariance(THETA, X, mask)
    post = B.GAUSSIAN_ENGINES[engine](K, pairs, pair_mask=pair_mask, **tight)
    belief = B.from_posterior(THETA, X, mask, pairs, pair_mask, post)
    X_new = jnp.asarray(np.random.default_rng(1).random((3, 2)))
    mean, cov = B.latent(belief, X_new)
    # reference: the same engine on the shown designs and the new ones, no pair on the new
    Xa = jnp.concatenate([X, X_new])
    maska = jnp.concatenate([mask, jnp.ones(3, bool)])
    Ka = mask_covariance(B.kernel_of(THETA)(Xa), maska)
    ref = B.GAUSSIAN_ENGINES[engine](Ka, pairs, pair_mask=pair_mask, **tight)
    np.testing.assert_allclose(mean, ref.mean[-3:], atol=1e-8)
    np.testing.assert_allclose(cov, ref.cov[-3:, -3:], atol=1e-8)
    # at the shown designs, the posterior itself
    m2, c2 = B.latent(belief, X[:2])
    np.testing.assert_allclose(m2, post.mean[:2], atol=1e-10)
    np.testing.assert_allclose(c2, post.cov[:2, :2], atol=1e-10)


@pytest.mark.parametrize("mean, cov", [
    ([0.3, -0.2], [[1.0, 0.4], [0.4, 0.5]]),
    ([2.0, 0.0], [[0.1, 0.0], [0.0, 0.2]]),
    ([0.0, 0.0], [[1.0, 1.0], [1.0, 1.0]]),  # two equal designs: max(mu_1, mu_2)
])  # fmt: skip
def test_eubo_closed_form_against_quadrature_and_monte_carlo(mean, cov):
    mean, cov = np.array(mean), np.array(cov)
    value = float(A.eubo(jnp.asarray(mean), jnp.asarray(cov)))
    mu_d = mean[0] - mean[1]
    s = np.sqrt(max(cov[0, 0] + cov[1, 1] - 2 * cov[0, 1], 0.0))
    if s == 0:
        assert value == pytest.approx(max(mean), abs=1e-12)
    else:
        positive, _ = integrate.quad(lambda d: d * stats.norm.pdf(d, mu_d, s), 0, np.inf)
        assert value == pytest.approx(mean[1] + positive, abs=1e-9)
    draws = np.random.default_rng(0).multivariate_normal(mean, cov, 400_000)
    best = draws.max(axis=1)
    assert abs(value - best.mean()) < 4 * best.std() / np.sqrt(len(best))


def _gaussian4(seed):
    rng = np.random.default_rng(seed)
    root = rng.normal(size=(4, 4))
    return rng.normal(size=4), root @ root.T + 0.1 * np.eye(4)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_knowledge_gradient_closed_form_against_quadrature(seed):
    """``E[Phi(d) f_+] + E[Phi(-d) f_-]``, ``d = f_1 - f_2``, by quadrature over ``d`` with
    ``E[f | d]`` the Gaussian's regression: the answer's probit integrated numerically."""
    mean, cov = _gaussian4(seed)
    mu_d = mean[0] - mean[1]
    var_d = cov[0, 0] + cov[1, 1] - 2 * cov[0, 1]
    sd = np.sqrt(var_d)

    def term(i, sign):
        c = cov[i, 0] - cov[i, 1]

        def integrand(d):
            given = mean[i] + c / var_d * (d - mu_d)
            return stats.norm.cdf(sign * d) * given * stats.norm.pdf(d, mu_d, sd)

        return integrate.quad(integrand, mu_d - 12 * sd, mu_d + 12 * sd, epsabs=1e-13)[0]

    expected = term(2, 1.0) + term(3, -1.0)
    got = float(A.knowledge_gradient(jnp.asarray(mean), jnp.asarray(cov)))
    assert got == pytest.approx(expected, rel=1e-10, abs=1e-12)


def test_knowledge_gradient_from_draws_within_its_standard_error_of_the_closed_form():
    mean, cov = _gaussian4(3)
    draws = np.random.default_rng(4).multivariate_normal(mean, cov, size=400_000)
    value, se = A.knowledge_gradient_from_draws(jnp.asarray(draws))
    exact = float(A.knowledge_gradient(jnp.asarray(mean), jnp.asarray(cov)))
    assert 0 < float(se) < 0.01
    assert abs(float(value) - exact) < 4 * float(se)


@pytest.mark.slow
def test_the_knowledge_gradient_proposal_is_worth_at_least_the_best_mean_shown():
    """With ``x_+ = x_-`` the value is ``mu(x_+)`` (the answer cannot move a design's
    expected mean), so the one-shot maximum is at least the posterior mean's largest value
    at the shown designs; the proposal is a pair in the cube."""
    from bayesrank.active.designs.loop import fitted, propose
    from bayesrank.inference.ep.sites import zero_sites

    X, mask, pairs, pair_mask = _problem(6)
    zeros = zero_sites(len(pairs), X.dtype)
    out = propose(X, mask, pairs, pair_mask, zeros, THETA, jax.random.key(1),
                  settings=Settings(acquisition="kg", n_raw=128, n_starts=4, steps=60),
                  learn_now=False)  # fmt: skip
    assert out.X.shape == (2, 2) and np.all((out.X >= 0) & (out.X <= 1))
    best_mean = float(jnp.max(out.mean))
    assert float(out.value) >= best_mean - 1e-9, (float(out.value), best_mean)
    # a session's initial pairs are fitted alone (``fitted``): propose's fit, in its own program
    alone = fitted(X, mask, pairs, pair_mask, zeros, THETA, jax.random.key(1),
                   settings=Settings(acquisition="kg"))  # fmt: skip
    np.testing.assert_array_equal(alone.theta, out.theta)
    np.testing.assert_allclose(alone.mean, out.mean, rtol=1e-12, atol=1e-12)
    for a, b in zip(alone.sites, out.sites, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12)
    with pytest.raises(ValueError, match="look-ahead designs"):
        propose(X, mask, pairs, pair_mask, zeros, THETA, jax.random.key(1), X[:4],
                jnp.asarray([[0, 1], [2, 3]]), settings=Settings(acquisition="kg"),
                learn_now=False, mode="mixed")  # fmt: skip


def test_qeubo_against_independent_draws_within_its_standard_error():
    mean = jnp.array([0.2, -0.1, 0.4])
    cov = jnp.array([[1.0, 0.3, 0.1], [0.3, 0.8, -0.2], [0.1, -0.2, 0.6]])
    base = jax.random.normal(jax.random.key(3), (20_000, 3))
    value, se = A.qeubo(mean, cov, base)
    draws = np.random.default_rng(1).multivariate_normal(np.asarray(mean), np.asarray(cov), 400_000)
    truth = draws.max(axis=1).mean()  # its own error is 7x smaller than se
    assert abs(float(value) - truth) < 4 * float(se)
    # two options: the closed form, within the estimate's error
    v2, se2 = A.qeubo(mean[:2], cov[:2, :2], base[:, :2])
    assert abs(float(v2) - float(A.eubo(mean[:2], cov[:2, :2]))) < 4 * float(se2)


@pytest.mark.slow
@pytest.mark.parametrize("name", A.ACQUISITIONS)
def test_acquisition_gradients_in_the_designs_against_finite_differences(name):
    from bayesrank.active.designs.loop import acquisition_of

    X, mask, pairs, pair_mask = _problem(2)
    post = B.fit(THETA, X, mask, pairs, pair_mask)
    belief = B.from_posterior(THETA, X, mask, pairs, pair_mask, post)
    q = A.DESIGNS.get(name, 2)
    base = jax.random.normal(jax.random.key(0), (64, q))
    f = acquisition_of(name, belief, base)
    X0 = jnp.asarray(np.random.default_rng(5).random((q, 2)))
    grad = np.asarray(jax.grad(f)(X0))
    h = 1e-6
    for idx in np.ndindex(q, 2):
        e = jnp.zeros((q, 2)).at[idx].set(h)
        fd = (float(f(X0 + e)) - float(f(X0 - e))) / (2 * h)
        assert grad[idx] == pytest.approx(fd, rel=1e-5, abs=1e-7), idx


@pytest.mark.slow
def test_maximize_finds_the_prior_eubo_maximiser_at_opposite_corners():
    """Under the prior (no answer: zero shift and middle) EUBO is ``s / sqrt(2 pi)``, ``s^2 =
    2 kappa^2 (1 - exp(-r^2 / 2))`` for the pair's scaled distance ``r``: largest at two
    opposite corners of the cube."""
    theta = jnp.array([0.0, np.log(0.5), np.log(0.5)])
    belief = B.Belief(jnp.zeros((1, 2)), jnp.ones(1, bool), theta, jnp.zeros(1),
                      jnp.zeros((1, 1)), jnp.zeros(1))  # fmt: skip
    found = maximize(lambda X: A.eubo(*B.latent(belief, X)), jax.random.key(0), 2, 2,
                     n_raw=64, n_starts=4, steps=200)  # fmt: skip
    r2 = np.sum((1.0 / 0.5) ** 2 * np.ones(2))
    best = np.sqrt(2 * (1 - np.exp(-r2 / 2))) / np.sqrt(2 * np.pi)
    assert float(found.value) == pytest.approx(best, rel=1e-6)
    np.testing.assert_allclose(np.abs(found.X[0] - found.X[1]), 1.0, atol=1e-6)


@pytest.mark.slow
def test_pool_and_mixed_modes_against_brute_force():
    X, mask, pairs, pair_mask = _problem(4)
    post = B.fit(THETA, X, mask, pairs, pair_mask)
    belief = B.from_posterior(THETA, X, mask, pairs, pair_mask, post)
    f = lambda Z: A.eubo(*B.latent(belief, Z))  # noqa: E731
    pool = jnp.asarray(np.random.default_rng(6).random((12, 2)))
    candidates = jnp.asarray([(i, j) for i in range(12) for j in range(12) if i != j])
    on_pool = best_in_pool(f, pool, candidates)
    values = [float(f(pool[jnp.array(c)])) for c in candidates.tolist()]
    assert float(on_pool.value) == pytest.approx(max(values), abs=1e-12)
    assert on_pool.index.tolist() == candidates[int(np.argmax(values))].tolist()
    both = mixed(f, jax.random.key(1), pool, candidates, n_raw=64, n_starts=4, steps=100)
    free = maximize(f, jax.random.key(1), 2, 2, n_raw=64, n_starts=4, steps=100)
    assert float(both.value) == pytest.approx(max(float(free.value), max(values)))


@pytest.mark.slow  # compiles the loop (about 15 s)
def test_loop_with_a_noiseless_oracle_converges_on_a_quadratic():
    def quadratic(x):
        return -jnp.sum((x - 0.3) ** 2, axis=-1)

    seeds, n_init, k = 6, 2, 15
    rng = np.random.default_rng(0)
    X_init = jnp.asarray(rng.random((seeds, n_init, 2, 1)))
    uniforms = jnp.asarray(rng.random((seeds, n_init + k)))
    keys = jax.random.split(jax.random.key(0), seeds)
    trace = run_batch(quadratic, X_init, uniforms, keys, 1e-4, initial_theta(1), k=k,
                      settings=Settings(n_raw=64, n_starts=4, steps=30))  # fmt: skip
    final = np.asarray(trace.best_guess[:, -1])
    # utility -(x - 0.3)^2 > -0.0025: the best guess within 0.05 of the optimum, every seed
    assert np.all(final > -0.0025), final
    assert final.mean() > np.asarray(trace.best_guess[:, 0]).mean()


def test_the_lengthscale_prior_is_measured_in_the_shown_designs_spread():
    X, mask, _, _ = _problem(seed=3)
    rows = np.asarray(X)[np.asarray(mask)]
    r = B.spread(X, mask)
    np.testing.assert_allclose(r, np.ptp(rows, axis=0), rtol=1e-15)
    # a coordinate every shown design shares: the floor, not zero
    same = X.at[:, 1].set(0.4)
    np.testing.assert_allclose(B.spread(same, mask), [np.ptp(rows[:, 0]), B.MIN_SPREAD])
    # the prior's mode in each lengthscale, on a grid: Gamma(2.4, 2.7)'s mode (a - 1) / b = 1.4
    # / 2.7 in units of that coordinate's spread (BoTorch's on inputs scaled to their bounds)
    grid = np.linspace(-4.0, 1.0, 20001)
    for k in range(2):

        def at(log_ell, k=k):
            return B.log_prior(THETA.at[1 + k].set(log_ell), r)

        best = grid[np.argmax(jax.vmap(at)(jnp.asarray(grid)))]
        np.testing.assert_allclose(np.exp(best), 1.4 / 2.7 * float(r[k]), rtol=5e-4)


def test_unknown_names_are_refused():
    with pytest.raises(ValueError, match="acquisition must be one of"):
        from bayesrank.active.designs.loop import acquisition_of

        acquisition_of("ucb", None, None)
    with pytest.raises(ValueError, match="engine must be one of"):
        run_batch(lambda x: -jnp.sum(x**2, -1), jnp.zeros((1, 1, 2, 1)), jnp.zeros((1, 3)),
                  jax.random.split(jax.random.key(0), 1), 0.1, initial_theta(1), k=2,
                  settings=Settings(engine="gibbs"))  # fmt: skip


@pytest.mark.slow
def test_draws_extended_to_new_designs_have_the_gaussian_predictive_moments():
    """Draws of the EP posterior at the shown designs, each extended by the prior's conditional
    (``latent_draws``), against the site-form prediction (``latent``): the same Gaussian."""
    X, mask, pairs, pair_mask = _problem(3, n=8, real=8)
    post = B.fit(THETA, X, mask, pairs, pair_mask, engine="ep")
    belief = B.from_posterior(THETA, X, mask, pairs, pair_mask, post)
    S = 200_000
    rng = np.random.default_rng(7)
    draws = rng.multivariate_normal(np.asarray(post.mean), np.asarray(post.cov), S)
    drawn = B.from_draws(THETA, X, mask, jnp.asarray(draws))
    X_new = jnp.asarray(rng.random((2, 2)))
    f = np.asarray(B.latent_draws(drawn, X_new, jnp.asarray(rng.standard_normal((S, 2)))))
    mean, cov = B.latent(belief, X_new)
    se = np.sqrt(np.diag(np.asarray(cov)) / S)
    assert np.all(np.abs(f.mean(0) - np.asarray(mean)) < 4 * se)
    np.testing.assert_allclose(np.cov(f.T), cov, atol=4 * np.sqrt(2.0 / S) * float(cov.max()))
    # the knowledge gradient under the drawn belief (the reweighted draws) against its closed
    # form under the Gaussian one, four designs
    from bayesrank.active.designs.loop import acquisition_of

    X4 = jnp.asarray(rng.random((4, 2)))
    base = jnp.asarray(rng.standard_normal((S, 4)))
    drawn_kg = acquisition_of("kg", drawn, base)(X4)
    _, kg_se = A.knowledge_gradient_from_draws(B.latent_draws(drawn, X4, base))
    exact = acquisition_of("kg", belief, None)(X4)
    assert abs(float(drawn_kg) - float(exact)) < 4 * float(kg_se)


@pytest.mark.slow  # compiles NUTS inside the proposal (about 20 s)
def test_nuts_engine_proposes_inside_the_cube():
    from bayesrank.active.designs.loop import propose
    from bayesrank.inference.ep.sites import zero_sites

    X, mask, pairs, pair_mask = _problem(5)
    settings = Settings(engine="nuts", nuts_warmup=100, nuts_samples=100, n_raw=32, n_starts=2,
                        steps=10)  # fmt: skip
    out = propose(X, mask, pairs, pair_mask, zero_sites(len(pairs), X.dtype), THETA,
                  jax.random.key(0), settings=settings, learn_now=False)  # fmt: skip
    assert out.X.shape == (2, 2) and np.all((out.X >= 0) & (out.X <= 1))
    assert np.isfinite(float(out.value))
    # NUTS's mean at the shown designs against EP's (the same posterior, nearly Gaussian here)
    post = B.fit(THETA, X, mask, pairs, pair_mask, engine="ep")
    np.testing.assert_allclose(out.mean[:8], post.mean[:8], atol=0.25)


@pytest.mark.slow  # three compiled programs and the one-piece one (about 13 s)
def test_a_time_budget_cuts_the_ascent_and_otherwise_changes_nothing():
    """``propose_within``: with time to spare it is ``propose`` to the last bit; with none it
    is ``propose`` with no ascent steps (the best raw start), the fit unchanged."""
    from bayesrank.active.designs.loop import propose, propose_within
    from bayesrank.inference.ep.sites import zero_sites

    X, mask, pairs, pair_mask = _problem(6)
    settings = Settings(n_raw=32, n_starts=3, steps=25, learn_every=0)
    args = (X, mask, pairs, pair_mask, zero_sites(len(pairs), X.dtype), THETA, jax.random.key(2))
    whole = propose(*args, settings=settings, learn_now=True)
    spare, steps = propose_within(*args, settings=settings, learn_now=True, time_budget_s=1e9,
                                  chunk=10)  # fmt: skip
    assert steps == 25
    np.testing.assert_array_equal(spare.X, whole.X)
    assert float(spare.value) == float(whole.value)
    np.testing.assert_array_equal(spare.theta, whole.theta)
    none, steps = propose_within(*args, settings=settings, learn_now=True, time_budget_s=0.0)
    assert steps == 0
    starts_only = propose(*args, settings=settings._replace(steps=0), learn_now=True)
    np.testing.assert_array_equal(none.X, starts_only.X)
    assert float(none.value) <= float(whole.value)
