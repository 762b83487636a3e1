"""The sparse engine's hyperparameter learning (``learning.fit_sparse_hyperparameters``), checked
against the dense Laplace engine's learned values and exact evidence, through the model, a model
file and the CLI; and SQUAREM against a map's closed-form fixed point."""

from __future__ import annotations

import dataclasses

import jax
import numpy as np
import pytest

from bayesrank.data.problem import PreferenceProblem
from bayesrank.inference.engines import Laplace, SparseLaplace
from bayesrank.kernels import RBF, XPGP, Independent, Linear, RegularizedLaplacian
from bayesrank.kernels.xpgp import default_trainable
from bayesrank.learning import fit_hyperparameters, fit_sparse_hyperparameters, initialize
from bayesrank.learning.layout import stack
from bayesrank.learning.squarem import squarem
from bayesrank.model import XPGPModel

PRIOR = XPGP(RBF(), (RegularizedLaplacian(),), entity=Independent())


def _problem(n: int, m: int, seed: int = 1) -> PreferenceProblem:
    """Entities with three attributes and a clustering (the relation); the latent value is a
    function of the attributes plus a cluster effect, the pairs probit judgements."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 3))
    groups = rng.integers(0, 8, n)
    W = (groups[:, None] == groups[None, :]).astype(float)
    np.fill_diagonal(W, 0)
    xi = np.sin(2 * X[:, 0]) + X[:, 1] + rng.normal(size=8)[groups] + 0.3 * rng.normal(size=n)
    index = rng.integers(0, n, (m, 2))
    index = index[index[:, 0] != index[:, 1]]
    won = xi[index[:, 0]] - xi[index[:, 1]] + 0.7 * rng.normal(size=len(index)) > 0
    return PreferenceProblem.create(np.where(won[:, None], index, index[:, ::-1]), X,
                                    relations=[W])  # fmt: skip


def _exact_evidence(prior, problem) -> float:
    """The dense Laplace engine's evidence (exact: a Cholesky factor, no probes)."""
    return float(XPGPModel(prior, Laplace()).fit(problem).result.log_evidence)


@pytest.mark.slow
def test_sparse_learning_agrees_with_the_dense_engine():
    """On 80 entities at full rank (the sparse prior is then the dense one), the sparse
    engine's learned hyperparameters against the dense Laplace engine's, learned with the same
    free values (weights, lengthscale, entity effect; ``iota`` fixed, no hyperprior):

    - the dense engine's exact evidence at the sparse answer is within 0.5 nats of its own
      optimum and 15 nats above the median heuristic's start. 0.5 nats: the sparse answer is
      the stationary point of a gradient estimated from 16 draws and of an SLQ value (its se
      about 0.6 nats, mostly shared by the search's points), on an evidence whose curvature
      in the weights is a few nats per unit of log;
    - the lengthscale and the attribute weight within 5 %, the relation's weight within 15 %
      (the flattest of the three directions). The entity effect is not compared: the evidence
      is flat in it below ~0.1 (both answers are there: the dense engine's 0.02)."""
    problem = _problem(80, 400)
    trainable = default_trainable(PRIOR)
    frozen = dataclasses.replace(trainable.relations[0], iota=False)
    trainable = dataclasses.replace(trainable, relations=(frozen,))
    dense = fit_hyperparameters(PRIOR, [problem], engine=Laplace(), trainable=trainable,
                                hyperprior_scale=None).prior  # fmt: skip
    sparse = fit_sparse_hyperparameters(PRIOR, problem, rank=80, key=jax.random.key(3))
    assert sparse.converged and not sparse.at_bound
    best = _exact_evidence(dense, problem)
    start = _exact_evidence(initialize(PRIOR, stack([problem])), problem)
    at_sparse = _exact_evidence(sparse.prior, problem)
    assert best - 0.5 < at_sparse <= best + 1e-6
    assert at_sparse > start + 15
    assert abs(sparse.log_evidence - at_sparse) < 3 * sparse.se + 0.5  # the estimate's own
    np.testing.assert_allclose(sparse.prior.attribute.rho, dense.attribute.rho, rtol=0.05)
    np.testing.assert_allclose(sparse.prior.weights[0], dense.weights[0], rtol=0.05)
    np.testing.assert_allclose(sparse.prior.weights[1], dense.weights[1], rtol=0.15)
    # the search's values: the answer is the best evaluated point, and beats the start's
    assert sparse.log_evidence == pytest.approx(np.max(sparse.evidences))
    assert sparse.log_evidence > sparse.start_log_evidence


