"""The ordinal model on grades (``PreferenceProblem(graded=...)``, ``XPGP.threshold``).

References share no code with the implementation:
- each grade's tilted moments: 1-D quadrature of ``P(grade | f) N(f | m, v)`` with scipy;
- two grades and a threshold at 0: exactly probit pairs against an entity of value 0, through
  the plain probit path of EP and Laplace (no interval code);
- grade probabilities of a Gaussian posterior: quadrature;
- counts against copies; EP against long NUTS (the other engine);
- learned thresholds: the EP evidence, refitted a step away in each direction.
"""

import dataclasses
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from helpers import mcse_mean
from quadrature import normal_cdf, normal_pdf
from scipy import integrate

from bayesrank import PreferenceProblem, Start, XPGPModel, default_trainable
from bayesrank.inference import ep, laplace
from bayesrank.inference.problem import problem_covariance
from bayesrank.io import load, save
from bayesrank.kernels import RBF, XPGP, Independent
from bayesrank.learning import fit_hyperparameters
from bayesrank.likelihoods import grade_outcomes, outcome_tilted_moments

pytestmark = pytest.mark.skipif(
    not jax.config.jax_enable_x64, reason="float64 only: quadrature references to 1e-9"
)

B = np.array([-0.8, 0.3, 1.1])  # thresholds of four grades


def grade_likelihood(f, k):
    """``P(grade k | f) = Phi(b_k - f) - Phi(b_{k-1} - f)`` with scipy, on the side of zero
    where the difference of the two tails does not cancel."""
    edges = np.concatenate([[-np.inf], B, [np.inf]])
    lo, hi = edges[k] - f, edges[k + 1] - f
    if lo + hi > 0:  # both ends mostly above zero: upper tails
        return normal_cdf(-lo) - normal_cdf(-hi)
    return normal_cdf(hi) - normal_cdf(lo)


def quadrature(m, v, k):
    sd = np.sqrt(v)

    def moment(p):
        return integrate.quad(
            lambda f: f**p * normal_pdf(f, m, sd) * grade_likelihood(f, k),
            m - 14 * sd,
            m + 14 * sd,
            points=list(B),
            epsabs=0.0,
            epsrel=1e-11,
            limit=200,
        )[0]

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", integrate.IntegrationWarning)
        z, first, second = (moment(p) for p in range(3))
    mean = first / z
    return np.log(z), mean, second / z - mean**2


@pytest.mark.slow  # 3 s or more in the fast loop
@pytest.mark.parametrize("k", [0, 1, 2, 3])
def test_grade_tilted_moments_against_quadrature(k):
    ms = np.array([-5.0, -1.0, 0.0, 0.4, 2.0, 6.0])
    for v in (0.1, 1.0, 5.0):
        rows = grade_outcomes(np.full(len(ms), k), np.ones(len(ms)), B)
        got = outcome_tilted_moments(jnp.asarray(ms), jnp.full(len(ms), v), rows)
        for i, m in enumerate(ms):
            np.testing.assert_allclose(
                [float(got.log_z[i]), float(got.mean[i]), float(got.var[i])],
                quadrature(m, v, k),
                rtol=1e-9,
                atol=1e-10,
                err_msg=f"grade {k}, m={m}, v={v}",
            )


