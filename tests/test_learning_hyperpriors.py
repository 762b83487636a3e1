"""Named hyperpriors (bayesrank.learning.hyperpriors): log densities against scipy and hand
formulas, gradients against finite differences, and a fit that uses them."""

from __future__ import annotations

import math
import warnings

import jax
import numpy as np
import pytest
from scipy import stats

from bayesrank import ARD, XPGP, PreferenceProblem
from bayesrank.kernels.params import unconstrain
from bayesrank.learning import fit_hyperparameters
from bayesrank.learning.hyperpriors import (
    Gamma,
    SmoothedBox,
    botorch_priors,
    check_hyperprior,
    log_prior_fn,
)


def _flags(prior):
    names = ("kappa", "lengthscales", "weights", "sigma")  # unconstrain's leaf order
    assert len(jax.tree_util.tree_leaves(unconstrain(prior))) == len(names)
    return (False, True, True, False)


def test_log_densities_equal_the_references():
    """Gamma on lengthscales in units of each feature's range (scipy's gamma.logpdf of
    ell / range, minus log range), a smoothed box on the weight (GPyTorch's formula by hand),
    the normal on nothing else (every free value is named)."""
    prior = XPGP(ARD(1.0, np.array([0.3, 2.0])), weights=np.array([9.0]))
    named = {
        "ARD.lengthscales": Gamma(2.4, 2.7, relative=True),
        "XPGP.weights": SmoothedBox(0.1, 7.0, 0.05),
    }
    ranges = np.array([[0.5, 4.0]])
    x = np.log(np.array([[0.3, 2.0, 9.0]]))
    fn = log_prior_fn(prior, _flags(prior), named, center=x * 0, scale=2.0, ranges=ranges)
    value, grad = fn(x)
    ell = np.array([0.3, 2.0])
    expected = np.sum(stats.gamma.logpdf(ell / ranges[0], a=2.4, scale=1 / 2.7) - np.log(ranges[0]))
    d = 9.0 - 7.0  # past the box's upper end
    expected += stats.norm.logpdf(d, scale=0.05) - math.log(
        1 + 6.9 / (math.sqrt(2 * math.pi) * 0.05)
    )
    np.testing.assert_allclose(value, [expected], rtol=1e-12)
    h = 1e-6
    for k in range(3):  # central differences in the unconstrained coordinates
        e = np.zeros_like(x)
        e[0, k] = h
        fd = (fn(x + e)[0] - fn(x - e)[0]) / (2 * h)
        np.testing.assert_allclose(grad[0, k], fd[0], rtol=1e-6)


def test_unnamed_values_keep_the_normal_prior():
    prior = XPGP(ARD(1.0, np.array([0.3, 2.0])), weights=np.array([2.0]))
    center = np.array([[0.1, 0.2, 0.3]])
    fn = log_prior_fn(
        prior, _flags(prior), {"XPGP.weights": SmoothedBox(0.1, 7.0)}, center, 2.0, None
    )
    x = np.array([[1.0, -1.0, np.log(2.0)]])  # the weight inside its box: a constant there
    value, grad = fn(x)
    box = -math.log(math.sqrt(2 * math.pi) * 0.01) - math.log(
        1 + 6.9 / (math.sqrt(2 * math.pi) * 0.01)
    )
    np.testing.assert_allclose(value, [-0.5 * (0.9**2 + 1.2**2) / 4 + box])
    np.testing.assert_allclose(grad, [[-0.9 / 4, 1.2 / 4, 0.0]])


def test_check_hyperprior():
    assert check_hyperprior("botorch") == {k: v for k, v in botorch_priors().items() if v}
    with pytest.raises(ValueError, match=r"Class\.field"):
        check_hyperprior({"lengthscales": Gamma(1.0, 1.0)})
    with pytest.raises(ValueError, match="valid Gamma"):
        check_hyperprior({"ARD.lengthscales": Gamma(-1.0, 1.0)})
    with pytest.raises(ValueError, match="'botorch'"):
        check_hyperprior("gpytorch")


@pytest.mark.slow
def test_a_fit_with_botorch_priors_moves_toward_their_mode():
    """With few pairs, Gamma(2.4, 2.7) pulls every ARD lengthscale toward its mode (0.52 of the
    feature's range) from the median heuristic's start, and the box holds the weight."""
    rng = np.random.default_rng(0)
    X = rng.random((20, 3))
    pairs = np.array([(i, i + 1) for i in range(0, 18, 2)])
    problem = PreferenceProblem.create(pairs, X=X)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fit = fit_hyperparameters(XPGP(ARD(1.0, np.ones(3))), problem, hyperprior="botorch")
    ranges = X.max(0) - X.min(0)
    mode = (2.4 - 1) / 2.7
    ell = np.asarray(fit.prior.attribute.lengthscales) / ranges
    assert np.all(np.abs(ell - mode) < 0.35), ell
    w = float(fit.prior.weights[0])
    assert math.sqrt(0.005) - 0.01 < w < math.sqrt(50.0) + 0.01
    with pytest.raises(ValueError, match="BFGS"):
        fit_hyperparameters(XPGP(ARD(1.0, np.ones(3))), problem, hyperprior="botorch", method="em")


@pytest.mark.slow
def test_learn_hyperparameters_nuts_predicts_by_the_average_over_draws():
    """``learn_hyperparameters="nuts"``: hyperparameters and preference degrees sampled
    together; each pair's probability is the mean of Phi(xi_i - xi_j) over the draws (scipy's
    ndtr on the draws, by hand), and the hyperparameters' draws come back."""
    from scipy.special import ndtr

    from bayesrank import RBF, XPGPModel

    rng = np.random.default_rng(1)
    X = rng.normal(size=(8, 2))
    pairs = np.array([(0, 1), (1, 2), (3, 2), (4, 5), (6, 7), (0, 7)])
    problem = PreferenceProblem.create(pairs, X=X)
    model = XPGPModel(XPGP(RBF()), nuts_options=dict(num_warmup=60, num_samples=40, num_chains=1))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # a short run: its diagnostics may say unmixed
        post = model.fit(problem, key=jax.random.key(0), learn_hyperparameters="nuts")
    assert post.inference == "nuts" and post.learning is None
    draws = np.asarray(post.result.samples).reshape(-1, 8)
    assert draws.shape == (40, 8)
    test = np.array([(0, 3), (5, 6), (2, 7)])
    expected = ndtr(draws[:, test[:, 0]] - draws[:, test[:, 1]]).mean(axis=0)
    np.testing.assert_allclose(np.asarray(post.predict_pairs(test).prob), expected, rtol=1e-10)
    rho = [np.asarray(v) for k, v in post.result.hyper.items() if "rho" in k]
    assert rho and rho[0].size == 40 and np.std(rho[0]) > 0  # theta was sampled, not fixed
    with pytest.raises(ValueError, match="needs a key"):
        model.fit(problem, learn_hyperparameters="nuts")


def test_learn_hyperparameters_names_itself_when_wrong():
    """Issue 32: a dict passed as learn_hyperparameters was answered "method must be 'em' or
    'evidence'", naming an option the user did not pass."""
    from bayesrank import RBF, XPGPModel

    problem = PreferenceProblem.create(np.array([(0, 1), (1, 2)]), X=np.eye(3))
    for bad in ({"restarts": 2}, "bfgs", 1):
        with pytest.raises(ValueError, match="learn_hyperparameters must be True, False"):
            XPGPModel(XPGP(RBF())).fit(problem, learn_hyperparameters=bad)
