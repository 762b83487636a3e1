"""Hyperparameters: constraints in one place, and the map to unconstrained space.

Every hyperparameter of a kernel is a field of a frozen dataclass pytree whose field metadata
names its constraint. Fitting (EM-EP, evidence maximisation) works on unconstrained values:
``unconstrain(obj)`` maps every constrained field to the real line and ``constrain`` maps back.

============  ===========================  ==================================  =================
constraint    domain                       constrained = f(u)                  u = f^-1(value)
============  ===========================  ==================================  =================
Positive      ``(lower, inf)``             ``lower + exp(u)``                  ``log(v - lower)``
Bounded       ``(low, high)``              ``low + (high-low) sigmoid(u)``     ``logit(...)``
Real          ``(-inf, inf)``              ``u``                               ``value``
============  ===========================  ==================================  =================

``exp`` (not softplus) for positive scales makes a log-normal hyperprior a normal prior on ``u``
(the form the learning module uses). A ``Positive`` lower bound above zero or a ``Bounded``
range is how a lengthscale is kept from collapsing to zero during optimisation.
"""

from __future__ import annotations

import dataclasses
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

__all__ = [
    "Bounded",
    "Positive",
    "Real",
    "check_hyperparameters",
    "constrain",
    "constrain_host",
    "constraint_of",
    "map_params",
    "param",
    "pytree_dataclass",
    "static",
    "unconstrain",
    "unconstrain_host",
]


class Positive(NamedTuple):
    """A value in ``(lower, inf)``, mapped by ``lower + exp(u)``."""

    lower: float = 0.0

    def forward(self, u, xp=jnp):
        return self.lower + xp.exp(u)

    def inverse(self, value, xp=jnp):
        return xp.log(value - self.lower)


class Real(NamedTuple):
    """A value anywhere on the real line (finite), mapped by the identity: a location, such as
    the ordinal model's lowest threshold."""

    def forward(self, u, xp=jnp):
        return u

    def inverse(self, value, xp=jnp):
        return value


class Bounded(NamedTuple):
    """A value in ``(low, high)``, mapped by ``low + (high - low) * sigmoid(u)``."""

    low: float
    high: float

    def forward(self, u, xp=jnp):
        sigmoid = jax.nn.sigmoid(u) if xp is jnp else 0.5 * (1.0 + np.tanh(0.5 * u))
        return self.low + (self.high - self.low) * sigmoid

    def inverse(self, value, xp=jnp):
        z = (value - self.low) / (self.high - self.low)
        return xp.log(z) - xp.log1p(-z)


def param(constraint: Positive | Bounded, **kwargs):
    """A dataclass field holding an array hyperparameter with the given constraint."""
    return dataclasses.field(metadata={"constraint": constraint}, **kwargs)


def static(**kwargs):
    """A dataclass field that is static (a shape, flag or name; never an array)."""
    return dataclasses.field(metadata={"static": True}, **kwargs)


def pytree_dataclass(cls):
    """Make ``cls`` a frozen dataclass registered as a JAX pytree.

    Fields made with ``static`` are metadata (part of the tree structure, hashed by ``jit``);
    all others are leaves (arrays, or nested pytrees).
    """
    cls = dataclasses.dataclass(frozen=True)(cls)
    fields = dataclasses.fields(cls)
    meta = [f.name for f in fields if f.metadata.get("static", False)]
    data = [f.name for f in fields if not f.metadata.get("static", False)]
    return jax.tree_util.register_dataclass(cls, data_fields=data, meta_fields=meta)


def constraint_of(obj, name: str) -> Positive | Bounded | None:
    """The constraint of field ``name`` of a dataclass ``obj`` (``None`` if unconstrained)."""
    (f,) = [f for f in dataclasses.fields(obj) if f.name == name]
    return f.metadata.get("constraint")


def map_params(obj, fn):
    """Rebuild ``obj`` (dataclasses, nested, in tuples) with ``fn(owner, name, constraint, value)``
    applied to every constrained hyperparameter; everything else is kept as is."""
    if not dataclasses.is_dataclass(obj):
        if isinstance(obj, tuple | list):
            return type(obj)(map_params(o, fn) for o in obj)
        return obj
    changes = {}
    for f in dataclasses.fields(obj):
        value = getattr(obj, f.name)
        constraint = f.metadata.get("constraint")
        if constraint is not None and value is not None:
            changes[f.name] = fn(obj, f.name, constraint, value)
        elif not f.metadata.get("static", False):
            changes[f.name] = map_params(value, fn)
    return dataclasses.replace(obj, **changes)


def unconstrain(obj):
    """Map every constrained hyperparameter of ``obj`` (recursively) to the real line."""
    return map_params(obj, lambda _o, _n, c, v: c.inverse(jnp.asarray(v)))


def constrain(obj):
    """Inverse of ``unconstrain``: map unconstrained values back to their domains."""
    return map_params(obj, lambda _o, _n, c, u: c.forward(jnp.asarray(u)))


def unconstrain_host(obj):
    """``unconstrain`` in NumPy (float64 host arrays): no device work, nothing compiled
    (an eager ``jnp`` operation compiles a program per shape and dtype)."""
    return map_params(obj, lambda _o, _n, c, v: c.inverse(np.asarray(v, np.float64), xp=np))


def constrain_host(obj):
    """``constrain`` in NumPy (float64 host arrays)."""
    return map_params(obj, lambda _o, _n, c, u: c.forward(np.asarray(u, np.float64), xp=np))


def _describe(c: Positive | Bounded | Real, strict: bool) -> tuple[float, float, str]:
    """``(low, high, phrase)`` of the domain a value must lie in."""
    if isinstance(c, Real):
        return -np.inf, np.inf, "real"
    if isinstance(c, Bounded):
        return c.low, c.high, f"in ({c.low}, {c.high})"
    low = c.lower if strict else 0.0
    return low, np.inf, f"> {low}" + (" (its constraint's lower bound)" if low > 0 else "")


def check_hyperparameters(obj, strict: bool = False, where: str = "") -> None:
    """``ValueError`` naming the first hyperparameter of ``obj`` (recursively) that is not finite
    or lies outside its domain: ``XPGP.sigma must be finite and > 0, got 0.0``.

    The domain is ``(0, inf)`` for a ``Positive`` value (any positive scale is a valid
    kernel) or, with ``strict`` (for learning, which works on ``log(value - lower)``), its
    constraint's own ``(lower, inf)``; ``(low, high)`` for a ``Bounded`` one. Traced values
    (inside a caller's ``jit``) are not checked. ``where`` prefixes the message (e.g. ``"the
    initial "``).
    """

    def check(owner, name, constraint, value):
        if isinstance(value, jax.core.Tracer):
            return value
        arr = np.asarray(value)
        if arr.dtype.kind not in "biuf":
            raise ValueError(
                f"{where}{type(owner).__name__}.{name} must be a real number or array, got "
                f"{value!r}"
            )
        low, high, phrase = _describe(constraint, strict)
        bad = ~np.isfinite(arr) | ~(arr > low) | ~(arr < high)
        if np.any(bad):
            index = tuple(int(i) for i in np.argwhere(bad)[0]) if arr.ndim else ()
            label = f"{name}[{', '.join(map(str, index))}]" if index else name
            raise ValueError(
                f"{where}{type(owner).__name__}.{label} must be finite and {phrase}, got "
                f"{arr[index] if index else arr.item()}"
            )
        return value

    map_params(obj, check)
