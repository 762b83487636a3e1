"""The compiled evidence programs that the host-driven optimisers call, bucket by bucket.

A shared ``theta`` over queries of very different sizes is evaluated on size buckets
(``bayesrank.data.batch.size_buckets``), one compiled call per bucket, each finishing before
the next starts (the buckets' batched LAPACK calls must not overlap on jaxlib 0.10's CPU
runtime, ``docs/development/implementation.md``); values and gradients are summed on the host
(``evaluate``).
Per-query fits evaluate every query's own ``theta`` in one call (``evaluate_per_query``).

Each evaluation is three programs (``objectives``, "the prior and the engine apart"): the
prior's ``K`` (``jit_prior_parts``), EP's evidence and its gradient in ``K``
(``jit_evidence_given``: the costly program, whose key holds the bucket, the engine's settings
and the kind of outcomes, not the prior), and the chain rule back to ``theta``
(``jit_prior_pullback``). Two priors at one bucket (a study's models, a test's kernels, the
same model with other trainable flags) compile EP once between them.
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
    engine_config,
    evidence_given,
    fisher_weights,
    likelihood_data,
    moments_given,
    per_query_evidence_given,
    per_query_fisher,
    per_query_fisher_weights,
    per_query_moments_given,
    per_query_parts,
    per_query_pullback,
    prior_fisher,
    prior_parts,
    prior_pullback,
)
from .results import Carry, info

__all__: list[str] = []  # the façade is bayesrank.learning.fit_hyperparameters

# The compiled programs of the evidence objective (cores in .objectives); ``cfg`` and
# ``per_query`` (one ``theta`` per query) are static. Each is kept whole where a compilation
# cache is on (``executables``): a fresh process's first learned fit then neither traces nor
# lowers them. The prior's programs take ``Config``; the shared ones ``engine_config(cfg)`` and
# ``likelihood_data(data)`` only.


@stored
@partial(jit, static_argnames=("cfg", "per_query"))
def jit_prior_parts(free, fixed, data, cfg, per_query):
    return (per_query_parts if per_query else prior_parts)(free, fixed, data, cfg)


@stored
@partial(jit, static_argnames=("cfg", "per_query"))
def jit_evidence_given(K, lik, data, sites, tol, cfg, per_query):
    fn = per_query_evidence_given if per_query else evidence_given
    return fn(K, lik, data, sites, tol, cfg)


@stored
@partial(jit, static_argnames=("cfg", "per_query"))
def jit_prior_pullback(free, fixed, data, cotangent, cfg, per_query):
    return (per_query_pullback if per_query else prior_pullback)(free, fixed, data, cotangent, cfg)


@stored
@partial(jit, static_argnames=("per_query",))
def jit_fisher_weights(K, data, post, per_query):
    return (per_query_fisher_weights if per_query else fisher_weights)(K, data, post)


@stored
@partial(jit, static_argnames=("cfg", "per_query"))
def jit_prior_fisher(free, fixed, data, W, cfg, per_query):
    return (per_query_fisher if per_query else prior_fisher)(free, fixed, data, W, cfg)


@stored
@partial(jit, static_argnames=("per_query",))
def jit_moments_given(K, data, sites, per_query):
    return (per_query_moments_given if per_query else moments_given)(K, data, sites)


def tolerances(tol, dtype, relative: bool = False):
    """``[absolute, relative]`` EP tolerances (``objectives.posteriors_given``) as an
    array of ``dtype``: steps (``relative``) use ``tol`` for both, final posteriors ``[tol, 0]``."""
    return np.asarray([tol, tol if relative else 0.0], dtype)


def _evidence(free, fixed, data, sites, tol, cfg: Config, per_query: bool, gradient=True):
    """One bucket's ``(-log Z_EP, its gradient in free or None, posteriors)``, finished."""
    K, lik = jit_prior_parts(free, fixed, data, cfg=cfg, per_query=per_query)
    value, cotangent, post = jit_evidence_given(
        K, lik, likelihood_data(data), sites, tol, cfg=engine_config(cfg), per_query=per_query
    )
    grad = None
    if gradient:
        grad = jit_prior_pullback(free, fixed, data, cotangent, cfg=cfg, per_query=per_query)
    return jax.block_until_ready((value, grad, post))


