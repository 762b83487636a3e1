"""Ties and weighted judgements (``bayesrank.likelihoods.Outcomes``) in EP, Laplace and NUTS.

References share no code with the implementation:
- the tilted moments and ``log Z`` of a win with a margin and of a tie: 1-D quadrature of
  ``P(outcome | d) N(d | m, v)`` with scipy's normal CDF;
- Laplace's slope and curvature: finite differences of scipy's log-likelihood;
- one tie on two entities: EP is exact, so its evidence is the closed form ``P(tie)`` under the
  prior and its posterior is the quadrature's;
- counts against copies, ``eps -> 0`` against today's pairs-only posterior (the other model);
- EP against long NUTS, as the pairs-only check does (MCSE plus EP's own error).
"""

import dataclasses
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from helpers import mcse_mean
from quadrature import normal_cdf, normal_pdf
from scipy import integrate, stats

from bayesrank import PreferenceProblem, XPGPModel, default_trainable, parallel
from bayesrank.inference import ep, laplace, nuts
from bayesrank.io import load, load_metadata, save
from bayesrank.kernels import RBF, XPGP
from bayesrank.learning import fit_hyperparameters
from bayesrank.likelihoods import (
    outcome_curvature,
    outcome_probabilities,
    outcome_tilted_moments,
    tie_outcomes,
)

pytestmark = pytest.mark.skipif(
    not jax.config.jax_enable_x64, reason="float64 only: quadrature references to 1e-9"
)


def likelihood(d, tie, eps):
    """``P(outcome | d)`` with scipy: ``Phi(d - eps)`` (win) or ``Phi(eps - d) - Phi(-eps - d)``."""
    if tie:  # on the side where the difference of two tails does not cancel
        d = np.abs(d)
        return normal_cdf(eps - d) - normal_cdf(-eps - d)
    return normal_cdf(d - eps)


def quadrature_moments(m, v, tie, eps):
    """``log Z``, mean and variance of ``P(outcome | d) N(d | m, v) / Z`` by quadrature."""
    sd = np.sqrt(v)

    def moment(p):
        return integrate.quad(
            lambda d: d**p * normal_pdf(d, m, sd) * likelihood(d, tie, eps),
            m - 14 * sd,
            m + 14 * sd,
            points=[-eps, eps],
            epsabs=0.0,
            epsrel=1e-11,
            limit=200,
        )[0]

    with warnings.catch_warnings():  # quad doubts its 1e-11; the comparison is at 1e-9
        warnings.simplefilter("ignore", integrate.IntegrationWarning)
        z = moment(0)
        mean, second = moment(1) / z, moment(2) / z
    return np.log(z), mean, second - mean**2


def outcomes(tie, weight=None, margin=0.5):
    tie = jnp.asarray(tie)
    weight = jnp.ones(tie.shape) if weight is None else jnp.asarray(weight, float)
    return tie_outcomes(tie, weight, jnp.asarray(margin, float))


@pytest.mark.slow
@pytest.mark.parametrize("tie", [False, True])
@pytest.mark.parametrize("eps", [1e-3, 0.3, 1.5])
def test_tilted_moments_against_quadrature(tie, eps):
    ms = np.array([-6.0, -3.0, -0.7, 0.0, 0.2, 2.5, 8.0])
    for v in (0.05, 1.0, 7.0):
        got = outcome_tilted_moments(
            jnp.asarray(ms), jnp.full(len(ms), v), outcomes([tie] * len(ms), margin=eps)
        )
        for k, m in enumerate(ms):
            want = quadrature_moments(m, v, tie, eps)
            np.testing.assert_allclose(
                [float(got.log_z[k]), float(got.mean[k]), float(got.var[k])],
                want,
                rtol=1e-9,
                atol=1e-10,
                err_msg=f"m={m}, v={v}",
            )


def test_tilted_moments_stay_finite_far_out():
    """At 40 standard deviations out the CDFs underflow: the log-space forms do not."""
    ms = jnp.array([-40.0, 40.0, -1e4, 1e4])
    for tie in (False, True):
        got = outcome_tilted_moments(ms, jnp.ones(4), outcomes([tie] * 4, margin=0.2))
        assert np.all(np.isfinite(np.asarray(got.log_z)))
        assert np.all((np.asarray(got.var) > 0) & (np.asarray(got.var) <= 1.0))


