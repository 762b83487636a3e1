"""``fit_hyperparameters``: the façade over EM-EP, evidence maximisation and their drivers.

Two paths, one set of compiled steps:

- **per query** (``per_query=True``, and every fit of a single problem): one ``theta`` per query;
  every step is mapped over the queries (``bayesrank.parallel.map_queries``) in one compiled
  call, and the host-driven BFGS runs every query's fit in lockstep (``bfgs``). No Python
  loop over queries: a per-query fit over a padded batch runs the programs a single fit runs;
- **shared** ``theta`` over many queries: the objective is the sum over queries, evaluated over
  size buckets (one compiled call each) for the host-driven optimisers.

Shapes are bucketed (``bayesrank.data.batch.bucket_size``): entities, pairs and the number of
entities EP is restricted to are padded to sizes that depend on the problems' sizes only, never
on which entities a split's pairs touch, so a new random split of the same query reuses every
compiled program. Floats (tolerances, the learning rate, the hyperprior's scale) are traced.

Length: near 500 lines because the façade documents its two dozen options in one place (about
190 lines of docstring); the pieces a fit is made of live in the sibling modules (the design in
``design``, the starts in ``initialize``, the leaves' split in ``config``).
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import optax

from ..data.batch import ProblemBatch
from ..data.checks import check_bool, check_int
from ..data.keys import check_key
from ..data.problem import PreferenceProblem
from ..inference import ep
from ..kernels.xpgp import XPGP
from ..parallel import prepare_batch
from ..runtime import one_blas_thread, warn_if_float32
from .config import (
    Config,
    Settings,
    Structural,
    combine_host,
    default_trainable,
    split_leaves,
)
from .design import GlobalStart, check_design, global_starts, worth_running
from .diagnostics import (
    LearningConvergenceWarning,
    MultimodalEvidenceWarning,
    NonFiniteStartError,
    flat_values,
    warn_multimodal,
    warn_unconverged,
)
from .drive import drive
from .evidence import final_posteriors, moments
from .hyperpriors import check_hyperprior, feature_ranges, log_prior_fn
from .initialize import (
    auto_coarse,
    initialize,
    restart_points,
    starting_priors,
    subsample,
    with_weights,
)
from .layout import bucket_sites, gather_sites, layout, merge, per_query_groups
from .options import check_options
from .results import FitResult, choose_per_query, concatenate, unbatched

__all__ = [
    "GlobalStart",
    "LearningConvergenceWarning",
    "MultimodalEvidenceWarning",
    "fit_hyperparameters",
]


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
    inference,
    design=None,
    hyperprior=None,
):
    dtype = jnp.result_type(float)
    start = starting_priors(prior, batch, init, per_query)
    first = start[0] if per_query and init else start
    if groups is None:
        data = (prepare_batch(first, batch, restrict),)
    else:  # buckets by touched size: each restricted to its size
        data = tuple(prepare_batch(first, b, size) for _, b, size in groups)
        restrict = True
    if trainable is None:
        trainable = default_trainable(first)
    elif isinstance(trainable, XPGP) and trainable.weights is None and first.weights is not None:
        # flags made from a prior without weights (default_trainable(prior)): the fit adds unit
        # weights (with_weights), learned as default_trainable would learn them
        trainable = dataclasses.replace(trainable, weights=True)
    if per_query and init:
        parts = [split_leaves(p, trainable, dtype) for p in start]
        free = [np.stack(v) for v in zip(*(p[0] for p in parts), strict=True)]
        fixed = [np.stack(v) for v in zip(*(p[1] for p in parts), strict=True)]
        treedef, flags = parts[0][2], parts[0][3]
    else:
        free, fixed, treedef, flags = split_leaves(first, trainable, dtype)
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
        Structural(optimizer)
        if isinstance(optimizer, optax.GradientTransformation)
        else optimizer or ("lbfgs" if method == "em" else "bfgs"),
        int(m_steps),
        int(ep_max_iter),
        schedule,
        hyperprior_scale is not None,
        per_query,
        inference,
    )
    settings = Settings(
        *(
            np.asarray(v, dtype)
            for v in (learning_rate, hyperprior_scale or 1.0, final_tol, step_tol)
        )
    )
    centre = None  # the hyperprior's centre: each start's own values, or those of ``center``
    if center is not None:
        centre = split_leaves(center, trainable, dtype)[0]
        if per_query:
            B = batch.pairs.shape[0]
            centre = [np.broadcast_to(x, (B, *x.shape)).copy() for x in centre]
    sites = bucket_sites(sites, data, groups, dtype)
    u_start = free if centre is None else centre
    # each feature's range, for the relative (Gamma) hyperpriors only
    ranges = feature_ranges(batch, per_query) if hyperprior and batch.X is not None else None

    def log_prior(u0):  # the named hyperpriors, the normal one on the rest centred on u0
        center = flat_values(u0, per_query)
        return log_prior_fn(first, cfg.flags, hyperprior, center, hyperprior_scale, ranges)

    points, design_result = [free], None
    if design is not None:
        priors = start if isinstance(start, list) else [first] * len(free[0] if per_query else [0])
        points, design_result = global_starts(
            design,
            priors,
            batch,
            free,
            fixed,
            data,
            sites,
            cfg,
            settings,
            log_prior(u_start),
        )
    n_design = len(points)
    points += restart_points(free, restarts, key, per_query)
    best, ends = None, []
    for k, point in enumerate(points):
        worth = True  # per query: this start may replace the best (a skipped one may not)
        if 0 < k < n_design:
            worth = worth_running(design_result, k, best[0])
            if not np.any(worth):
                continue
        # the design's starts keep the hyperprior on the initial values; a random restart is
        # centred on itself
        u0 = (u_start if k < n_design else point) if centre is None else centre
        try:
            result = drive(
                point,
                fixed,
                u0,
                data,
                sites,
                cfg,
                settings,
                n_iter,
                tol,
                progress,
                k == 0 and design_result is None,  # the design compiled the programs already
                None if hyperprior is None else log_prior(u0),  # None: BFGS's own normal prior
            )
        except NonFiniteStartError as error:  # name the values: e.g. a median heuristic
            raise NonFiniteStartError(  # beyond float32's range
                f"{error}. The start was {first!r} ({np.dtype(dtype).name}); features on a "
                "scale far from 1 put the median heuristic there: standardise X, or enable "
                "float64"
            ) from None
        score = np.asarray(result[1].objective)[..., -1]
        ends.append((score, flat_values(result[0].free, per_query)))
        if best is None:
            best = (score, result)
        elif per_query:  # the best start of each query
            better = (score > best[0]) & worth  # each query exactly as its fit alone
            best = (np.where(better, score, best[0]), choose_per_query(better, result, best[1]))
        elif score > best[0]:
            best = (score, result)
    best_score, (carry, trace, converged) = best
    warn_multimodal(ends)
    gap = None
    if design_result is not None:
        gap = np.asarray(best_score) - np.max(design_result.objective, axis=-1)
        gap = gap if per_query else float(np.reshape(gap, -1)[0])
    if not final:  # the fitted prior and the steps' sites (B, m) in the batch's order
        return combine_host(carry.free, fixed, cfg, dtype), gather_sites(
            carry.sites, groups, batch.pairs.shape[:2]
        )
    posteriors = final_posteriors(carry.free, fixed, data, carry.sites, cfg, settings, per_query)
    posterior = posteriors[0] if groups is None else merge(posteriors, groups, batch.pairs.shape[1])
    if restrict is not False:  # every entity's moments, from the sites (no EP sweep)
        whole = prepare_batch(first, batch)
        mean, cov = moments(carry.free, fixed, whole, posterior.sites, cfg, per_query)
        posterior = posterior._replace(mean=mean, cov=cov)
    fitted = jax.device_put(combine_host(carry.free, fixed, cfg, dtype))
    result = FitResult(fitted, jax.device_put(posterior), trace, converged, design_result, gap)
    return jax.block_until_ready(result)


def fit_hyperparameters(
    prior: XPGP,
    problems,
    *,
    method: str = "evidence",
    n_iter: int | None = None,
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
    coarse: int | str | None = "auto",
    inference: str = "ep",
    laplace_start: bool = False,
    design: GlobalStart | int | str | None = "auto",
    hyperprior: dict | str | None = None,
) -> FitResult:
    """Fit the prior's hyperparameters to one or many queries.

    Args:
        prior: the starting ``XPGP`` prior (its structure, and its
            values where ``init`` does not replace them).
        problems: a ``PreferenceProblem``, a list of them, or a
            ``ProblemBatch``.
        method: ``"evidence"`` (default: maximise the (MAP) evidence, EP's or Laplace's) or
            ``"em"`` (EM-EP). The default by measurement (``docs/results/inference.md``): on 32 real
            problems EM's fixed iterations drift past the evidence's peak and predict worse.
        n_iter: EM iterations, or evidence-maximisation steps (with ``"bfgs"``, at most that
            many: it stops when converged, see ``tol``). Default: 100 for BFGS (a cap it should
            not reach: ARD fits took up to ~40 steps), 20 for EM and the optax optimisers.
            A fit that reaches the cap unconverged warns (``LearningConvergenceWarning``)
            and its ``converged`` is False.
        m_steps: optimiser steps per M-step (EM only).
        optimizer: an optax ``GradientTransformation``, or ``"lbfgs"`` or ``"adam"``, or for
            evidence maximisation ``"bfgs"`` (defaults: L-BFGS for EM's M-steps; BFGS for
            evidence maximisation: quasi-Newton steps from the Fisher information with a
            backtracking line search, driven from the host, a few warm-started EP runs per
            step; ``bayesrank.learning.bfgs``).
        learning_rate: Adam's step size.
        hyperprior_scale: sd of the normal prior on each unconstrained hyperparameter, centred on
            its initial value (MAP-II); ``None`` for plain maximum likelihood.
        trainable: pytree of bools like ``prior`` (default ``default_trainable``).
        init: apply ``initialize`` (median heuristic) first.
        restarts: extra random starts (unconstrained values perturbed by N(0, 1)), needs ``key``;
            the start with the highest final objective is returned (per query, for per-query
            fits). Where another start ends within 1 nat of it at hyperparameters more than a
            factor ``e`` apart, a ``MultimodalEvidenceWarning`` says so.
        per_query: one ``theta`` per query instead of one shared ``theta``: every step is
            mapped over the queries in one compiled call (``bayesrank.parallel.map_queries``),
            BFGS runs every query's fit in lockstep; a trace that stopped early repeats its
            last entry up to the longest one. A single problem is fitted this way.
        bucket: evidence maximisation (BFGS or Adam) with a shared ``theta``, from a list of
            problems: queries are padded to their size rounded up to a multiple of ``bucket``
            and each size group runs as its own compiled ``vmap`` (EP costs ``n^3``: padding
            every query to the largest wastes most of the work when sizes vary, 6x on
            OHSUMED). The size is the number of entities that pairs touch: evidence
            maximisation runs EP on those alone (``prepare_batch``), and the posteriors of
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
            objective in fewer steps (the measurements: ``docs/development/learning.md``). The
            trace is the full fit's. It compiles a second set of programs. ``"auto"``
            (default): half the entities where that pays, i.e. for BFGS evidence maximisation
            of a shared ``theta`` (or one problem) from problems whose largest touches at least
            ``COARSE_FROM = 500`` entities (``auto_coarse``), else none. ``None``: never.

        inference: ``"ep"`` (default: EP posteriors, the EP evidence) or ``"laplace"`` (the
            Laplace approximation and its evidence, ``bayesrank.inference.laplace``, with its
            gradient by implicit differentiation); EP's settings then do not apply. With
            ``"laplace"`` the posteriors are ``LaplacePosterior``.
        laplace_start: with ``inference="ep"`` and ``method="evidence"`` (a shared ``theta`` or
            one problem): first maximise the Laplace evidence, then start EP's evidence
            maximisation from its hyperparameters, EP's sweeps from its sites. The hyperprior
            stays centred on the initial values, so the EP fit maximises the same objective as
            without it; the trace is the EP fit's.
        hyperprior: priors on named hyperparameters in place of the normal one
            (``bayesrank.learning.hyperpriors``): a dict from ``"Class.field"`` (e.g.
            ``"ARD.lengthscales"``) to a ``Gamma`` or ``SmoothedBox`` on the value, or
            ``"botorch"`` for BoTorch ``PairwiseGP``'s defaults (Gamma(2.4, 2.7) on each ARD
            lengthscale in units of its feature's range; a smoothed box on the output scale).
            The hyperparameters not named keep the normal prior of ``hyperprior_scale``.
            BFGS evidence maximisation only.
        design: the global start (``bayesrank.learning.design``): the (MAP) evidence at a
            space-filling design over the free hyperparameters (ranges from the data; the
            start is its first point), each point one call of the program BFGS uses, then BFGS
            from the best distinct points, the best end kept. ``"auto"`` (default): 16 points,
            2 starts, for BFGS evidence maximisation (off for EM and the optax optimizers);
            an integer: that many points; a ``GlobalStart``; ``None``: BFGS from the
            start alone. With a coarse or Laplace start the design is that first fit's.

    Returns:
        ``FitResult`` with the fitted prior, the EP (or Laplace) posteriors at it (they
        predict: ``posteriors.predict_pairs``), the ``Trace`` and the ``converged`` flag
        (per-query fits: every leaf gains a leading query axis) and ``design_gap``: the
        fit's (MAP) objective minus the best design point's (``>= 0`` where the fit reached
        the design's best; ``None`` without a design). The prior passed in is not modified.
    """
    warn_if_float32("fit_hyperparameters")
    if n_iter is None:
        bfgs = method == "evidence" and optimizer in (None, "bfgs")
        n_iter = 100 if bfgs else 20
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
        inference=inference,
    )
    check_options(options)
    options["design"] = check_design(design, method, optimizer)
    options["hyperprior"] = check_hyperprior(hyperprior)
    if options["hyperprior"] and not (method == "evidence" and optimizer in (None, "bfgs")):
        raise ValueError("a named hyperprior needs method='evidence' with the BFGS optimizer")
    for name, flag in (("per_query", per_query), ("init", init), ("progress", progress)):
        check_bool(flag, name)
    check_bool(laplace_start, "laplace_start")
    check_int(bucket, "bucket", low=1, allow_none=True)
    if key is not None:
        check_key(key)
    if not isinstance(prior, XPGP):
        raise ValueError(f"prior must be an XPGP prior, got {type(prior).__name__}")
    if isinstance(problems, PreferenceProblem):
        problems = [problems]
    if problems is None or isinstance(problems, str | bytes):
        raise ValueError(f"problems must be PreferenceProblems or a ProblemBatch, got {problems!r}")
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
        groups = per_query_groups(problems, per_query, bucket)
        if groups is None:
            result = _dispatch(prior, problems, options, per_query, bucket, coarse, laplace_start)
        else:  # one call per size group: no query padded to, or waiting for, a far larger one
            starts = (coarse, laplace_start)
            parts = [
                _dispatch(prior, [problems[k] for k in g], options, True, bucket, *starts)
                for g in groups
            ]
            result = concatenate(parts, groups)
    warn_unconverged(result.converged, options)
    return result


def _dispatch(prior, problems, options, per_query, bucket, coarse, laplace_start) -> FitResult:
    """The fit, a single problem's unbatched; with a coarse or a Laplace start, a first fit
    (on entity subsets, or of the Laplace evidence) whose hyperparameters and sites start the
    full fit, under a hyperprior still centred on the initial values."""
    method, optimizer, tol, init = (options[k] for k in ("method", "optimizer", "tol", "init"))
    coarse = auto_coarse(coarse, problems, method, optimizer, per_query, laplace_start)
    batch, groups, restrict, single = layout(problems, method, optimizer, per_query, bucket)

    def finish(result):
        return result if per_query or not single else unbatched(result, batch)

    if laplace_start:
        if coarse is not None or per_query or method != "evidence" or options["inference"] != "ep":
            raise ValueError(
                "laplace_start needs method='evidence', inference='ep', no coarse start and a "
                "shared theta (or one problem)"
            )
    elif coarse is None:
        return finish(_fit(prior, batch, groups, restrict, single, **options))
    elif method != "evidence" or per_query or isinstance(problems, ProblemBatch):
        raise ValueError("coarse needs method='evidence', a shared theta and problems")
    elif isinstance(coarse, bool) or not isinstance(coarse, int | np.integer) or coarse < 2:
        raise ValueError(f"coarse must be at least 2 entities, got {coarse!r}")
    center = (
        starting_priors(prior, batch, init, False) if not single else _center(prior, batch, init)
    )
    first = {**options, "init": False, "restarts": 0, "progress": False}
    if laplace_start:
        first["inference"] = "laplace"
        start, (tau, nu) = _fit(center, batch, groups, restrict, single, final=False, **first)
        sites = np.stack([np.asarray(tau), np.asarray(nu)])
    else:
        subsets, origins = subsample(problems, coarse)
        if not subsets:  # no query keeps a pair
            return finish(_fit(prior, batch, groups, restrict, single, **options))
        first["tol"] = 10 * tol
        coarse_layout = layout(subsets, method, optimizer, per_query, bucket)
        start, (tau, nu) = _fit(center, *coarse_layout, final=False, **first)
        # the full fit's EP starts from the coarse fit's sites on the pairs they share
        sites = np.zeros((2, *batch.pair_mask.shape), tau.dtype)
        for k, (b, inside) in enumerate(origins):
            sites[:, b, inside] = tau[k, : len(inside)], nu[k, : len(inside)]
    if single:
        start = jax.tree_util.tree_map(lambda x: np.asarray(x)[0], start)
    full = {**options, "init": False, "design": None}  # the first fit had the design
    return finish(_fit(start, batch, groups, restrict, single, center=center, sites=sites, **full))


def _center(prior, batch, init):
    """The hyperprior's centre of a single problem's coarse fit: its own starting values."""
    return initialize(prior, batch) if init else with_weights(prior)
