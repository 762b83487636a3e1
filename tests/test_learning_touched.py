"""Evidence maximisation restricted to the entities that pairs touch (``parallel.prepare_batch``).

References: a worked example of the renumbering; the EP evidence and its gradient on the whole
problem (every entity, no restriction) by ``jax.value_and_grad``; EP run on the whole problem
at the fitted prior, for the posteriors of every entity, touched or not. In float32 (x64 off)
EP stops at ``EP_TOL32`` (``helpers``), in the whole problem and the restricted one alike.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from helpers import EP_ATOL32, EP_TOL32, assert_close, ep_tol, float32_not_run, float32_param

from bayesrank import EP
from bayesrank.data.batch import stack_problems, touched_entities
from bayesrank.data.problem import PreferenceProblem
from bayesrank.inference import ep
from bayesrank.kernels import RBF, XPGP, Independent, RegularizedLaplacian
from bayesrank.learning import BFGS, Start, fit_hyperparameters
from bayesrank.parallel import covariances, prepare_batch


def sparse_problems(seed, sizes=((30, 12), (22, 9)), relations=True):
    """Queries whose few pairs leave many entities untouched (a group-structured graph)."""
    rng = np.random.default_rng(seed)
    out = []
    for n, m in sizes:
        X = rng.normal(size=(n, 2))
        groups = rng.integers(0, 4, n)
        W = (groups[:, None] == groups[None, :]).astype(float)
        np.fill_diagonal(W, 0)
        i = rng.integers(0, n, m)
        j = (i + rng.integers(1, n, m)) % n
        win = rng.uniform(size=m) < 1 / (1 + np.exp(-(X[i, 0] - X[j, 0])))
        pairs = np.where(win[:, None], np.c_[i, j], np.c_[j, i])
        out.append(PreferenceProblem.create(pairs, X=X, relations=[W] if relations else []))
    return out


def test_touched_entities_worked_example():
    problem = PreferenceProblem.create([[3, 1], [1, 5], [5, 3]], n=7)
    other = PreferenceProblem.create([[0, 6]], n=7)
    batch = stack_problems([problem, other], m_pad=4)
    entities, entity_mask, pairs = touched_entities(batch)
    np.testing.assert_array_equal(entities, [[1, 3, 5], [0, 6, 0]])
    np.testing.assert_array_equal(entity_mask, [[True, True, True], [True, True, False]])
    np.testing.assert_array_equal(pairs[0], [[1, 0], [0, 2], [2, 1], [0, 1]])  # last: padding
    np.testing.assert_array_equal(pairs[1], [[0, 1], [0, 1], [0, 1], [0, 1]])
    with pytest.raises(ValueError, match="size=2"):
        touched_entities(batch, size=2)


def _evidence(prior, data):
    K = covariances(prior, data)
    post = jax.vmap(lambda K, p, v: ep.fit(K, p, pair_mask=v, tol=ep_tol(1e-12), max_iter=1000))(
        K, data.pairs, data.pair_mask
    )
    return jnp.sum(post.log_evidence)


@pytest.mark.parametrize(  # float32 run (time): attributes only; both pass in float32
    "relations", [True, float32_param(False)], ids=["graph-kernel", "attributes-only"]
)
@pytest.mark.slow
def test_restricted_evidence_and_gradient_equal_the_whole_problems(relations):
    """Graph kernels: ``K`` whole, then restricted; attributes only: ``X`` restricted.

    float32: both fits stop within ``EP_TOL32`` of EP's fixed point, where ``log Z`` is
    stationary in the sites (so the values agree to better than ``EP_TOL32``, relative) and
    its gradient in ``K`` is not (so the gradients agree to ``EP_ATOL32``)."""
    problems = sparse_problems(1, relations=relations)
    rel = (RegularizedLaplacian(1.0, 0.7),) if relations else ()
    weights = jnp.array([1.3, 0.8]) if relations else jnp.array([1.3])
    prior = XPGP(RBF(1.0, 0.9), rel, weights, entity=Independent(0.3))
    batch = stack_problems(problems)
    whole, restricted = prepare_batch(prior, batch), prepare_batch(prior, batch, restrict=True)
    assert restricted.pairs.shape[1] == whole.pairs.shape[1]
    assert (restricted.X.shape[1] if not relations else restricted.entities.shape[1]) < 30
    value, grad = jax.value_and_grad(_evidence)(prior, whole)
    value_t, grad_t = jax.value_and_grad(_evidence)(prior, restricted)
    assert_close(value_t, value, rtol=1e-11, rtol32=EP_TOL32)
    leaves, leaves_t = jax.tree_util.tree_leaves(grad), jax.tree_util.tree_leaves(grad_t)
    assert any(np.any(np.abs(np.asarray(g)) > 1e-3) for g in leaves)
    for g, g_t in zip(leaves, leaves_t, strict=True):
        assert_close(g_t, g, rtol=1e-8, atol=1e-10, atol32=EP_ATOL32)


@pytest.mark.parametrize(
    "bucket, coarse", [(None, None), (16, None), (16, 15)], ids=["one-batch", "buckets", "coarse"]
)
@pytest.mark.slow
@float32_not_run(
    "slow (three learning runs); float32's restricted problem is checked by "
    "test_restricted_evidence_and_gradient_equal_the_whole_problems"
)
def test_fit_posteriors_cover_untouched_entities(bucket, coarse):
    """The fit's posteriors over every entity equal EP on the whole problem at the fitted prior.

    With ``coarse``, the full fit's EP starts from the coarse fit's sites, mapped back to the
    pairs they came from, in buckets: the final posteriors must not depend on that start.
    """
    problems = sparse_problems(2, sizes=((30, 12), (22, 9), (12, 20)))
    prior = XPGP(RBF(), (RegularizedLaplacian(),), entity=Independent(0.1))
    fit = fit_hyperparameters(
        prior,
        problems,
        optimizer=BFGS(max_steps=3),
        engine=EP(tol=1e-10),
        start=Start(coarse=coarse),
        bucket=bucket,
    )
    whole = prepare_batch(fit.prior, stack_problems(problems))
    K = covariances(fit.prior, whole)
    for b, p in enumerate(problems):
        n, m = p.n, len(p.pairs)
        ref = ep.fit(K[b, :n, :n], p.pairs, tol=1e-12, max_iter=1000)
        np.testing.assert_allclose(fit.posteriors.mean[b, :n], ref.mean, atol=1e-8)
        np.testing.assert_allclose(fit.posteriors.cov[b, :n, :n], ref.cov, atol=1e-8)
        np.testing.assert_allclose(fit.posteriors.log_evidence[b], ref.log_evidence, atol=1e-8)
        np.testing.assert_allclose(fit.posteriors.sites.tau[b, :m], ref.sites.tau, atol=1e-7)
    untouched = np.setdiff1d(np.arange(30), problems[0].pairs)
    assert untouched.size > 5  # and their posterior moved off the prior: they correlate
    assert np.max(np.abs(np.asarray(fit.posteriors.mean[0, untouched]))) > 1e-2