@pytest.mark.slow  # 3 s or more in the fast loop
@pytest.mark.parametrize("tie", [False, True])
def test_laplace_curvature_against_finite_differences(tie):
    d = np.linspace(-4.0, 4.0, 17)
    eps, c = 0.4, 3.0
    log_p, slope, minus_curv = outcome_curvature(
        jnp.asarray(d), outcomes([tie] * len(d), [c] * len(d), eps)
    )
    h = 1e-4

    def f(x):
        return c * np.log(likelihood(x, tie, eps))

    np.testing.assert_allclose(log_p, f(d), rtol=1e-12)
    np.testing.assert_allclose(slope, (f(d + h) - f(d - h)) / (2 * h), rtol=1e-7, atol=1e-9)
    second = (f(d + h) - 2 * f(d) + f(d - h)) / h**2
    np.testing.assert_allclose(minus_curv, -second, rtol=1e-5, atol=1e-6)
    assert np.all(np.asarray(minus_curv) >= 0)  # log-concave


def test_predicted_outcomes_sum_to_one_and_match_quadrature():
    dm, dv, eps = np.array([0.3, -2.0, 0.0]), np.array([0.5, 1.0, 2.0]), 0.4
    win, tie, loss = outcome_probabilities(jnp.asarray(dm), jnp.asarray(dv), eps)
    np.testing.assert_allclose(np.asarray(win) + np.asarray(tie) + np.asarray(loss), 1.0, 1e-14)
    for k in range(3):  # P(outcome) = E[P(outcome | d)], d ~ N(dm, dv)
        for got, flag in ((tie[k], True), (win[k], False)):
            want = integrate.quad(
                lambda d, flag=flag, k=k: (
                    normal_pdf(d, dm[k], np.sqrt(dv[k])) * likelihood(d, flag, eps)
                ),
                -np.inf,
                np.inf,
            )[0]
            np.testing.assert_allclose(float(got), want, rtol=1e-9)


@pytest.mark.slow  # 3 s or more in the fast loop
def test_one_tie_is_exact():
    """One tie on two entities: EP is exact, its evidence is ``P(tie)`` under the prior."""
    K = np.array([[1.3, 0.4], [0.4, 0.8]])
    eps = 0.7
    post = ep.fit(K, np.array([[0, 1]]), ties=np.array([True]), margin=eps, tol=1e-12)
    v0 = K[0, 0] + K[1, 1] - 2 * K[0, 1]
    log_z, mean, var = quadrature_moments(0.0, v0, True, eps)
    np.testing.assert_allclose(float(post.log_evidence), log_z, rtol=1e-10)
    np.testing.assert_allclose(float(post.mean[0] - post.mean[1]), mean, atol=1e-10)
    dvar = post.cov[0, 0] + post.cov[1, 1] - 2 * post.cov[0, 1]
    np.testing.assert_allclose(float(dvar), var, rtol=1e-9)
    s = np.sqrt(1 + v0)
    closed = np.log(stats.norm.cdf(eps / s) - stats.norm.cdf(-eps / s))
    np.testing.assert_allclose(float(post.log_evidence), closed, rtol=1e-12)


def small_problem(seed=0, n=6):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 2))
    K = np.exp(-0.5 * ((X[:, None] - X[None]) ** 2).sum(-1)) + 0.2 * np.eye(n)
    return K


@pytest.mark.slow
def test_margin_zero_without_ties_is_the_pairs_model():
    K = small_problem()
    pairs = np.array([[0, 1], [1, 2], [2, 3], [0, 1], [4, 5], [5, 4], [3, 4]])
    plain = ep.fit(K, pairs, tol=1e-10)
    same = ep.fit(K, pairs, margin=0.0, tol=1e-10)
    np.testing.assert_allclose(same.mean, plain.mean, atol=1e-14)
    np.testing.assert_allclose(same.cov, plain.cov, atol=1e-14)
    np.testing.assert_allclose(same.log_evidence, plain.log_evidence, atol=1e-13)
    lap = laplace.fit(jnp.asarray(K), jnp.asarray(pairs))
    lap_o = laplace.fit(jnp.asarray(K), jnp.asarray(pairs), outcomes=outcomes([False] * 7, None, 0))
    np.testing.assert_allclose(lap_o.mean, lap.mean, atol=1e-13)
    np.testing.assert_allclose(lap_o.log_evidence, lap.log_evidence, atol=1e-12)


