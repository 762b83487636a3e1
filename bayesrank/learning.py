"""Hyperparameter learning for the XPGP prior: EM-EP and EP-evidence maximisation, with optax.

**EM-EP** (paper Sec. 4.3, after Kim & Ghahramani 2006). E-step: EP at the current
hyperparameters ``theta``, warm-started from the previous sites, gives ``q(xi_hat) = N(mu, Sigma)``.
M-step: maximise over ``theta`` (paper Eq. 15-16)

    Q(theta) = E_q[log N(xi_hat | 0, K_theta)]
             = -1/2 log|2 pi K| - 1/2 mu^T K^-1 mu - 1/2 tr(K^-1 Sigma),

with L-BFGS (default) or Adam, in unconstrained coordinates (``kernels.params``). ``Q`` needs
``K^-1``: it uses a Cholesky factor of ``K + eps I`` with a fixed nugget ``eps`` (1e-6 in float64,
1e-4 in float32; see :func:`expected_log_prior`). The M-step never decreases ``Q`` for the ``q``
it was given (beyond optimiser tolerance).

**Evidence maximisation**: gradient steps on ``log Z_EP(theta)``. At an EP fixed point the sites
can be held fixed when differentiating (``inference.ep.fit`` does so), so each step runs EP
(warm-started) and differentiates the evidence through ``K_theta`` only.

Both work on a :class:`~bayesrank.data.batch.ProblemBatch`: with one ``theta`` shared by all
queries (the objective is the sum over queries, computed with ``vmap``), or with one ``theta`` per
query (``per_query=True``: the whole fit is ``vmap``-ped over queries).

What is learned: every hyperparameter of the prior except the confounded scales, which are held
fixed by default (``default_trainable``): ``sigma``, the RBF / ARD amplitude ``kappa`` and the
regularized Laplacian's ``beta`` (see ``docs/model.md``, identifiability). So the mixing weights,
lengthscales, ``iota``, diffusion rates and the per-entity effect are fitted. Optionally
(``hyperprior_scale``, on by default) a log-normal hyperprior centred on the initial values, i.e.
a normal prior of that standard deviation on each unconstrained value, turns the fit into MAP-II;
it is what keeps a lengthscale from collapsing on a query with few informative pairs.
Initialisation: the median heuristic for RBF / ARD lengthscales (``initialize``), optional random
restarts (best final evidence wins).
"""

from __future__ import annotations

import dataclasses
import os
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import jax.scipy.linalg as jsl
import numpy as np
import optax
from jax.flatten_util import ravel_pytree

from .data.batch import ProblemBatch, stack_problems
from .inference import ep
from .kernels.attributes import ARD, RBF
from .kernels.params import constrain, map_params, unconstrain
from .kernels.xpgp import XPGP, mask_covariance
from .runtime import one_blas_thread

__all__ = [
    "FitResult",
    "PreparedBatch",
    "Trace",
    "covariances",
    "default_trainable",
    "expected_log_prior",
    "fit_hyperparameters",
    "initialize",
    "prepare_batch",
    "size_buckets",
    "touched_entities",
]

#: (class name, field) of the hyperparameters held fixed by default: the confounded scales.
FROZEN_BY_DEFAULT = frozenset(
    {("XPGP", "sigma"), ("RBF", "kappa"), ("ARD", "kappa"), ("RegularizedLaplacian", "beta")}
)


class PreparedBatch(NamedTuple):
    """A :class:`ProblemBatch` with each relation's graph data prepared for its kernel.

    ``X: (B, n, d)`` or ``None``; ``graphs``: per relation, a pytree with leading axis ``B``.

    Restricted to the entities that pairs touch (:func:`prepare_batch`), ``entities: (B, t)``
    holds their indices among the ``n``, ``entity_mask: (B, t)`` marks the real ones, and
    ``pairs`` index into ``entities``; :func:`covariances` then gives ``K[entities, entities]``.
    """

    X: jax.Array | None
    graphs: tuple
    pairs: jax.Array
    mask: jax.Array
    pair_mask: jax.Array
    entities: jax.Array | None = None
    entity_mask: jax.Array | None = None


def touched_entities(batch: ProblemBatch, size: int | None = None):
    """The entities each query's real pairs touch, and the pairs renumbered among them.

    Returns ``(entities: (B, t), entity_mask: (B, t), pairs: (B, m, 2))``: ``entities[b, k]``
    is the ``k``-th touched entity of query ``b`` (ascending; padded slots 0, masked), and
    ``pairs[b, s]`` the positions of pair ``s``'s entities in that list (padded pairs ``(0, 1)``).
    ``t`` is ``size``, or the largest touched count (at least 2).
    """
    pairs, valid = np.asarray(batch.pairs), np.asarray(batch.pair_mask)
    touched = [np.unique(p[v]) for p, v in zip(pairs, valid, strict=True)]
    largest = max(2, max(len(t) for t in touched))
    size = largest if size is None else size
    if size < largest:
        raise ValueError(f"size={size} is smaller than the most entities touched ({largest})")
    entities = np.zeros((len(touched), size), np.int64)
    entity_mask = np.zeros((len(touched), size), bool)
    renumbered = np.tile(np.array([0, 1], np.int64), (*pairs.shape[:2], 1))
    for b, t in enumerate(touched):
        entities[b, : len(t)], entity_mask[b, : len(t)] = t, True
        renumbered[b, valid[b]] = np.searchsorted(t, pairs[b, valid[b]])
    return entities, entity_mask, renumbered


def prepare_batch(prior: XPGP, batch: ProblemBatch, restrict: int | bool = False) -> PreparedBatch:
    """Host-side, once: each relation kernel's graph data for every query, stacked.

    ``restrict`` (True, or a size ``t``: :func:`touched_entities`): keep only the entities that
    pairs touch. EP and its evidence depend on ``K`` only through those rows and columns (the
    others' posterior is their prior given the touched ones), so inference on them gives the
    same evidence and gradient at ``t^3`` instead of ``n^3`` cost: on OHSUMED, 100-200 pairs
    touch a median 113 of 147 documents. Without relations, ``X`` is restricted directly;
    graph kernels need the whole graph, so ``K`` is computed whole and then restricted.
    """
    graphs = []
    for r, kernel in enumerate(prior.relations):
        per_query = [kernel.prepare(W) for W in batch.relations[r]]
        graphs.append(jax.tree_util.tree_map(lambda *a: jnp.stack(a), *per_query))
    X, mask, pairs = batch.X, batch.mask, batch.pairs
    entities = entity_mask = None
    if restrict is not False:
        size = None if restrict is True else int(restrict)
        entities, entity_mask, pairs = touched_entities(batch, size)
        if not prior.relations:  # restrict X itself: K is computed at the smaller size
            X = None if X is None else np.take_along_axis(X, entities[..., None], axis=1)
            mask, entities, entity_mask = entity_mask, None, None
    return PreparedBatch(
        None if X is None else jnp.asarray(X),
        tuple(graphs),
        jnp.asarray(pairs),
        jnp.asarray(mask),
        jnp.asarray(batch.pair_mask),
        None if entities is None else jnp.asarray(entities),
        None if entity_mask is None else jnp.asarray(entity_mask),
    )


