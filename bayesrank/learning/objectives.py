"""The objectives of hyperparameter learning, for one batch of queries sharing ``theta``.

- **EM-EP** (paper Sec. 4.3, after Kim & Ghahramani 2006): the M-step maximises
  ``Q(theta) = E_q[log N(xi_hat | 0, K_theta)]`` (Eq. 15-16, ``expected_log_prior``) for the
  E-step's EP posterior ``q``.
- **Evidence maximisation**: ``log Z_EP(theta)`` (``evidence_given``); at an EP fixed point
  the sites can be held fixed when differentiating (``inference.ep.fit`` does so), so each
  evaluation runs EP (warm-started) and differentiates the evidence through ``K_theta`` only.
- The **Fisher information** of ``theta`` in the Gaussian part of ``Z_EP``
  (``prior_fisher``): the first BFGS step's curvature.

Every function here is pure and takes a batch (a leading query axis ``B``) that shares one
``theta`` (``free``): summing over the batch is a shared fit; ``per_query`` lifts a function
to one ``theta`` per query, mapped over the queries with ``bayesrank.parallel.map_queries``.

**The prior and the engine apart.** ``theta`` reaches the evidence only through ``K`` and the
likelihood's parameters (``Likelihood``: a tie margin, grade thresholds). So the evidence and
its gradient are computed in three parts (``evidence.evaluate``): ``prior_parts``
(``theta -> (K, lik)``, the prior's own small program), ``evidence_given`` (``-log Z_EP`` and
its gradient in ``(K, lik)``: EP's program, the same for every prior at a bucket), and
``prior_pullback`` (the chain rule back to ``theta``). Every prior of a study, a test suite or
a user's comparison then shares one compiled EP program per bucket instead of compiling EP
into each prior's. The value and gradient are those of one program differentiating
``theta -> K -> log Z_EP`` (the same chain rule, split at ``K``). The Fisher information and the
posterior moments are split the same way (``fisher_weights`` and ``prior_fisher``,
``moments_given``).
"""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import jax.scipy.linalg as jsl
from jax.flatten_util import ravel_pytree

from ..inference import ep
from ..inference.gaussian import informative_pairs, pseudo_data_precision
from ..parallel import PreparedBatch, covariances, map_queries
from ..parallel.batching import outcome_rows, outcomes
from .config import Config, combine

__all__ = ["Likelihood", "expected_log_prior"]


def expected_log_prior(K: jax.Array, mean: jax.Array, cov: jax.Array) -> jax.Array:
    """``Q = E_q[log N(xi | 0, K + eps I)]`` for ``q = N(mean, cov)`` (Eq. 15-16).

    ``K, cov: (n, n)``. ``eps`` is a fixed absolute nugget (1e-6 in float64, 1e-4 in float32): a
    GP Gram matrix is often singular (OHSUMED queries hold duplicate documents), and a nugget that
    does not depend on ``theta`` keeps ``Q``'s dependence on ``theta`` meaningful there, where a
    jitter relative to ``K``'s scale would reward shrinking or inflating ``K`` for its own sake.
    """
    n = K.shape[0]
    eps = 1e-6 if jnp.finfo(K.dtype).bits == 64 else 1e-4
    L = jnp.linalg.cholesky(K + eps * jnp.eye(n, dtype=K.dtype))
    # mu^T K^-1 mu + tr(K^-1 Sigma) = tr(K^-1 (Sigma + mu mu^T)): one chain of LAPACK calls (two
    # independent batched solves can deadlock jaxlib 0.10's CPU thread pool under vmap).
    second_moment = cov + jnp.outer(mean, mean)
    trace = jnp.trace(jsl.cho_solve((L, True), second_moment))
    logdet = 2.0 * jnp.sum(jnp.log(jnp.diag(L)))
    return -0.5 * (n * jnp.log(2 * jnp.pi) + logdet + trace)


class Likelihood(NamedTuple):
    """What the likelihood reads of a prior (``XPGP.margin``, ``XPGP.thresholds``; None where
    the prior has none): with ``K``, all that EP needs of ``theta``
    (``parallel.batching.outcome_rows`` and ``outcomes`` take it in place of the prior)."""

    margin: Any = None
    thresholds: Any = None


def likelihood(prior) -> Likelihood:
    return Likelihood(prior.margin, prior.thresholds)


def engine_config(cfg: Config) -> Config:
    """``cfg`` with only what the engine reads (``ep_max_iter``, ``schedule``, ``single``,
    ``engine``): the static argument of the programs that every prior shares."""
    return cfg._replace(
        treedef=None, flags=(), method="", optimizer=None, m_steps=0, hyperprior=False
    )