def test_the_model_learns_on_the_sparse_engine_and_its_file_keeps_it(tmp_path):
    """``XPGPModel(prior, SparseLaplace()).fit(..., learn_hyperparameters=True)`` fits at the
    learned prior (that of ``fit_sparse_hyperparameters`` with the same key), whose evidence
    estimate is at least the start's; a model file keeps the prior and the learning result."""
    from bayesrank.io import load, save

    problem = _problem(30, 120, seed=2)
    key = jax.random.key(5)
    options = dict(max_steps=9, search_tol=0.5)
    post = XPGPModel(PRIOR, SparseLaplace(rank=30)).fit(
        problem, key=key, learn_hyperparameters=True, **options
    )
    direct = fit_sparse_hyperparameters(PRIOR, problem, rank=30, key=key, **options)
    np.testing.assert_allclose(post.prior.weights, direct.prior.weights, rtol=1e-12)
    np.testing.assert_allclose(post.prior.attribute.rho, direct.prior.attribute.rho, rtol=1e-12)
    assert post.learning.log_evidence >= post.learning.start_log_evidence
    # the fit is at the learned prior: its mode is the sparse engine's at that prior
    again = XPGPModel(post.prior, SparseLaplace(rank=30)).fit(problem, key=key)
    np.testing.assert_allclose(post.mean, again.mean, atol=1e-10)
    save(post, tmp_path / "m.npz")
    back = load(tmp_path / "m.npz")
    np.testing.assert_allclose(back.prior.weights, post.prior.weights, rtol=0)
    assert back.learning.log_evidence == post.learning.log_evidence
    np.testing.assert_allclose(back.learning.factors, post.learning.factors, rtol=0)


def _ties_problem():
    problem = _problem(12, 30)
    return PreferenceProblem.create(problem.pairs, problem.X, relations=problem.relations,
                                    ties=[[0, 1]])  # fmt: skip


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda p: fit_sparse_hyperparameters(PRIOR, _ties_problem()), "strict pairs only"),
        (lambda p: fit_sparse_hyperparameters(dataclasses.replace(PRIOR, attribute=Linear()), p),
         "pass lengthscale=False"),
        (lambda p: fit_sparse_hyperparameters(PRIOR, p, search_range=0.5), "search_range"),
        (lambda p: fit_sparse_hyperparameters(PRIOR, p, n_probes=1), "n_probes"),
        (lambda p: fit_sparse_hyperparameters(PRIOR, p, key=3), "key"),
        (lambda p: XPGPModel(PRIOR, SparseLaplace()).fit(p, learn_hyperparameters="em"),
         "learns by its evidence"),
        (lambda p: XPGPModel(PRIOR, SparseLaplace()).fit(p, learn_hyperparameters=True,
                                                          steps=3), "unknown learning option"),
    ],
)  # fmt: skip
def test_bad_settings_of_the_sparse_learning_are_named(call, message):
    with pytest.raises(ValueError, match=message):
        call(_problem(12, 30))


def test_squarem_finds_a_linear_maps_fixed_point():
    """``F(x) = A x + b`` with ``A``'s spectral radius 0.95 (EM's slow linear rate): the fixed
    point is ``(I - A)^-1 b`` (closed form); SQUAREM reaches it to 1e-8 in fewer steps than
    the plain iteration needs to reach 1e-3."""
    rng = np.random.default_rng(0)
    Q, _ = np.linalg.qr(rng.normal(size=(4, 4)))
    A = Q @ np.diag([0.95, 0.9, 0.5, 0.1]) @ Q.T
    b = rng.normal(size=4)
    exact = np.linalg.solve(np.eye(4) - A, b)
    x, trace, converged = squarem(lambda x: A @ x + b, np.zeros(4), 60, 1e-10)
    assert converged
    np.testing.assert_allclose(x, exact, atol=1e-8)
    plain, steps = np.zeros(4), 0
    while np.max(np.abs(plain - exact)) > 1e-3:
        plain, steps = A @ plain + b, steps + 1
    assert 3 * (len(trace) - 1) < steps