def covariances(prior: XPGP, data: PreparedBatch) -> jax.Array:
    """``K: (B, n, n)`` of every query (padded entities decoupled); ``(B, t, t)`` restricted."""

    def one(X, graphs, mask):
        return prior.covariance(X, graphs, mask)

    in_x = None if data.X is None else 0
    K = jax.vmap(one, in_axes=(in_x, 0, 0))(data.X, data.graphs, data.mask)
    if data.entities is None:
        return K

    def restrict(K, entities, entity_mask):
        return mask_covariance(K[entities[:, None], entities[None, :]], entity_mask)

    return jax.vmap(restrict)(K, data.entities, data.entity_mask)


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


def _finite_or_inf(value):
    """Non-finite objective values become +inf, which a line search rejects."""
    return jnp.where(jnp.isfinite(value), value, jnp.inf)


def default_trainable(prior: XPGP):
    """A pytree of bools like ``prior``: False for the confounded scales (``FROZEN_BY_DEFAULT``)."""
    return map_params(
        prior, lambda owner, name, _c, _v: (type(owner).__name__, name) not in FROZEN_BY_DEFAULT
    )


def _median_distance(X, mask) -> float:
    X = np.asarray(X)[np.asarray(mask)]
    rng = np.random.default_rng(0)
    X = X[rng.choice(len(X), size=min(len(X), 2000), replace=False)]
    # exact differences (duplicates at distance 0), by blocks of rows: an (n, n, d) array of
    # 2000 points with OHSUMED's 25 features is 0.8 GB and took 3 s
    parts = []
    for a in range(0, len(X), 64):
        block = np.sqrt(((X[a : a + 64, None, :] - X[None, a + 1 :, :]) ** 2).sum(-1))
        parts.append(block[np.triu_indices(block.shape[0], 0, block.shape[1])])  # a + r < a + 1 + c
    d = np.concatenate(parts)
    d = d[d > 0]
    return float(np.median(d)) if d.size else 1.0


def initialize(prior: XPGP, batch: ProblemBatch) -> XPGP:
    """Data-driven start: the median heuristic for the attribute kernel; unit mixing weights.

    RBF: ``rho = 1 / median ||x - x'||`` over the batch's real entities (so ``k = kappa^2 e^-1/2``
    at the median distance). ARD: each lengthscale is the median ``|x_k - x'_k|`` of its feature
    (1 where that median is 0, e.g. a feature constant within queries).
    """
    n_weights = 1 + len(prior.relations)
    weights = jnp.ones(n_weights) if prior.weights is None else jnp.asarray(prior.weights)
    attribute = prior.attribute
    if batch.X is not None and isinstance(attribute, RBF):
        attribute = dataclasses.replace(
            attribute,
            rho=jnp.asarray(
                1.0 / _median_distance(batch.X.reshape(-1, batch.X.shape[-1]), batch.mask.ravel())
            ),
        )
    elif batch.X is not None and isinstance(attribute, ARD):
        X = batch.X.reshape(-1, batch.X.shape[-1])[batch.mask.ravel()]
        rng = np.random.default_rng(0)
        a, b = rng.integers(0, len(X), (2, 20000))
        med = np.median(np.abs(X[a] - X[b]), axis=0)
        attribute = dataclasses.replace(
            attribute, lengthscales=jnp.asarray(np.where(med > 0, med, 1.0))
        )
    return dataclasses.replace(prior, attribute=attribute, weights=weights)


class Trace(NamedTuple):
    """Per iteration (leading axis ``T``, plus a query axis for per-query fits)."""

    log_evidence: jax.Array  # EP evidence (summed over shared queries) at the iteration's start
    objective: jax.Array  # EM: Q after the M-step; evidence method: the (MAP) evidence
    objective_before: jax.Array  # EM: Q before the M-step (same q); evidence method: = objective
    params: Any  # the prior (constrained) after the iteration
    ep_iterations: jax.Array  # largest EP sweep count over the queries
    ep_converged: jax.Array  # every query's EP converged


class FitResult(NamedTuple):
    """The fitted prior, the EP posteriors at it (batched), and the trace."""

    prior: XPGP
    posteriors: ep.EPPosterior
    trace: Trace


class _Config(NamedTuple):
    treedef: Any
    flags: tuple
    method: str
    optimizer: str
    learning_rate: float
    m_steps: int
    hyperprior_scale: float | None
    ep_max_iter: int
    ep_tol: float | None
    schedule: str
    ep_step_tol: float | None  # EP's tol inside evidence steps (None: ep.default_tol)
    tol: float  # BFGS: stop when a step gains and the model predicts less than this (nats)
    single: bool = False  # one query: the steps' EP also stops on the sites' residual


def _combine(free, fixed, cfg: _Config):
    free, fixed = list(free), list(fixed)
    leaves = [free.pop(0) if f else fixed.pop(0) for f in cfg.flags]
    return constrain(jax.tree_util.tree_unflatten(cfg.treedef, leaves))


def _log_hyperprior(free, u0, cfg: _Config):
    if cfg.hyperprior_scale is None:
        return 0.0
    return (
        -0.5
        * sum(jnp.sum((f - c) ** 2) for f, c in zip(free, u0, strict=True))
        / (cfg.hyperprior_scale**2)
    )


def _posteriors(prior, data: tuple, sites: tuple, cfg: _Config, tol=None, relative=0.0) -> tuple:
    """EP posteriors for each size bucket (``data`` and ``sites`` are tuples over buckets).

    Compiled together only for one bucket: several buckets' batched LAPACK calls in one program
    can run concurrently and hang jaxlib 0.10's CPU runtime (``docs/model.md``), so a bucketed
    fit evaluates its buckets in separate compiled calls (:func:`_bucketed_evidence_step`).
    """
    return tuple(
        _bucket_posteriors(prior, d, s, cfg, tol, relative)
        for d, s in zip(data, sites, strict=True)
    )


