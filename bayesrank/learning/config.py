"""What is learned and how it is parameterised: trainable flags, the free/fixed split of the
prior's unconstrained leaves, the fit's static configuration and its traced settings.

Hyperparameters are optimised in unconstrained coordinates (``bayesrank.kernels.params``).
The prior's unconstrained leaves are split into ``free`` (trainable) and ``fixed`` lists; a
fit's static ``Config`` (hashed by ``jit``: structure, flags, names and iteration limits)
holds how to put them back together, and its ``Traced`` (traced: floats are never static)
the tolerances, the learning rate and the hyperprior's scale, so changing them compiles nothing.

What is learned by default: every hyperparameter of the prior except the confounded scales
(``FROZEN_BY_DEFAULT``): ``sigma``, the RBF / ARD amplitude ``kappa`` and the regularized
Laplacian's ``beta`` (``docs/guide/model.md``, identifiability).
"""

from __future__ import annotations

import dataclasses
import functools
import types
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from ..kernels.params import constrain, constrain_host, unconstrain_host
from ..kernels.xpgp import FROZEN_BY_DEFAULT, XPGP, default_trainable

__all__ = ["FROZEN_BY_DEFAULT", "Config", "Structural", "Traced", "default_trainable"]


class Config(NamedTuple):
    """A fit's static configuration (part of every compiled program's cache key)."""

    treedef: Any  # of unconstrain(prior)
    flags: tuple  # per leaf: trainable
    method: str  # "em" or "evidence"
    optimizer: Any  # "lbfgs", "adam", "bfgs" or an optax GradientTransformation
    m_steps: int  # optimiser steps per M-step (EM)
    ep_max_iter: int
    schedule: str  # EP's schedule
    hyperprior: bool  # a hyperprior on the unconstrained values (MAP-II)
    single: bool = False  # one query: the steps' EP also stops on the sites' residual
    engine: Any = None  # the posteriors' and the evidence's engine: None, EP's path; or another


class Traced(NamedTuple):
    """A fit's traced settings (arrays: changing them compiles nothing)."""

    learning_rate: jax.Array  # Adam's step size
    hyperprior_scale: jax.Array  # sd of the normal hyperprior on each unconstrained value
    ep_tol: jax.Array  # EP's tolerance for E-steps and final posteriors
    ep_step_tol: jax.Array  # EP's tolerance inside evidence steps (absolute and relative)


def combine(free, fixed, cfg: Config):
    """The constrained prior from its ``free`` and ``fixed`` unconstrained leaves."""
    free, fixed = list(free), list(fixed)
    leaves = [free.pop(0) if f else fixed.pop(0) for f in cfg.flags]
    return constrain(jax.tree_util.tree_unflatten(cfg.treedef, leaves))


def combine_host(free, fixed, cfg: Config, dtype):
    """``combine`` in NumPy, leaves cast to ``dtype`` (nothing compiled)."""
    free, fixed = list(free), list(fixed)
    leaves = [np.asarray(free.pop(0) if f else fixed.pop(0)) for f in cfg.flags]
    prior = constrain_host(jax.tree_util.tree_unflatten(cfg.treedef, leaves))
    return jax.tree_util.tree_map(lambda x: np.asarray(x, dtype), prior)


def log_hyperprior(free, u0, cfg: Config, settings: Traced):
    """``-1/2 sum ||u - u0||^2 / scale^2``: a normal prior on each free unconstrained value
    centred on ``u0`` (a log-normal one on a positive scale); 0 without a hyperprior."""
    if not cfg.hyperprior:
        return 0.0
    total = sum(jnp.sum((f - c) ** 2) for f, c in zip(free, u0, strict=True))
    return -0.5 * total / settings.hyperprior_scale**2


def finite_or_inf(value):
    """Non-finite objective values become +inf, which a line search rejects."""
    return jnp.where(jnp.isfinite(value), value, jnp.inf)