def likelihood_data(data: PreparedBatch) -> PreparedBatch:
    """``data`` without what only the prior reads (attributes, graphs, masks, entities, anchor):
    the pairs and their outcomes, the arguments of the programs that every prior shares."""
    return data._replace(X=None, graphs=(), mask=None, entities=None, entity_mask=None, anchor=None)


def bucket_posteriors(prior, data: PreparedBatch, sites, cfg: Config, tol, relative=0.0):
    """EP (or ``cfg.engine``) for every query of one batch at the prior: ``posteriors_given``
    at the prior's ``K: (B, n, n)`` and likelihood parameters."""
    return posteriors_given(
        covariances(prior, data), likelihood(prior), data, sites, cfg, tol, relative
    )


def posteriors_given(
    K, lik: Likelihood, data: PreparedBatch, sites, cfg: Config, tol, relative=0.0
):
    """EP (or ``cfg.engine``, e.g. the Laplace approximation, warm-started from its sites) for
    every query of one batch, given each query's prior covariance ``K: (B, n, n)`` and the
    likelihood's parameters ``lik`` (``tol`` and ``relative``, EP's, may be traced).

    ``relative`` (0 for none): a query's tolerance is at least ``relative`` times its largest
    prior sd, so that at large kernel scales the steps' EP stops at the same accuracy relative
    to the marginals' scale as at unit scale (EP's ``tol`` is absolute).
    """
    rows = outcome_rows(lik, data)  # ties, weights (None: probit pairs)
    if cfg.engine is not None:  # another engine (Laplace: Newton to its own tolerance)

        def other(K, pairs, pair_mask, sites, rows):
            return cfg.engine.fit(
                K, pairs, pair_mask=pair_mask, sites=sites, outcomes=outcomes(lik, rows)
            )

        return map_queries(other, K, data.pairs, data.pair_mask, sites, rows, method="vmap")
    accelerate = cfg.schedule == "parallel"
    # A fit of one query, in a step (relative tolerance): EP also stops on the sites' residual,
    # one factorisation sooner (ep.run). Under vmap both branches of that test are computed, so
    # a batch would gain nothing, and its sum of less converged queries made BFGS's tail slower
    # (MQ2008: 30 iterations instead of 21 to the same optimum); a shared fit never uses it, so
    # its size buckets give the padded batch's fit. The final posteriors stop on the change.
    single = cfg.single and K.shape[0] == 1
    residual_stop = accelerate and single and (jnp.asarray(relative) > 0)

    def one(K, pairs, pair_mask, sites, rows):
        query_tol = jnp.maximum(tol, relative * jnp.sqrt(jnp.max(jnp.diagonal(K))))
        return ep.fit_core(
            K,
            pairs,
            pair_mask=pair_mask,
            sites=sites,
            outcomes=outcomes(lik, rows),
            max_iter=cfg.ep_max_iter,
            tol=query_tol,
            schedule=cfg.schedule,
            # Anderson mixing: fewer sweeps at the large kernel scales fits reach (ep.run)
            accelerate=accelerate,
            residual_stop=residual_stop,
        )

    if single:  # unbatched, so that only the branch taken is computed
        first = jax.tree_util.tree_map(lambda x: x[0], (sites, rows))
        post = one(K[0], data.pairs[0], data.pair_mask[0], *first)
        return jax.tree_util.tree_map(lambda x: x[None], post)
    # a shared fit's bucket: its EP runs batched (vmap), as measured in docs/development/learning.md
    return map_queries(one, K, data.pairs, data.pair_mask, sites, rows, method="vmap")


def prior_parts(free, fixed, data: PreparedBatch, cfg: Config):
    """``(K: (B, n, n), lik: Likelihood)``: what the evidence reads of ``theta``."""
    prior = combine(free, fixed, cfg)
    return covariances(prior, data), likelihood(prior)


def evidence_given(K, lik: Likelihood, data: PreparedBatch, sites, tol, cfg: Config):
    """``(-log Z_EP, its gradient in (K, lik), posteriors)`` of one batch (no hyperprior), given
    each query's ``K: (B, n, n)``. ``tol = [absolute, relative]`` EP tolerances (traced), so the
    steps and the final posteriors share one program; ``cfg``: ``engine_config``'s and ``data``:
    ``likelihood_data``'s, so that every prior shares it too."""

    def loss(K, lik):
        post = posteriors_given(K, lik, data, sites, cfg, tol[0], tol[1])
        return -jnp.sum(post.log_evidence), post

    (value, post), grad = jax.value_and_grad(loss, argnums=(0, 1), has_aux=True)(K, lik)
    return value, grad, post