def _bucket_posteriors(prior, data: PreparedBatch, sites, cfg: _Config, tol=None, relative=0.0):
    """Batched EP for one bucket; ``tol`` (may be traced) defaults to ``cfg.ep_tol``.

    ``relative`` (may be traced; 0 for none): a query's tolerance is at least ``relative``
    times its largest prior sd, so that at large kernel scales the steps' EP stops at the same
    accuracy relative to the marginals' scale as at unit scale (EP's ``tol`` is absolute).
    """
    K = covariances(prior, data)
    tol = cfg.ep_tol if tol is None else tol

    accelerate = cfg.schedule == "parallel"
    # A fit of one query, in a step (relative tolerance): EP also stops on the sites' residual,
    # one factorisation sooner (ep.run). Under vmap both branches of that test are computed, so
    # a batch would gain nothing, and its sum of less converged queries made BFGS's tail slower
    # (MQ2008: 30 iterations instead of 21 to the same optimum); a shared fit never uses it, so
    # its size buckets give the padded batch's fit. The final posteriors stop on the change.
    single = cfg.single and K.shape[0] == 1
    residual_stop = accelerate and single and (jnp.asarray(relative) > 0)

    def one(K, pairs, pair_mask, sites):
        query_tol = tol
        if tol is not None:
            query_tol = jnp.maximum(tol, relative * jnp.sqrt(jnp.max(jnp.diagonal(K))))
        return ep.fit(
            K,
            pairs,
            pair_mask=pair_mask,
            sites=sites,
            max_iter=cfg.ep_max_iter,
            tol=query_tol,
            schedule=cfg.schedule,
            # Anderson mixing: fewer sweeps at the large kernel scales fits reach (ep.run)
            accelerate=accelerate,
            residual_stop=residual_stop,
        )

    if single:  # unbatched, so that only the branch taken is computed
        post = one(
            K[0], data.pairs[0], data.pair_mask[0], jax.tree_util.tree_map(lambda x: x[0], sites)
        )
        return jax.tree_util.tree_map(lambda x: x[None], post)
    return jax.vmap(one)(K, data.pairs, data.pair_mask, sites)


def _optimizer(cfg: _Config):
    if cfg.optimizer == "lbfgs":
        return optax.lbfgs()
    if cfg.optimizer == "adam":
        return optax.adam(cfg.learning_rate)
    if cfg.optimizer == "bfgs" and cfg.method == "evidence":
        return None  # host-driven (_drive_bfgs)
    raise ValueError(
        f"optimizer must be 'lbfgs', 'adam' or (method='evidence') 'bfgs', got {cfg.optimizer!r}"
    )


def _minimize(fn, free, cfg: _Config):
    """``cfg.m_steps`` optimiser steps on ``fn(free)`` (a pure function); returns ``free``."""
    opt = _optimizer(cfg)
    value_and_grad = optax.value_and_grad_from_state(fn) if cfg.optimizer == "lbfgs" else None

    def body(_, carry):
        params, state = carry
        if cfg.optimizer == "lbfgs":
            value, grad = value_and_grad(params, state=state)
            updates, state = opt.update(grad, state, params, value=value, grad=grad, value_fn=fn)
        else:
            grad = jax.grad(fn)(params)
            updates, state = opt.update(grad, state, params)
        return optax.apply_updates(params, updates), state

    params, _ = jax.lax.fori_loop(0, cfg.m_steps, body, (free, opt.init(free)))
    return params


class _Carry(NamedTuple):
    free: list
    sites: ep.Sites
    opt_state: Any


def _e_step(carry: _Carry, fixed, data: PreparedBatch, cfg: _Config):
    """EP at the current hyperparameters, warm-started from the carried sites."""
    return _posteriors(_combine(carry.free, fixed, cfg), data, carry.sites, cfg)


def _m_step(carry: _Carry, fixed, u0, data: PreparedBatch, post, cfg: _Config):
    """Maximise ``Q`` (plus the log hyperprior) for the posterior ``post``; returns the carry."""

    def loss(free):
        prior = _combine(free, fixed, cfg)
        q = 0.0
        for d, p in zip(data, post, strict=True):
            K = covariances(prior, d)
            # lax.map, not vmap: unbatched LAPACK calls (a batched Cholesky and solves beside
            # their gradients can deadlock jaxlib 0.10's CPU thread pool; docs/model.md).
            q = q + jnp.sum(jax.lax.map(lambda a: expected_log_prior(*a), (K, p.mean, p.cov)))
        return _finite_or_inf(-(q + _log_hyperprior(free, u0, cfg)))

    before = -loss(carry.free)
    free = _minimize(loss, carry.free, cfg)
    return _Carry(free, tuple(p.sites for p in post), carry.opt_state), before, -loss(free)


def _evidence_step(carry: _Carry, fixed, u0, data: PreparedBatch, cfg: _Config):
    """One optimiser step on ``-(log Z_EP + log hyperprior)``; EP warm-started inside."""

    def loss(free):
        prior = _combine(free, fixed, cfg)
        step_tol = cfg.ep_step_tol
        post = _posteriors(prior, data, carry.sites, cfg, step_tol, step_tol or 0.0)
        evidence = sum(jnp.sum(p.log_evidence) for p in post)
        return -(evidence + _log_hyperprior(free, u0, cfg)), post

    (value, post), grad = jax.value_and_grad(loss, has_aux=True)(carry.free)
    opt = _optimizer(cfg)
    if cfg.optimizer == "lbfgs":
        updates, opt_state = opt.update(
            grad,
            carry.opt_state,
            carry.free,
            value=value,
            grad=grad,
            value_fn=lambda f: loss(f)[0],
        )
    else:
        updates, opt_state = opt.update(grad, carry.opt_state, carry.free)
    free = optax.apply_updates(carry.free, updates)
    return _Carry(free, tuple(p.sites for p in post), opt_state), post, -value


def _info(post, carry, fixed, before, after, cfg) -> Trace:
    return Trace(
        log_evidence=sum(jnp.sum(p.log_evidence) for p in post),
        objective=after,
        objective_before=before,
        params=_combine(carry.free, fixed, cfg),
        ep_iterations=jnp.max(jnp.stack([jnp.max(p.n_iter) for p in post])),
        ep_converged=jnp.all(jnp.stack([jnp.all(p.converged) for p in post])),
    )


@partial(jax.jit, static_argnames=("cfg",))
def _jit_e_step(carry, fixed, data, cfg: _Config):
    return _e_step(carry, fixed, data, cfg)


@partial(jax.jit, static_argnames=("cfg",))
def _jit_m_step(carry, fixed, u0, data, post, cfg: _Config):
    new, before, after = _m_step(carry, fixed, u0, data, post, cfg)
    return new, _info(post, new, fixed, before, after, cfg)


@partial(jax.jit, static_argnames=("cfg",))
def _jit_evidence_step(carry, fixed, u0, data, cfg: _Config):
    new, post, value = _evidence_step(carry, fixed, u0, data, cfg)
    return new, _info(post, new, fixed, value, value, cfg)