def test_small_margin_converges_to_the_pairs_model():
    """Wins with margin ``eps`` move the posterior by O(eps) from the pairs-only one."""
    K = small_problem(1)
    pairs = np.array([[0, 1], [1, 2], [2, 3], [3, 4], [4, 5], [0, 5]])
    plain = ep.fit(K, pairs, tol=1e-12)
    gaps = []
    for eps in (1e-2, 1e-4, 1e-6):
        post = ep.fit(K, pairs, margin=eps, tol=1e-12)
        gaps.append(float(np.max(np.abs(post.mean - plain.mean))))
        assert abs(float(post.log_evidence - plain.log_evidence)) < 10 * eps
    np.testing.assert_allclose(gaps[1] / gaps[0], 1e-2, rtol=0.02)  # linear in eps
    assert gaps[2] < 1e-5


@pytest.mark.slow
@pytest.mark.parametrize("schedule", ["parallel", "sequential"])
def test_counts_equal_copies(schedule):
    K = small_problem(2)
    rows = np.array([[0, 1], [1, 2], [2, 3], [3, 2], [4, 5], [1, 4]])
    ties = np.array([False, True, False, False, True, False])
    counts = np.array([3, 1, 2, 1, 2, 1])
    copies = np.repeat(rows, counts, axis=0)
    copy_ties = np.repeat(ties, counts)
    settings = dict(margin=0.45, tol=1e-11, schedule=schedule, max_iter=500)
    one = ep.fit(K, rows, ties=ties, weights=counts, **settings)
    many = ep.fit(K, copies, ties=copy_ties, **settings)
    np.testing.assert_allclose(one.mean, many.mean, atol=1e-9)
    np.testing.assert_allclose(one.cov, many.cov, atol=1e-9)
    np.testing.assert_allclose(one.log_evidence, many.log_evidence, atol=1e-9)
    # a row's site is its copies' sum
    ends = np.repeat(np.arange(len(rows)), counts)
    np.testing.assert_allclose(
        one.sites.tau, np.bincount(ends, weights=np.asarray(many.sites.tau)), rtol=1e-7
    )
    if schedule == "parallel":  # Laplace and NUTS's log density: the same identity
        o_one = outcomes(ties, counts, 0.45)
        o_many = outcomes(copy_ties, None, 0.45)
        Kj = jnp.asarray(K)
        a = laplace.fit(Kj, jnp.asarray(rows), outcomes=o_one)
        b = laplace.fit(Kj, jnp.asarray(copies), outcomes=o_many)
        np.testing.assert_allclose(a.mean, b.mean, atol=1e-10)
        np.testing.assert_allclose(a.log_evidence, b.log_evidence, atol=1e-10)
        xi = jnp.asarray(np.random.default_rng(0).normal(size=len(K)))
        np.testing.assert_allclose(
            nuts.pair_log_likelihood(xi, rows, outcomes=o_one),
            nuts.pair_log_likelihood(xi, copies, outcomes=o_many),
            rtol=1e-13,
        )


@pytest.mark.slow
def test_evidence_gradients_against_finite_differences_of_reconverged_evidence():
    K = small_problem(3)
    pairs = jnp.array([[0, 1], [1, 2], [2, 3], [0, 1], [4, 5], [5, 4], [3, 4]])
    ties = jnp.array([False, False, True, False, False, False, True])
    weights = jnp.array([1.0, 2.0, 1.0, 1.0, 3.0, 1.0, 1.0])

    def evidence(scale, eps):
        post = ep.fit(
            scale * K, pairs, outcomes=tie_outcomes(ties, weights, eps), tol=1e-12, max_iter=500
        )
        return post.log_evidence

    grad = jax.jit(jax.grad(evidence, argnums=(0, 1)))(1.3, 0.4)
    h = 1e-5
    fd = (
        (evidence(1.3 + h, 0.4) - evidence(1.3 - h, 0.4)) / (2 * h),
        (evidence(1.3, 0.4 + h) - evidence(1.3, 0.4 - h)) / (2 * h),
    )
    np.testing.assert_allclose(grad, fd, rtol=1e-6)

    def laplace_evidence(scale):
        o = tie_outcomes(ties, weights, jnp.asarray(0.4))
        return laplace.log_evidence(scale * jnp.asarray(K), pairs, outcomes=o, tol=1e-13)

    lap_fd = (laplace_evidence(1.3 + h) - laplace_evidence(1.3 - h)) / (2 * h)
    np.testing.assert_allclose(jax.grad(laplace_evidence)(1.3), lap_fd, rtol=1e-6)


