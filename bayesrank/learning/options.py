"""``fit_hyperparameters``' options resolved before anything runs: the groups (``optimizer``,
``ep``, ``start``) with their defaults, the old keywords mapped onto them, one ``Options``.

The old keywords (``n_iter``, ``ep_max_iter``, ``restarts``, ...) still work: each sets one
field of its group, with a ``DeprecationWarning`` naming the new spelling. Giving an old
keyword and its group object both is a ``ValueError`` naming both.
"""

from __future__ import annotations

import dataclasses
import warnings
from typing import Any, NamedTuple

import jax.numpy as jnp
import numpy as np
import optax

from ..data.checks import check_bool, check_choice, check_float, check_int
from ..inference.ep.settings import EPSettings, compact_repr
from .design import GlobalStart, check_design
from .hyperpriors import check_hyperprior
from .settings import BFGS, Optax, Start

__all__ = ["DEPRECATED", "EP_MAX_ITER", "Options", "ep_settings", "resolve"]

#: EP's sweeps in a fit (E-steps and final posteriors) where ``EPSettings.max_iter`` is None.
EP_MAX_ITER = 200

#: The old keywords: each one field of a group (``n_iter``: the optimiser's cap or count).
DEPRECATED = {
    "ep_max_iter": ("ep", "max_iter"),
    "ep_tol": ("ep", "tol"),
    "ep_step_tol": ("ep", "step_tol"),
    "schedule": ("ep", "schedule"),
    "init": ("start", "init"),
    "design": ("start", "design"),
    "coarse": ("start", "coarse"),
    "laplace_start": ("start", "laplace"),
    "restarts": ("start", "restarts"),
    "n_iter": ("optimizer", "steps"),
    "m_steps": ("optimizer", "m_steps"),
    "learning_rate": ("optimizer", "learning_rate"),
    "tol": ("optimizer", "tol"),
}

#: The EP fields a fit sets itself (it accelerates parallel sweeps), at their defaults there.
_EP_FIXED = ("rtol", "damping", "adapt_damping", "precision", "accelerate", "residual_stop")


class Options(NamedTuple):
    """A fit's options, checked; ``optimizer`` by its internal name (``"bfgs"``, ``"lbfgs"``,
    ``"adam"``) or the user's optax transformation, as ``Config`` keys compiled programs."""

    method: str
    optimizer: Any
    n_iter: int  # BFGS's cap, or the optax steps (EM iterations)
    m_steps: int
    learning_rate: float
    tol: float
    ep: EPSettings  # max_iter set
    hyperprior_scale: float | None
    hyperprior: dict | None
    trainable: Any
    init: bool
    design: GlobalStart | None
    coarse: int | str | None
    laplace_start: bool
    restarts: int
    key: Any
    progress: bool
    inference: str


def resolve(method, optimizer, ep, start, deprecated: dict, **plain) -> Options:
    """The ``Options`` of ``fit_hyperparameters``' keywords (``plain``: those that stay
    keywords; ``deprecated``: the old ones). ``TypeError`` for an unknown keyword,
    ``DeprecationWarning`` for an old one, ``ValueError`` naming what is at fault."""
    if unknown := sorted(set(deprecated) - set(DEPRECATED)):
        raise TypeError(f"fit_hyperparameters() got an unexpected keyword argument {unknown[0]!r}")
    check_choice(method, "method", ("em", "evidence"))
    groups = {"optimizer": optimizer, "ep": ep, "start": start}
    for name, (group, _) in DEPRECATED.items():
        given = groups[group]
        if name in deprecated and isinstance(given, BFGS | Optax | EPSettings | Start):
            raise ValueError(
                f"{name}={deprecated[name]!r} and {group}={given!r} both set the {group}: "
                f"give {name}'s value in {group} alone"
            )
    notes = []
    ep, start = _ep(ep, deprecated, notes), _start(start, deprecated, notes)
    optimizer = _optimizer(method, optimizer, deprecated, notes)
    if notes:
        warnings.warn(
            "fit_hyperparameters: " + "; ".join(notes) + " (the old keywords are deprecated)",
            DeprecationWarning,
            stacklevel=3,
        )
    return _options(method, optimizer, ep, start, plain)


def ep_settings(options: dict) -> EPSettings:
    """The EP settings a fit with keywords ``options`` runs (``max_iter`` set), without a
    warning: for callers that pass keywords through (``XPGPModel.fit``)."""
    ep = _ep(options.get("ep"), {k: v for k, v in options.items() if k in DEPRECATED}, [])
    return dataclasses.replace(ep, max_iter=ep.cap(EP_MAX_ITER))


def _group(base, olds: dict, deprecated: dict, notes: list):
    """``base`` with the fields the old keywords in ``olds`` (name -> field) set."""
    given = {field: deprecated[name] for name, field in olds.items() if name in deprecated}
    if not given:
        return base
    spelled = ", ".join(f"{n}={deprecated[n]!r}" for n in olds if n in deprecated)
    try:
        new = dataclasses.replace(base, **given)
    except ValueError as error:  # name the keyword the user typed, and the field
        raise ValueError(f"{spelled}: {error}") from None
    group = {EPSettings: "ep", Start: "start"}.get(type(base), "optimizer")
    notes.append(f"{spelled} -> {group}={compact_repr(new)}")
    return new


def _ep(ep, deprecated, notes) -> EPSettings:
    return _settings(ep, EPSettings, "ep", deprecated, notes)