@partial(jax.jit, static_argnames=("cfg",))
def _jit_bucket_evidence(free, fixed, data: PreparedBatch, sites, tol, cfg: _Config):
    """``(-log Z_EP, its gradient, posteriors)`` of one size bucket (no hyperprior).

    ``tol`` is an argument, not part of ``cfg``: the steps (``ep_step_tol``) and the final
    posteriors (``ep_tol``) share one compiled program per bucket.
    """

    def loss(free):
        post = _bucket_posteriors(_combine(free, fixed, cfg), data, sites, cfg, tol[0], tol[1])
        return -jnp.sum(post.log_evidence), post

    (value, post), grad = jax.value_and_grad(loss, has_aux=True)(free)
    return value, grad, post


@partial(jax.jit, static_argnames=("cfg",))
def _jit_adam_update(carry: _Carry, fixed, u0, value, grad, post, cfg: _Config):
    prior_value, prior_grad = jax.value_and_grad(lambda f: -_log_hyperprior(f, u0, cfg))(carry.free)
    value = value + prior_value
    grad = jax.tree_util.tree_map(jnp.add, grad, prior_grad)
    updates, opt_state = _optimizer(cfg).update(grad, carry.opt_state, carry.free)
    new = _Carry(optax.apply_updates(carry.free, updates), tuple(p.sites for p in post), opt_state)
    return new, _info(post, new, fixed, -value, -value, cfg)


def _bucketed_evidence_step(carry, fixed, u0, data, cfg: _Config):
    """An Adam step on the evidence summed over size buckets, one compiled call per bucket.

    Each bucket's call finishes before the next starts (their batched LAPACK calls must not
    overlap on jaxlib 0.10's CPU runtime); values and gradients are summed.
    """
    tol = _tol(cfg.ep_step_tol, carry.free, relative=True)
    value, grad, posts = _evaluate(carry.free, fixed, data, carry.sites, tol, cfg)
    return _jit_adam_update(carry, fixed, u0, value, grad, posts, cfg)


@partial(jax.jit, static_argnames=("cfg",))
def _jit_bucket_fisher(free, fixed, data: PreparedBatch, post: ep.EPPosterior, cfg: _Config):
    """``F: (p, p)``, the Fisher information of the flattened ``free`` summed over a bucket.

    Per query, in the Gaussian part of ``Z_EP`` with the sites fixed (pseudo-observations
    ``mu_tilde ~ N(0, K + S^-1)``): ``F_jk = 1/2 tr(W dK_j W dK_k)``, ``W = (K + S^-1)^-1``
    (:func:`~bayesrank.inference.ep.pseudo_data_precision`), ``dK_j = dK / dtheta_j`` by forward
    mode. Costs ``p`` products of ``n x n`` matrices per query.
    """
    flat, unravel = ravel_pytree(free)

    def K_of(x):
        return covariances(_combine(unravel(x), fixed, cfg), data)

    K, dK = jax.linearize(K_of, flat)
    dK = jax.vmap(dK, in_axes=0, out_axes=-1)(jnp.eye(flat.size, dtype=flat.dtype))  # (B,n,n,p)

    def weight(K, cov, pairs, pair_mask, sites):
        active = ep.informative_pairs(K, pairs, pair_mask)
        return ep.pseudo_data_precision(cov, pairs, sites, active)

    W = jax.vmap(weight)(K, post.cov, data.pairs, data.pair_mask, post.sites)
    WdK = jnp.einsum("bxy,byzp->bxzp", W, dK)
    return 0.5 * jnp.einsum("bxzp,bzxq->pq", WdK, WdK)


def _evaluate(free, fixed, data, sites, tol, cfg: _Config):
    """``(-log Z_EP, its gradient, posteriors)`` summed over the size buckets (no hyperprior).

    One compiled call per bucket; each finishes before the next starts (batched LAPACK calls
    must not overlap on jaxlib 0.10's CPU runtime, ``docs/model.md``). The value (a float) and
    the gradient (a list of NumPy arrays like ``free``) are summed on the host.
    """
    value, grad, posts = 0.0, None, []
    for d, s in zip(data, sites, strict=True):
        v, g, p = jax.block_until_ready(_jit_bucket_evidence(free, fixed, d, s, tol, cfg))
        g = [np.asarray(leaf) for leaf in g]
        value += float(v)
        grad = g if grad is None else [a + b for a, b in zip(grad, g, strict=True)]
        posts.append(p)
    return value, grad, tuple(posts)


def _tol(tol, free, relative: bool = False):
    """``[absolute, relative]`` EP tolerances (:func:`_bucket_posteriors`) in the parameters'
    dtype; ``None``: ``ep.default_tol``. Steps (``relative``) use ``tol`` for both."""
    dtype = jax.tree_util.tree_leaves(free)[0].dtype
    tol = ep.default_tol(dtype) if tol is None else tol
    return jnp.asarray([tol, tol if relative else 0.0], dtype)


def _step(carry, fixed, u0, data, cfg: _Config):
    """One EM iteration (a jitted E-step, then a jitted M-step) or one evidence step.

    The E- and M-steps are compiled separately: fused into one program (EP's while loop under
    ``vmap`` beside L-BFGS's line search), XLA's CPU run time was pathological.
    """
    if cfg.method == "em":
        post = _jit_e_step(carry, fixed, data, cfg)
        return _jit_m_step(carry, fixed, u0, data, post, cfg)
    if len(data) > 1:
        return _bucketed_evidence_step(carry, fixed, u0, data, cfg)
    return _jit_evidence_step(carry, fixed, u0, data, cfg)


@partial(jax.jit, static_argnames=("cfg",))
def _final(free, fixed, data: PreparedBatch, sites, cfg: _Config):
    prior = _combine(free, fixed, cfg)
    return prior, _bucket_posteriors(prior, data, sites, cfg)