@pytest.mark.parametrize(
    "options", [dict(schedule="sequential"), dict(accelerate=True), dict(precision="mixed")]
)
@pytest.mark.slow  # 3 s or more in the fast loop
def test_every_schedule_reaches_the_same_fixed_point(options):
    K = small_problem(4)
    pairs = np.array([[0, 1], [1, 2], [2, 3], [0, 1], [4, 5], [5, 4], [3, 4], [2, 5]])
    ties = np.array([False, True, True, False, False, False, True, False])
    base = ep.fit(K, pairs, ties=ties, margin=0.5, tol=1e-11)
    other = ep.fit(K, pairs, ties=ties, margin=0.5, tol=1e-11, **options)
    np.testing.assert_allclose(other.mean, base.mean, atol=1e-9)
    np.testing.assert_allclose(other.cov, base.cov, atol=1e-9)
    np.testing.assert_allclose(other.log_evidence, base.log_evidence, atol=1e-9)


@pytest.mark.slow  # long NUTS chains, as the pairs-only agreement tests
def test_ep_laplace_and_nuts_agree_with_ties_and_weights():
    K = small_problem(5, n=5)
    pairs = np.array([[0, 1], [1, 2], [2, 3], [3, 4], [0, 4], [2, 1], [1, 3]])
    ties = np.array([False, True, False, True, False, False, True])
    weights = np.array([1.0, 2.0, 1.0, 1.0, 3.0, 1.0, 1.0])
    eps = 0.6
    post = ep.fit(K, pairs, ties=ties, weights=weights, margin=eps, tol=1e-10)
    draws = nuts.sample(
        jax.random.key(0),
        K,
        pairs,
        ties=ties,
        weights=weights,
        margin=eps,
        num_warmup=500,
        num_samples=6000,
        num_chains=2,
    )
    assert draws.diagnostics.divergences.sum() == 0
    s = np.asarray(draws.samples)
    for k in range(len(K)):  # EP's error on this problem is ~0.01 (pairs-only: 0.01 allowed)
        assert abs(s[..., k].mean() - float(post.mean[k])) < 4 * mcse_mean(s[..., k]) + 0.02
        sq = (s[..., k] - s[..., k].mean()) ** 2
        assert abs(sq.mean() - float(post.cov[k, k])) < 4 * mcse_mean(sq) + 0.03
    # the three outcome probabilities of every pair: EP's against the draws' average
    queries = np.array([[i, j] for i in range(5) for j in range(i + 1, 5)])
    d = s[..., queries[:, 0]] - s[..., queries[:, 1]]
    mc = [stats.norm.cdf(d - eps), stats.norm.cdf(eps - d) - stats.norm.cdf(-eps - d)]
    pred = post.predict_outcomes(queries, margin=eps)
    for got, draws_p in zip((pred.win, pred.tie), mc, strict=True):
        se = np.array([mcse_mean(draws_p[..., q]) for q in range(len(queries))])
        np.testing.assert_array_less(
            np.abs(np.asarray(got) - draws_p.mean(axis=(0, 1))), 4 * se + 0.01
        )
    # Laplace, a coarser approximation, is within the same reach of NUTS's means
    lap = laplace.fit(jnp.asarray(K), jnp.asarray(pairs), outcomes=outcomes(ties, weights, eps))
    np.testing.assert_allclose(lap.mean, s.mean(axis=(0, 1)), atol=0.1)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        (dict(ties=np.array([True, False])), "margin = 0 gives a tie probability 0, but pair 0"),
        (dict(ties=np.array([1, 0]), margin=0.3), "tie must be a bool array of shape"),
        (dict(ties=np.array([True]), margin=0.3), r"tie must be a bool array of shape \(2,\)"),
        (dict(weights=np.array([1.0, 0.0])), r"weight\[1\] = 0.0 is not a finite number > 0"),
        (dict(weights=np.array([1.0, np.nan])), r"weight\[1\] = nan"),
        (dict(margin=-0.1), "margin = -0.1 must be a finite number >= 0"),
        (dict(margin=np.inf), "margin = inf must be a finite number >= 0"),
    ],
)
def test_bad_outcomes_name_the_culprit(kwargs, match):
    K = np.eye(3)
    with pytest.raises(ValueError, match=match):
        ep.fit(K, np.array([[0, 1], [1, 2]]), **kwargs)
    with pytest.raises(ValueError, match=match):
        nuts.sample(jax.random.key(0), K, np.array([[0, 1], [1, 2]]), num_samples=10, **kwargs)


def test_a_tie_of_an_entity_with_itself_is_refused():
    with pytest.raises(ValueError, match="row 0"):
        ep.fit(np.eye(3), np.array([[1, 1]]), ties=np.array([True]), margin=0.3)


