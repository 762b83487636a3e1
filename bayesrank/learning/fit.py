"""``fit_hyperparameters``: the façade over EM-EP, evidence maximisation and their drivers.

Two paths, one set of compiled steps:

- **per query** (``per_query=True``, and every fit of a single problem): one ``theta`` per query;
  every step is mapped over the queries (:func:`bayesrank.parallel.map_queries`) in one compiled
  call, and the host-driven BFGS runs every query's fit in lockstep (:mod:`.bfgs`). No Python
  loop over queries: a per-query fit over a padded batch runs the programs a single fit runs;
- **shared** ``theta`` over many queries: the objective is the sum over queries, evaluated over
  size buckets (one compiled call each) for the host-driven optimisers.

Shapes are bucketed (:func:`bayesrank.data.batch.bucket_size`): entities, pairs and the number of
entities EP is restricted to are padded to sizes that depend on the problems' sizes only, never
on which entities a split's pairs touch, so a new random split of the same query reuses every
compiled program. Floats (tolerances, the learning rate, the hyperprior's scale) are traced.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import optax

from ..data.batch import ProblemBatch, bucket_size, size_buckets, stack_problems
from ..data.problem import PreferenceProblem
from ..inference import ep
from ..kernels.params import unconstrain
from ..kernels.xpgp import XPGP
from ..parallel import prepare_batch
from ..runtime import one_blas_thread
from . import bfgs
from .config import Config, Settings, combine, default_trainable
from .em import (
    check_optimizer,
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
    final_posteriors,
    fisher,
    moments,
    precompile,
    tolerances,
)
from .initialize import initialize, restart_points, subsample, with_weights
from .results import Carry, FitResult, Trace

__all__ = ["fit_hyperparameters"]


def _check_options(o: dict) -> None:
    if o["method"] not in ("em", "evidence"):
        raise ValueError(f"method must be 'em' or 'evidence', got {o['method']!r}")
    for name in ("n_iter", "m_steps", "ep_max_iter", "restarts"):
        value = o[name]
        low = 0 if name == "restarts" else 1
        if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < low:
            raise ValueError(f"{name} must be an integer >= {low}, got {value!r}")
    for name in ("learning_rate", "tol"):
        value = o[name]
        if not (isinstance(value, int | float | np.floating) and np.isfinite(value) and value > 0):
            raise ValueError(f"{name} must be a finite number > 0, got {value!r}")
    for name in ("hyperprior_scale", "ep_tol", "ep_step_tol"):
        value = o[name]
        if value is not None and not (np.isfinite(value) and value > 0):
            raise ValueError(f"{name} must be a finite number > 0 or None, got {value!r}")
    ep.check_settings(o["schedule"], "full", 1.0)
    check_optimizer(o["optimizer"] or ("lbfgs" if o["method"] == "em" else "bfgs"), o["method"])


def _one(batch: ProblemBatch, b: int) -> ProblemBatch:
    return jax.tree_util.tree_map(lambda x: x[b : b + 1], batch)


def _stack(problems) -> ProblemBatch:
    """Problems padded to bucketed sizes (entities and pairs)."""
    n = bucket_size(max(p.n for p in problems))
    m = bucket_size(max(len(p.pairs) for p in problems))
    return stack_problems(problems, n_pad=n, m_pad=m)


def _restriction(batch: ProblemBatch, method: str) -> int | bool:
    """The size EP is restricted to (evidence maximisation), from the sizes alone: a query's
    pairs touch at most ``min(n, 2 m)`` entities, so ``bucket_size`` of the largest such bound
    holds every split's touched entities; ``False`` where that saves nothing."""
    if method != "evidence":
        return False
    n = batch.mask.sum(axis=1)
    m = batch.pair_mask.sum(axis=1)
    size = bucket_size(int(np.max(np.minimum(n, 2 * m))))
    return size if size < batch.mask.shape[1] else False


