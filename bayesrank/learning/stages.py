"""A fit of one layout in three stages: ``_prepare`` (the starting values, the free/fixed
split of the unconstrained leaves, the static ``Config`` and traced ``Traced``), ``_run``
(the optimiser from every start, the best end kept) and ``_finish`` (the final posteriors, or a
first fit's prior and sites). ``fit_layout`` chains them; the façade (``fit``) chooses the
layout and the first fits of the coarse and Laplace starts. The numerical work is the
drivers' (``drive``), unchanged by the stages around it.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax

from ..data.batch import ProblemBatch
from ..inference import ep
from ..kernels.xpgp import XPGP
from ..parallel import prepare_batch
from .config import Config, Structural, Traced, combine_host, resolve_trainable, split_leaves
from .design import global_starts, worth_running
from .diagnostics import NonFiniteStartError, flat_values, warn_multimodal
from .drive import drive
from .em import check_transformation
from .evidence import final_posteriors, moments
from .guard import finite_rows, pick, reject_last
from .hyperpriors import feature_ranges, log_prior_fn
from .initialize import restart_points, starting_priors
from .layout import bucket_sites, gather_sites, merge
from .options import Options
from .results import FitResult, choose_per_query

__all__ = ["fit_layout"]


def fit_layout(
    prior, batch, groups, restrict, per_query, o, *, center=None, sites=None, final=True
):
    """One fit of ``batch`` from ``prior`` (see ``_prepare``): prepared, run from every start,
    finished (``final``: a ``FitResult``; else the fitted prior and the steps' sites)."""
    p = _prepare(prior, batch, groups, restrict, per_query, o, center, sites)
    return _finish(p, *_run(p, o), final)


class _Prepared(NamedTuple):
    """What a fit starts from (``_prepare``)."""

    batch: ProblemBatch
    groups: Any  # size buckets of a shared fit, or None
    restrict: Any  # EP's restriction to touched entities (False: none)
    per_query: bool
    start: Any  # the starting prior, or one per query (per-query fits with ``init``)
    first: XPGP  # the (first query's) starting prior: the structure and the dtype's values
    data: tuple  # the prepared batch of each bucket
    free: list  # the starting values of the trainable unconstrained leaves
    fixed: list  # the others
    cfg: Config
    settings: Traced
    sites: tuple  # starting sites per bucket
    centre: list | None  # the hyperprior's centre where it is not each start itself
    ranges: Any  # each feature's range, for the relative (Gamma) hyperpriors


def check_margin_learning(prior, trainable, o: Options) -> None:
    """The tie margin and the ordinal thresholds are likelihood parameters: only the EP
    evidence carries their gradients. ``ValueError`` where a trainable one would otherwise stay
    where it started (EM's M-step maximises the expected log prior, in which they do not appear;
    the Laplace evidence is differentiated in ``K`` only)."""
    if not isinstance(trainable, XPGP) or not (o.method == "em" or o.engine != o.ep):
        return
    for name in ("margin", "threshold", "threshold_gaps"):
        if getattr(prior, name) is not None and np.any(getattr(trainable, name)):
            raise ValueError(
                f"XPGP.{name}, a likelihood parameter, is learned by method='evidence' with "
                f"engine EP only, not method={o.method!r} with engine={o.engine!r}: "
                "use those, or hold it fixed with trainable="
                f"dataclasses.replace(default_trainable(prior), {name}=False)"
            )


def _prepare(prior, batch, groups, restrict, per_query, o: Options, center, sites) -> _Prepared:
    """The starting values (``o.init``: the median heuristic), the batch prepared per bucket,
    the free/fixed split of the unconstrained leaves by ``o.trainable``, the static ``Config``
    and traced ``Traced``, the starting sites (``sites``: ``(2, B, m)`` or ``None``) and the
    hyperprior's centre (``center``: a prior, or ``None``: each start's own values)."""
    dtype = jnp.result_type(float)
    start = starting_priors(prior, batch, o.init, per_query)
    first = start[0] if per_query and o.init else start
    if groups is None:
        data = (prepare_batch(first, batch, restrict),)
    else:  # buckets by touched size: each restricted to its size
        data = tuple(prepare_batch(first, b, size) for _, b, size in groups)
        restrict = True
    trainable = resolve_trainable(first, o.trainable)
    check_margin_learning(first, trainable, o)
    if per_query and o.init:
        parts = [split_leaves(p, trainable, dtype) for p in start]
        free = [np.stack(v) for v in zip(*(p[0] for p in parts), strict=True)]
        fixed = [np.stack(v) for v in zip(*(p[1] for p in parts), strict=True)]
        treedef, flags = parts[0][2], parts[0][3]
    else:
        free, fixed, treedef, flags = split_leaves(first, trainable, dtype)
        if per_query:  # every query from the same values
            free, fixed = _per_query(free, batch), _per_query(fixed, batch)
    if not any(flags):
        raise ValueError(
            "trainable holds every hyperparameter fixed: there is nothing to learn (the "
            "posterior at the prior's values is XPGPModel(prior).fit(problem))"
        )
    if isinstance(o.optimizer, optax.GradientTransformation):  # before anything is compiled
        check_transformation(o.optimizer, free, per_query)
    final_tol = ep.default_tol(dtype) if o.ep.tol is None else o.ep.tol
    step_tol = final_tol if o.ep.step_tol is None else max(o.ep.step_tol, final_tol)
    optimizer = o.optimizer
    cfg = Config(
        treedef,
        flags,
        o.method,
        Structural(optimizer) if isinstance(optimizer, optax.GradientTransformation) else optimizer,
        int(o.m_steps),
        int(o.ep.max_iter),
        o.ep.schedule,
        o.hyperprior_scale is not None,
        per_query,
        None if o.engine == o.ep else o.engine,
    )
    traced = (o.learning_rate, o.hyperprior_scale or 1.0, final_tol, step_tol)
    settings = Traced(*(np.asarray(v, dtype) for v in traced))
    centre = None
    if center is not None:
        centre = split_leaves(center, trainable, dtype)[0]
        centre = _per_query(centre, batch) if per_query else centre
    ranges = feature_ranges(batch, per_query) if o.hyperprior and batch.X is not None else None
    sites = bucket_sites(sites, data, groups, dtype)
    return _Prepared(
        batch,
        groups,
        restrict,
        per_query,
        start,
        first,
        data,
        free,
        fixed,
        cfg,
        settings,
        sites,
        centre,
        ranges,
    )


def _per_query(leaves, batch):
    """Shared leaves repeated along a leading query axis ``(B, ...)``."""
    B = batch.pairs.shape[0]
    return [np.broadcast_to(x, (B, *x.shape)).copy() for x in leaves]


def _log_prior(p: _Prepared, o: Options, u0):
    """The named hyperpriors, the normal one on the rest centred on ``u0``."""
    center = flat_values(u0, p.per_query)
    return log_prior_fn(p.first, p.cfg.flags, o.hyperprior, center, o.hyperprior_scale, p.ranges)


def _run(p: _Prepared, o: Options):
    """The optimiser (``drive``) from every start: the first (or the design's best distinct
    points), then ``o.restarts`` random ones; the best end kept, per query for per-query fits.
    Returns ``(score, (carry, trace, converged, nonfinite, fallback), design)``: the best
    end's objective, its result (``drive``'s), and the design's ``Design`` (``None`` without
    one)."""
    u_start = p.free if p.centre is None else p.centre
    points, design = [p.free], None
    if o.design is not None:
        priors = (
            p.start
            if isinstance(p.start, list)
            else [p.first] * len(p.free[0] if p.per_query else [0])
        )
        points, design = global_starts(
            o.design,
            priors,
            p.batch,
            p.free,
            p.fixed,
            p.data,
            p.sites,
            p.cfg,
            p.settings,
            _log_prior(p, o, u_start),
        )
    n_design = len(points)
    points += restart_points(p.free, o.restarts, o.key, p.per_query)
    best, ends = None, []
    for k, point in enumerate(points):
        worth = True  # per query: this start may replace the best (a skipped one may not)
        if 0 < k < n_design:
            worth = worth_running(design, k, best[0])
            if not np.any(worth):
                continue
        # the design's starts keep the hyperprior on the initial values; a random restart is
        # centred on itself
        u0 = (u_start if k < n_design else point) if p.centre is None else p.centre
        try:
            result = drive(
                point,
                p.fixed,
                u0,
                p.data,
                p.sites,
                p.cfg,
                p.settings,
                o.n_iter,
                o.tol,
                o.progress,
                k == 0 and design is None,  # the design compiled the programs already
                None if o.hyperprior is None else _log_prior(p, o, u0),  # None: BFGS's own
            )
        except NonFiniteStartError as error:  # name the values: e.g. a median heuristic
            hint = (  # beyond float32's range
                ""
                if error.in_hyperprior
                else "; features on a scale far from 1 put the median heuristic there: "
                "standardise X, or enable float64"
            )
            raise NonFiniteStartError(
                f"{error}. The start was {p.first!r} ({np.dtype(jnp.result_type(float)).name})"
                f"{hint}",
                in_hyperprior=error.in_hyperprior,
            ) from None
        score = np.asarray(result[1].objective)[..., -1]
        ends.append((score, flat_values(result[0].free, p.per_query)))
        if best is None:
            best = (score, result)
        elif p.per_query:  # the best start of each query
            better = (score > best[0]) & worth  # each query exactly as its fit alone
            best = (np.where(better, score, best[0]), choose_per_query(better, result, best[1]))
        elif score > best[0]:
            best = (score, result)
    warn_multimodal(ends)
    return (*best, design)


def _finish(p: _Prepared, score, result, design, final: bool):
    """``final``: the ``FitResult``, with the final posteriors at the fitted prior (every
    entity's moments from the sites where EP ran on the touched ones) and the design's gap;
    else the fitted prior and the steps' sites ``(B, m)`` in the batch's order."""
    carry, trace, converged, nonfinite, fallback = result
    dtype = jnp.result_type(float)
    if not final:
        prior = combine_host(carry.free, p.fixed, p.cfg, dtype)
        return prior, gather_sites(carry.sites, p.groups, p.batch.pairs.shape[:2])
    gap = None
    if design is not None:
        gap = np.asarray(score) - np.max(design.objective, axis=-1)
        gap = gap if p.per_query else float(np.reshape(gap, -1)[0])
    posteriors = final_posteriors(
        carry.free, p.fixed, p.data, carry.sites, p.cfg, p.settings, p.per_query
    )
    if fallback is not None:  # the optax path: its last step is checked here (``guard``)
        evidence = sum(  # per query, or the sum over the buckets' queries
            np.asarray(post.log_evidence) if p.per_query else np.sum(post.log_evidence)
            for post in posteriors
        )
        bad = ~(np.isfinite(evidence) & finite_rows(carry.free, p.per_query))
        if bad.any():
            carry = pick(bad, fallback, carry)
            params = combine_host(fallback.free, p.fixed, p.cfg, dtype)
            trace = reject_last(trace, bad, params, p.cfg.method == "em", p.per_query)
            converged, nonfinite = converged & ~bad, nonfinite | bad
            posteriors = final_posteriors(
                carry.free, p.fixed, p.data, carry.sites, p.cfg, p.settings, p.per_query
            )
    if p.groups is None:
        posterior = posteriors[0]
    else:
        posterior = merge(posteriors, p.groups, p.batch.pairs.shape[1])
    if p.restrict is not False:  # every entity's moments, from the sites (no EP sweep)
        whole = prepare_batch(p.first, p.batch)
        mean, cov = moments(carry.free, p.fixed, whole, posterior.sites, p.cfg, p.per_query)
        posterior = posterior._replace(mean=mean, cov=cov)
    fitted = jax.device_put(combine_host(carry.free, p.fixed, p.cfg, dtype))
    if not p.per_query:
        converged, nonfinite = bool(converged), bool(nonfinite)
    result = FitResult(
        fitted, jax.device_put(posterior), jax.device_put(trace), converged, design, gap, nonfinite
    )
    return jax.block_until_ready(result)