def test_a_pair_both_won_and_tied_is_valid_data():
    K = small_problem(6, n=3)
    post = ep.fit(
        K, np.array([[0, 1], [0, 1], [1, 0]]), ties=np.array([False, True, False]), margin=0.3
    )
    assert bool(post.converged)
    assert abs(float(post.mean[0] - post.mean[1])) < 0.2  # one win each way and a tie


# --- the problem, the model, learning, saving ------------------------------------------------


def tie_problem(seed=0, n=24, m=120, eps=0.5):
    """A problem drawn from the tie model itself: ``xi = 2 x_0``, judge noise N(0, 1)."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 2))
    f = 2.0 * X[:, 0]
    pairs, ties = [], []
    for _ in range(m):
        i, j = rng.choice(n, 2, replace=False)
        d = f[i] - f[j] + rng.normal()
        if abs(d) <= eps:
            ties.append((i, j))
        else:
            pairs.append((i, j) if d > 0 else (j, i))
    return PreferenceProblem.create(np.array(pairs), X=X, ties=np.array(ties))


@pytest.mark.slow  # end to end: the model's fit, and merged repeats
def test_the_model_fits_a_problem_with_ties_as_ep_on_its_rows():
    problem = tie_problem()
    prior = XPGP(RBF(), margin=0.4)
    post = XPGPModel(prior).fit(problem)
    K, _ = XPGPModel(prior).covariance(problem)
    tie, _, weight = problem.outcomes()
    ref = ep.fit(np.asarray(K), problem.rows, ties=tie, weights=weight, margin=0.4)
    np.testing.assert_allclose(post.mean, ref.mean, atol=1e-12)
    np.testing.assert_allclose(post.log_evidence, ref.log_evidence, atol=1e-10)
    pred = post.predict_outcomes(np.array([[0, 1], [2, 3]]))
    np.testing.assert_allclose(np.asarray(pred.win + pred.tie + pred.loss), 1.0, atol=1e-14)
    # merged repeats: the same posterior
    doubled = PreferenceProblem.create(
        np.concatenate([problem.pairs, problem.pairs[:5]]),
        X=problem.X,
        ties=np.concatenate([problem.ties, problem.ties[:3, ::-1]]),
    )
    merged = doubled.merged()
    assert len(merged.pairs) < len(doubled.pairs) and len(merged.ties) < len(doubled.ties)
    a, b = XPGPModel(prior).fit(doubled), XPGPModel(prior).fit(merged)
    np.testing.assert_allclose(a.mean, b.mean, atol=1e-9)
    np.testing.assert_allclose(a.log_evidence, b.log_evidence, atol=1e-9)


@pytest.mark.slow  # end to end: a learned fit and refits around it
def test_learning_the_margin_maximises_the_evidence():
    """The learned margin and lengthscale are where the EP evidence is stationary: the
    evidence at the learned prior is above its value a step away in each direction."""
    problem = tie_problem(1)
    # plain maximum likelihood (no hyperprior), so the optimum is the evidence's own
    result = fit_hyperparameters(XPGP(RBF(), margin=1.0), [problem], hyperprior_scale=None)
    assert bool(np.all(result.converged))
    learned = result.prior
    assert 0.2 < float(learned.margin) < 1.0  # drawn at 0.5 (in xi_hat units)

    def evidence(prior):
        return float(XPGPModel(prior).fit(problem).log_evidence)

    best = evidence(learned)
    for factor in (0.7, 1.3):  # beyond where BFGS's stopping rule leaves it
        moved = dataclasses.replace(learned, margin=learned.margin * factor)
        assert evidence(moved) < best
    np.testing.assert_allclose(float(result.posteriors.log_evidence[0]), best, atol=1e-6)


def test_em_and_laplace_refuse_to_learn_the_margin_silently():
    problem = tie_problem(2, n=10, m=30)
    for options in (dict(method="em"), dict(inference="laplace")):
        with pytest.raises(ValueError, match=r"XPGP.margin, a likelihood parameter, is learned by"):
            fit_hyperparameters(XPGP(RBF(), margin=1.0), [problem], **options)
    # the remedy the message names is accepted (the fit itself is EM's, tested elsewhere)
    frozen = dataclasses.replace(default_trainable(XPGP(RBF(), margin=1.0)), margin=False)
    assert frozen.margin is False and frozen.attribute.rho is True


def test_ties_need_a_margin_and_batched_nuts_says_it_takes_pairs_only():
    problem = tie_problem(3, n=10, m=30)
    with pytest.raises(ValueError, match=r"has \d+ ties, but the prior has no tie margin"):
        XPGPModel(XPGP(RBF())).fit(problem)
    with pytest.raises(ValueError, match=r"problems\[1\]: the problem has \d+ ties, but the"):
        parallel.fit_ep(
            XPGP(RBF()), [PreferenceProblem.create(problem.pairs, X=problem.X), problem]
        )
    with pytest.raises(ValueError, match=r"sample_nuts \(problems\[0\]\) takes pairs only"):
        parallel.sample_nuts(jax.random.key(0), XPGP(RBF(), margin=0.5), [problem])
    with pytest.raises(ValueError, match="tie_weights without ties"):
        PreferenceProblem.create(problem.pairs, X=problem.X, tie_weights=[1.0])
    with pytest.raises(ValueError, match=r"ties row 0 is a self-pair \(3, 3\)"):
        PreferenceProblem.create(problem.pairs, X=problem.X, ties=[[3, 3]])


@pytest.mark.slow  # 3 s or more in the fast loop
def test_a_fit_with_ties_and_weights_saves_and_loads(tmp_path):
    problem = tie_problem(4, n=10, m=30)
    problem = PreferenceProblem.create(
        problem.pairs,
        X=problem.X,
        ties=problem.ties,
        weights=np.arange(1.0, len(problem.pairs) + 1),
    )
    post = XPGPModel(XPGP(RBF(), margin=0.3)).fit(problem)
    save(post, tmp_path / "ties.npz")
    loaded = load(tmp_path / "ties.npz")
    np.testing.assert_array_equal(loaded.problem.ties, problem.ties)
    np.testing.assert_array_equal(loaded.problem.weights, problem.weights)
    assert loaded.problem.tie_weights is None
    assert float(loaded.prior.margin) == 0.3
    np.testing.assert_array_equal(loaded.mean, post.mean)
    assert load_metadata(tmp_path / "ties.npz")["format_version"] == 2


@pytest.mark.slow  # end to end: the command line's fit and predict
def test_the_command_line_fits_and_predicts_a_study_folder_with_ties(tmp_path):
    """A study folder whose comparisons hold ties and weights: ``bayesrank fit`` adds a tie
    margin to the prior, ``predict`` writes ``P(tie)`` beside ``P(i > j)``, both the saved
    model's own prediction; the study folder round-trips through ``write_study_dir``."""
    from bayesrank.cli import main
    from bayesrank.data.study import read_study_dir, write_study_dir

    rng = np.random.default_rng(5)
    folder = tmp_path / "study" / "q1"
    folder.mkdir(parents=True)
    X = rng.normal(size=(8, 2))
    np.savetxt(folder / "attributes.csv", X, delimiter=",")
    (folder / "comparisons.csv").write_text("0,1\n1,2,3\n2,3,tie\n4,5,tie,2\n5,6\n6,7\n7,0\n")
    (queries,) = [read_study_dir(tmp_path / "study")]
    q = queries[0]
    np.testing.assert_array_equal(q.ties, [[2, 3], [4, 5]])
    np.testing.assert_array_equal(q.weights, [1, 3, 1, 1, 1])
    np.testing.assert_array_equal(q.tie_weights, [1, 2])
    again = read_study_dir(write_study_dir(tmp_path / "copy", queries))[0]
    for name in ("pairs", "ties", "weights", "tie_weights"):
        np.testing.assert_array_equal(getattr(again, name), getattr(q, name))

    model = tmp_path / "model"
    args = ["fit", str(tmp_path / "study"), "--out", str(model), "--fixed", "--quiet"]
    assert main(args) == 0
    pairs_file = tmp_path / "pairs.csv"
    assert main(["predict", str(model), "--pairs", str(pairs_file)]) == 0
    lines = pairs_file.read_text().splitlines()
    assert lines[0].endswith(",prob_tie")
    posterior = load(model / "query-0.npz")
    assert float(posterior.prior.margin) == 0.5
    assert len(posterior.problem.ties) == 2
    fields = lines[1].split(",")
    pred = posterior.predict_outcomes(np.array([[int(fields[1]), int(fields[2])]]))
    np.testing.assert_allclose(float(fields[5]), float(pred.win[0]), rtol=1e-5)
    np.testing.assert_allclose(float(fields[-1]), float(pred.tie[0]), rtol=1e-5)