def _layout(problems, method, optimizer, per_query, bucket):
    """``(batch, groups, restrict, per_query)``: the padded batch; size buckets of a shared fit
    driven from the host (``None`` otherwise); EP's restriction; and whether each query gets its
    own ``theta`` (``per_query``, or a single query)."""
    batch = problems if isinstance(problems, ProblemBatch) else _stack(problems)
    per_query = per_query or batch.pairs.shape[0] == 1
    groups = None
    host_driven = optimizer in (None, "adam", "bfgs")
    shared_buckets = not per_query and method == "evidence" and host_driven
    if shared_buckets and bucket is not None and not isinstance(problems, ProblemBatch):
        groups = size_buckets(problems, bucket, touched=True)
    restrict = False if groups is not None else _restriction(batch, method)
    return batch, groups, restrict, per_query


def _leaves(prior, trainable, dtype):
    leaves, treedef = jax.tree_util.tree_flatten(unconstrain(prior))
    flags = tuple(bool(f) for f in jax.tree_util.tree_leaves(trainable))
    if len(flags) != len(leaves):
        raise ValueError("trainable must have the structure of the prior")
    leaves = [np.asarray(x, dtype) for x in leaves]
    free = [x for x, f in zip(leaves, flags, strict=True) if f]
    fixed = [x for x, f in zip(leaves, flags, strict=True) if not f]
    return free, fixed, treedef, flags


def _starts(prior, batch, init, per_query):
    """The starting prior of the fit (shared) or of each query (its median heuristic)."""
    if not init:
        return with_weights(prior)
    if not per_query:
        return initialize(prior, batch)
    return [initialize(prior, _one(batch, b)) for b in range(batch.pairs.shape[0])]


def _bucket_sites(sites, data, groups, dtype) -> tuple:
    """Starting sites per bucket, from ``sites = (tau, nu): (2, B, m)`` in the batch's order
    (a warm start), or zero (the prior) when ``None``."""
    if sites is None:
        return tuple(
            ep.Sites(np.zeros(d.pairs.shape[:2], dtype), np.zeros(d.pairs.shape[:2], dtype))
            for d in data
        )
    rows = [slice(None)] if groups is None else [idx for idx, *_ in groups]
    return tuple(
        ep.Sites(*(np.asarray(s[r, : d.pairs.shape[1]], dtype) for s in sites))
        for r, d in zip(rows, data, strict=True)
    )


def _gather_sites(sites, groups, shape) -> tuple[np.ndarray, np.ndarray]:
    """Per-bucket sites back into host arrays ``(tau, nu)`` of ``shape = (B, m)`` in the
    batch's order (zero-padded)."""
    if groups is None:
        return np.asarray(sites[0].tau), np.asarray(sites[0].nu)
    dtype = sites[0].tau.dtype
    tau, nu = np.zeros(shape, dtype), np.zeros(shape, dtype)
    for (idx, *_), s in zip(groups, sites, strict=True):
        mb = s.tau.shape[1]
        tau[idx, :mb], nu[idx, :mb] = np.asarray(s.tau), np.asarray(s.nu)
    return tau, nu


def _merge(posts, groups, m: int) -> ep.EPPosterior:
    """Per-bucket posteriors' sites and diagnostics back into one batch in the problems' order,
    sites padded to ``m``; ``mean`` and ``cov`` are left ``None`` (every entity's moments come
    from the merged sites)."""
    B = sum(len(idx) for idx, *_ in groups)
    tau, nu = _gather_sites(tuple(p.sites for p in posts), groups, (B, m))
    names = [f for f in ep.EPPosterior._fields if f not in ("mean", "cov", "sites")]
    rest = {f: np.zeros(B, getattr(posts[0], f).dtype) for f in names}
    for (idx, *_), p in zip(groups, posts, strict=True):
        for f in names:
            rest[f][idx] = np.asarray(getattr(p, f))
    return ep.EPPosterior(mean=None, cov=None, sites=ep.Sites(tau, nu), **rest)


