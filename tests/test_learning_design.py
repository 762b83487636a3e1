"""The global start of evidence maximisation (bayesrank.learning.design): the design's values
against single EP evaluations, its ranges against the data, and a real problem with two modes
where BFGS from the median heuristic stops at the lower one."""

from __future__ import annotations

import warnings

import jax
import numpy as np
import pytest
from helpers import count_compilations

from bayesrank import EP, RBF, XPGP, Independent, PreferenceProblem, XPGPModel
from bayesrank.inference import ep
from bayesrank.kernels.params import unconstrain
from bayesrank.learning import GlobalStart, Start, fit_hyperparameters
from bayesrank.learning.design import check_design, design_points, halton, pick_starts


def _problem(seed=0, n=24, m=40, d=3):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    u = np.sin(2 * X[:, 0]) + 0.5 * rng.normal(size=n)
    pairs = set()
    while len(pairs) < m:
        i, j = (int(k) for k in rng.choice(n, 2, replace=False))
        pairs.add((i, j) if u[i] > u[j] else (j, i))
    return PreferenceProblem.create(np.array(sorted(pairs)), X=X)


def test_halton_is_the_radical_inverse():
    # base 2: 1/2, 1/4, 3/4, 1/8; base 3: 1/3, 2/3, 1/9, 4/9 (worked by hand)
    np.testing.assert_allclose(
        halton(4, 2), [[0.5, 1 / 3], [0.25, 2 / 3], [0.75, 1 / 9], [0.125, 4 / 9]]
    )


def test_design_ranges_follow_the_data():
    """rho spans 1 / (10 d_max) to 2 / d_min, weights 10^-1.5 to 10^1.5 (brute-force distances);
    point 0 is the start."""
    X = np.array([[0.0, 0.0], [0.3, 0.4], [3.0, 4.0], [0.0, 0.0]])  # d_min 0.5, d_max 5
    prior = XPGP(RBF(1.0, 0.7), weights=np.array([2.0]))
    flags = (False, True, True, False)  # kappa, rho, weights, sigma (unconstrain's leaf order)
    assert len(jax.tree_util.tree_leaves(unconstrain(prior))) == len(flags)
    pts = design_points(prior, X, flags, 500)
    np.testing.assert_allclose(pts[0], [np.log(0.7), np.log(2.0)])
    rho = np.exp(pts[1:, 0])
    assert rho.min() >= 1 / 50 - 1e-12 and rho.max() <= 2 / 0.5 + 1e-12
    assert rho.min() < 1 / 50 * 1.05 and rho.max() > 4 * 0.95  # space-filling: reaches the ends
    w = np.exp(pts[1:, 1])
    assert w.min() >= 10**-1.5 - 1e-12 and w.max() <= 10**1.5 + 1e-12


def test_pick_starts_keeps_the_start_and_distinct_basins():
    points = np.array([[0.0], [5.0], [5.5], [0.5], [-3.0]])
    values = np.array([-10.0, -1.0, -0.5, -2.0, -np.inf])
    # the start, then the best (2, at 5.5); 1 is within APART of 2, 3 of the start; 4 not finite
    assert pick_starts(values, points, 3).tolist() == [0, 2]
    assert pick_starts(values, points, 1).tolist() == [0]


def test_check_design():
    assert check_design("auto", "evidence", None) == GlobalStart()
    assert check_design("auto", "em", None) is None
    assert check_design(None, "evidence", None) is None
    assert check_design(8, "evidence", "bfgs") == GlobalStart(8, 2)
    with pytest.raises(ValueError, match="design starts"):
        check_design(GlobalStart(2, 3), "evidence", None)
    with pytest.raises(ValueError, match="needs method='evidence'"):
        check_design(8, "em", None)
    with pytest.raises(ValueError, match="design must be"):
        check_design("grid", "evidence", None)


