"""``fit_hyperparameters``' grouped settings: the optimiser (``BFGS`` or ``Optax``) and the
start (``Start``); the engine's are its own (``EP(...)``, ``bayesrank.inference.engines``).

Frozen dataclasses: equal settings compare and hash equal, and their fields are checked when
they are made (a ``ValueError`` names the field and the value). What depends on the rest of a
fit (a design needs BFGS; a coarse start needs a shared ``theta``) is checked by the fit.

Why EM's settings sit in ``Optax`` rather than in an ``EM`` object: ``method`` already says EM
or evidence, and everything EM adds is about its optimiser (the transformation of its M-steps
and how many steps each takes), so an ``EM`` object would repeat ``method`` and split one
optimiser's settings over two objects. ``Optax`` is the fixed-count optax loop of either
method; ``BFGS`` the host-driven quasi-Newton of evidence maximisation, which stops on its
own rule.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
import optax

from ..data.checks import check_bool, check_float, check_int
from ..inference.ep.settings import MAX_ITER_LIMIT, compact_repr
from .design import GlobalStart, design_form

__all__ = ["BFGS", "Optax", "Start"]


@dataclasses.dataclass(frozen=True, repr=False)
class BFGS:
    """Evidence maximisation by the host-driven BFGS (``bayesrank.learning.bfgs``): quasi-Newton
    steps from the Fisher information with a backtracking line search, a few warm-started EP
    runs per step (``method="evidence"`` only; its default optimiser).

    Attributes:
        max_steps: at most that many steps (a cap it should not reach: ARD fits took up to
            ~40); a fit that reaches it unconverged warns (``LearningConvergenceWarning``).
        tol: stop when a step gained less than ``tol`` nats of (MAP) evidence and the
            quasi-Newton model predicts less than ``tol`` more.
    """

    max_steps: int = 100
    tol: float = 1e-2

    def __post_init__(self):
        check_int(self.max_steps, "max_steps", low=1, high=MAX_ITER_LIMIT)
        check_float(self.tol, "tol", 0.0, low_open=True)

    def __repr__(self) -> str:
        return compact_repr(self)


@dataclasses.dataclass(frozen=True, repr=False)
class Optax:
    """A fixed number of optax steps: for ``method="evidence"``, ``steps`` steps on the (MAP)
    evidence, EP warm-started inside each; for ``method="em"`` (its default optimiser), ``steps``
    EM iterations, each an E-step (EP) and an M-step of ``m_steps`` steps on the EM bound.

    Attributes:
        transformation: ``"lbfgs"`` (default): optax's L-BFGS with its zoom line search, which
            needs the objective (a plain transformation's ``update`` is not given it);
            ``"adam"``: ``optax.adam(learning_rate)`` with the step size traced (changing it
            compiles nothing); or any optax ``GradientTransformation`` (compared by structure:
            one built again the same way compiles nothing).
        steps: evidence steps, or EM iterations.
        m_steps: optimiser steps per M-step (EM only).
        learning_rate: ``"adam"``'s step size (the other transformations carry their own).
        tol: ``converged`` when the last step changed the objective by less than ``tol``
            (the steps do not stop early).
    """

    transformation: Any = "lbfgs"
    steps: int = 20
    m_steps: int = 20
    learning_rate: float = 0.05
    tol: float = 1e-2

    def __post_init__(self):
        t = self.transformation
        if not isinstance(t, optax.GradientTransformation) and not (
            isinstance(t, str) and t in ("lbfgs", "adam")
        ):
            raise ValueError(
                "transformation must be 'lbfgs', 'adam' or an optax GradientTransformation, "
                f"got {t!r}"
            )
        if isinstance(t, optax.GradientTransformation) and not (
            callable(t.init) and callable(t.update)
        ):
            raise ValueError(
                f"transformation must be an optax GradientTransformation of two functions "
                f"(init, update), got init={t.init!r}, update={t.update!r}"
            )
        check_int(self.steps, "steps", low=1, high=MAX_ITER_LIMIT)
        check_int(self.m_steps, "m_steps", low=1, high=MAX_ITER_LIMIT)
        check_float(self.learning_rate, "learning_rate", 0.0, low_open=True)
        check_float(self.tol, "tol", 0.0, low_open=True)

    def __repr__(self) -> str:
        return compact_repr(self)


@dataclasses.dataclass(frozen=True, repr=False)
class Start:
    """Where a fit starts, and its extra starts. The defaults: the median heuristic, then the
    global start and, on large problems, the coarse start, each where it applies.

    Attributes:
        init: start from ``initialize`` (the median heuristic); ``False``: the prior's values.
        design: the global start (``bayesrank.learning.design``): the (MAP) evidence at a
            space-filling design over the free hyperparameters (ranges from the data; the start
            is its first point), each point one call of the program BFGS uses, then BFGS from
            the best distinct points, the best end kept. ``"auto"`` (default): ``GlobalStart()``
            (16 points, 2 starts) for BFGS evidence maximisation, off for EM and ``Optax``;
            an integer: that many points; a ``GlobalStart``; ``None``: BFGS from the start
            alone. With a coarse or Laplace start the design is that first fit's.
        coarse: evidence maximisation of a shared ``theta`` from problems (not a batch): first
            fit on at most ``coarse`` random entities of each query and the pairs among them,
            from the same start and hyperprior (stopping at ``10 * tol``), then the full fit
            from there, its EP from the coarse fit's sites on the pairs they share. The full
            fit's hyperprior stays centred on the initial values, so it maximises the same
            objective in fewer steps (``docs/development/learning.md``); the trace is the full
            fit's. ``"auto"`` (default): half the entities where that pays, i.e. for BFGS
            evidence maximisation of a shared ``theta`` (or one problem) from problems whose
            largest touches at least ``COARSE_FROM = 500`` entities, else none. ``None``: never.
        laplace: with ``inference="ep"`` and ``method="evidence"`` (a shared ``theta`` or one
            problem): first maximise the Laplace evidence, then start EP's evidence maximisation
            from its hyperparameters, EP's sweeps from its sites (same hyperprior, same
            objective; the trace is the EP fit's).
        restarts: extra random starts (unconstrained values perturbed by N(0, 1)) drawn from
            ``fit_hyperparameters``' ``key``; the start with the highest final objective is
            kept (per query, for per-query fits). Where another ends within 1 nat of it at
            hyperparameters more than a factor ``e`` apart, a ``MultimodalEvidenceWarning``
            says so.
    """

    init: bool = True
    design: GlobalStart | int | str | None = "auto"
    coarse: int | str | None = "auto"
    laplace: bool = False
    restarts: int = 0

    def __post_init__(self):
        check_bool(self.init, "init")
        check_bool(self.laplace, "laplace")
        check_int(self.restarts, "restarts", low=0, high=MAX_ITER_LIMIT)
        design_form(self.design)
        c = self.coarse
        if not (c is None or (isinstance(c, str) and c == "auto")) and (
            isinstance(c, bool) or not isinstance(c, int | np.integer) or c < 2
        ):
            raise ValueError(f"coarse must be 'auto', None or at least 2 entities, got {c!r}")

    def __repr__(self) -> str:
        return compact_repr(self)