def _fit(
    prior,
    batch,
    groups,
    restrict,
    per_query,
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
):
    dtype = jnp.result_type(float)
    start = _starts(prior, batch, init, per_query)
    first = start[0] if per_query and init else start
    if groups is None:
        data = (prepare_batch(first, batch, restrict),)
    else:  # buckets by touched size: each restricted to its size
        data = tuple(prepare_batch(first, b, size) for _, b, size in groups)
        restrict = True
    trainable = default_trainable(first) if trainable is None else trainable
    if per_query and init:
        parts = [_leaves(p, trainable, dtype) for p in start]
        free = [np.stack(v) for v in zip(*(p[0] for p in parts), strict=True)]
        fixed = [np.stack(v) for v in zip(*(p[1] for p in parts), strict=True)]
        treedef, flags = parts[0][2], parts[0][3]
    else:
        free, fixed, treedef, flags = _leaves(first, trainable, dtype)
        if per_query:  # every query from the same values
            B = batch.pairs.shape[0]
            free = [np.broadcast_to(x, (B, *x.shape)).copy() for x in free]
            fixed = [np.broadcast_to(x, (B, *x.shape)).copy() for x in fixed]
    final_tol = ep.default_tol(dtype) if ep_tol is None else ep_tol
    step_tol = final_tol if ep_step_tol is None else max(ep_step_tol, final_tol)
    cfg = Config(
        treedef,
        flags,
        method,
        optimizer or ("lbfgs" if method == "em" else "bfgs"),
        int(m_steps),
        int(ep_max_iter),
        schedule,
        hyperprior_scale is not None,
        per_query,
    )
    settings = Settings(
        *(
            np.asarray(v, dtype)
            for v in (learning_rate, hyperprior_scale or 1.0, final_tol, step_tol)
        )
    )
    centre = None  # the hyperprior's centre: each start's own values, or those of ``center``
    if center is not None:
        centre = _leaves(center, trainable, dtype)[0]
        if per_query:
            B = batch.pairs.shape[0]
            centre = [np.broadcast_to(x, (B, *x.shape)).copy() for x in centre]
    sites = _bucket_sites(sites, data, groups, dtype)
    best = None
    for point in [free, *restart_points(free, restarts, key, per_query)]:
        u0 = point if centre is None else centre
        result = _drive(point, fixed, u0, data, sites, cfg, settings, n_iter, tol, progress)
        score = np.asarray(result[1].objective)[..., -1]
        if best is None:
            best = (score, result)
        elif per_query:  # the best start of each query
            better = score > best[0]
            best = (np.where(better, score, best[0]), _choose(better, result, best[1]))
        elif score > best[0]:
            best = (score, result)
    _, (carry, trace, converged) = best
    if not final:  # the fitted prior and the steps' sites (B, m) in the batch's order
        return combine(carry.free, fixed, cfg), _gather_sites(
            carry.sites, groups, batch.pairs.shape[:2]
        )
    posteriors = final_posteriors(carry.free, fixed, data, carry.sites, cfg, settings, per_query)
    posterior = (
        posteriors[0] if groups is None else _merge(posteriors, groups, batch.pairs.shape[1])
    )
    if restrict is not False:  # every entity's moments, from the sites (no EP sweep)
        whole = prepare_batch(first, batch)
        mean, cov = moments(carry.free, fixed, whole, posterior.sites, cfg, per_query)
        posterior = posterior._replace(mean=mean, cov=cov)
    fitted = combine(carry.free, fixed, cfg)
    return jax.block_until_ready(FitResult(fitted, jax.device_put(posterior), trace, converged))


