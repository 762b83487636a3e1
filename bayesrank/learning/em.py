"""EM-EP (paper Sec. 4.3, after Kim & Ghahramani 2006), and the optax steps on the evidence.

EM. E-step: EP at the current hyperparameters ``theta``, warm-started from the previous sites,
gives ``q(xi_hat) = N(mu, Sigma)``. M-step: ``m_steps`` optimiser steps (L-BFGS by default, or
any optax ``GradientTransformation``) on ``Q(theta) + log hyperprior``
(``expected_log_prior``) in unconstrained coordinates. The
M-step never decreases ``Q`` for the ``q`` it was given (beyond optimiser tolerance). The E- and
M-steps are compiled separately: fused into one program (EP's while loop under ``vmap`` beside
L-BFGS's line search) XLA's CPU run time was pathological.

Evidence steps with optax (``Optax("adam")`` or ``Optax("lbfgs")``, or a transformation): one
optimiser step on ``-(log Z_EP + log hyperprior)`` per iteration, EP warm-started inside.
(The default for evidence maximisation is the host-driven BFGS of ``bfgs``.)

Every step here works on one ``theta`` shared by a batch of queries; ``lift`` makes the
per-query version (one ``theta`` per query) with ``bayesrank.parallel.map_queries``.
"""

from __future__ import annotations

from functools import partial

import jax
import jax.numpy as jnp
import optax

from ..compiler import jit
from ..parallel import covariances, map_queries
from .config import Config, Structural, Traced, combine, finite_or_inf, log_hyperprior
from .objectives import bucket_posteriors, expected_log_prior
from .results import Carry, info

OPTIMIZERS = ("lbfgs", "adam", "bfgs")


def check_optimizer(optimizer, method: str) -> None:
    """``ValueError`` unless ``optimizer`` is a name this method takes or an optax transform."""
    if isinstance(optimizer, optax.GradientTransformation):
        return
    if optimizer in ("lbfgs", "adam") or (optimizer == "bfgs" and method == "evidence"):
        return
    raise ValueError(
        f"optimizer must be 'lbfgs', 'adam', (method='evidence') 'bfgs', or an optax "
        f"GradientTransformation, got {optimizer!r}"
    )


def make_optimizer(cfg: Config, settings: Traced) -> optax.GradientTransformation:
    """The optax transformation of ``cfg.optimizer`` (Adam's step size is traced)."""
    if isinstance(cfg.optimizer, Structural):  # a user's optax transformation
        return cfg.optimizer.transformation
    if cfg.optimizer == "lbfgs":
        return optax.lbfgs()
    return optax.adam(settings.learning_rate)


def check_transformation(transformation, free, per_query: bool) -> None:
    """``ValueError`` unless a user's optax ``transformation`` steps the fit's free values:
    ``init(params)`` and ``update(grads, state, params)`` run (traced abstractly, nothing
    compiled) and the updates have the params' structure and shapes. ``free``: the
    free leaves (a leading query axis ``per_query``)."""
    lead = 1 if per_query else 0
    params = [jax.ShapeDtypeStruct(jnp.shape(x)[lead:], jnp.result_type(x)) for x in free]
    fix = (
        "give an optax GradientTransformation whose update takes (updates, state, params) "
        "(L-BFGS, which needs the objective, is Optax('lbfgs'))"
    )
    try:
        state = jax.eval_shape(transformation.init, params)
        updates, _ = jax.eval_shape(transformation.update, params, state, params)
    except Exception as error:  # the user's code: whatever it raises, name it
        raise ValueError(
            f"optimizer: the optax transformation {transformation!r} cannot step the fit's "
            f"hyperparameters (init(params) / update(grads, state, params) raised "
            f"{type(error).__name__}: {error}); {fix}"
        ) from None
    leaves, tree = jax.tree_util.tree_flatten(updates)
    if tree != jax.tree_util.tree_structure(params) or any(
        u.shape != p.shape for u, p in zip(leaves, params, strict=True)
    ):
        raise ValueError(
            f"optimizer: the optax transformation {transformation!r} returned updates of "
            f"shapes {jax.tree_util.tree_map(jnp.shape, updates)} for parameters of shapes "
            f"{[p.shape for p in params]}; {fix}"
        )


def _uses_line_search(cfg: Config) -> bool:
    return cfg.optimizer == "lbfgs"


def minimize(fn, free, cfg: Config, settings: Traced):
    """``cfg.m_steps`` optimiser steps on ``fn(free)`` (a pure function); returns ``free``."""
    opt = make_optimizer(cfg, settings)
    line_search = _uses_line_search(cfg)
    value_and_grad = optax.value_and_grad_from_state(fn) if line_search else None

    def body(_, carry):
        params, state = carry
        if line_search:
            value, grad = value_and_grad(params, state=state)
            updates, state = opt.update(grad, state, params, value=value, grad=grad, value_fn=fn)
        else:
            grad = jax.grad(fn)(params)
            updates, state = opt.update(grad, state, params)
        return optax.apply_updates(params, updates), state

    params, _ = jax.lax.fori_loop(0, cfg.m_steps, body, (free, opt.init(free)))
    return params