def _start(start, deprecated, notes) -> Start:
    return _settings(start, Start, "start", deprecated, notes)


def _settings(value, kind, name, deprecated, notes):
    """The group ``name`` (``kind()`` when None) with its deprecated keywords applied."""
    if value is None:
        value = kind()
    if not isinstance(value, kind):
        raise ValueError(f"{name} must be a {kind.__name__}, got {type(value).__name__}")
    olds = {k: field for k, (g, field) in DEPRECATED.items() if g == name}
    return _group(value, olds, deprecated, notes)


def _optimizer(method, optimizer, deprecated, notes) -> BFGS | Optax:
    """The optimiser object: ``BFGS``/``Optax`` as given; an optax transformation in ``Optax``;
    the old names (``"bfgs"``, ``"lbfgs"``, ``"adam"``) and keywords mapped onto them."""
    named = None  # an old name: "bfgs", "lbfgs" or "adam"
    if isinstance(optimizer, str) and optimizer in ("bfgs", "lbfgs", "adam"):
        named, optimizer = optimizer, BFGS() if optimizer == "bfgs" else Optax(optimizer)
    elif optimizer is None:
        optimizer = BFGS() if method == "evidence" else Optax()
    elif isinstance(optimizer, optax.GradientTransformation):
        optimizer = Optax(optimizer)
    elif not isinstance(optimizer, BFGS | Optax):
        raise ValueError(
            "optimizer must be BFGS(...), Optax(...) or an optax GradientTransformation, got "
            f"{optimizer!r}"
        )
    if isinstance(optimizer, BFGS) and method != "evidence":
        raise ValueError(
            "optimizer BFGS() maximises the evidence: method='em' takes Optax(...) (L-BFGS "
            "M-steps by default)"
        )
    if "n_iter" in deprecated and deprecated["n_iter"] is None:  # the optimiser's default
        deprecated = {k: v for k, v in deprecated.items() if k != "n_iter"}
        notes.append("n_iter=None -> drop it (the optimizer's default)")
    if isinstance(optimizer, BFGS):
        for name in ("m_steps", "learning_rate"):  # BFGS has none: checked, then dropped
            if name in deprecated:
                Optax(**{name: deprecated[name]})
                notes.append(f"{name}={deprecated[name]!r} does not apply to BFGS: drop it")
        olds = {"n_iter": "max_steps", "tol": "tol"}
    else:
        olds = {
            "n_iter": "steps",
            "m_steps": "m_steps",
            "learning_rate": "learning_rate",
            "tol": "tol",
        }
    before = len(notes)
    optimizer = _group(optimizer, olds, deprecated, notes)
    if named is not None:  # one note for the name and the keywords
        spelled = f"optimizer={named!r}"
        if len(notes) > before:
            notes[-1] = f"{spelled}, {notes[-1]}"
        else:
            notes.append(f"{spelled} -> optimizer={compact_repr(optimizer)}")
    return optimizer


def _options(method, optimizer, ep: EPSettings, start: Start, plain: dict) -> Options:
    """``Options`` of the resolved groups and the plain keywords, checked together."""
    for name in _EP_FIXED:
        if getattr(ep, name) != getattr(EPSettings(), name):
            raise ValueError(
                f"fit_hyperparameters' EP takes max_iter, tol, step_tol and schedule (it "
                f"accelerates parallel sweeps itself); got ep.{name}={getattr(ep, name)!r}"
            )
    ep = dataclasses.replace(ep, max_iter=ep.cap(EP_MAX_ITER))
    check_int(ep.max_iter, "ep.max_iter", low=1)
    scale = plain["hyperprior_scale"]
    check_float(scale, "hyperprior_scale", 0.0, low_open=True, allow_none=True)
    bound = scale_bound()
    if scale is not None and not (1 / bound < scale < bound):
        raise ValueError(
            f"hyperprior_scale must be in ({1 / bound:g}, {bound:g}) or None in "
            f"{np.dtype(jnp.result_type(float)).name}, got {scale!r}"
        )
    check_choice(plain["inference"], "inference", ("ep", "laplace"))
    check_bool(plain["progress"], "progress")
    bfgs = isinstance(optimizer, BFGS)
    name = "bfgs" if bfgs else optimizer.transformation
    hyperprior = check_hyperprior(plain["hyperprior"])
    if hyperprior and not bfgs:
        raise ValueError("a named hyperprior needs method='evidence' with the BFGS optimizer")
    return Options(
        method=method,
        optimizer=name,
        n_iter=optimizer.max_steps if bfgs else optimizer.steps,
        m_steps=20 if bfgs else optimizer.m_steps,
        learning_rate=0.05 if bfgs else optimizer.learning_rate,
        tol=optimizer.tol,
        ep=ep,
        hyperprior_scale=scale,
        hyperprior=hyperprior,
        trainable=plain["trainable"],
        init=start.init,
        design=check_design(start.design, method, name),
        coarse=start.coarse,
        laplace_start=start.laplace,
        restarts=start.restarts,
        key=plain["key"],
        progress=plain["progress"],
        inference=plain["inference"],
    )


def scale_bound() -> float:
    """``hyperprior_scale`` must lie in ``(1 / bound, bound)``: its precision ``scale^-2`` and
    ``scale^2`` finite, with room to spare, in the working dtype (1e150 in float64, 1e18 in
    float32, where a smaller scale underflows to 0 when cast)."""
    return 1e150 if jnp.result_type(float) == jnp.float64 else 1e18