@one_blas_thread()
def fit_hyperparameters(
    prior: XPGP,
    problems,
    *,
    method: str = "em",
    n_iter: int = 20,
    m_steps: int = 20,
    optimizer: str | None = None,
    learning_rate: float = 0.05,
    hyperprior_scale: float | None = 2.0,
    trainable=None,
    init: bool = True,
    restarts: int = 0,
    key: jax.Array | None = None,
    per_query: bool = False,
    bucket: int | None = 64,
    ep_max_iter: int = 200,
    ep_tol: float | None = None,
    ep_step_tol: float | None = 1e-4,
    tol: float = 1e-2,
    schedule: str = "parallel",
    progress: bool = False,
    coarse: int | None = None,
) -> FitResult:
    """Fit the prior's hyperparameters to one or many queries.

    Args:
        prior: the starting :class:`~bayesrank.kernels.xpgp.XPGP` prior (its structure, and its
            values where ``init`` does not replace them).
        problems: a :class:`~bayesrank.data.problem.PreferenceProblem`, a list of them, or a
            :class:`~bayesrank.data.batch.ProblemBatch`.
        method: ``"em"`` (EM-EP) or ``"evidence"`` (gradient ascent on ``log Z_EP``).
        n_iter: EM iterations, or evidence-maximisation steps (with ``"bfgs"``, at most that
            many: it stops when converged, see ``tol``).
        m_steps: optimiser steps per M-step (EM only).
        optimizer: ``"lbfgs"`` or ``"adam"``, or for evidence maximisation ``"bfgs"``
            (defaults: L-BFGS for EM's M-steps; BFGS for evidence maximisation: quasi-Newton
            steps from the Fisher information with a backtracking line search, driven from
            Python, a few warm-started EP runs per step; see :func:`_drive_bfgs`).
        learning_rate: Adam's step size.
        hyperprior_scale: sd of the normal prior on each unconstrained hyperparameter, centred on
            its initial value (MAP-II); ``None`` for plain maximum likelihood.
        trainable: pytree of bools like ``prior`` (default :func:`default_trainable`).
        init: apply :func:`initialize` (median heuristic) first.
        restarts: extra random starts (unconstrained values perturbed by N(0, 1)), needs ``key``;
            the start with the highest final objective is returned.
        per_query: one ``theta`` per query instead of one shared ``theta`` (the queries, padded
            to one shape, are fitted one after another with the same compiled steps; a BFGS
            trace that stopped early repeats its last entry up to the longest one).
        bucket: evidence maximisation (BFGS or Adam) with a shared ``theta``, from a list of
            problems: queries are padded to their size rounded up to a multiple of ``bucket``
            and each size group runs as its own compiled ``vmap`` (EP costs ``n^3``: padding
            every query to the largest wastes most of the work when sizes vary, 6x on
            OHSUMED). The size is the number of entities that pairs touch: evidence
            maximisation runs EP on those alone (:func:`prepare_batch`), and the posteriors of
            the others follow from the sites. ``None`` pads all to one shape (as EM and L-BFGS
            always do).
        ep_max_iter, ep_tol, schedule: EP settings for the E-steps and the final posteriors.
        ep_step_tol: EP's tolerance inside evidence-maximisation steps (``None``: ``ep_tol``),
            and at least that fraction of a query's largest prior sd (at large kernel scales
            an absolute 1e-4 would be far tighter, relative to the marginals, than at unit
            scale).
            The evidence is stationary in the sites, so its value's error is second order in
            the sites' and its gradient's first order: on OHSUMED 1e-4 moved ``theta``'s path
            by ~1e-7 and needed about half the sweeps of 1e-6. The final posteriors use
            ``ep_tol``.
        tol: ``"bfgs"`` stops when a step gained less than ``tol`` nats of (MAP) evidence and
            the quasi-Newton model predicts less than ``tol`` more.
        progress: show progress (a tqdm bar if tqdm is installed, else a line per iteration).
        coarse: evidence maximisation of a shared ``theta`` from problems (not a batch): first
            fit on at most ``coarse`` random entities of each query and the pairs among them,
            from the same start and hyperprior (stopping at ``10 * tol``), then start the full
            fit from there, its EP from the coarse fit's sites on the pairs they share. The full
            fit's hyperprior stays centred on the initial values, so it maximises the same
            objective; it needs fewer steps (at ``n = 1000``, ``m = 2000``, ``coarse=500``: 3
            BFGS steps instead of 8, 2.6 s against 4.7 s). The trace is the full fit's. It
            compiles a second set of programs (about 4 s more on a first call), so it pays
            for repeated fits of large problems, not for one-off ones.

    Returns:
        :class:`FitResult` with the fitted prior, the EP posteriors at it and the :class:`Trace`
        (per-query fits: every leaf gains a leading query axis).
    """
    from .data.problem import PreferenceProblem

    if method not in ("em", "evidence"):
        raise ValueError(f"method must be 'em' or 'evidence', got {method!r}")
    if isinstance(problems, PreferenceProblem):
        problems = [problems]
    if not isinstance(problems, ProblemBatch):
        problems = list(problems)
    batch, groups, restrict = _layout(problems, method, optimizer, per_query, bucket)
    options = dict(
        method=method,
        n_iter=n_iter,
        m_steps=m_steps,
        optimizer=optimizer,
        learning_rate=learning_rate,
        hyperprior_scale=hyperprior_scale,
        trainable=trainable,
        init=init,
        restarts=restarts,
        key=key,
        ep_max_iter=ep_max_iter,
        ep_tol=ep_tol,
        ep_step_tol=ep_step_tol,
        tol=tol,
        schedule=schedule,
        progress=progress,
    )
    if coarse is not None:
        if method != "evidence" or per_query or isinstance(problems, ProblemBatch):
            raise ValueError("coarse needs method='evidence', a shared theta and problems")
        center = initialize(prior, batch) if init else _with_weights(prior)
        subsets, origins = _subsample(problems, coarse)
        if subsets:  # at least one query keeps a pair
            first = {**options, "init": False, "restarts": 0, "tol": 10 * tol, "progress": False}
            layout = _layout(subsets, method, optimizer, per_query, bucket)
            prior, (tau, nu) = _fit_shared(center, *layout, final=False, **first)
            # the full fit's EP starts from the coarse fit's sites on the pairs they share
            sites = np.zeros((2, *batch.pair_mask.shape), tau.dtype)
            for k, (b, inside) in enumerate(origins):
                sites[:, b, inside] = tau[k, : len(inside)], nu[k, : len(inside)]
            options["init"] = False
            return _fit_shared(
                prior, batch, groups, restrict, center=center, sites=sites, **options
            )
    if not per_query:
        return _fit_shared(prior, batch, groups, restrict, **options)
    # One theta per query: the same compiled steps (all queries share the padded shape), looped.
    fits = []
    for b in range(batch.pairs.shape[0]):
        one = jax.tree_util.tree_map(lambda x, b=b: x[b : b + 1], batch)
        fits.append(_fit_shared(prior, one, None, restrict, **options))
    # BFGS stops when converged: a shorter trace repeats its last (converged) entry
    longest = max(len(f.trace.objective) for f in fits)
    fits = [f._replace(trace=_extend(f.trace, longest)) for f in fits]
    return jax.block_until_ready(jax.tree_util.tree_map(lambda *a: jnp.stack(a), *fits))