def e_step(carry: Carry, fixed, data: tuple, cfg: Config, settings: Traced):
    """EP at the current hyperparameters, warm-started from the carried sites (per bucket)."""
    prior = combine(carry.free, fixed, cfg)
    return tuple(
        bucket_posteriors(prior, d, s, cfg, settings.ep_tol)
        for d, s in zip(data, carry.sites, strict=True)
    )


def m_step(carry: Carry, fixed, u0, data: tuple, post, cfg: Config, settings: Traced):
    """Maximise ``Q`` (plus the log hyperprior) for the posterior ``post``; returns the carry,
    ``Q`` before and ``Q`` after."""

    def loss(free):
        prior = combine(free, fixed, cfg)
        q = 0.0
        for d, p in zip(data, post, strict=True):
            K = covariances(prior, d)
            # one query after another: a batched Cholesky and solves beside their gradients
            # can deadlock jaxlib 0.10's CPU thread pool (docs/development/implementation.md)
            q = q + jnp.sum(map_queries(expected_log_prior, K, p.mean, p.cov, method="map"))
        return finite_or_inf(-(q + log_hyperprior(free, u0, cfg, settings)))

    before = -loss(carry.free)
    free = minimize(loss, carry.free, cfg, settings)
    return Carry(free, tuple(p.sites for p in post), carry.opt_state), before, -loss(free)


def evidence_step(carry: Carry, fixed, u0, data: tuple, cfg: Config, settings: Traced):
    """One optimiser step on ``-(log Z_EP + log hyperprior)``; EP warm-started inside."""

    def loss(free):
        prior = combine(free, fixed, cfg)
        tol = settings.ep_step_tol
        post = tuple(
            bucket_posteriors(prior, d, s, cfg, tol, tol)
            for d, s in zip(data, carry.sites, strict=True)
        )
        evidence = sum(jnp.sum(p.log_evidence) for p in post)
        return -(evidence + log_hyperprior(free, u0, cfg, settings)), post

    (value, post), grad = jax.value_and_grad(loss, has_aux=True)(carry.free)
    opt = make_optimizer(cfg, settings)
    if _uses_line_search(cfg):
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
    return Carry(free, tuple(p.sites for p in post), opt_state), post, -value


def _e(carry, fixed, u0, data, cfg, settings):
    del u0
    return e_step(carry, fixed, data, cfg, settings)


def _m(carry, fixed, u0, data, post, cfg, settings):
    new, before, after = m_step(carry, fixed, u0, data, post, cfg, settings)
    return new, info(post, new, fixed, before, after, cfg)


def _evidence(carry, fixed, u0, data, cfg, settings):
    new, post, value = evidence_step(carry, fixed, u0, data, cfg, settings)
    return new, info(post, new, fixed, value, value, cfg)


def _one(tree):
    return jax.tree_util.tree_map(lambda x: x[None], tree)


def _drop(tree):
    return jax.tree_util.tree_map(lambda x: x[0], tree)


def lift(step):
    """The per-query version of ``step(carry, fixed, u0, data, *rest, cfg, settings)``: the
    carry, ``fixed``, ``u0``, the data and ``rest`` gain a leading query axis; each query runs as
    a batch of one; EP's sites and posteriors lose the batch-of-one axis again."""

    def lifted(carry, fixed, u0, data, *rest, cfg, settings):
        def one(c, x, u, d, r):
            c = c._replace(sites=_one(c.sites))
            out = step(c, x, u, _one(d), *_one(r), cfg, settings)
            if isinstance(out, tuple) and isinstance(out[0], Carry):
                new = out[0]._replace(sites=_drop(out[0].sites))
                return (new, *out[1:])
            return _drop(out)  # the E-step's posteriors

        return map_queries(one, carry, fixed, u0, data, rest)

    return lifted


# The compiled steps: shared ``theta`` (one batch) and per query (``lift``); ``cfg`` is
# static, ``settings`` traced.


@partial(jit, static_argnames=("cfg",))
def jit_e_step(carry, fixed, u0, data, *, cfg, settings):
    return _e(carry, fixed, u0, data, cfg, settings)


@partial(jit, static_argnames=("cfg",))
def jit_m_step(carry, fixed, u0, data, post, *, cfg, settings):
    return _m(carry, fixed, u0, data, post, cfg, settings)


@partial(jit, static_argnames=("cfg",))
def jit_evidence_step(carry, fixed, u0, data, *, cfg, settings):
    return _evidence(carry, fixed, u0, data, cfg, settings)


@partial(jit, static_argnames=("cfg",))
def jit_e_step_per_query(carry, fixed, u0, data, *, cfg, settings):
    return lift(_e)(carry, fixed, u0, data, cfg=cfg, settings=settings)


@partial(jit, static_argnames=("cfg",))
def jit_m_step_per_query(carry, fixed, u0, data, post, *, cfg, settings):
    return lift(_m)(carry, fixed, u0, data, post, cfg=cfg, settings=settings)


@partial(jit, static_argnames=("cfg",))
def jit_evidence_step_per_query(carry, fixed, u0, data, *, cfg, settings):
    return lift(_evidence)(carry, fixed, u0, data, cfg=cfg, settings=settings)