def evaluate(free, fixed, data, sites, tol, cfg: Config, gradient: bool = True):
    """``(-log Z_EP, its gradient, posteriors)`` summed over the size buckets (no hyperprior;
    the gradient None without ``gradient``: the chain rule's program is not run).

    One evaluation per bucket (``_evidence``); each finishes before the next starts. The value
    (a float) and the gradient (a list of NumPy arrays like ``free``) are summed on the host.
    """
    value, grad, posts = 0.0, None, []
    for d, s in zip(data, sites, strict=True):
        v, g, p = _evidence(free, fixed, d, s, tol, cfg, per_query=False, gradient=gradient)
        value += float(v)
        if gradient:
            g = [np.asarray(leaf) for leaf in g]
            grad = g if grad is None else [a + b for a, b in zip(grad, g, strict=True)]
        posts.append(p)
    return value, grad, tuple(posts)


def evaluate_per_query(free, fixed, data, sites, tol, cfg: Config, gradient: bool = True):
    """Per query ``(-log Z_EP: (B,), gradient (leaves (B, ...)) or None, posteriors)``, one
    bucket."""
    (d,), (s,) = data, sites
    v, g, p = _evidence(free, fixed, d, s, tol, cfg, per_query=True, gradient=gradient)
    grad = [np.asarray(leaf) for leaf in g] if gradient else None
    return np.asarray(v, np.float64), grad, (p,)


def fisher(free, fixed, data, posts, cfg: Config, per_query: bool) -> np.ndarray:
    """The Fisher information ``(p, p)`` summed over the buckets, or ``(B, p, p)`` per query
    (one bucket)."""
    total = 0.0
    for d, p in zip(data, posts, strict=True):
        K, _ = jit_prior_parts(free, fixed, d, cfg=cfg, per_query=per_query)
        W = jit_fisher_weights(K, likelihood_data(d), p, per_query=per_query)
        F = jit_prior_fisher(free, fixed, d, W, cfg=cfg, per_query=per_query)
        total = total + np.asarray(F, np.float64)
    return total


def precompile(free, fixed, data, sites, tol, cfg: Config, per_query: bool) -> None:
    """Compile each size bucket's evidence and Fisher programs, in parallel threads.

    Tracing holds Python's lock, XLA's compilation does not: compiling a shared fit's 8-10
    programs on all cores instead of one after another, on their first calls, takes about half
    the time on 2 cores. The compiled programs land in ``jit``'s cache, where the calls find
    them; one another prior already compiled (``jit_evidence_given``) is not compiled again.
    """
    workers = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    if (workers or 1) < 2:
        return  # compiled on first use
    spec = {"cfg": cfg, "per_query": per_query}
    lowered = []
    for d, s in zip(data, sites, strict=True):
        parts = _pending(jit_prior_parts, free, fixed, d, **spec)
        K, lik = parts.out_info
        evidence = _pending(
            jit_evidence_given, K, lik, likelihood_data(d), s, tol,
            cfg=engine_config(cfg), per_query=per_query,
        )  # fmt: skip
        pullback = _pending(jit_prior_pullback, free, fixed, d, evidence.out_info[1], **spec)
        weights = _pending(
            jit_fisher_weights, K, likelihood_data(d), evidence.out_info[2], per_query=per_query
        )
        fisher = _pending(jit_prior_fisher, free, fixed, d, weights.out_info, **spec)
        lowered += [evidence, weights, parts, pullback, fisher]
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
    return [
        _evidence(free, fixed, d, s, tol, cfg, per_query, gradient=False)[2]
        for d, s in zip(data, sites, strict=True)
    ]


def moments(free, fixed, whole, sites, cfg: Config, per_query: bool):
    """Every entity's posterior moments from the sites (``whole``: the unrestricted batch)."""
    K, _ = jit_prior_parts(free, fixed, whole, cfg=cfg, per_query=per_query)
    return jit_moments_given(K, likelihood_data(whole), sites, per_query=per_query)