def _layout(problems, method, optimizer, per_query, bucket):
    """``(batch, groups, restrict)`` for :func:`_fit_shared` from problems or a batch.

    Evidence maximisation of a shared ``theta`` from problems, driven from Python, buckets the
    queries by touched size (``groups``, :func:`size_buckets`). Otherwise evidence maximisation
    runs EP on the entities that pairs touch (:func:`prepare_batch`), at one size for all
    queries of the batch (per-query fits share their compiled programs); where pairs touch
    every entity, as on most dense problems, nothing is restricted.
    """
    if isinstance(problems, ProblemBatch):
        batch, groups = problems, None
    else:
        batch, groups = stack_problems(problems), None
        host_driven = optimizer in (None, "adam", "bfgs")  # evidence steps bucket by bucket
        if bucket is not None and not per_query and method == "evidence" and host_driven:
            groups = size_buckets(problems, bucket, touched=True)
    restrict = False
    if method == "evidence" and groups is None:
        size = touched_entities(batch)[0].shape[1]
        restrict = size if size < batch.mask.shape[1] else False
    return batch, groups, restrict


def _with_weights(prior: XPGP) -> XPGP:
    """``prior`` with unit mixing weights where it has none."""
    if prior.weights is not None:
        return prior
    return dataclasses.replace(prior, weights=jnp.ones(1 + len(prior.relations)))


def _subsample(problems, size: int) -> tuple[list, list]:
    """Each problem on at most ``size`` random entities and the pairs among them (renumbered);
    problems left without pairs are dropped. Seeded: the same subsets every call.

    Returns ``(subsets, origins)``: ``origins[k] = (b, inside)``, subset ``k`` comes from
    ``problems[b]`` and its pairs are that problem's pairs ``inside`` (indices, in order).
    """
    from .data.problem import PreferenceProblem

    if size < 2:
        raise ValueError(f"coarse must be at least 2 entities, got {size}")
    rng = np.random.default_rng(0)
    out, origins = [], []
    for b, p in enumerate(problems):
        if p.n <= size:
            out.append(p)
            origins.append((b, np.arange(len(p.pairs))))
            continue
        keep = np.sort(rng.choice(p.n, size, replace=False))
        position = np.full(p.n, -1)
        position[keep] = np.arange(size)
        inside = (position[p.pairs[:, 0]] >= 0) & (position[p.pairs[:, 1]] >= 0)
        if inside.any():
            out.append(
                PreferenceProblem.create(
                    position[p.pairs[inside]],
                    X=None if p.X is None else p.X[keep],
                    relations=[W[np.ix_(keep, keep)] for W in p.relations],
                    n=size,
                )
            )
            origins.append((b, np.flatnonzero(inside)))
    return out, origins


def _extend(trace: Trace, length: int) -> Trace:
    """``trace`` with its last entry repeated up to ``length`` entries."""
    pad = length - len(trace.objective)
    return jax.tree_util.tree_map(
        lambda a: jnp.concatenate([a, jnp.repeat(a[-1:], pad, axis=0)]), trace
    )


