"""``fit_hyperparameters``' options resolved before anything runs: the groups (``optimizer``,
``engine``, ``start``) with their defaults, the old keywords mapped onto them, one ``Options``.

The old keywords (``n_iter``, ``ep_max_iter``, ``restarts``, ...) still work: each sets one
field of its group, with a ``DeprecationWarning`` naming the new spelling; so do ``ep=`` (the
engine ``EP``'s old name) and ``inference="ep" | "laplace"`` (the engine by name). Giving an
old keyword and its group object both is a ``ValueError`` naming both.
"""

from __future__ import annotations

import dataclasses
import warnings
from typing import Any, NamedTuple

import jax.numpy as jnp
import numpy as np
import optax

from ..data.checks import check_bool, check_choice, check_float, check_int
from ..inference.engine import GaussianEngine
from ..inference.engines import EP, names
from ..inference.engines import resolve as resolve_engine
from ..inference.ep.settings import compact_repr
from .design import GlobalStart, check_design
from .hyperpriors import check_hyperprior
from .settings import BFGS, Optax, Start

__all__ = ["DEPRECATED", "OLD_ENGINE_KEYWORDS", "Options", "learning_engine", "resolve"]

#: The old keywords that set the whole engine: ``ep=EP(...)`` (a keyword named after the
#: settings object, not the engine's shorthand) and ``inference="laplace"``.
OLD_SETTINGS, OLD_INFERENCE = OLD_ENGINE_KEYWORDS = ("ep", "inference")

