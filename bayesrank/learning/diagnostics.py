"""What a fit tells its user about itself: the convergence and multimodality warnings.

- ``LearningConvergenceWarning``: a fit stopped at its optimiser's cap (``BFGS.max_steps``,
  ``Optax.steps``) before its own convergence rule held (``FitResult.converged`` is False);
- ``NonFiniteStepWarning`` (a ``LearningConvergenceWarning``): an optax transformation's step
  made the hyperparameters or the objective non-finite; the fit stopped at its last finite
  point (``guard``);
- ``MultimodalEvidenceWarning``: restarts ended at distinct hyperparameters of almost equal
  evidence, so the data do not choose between them.
"""

from __future__ import annotations

import warnings

import numpy as np

from ..diagnostics import ConvergenceWarning

__all__ = [
    "LearningConvergenceWarning",
    "MultimodalEvidenceWarning",
    "NonFiniteStartError",
    "NonFiniteStepWarning",
    "flat_values",
    "warn_multimodal",
    "warn_unconverged",
]


class NonFiniteStartError(ValueError):
    """The (MAP) objective or its gradient is not finite at the hyperparameters a fit starts
    from (a ``ValueError``: the start, the prior, the hyperprior or the data is at fault);
    ``in_hyperprior``: the hyperprior's terms alone are not finite."""

    def __init__(self, message: str, *, in_hyperprior: bool = False):
        super().__init__(message)
        self.in_hyperprior = in_hyperprior


class LearningConvergenceWarning(ConvergenceWarning):
    """A hyperparameter fit stopped at its iteration cap before its convergence rule held."""


class NonFiniteStepWarning(LearningConvergenceWarning):
    """An optax transformation's step made the hyperparameters or the objective non-finite: the
    step was rejected and the fit stopped at its last finite point (``guard``)."""


class MultimodalEvidenceWarning(UserWarning):
    """Restarts ended at distinct hyperparameters of almost equal evidence."""


def _which(flags: np.ndarray) -> str:
    """The fits where ``flags`` holds: "the fit", or their count and first indices."""
    if flags.size == 1:
        return "the fit"
    more = "..." if flags.sum() > 10 else ""
    return (
        f"{int(flags.sum())} of {flags.size} per-query fits (indices "
        f"{np.flatnonzero(flags)[:10].tolist()}{more})"
    )


def _name(optimizer) -> str:
    return repr(optimizer) if isinstance(optimizer, str) else "the optax transformation given"


def warn_unconverged(converged, options, nonfinite=None) -> None:
    """One warning naming the cap and how many fits hit it (``converged``: bool or ``(B,)``;
    ``options``: the fit's ``Options``), and one naming the fits whose optimiser took a
    non-finite step (``nonfinite``: like ``converged``, or None: none)."""
    flags = np.atleast_1d(np.asarray(converged, bool))
    bad = np.zeros_like(flags) if nonfinite is None else np.atleast_1d(np.asarray(nonfinite, bool))
    if bad.any():
        warnings.warn(
            f"{_which(bad)}: the optimizer ({_name(options.optimizer)}) produced a non-finite step "
            "(hyperparameters or objective not finite); the step was rejected and the fit "
            "stopped at its last finite point (FitResult.nonfinite_step, converged False): "
            "lower the learning rate, or bound the steps (e.g. optax.chain("
            "optax.clip_by_global_norm(1.0), ...))",
            NonFiniteStepWarning,
            stacklevel=3,
        )
    flags = flags | bad  # those stopped for a non-finite step, not at the cap
    if flags.all():
        return
    which = _which(~flags)
    cap = "BFGS(max_steps" if options.optimizer == "bfgs" else "Optax(steps"
    warnings.warn(
        f"{which} stopped at {cap}={options.n_iter}) before converging (method="
        f"{options.method!r}, tol={options.tol}): the hyperparameters may be far from the "
        f"optimum; raise the optimizer's cap (FitResult.converged says which)",
        LearningConvergenceWarning,
        stacklevel=3,
    )


def flat_values(free, per_query) -> np.ndarray:
    """The free unconstrained values as ``(B, P)`` (``B = 1`` for a shared fit)."""
    rows = [np.asarray(x).reshape(np.shape(x)[0] if per_query else 1, -1) for x in free]
    return np.concatenate(rows, axis=1)


def warn_multimodal(ends, nats: float = 1.0, apart: float = 1.0) -> None:
    """Warn where restarts end at different optima of almost the same objective.

    ``ends``: per start, ``(objective (B,) or (), free values (B, P))``. A query is multimodal
    when a start other than its best ends within ``nats`` of the best objective with some
    unconstrained (log) hyperparameter more than ``apart`` away (a factor ``e``): its data do not
    choose between the two, and the fitted values are one of several.
    """
    if len(ends) < 2:
        return
    scores = np.stack([np.atleast_1d(sc) for sc, _ in ends])  # (S, B)
    values = np.stack([v for _, v in ends])  # (S, B, P)
    top = np.argmax(scores, axis=0)
    B = scores.shape[1]
    best_values = values[top, np.arange(B)]  # (B, P)
    close = scores >= scores[top, np.arange(B)] - nats
    far = np.max(np.abs(values - best_values), axis=-1) > apart
    which = np.flatnonzero(np.any(close & far, axis=0))
    if which.size:
        where = "the fit" if B == 1 else f"queries {which[:10].tolist()}"
        warnings.warn(
            f"restarts of {where} ended within {nats} nats of the best objective at "
            "hyperparameters more than a factor e apart: the evidence has several modes, and the "
            "fitted prior is one of them (a stronger hyperprior_scale or more pairs decide)",
            MultimodalEvidenceWarning,
            stacklevel=4,
        )
