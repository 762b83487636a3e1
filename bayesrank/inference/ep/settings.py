"""``EP``: EP's settings as one engine object (``bayesrank.inference.engine``), shared by every
caller.

A frozen dataclass and a pytree: equal settings compare and hash equal, and passed to a compiled
program its numbers are traced and its schedule, precision and flags static. Its fields are
checked when it is made (a ``ValueError`` names the field and the value); numbers that are JAX
tracers (inside a caller's ``jit``) are left to the pure core.
"""

from __future__ import annotations

import dataclasses
from typing import ClassVar

from ..._moved import moved
from ...data.checks import check_bool, check_float, check_int
from ...runtime import is_traced
from ..engine import MAX_ITER_LIMIT, GaussianEngine
from .loop import check_schedule, default_tol
from .precision import check_precision
from .run import check_damping

__all__ = ["EP", "MAX_ITER_LIMIT", "check_settings", "compact_repr"]


def check_settings(
    schedule: str, precision: str, damping, accelerate: bool = False, residual_stop=False
) -> None:
    """``ValueError`` for an unknown schedule or precision, a damping outside ``(0, 1]``, or
    acceleration settings that do not go together."""
    check_schedule(schedule, accelerate)
    check_precision(precision)
    check_damping(damping)
    if not accelerate and residual_stop is not False:
        raise ValueError("residual_stop needs accelerate=True")


def compact_repr(settings) -> str:
    """``Name(field=value, ...)`` of a settings dataclass, with only the fields that differ from
    their defaults: what a user would type (``EP(max_iter=300)``)."""
    parts = []
    for f in dataclasses.fields(settings):
        value = getattr(settings, f.name)
        if f.repr and not _same(value, f.default):
            parts.append(f"{f.name}={value!r}")
    return f"{type(settings).__name__}({', '.join(parts)})"


def _same(value, default) -> bool:
    try:
        return type(value) is type(default) and bool(value == default)
    except (TypeError, ValueError):  # an array or a tracer
        return False


@dataclasses.dataclass(frozen=True, repr=False)
class EP(GaussianEngine):
    """EP with two-dimensional sites as an engine (``bayesrank.inference.engine``): its settings,
    one spelling and one default each, shared by every caller (``XPGPModel(prior, EP(...))``,
    ``ep.fit(K, pairs, settings=EP(...))``, ``fit_hyperparameters(..., engine=EP(...))``,
    ``parallel.fit_predict(..., engine=EP(...))``, the active and designs loops).

    Attributes:
        max_iter: at most that many sweeps (200). ``0`` in ``ep.fit``: the posterior at the
            given sites.
        tol, rtol: converged when no marginal mean or sd moved by ``max(tol, rtol * sqrt(max_i
            K_ii))`` or more in the last sweep; ``tol=None``: 1e-6 in float64, 1e-3 in float32
            (``default_tol``); ``rtol=None``: ``tol``.
        damping, adapt_damping: the first sweep's step fraction in ``(0, 1]``, halved while
            the sweeps' largest change shrinks slowly (``ep.fit``).
        schedule: ``"parallel"`` or ``"sequential"``.
        precision: ``"full"``, or ``"mixed"`` (first sweeps in float32).
        accelerate, residual_stop: Anderson mixing of parallel sweeps, and with it a stop on
            the moment-matching residual (``ep.run``).
        step_tol: ``fit_hyperparameters`` only: EP's tolerance inside the evidence steps, at
            least ``tol`` and at least that fraction of a query's largest prior sd (``None``:
            ``tol``); the final posteriors use ``tol``. A single fit has no steps and ignores it.

    ``fit_hyperparameters`` runs its own EP: it takes ``max_iter``, ``tol``, ``step_tol`` and
    ``schedule`` (and accelerates parallel sweeps itself); the other fields must keep their
    defaults there. ``max_iter``, ``tol``, ``rtol`` and ``damping`` are traced (changing them
    compiles nothing); the rest are static.
    """

    name: ClassVar[str] = "ep"
    traced: ClassVar[tuple[str, ...]] = ("max_iter", "tol", "rtol", "damping", "step_tol")
    advice: ClassVar[str] = (
        "the posterior is the last sweep's (converged=False, max_change says how far); raise "
        "max_iter, or try accelerate=True or schedule='sequential'"
    )

    max_iter: int = 200
    tol: float | None = None
    rtol: float | None = None
    damping: float = 1.0
    adapt_damping: bool = True
    schedule: str = "parallel"
    precision: str = "full"
    accelerate: bool = False
    residual_stop: bool = False
    step_tol: float | None = 1e-4

    def __post_init__(self):
        for name in ("adapt_damping", "accelerate"):
            check_bool(getattr(self, name), name)
        if not is_traced(self.residual_stop):
            check_bool(self.residual_stop, "residual_stop")
        check_settings(
            self.schedule, self.precision, self.damping, self.accelerate, self.residual_stop
        )
        if not is_traced(self.max_iter):
            check_int(self.max_iter, "max_iter", low=0, high=MAX_ITER_LIMIT)
        for name in ("tol", "step_tol"):
            if not is_traced(getattr(self, name)):
                check_float(getattr(self, name), name, 0.0, low_open=True, allow_none=True)
        if not is_traced(self.rtol):
            check_float(self.rtol, "rtol", low=0.0, allow_none=True)

    def __repr__(self) -> str:
        return compact_repr(self)

    def default_tol(self, dtype) -> float:
        return default_tol(dtype)

    def learning_engine(self) -> EP:
        """``EP()``: learning runs its own EP (it accelerates parallel sweeps itself)."""
        return EP()

    def fit(self, K, rows, *, pair_mask=None, sites=None, outcomes=None):
        """``ep.fit_core`` at these settings (pure): an ``EPPosterior``."""
        from .fit import fit_core  # fit.py builds on these settings

        return fit_core(
            K,
            rows,
            tol=self.tol,
            rtol=self.rtol,
            sites=sites,
            pair_mask=pair_mask,
            outcomes=outcomes,
            max_iter=self.max_iter,
            damping=self.damping,
            adapt_damping=self.adapt_damping,
            schedule=self.schedule,
            precision=self.precision,
            accelerate=self.accelerate,
            residual_stop=self.residual_stop,
        )


#: ``EPSettings`` was EP's settings object; it is the engine ``EP`` now (the same fields).
__getattr__ = moved(__name__, {"EPSettings": "bayesrank.inference.engines:EP"})