#: The old keywords: each one field of a group (``n_iter``: the optimiser's cap or count).
DEPRECATED = {
    "ep_max_iter": ("engine", "max_iter"),
    "ep_tol": ("engine", "tol"),
    "ep_step_tol": ("engine", "step_tol"),
    "schedule": ("engine", "schedule"),
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
    ep: EP  # the EP path's settings: the engine where it is EP, else EP()
    engine: GaussianEngine  # the engine of the posteriors and the evidence
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


def resolve(method, optimizer, engine, start, deprecated: dict, **plain) -> Options:
    """The ``Options`` of ``fit_hyperparameters``' keywords (``plain``: those that stay
    keywords; ``deprecated``: the old ones). ``TypeError`` for an unknown keyword,
    ``DeprecationWarning`` for an old one, ``ValueError`` naming what is at fault."""
    if unknown := sorted(set(deprecated) - set(DEPRECATED) - set(OLD_ENGINE_KEYWORDS)):
        raise TypeError(f"fit_hyperparameters() got an unexpected keyword argument {unknown[0]!r}")
    check_choice(method, "method", ("em", "evidence"))
    notes = []
    engine = _engine(engine, deprecated, notes)
    groups = {"optimizer": optimizer, "engine": engine, "start": start}
    for name, (group, _) in DEPRECATED.items():
        given = groups[group]
        if name in deprecated and isinstance(given, BFGS | Optax | GaussianEngine | Start):
            raise ValueError(
                f"{name}={deprecated[name]!r} and {group}={given!r} both set the {group}: "
                f"give {name}'s value in {group} alone"
            )
    engine, start = _engine_fields(engine, deprecated, notes), _start(start, deprecated, notes)
    optimizer = _optimizer(method, optimizer, deprecated, notes)
    if notes:
        warnings.warn(
            "fit_hyperparameters: " + "; ".join(notes) + " (the old keywords are deprecated)",
            DeprecationWarning,
            stacklevel=3,
        )
    return _options(method, optimizer, engine, start, plain)


def learning_engine(options: dict) -> GaussianEngine:
    """The engine a fit with keywords ``options`` runs, without a warning: for callers that
    pass keywords through (``XPGPModel.fit``)."""
    old = {k: v for k, v in options.items() if k in DEPRECATED or k in OLD_ENGINE_KEYWORDS}
    engine = _engine(options.get("engine"), old, [])
    return _engine_fields(engine, old, [])


def _engine(engine, deprecated: dict, notes: list) -> GaussianEngine | None:
    """The ``engine`` group: as given (``None``: ``EP()``, a name resolved), or the old
    ``ep=`` (an ``EP``) or ``inference=`` (a name) in its place."""
    # ep=None was the group's default; inference=None a value (refused, naming it)
    old = [
        n
        for n in OLD_ENGINE_KEYWORDS
        if n in deprecated and (n, deprecated[n]) != (OLD_SETTINGS, None)
    ]
    if old and engine is not None:
        raise ValueError(
            f"{old[0]}={deprecated[old[0]]!r} and engine={engine!r} both set the engine: give "
            "the engine alone"
        )
    if len(old) == 2:
        ep, inference = deprecated[OLD_SETTINGS], deprecated[OLD_INFERENCE]
        if resolve_engine(inference, "inference") != EP() or not isinstance(ep, EP):
            raise ValueError(
                f"ep={ep!r} and inference={inference!r} both set the engine: give engine=... alone"
            )
        old = [OLD_SETTINGS]
    if old == [OLD_SETTINGS]:
        engine = deprecated[OLD_SETTINGS]
        if not isinstance(engine, EP):
            raise ValueError(f"ep must be an EP, got {type(engine).__name__}")
        notes.append(f"ep={compact_repr(engine)} -> engine={compact_repr(engine)}")
    elif old == [OLD_INFERENCE]:
        name = deprecated[OLD_INFERENCE]
        check_choice(name, "inference", names(gaussian=True))
        engine = resolve_engine(name, "inference")
        notes.append(f"inference={name!r} -> engine={engine!r}")
    return None if engine is None else resolve_engine(engine, gaussian=True)


def _engine_fields(engine: GaussianEngine | None, deprecated: dict, notes: list):
    """The engine (``None``: ``EP()``) with the old EP keywords (``ep_max_iter``, ...)
    applied."""
    engine = EP() if engine is None else engine
    olds = {k: field for k, (g, field) in DEPRECATED.items() if g == "engine"}
    if not isinstance(engine, EP):
        if given := sorted(set(olds) & set(deprecated)):
            raise ValueError(f"{given[0]} is EP's setting, not {engine!r}'s")
        return engine
    return _group(engine, olds, deprecated, notes)


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
    group = {EP: "engine", Start: "start"}.get(type(base), "optimizer")
    notes.append(f"{spelled} -> {group}={compact_repr(new)}")
    return new


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


def _options(method, optimizer, engine: GaussianEngine, start: Start, plain: dict) -> Options:
    """``Options`` of the resolved groups and the plain keywords, checked together."""
    ep = engine if isinstance(engine, EP) else EP()
    for name in _EP_FIXED:
        if getattr(ep, name) != getattr(EP(), name):
            raise ValueError(
                f"fit_hyperparameters' EP takes max_iter, tol, step_tol and schedule (it "
                f"accelerates parallel sweeps itself); got engine.{name}={getattr(ep, name)!r}"
            )
    check_int(ep.max_iter, "engine.max_iter", low=1)
    scale = plain["hyperprior_scale"]
    check_float(scale, "hyperprior_scale", 0.0, low_open=True, allow_none=True)
    bound = scale_bound()
    if scale is not None and not (1 / bound < scale < bound):
        raise ValueError(
            f"hyperprior_scale must be in ({1 / bound:g}, {bound:g}) or None in "
            f"{np.dtype(jnp.result_type(float)).name}, got {scale!r}"
        )
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
        engine=engine,
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
    )


def scale_bound() -> float:
    """``hyperprior_scale`` must lie in ``(1 / bound, bound)``: its precision ``scale^-2`` and
    ``scale^2`` finite, with room to spare, in the working dtype (1e150 in float64, 1e18 in
    float32, where a smaller scale underflows to 0 when cast)."""
    return 1e150 if jnp.result_type(float) == jnp.float64 else 1e18
