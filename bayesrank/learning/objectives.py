"""The objectives of hyperparameter learning, for one batch of queries sharing ``theta``.

- **EM-EP** (paper Sec. 4.3, after Kim & Ghahramani 2006): the M-step maximises
  ``Q(theta) = E_q[log N(xi_hat | 0, K_theta)]`` (Eq. 15-16, ``expected_log_prior``) for the
  E-step's EP posterior ``q``.
- **Evidence maximisation**: ``log Z_EP(theta)`` (``bucket_evidence``); at an EP fixed point
  the sites can be held fixed when differentiating (``inference.ep.fit`` does so), so each
  evaluation runs EP (warm-started) and differentiates the evidence through ``K_theta`` only.
- The **Fisher information** of ``theta`` in the Gaussian part of ``Z_EP``
  (``bucket_fisher``): the first BFGS step's curvature.

Every function here is pure and takes a batch (a leading query axis ``B``) that shares one
``theta`` (``free``): summing over the batch is a shared fit; ``per_query`` lifts a function
to one ``theta`` per query, mapped over the queries with ``bayesrank.parallel.map_queries``.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import jax.scipy.linalg as jsl
from jax.flatten_util import ravel_pytree

from ..inference import ep
from ..inference.gaussian import informative_pairs, pseudo_data_precision
from ..parallel import PreparedBatch, covariances, map_queries
from ..parallel.batching import outcome_rows, outcomes
from .config import Config, combine

__all__ = ["expected_log_prior"]


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


def bucket_posteriors(prior, data: PreparedBatch, sites, cfg: Config, tol, relative=0.0):
    """EP (or ``cfg.engine``, e.g. the Laplace approximation, warm-started from its sites) for
    every query of one batch at the prior (``tol`` and ``relative``, EP's, may be traced).

    ``relative`` (0 for none): a query's tolerance is at least ``relative`` times its largest
    prior sd, so that at large kernel scales the steps' EP stops at the same accuracy relative
    to the marginals' scale as at unit scale (EP's ``tol`` is absolute).
    """
    K = covariances(prior, data)
    rows = outcome_rows(prior, data)  # ties, weights (None: probit pairs)
    if cfg.engine is not None:  # another engine (Laplace: Newton to its own tolerance)

        def other(K, pairs, pair_mask, sites, rows):
            return cfg.engine.fit(
                K, pairs, pair_mask=pair_mask, sites=sites, outcomes=outcomes(prior, rows)
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
            outcomes=outcomes(prior, rows),
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


def bucket_evidence(free, fixed, data: PreparedBatch, sites, tol, cfg: Config):
    """``(-log Z_EP, its gradient in free, posteriors)`` of one batch (no hyperprior).

    ``tol = [absolute, relative]`` EP tolerances (traced), so the steps and the final
    posteriors share one compiled program per bucket.
    """

    def loss(free):
        post = bucket_posteriors(combine(free, fixed, cfg), data, sites, cfg, tol[0], tol[1])
        return -jnp.sum(post.log_evidence), post

    (value, post), grad = jax.value_and_grad(loss, has_aux=True)(free)
    return value, grad, post


def bucket_fisher(free, fixed, data: PreparedBatch, post: ep.EPPosterior, cfg: Config):
    """``F: (p, p)``, the Fisher information of the flattened ``free`` summed over a batch.

    Per query, in the Gaussian part of ``Z_EP`` with the sites fixed (pseudo-observations
    ``mu_tilde ~ N(0, K + S^-1)``): ``F_jk = 1/2 tr(W dK_j W dK_k)``, ``W = (K + S^-1)^-1``
    (``pseudo_data_precision``), ``dK_j = dK / dtheta_j`` by forward
    mode. Costs ``p`` products of ``n x n`` matrices per query.
    """
    flat, unravel = ravel_pytree(free)

    def K_of(x):
        return covariances(combine(unravel(x), fixed, cfg), data)

    K, dK = jax.linearize(K_of, flat)
    dK = jax.vmap(dK, in_axes=0, out_axes=-1)(jnp.eye(flat.size, dtype=flat.dtype))  # (B,n,n,p)

    def weight(K, cov, pairs, pair_mask, sites):
        active = informative_pairs(K, pairs, pair_mask)
        return pseudo_data_precision(cov, pairs, sites, active)

    W = jax.vmap(weight)(K, post.cov, data.pairs, data.pair_mask, post.sites)
    WdK = jnp.einsum("bxy,byzp->bxzp", W, dK)
    return 0.5 * jnp.einsum("bxzp,bzxq->pq", WdK, WdK)


def bucket_moments(free, fixed, data: PreparedBatch, sites, cfg: Config):
    """Every query's posterior ``(mean: (B, n), cov: (B, n, n))`` given its sites (no sweep)."""
    K = covariances(combine(free, fixed, cfg), data)
    return jax.vmap(ep.posterior_moments)(K, data.pairs, sites, data.pair_mask)


def _one(tree):
    return jax.tree_util.tree_map(lambda x: x[None], tree)


def _drop(tree):
    return jax.tree_util.tree_map(lambda x: x[0], tree)


# One ``theta`` per query: each query runs as a batch of one, mapped over the queries
# (bayesrank.parallel.map_queries). A fit of one query is this with ``B = 1``, so per-query
# fits over a padded batch and single fits run the same program.


def per_query_evidence(free, fixed, data: PreparedBatch, sites, tol, cfg: Config):
    """``bucket_evidence`` with ``free`` and ``fixed`` per query (leaves ``(B, ...)``):
    values ``(B,)``,
    gradients like ``free``, posteriors ``(B, ...)``."""

    def one(f, x, d, s):
        value, grad, post = bucket_evidence(f, x, _one(d), _one(s), tol, cfg)
        return value, grad, _drop(post)

    return map_queries(one, free, fixed, data, sites)


def per_query_fisher(free, fixed, data: PreparedBatch, post, cfg: Config):
    """``bucket_fisher`` per query: ``(B, p, p)``."""

    def one(f, x, d, p):
        return bucket_fisher(f, x, _one(d), _one(p), cfg)

    return map_queries(one, free, fixed, data, post)


def per_query_moments(free, fixed, data: PreparedBatch, sites, cfg: Config):
    """``bucket_moments`` per query: ``(mean: (B, n), cov: (B, n, n))``."""

    def one(f, x, d, s):
        return _drop(bucket_moments(f, x, _one(d), _one(s), cfg))

    return map_queries(one, free, fixed, data, sites)
