"""One interface, three engines: ``XPGPModel(prior, inference="ep" | "laplace" | "nuts")``.

References: each engine's own pure function on the same ``K`` (no padding, no model), and NUTS
as the gold standard for the predicted probabilities (EP closer to it than Laplace, beyond the
Monte Carlo standard error). In float32 (x64 off) each engine runs at its float32 defaults; the
comparisons between engines hold as they are, identities to float32 round-off."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from helpers import assert_close, count_compilations, float32_not_run, float32_param

from bayesrank import BFGS, RBF, XPGP, Independent, PreferenceProblem, XPGPModel
from bayesrank.inference import laplace
from bayesrank.inference.posterior import GaussianPosterior, SamplePosterior
from bayesrank.model import Posterior

#: The slow tests left out of the float32 run (what covers each engine there instead).
FLOAT32_ELSEWHERE = (
    "slow; float32 engines: test_predict_new_at_a_training_entity_is_its_posterior here, "
    "test_ep.py, test_laplace.py, test_nuts.py"
)

PRIOR = XPGP(RBF(1.0, 0.7), weights=jnp.array([1.5]), entity=Independent(0.3))
NUTS = {"num_warmup": 400, "num_samples": 1000, "num_chains": 2}


def problem(seed=0, n=12, m=20):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 2))
    u = X[:, 0]
    i = rng.integers(0, n, m)
    j = (i + rng.integers(1, n, m)) % n
    return PreferenceProblem.create(np.where((u[i] > u[j])[:, None], np.c_[i, j], np.c_[j, i]), X=X)


@pytest.fixture(scope="module")
def fits():
    p = problem()
    out = {}
    for engine in ("ep", "laplace", "nuts"):
        model = XPGPModel(PRIOR, inference=engine, nuts_options=NUTS)
        out[engine] = model.fit(p, key=jax.random.key(0))
    return p, out


@pytest.mark.slow
@float32_not_run(FLOAT32_ELSEWHERE)
def test_the_same_posterior_type_from_every_engine(fits):
    p, posts = fits
    test = np.c_[np.arange(p.n - 1), np.arange(1, p.n)]
    for engine, post in posts.items():
        assert isinstance(post, Posterior) and post.inference == engine
        face = SamplePosterior if engine == "nuts" else GaussianPosterior
        assert isinstance(post.result, face)
        pred = post.predict_pairs(test)
        assert pred.prob.shape == (p.n - 1,) and np.all((pred.prob > 0) & (pred.prob < 1))
        assert post.rank().shape == (p.n,) and post.probability_matrix().shape == (p.n, p.n)
        assert post.converged


@pytest.mark.slow
@float32_not_run(FLOAT32_ELSEWHERE)
def test_laplace_through_the_model_is_laplace_on_K(fits):
    p, posts = fits
    K = PRIOR.covariance(jnp.asarray(p.X))
    ref = laplace.fit(K, jnp.asarray(p.pairs))
    np.testing.assert_allclose(posts["laplace"].mean, ref.mean, atol=1e-9)
    np.testing.assert_allclose(posts["laplace"].cov, ref.cov, atol=1e-9)
    np.testing.assert_allclose(posts["laplace"].log_evidence, ref.log_evidence, rtol=1e-10)
    with count_compilations() as n:  # a second problem of the same buckets
        XPGPModel(PRIOR, inference="laplace").fit(problem(1, n=11, m=19))
    assert n[0] == 0


# passes in float32; not in the float32 run (time)
@pytest.mark.slow
def test_ep_is_closer_to_nuts_than_laplace(fits):
    """Mean |p_engine - p_NUTS| over all pairs of entities: EP's is the smaller, by more than
    4 Monte Carlo standard errors of NUTS's probabilities (Takeno et al. 2023 ask which)."""
    p, posts = fits
    iu, ju = np.triu_indices(p.n, 1)
    pairs = np.c_[iu, ju]
    draws = np.asarray(posts["nuts"].result.draws)
    phi = jax.scipy.stats.norm.cdf(draws[:, iu] - draws[:, ju])
    mcse = float(np.mean(np.std(np.asarray(phi), axis=0) / np.sqrt(len(draws))))
    p_nuts = np.asarray(posts["nuts"].predict_pairs(pairs).prob)
    gap = {
        e: float(np.mean(np.abs(posts[e].predict_pairs(pairs).prob - p_nuts)))
        for e in ("ep", "laplace")
    }
    assert gap["ep"] + 4 * mcse < gap["laplace"], (gap, mcse)


