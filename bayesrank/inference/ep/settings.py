"""``EPSettings``: EP's settings as one object, shared by ``ep.fit`` and ``fit_hyperparameters``.

A frozen dataclass: equal settings compare and hash equal, so a new but equal object is the
same configuration (no compiled program is keyed on the object itself: the façades pass its
schedule, precision and flags as static arguments and its numbers as traced ones). Its fields
are checked when it is made (a ``ValueError`` names the field and the value); numbers that are
JAX tracers (inside a caller's ``jit``) are left to the pure core.
"""

from __future__ import annotations

import dataclasses

from ...data.checks import check_bool, check_float, check_int
from ...runtime import is_traced
from .loop import check_schedule
from .precision import check_precision
from .run import check_damping

__all__ = ["MAX_ITER_LIMIT", "EPSettings", "check_settings", "compact_repr"]

#: The most sweeps a caller may ask for: the loop's counter is an int32.
MAX_ITER_LIMIT = 2**31 - 1


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
    their defaults: what a user would type (``EPSettings(max_iter=300)``)."""
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
class EPSettings:
    """EP's settings (``bayesrank.inference.ep.fit``'s keywords, and ``step_tol``).

    Attributes:
        max_iter: at most that many sweeps; ``None`` (default): the caller's cap, 100 sweeps
            in ``ep.fit``, 200 in ``fit_hyperparameters`` (its E-steps and final posteriors).
            ``0`` in ``ep.fit``: the posterior at the given sites.
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
            ``tol``); the final posteriors use ``tol``. ``ep.fit`` has no steps and ignores it.

    ``fit_hyperparameters`` runs its own EP: it takes ``max_iter``, ``tol``, ``step_tol`` and
    ``schedule`` (and accelerates parallel sweeps itself); the other fields must keep their
    defaults there.
    """

    max_iter: int | None = None
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
            check_int(self.max_iter, "max_iter", low=0, high=MAX_ITER_LIMIT, allow_none=True)
        for name in ("tol", "step_tol"):
            if not is_traced(getattr(self, name)):
                check_float(getattr(self, name), name, 0.0, low_open=True, allow_none=True)
        if not is_traced(self.rtol):
            check_float(self.rtol, "rtol", low=0.0, allow_none=True)

    def __repr__(self) -> str:
        return compact_repr(self)

    def cap(self, default: int) -> int:
        """``max_iter``, or the caller's ``default`` where it is ``None``."""
        return default if self.max_iter is None else self.max_iter