def _choose(better, new, old):
    """Per query, the restart ``new`` where ``better``, else ``old`` (host arrays)."""

    def pick(a, b):
        a, b = np.asarray(a), np.asarray(b)
        mask = better.reshape(better.shape + (1,) * (a.ndim - 1))
        return np.where(mask, a, b)

    return jax.tree_util.tree_map(pick, new, old)


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


def _drive(free, fixed, u0, data, sites, cfg, settings, n_iter, tol, progress):
    """``(carry, trace, converged)`` of ``n_iter`` iterations from ``free`` (host-driven)."""
    if cfg.optimizer == "bfgs":
        return _drive_bfgs(free, fixed, u0, data, sites, cfg, settings, n_iter, tol, progress)
    per_query = cfg.single
    opt_state = None
    if cfg.method == "evidence":
        init = make_optimizer(cfg, settings).init
        opt_state = jax.vmap(init)(free) if per_query else init(free)
    carry = Carry(free, sites, opt_state)
    iterations = _iterations(n_iter, cfg, progress)
    infos = []
    for _ in iterations:
        carry, trace = _step(carry, fixed, u0, data, cfg, settings)
        infos.append(jax.device_get(trace))
        if progress:
            _report(iterations, trace.log_evidence, len(infos))
    axis = 1 if per_query else 0  # (B, T, ...) per query
    trace = jax.tree_util.tree_map(lambda *a: np.stack(a, axis=axis), *infos)
    change = np.abs(trace.objective[..., -1] - trace.objective[..., -2]) if n_iter > 1 else None
    converged = np.zeros(np.shape(trace.objective)[:-1], bool) if change is None else change < tol
    return carry, jax.device_put(trace), converged


def _step(carry, fixed, u0, data, cfg: Config, settings: Settings):
    """One EM iteration (a jitted E-step, then a jitted M-step) or one optax evidence step."""
    per_query = cfg.single
    if cfg.method == "em":
        e_step = jit_e_step_per_query if per_query else jit_e_step
        m_step = jit_m_step_per_query if per_query else jit_m_step
        post = e_step(carry, fixed, u0, data, cfg=cfg, settings=settings)
        return m_step(carry, fixed, u0, data, post, cfg=cfg, settings=settings)
    if per_query:
        return jit_evidence_step_per_query(carry, fixed, u0, data, cfg=cfg, settings=settings)
    if len(data) > 1 and not isinstance(cfg.optimizer, optax.GradientTransformation):
        return bucketed_evidence_step(carry, fixed, u0, data, cfg, settings)
    return jit_evidence_step(carry, fixed, u0, data, cfg=cfg, settings=settings)


def _drive_bfgs(free, fixed, u0, data, sites, cfg, settings, n_iter, tol, progress):
    """BFGS (:mod:`.bfgs`) on every query's ``theta`` (per query) or on the shared one."""
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
    )
    trace = _bfgs_trace(result.rows, shapes, fixed, cfg, n_iter, dtype)
    carry = Carry(unflat(result.x), result.sites, None)
    converged = result.converged if per_query else bool(result.converged[0])
    return carry, trace, converged