def _membership_problem(n: int, m: int, seed: int = 4):
    """HetRec's shape in small: attributes in ``[0, 1]``, a one-group relation (a director of
    ``n / 4``) and a many-group one (each entity in one or two of five genres); the latent value
    a function of the attributes plus a director effect, the pairs probit judgements."""
    rng = np.random.default_rng(seed)
    X = rng.uniform(size=(n, 4))
    director = rng.integers(0, n // 4, n)
    second = rng.random(n) < 0.5
    genre_e = np.concatenate([np.arange(n), np.flatnonzero(second)])
    genre_g = np.concatenate([rng.integers(0, 5, n), rng.integers(0, 5, int(second.sum()))])
    memberships = {"director": (np.arange(n), director), "genre": (genre_e, genre_g)}
    xi = 2 * np.sin(3 * X[:, 0]) + X[:, 1] + 1.5 * rng.normal(size=n // 4)[director]
    index = rng.integers(0, n, (m, 2))
    index = index[index[:, 0] != index[:, 1]]
    won = xi[index[:, 0]] - xi[index[:, 1]] + rng.normal(size=len(index)) > 0
    return X, memberships, np.where(won[:, None], index, index[:, ::-1])


@pytest.mark.slow
def test_learning_a_membership_prior_reaches_the_dense_evidences_optimum():
    """``fit_latent_scales`` on the large experiment's membership prior
    (``experiments.large_entities.latent_builder``: RBF features at full rank, two hypergraph
    relations, an entity block), 60 entities, against the dense Laplace engine's exact evidence
    of the same covariance (``K = w_1^2 K_rbf(rho / f) + sum_r w_r^2 Q_r^-1 + s^2 0.5 I``, each
    ``Q_r`` densely inverted), maximised over the same five values (``log f`` and the four
    log variances) by L-BFGS with its exact gradient: the sparse answer is within 0.5 nats of
    that optimum (the tolerance of ``test_sparse_learning_agrees_with_the_dense_engine``, for
    the same reasons) and well above the start, and its own estimate is within its error."""
    import jax.numpy as jnp
    from scipy.optimize import minimize

    from bayesrank.experiments._common import median_rho
    from bayesrank.experiments.large_entities import latent_builder
    from bayesrank.inference import laplace
    from bayesrank.learning import fit_latent_scales

    n = 60
    X, memberships, pairs = _membership_problem(n, 400)
    build = latent_builder(X, memberships, n, relations=True)
    got = fit_latent_scales(build, pairs, key=jax.random.key(2))
    assert got.converged and not got.at_bound
    latent, _ = build(1.0)
    covariances = [np.linalg.inv(b.dense()) for b in latent.blocks[1:]]
    D = np.sum((X[:, None] - X[None]) ** 2, -1)
    rho, jpairs = median_rho(X), jnp.asarray(pairs)

    def exact(p):  # p = [log f, log w_1^2, log w_r^2..., log s^2]; RBF: exp(-rho^2 D / 2)
        K = jnp.exp(p[1]) * jnp.exp(-0.5 * (rho / jnp.exp(p[0])) ** 2 * D)
        K = K + sum(jnp.exp(p[2 + r]) * C for r, C in enumerate(covariances[:-1]))
        return laplace.log_evidence(K + jnp.exp(p[-1]) * covariances[-1], jpairs)

    value_and_grad = jax.jit(jax.value_and_grad(lambda p: -exact(p)))
    answer = np.concatenate([[np.log(got.factor)], np.log(got.variances)])
    best = max(
        -minimize(lambda p: [np.asarray(v, float) for v in value_and_grad(p)], start, jac=True,
                  method="L-BFGS-B").fun
        for start in (np.zeros(5), answer)
    )  # fmt: skip
    at_answer, at_start = float(exact(answer)), float(exact(np.zeros(5)))
    assert best - 0.5 < at_answer <= best + 1e-6
    assert at_answer > at_start + 5
    assert abs(got.log_evidence - at_answer) < 3 * got.se + 0.5


def test_fit_latent_scales_names_a_bad_map():
    """A map ``T`` of the wrong shape, not 0/1, tying a term to two scales, with a scale that
    ties no term, or a later ``build`` of other shapes is refused, each by its own message."""
    from bayesrank.experiments.large_entities import latent_builder
    from bayesrank.learning import fit_latent_scales

    X, memberships, pairs = _membership_problem(20, 60)
    build = latent_builder(X, memberships, 5, relations=True)
    _, T = build(1.0)
    for bad, message in ((np.eye(3), r"\(1 \+ K, P\)"), (0.5 * T, "0/1"),
                         (np.ones((5, 2)), "more than one scale"),
                         (np.hstack([T, np.zeros((5, 1))]), "tie no term")):  # fmt: skip
        with pytest.raises(ValueError, match=message):
            fit_latent_scales(lambda f, bad=bad: (build(f)[0], bad), pairs)
    other = latent_builder(X, memberships, 6, relations=True)
    with pytest.raises(ValueError, match="same shapes"):
        fit_latent_scales(lambda f: build(f) if f == 1.0 else other(f), pairs, max_steps=0)


@pytest.mark.parametrize("entity", [None, 1e-3])
def test_the_membership_builder_states_the_large_experiments_prior(entity):
    """``latent_builder(...)(1.0)`` at unit scales has the covariance of ``large._prior`` (the
    fixed models' prior), at a rank below ``n`` (so the residual block matters), with the entity
    effect as a block of its own (``entity=None``) or the ``attributes`` model's jitter; and
    its map ties the features and the residuals to ``w_1``. Covariances by dense inversion."""
    from bayesrank.experiments.large import _prior
    from bayesrank.experiments.large_entities import latent_builder

    def covariance(latent):
        F = np.asarray(latent.features)
        return F @ F.T + sum(np.linalg.inv(b.dense()) for b in latent.blocks)

    X, memberships, _ = _membership_problem(24, 10)
    latent, T = latent_builder(X, memberships, 6, relations=True, entity=entity)(1.0)
    fixed, _ = _prior(X, memberships, 6, relations=True, entity=entity)
    np.testing.assert_allclose(covariance(latent), covariance(fixed), rtol=1e-9, atol=1e-9)
    assert T[0, 0] == T[1, 0] == 1 and T[:, 0].sum() == 2
    assert T.shape[1] == (4 if entity is None else 3)