def test_bad_options():
    p = problem()
    with pytest.raises(ValueError, match="inference"):
        XPGPModel(PRIOR, inference="gibbs").fit(p)
    with pytest.raises(ValueError, match="needs a key"):
        XPGPModel(PRIOR, inference="nuts").fit(p)


@pytest.mark.slow
@float32_not_run(FLOAT32_ELSEWHERE)
def test_learning_with_each_gaussian_engine():
    """``learn_hyperparameters`` with ``inference="laplace"`` maximises the Laplace evidence: the
    fitted posterior's evidence is at least that of the starting prior, and differs from EP's."""
    p = problem(2, n=15, m=40)
    got = {}
    for engine in ("ep", "laplace"):
        model = XPGPModel(PRIOR, inference=engine)
        start = model.fit(p)
        fitted = model.fit(p, learn_hyperparameters="evidence", optimizer=BFGS(max_steps=20))
        assert float(fitted.log_evidence) >= float(start.log_evidence) - 1e-8
        assert fitted.learning.converged
        got[engine] = fitted.prior
    assert not np.allclose(got["ep"].weights, got["laplace"].weights)


@pytest.mark.slow
@float32_not_run(FLOAT32_ELSEWHERE)
def test_the_readmes_default_fit_on_the_bundled_sample():
    """The README's default: ``XPGP(RBF(), entity=Independent())`` fitted with
    ``learn_hyperparameters=True`` (EP-evidence maximisation) converges without a warning, raises
    the evidence above the median-heuristic start's, and predicts held-out pairs of a bundled
    OHSUMED query better than the prior it started from (held-out log-likelihood)."""
    import warnings

    from bayesrank.data.batch import stack_problems
    from bayesrank.data.pairs import pairs_from_grades, split_pairs
    from bayesrank.data.sample import load_sample
    from bayesrank.learning import LearningConvergenceWarning
    from bayesrank.learning.initialize import initialize

    q = max(load_sample(), key=lambda q: len(q.grades))
    known, held_out = split_pairs(jax.random.key(0), pairs_from_grades(q.grades), n_known=150)
    problem = PreferenceProblem.create(known, X=q.X)
    prior = XPGP(RBF(), entity=Independent())
    with warnings.catch_warnings():
        warnings.simplefilter("error", LearningConvergenceWarning)
        fitted = XPGPModel(prior).fit(problem, learn_hyperparameters=True)
    assert fitted.learning.converged
    start = initialize(prior, stack_problems([problem]))
    before = XPGPModel(start).fit(problem)
    assert float(fitted.log_evidence) > float(before.log_evidence)

    def loglik(post):
        return float(np.mean(np.log(np.asarray(post.predict_pairs(held_out).prob))))

    assert loglik(fitted) > loglik(before)


@pytest.mark.slow  # 3 s or more in the fast loop
@pytest.mark.parametrize("engine", ["ep", float32_param("laplace")])  # float32 run (time): one
def test_predict_new_at_a_training_entity_is_its_posterior(engine):
    """At an input equal to a fitted entity's, the inductive prediction of an attribute-only
    prior is that entity's posterior (k_* = K[:, i], so K^-1 k_* = e_i); 6 pairs, not a bucket
    size (Laplace's sites were once left padded, and predict_new failed to broadcast)."""
    prior = XPGP(RBF(1.0, 0.7), weights=jnp.array([1.5]))
    p = problem(2, n=7, m=6)
    post = XPGPModel(prior, inference=engine).fit(p)
    mean, cov = post.predict_new(p.X[[4, 1]])
    # float32: K^-1 k_* = e_i up to solves with K, of condition 1.5e4 (seven points under an
    # RBF): the bound 4 cond eps32 on O(1) values, 7e-3 (measured: 5e-7)
    f32 = {"atol32": 4 * 1.5e4 * float(np.finfo(np.float32).eps)}
    assert_close(mean, np.asarray(post.mean)[[4, 1]], atol=1e-8, **f32)
    assert_close(cov, np.asarray(post.cov)[np.ix_([4, 1], [4, 1])], atol=1e-8, **f32)
