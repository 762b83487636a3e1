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

Here: the keywords checked and resolved (``options``: the groups of ``settings`` and EP's
engine ``EP``, the old keywords mapped onto them), the problems checked, the layout chosen
(``layout``), and the first fits of the coarse and Laplace starts. A fit of one layout is
``stages.fit_layout``: prepare, run from every start, finish.
"""

from __future__ import annotations

from collections.abc import Mapping

import jax
import numpy as np
import optax

from ..data.batch import ProblemBatch
from ..data.checks import check_bool, check_int
from ..data.keys import check_key
from ..data.problem import PreferenceProblem
from ..inference.engine import GaussianEngine
from ..inference.laplace import Laplace
from ..kernels.xpgp import XPGP
from ..runtime import one_blas_thread, warn_if_float32
from .config import resolve_trainable
from .design import GlobalStart
from .diagnostics import (
    LearningConvergenceWarning,
    MultimodalEvidenceWarning,
    NonFiniteStepWarning,
    warn_unconverged,
)
from .hyperpriors import check_names
from .initialize import (
    auto_coarse,
    initialize,
    starting_priors,
    subsample,
    with_weights,
)
from .layout import layout, per_query_groups
from .options import Options, resolve
from .results import FitResult, concatenate, unbatched
from .settings import BFGS, Optax, Start
from .stages import fit_layout

__all__ = [
    "BFGS",
    "GlobalStart",
    "LearningConvergenceWarning",
    "MultimodalEvidenceWarning",
    "NonFiniteStepWarning",
    "Optax",
    "Start",
    "fit_hyperparameters",
]


def fit_hyperparameters(
    prior: XPGP,
    problems,
    *,
    method: str = "evidence",
    optimizer: BFGS | Optax | optax.GradientTransformation | None = None,
    engine: GaussianEngine | str | None = None,
    start: Start | None = None,
    key: jax.Array | None = None,
    trainable=None,
    hyperprior_scale: float | None = 2.0,
    hyperprior: dict | str | None = None,
    per_query: bool = False,
    bucket: int | None = 64,
    progress: bool = False,
    **deprecated,
) -> FitResult:
    """Fit the prior's hyperparameters to one or many queries.

    Args:
        prior: the starting ``XPGP`` prior (its structure, and its values where ``start.init``
            does not replace them).
        problems: a ``PreferenceProblem``, a list of them, or a ``ProblemBatch``.
        method: ``"evidence"`` (default: maximise the (MAP) evidence, EP's or Laplace's) or
            ``"em"`` (EM-EP). The default by measurement (``docs/results/inference.md``): on 32
            real problems EM's fixed iterations drift past the evidence's peak and predict worse.
        optimizer: ``BFGS(max_steps=100, tol=1e-2)`` (the default for ``"evidence"``: host-driven
            quasi-Newton from the Fisher information, stops when a step gains and the model
            predicts less than ``tol`` nats, at most ``max_steps`` steps);
            ``Optax(transformation="lbfgs", steps=20, m_steps=20, learning_rate=0.05,
            tol=1e-2)`` (the default for ``"em"``: ``steps`` EM iterations of ``m_steps``
            M-step steps, or ``steps`` evidence steps; ``"lbfgs"``, ``"adam"`` with its traced
            ``learning_rate``, or any optax ``GradientTransformation``); or a
            ``GradientTransformation`` itself (``Optax(that)``). A fit that reaches its cap
            unconverged warns (``LearningConvergenceWarning``), its ``converged`` False. An
            optax step that makes the hyperparameters or the objective non-finite is rejected
            and the fit stops at its last finite point (``NonFiniteStepWarning``,
            ``FitResult.nonfinite_step``), as BFGS rejects such trial points.
        engine: the engine of the E-steps, the evidence steps and the final posteriors
            (``bayesrank.inference.engine``; a ``GaussianEngine``, by default ``EP()``):
            ``EP(...)`` takes ``max_iter`` (default 200 sweeps), ``tol`` (default 1e-6 in
            float64, 1e-3 in float32), ``step_tol`` (default 1e-4: the steps' tolerance,
            absolute and relative to a query's largest prior sd; the evidence is stationary in
            the sites, so the steps need less than the final posteriors) and ``schedule``
            (``"parallel"``, accelerated, or ``"sequential"``); ``Laplace(...)`` maximises the
            Laplace evidence (its gradient by implicit differentiation; the posteriors are
            ``LaplacePosterior``); any other ``GaussianEngine`` its ``log_evidence``,
            differentiated through ``K`` with its fit's sites held fixed where it holds them
            so (method ``"evidence"``). ``"ep"`` and ``"laplace"`` name the first two.
        start: ``Start(init=True, design="auto", coarse="auto", laplace=False, restarts=0)``:
            the median heuristic (``init``), the global start (``design``: a ``GlobalStart``
            of 16 points and 2 BFGS starts for BFGS evidence maximisation), a first fit on
            entity subsets for problems touching 500 entities or more (``coarse``) or of the
            Laplace evidence (``laplace``), ``restarts`` random starts (need ``key``); see
            ``Start``.
        key: the PRNG key the random restarts draw from.
        trainable: pytree of bools like ``prior`` (default ``default_trainable``).
        hyperprior_scale: sd of the normal prior on each unconstrained hyperparameter, centred
            on its initial value (MAP-II); ``None`` for plain maximum likelihood.
        hyperprior: priors on named hyperparameters in place of the normal one
            (``bayesrank.learning.hyperpriors``): a dict from ``"Class.field"`` (e.g.
            ``"ARD.lengthscales"``) to a ``Gamma`` or ``SmoothedBox``, each key naming a
            trainable positive hyperparameter of the prior (a ``ValueError`` lists those it
            takes), or ``"botorch"`` for BoTorch ``PairwiseGP``'s defaults on those of them the
            prior has; the rest keep ``hyperprior_scale``'s. BFGS only.
        per_query: one ``theta`` per query instead of one shared ``theta``, every step mapped
            over the queries in one compiled call; a trace that stopped early repeats its last
            entry. A single problem is fitted this way.
        bucket: shared evidence maximisation by BFGS or Adam from a list of problems: queries
            padded to the entities their pairs touch rounded up to a multiple of ``bucket``,
            each size group its own compiled call (EP costs ``n^3``); ``None``: one shape.
        progress: show progress (a tqdm bar if tqdm is installed, else a line per iteration).
        deprecated: the old keywords, each a field of a group, with a ``DeprecationWarning``:
            ``n_iter``, ``tol``, ``m_steps``, ``learning_rate`` and the names ``"bfgs"``,
            ``"lbfgs"``, ``"adam"`` (``optimizer``); ``ep_max_iter``, ``ep_tol``,
            ``ep_step_tol``, ``schedule`` (``engine=EP(...)``), ``ep`` (``engine``, an ``EP``),
            ``inference`` (``engine``, by name); ``init``, ``design``, ``coarse``,
            ``laplace_start``, ``restarts`` (``start``). One beside its group is a ``ValueError``.

    Returns:
        ``FitResult`` with the fitted prior, the EP (or Laplace) posteriors at it (they
        predict: ``posteriors.predict_pairs``), the ``Trace`` and the ``converged`` flag
        (per-query fits: every leaf gains a leading query axis) and ``design_gap``: the
        fit's (MAP) objective minus the best design point's (``>= 0`` where the fit reached
        the design's best; ``None`` without a design). The prior passed in is not modified.
    """
    warn_if_float32("fit_hyperparameters")
    options = resolve(
        method,
        optimizer,
        engine,
        start,
        deprecated,
        trainable=trainable,
        hyperprior_scale=hyperprior_scale,
        hyperprior=hyperprior,
        key=key,
        progress=progress,
    )
    check_bool(per_query, "per_query")
    check_int(bucket, "bucket", low=1, allow_none=True)
    if key is not None:
        check_key(key)
    problems = _check_problems(prior, problems)
    if isinstance(hyperprior, Mapping) and options.hyperprior:  # by name: where it applies
        start = with_weights(prior)
        flags = jax.tree_util.tree_leaves(resolve_trainable(start, options.trainable))
        check_names(options.hyperprior, start, flags)
    with one_blas_thread():  # bayesrank.runtime: XLA's and BLAS's thread pools contend
        groups = per_query_groups(problems, per_query, bucket)
        if groups is None:
            result = _dispatch(prior, problems, options, per_query, bucket)
        else:  # one call per size group: no query padded to, or waiting for, a far larger one
            parts = [
                _dispatch(prior, [problems[k] for k in g], options, True, bucket) for g in groups
            ]
            result = concatenate(parts, groups)
    warn_unconverged(result.converged, options, result.nonfinite_step)
    return result


def _check_problems(prior, problems):
    """``problems`` as a list of ``PreferenceProblem`` or a ``ProblemBatch``; ``ValueError``
    naming a bad prior or problem."""
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
    return problems


def _dispatch(prior, problems, o: Options, per_query, bucket) -> FitResult:
    """The fit, a single problem's unbatched; with a coarse or a Laplace start, a first fit
    (on entity subsets, or of the Laplace evidence) whose hyperparameters and sites start the
    full fit, under a hyperprior still centred on the initial values."""
    coarse = auto_coarse(o.coarse, problems, o.method, o.optimizer, per_query, o.laplace_start)
    batch, groups, restrict, single = layout(problems, o.method, o.optimizer, per_query, bucket)

    def finish(result):
        return result if per_query or not single else unbatched(result, batch)

    if o.laplace_start:
        if coarse is not None or per_query or o.method != "evidence" or o.engine != o.ep:
            raise ValueError(
                "Start(laplace=True) needs method='evidence', engine EP, no coarse start "
                "and a shared theta (or one problem)"
            )
    elif coarse is None:
        return finish(fit_layout(prior, batch, groups, restrict, single, o))
    elif o.method != "evidence" or per_query or isinstance(problems, ProblemBatch):
        raise ValueError("Start(coarse=...) needs method='evidence', a shared theta and problems")
    center = (
        starting_priors(prior, batch, o.init, False)
        if not single
        else _center(prior, batch, o.init)
    )
    first = o._replace(init=False, restarts=0, progress=False)
    if o.laplace_start:
        first = first._replace(engine=Laplace())
        start, (tau, nu) = fit_layout(center, batch, groups, restrict, single, first, final=False)
        sites = np.stack([np.asarray(tau), np.asarray(nu)])
    else:
        subsets, origins = subsample(problems, coarse)
        if not subsets:  # no query keeps a pair
            return finish(fit_layout(prior, batch, groups, restrict, single, o))
        coarse_layout = layout(subsets, o.method, o.optimizer, per_query, bucket)
        start, (tau, nu) = fit_layout(
            center, *coarse_layout, first._replace(tol=10 * o.tol), final=False
        )
        # the full fit's EP starts from the coarse fit's sites on the pairs they share
        sites = np.zeros((2, *batch.pair_mask.shape), tau.dtype)
        for k, (b, inside) in enumerate(origins):
            sites[:, b, inside] = tau[k, : len(inside)], nu[k, : len(inside)]
    if single:
        start = jax.tree_util.tree_map(lambda x: np.asarray(x)[0], start)
    full = o._replace(init=False, design=None)  # the first fit had the design
    return finish(
        fit_layout(start, batch, groups, restrict, single, full, center=center, sites=sites)
    )


def _center(prior, batch, init):
    """The hyperprior's centre of a single problem's coarse fit: its own starting values."""
    return initialize(prior, batch) if init else with_weights(prior)
