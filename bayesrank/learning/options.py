"""``fit_hyperparameters``' options checked by name, before anything runs."""

from __future__ import annotations

from ..data.checks import check_choice, check_float, check_int
from ..inference.ep.fit import MAX_ITER_LIMIT, check_settings
from .em import check_optimizer

__all__ = ["check_options"]


def check_options(o: dict) -> None:
    """``fit_hyperparameters``' options by name (``ValueError`` naming the option)."""
    if o["method"] not in ("em", "evidence"):
        raise ValueError(f"method must be 'em' or 'evidence', got {o['method']!r}")
    for name in ("n_iter", "m_steps", "ep_max_iter", "restarts"):
        check_int(o[name], name, low=0 if name == "restarts" else 1, high=MAX_ITER_LIMIT)
    for name in ("learning_rate", "tol"):
        check_float(o[name], name, 0.0, low_open=True)
    for name in ("hyperprior_scale", "ep_tol", "ep_step_tol"):
        check_float(o[name], name, 0.0, low_open=True, allow_none=True)
    scale = o["hyperprior_scale"]
    if scale is not None and not (1e-150 < scale < 1e150):  # its precision scale^-2 in float64
        raise ValueError(f"hyperprior_scale must be in (1e-150, 1e150) or None, got {scale!r}")
    check_settings(o["schedule"], "full", 1.0)
    check_choice(o["inference"], "inference", ("ep", "laplace"))
    check_optimizer(o["optimizer"] or ("lbfgs" if o["method"] == "em" else "bfgs"), o["method"])
