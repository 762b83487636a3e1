"""The host-side drivers of a fit: EM and optax steps iterated ``n_iter`` times (each step
checked by ``guard``: a non-finite one is rejected), and BFGS (for a shared ``theta`` or every
query's in lockstep), each calling compiled steps and building the ``Trace``."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from . import bfgs
from .config import Config, Structural, Traced, combine_host
from .diagnostics import flat_values
from .em import (
    jit_e_step,
    jit_e_step_per_query,
    jit_evidence_step,
    jit_evidence_step_per_query,
    jit_m_step,
    jit_m_step_per_query,
    make_optimizer,
)
from .evidence import (
    bucketed_evidence_step,
    evaluate,
    evaluate_per_query,
    fisher,
    precompile,
    tolerances,
)
from .guard import Guard
from .results import Carry, Trace


def _iterations(n_iter, cfg, progress):
    """``range(n_iter)``, or a tqdm bar over it when ``progress`` (and tqdm) is there."""
    if progress:
        try:
            from tqdm.auto import trange

            return trange(n_iter, desc=f"fit ({cfg.method}, {cfg.optimizer})")
        except ImportError:  # tqdm is optional
            pass
    return range(n_iter)


def _report(iterations, evidence, k):
    evidence = float(np.sum(evidence))
    if hasattr(iterations, "set_postfix"):
        iterations.set_postfix(log_evidence=evidence)
    else:
        print(f"iteration {k}: log evidence {evidence:.4f}")


def drive(
    free, fixed, u0, data, sites, cfg, settings, n_iter, tol, progress, compile=True, log_prior=None
):
    """``(carry, trace, converged, nonfinite, fallback)`` of ``n_iter`` iterations from
    ``free`` (host-driven); ``compile``: BFGS compiles its programs first, in parallel
    (``evidence.precompile``); ``log_prior``: BFGS's hyperprior in place of the normal one
    (``hyperpriors``).

    ``nonfinite``: per fit, the optax path rejected a non-finite step and stopped (``guard``;
    always False for BFGS); ``fallback``: the optax path's carry before its last step, where
    the final posteriors reject that step (``guard.reject_last``), ``None`` for BFGS."""
    if cfg.optimizer == "bfgs":
        return _drive_bfgs(
            free, fixed, u0, data, sites, cfg, settings, n_iter, tol, progress, compile, log_prior
        )
    per_query = cfg.single
    opt_state = None
    if cfg.method == "evidence":
        init = make_optimizer(cfg, settings).init
        opt_state = jax.vmap(init)(free) if per_query else init(free)
    carry = Carry(free, sites, opt_state)
    iterations = _iterations(n_iter, cfg, progress)
    B = len(jax.tree_util.tree_leaves(sites)[0]) if per_query else 1  # sites: (B, m) each
    guard = Guard(combine_host(free, fixed, cfg, jnp.result_type(float)), cfg.method, per_query, B)
    for _ in iterations:
        new, trace = _step(carry, fixed, u0, data, cfg, settings)
        carry = guard.accept(carry, new, jax.device_get(trace))
        if progress:
            _report(iterations, trace.log_evidence, len(guard.infos))
        if guard.stopped.all():  # every fit stays at its last finite point
            break
    infos = guard.infos
    axis = 1 if per_query else 0  # (B, T, ...) per query
    trace = jax.tree_util.tree_map(lambda *a: np.stack(a, axis=axis), *infos)
    if len(infos) > 1:
        converged = np.abs(trace.objective[..., -1] - trace.objective[..., -2]) < tol
    else:
        converged = np.zeros(np.shape(trace.objective)[:-1], bool)
    converged = converged & ~guard.stopped
    return carry, jax.device_put(trace), converged, guard.stopped.copy(), guard.previous


def _step(carry, fixed, u0, data, cfg: Config, settings: Traced):
    """One EM iteration (a jitted E-step, then a jitted M-step) or one optax evidence step."""
    per_query = cfg.single
    if cfg.method == "em":
        e_step = jit_e_step_per_query if per_query else jit_e_step
        m_step = jit_m_step_per_query if per_query else jit_m_step
        post = e_step(carry, fixed, u0, data, cfg=cfg, settings=settings)
        return m_step(carry, fixed, u0, data, post, cfg=cfg, settings=settings)
    if per_query:
        return jit_evidence_step_per_query(carry, fixed, u0, data, cfg=cfg, settings=settings)
    if len(data) > 1 and not isinstance(cfg.optimizer, Structural):
        return bucketed_evidence_step(carry, fixed, u0, data, cfg, settings)
    return jit_evidence_step(carry, fixed, u0, data, cfg=cfg, settings=settings)


def design_values(points, fixed, data, sites, cfg, settings, log_prior) -> np.ndarray:
    """The (MAP) objective ``log Z_EP + log p(u)`` at each design point: ``(S, B)`` (``B = 1``
    for a shared ``theta``), ``-inf`` where it is not finite. ``log_prior``: the fit's
    hyperprior, ``x: (B, P) -> (log p: (B,), gradient)`` (``hyperpriors.log_prior_fn``).

    ``points``: ``S`` lists of free leaves (like ``free``); each is one call of the compiled
    evidence program that BFGS uses (each bucket's, for a shared ``theta``), from ``sites``
    (the prior's: cold EP), at the steps' tolerance. The programs are compiled first, in
    parallel (``evidence.precompile``).
    """
    per_query = cfg.single
    dtype = points[0][0].dtype
    step_tol = tolerances(settings.ep_step_tol, dtype, relative=True)
    precompile(points[0], fixed, data, sites, step_tol, cfg, per_query)
    rows = []
    for free in points:
        if per_query:
            value, _, (post,) = evaluate_per_query(
                free, fixed, data, sites, step_tol, cfg, gradient=False
            )
            ok = np.asarray(post.converged)
        else:
            value, _, posts = evaluate(free, fixed, data, sites, step_tol, cfg, gradient=False)
            value = np.array([value])
            ok = np.array([all(bool(np.all(p.converged)) for p in posts)])
        # an unconverged EP's evidence is no evidence (it can even be positive)
        value = np.where(ok, value, np.inf)
        prior_term = log_prior(flat_values(free, per_query))[0]
        objective = -np.asarray(value, np.float64) + prior_term
        rows.append(np.where(np.isfinite(objective), objective, -np.inf))
    return np.stack(rows)


def _drive_bfgs(
    free, fixed, u0, data, sites, cfg, settings, n_iter, tol, progress, compile, log_prior
):
    """BFGS (``bfgs``) on every query's ``theta`` (per query) or on the shared one."""
    per_query = cfg.single
    dtype = free[0].dtype
    lead = 1 if per_query else 0
    shapes = [x.shape[lead:] for x in free]
    sizes = [int(np.prod(s)) for s in shapes]
    splits = np.cumsum(sizes)[:-1]

    def flat(leaves) -> np.ndarray:  # (B, p) on the host; B = 1 for a shared theta
        rows = len(leaves[0]) if per_query else 1
        return np.concatenate([np.reshape(x, (rows, -1)) for x in leaves], axis=1)

    def unflat(x):  # the free leaves of (B, p)
        parts = np.split(np.asarray(x, dtype), splits, axis=1)
        if per_query:
            return [p.reshape(-1, *s) for p, s in zip(parts, shapes, strict=True)]
        return [p[0].reshape(s) for p, s in zip(parts, shapes, strict=True)]

    step_tol = tolerances(settings.ep_step_tol, dtype, relative=True)

    def evaluate_at(x, sites) -> bfgs.Evaluation:
        if per_query:
            value, grad, posts = evaluate_per_query(unflat(x), fixed, data, sites, step_tol, cfg)
            sweeps, ok = np.asarray(posts[0].n_iter), np.asarray(posts[0].converged)
        else:
            value, grad, posts = evaluate(unflat(x), fixed, data, sites, step_tol, cfg)
            value = np.array([value])
            sweeps = np.array([max(int(np.max(p.n_iter)) for p in posts)])
            ok = np.array([all(bool(np.all(p.converged)) for p in posts)])
        sites = tuple(p.sites for p in posts)
        return bfgs.Evaluation(value, flat(grad), sites, sweeps, ok, posts)

    def fisher_at(x, evaluation: bfgs.Evaluation) -> np.ndarray:
        F = fisher(unflat(x), fixed, data, evaluation.posteriors, cfg, per_query)
        return F.reshape(-1, x.shape[1], x.shape[1])

    def select(current, new, accepted):
        if not per_query:
            return new if accepted[0] else current

        def pick(a, b):
            a, b = np.asarray(a), np.asarray(b)
            return np.where(accepted.reshape(accepted.shape + (1,) * (a.ndim - 1)), b, a)

        return jax.tree_util.tree_map(pick, current, new)

    if compile:
        precompile(free, fixed, data, sites, step_tol, cfg, per_query)
    iterations = _iterations(n_iter, cfg, progress)
    report = (lambda k, evidence: _report(iterations, evidence, k)) if progress else None
    precision = float(settings.hyperprior_scale) ** -2 if cfg.hyperprior else 0.0
    result = bfgs.minimize(
        evaluate_at,
        fisher_at,
        select,
        flat(free),
        sites,
        flat(u0),
        precision,
        n_iter=n_iter,
        tol=tol,
        report=report,
        log_prior=log_prior,
    )
    trace = _bfgs_trace(result.rows, shapes, fixed, cfg, n_iter, dtype)
    carry = Carry(unflat(result.x), result.sites, None)
    converged = result.converged if per_query else bool(result.converged[0])
    return carry, trace, converged, np.zeros_like(converged), None


def _bfgs_trace(rows, shapes, fixed, cfg, n_iter, dtype) -> Trace:
    """The per-iteration rows of each fit as a ``Trace``: ``(T, ...)`` for a shared fit,
    ``(B, T, ...)`` per query, a fit that stopped early repeating its last (converged) entry.

    The parameters are computed at the fixed length ``n_iter`` (one compiled ``constrain`` per
    configuration, whatever the number of iterations), then cut to the longest fit's length.
    """
    T = max(len(r) for r in rows)
    padded = [r + [r[-1]] * (n_iter - len(r)) for r in rows]
    columns = [np.stack([np.asarray([row[c] for row in r]) for r in padded]) for c in range(6)]
    xs, evidence, before, after, sweeps, converged = columns  # (B, n_iter, ...)
    B, R = xs.shape[0], xs.shape[0] * n_iter
    splits = np.cumsum([int(np.prod(s)) for s in shapes])[:-1]
    parts = np.split(xs.reshape(R, -1).astype(dtype), splits, axis=1)
    free = [p.reshape(R, *s) for p, s in zip(parts, shapes, strict=True)]
    if cfg.single:  # fixed values per query: each repeated for its n_iter rows
        fixed = [np.repeat(np.asarray(x), n_iter, axis=0) for x in fixed]
    else:
        fixed = [np.broadcast_to(np.asarray(x), (R, *np.shape(x))) for x in fixed]
    params = combine_host(free, fixed, cfg, dtype)
    params = jax.tree_util.tree_map(lambda a: a.reshape(B, n_iter, *a.shape[1:])[:, :T], params)
    trace = Trace(
        log_evidence=evidence[:, :T].astype(dtype),
        objective=after[:, :T].astype(dtype),
        objective_before=before[:, :T].astype(dtype),
        params=params,
        ep_iterations=sweeps[:, :T].astype(np.int32),
        ep_converged=converged[:, :T].astype(bool),
    )
    if not cfg.single:
        trace = jax.tree_util.tree_map(lambda a: a[0], trace)
    return jax.device_put(trace)


def design_priors(grid, shapes, fixed, cfg, dtype):
    """The design's points as priors: ``grid: (S, B, P)`` flat free values; leaves
    ``(B, S, ...)`` per query, ``(S, ...)`` for a shared ``theta`` (``B = 1``)."""
    S, B, _ = grid.shape
    rows = np.swapaxes(grid, 0, 1).reshape(B * S, -1)
    parts = np.split(rows, np.cumsum([int(np.prod(s)) for s in shapes])[:-1], axis=1)
    free = [p.reshape(B * S, *s) for p, s in zip(parts, shapes, strict=True)]
    if cfg.single:
        fixed = [np.repeat(np.asarray(x), S, axis=0) for x in fixed]
    else:
        fixed = [np.broadcast_to(np.asarray(x), (B * S, *np.shape(x))) for x in fixed]
    priors = combine_host(free, fixed, cfg, dtype)
    lead = (B, S) if cfg.single else (S,)
    return jax.tree_util.tree_map(lambda a: a.reshape(*lead, *a.shape[1:]), priors)