def _bfgs_trace(rows, shapes, fixed, cfg, n_iter, dtype) -> Trace:
    """The per-iteration rows of each fit as a :class:`Trace`: ``(T, ...)`` for a shared fit,
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
    params = jax.device_get(_jit_combine(free, fixed, cfg=cfg))
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


_jit_combine = jax.jit(combine, static_argnames=("cfg",))


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
        optimizer: an optax ``GradientTransformation``, or ``"lbfgs"`` or ``"adam"``, or for
            evidence maximisation ``"bfgs"`` (defaults: L-BFGS for EM's M-steps; BFGS for
            evidence maximisation: quasi-Newton steps from the Fisher information with a
            backtracking line search, driven from the host, a few warm-started EP runs per
            step; :mod:`bayesrank.learning.bfgs`).
        learning_rate: Adam's step size.
        hyperprior_scale: sd of the normal prior on each unconstrained hyperparameter, centred on
            its initial value (MAP-II); ``None`` for plain maximum likelihood.
        trainable: pytree of bools like ``prior`` (default :func:`default_trainable`).
        init: apply :func:`initialize` (median heuristic) first.
        restarts: extra random starts (unconstrained values perturbed by N(0, 1)), needs ``key``;
            the start with the highest final objective is returned.
        per_query: one ``theta`` per query instead of one shared ``theta``: every step is
            mapped over the queries in one compiled call (:func:`bayesrank.parallel.map_queries`),
            BFGS runs every query's fit in lockstep; a trace that stopped early repeats its
            last entry up to the longest one. A single problem is fitted this way.
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
        :class:`FitResult` with the fitted prior, the EP posteriors at it (they predict:
        ``posteriors.predict_pairs``), the :class:`Trace` and the ``converged`` flag (per-query
        fits: every leaf gains a leading query axis). The prior passed in is not modified.
    """
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
    _check_options(options)
    if not isinstance(prior, XPGP):
        raise ValueError(f"prior must be an XPGP prior, got {type(prior).__name__}")
    if isinstance(problems, PreferenceProblem):
        problems = [problems]
    if not isinstance(problems, ProblemBatch):
        problems = list(problems)
        if not problems:
            raise ValueError("problems is empty: give at least one PreferenceProblem")
        for k, p in enumerate(problems):
            if not isinstance(p, PreferenceProblem):
                raise ValueError(
                    f"problems[{k}] must be a PreferenceProblem, got {type(p).__name__}"
                )
    with one_blas_thread():  # bayesrank.runtime: XLA's and BLAS's thread pools contend
        batch, groups, restrict, single = _layout(problems, method, optimizer, per_query, bucket)
        if coarse is None:
            result = _fit(prior, batch, groups, restrict, single, **options)
            return result if per_query or not single else _unbatched(result)
        if method != "evidence" or per_query or isinstance(problems, ProblemBatch):
            raise ValueError("coarse needs method='evidence', a shared theta and problems")
        if isinstance(coarse, bool) or not isinstance(coarse, int | np.integer) or coarse < 2:
            raise ValueError(f"coarse must be at least 2 entities, got {coarse!r}")
        center = _starts(prior, batch, init, False) if not single else _center(prior, batch, init)
        subsets, origins = subsample(problems, coarse)
        if not subsets:  # no query keeps a pair
            result = _fit(prior, batch, groups, restrict, single, **options)
            return _unbatched(result) if single else result
        first = {**options, "init": False, "restarts": 0, "tol": 10 * tol, "progress": False}
        layout = _layout(subsets, method, optimizer, per_query, bucket)
        start, (tau, nu) = _fit(center, *layout, final=False, **first)
        # the full fit's EP starts from the coarse fit's sites on the pairs they share
        sites = np.zeros((2, *batch.pair_mask.shape), tau.dtype)
        for k, (b, inside) in enumerate(origins):
            sites[:, b, inside] = tau[k, : len(inside)], nu[k, : len(inside)]
        options["init"] = False
        if single:
            start = jax.tree_util.tree_map(lambda x: np.asarray(x)[0], start)
        result = _fit(start, batch, groups, restrict, single, center=center, sites=sites, **options)
        return _unbatched(result) if single else result


def _unbatched(result: FitResult) -> FitResult:
    """A single problem's fit as a shared one: the prior, trace and flag without the query
    axis (the posteriors keep it, as every fit's do)."""

    def drop(tree):  # on the host: an eager slice compiles a program per shape
        return jax.device_put(jax.tree_util.tree_map(lambda x: np.asarray(x)[0], tree))

    return result._replace(
        prior=drop(result.prior), trace=drop(result.trace), converged=bool(result.converged[0])
    )


def _center(prior, batch, init):
    """The hyperprior's centre of a single problem's coarse fit: its own starting values."""
    return initialize(prior, batch) if init else with_weights(prior)