def resolve_trainable(prior, trainable):
    """The fit's trainable flags for ``prior`` (the starting prior, weights added):
    ``trainable`` as given, ``default_trainable(prior)`` where it is None."""
    if trainable is None:
        return default_trainable(prior)
    if isinstance(trainable, XPGP) and trainable.weights is None and prior.weights is not None:
        # flags made from a prior without weights (default_trainable(prior)): the fit adds unit
        # weights (with_weights), learned as default_trainable would learn them
        return dataclasses.replace(trainable, weights=True)
    return trainable


def split_leaves(prior, trainable, dtype):
    """``(free, fixed, treedef, flags)``: the prior's unconstrained leaves (host arrays of
    ``dtype``) split by ``trainable`` (a pytree of bools like the prior)."""
    leaves, treedef = jax.tree_util.tree_flatten(unconstrain_host(prior))
    flags = tuple(bool(f) for f in jax.tree_util.tree_leaves(trainable))
    if len(flags) != len(leaves):
        raise ValueError("trainable must have the structure of the prior")
    leaves = [np.asarray(x, dtype) for x in leaves]
    free = [x for x, f in zip(leaves, flags, strict=True) if f]
    fixed = [x for x, f in zip(leaves, flags, strict=True) if not f]
    return free, fixed, treedef, flags


class Structural:
    """A user's optax transformation in a ``Config``, equal to another built the same way.

    ``jit`` hashes its static arguments, and an optax transformation is a pair of closures: two
    calls of ``optax.adam(0.05)`` give unequal objects, so each fit with a freshly built
    optimiser compiled its programs again. This wrapper compares by structure instead: the
    closures' code, and recursively what they capture (numbers, strings, arrays by value, other
    closures, tuples and dicts). Two transformations with equal structure compute the same
    thing, so they may share compiled programs; anything it cannot read (an object of another
    kind) is compared by identity, as before.
    """

    def __init__(self, transformation):
        self.transformation = transformation
        self._key = _structure(transformation, set())

    def __eq__(self, other) -> bool:
        return isinstance(other, Structural) and self._key == other._key

    def __hash__(self) -> int:
        return hash(self._key)

    def __repr__(self) -> str:
        return f"Structural({self.transformation!r})"


def _structure(obj, seen: set):
    """A hashable description of ``obj`` (see ``Structural``)."""
    if obj is None or isinstance(obj, bool | int | float | complex | str | bytes):
        return (type(obj).__name__, obj)
    if isinstance(obj, np.generic):
        return ("scalar", obj.dtype.str, obj.item())
    if isinstance(obj, np.ndarray | jax.Array) and not isinstance(obj, jax.core.Tracer):
        value = np.asarray(obj)
        return ("array", value.dtype.str, value.shape, value.tobytes())
    if id(obj) in seen:  # a closure that refers to itself
        return ("cycle",)
    seen = seen | {id(obj)}
    if isinstance(obj, types.FunctionType):
        cells = []
        for cell in obj.__closure__ or ():
            try:
                cells.append(_structure(cell.cell_contents, seen))
            except ValueError:  # an empty cell
                cells.append(("empty",))
        return (
            "function",
            obj.__code__,
            tuple(cells),
            _structure(obj.__defaults__, seen),
            _structure(obj.__kwdefaults__, seen),
        )
    if isinstance(obj, functools.partial):
        return ("partial", _structure((obj.func, obj.args, obj.keywords), seen))
    if isinstance(obj, tuple | list):  # NamedTuples (the transformations) keep their type
        return (type(obj), tuple(_structure(o, seen) for o in obj))
    if isinstance(obj, dict):
        items = sorted(obj.items(), key=lambda kv: repr(kv[0]))
        return ("dict", tuple((repr(k), _structure(v, seen)) for k, v in items))
    return ("object", id(obj))  # identity: alive as long as the wrapper holds the transformation