def graded_problem(seed=0, n=14, b=B, scale=1.5):
    """Grades drawn from the ordinal model itself: ``f = scale x_0``, noise N(0, 1)."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 2))
    y = np.digitize(scale * X[:, 0] + rng.normal(size=n), b)
    return PreferenceProblem.from_grades(y, X=X), y


def prior_for(b):
    gaps = None if len(b) == 1 else jnp.asarray(np.diff(b))
    return XPGP(RBF(), threshold=float(b[0]), threshold_gaps=gaps)


@pytest.mark.slow
def test_two_grades_at_threshold_zero_are_probit_pairs_against_a_zero_entity():
    """Grade 1 is ``i`` beating an entity of value 0, grade 0 losing to it: EP's and Laplace's
    plain probit path (no interval code) on those pairs gives the same posterior."""
    problem, y = graded_problem(1, b=np.array([0.0]))
    prior = prior_for(np.array([0.0]))
    n = problem.n
    K = np.asarray(problem_covariance(prior, problem, jnp.float64))
    pairs = np.array([[i, n] if y[i] == 1 else [n, i] for i in range(n)])
    for engine, fit in (
        ("ep", lambda: ep.fit(K, pairs, tol=1e-11)),
        ("laplace", lambda: laplace.fit(jnp.asarray(K), jnp.asarray(pairs))),
    ):
        model = XPGPModel(prior, inference=engine, tol=1e-11 if engine == "ep" else None)
        post, ref = model.fit(problem), fit()
        np.testing.assert_allclose(post.mean, ref.mean[:n], atol=1e-9, err_msg=engine)
        np.testing.assert_allclose(post.cov, ref.cov[:n, :n], atol=1e-9, err_msg=engine)
        np.testing.assert_allclose(post.log_evidence, ref.log_evidence, atol=1e-9)
        # the anchor's value stays 0 to round-off (its prior variance is eps^2 of the scale)
        assert abs(float(ref.mean[n])) < 1e-12 and float(ref.cov[n, n]) < 1e-28


@pytest.mark.slow
def test_grade_probabilities_against_quadrature():
    problem, _ = graded_problem(2)
    post = XPGPModel(prior_for(B)).fit(problem)
    probs = post.predict_grades([0, 3, 7])
    np.testing.assert_allclose(probs.sum(axis=1), 1.0, atol=1e-14)
    mean, var = (np.asarray(a) for a in post.result.scores())
    for row, i in enumerate((0, 3, 7)):
        for k in range(4):
            want = integrate.quad(
                lambda f, i=i, k=k: (
                    normal_pdf(f, mean[i], np.sqrt(var[i])) * grade_likelihood(f, k)
                ),
                -np.inf,
                np.inf,
            )[0]
            np.testing.assert_allclose(probs[row, k], want, rtol=1e-8)
    with pytest.raises(ValueError, match="entities"):
        post.predict_grades([problem.n])


@pytest.mark.slow
def test_counts_equal_copies_and_mixed_problems_fit_as_their_rows():
    problem, _ = graded_problem(3)
    prior = dataclasses.replace(prior_for(B), margin=0.4)
    copies = np.concatenate([problem.graded, problem.graded[:4], problem.graded[:4]])
    weights = np.concatenate([np.full(4, 3.0), np.ones(len(problem.graded) - 4)])
    mixed = dict(X=problem.X, ties=[[1, 2]])
    pairs = [[0, 5], [6, 2]]
    a = XPGPModel(prior).fit(PreferenceProblem.create(pairs, graded=copies, **mixed))
    b = XPGPModel(prior).fit(
        PreferenceProblem.create(pairs, graded=problem.graded, grade_weights=weights, **mixed)
    )
    np.testing.assert_allclose(a.mean, b.mean, atol=1e-9)
    np.testing.assert_allclose(a.log_evidence, b.log_evidence, atol=1e-9)
    # the model's fit is EP on the problem's rows with its intervals
    mixed_problem = PreferenceProblem.create(pairs, graded=copies, **mixed)
    assert len(mixed_problem.rows) == 2 + 1 + len(copies)
    merged = mixed_problem.merged()
    assert len(merged.graded) == len(problem.graded)
    c = XPGPModel(prior).fit(merged)
    np.testing.assert_allclose(c.mean, a.mean, atol=1e-9)


@pytest.mark.slow  # long NUTS chains, as the pairs-only agreement tests
def test_ep_laplace_and_nuts_agree_on_grades():
    problem, _ = graded_problem(4, n=10)
    prior = prior_for(B)
    post = XPGPModel(prior).fit(problem)
    draws = XPGPModel(
        prior,
        inference="nuts",
        nuts_options=dict(num_warmup=500, num_samples=6000, num_chains=2),
    ).fit(problem, key=jax.random.key(1))
    s = np.asarray(draws.result.samples)
    assert s.shape[-1] == problem.n  # the anchor is not an entity of the posterior
    for k in range(problem.n):
        assert abs(s[..., k].mean() - float(post.mean[k])) < 4 * mcse_mean(s[..., k]) + 0.02
        sq = (s[..., k] - s[..., k].mean()) ** 2
        assert abs(sq.mean() - float(post.cov[k, k])) < 4 * mcse_mean(sq) + 0.03
    np.testing.assert_allclose(post.predict_grades(), draws.predict_grades(), atol=0.02)
    # Laplace, the coarser approximation at the skewed one-sided grades, is further from NUTS
    lap = XPGPModel(prior, inference="laplace").fit(problem)
    exact = s.mean(axis=(0, 1))
    assert np.max(np.abs(post.mean - exact)) < np.max(np.abs(lap.mean - exact))


@pytest.mark.slow  # end to end: a learned fit and Nelder-Mead over refits
def test_learned_thresholds_reach_an_independent_optimisers_evidence():
    """The thresholds alone learned (the kernel held: its scale trades off against them along a
    flat ridge), by plain maximum likelihood: the EP evidence at the fit is within the fit's
    stopping tolerance of scipy's Nelder-Mead optimum of the same evidence."""
    from scipy.optimize import minimize

    problem, _ = graded_problem(5, n=40, b=np.array([-1.0, 0.5, 1.5]), scale=2.0)
    # the weight given, so that the trainable tree has its leaf (None would leave it learned)
    prior = dataclasses.replace(prior_for(np.array([0.0, 1.0, 2.0])), weights=jnp.ones(1))
    frozen = jax.tree_util.tree_map(lambda _: False, default_trainable(prior))
    trainable = dataclasses.replace(frozen, threshold=True, threshold_gaps=True)
    result = fit_hyperparameters(
        prior, [problem], hyperprior_scale=None, trainable=trainable, start=Start(init=False)
    )
    assert bool(np.all(result.converged))
    learned = result.prior
    assert np.all(np.diff(np.asarray(learned.thresholds)) > 0)

    def evidence(x):  # b_0 and the log gaps
        moved = dataclasses.replace(
            learned, threshold=float(x[0]), threshold_gaps=jnp.asarray(np.exp(x[1:]))
        )
        return float(XPGPModel(moved).fit(problem).log_evidence)

    start = np.array([0.0, 0.0, np.log(2.0)])
    best = minimize(lambda x: -evidence(x), start, method="Nelder-Mead",
                    options=dict(xatol=1e-6, fatol=1e-9, maxiter=4000))  # fmt: skip
    ours = float(result.posteriors.log_evidence[0])
    assert ours > -best.fun - 0.02, (ours, -best.fun)