@pytest.mark.parametrize("per_query", [False, True], ids=["single", "per-query"])
@pytest.mark.slow
def test_design_values_equal_single_evaluations(per_query):
    """Each design point's objective = the EP evidence of ``ep.fit`` at that prior (a separate
    program) plus the hyperprior, worked out from the unconstrained values."""
    problems = [_problem(0), _problem(1, n=20, m=30)] if per_query else [_problem(0)]
    prior = XPGP(RBF(), entity=Independent())
    fit = fit_hyperparameters(
        prior,
        problems,
        per_query=per_query,
        start=Start(design=GlobalStart(6, 2)),
        engine=EP(step_tol=1e-10),
    )
    design = fit.design
    scale = 2.0  # the default hyperprior_scale
    for b, problem in enumerate(problems):
        objective = np.asarray(design.objective[b] if per_query else design.objective)
        priors = design.priors

        def at(s, priors=priors, b=b):
            lead = (b, s) if per_query else (s,)
            return jax.tree_util.tree_map(lambda x, lead=lead: np.asarray(x)[lead], priors)

        start = unconstrain(at(0))
        for s in range(6):
            point = at(s)
            K = point.covariance(problem.X)
            reference = float(ep.fit(K, problem.pairs, tol=1e-12, max_iter=1000).log_evidence)
            u = unconstrain(point)
            free = [
                (float(np.sum((np.asarray(a) - np.asarray(c)) ** 2)))
                for a, c in [
                    (u.attribute.rho, start.attribute.rho),
                    (u.weights, start.weights),
                    (u.entity.scale, start.entity.scale),
                ]
            ]
            expected = reference - 0.5 * sum(free) / scale**2
            np.testing.assert_allclose(objective[s], expected, rtol=0, atol=1e-6)
    gap = np.atleast_1d(fit.design_gap)
    assert np.all(gap >= -0.5)  # the fit ends at or above (within 0.5 nats) the design's best


@pytest.mark.slow
def test_a_fit_without_a_design_is_the_plain_fit():
    """Start(design=None): BFGS from the start alone, no design in the result."""
    fit = fit_hyperparameters(XPGP(RBF()), _problem(2), start=Start(design=None))
    assert fit.design is None and fit.design_gap is None


def _hetrec_user_problem(data_dir, user=383, seed=3):
    """One HetRec user (115 rated movies by default): the 20 genre indicators and the year,
    standardised; 150 known pairs of a seeded split, up to 1,000 held out."""
    from bayesrank.data.movielens import movie_attributes, user_ratings
    from bayesrank.data.pairs import pairs_from_grades

    ratings, attrs = user_ratings(data_dir), movie_attributes(data_dir)
    movies = sorted(m for m in ratings[user] if m in attrs)
    X = np.stack([attrs[m][:21] for m in movies])
    X = (X - X.mean(0)) / np.where(X.std(0) > 0, X.std(0), 1)
    pairs = pairs_from_grades(np.array([ratings[user][m] for m in movies]))
    order = np.random.default_rng(seed).permutation(len(pairs))
    known, held = pairs[np.sort(order[:150])], pairs[np.sort(order[150:1150])]
    return PreferenceProblem.create(known, X=X), held


@pytest.mark.shared_data
@pytest.mark.slow
def test_global_start_finds_the_higher_mode(shared_data):
    """A real problem with two modes of the evidence: BFGS from the median heuristic stops at
    a smooth one (long lengthscale), the global start reaches the per-entity limit (short
    lengthscale, large weight), which is several nats higher, as ``ep.fit`` at both fitted
    priors (an independent program) confirms, and predicts the held-out pairs better."""
    problem, held = _hetrec_user_problem(shared_data)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        plain = XPGPModel(XPGP(RBF())).fit(
            problem, learn_hyperparameters=True, start=Start(design=None)
        )
        found = XPGPModel(XPGP(RBF())).fit(problem, learn_hyperparameters=True)
    evidence = [
        float(ep.fit(p.prior.covariance(problem.X), problem.pairs, tol=1e-10).log_evidence)
        for p in (plain, found)
    ]
    print("log evidence at the plain and the global fit", evidence)
    assert evidence[1] > evidence[0] + 2.0  # measured: -76.0 against -80.0 (nats)
    assert float(found.prior.attribute.rho) > 5 * float(plain.prior.attribute.rho)
    assert found.learning.design_gap >= -0.5
    errors = [float(np.mean(np.asarray(p.predict_pairs(held).prob) < 0.5)) for p in (plain, found)]
    assert errors[1] < errors[0]


@pytest.mark.slow
def test_a_learned_fit_compiles_five_programs_and_another_prior_shares_eps_two():
    """A learned fit of a new size compiles five programs, nothing else (no eager operation, no
    second EP program in XPGPModel.fit): EP's evidence given ``K`` (shared by the design, the
    line search and the final posterior) and the Fisher information's weights, and the prior's
    three (its ``K``, the chain rule back to ``theta``, its Fisher information). A new split
    compiles nothing; another prior at that size compiles its own three only."""
    problem = _problem(5, n=75, m=61, d=4)
    again = _problem(6, n=75, m=61, d=4)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with count_compilations() as first:
            XPGPModel(XPGP(RBF())).fit(problem, learn_hyperparameters=True)
        with count_compilations() as second:
            XPGPModel(XPGP(RBF())).fit(again, learn_hyperparameters=True)
        with count_compilations() as other:
            XPGPModel(XPGP(RBF(), entity=Independent())).fit(again, learn_hyperparameters=True)
    assert first[0] == 5, first
    assert second[0] == 0, second
    assert other[0] == 3, other


