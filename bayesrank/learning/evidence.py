"""The compiled evidence programs that the host-driven optimisers call, bucket by bucket.

A shared ``theta`` over queries of very different sizes is evaluated on size buckets
(``bayesrank.data.batch.size_buckets``), one compiled call per bucket, each finishing before
the next starts (the buckets' batched LAPACK calls must not overlap on jaxlib 0.10's CPU
runtime, ``docs/development/implementation.md``); values and gradients are summed on the host
(``evaluate``).
Per-query fits evaluate every query's own ``theta`` in one call (``evaluate_per_query``).
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np
import optax

from ..compiler import jit
from ..executables import stored
from .config import Config, Traced, log_hyperprior
from .em import make_optimizer
from .objectives import (
    bucket_evidence,
    bucket_fisher,
    bucket_moments,
    per_query_evidence,
    per_query_fisher,
    per_query_moments,
)
from .results import Carry, info

__all__: list[str] = []  # the façade is bayesrank.learning.fit_hyperparameters

# The compiled programs of the evidence objective (cores in .objectives); ``cfg`` is static. Each
# is kept whole where a compilation cache is on (``executables``): a fresh process's first learned
# fit then neither traces nor lowers them.


@stored
@partial(jit, static_argnames=("cfg",))
def jit_bucket_evidence(free, fixed, data, sites, tol, cfg):
    return bucket_evidence(free, fixed, data, sites, tol, cfg)


@stored
@partial(jit, static_argnames=("cfg",))
def jit_bucket_fisher(free, fixed, data, post, cfg):
    return bucket_fisher(free, fixed, data, post, cfg)


@stored
@partial(jit, static_argnames=("cfg",))
def jit_moments(free, fixed, data, sites, cfg):
    return bucket_moments(free, fixed, data, sites, cfg)


@stored
@partial(jit, static_argnames=("cfg",))
def jit_evidence_per_query(free, fixed, data, sites, tol, cfg):
    return per_query_evidence(free, fixed, data, sites, tol, cfg)


@stored
@partial(jit, static_argnames=("cfg",))
def jit_fisher_per_query(free, fixed, data, post, cfg):
    return per_query_fisher(free, fixed, data, post, cfg)


@stored
@partial(jit, static_argnames=("cfg",))
def jit_moments_per_query(free, fixed, data, sites, cfg):
    return per_query_moments(free, fixed, data, sites, cfg)


def tolerances(tol, dtype, relative: bool = False):
    """``[absolute, relative]`` EP tolerances (``objectives.bucket_posteriors``) as an
    array of ``dtype``: steps (``relative``) use ``tol`` for both, final posteriors ``[tol, 0]``."""
    return np.asarray([tol, tol if relative else 0.0], dtype)


def evaluate(free, fixed, data, sites, tol, cfg: Config):
    """``(-log Z_EP, its gradient, posteriors)`` summed over the size buckets (no hyperprior).

    One compiled call per bucket; each finishes before the next starts. The value (a float) and
    the gradient (a list of NumPy arrays like ``free``) are summed on the host.
    """
    value, grad, posts = 0.0, None, []
    for d, s in zip(data, sites, strict=True):
        v, g, p = jax.block_until_ready(jit_bucket_evidence(free, fixed, d, s, tol, cfg=cfg))
        g = [np.asarray(leaf) for leaf in g]
        value += float(v)
        grad = g if grad is None else [a + b for a, b in zip(grad, g, strict=True)]
        posts.append(p)
    return value, grad, tuple(posts)


def evaluate_per_query(free, fixed, data, sites, tol, cfg: Config):
    """Per query ``(-log Z_EP: (B,), gradient (leaves (B, ...)), posteriors)``, one call."""
    (d,), (s,) = data, sites
    v, g, p = jax.block_until_ready(jit_evidence_per_query(free, fixed, d, s, tol, cfg=cfg))
    return np.asarray(v, np.float64), [np.asarray(leaf) for leaf in g], (p,)


def fisher(free, fixed, data, posts, cfg: Config, per_query: bool) -> np.ndarray:
    """The Fisher information ``(p, p)`` summed over the buckets, or ``(B, p, p)`` per query."""
    if per_query:
        (d,), (p,) = data, posts
        return np.asarray(jit_fisher_per_query(free, fixed, d, p, cfg=cfg), np.float64)
    return sum(
        np.asarray(jit_bucket_fisher(free, fixed, d, p, cfg=cfg), np.float64)
        for d, p in zip(data, posts, strict=True)
    )


def precompile(free, fixed, data, sites, tol, cfg: Config, per_query: bool) -> None:
    """Compile each size bucket's evidence and Fisher programs, in parallel threads.

    Tracing holds Python's lock, XLA's compilation does not: compiling a shared fit's 8-10
    programs on all cores instead of one after another, on their first calls, takes about half
    the time on 2 cores. The compiled programs land in ``jit``'s cache, where the calls find
    them.
    """
    workers = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    if (workers or 1) < 2:
        return  # compiled on first use
    evidence_fn = jit_evidence_per_query if per_query else jit_bucket_evidence
    fisher_fn = jit_fisher_per_query if per_query else jit_bucket_fisher
    lowered = []
    for d, s in zip(data, sites, strict=True):
        evidence = _pending(evidence_fn, free, fixed, d, s, tol, cfg=cfg)
        lowered += [evidence, _pending(fisher_fn, free, fixed, d, evidence.out_info[2], cfg=cfg)]
    with ThreadPoolExecutor(min(workers, len(lowered))) as pool:
        list(pool.map(lambda program: program.compile(), lowered))


def _pending(program, *args, **static):
    """``program``'s executable for these arguments, lowered and not yet compiled where it is
    neither kept (``executables``) nor in this process; ``.compile()`` compiles it."""
    return program.pending(*args, **static) or program.lower(*args, **static)


@partial(jit, static_argnames=("cfg",))
def jit_optax_update(carry: Carry, fixed, u0, value, grad, post, cfg: Config, settings: Traced):
    """An optimiser step (no line search) from a host-summed value and gradient."""
    prior_value, prior_grad = jax.value_and_grad(lambda f: -log_hyperprior(f, u0, cfg, settings))(
        carry.free
    )
    value = value + prior_value
    grad = jax.tree_util.tree_map(jnp.add, grad, prior_grad)
    updates, opt_state = make_optimizer(cfg, settings).update(grad, carry.opt_state, carry.free)
    new = Carry(optax.apply_updates(carry.free, updates), tuple(p.sites for p in post), opt_state)
    return new, info(post, new, fixed, -value, -value, cfg)


def bucketed_evidence_step(carry, fixed, u0, data, cfg: Config, settings: Traced):
    """An optimiser step on the evidence summed over size buckets, one compiled call a bucket."""
    dtype = jax.tree_util.tree_leaves(carry.free)[0].dtype
    tol = tolerances(settings.ep_step_tol, dtype, relative=True)
    value, grad, posts = evaluate(carry.free, fixed, data, carry.sites, tol, cfg)
    return jit_optax_update(carry, fixed, u0, value, grad, posts, cfg=cfg, settings=settings)


def final_posteriors(free, fixed, data, sites, cfg: Config, settings: Traced, per_query: bool):
    """The posteriors at the fitted ``theta``, each bucket's evidence program at EP's final
    tolerance (no new program)."""
    dtype = jax.tree_util.tree_leaves(free)[0].dtype
    tol = tolerances(settings.ep_tol, dtype)
    fn = jit_evidence_per_query if per_query else jit_bucket_evidence
    return [
        jax.block_until_ready(fn(free, fixed, d, s, tol, cfg=cfg))[2]
        for d, s in zip(data, sites, strict=True)
    ]


def moments(free, fixed, whole, sites, cfg: Config, per_query: bool):
    """Every entity's posterior moments from the sites (``whole``: the unrestricted batch)."""
    fn = jit_moments_per_query if per_query else jit_moments
    return fn(free, fixed, whole, sites, cfg=cfg)