def size_buckets(
    problems, multiple: int = 64, touched: bool = False
) -> list[tuple[np.ndarray, ProblemBatch, int]]:
    """Group problems by size rounded up to ``multiple``: ``[(indices, padded batch, size)]``.

    The size is the number of entities, or with ``touched`` the number that pairs touch (the
    size EP runs at after :func:`prepare_batch`'s restriction; the batch is then padded to its
    largest problem).
    """
    if multiple < 1:
        raise ValueError(f"bucket must be a positive integer, got {multiple}")
    counts = [len(np.unique(p.pairs)) if touched else p.n for p in problems]
    groups: dict[int, list[int]] = {}
    largest = max(2, max(counts))
    for k, c in enumerate(counts):
        groups.setdefault(min(largest, max(2, multiple * -(-c // multiple))), []).append(k)
    return [
        (
            np.asarray(idx),
            stack_problems([problems[k] for k in idx], n_pad=None if touched else size),
            size,
        )
        for size, idx in sorted(groups.items())
    ]


def _gather_sites(sites, groups, shape) -> tuple[np.ndarray, np.ndarray]:
    """Per-bucket sites (a tuple of :class:`~bayesrank.inference.ep.Sites`) back into host
    arrays ``(tau, nu)`` of ``shape = (B, m)`` in the batch's order (zero-padded)."""
    if groups is None:
        return np.asarray(sites[0].tau), np.asarray(sites[0].nu)
    dtype = sites[0].tau.dtype
    tau, nu = np.zeros(shape, dtype), np.zeros(shape, dtype)
    for (idx, *_), s in zip(groups, sites, strict=True):
        mb = s.tau.shape[1]
        tau[idx, :mb], nu[idx, :mb] = np.asarray(s.tau), np.asarray(s.nu)
    return tau, nu


def _bucket_sites(sites, data, groups, dtype) -> tuple:
    """Starting sites per bucket, from ``sites = (tau, nu): (2, B, m)`` in the batch's order
    (a warm start), or zero (the prior) when ``None``."""
    if sites is None:
        return tuple(
            ep.Sites(jnp.zeros(d.pairs.shape[:2], dtype), jnp.zeros(d.pairs.shape[:2], dtype))
            for d in data
        )
    rows = [slice(None)] if groups is None else [idx for idx, *_ in groups]
    return tuple(
        ep.Sites(*(jnp.asarray(s[r, : d.pairs.shape[1]], dtype) for s in sites))
        for r, d in zip(rows, data, strict=True)
    )


def _merge_sites(posts, groups, m: int) -> ep.EPPosterior:
    """Per-bucket posteriors' sites and diagnostics back into one batch in the problems' order,
    sites padded to ``m``; ``mean`` and ``cov`` are left ``None`` (buckets are restricted to
    touched entities: every entity's moments come from the merged sites, :func:`_jit_moments`)."""
    B = sum(len(idx) for idx, *_ in groups)
    tau, nu = _gather_sites(tuple(p.sites for p in posts), groups, (B, m))
    names = [f for f in ep.EPPosterior._fields if f not in ("mean", "cov", "sites")]
    rest = {f: np.zeros(B, getattr(posts[0], f).dtype) for f in names}
    for (idx, *_), p in zip(groups, posts, strict=True):
        for f in names:
            rest[f][idx] = np.asarray(getattr(p, f))
    rest = {f: jnp.asarray(v) for f, v in rest.items()}
    sites = ep.Sites(jnp.asarray(tau), jnp.asarray(nu))
    return ep.EPPosterior(mean=None, cov=None, sites=sites, **rest)


def _fit_shared(
    prior,
    batch,
    groups,
    restrict,
    *,
    center=None,
    sites=None,
    final=True,
    method,
    n_iter,
    m_steps,
    optimizer,
    learning_rate,
    hyperprior_scale,
    trainable,
    init,
    restarts,
    key,
    ep_max_iter,
    ep_tol,
    ep_step_tol,
    tol,
    schedule,
    progress,
) -> FitResult:
    prior = initialize(prior, batch) if init else _with_weights(prior)
    if groups is None:
        data = (prepare_batch(prior, batch, restrict),)
    else:  # buckets by touched size: each restricted to its size
        data = tuple(prepare_batch(prior, b, size) for _, b, size in groups)
        restrict = True
    trainable = default_trainable(prior) if trainable is None else trainable
    leaves, treedef = jax.tree_util.tree_flatten(unconstrain(prior))
    flags = tuple(bool(f) for f in jax.tree_util.tree_leaves(trainable))
    if len(flags) != len(leaves):
        raise ValueError("trainable must have the structure of the prior")
    dtype = jnp.result_type(float)  # strong types: a weakly typed start would retrace _step
    free = [jnp.array(x, dtype=dtype) for x, f in zip(leaves, flags, strict=True) if f]
    fixed = [jnp.array(x, dtype=dtype) for x, f in zip(leaves, flags, strict=True) if not f]
    final_tol = ep.default_tol(dtype) if ep_tol is None else ep_tol
    step_tol = ep_tol if ep_step_tol is None else max(ep_step_tol, final_tol)
    cfg = _Config(
        treedef,
        flags,
        method,
        optimizer or ("lbfgs" if method == "em" else "bfgs"),
        float(learning_rate),
        int(m_steps),
        hyperprior_scale,
        int(ep_max_iter),
        ep_tol,
        schedule,
        step_tol,
        float(tol),
        batch.pairs.shape[0] == 1,
    )
    _optimizer(cfg)  # validate the name early
    centre = None  # the hyperprior's centre: each start's own values, or those of ``center``
    if center is not None:
        leaves_c = jax.tree_util.tree_leaves(unconstrain(center))
        centre = [jnp.array(x, dtype=dtype) for x, f in zip(leaves_c, flags, strict=True) if f]
    sites = _bucket_sites(sites, data, groups, dtype)
    starts = [free]
    if restarts:
        if key is None:
            raise ValueError("restarts need an explicit key")
        for k in jax.random.split(key, restarts):
            keys = jax.random.split(k, len(free))
            starts.append(
                [
                    x + jax.random.normal(kk, x.shape, x.dtype)
                    for x, kk in zip(free, keys, strict=True)
                ]
            )
    best = None
    for start in starts:
        opt = _optimizer(cfg) if method == "evidence" else None
        opt_state = None if opt is None else opt.init(start)
        carry = _Carry(start, sites, opt_state)
        u0 = start if centre is None else centre
        carry, trace = _drive(carry, fixed, u0, data, cfg, n_iter, progress)
        score = float(trace.objective[-1])
        if best is None or score > best[0]:
            best = (score, carry, trace)
    _, carry, trace = best
    if not final:  # the fitted prior and the steps' sites (B, m) in the batch's order
        tau, nu = _gather_sites(carry.sites, groups, batch.pairs.shape[:2])
        return _combine(carry.free, fixed, cfg), (tau, nu)
    if len(data) == 1 and cfg.optimizer != "bfgs":
        fitted, posterior = _final(carry.free, fixed, data[0], carry.sites[0], cfg)
        posteriors = [posterior]
    else:  # the steps' compiled programs (one per size bucket) at EP's final tolerance
        tol = _tol(cfg.ep_tol, carry.free)
        posteriors = [
            jax.block_until_ready(_jit_bucket_evidence(carry.free, fixed, d, s, tol, cfg))[2]
            for d, s in zip(data, carry.sites, strict=True)
        ]
        fitted = _combine(carry.free, fixed, cfg)
    if groups is None:
        posterior = posteriors[0]
    else:
        posterior = _merge_sites(posteriors, groups, batch.pairs.shape[1])
    if restrict is not False:  # every entity's moments, from the sites (no EP sweep)
        whole = prepare_batch(prior, batch)
        mean, cov = _jit_moments(carry.free, fixed, whole, posterior.sites, cfg)
        posterior = posterior._replace(mean=mean, cov=cov)
    return jax.block_until_ready(FitResult(fitted, posterior, trace))  # inside one_blas_thread


@partial(jax.jit, static_argnames=("cfg",))
def _jit_moments(free, fixed, data: PreparedBatch, sites, cfg: _Config):
    """Every query's posterior ``(mean: (B, n), cov: (B, n, n))`` given its sites."""
    K = covariances(_combine(free, fixed, cfg), data)
    return jax.vmap(ep.posterior_moments)(K, data.pairs, sites, data.pair_mask)


def _iterations(n_iter, cfg, progress):
    """``range(n_iter)``, or a tqdm bar over it when ``progress`` (and tqdm) is there."""
    if progress:
        try:
            from tqdm.auto import trange

            return trange(n_iter, desc=f"fit ({cfg.method}, {cfg.optimizer})")
        except ImportError:  # tqdm is optional
            pass
    return range(n_iter)


def _report(iterations, info, k):
    evidence = float(jnp.sum(info.log_evidence))
    if hasattr(iterations, "set_postfix"):
        iterations.set_postfix(log_evidence=evidence)
    else:
        print(f"iteration {k}: log evidence {evidence:.4f}")


def _drive(carry, fixed, u0, data, cfg, n_iter, progress):
    """Run ``n_iter`` jitted iterations from Python (one compilation per configuration)."""
    if cfg.optimizer == "bfgs":
        return _drive_bfgs(carry, fixed, u0, data, cfg, n_iter, progress)
    iterations = _iterations(n_iter, cfg, progress)
    infos = []
    for _ in iterations:
        carry, info = _step(carry, fixed, u0, data, cfg)
        infos.append(info)
        if progress:
            _report(iterations, info, len(infos))
    return carry, jax.tree_util.tree_map(lambda *a: jnp.stack(a), *infos)


#: Armijo constant and the most step halvings of the BFGS line search; the longest step in any
#: unconstrained coordinate (a log scale: a factor e^2 = 7.4).
ARMIJO, MAX_HALVINGS, MAX_STEP = 1e-4, 30, 2.0


def _precompile(free, fixed, data, sites, tol, cfg: _Config) -> None:
    """Compile each size bucket's evidence and Fisher programs, in parallel threads.

    Tracing holds Python's lock, XLA's compilation does not: compiling a shared fit's 8-10
    programs on all cores instead of one after another, on their first calls, takes about half
    the time on 2 cores. The compiled programs land in ``jit``'s cache, where the calls find
    them.
    """
    workers = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    if (workers or 1) < 2:
        return  # compiled on first use
    lowered = []
    for d, s in zip(data, sites, strict=True):
        evidence = _jit_bucket_evidence.lower(free, fixed, d, s, tol, cfg)
        lowered += [evidence, _jit_bucket_fisher.lower(free, fixed, d, evidence.out_info[2], cfg)]
    with ThreadPoolExecutor(min(workers, len(lowered))) as pool:
        list(pool.map(lambda program: program.compile(), lowered))


def _backtrack(step: float, f: float, slope: float, f_step: float) -> float:
    """The next trial step after ``step`` failed the Armijo test: the maximiser of the quadratic
    through ``f`` (slope ``slope > 0`` at 0) and ``f_step`` at ``step``, kept within
    ``[0.1, 0.5] * step`` (Nocedal & Wright, Sec. 3.5); half the step where ``f_step`` is not
    finite. A far overshoot (``f_step`` far below ``f``) is cut back in one trial, not several
    halvings."""
    if not np.isfinite(f_step):
        return 0.5 * step
    curvature = (f_step - f - slope * step) / step**2  # < 0: the Armijo test failed
    best = -slope / (2.0 * curvature) if curvature < 0 else 0.5 * step
    return float(np.clip(best, 0.1 * step, 0.5 * step))


def _drive_bfgs(carry, fixed, u0, data, cfg, n_iter, progress):
    """BFGS ascent on ``log Z_EP + log hyperprior``, from Python, at most ``n_iter`` steps.

    - The first inverse Hessian is the inverse of the Fisher information (plus the hyperprior's
      precision; :func:`_jit_bucket_fisher`), so the first step is a Fisher-scoring step;
      each accepted step then updates it by BFGS (skipped when the curvature ``s^T y`` is not
      positive).
    - Line search: the full step first, then backtracking by quadratic interpolation
      (:func:`_backtrack`) until the Armijo condition holds. Every trial point runs EP
      warm-started from the current point's sites.
    - Stops when a step gains less than ``cfg.tol`` nats and the quasi-Newton model predicts
      less than that to come (``g^T H g / 2``), or when no step along the direction gains.

    The objective and its gradient come from the compiled per-bucket programs (``_evaluate``);
    only ``p``-vectors and ``p x p`` matrices live on the host.
    """
    flat, unravel = ravel_pytree(carry.free)
    dtype = flat.dtype
    shapes = [np.shape(leaf) for leaf in carry.free]
    splits = np.cumsum([int(np.prod(shape)) for shape in shapes])[:-1]
    center = np.asarray(ravel_pytree(u0)[0], np.float64)
    precision = 0.0 if cfg.hyperprior_scale is None else cfg.hyperprior_scale**-2
    tol = _tol(cfg.ep_step_tol, carry.free, relative=True)

    def free_of(x):  # NumPy on the host: no eager JAX dispatches between the compiled calls
        parts = np.split(x, splits)
        return [c.astype(dtype).reshape(shape) for c, shape in zip(parts, shapes, strict=True)]

    def objective(x, sites):
        """``(f, grad f, -log Z_EP, posteriors)``, ``f`` = log evidence + log hyperprior."""
        value, grad, posts = _evaluate(free_of(x), fixed, data, sites, tol, cfg)
        dev = x - center
        f = -value - 0.5 * precision * float(dev @ dev)
        g = -np.concatenate([leaf.ravel() for leaf in grad]).astype(np.float64) - precision * dev
        return f, g, value, posts

    _precompile(carry.free, fixed, data, carry.sites, tol, cfg)
    x = np.asarray(flat, np.float64)
    f, g, value, posts = objective(x, carry.sites)
    if not (np.isfinite(f) and np.all(np.isfinite(g))):
        raise ValueError(
            f"the EP evidence or its gradient at the initial hyperparameters is not finite "
            f"(log evidence {-value}); check the prior's values and the data"
        )
    F = sum(
        np.asarray(_jit_bucket_fisher(free_of(x), fixed, d, p, cfg), np.float64)
        for d, p in zip(data, posts, strict=True)
    )
    F = 0.5 * (F + F.T) + precision * np.eye(x.size)
    ridge = 1e-10 * max(1.0, float(np.max(np.abs(np.diag(F))))) if np.all(np.isfinite(F)) else 0
    try:
        H = np.linalg.inv(F + ridge * np.eye(x.size))
        if not np.all(np.isfinite(H)) or np.any(np.linalg.eigvalsh(H) <= 0):
            raise np.linalg.LinAlgError
    except np.linalg.LinAlgError:
        H = np.eye(x.size)

    iterations = _iterations(n_iter, cfg, progress)
    infos = []
    for _ in iterations:
        direction = H @ g
        longest = float(np.max(np.abs(direction)))
        if longest > MAX_STEP:  # a factor e^MAX_STEP on a scale at most (an unreliable model)
            direction = direction * (MAX_STEP / longest)
        slope = float(g @ direction)
        step, accepted = 1.0, False
        for _ in range(MAX_HALVINGS):
            x_new = x + step * direction
            f_new, g_new, value_new, posts_new = objective(x_new, tuple(p.sites for p in posts))
            if np.isfinite(f_new) and f_new >= f + ARMIJO * step * slope:
                accepted = np.all(np.isfinite(g_new))
                break
            step = _backtrack(step, f, slope, f_new)
        before = f
        if accepted:
            s, y = x_new - x, g - g_new  # y: the change in the gradient of -f
            sy = float(s @ y)
            if sy > 1e-12 * float(np.sqrt((s @ s) * (y @ y))):
                if not infos:  # scale the Fisher start to the curvature seen (Nocedal-Wright 6.20)
                    H = H * (sy / float(y @ H @ y))
                V = np.eye(x.size) - np.outer(s, y) / sy
                H = V @ H @ V.T + np.outer(s, s) / sy
            x, f, g, value, posts = x_new, f_new, g_new, value_new, posts_new
        infos.append(
            (
                x,
                -value,
                before,
                f,
                max(int(np.max(p.n_iter)) for p in posts),
                all(bool(np.all(p.converged)) for p in posts),
            )
        )
        if progress:
            _report(iterations, Trace(-value, f, before, None, None, None), len(infos))
        if not accepted or (f - before < cfg.tol and 0.5 * float(g @ H @ g) < cfg.tol):
            break
    columns = (np.asarray(c) for c in zip(*infos, strict=True))
    xs, evidence, before, after, sweeps, converged = columns
    params = jax.vmap(lambda v: _combine(unravel(v), fixed, cfg))(jnp.asarray(xs, dtype))
    trace = Trace(
        log_evidence=jnp.asarray(evidence, dtype),
        objective=jnp.asarray(after, dtype),
        objective_before=jnp.asarray(before, dtype),
        params=params,
        ep_iterations=jnp.asarray(sweeps, jnp.int32),
        ep_converged=jnp.asarray(converged),
    )
    free = unravel(jnp.asarray(x, dtype))
    return _Carry(free, tuple(p.sites for p in posts), None), trace