@pytest.mark.slow
def test_design_points_match_the_tie_margin_and_thresholds_to_the_data():
    """At every design point but the start, the margin and thresholds make the prior
    predictive's tie rate and grade shares the data's: ``eps = sqrt(1 + v) Phi^-1((1 + r) / 2)``,
    ``b_k = sqrt(1 + v) Phi^-1(F_k)``, ``v`` the rows' weighted mean prior variance of their
    difference, computed here from each problem's own covariance (``problem_covariance``)."""
    import dataclasses

    import jax.numpy as jnp
    from scipy import stats

    from bayesrank.data.batch import stack_problems
    from bayesrank.inference.problem import problem_covariance
    from bayesrank.kernels.params import unconstrain_host
    from bayesrank.kernels.xpgp import default_trainable
    from bayesrank.learning.matching import match_design

    rng = np.random.default_rng(4)
    problems = []
    for n in (9, 14):
        base = _problem(int(rng.integers(100)), n=n, m=2 * n)
        problems.append(
            PreferenceProblem.create(
                base.pairs,
                X=base.X,
                ties=np.c_[np.arange(4), np.arange(4) + 5],
                weights=rng.integers(1, 4, len(base.pairs)).astype(float),
                graded=np.c_[np.arange(n), rng.integers(0, 3, n)],
            )
        )
    prior = XPGP(
        RBF(1.0, 0.7),
        weights=jnp.array([1.0]),
        entity=Independent(0.3),
        margin=0.5,
        threshold=-1.0,
        threshold_gaps=jnp.array([2.0]),
    )
    other = dataclasses.replace(prior, weights=jnp.array([6.0]), entity=Independent(1.5))
    flags = tuple(bool(f) for f in jax.tree_util.tree_leaves(default_trainable(prior)))
    free = [
        np.ravel(x)
        for x, f in zip(jax.tree_util.tree_leaves(unconstrain_host(prior)), flags, strict=True)
        if f
    ]
    grid = np.concatenate(free)[None, None].repeat(2, axis=0)  # (S = 2, B = 1, P)
    priors = jax.tree_util.tree_map(lambda a, b: np.stack([a, b]), prior, other)
    out = match_design(grid, priors, stack_problems(problems), prior, flags, per_query=False)
    np.testing.assert_array_equal(out[0], grid[0])  # the start keeps its values
    # one theta: the rates are the queries' mean rates
    rates = []
    for p in problems:
        tie, grade, weight = p.outcomes()
        pair = grade < 0
        rates.append(
            (
                np.sum(weight[pair] * tie[pair]) / np.sum(weight[pair]),
                np.cumsum(np.bincount(grade[~pair], weight[~pair], 3))[:2] / np.sum(weight[~pair]),
            )
        )
    r = np.mean([a for a, _ in rates])
    F = np.mean([b for _, b in rates], axis=0)
    sizes = [len(p.rows) for p in problems]

    # the variances: each query's weighted mean, averaged over queries by their row counts
    def query_means(kind):
        means = []
        for p in problems:
            K = np.asarray(problem_covariance(other, p, jnp.float64))
            _, grade, weight = p.outcomes()
            sel = grade < 0 if kind == "pair" else grade >= 0
            i, j = p.rows[sel, 0], p.rows[sel, 1]
            v = K[i, i] + (K[j, j] - 2 * K[i, j] if kind == "pair" else 0.0)
            means.append(np.average(v, weights=weight[sel]))
        return np.average(means, weights=sizes)

    v_p, v_g = query_means("pair"), query_means("grade")
    eps = np.sqrt(1 + v_p) * stats.norm.ppf((1 + r) / 2)
    b = np.sqrt(1 + v_g) * stats.norm.ppf(F)
    labels = [
        name
        for name, f in zip(
            ["kappa", "rho", "weights", "sigma", "entity", "margin", "threshold", "gaps"],
            flags,
            strict=True,
        )
        if f
    ]
    got = dict(zip(labels, out[1, 0], strict=True))
    np.testing.assert_allclose(np.exp(got["margin"]), eps, rtol=1e-10)
    np.testing.assert_allclose(got["threshold"], b[0], rtol=1e-10)
    np.testing.assert_allclose(np.exp(got["gaps"]), b[1] - b[0], rtol=1e-10)
    # the kernel's own coordinates are the design's, untouched
    np.testing.assert_array_equal(out[1, 0, :3], grid[1, 0, :3])
