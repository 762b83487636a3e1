"""What a fit carries between iterations and what it returns."""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from ..data.batch import pad_covariance, pad_rows
from ..inference import ep
from ..kernels.xpgp import XPGP
from .config import Config, combine

__all__ = ["Design", "FitResult", "Trace", "choose_per_query", "concatenate"]


class Trace(NamedTuple):
    """Per iteration (leading axis ``T``, plus a query axis for per-query fits)."""

    log_evidence: jax.Array  # EP evidence (summed over shared queries) at the iteration's start
    objective: jax.Array  # EM: Q after the M-step; evidence method: the (MAP) evidence
    objective_before: jax.Array  # EM: Q before the M-step (same q); evidence method: = objective
    params: Any  # the prior (constrained) after the iteration
    ep_iterations: jax.Array  # largest EP sweep count over the queries
    ep_converged: jax.Array  # every query's EP converged


class Design(NamedTuple):
    """A fit's global start (``design``): its ``S`` design points as priors (every leaf
    ``(S, ...)``, per-query fits ``(B, S, ...)``; point 0 is the start), the (MAP) objective
    at each, ``(S,)`` or ``(B, S)`` (``-inf`` where not finite), and the points BFGS started
    from, indices ``(k,)`` or ``(B, k)``."""

    priors: XPGP
    objective: Any
    starts: Any


class FitResult(NamedTuple):
    """The fitted prior, the EP posteriors at it (batched: they predict per query), the trace,
    and whether the fit converged (per query for per-query fits).

    ``converged``: BFGS stopped by its own rule before ``max_steps``; EM and the optax optimisers
    (which run ``steps`` iterations) changed the objective by less than ``tol`` nats in the
    last one. ``design``: the global start's ``Design`` (``None`` without one);
    ``design_gap``: the fit's (MAP) objective minus the design's best, per query for per-query
    fits (``>= 0`` where the fit reached the design's best). ``nonfinite_step``: an optax
    transformation's step made the hyperparameters or the objective non-finite; the step was
    rejected and the fit stopped at its last finite point (``converged`` False; the trace
    repeats that point; ``bayesrank.learning.guard``); always False for BFGS, which rejects
    such points in its line search.
    """

    prior: XPGP
    posteriors: ep.EPPosterior
    trace: Trace
    converged: Any = None
    design: Design | None = None
    design_gap: Any = None
    nonfinite_step: Any = None


class Carry(NamedTuple):
    """The state between iterations: the free unconstrained values, EP's sites (a tuple over
    size buckets, each ``(B, m)``) and the optimiser's state (``None`` for EM and BFGS)."""

    free: list
    sites: tuple
    opt_state: Any


def info(post: tuple, carry: Carry, fixed, before, after, cfg: Config) -> Trace:
    """One iteration's trace entry from the buckets' posteriors."""
    return Trace(
        log_evidence=sum(jnp.sum(p.log_evidence) for p in post),
        objective=after,
        objective_before=before,
        params=combine(carry.free, fixed, cfg),
        ep_iterations=jnp.max(jnp.stack([jnp.max(p.n_iter) for p in post])),
        ep_converged=jnp.all(jnp.stack([jnp.all(p.converged) for p in post])),
    )


def concatenate(parts: list[FitResult], groups: list[list[int]]) -> FitResult:
    """Per-query fits of groups of problems (``parts[g]`` fits the problems ``groups[g]``) as one
    result in the problems' order: posteriors padded to the largest group's entities (a padded
    entity keeps its ``N(0, 1)`` prior) and pairs (zero sites), traces to the longest (a trace
    repeats its last entry, as a fit that stopped early does). Host arrays, placed on the
    device at the end."""
    order = np.argsort(np.concatenate(groups))
    parts = jax.device_get(parts)

    def cat(*xs):
        return np.concatenate([np.asarray(x) for x in xs])[order]

    T = max(np.shape(p.trace.objective)[1] for p in parts)

    def longer(x):
        x = np.asarray(x)
        return np.concatenate([x, np.repeat(x[:, -1:], T - x.shape[1], axis=1)], axis=1)

    N = max(p.posteriors.mean.shape[1] for p in parts)
    M = max(p.posteriors.sites.tau.shape[1] for p in parts)

    def wider(post):
        sites = ep.Sites(*(pad_rows(s, M, axis=-1) for s in post.sites))
        mean = pad_rows(post.mean, N, axis=-1)
        return post._replace(mean=mean, cov=pad_covariance(post.cov, N), sites=sites)

    tree = jax.tree_util.tree_map
    return jax.device_put(
        FitResult(
            prior=tree(cat, *[p.prior for p in parts]),
            posteriors=tree(cat, *[wider(p.posteriors) for p in parts]),
            trace=tree(lambda *xs: cat(*map(longer, xs)), *[p.trace for p in parts]),
            converged=cat(*[p.converged for p in parts]),
            design=None if parts[0].design is None else tree(cat, *[p.design for p in parts]),
            design_gap=None if parts[0].design_gap is None else cat(*[p.design_gap for p in parts]),
            nonfinite_step=cat(*[p.nonfinite_step for p in parts]),
        )
    )


def choose_per_query(better, new, old):
    """Per query, the restart ``new`` where ``better``, else ``old`` (host arrays; each
    ``(carry, trace, *flags)``, a flag ``None`` in both or per query). Their traces
    ``(B, T, ...)`` may differ in ``T`` (each run stops with its slowest query): the shorter is
    padded with its last (final) entry first."""

    def pick(a, b):
        a, b = np.asarray(a), np.asarray(b)
        mask = better.reshape(better.shape + (1,) * (a.ndim - 1))
        return np.where(mask, a, b)

    (carry_new, trace_new, *flags_new), (carry_old, trace_old, *flags_old) = new, old
    T = max(np.shape(trace_new.objective)[1], np.shape(trace_old.objective)[1])

    def pad(a):
        a = np.asarray(a)
        return np.concatenate([a, np.repeat(a[:, -1:], T - a.shape[1], axis=1)], axis=1)

    trace_new, trace_old = (jax.tree_util.tree_map(pad, t) for t in (trace_new, trace_old))
    return jax.tree_util.tree_map(
        pick, (carry_new, trace_new, *flags_new), (carry_old, trace_old, *flags_old)
    )


def unbatched(result: FitResult, batch) -> FitResult:
    """A single problem's fit as a shared one: the prior, trace and flag without the query
    axis; the posteriors keep it, as every fit's do, over the problem's own entities and pairs
    (the bucketed padding removed)."""

    def drop(tree):  # on the host: an eager slice compiles a program per shape
        return jax.device_put(jax.tree_util.tree_map(lambda x: np.asarray(x)[0], tree))

    n, m = int(batch.mask[0].sum()), int(batch.pair_mask[0].sum())
    post = jax.device_get(result.posteriors)
    post = post._replace(
        mean=post.mean[:, :n],
        cov=post.cov[:, :n, :n],
        sites=ep.Sites(post.sites.tau[:, :m], post.sites.nu[:, :m]),
    )
    return result._replace(
        prior=drop(result.prior),
        posteriors=jax.device_put(post),
        trace=drop(result.trace),
        converged=bool(result.converged[0]),
        nonfinite_step=bool(result.nonfinite_step[0]),
        design=None if result.design is None else drop(result.design),
        design_gap=None if result.design_gap is None else float(result.design_gap[0]),
    )