def prior_pullback(free, fixed, data: PreparedBatch, cotangent, cfg: Config):
    """The gradient in ``free`` of a function of ``prior_parts(free, ...)`` whose gradient in
    ``(K, lik)`` is ``cotangent``: the chain rule, ``(dK/dfree)^T cotangent_K + ...``."""
    _, pullback = jax.vjp(lambda f: prior_parts(f, fixed, data, cfg), free)
    return pullback(cotangent)[0]


def fisher_weights(K, data: PreparedBatch, post: ep.EPPosterior):
    """``W = (K + S^-1)^-1: (B, n, n)`` of each query (``pseudo_data_precision``): the Gaussian
    part of ``Z_EP`` with the sites fixed (pseudo-observations ``mu_tilde ~ N(0, K + S^-1)``)."""

    def weight(K, cov, pairs, pair_mask, sites):
        active = informative_pairs(K, pairs, pair_mask)
        return pseudo_data_precision(cov, pairs, sites, active)

    return jax.vmap(weight)(K, post.cov, data.pairs, data.pair_mask, post.sites)


def prior_fisher(free, fixed, data: PreparedBatch, W, cfg: Config):
    """``F: (p, p)``, the Fisher information of the flattened ``free`` summed over a batch, given
    each query's ``W: (B, n, n)`` (``fisher_weights``): ``F_jk = 1/2 tr(W dK_j W dK_k)``,
    ``dK_j = dK / dtheta_j`` by forward mode. Costs ``p`` products of ``n x n`` matrices per
    query."""
    flat, unravel = ravel_pytree(free)

    def K_of(x):
        return covariances(combine(unravel(x), fixed, cfg), data)

    _, tangent = jax.linearize(K_of, flat)
    dK = jax.vmap(tangent, in_axes=0, out_axes=-1)(jnp.eye(flat.size, dtype=flat.dtype))
    WdK = jnp.einsum("bxy,byzp->bxzp", W, dK)  # dK: (B, n, n, p)
    return 0.5 * jnp.einsum("bxzp,bzxq->pq", WdK, WdK)


def moments_given(K, data: PreparedBatch, sites):
    """Every query's posterior ``(mean: (B, n), cov: (B, n, n))`` given ``K`` and its sites."""
    return jax.vmap(ep.posterior_moments)(K, data.pairs, sites, data.pair_mask)


def _one(tree):
    return jax.tree_util.tree_map(lambda x: x[None], tree)


def _drop(tree):
    return jax.tree_util.tree_map(lambda x: x[0], tree)


# One ``theta`` per query: each query runs as a batch of one, mapped over the queries
# (bayesrank.parallel.map_queries). A fit of one query is this with ``B = 1``, so per-query
# fits over a padded batch and single fits run the same program.


def per_query_parts(free, fixed, data: PreparedBatch, cfg: Config):
    """``prior_parts`` with ``free`` and ``fixed`` per query (leaves ``(B, ...)``):
    ``K: (B, n, n)``, the likelihood's parameters with leaves ``(B, ...)``."""

    def one(f, x, d):
        K, lik = prior_parts(f, x, _one(d), cfg)
        return K[0], lik

    return map_queries(one, free, fixed, data)


def per_query_evidence_given(K, lik, data: PreparedBatch, sites, tol, cfg: Config):
    """``evidence_given`` of each query alone: values ``(B,)``, gradients like ``(K, lik)``,
    posteriors ``(B, ...)``."""

    def one(K, lik, d, s):
        value, (dK, dlik), post = evidence_given(K[None], lik, _one(d), _one(s), tol, cfg)
        return value, (dK[0], dlik), _drop(post)

    return map_queries(one, K, lik, data, sites)


def per_query_pullback(free, fixed, data: PreparedBatch, cotangent, cfg: Config):
    """``prior_pullback`` per query: gradients like ``free`` (leaves ``(B, ...)``)."""

    def one(f, x, d, c):
        dK, dlik = c
        return prior_pullback(f, x, _one(d), (dK[None], dlik), cfg)

    return map_queries(one, free, fixed, data, cotangent)


def per_query_fisher_weights(K, data: PreparedBatch, post):
    """``fisher_weights`` per query: ``(B, n, n)``."""

    def one(K, d, p):
        return fisher_weights(K[None], _one(d), _one(p))[0]

    return map_queries(one, K, data, post)


def per_query_fisher(free, fixed, data: PreparedBatch, W, cfg: Config):
    """``prior_fisher`` per query: ``(B, p, p)``."""

    def one(f, x, d, W):
        return prior_fisher(f, x, _one(d), W[None], cfg)

    return map_queries(one, free, fixed, data, W)


def per_query_moments_given(K, data: PreparedBatch, sites):
    """``moments_given`` per query: ``(mean: (B, n), cov: (B, n, n))``."""

    def one(K, d, s):
        return _drop(moments_given(K[None], _one(d), _one(s)))

    return map_queries(one, K, data, sites)