@pytest.mark.slow  # 3 s or more in the fast loop
def test_a_graded_fit_saves_and_loads(tmp_path):
    problem, _ = graded_problem(6, n=8)
    post = XPGPModel(prior_for(B)).fit(problem)
    save(post, tmp_path / "graded.npz")
    loaded = load(tmp_path / "graded.npz")
    np.testing.assert_array_equal(loaded.problem.graded, problem.graded)
    np.testing.assert_array_equal(loaded.prior.thresholds, post.prior.thresholds)
    np.testing.assert_array_equal(loaded.mean, post.mean)


@pytest.mark.parametrize(
    ("make", "match"),
    [
        (lambda: PreferenceProblem.from_grades([0, 1.5]), r"graded row 1: grade 1.5 .* not an"),
        (lambda: PreferenceProblem.from_grades([0, -1]), r"graded row 1: grade -1 is negative"),
        (
            lambda: PreferenceProblem.create([], n=3, graded=[[3, 0]]),
            r"graded row 0: entity 3 is out of range for n=3",
        ),
        (
            lambda: XPGPModel(XPGP(RBF())).fit(
                PreferenceProblem.from_grades([0, 2, 1], X=np.eye(3))
            ),
            r"grades 0\.\.2, but the prior has no thresholds",
        ),
        (
            lambda: XPGPModel(prior_for(np.array([0.0]))).fit(
                PreferenceProblem.from_grades([0, 2, 1], X=np.eye(3))
            ),
            r"graded row 1: grade 2 is beyond the prior's 2 grades",
        ),
        (
            lambda: XPGPModel(
                XPGP(RBF(), threshold=0.0, threshold_gaps=jnp.array([1.0, -0.5]))
            ).fit(PreferenceProblem.from_grades([0, 2, 1], X=np.eye(3))),
            r"XPGP.threshold_gaps\[1\] must be finite and > 0",
        ),
    ],
)
def test_bad_grades_and_thresholds_name_the_culprit(make, match):
    with pytest.raises(ValueError, match=match):
        make()


@pytest.mark.slow  # end to end: the command line's fit and predict
def test_the_command_line_fits_grades_as_grades_or_as_pairs_with_ties(tmp_path):
    """``bayesrank fit --labels grades`` fits the ordinal model to a study folder's grades
    (thresholds for grades 0..2 in the prior), ``--labels ties`` pairs and ties, and a query of
    comparisons refuses either rather than pretend."""
    from bayesrank.cli import main

    rng = np.random.default_rng(7)
    folder = tmp_path / "study" / "q1"
    folder.mkdir(parents=True)
    np.savetxt(folder / "attributes.csv", rng.normal(size=(9, 2)), delimiter=",")
    np.savetxt(folder / "grades.csv", [0, 1, 2, 1, 0, 2, 2, 1, 0], fmt="%d")
    data = str(tmp_path / "study")
    for labels, check in (
        ("grades", lambda p: len(p.problem.graded) == 9 and p.prior.n_grades == 3),
        ("ties", lambda p: len(p.problem.ties) == 9 and p.prior.margin is not None),
    ):
        out = tmp_path / labels
        assert main(["fit", data, "--out", str(out), "--fixed", "--quiet", "--labels", labels]) == 0
        assert check(load(out / "query-0.npz"))
    (folder / "grades.csv").unlink()
    (folder / "comparisons.csv").write_text("0,1\n1,2\n")
    assert main(["fit", data, "--out", str(tmp_path / "c"), "--quiet", "--labels", "grades"]) == 2


@pytest.mark.slow
def test_new_entities_of_a_graded_problem_as_if_they_were_in_it():
    """``predict_new`` after grades equals the transductive posterior of the same entities added
    to the problem without a grade (the anchor's row of the cross-covariance is 0)."""
    rng = np.random.default_rng(8)
    n = 12
    X = rng.normal(size=(n + 3, 2))
    grades = np.array([0, 1, 2, 1, 0, 2, 2, 1, 0, 1, 2, 0], float)
    prior = dataclasses.replace(prior_for(np.array([-0.5, 0.5])), entity=Independent(0.3))
    model = XPGPModel(prior, tol=1e-12)
    mean, cov = model.fit(PreferenceProblem.from_grades(grades, X=X[:n])).predict_new(X[n:])
    whole = model.fit(PreferenceProblem.from_grades(np.r_[grades, [np.nan] * 3], X=X))
    np.testing.assert_allclose(mean, whole.mean[n:], atol=1e-10)
    np.testing.assert_allclose(cov, whole.cov[n:, n:], atol=1e-10)
