"""The optax path's guard against non-finite steps.

BFGS rejects a trial point whose objective or gradient is not finite (its line search halves
the step); a fixed-step optax transformation has no line search, and one step of
``optax.sgd(1e12)`` or of a transformation that returns NaN sends every hyperparameter to NaN.
So the host loop of the optax path (``drive``) checks every step:

- the point a step starts from must have a finite objective and EP evidence; at the first
  step that is the start, and a ``NonFiniteStartError`` says so, as BFGS does;
- a step is rejected where it makes a free value non-finite, or (EM) the M-step's bound ``Q``
  at its end, or (both methods) the objective at the point it reached, seen by the next step
  or, after the last step, by the final posteriors (``reject_last``).

A fit with a rejected step stops at its last finite point: its trace repeats that point's
entry (its params the point's, EM's ``objective`` its ``objective_before``), ``converged`` is
False and its ``nonfinite`` flag True (``FitResult.nonfinite_step``; the façade warns with
``NonFiniteStepWarning``). Per query for per-query fits: the other queries go on. Nothing
changes for a fit whose steps stay finite.
"""

from __future__ import annotations

import jax
import numpy as np

from .diagnostics import NonFiniteStartError
from .results import Carry, Trace

__all__ = ["Guard", "finite_rows", "pick", "reject_last"]


def pick(mask, a, b):
    """Per fit, ``a`` where ``mask`` else ``b`` (host arrays; ``mask``: ``()`` for a shared
    fit, ``(B,)`` per query, each leaf's leading axis the query's)."""
    mask = np.asarray(mask)

    def one(x, y):
        x, y = np.asarray(x), np.asarray(y)
        return np.where(mask.reshape(mask.shape + (1,) * (x.ndim - mask.ndim)), x, y)

    return jax.tree_util.tree_map(one, a, b)


def finite_rows(leaves, per_query: bool) -> np.ndarray:
    """Per fit (``(B,)`` per query, ``()`` shared): every value of ``leaves`` finite."""
    if per_query:
        rows = [np.isfinite(np.asarray(x)).reshape(np.shape(x)[0], -1).all(1) for x in leaves]
        return np.logical_and.reduce(rows)
    return np.bool_(all(np.isfinite(np.asarray(x)).all() for x in leaves))


def _still(entry: Trace, params, em: bool) -> Trace:
    """``entry`` of a rejected step: the params of the point kept; EM's bound unchanged."""
    return entry._replace(
        params=params, objective=entry.objective_before if em else entry.objective
    )


class Guard:
    """The steps of one optax-path fit, checked as they come (module docstring).

    ``accept(carry, new, info)`` takes one step's result (``info``: its trace entry, on the
    host) and returns the carry to go on from; ``infos``: the trace entries so far;
    ``stopped``: per fit, a step was rejected; ``previous``: each fit's carry before the last
    step (the fallback of ``reject_last``)."""

    def __init__(self, start_params, method: str, per_query: bool, B: int):
        self.em, self.per_query = method == "em", per_query
        self.stopped = np.zeros(B if per_query else (), bool)
        self.at = [start_params]  # the params of each point reached, the start's first
        self.infos: list[Trace] = []
        self.kept = self.frozen = self.previous = None

    def accept(self, carry: Carry, new: Carry, info: Trace) -> Carry:
        start = info.objective_before if self.em else info.objective
        bad_point = ~self.stopped & ~(np.isfinite(start) & np.isfinite(info.log_evidence))
        if not self.infos and bad_point.any():
            b = int(np.flatnonzero(np.atleast_1d(bad_point))[0])
            raise NonFiniteStartError(
                f"at the initial hyperparameters the objective or the EP evidence is not finite "
                f"(query {b}: objective {float(np.atleast_1d(start)[b]):.6g}, log evidence "
                f"{float(np.atleast_1d(info.log_evidence)[b]):.6g}); check the prior's values "
                "and the data"
            )
        moved = finite_rows(new.free, self.per_query)
        if self.em:
            moved = moved & np.isfinite(info.objective)
        bad_step = ~self.stopped & ~bad_point & ~moved
        if bad_point.any():  # the last step reached a point without a finite objective
            entry = _still(self.infos[-1], self.at[-2], self.em)
            self.infos[-1] = pick(bad_point, entry, self.infos[-1])
            self._stop(bad_point, self.previous, entry)
        if bad_step.any():
            self._stop(bad_step, carry, _still(info, self.at[-1], self.em))
        if self.stopped.any():
            info = pick(self.stopped, self.frozen, info)
            new = pick(self.stopped, self.kept, new)
            carry = pick(self.stopped, self.kept, carry)
        self.infos.append(info)
        self.at.append(info.params)
        self.previous = carry
        return new

    def _stop(self, mask, carry: Carry, entry: Trace) -> None:
        first = self.kept is None
        self.kept = pick(mask, carry, carry if first else self.kept)
        self.frozen = pick(mask, entry, entry if first else self.frozen)
        self.stopped = self.stopped | mask


def reject_last(trace: Trace, bad, params, em: bool, per_query: bool) -> Trace:
    """``trace`` with its last step rejected where ``bad`` (per fit): that entry's params are
    ``params`` (the point before it), EM's bound its ``objective_before``. Host arrays."""
    trace = jax.device_get(trace)
    axis = 1 if per_query else 0
    last = jax.tree_util.tree_map(lambda a: np.take(a, -1, axis=axis), trace)
    last = pick(bad, _still(last, params, em), last)

    def put(a, x):
        a = np.array(a)
        if per_query:
            a[:, -1] = x
        else:
            a[-1] = x
        return a

    return jax.tree_util.tree_map(put, trace, last)
