"""Hyperpriors on named hyperparameters, for MAP-II evidence maximisation by BFGS.

By default a fit puts a normal prior of sd ``hyperprior_scale`` on each free unconstrained value,
centred on its start (a log-normal on a positive scale). ``hyperprior=`` names other priors for
some hyperparameters, by ``"Class.field"`` (``"ARD.lengthscales"``, ``"XPGP.weights"``,
``"Independent.scale"``, ...), each a distribution over the *constrained* value; the others keep
the default. Densities are evaluated without the change of variables' Jacobian, as GPyTorch and
BoTorch do (a MAP estimate of the value, not of its logarithm):

- ``Gamma`` ``(concentration a, rate b)``:
  ``log p(v) = a log b - log Gamma(a) + (a - 1) log(v / s) - b v / s - log s``, with ``s`` the
  feature's range (max minus min over the problem's entities) where ``relative`` (lengthscales
  measured in units of the range, as BoTorch's priors are for inputs scaled to ``[0, 1]``), else 1;
  a fit refuses ``a < 1`` (the density is unbounded at 0, so the MAP estimate does not exist);
- ``SmoothedBox`` ``(a, b, sigma)``: flat on ``[a, b]`` with normal tails of sd ``sigma``,
  ``log p(v) = log N(d | 0, sigma) - log(1 + (b - a) / (sqrt(2 pi) sigma))``,
  ``d = max(|v - (a + b) / 2| - (b - a) / 2, 0)`` (GPyTorch's ``SmoothedBoxPrior``).

``botorch_priors`` gives BoTorch ``PairwiseGP``'s defaults (``botorch/models/pairwise_gp.py``):
``Gamma(2.4, 2.7)`` on each ARD lengthscale of inputs scaled to ``[0, 1]``, and a smoothed box
``[0.01, 100]`` (``sigma = 0.01``) on the output scale ``o``. Its likelihood
``Phi((f_i - f_j) / sqrt 2)`` makes ``K = o k / 2`` in bayesrank's scaling, so ``o = 2 w^2`` and
the box is ``w in [sqrt(0.005), sqrt(50)]``, with tails of sd ``0.01 / (4 w)`` at its ends
(``sigma`` carried through ``dw = do / (4 w)``).

Host-side NumPy: the log density and its gradient in the unconstrained coordinates, for the
host-driven BFGS and the global start's design.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Mapping

import jax
import numpy as np

from ..data.checks import check_bool, check_float
from ..kernels.params import Positive, map_params

__all__ = [
    "BOUND",
    "NAMED",
    "Gamma",
    "SmoothedBox",
    "botorch_priors",
    "check_hyperprior",
    "check_names",
    "feature_ranges",
    "log_prior_fn",
]


#: Every hyperprior parameter lies within ``(-BOUND, BOUND)`` (a scale within ``(1 / BOUND,
#: BOUND)``): products of two parameters, and of a parameter and a value, stay finite in the
#: host's float64 (``1e150 ** 2 = 1e300``), as the densities and their gradients need.
BOUND = 1e150


def _field(dist, name: str, low: float = -BOUND) -> float:
    """``dist.name`` checked, a finite real in ``(low, BOUND)``, as a Python ``float``; the
    ``ValueError`` names the distribution, the field and the value."""
    try:
        return check_float(getattr(dist, name), name, low, BOUND, low_open=True, high_open=True)
    except ValueError as error:
        raise ValueError(f"{dist!r} is not a valid {type(dist).__name__}: {error}") from None


@dataclasses.dataclass(frozen=True)
class Gamma:
    """Gamma(concentration, rate) on the value (divided by the feature's range if ``relative``).

    ``concentration`` and ``rate`` are finite numbers in ``(1e-150, 1e150)`` (``BOUND``),
    ``relative`` a bool; a ``ValueError`` names the field and the value."""

    concentration: float
    rate: float
    relative: bool = False

    def __post_init__(self):
        for name in ("concentration", "rate"):
            object.__setattr__(self, name, _field(self, name, 1 / BOUND))
        try:
            check_bool(self.relative, "relative")
        except ValueError as error:
            raise ValueError(f"{self!r} is not a valid Gamma: {error}") from None


@dataclasses.dataclass(frozen=True)
class SmoothedBox:
    """Flat on ``[a, b]``, normal tails of sd ``sigma`` (GPyTorch's ``SmoothedBoxPrior``).

    ``a < b`` finite, ``b > 0`` (the values it applies to are positive), all within ``(-1e150,
    1e150)``; ``sigma`` in ``(1e-150, 1e150)`` (``BOUND``); a ``ValueError`` names the field
    and the value."""

    a: float
    b: float
    sigma: float = 0.01

    def __post_init__(self):
        a, b = _field(self, "a"), _field(self, "b", 0.0)  # b > 0: the values are positive
        if not a < b:
            raise ValueError(
                f"{self!r} is not a valid SmoothedBox: a must be below b, got a={a!r} >= b={b!r}"
            )
        object.__setattr__(self, "a", a)
        object.__setattr__(self, "b", b)
        object.__setattr__(self, "sigma", _field(self, "sigma", 1 / BOUND))


def botorch_priors() -> dict:
    """BoTorch ``PairwiseGP``'s default priors in bayesrank's parameters (module docstring).

    By name (``hyperprior="botorch"``) they apply to the hyperparameters the prior has (an
    ``RBF`` prior takes only the weights'); given as a dict, every key must name one."""
    return {
        "ARD.lengthscales": Gamma(2.4, 2.7, relative=True),
        "RBF.rho": None,  # BoTorch's kernel is ARD; an isotropic RBF keeps the default prior
        "XPGP.weights": SmoothedBox(math.sqrt(0.005), math.sqrt(50.0), 0.01 / (4 * 0.0707)),
    }


#: ``hyperprior=`` by name: each a function giving the dict of priors it stands for.
NAMED = {"botorch": botorch_priors}


def check_hyperprior(hyperprior) -> dict | None:
    """``hyperprior`` as a dict of ``"Class.field"`` to ``Gamma`` / ``SmoothedBox``
    (``None`` values dropped), a name (``"botorch"`` for ``botorch_priors``) for its dict;
    ``ValueError`` naming a bad entry, a ``Gamma`` of concentration below 1 included (its
    density is unbounded at 0: a MAP fit would shrink the value to 0). The keys are checked
    against a prior by ``check_names``."""
    if hyperprior is None:
        return None
    spelled = f"a name ({', '.join(map(repr, NAMED))}), a dict or None"
    if isinstance(hyperprior, str):
        if hyperprior not in NAMED:
            raise ValueError(f"hyperprior must be {spelled}, got {hyperprior!r}")
        hyperprior = NAMED[hyperprior]()
    if not isinstance(hyperprior, Mapping):
        raise ValueError(f"hyperprior must be {spelled}, got {hyperprior!r}")
    out = {}
    for name, dist in hyperprior.items():
        if not isinstance(name, str) or name.count(".") != 1:
            raise ValueError(f"hyperprior keys name 'Class.field', got {name!r}")
        if dist is None:
            continue
        if not isinstance(dist, Gamma | SmoothedBox):
            raise ValueError(
                f"hyperprior[{name!r}] must be a valid Gamma or SmoothedBox (or None), got {dist!r}"
            )
        if isinstance(dist, Gamma) and dist.concentration < 1:
            # (a - 1) log v -> +inf as v -> 0: the MAP objective has no maximum (a SmoothedBox's
            # density is bounded, at most 1 / (b - a + sqrt(2 pi) sigma): no such case)
            raise ValueError(
                f"hyperprior[{name!r}] = {dist!r}: concentration {dist.concentration!r} < 1 "
                "gives a density unbounded at 0, so the MAP fit has no maximum (the objective "
                "grows without bound as the value shrinks to 0); use concentration >= 1"
            )
        out[name] = dist
    return out


def check_names(named: dict, prior, flags) -> None:
    """``ValueError`` unless every key of ``named`` (``check_hyperprior``'s dict) names a
    trainable positive hyperparameter of ``prior`` (``flags``: trainable, per leaf of
    ``unconstrain(prior)``), listing the keys this prior takes. Nothing is compiled."""
    labels = jax.tree_util.tree_leaves(
        map_params(prior, lambda o, n, c, v: _Leaf(f"{type(o).__name__}.{n}", c))
    )
    if len(labels) != len(flags):
        raise ValueError("trainable must have the structure of the prior")
    valid = [
        leaf.name
        for leaf, free in zip(labels, flags, strict=True)
        if free and isinstance(leaf.constraint, Positive)
    ]
    for name in named:
        if name in valid:
            continue
        known = [leaf for leaf in labels if leaf.name == name]
        why = (
            "names no hyperparameter of this prior"
            if not known
            else "is held fixed (trainable)"
            if not any(flags[labels.index(leaf)] for leaf in known)
            else "is not a positive hyperparameter (only those take one)"
        )
        raise ValueError(
            f"hyperprior[{name!r}] {why}; the keys this prior takes: "
            f"{', '.join(map(repr, sorted(set(valid)))) or 'none'}"
        )


class _Leaf:
    """A leaf's name and constraint, opaque to ``jax.tree_util`` (not a pytree)."""

    def __init__(self, name, constraint):
        self.name, self.constraint = name, constraint


def _log_density(dist, v, scale):
    """``(log p(v), d log p / dv)`` elementwise."""
    if isinstance(dist, Gamma):
        a, b = dist.concentration, dist.rate
        z = v / scale
        value = a * math.log(b) - math.lgamma(a) + (a - 1) * np.log(z) - b * z - np.log(scale)
        return value, ((a - 1) / v - b / scale)
    c, r = 0.5 * (dist.a + dist.b), 0.5 * (dist.b - dist.a)
    d = np.maximum(np.abs(v - c) - r, 0.0)
    norm = math.log(1 + (dist.b - dist.a) / (math.sqrt(2 * math.pi) * dist.sigma))
    value = -0.5 * (d / dist.sigma) ** 2 - math.log(math.sqrt(2 * math.pi) * dist.sigma) - norm
    return value, -d / dist.sigma**2 * np.sign(v - c)


def log_prior_fn(
    prior, flags, named: dict | None, center: np.ndarray, scale: float | None, ranges
) -> Callable[[np.ndarray], tuple[np.ndarray, np.ndarray]]:
    """The hyperprior of a fit as ``x: (B, P) -> (log p: (B,), gradient: (B, P))`` in the free
    unconstrained coordinates (``flags``: trainable, per leaf of ``unconstrain(prior)``).

    ``named``: ``check_hyperprior``'s dict; every other free value has a normal prior of sd
    ``scale`` centred on ``center: (B, P)`` (none where ``scale`` is ``None``). ``ranges: (B, d)``:
    each query's feature ranges, for the relative priors (``None`` without attributes).
    """
    named = named or {}
    labels = jax.tree_util.tree_leaves(
        map_params(prior, lambda o, n, c, v: _Leaf(f"{type(o).__name__}.{n}", c))
    )
    sizes = [int(np.size(x)) for x in jax.tree_util.tree_leaves(prior)]
    columns, k = [], 0  # (slice of x, distribution, constraint) per named free leaf
    plain = np.ones(center.shape[1], bool)
    for leaf, size, free in zip(labels, sizes, flags, strict=True):
        if not free:
            continue
        name = getattr(leaf, "name", None)
        if name in named:
            if not isinstance(leaf.constraint, Positive):
                raise ValueError(f"hyperprior[{name!r}]: only positive hyperparameters take one")
            columns.append((slice(k, k + size), named[name], leaf.constraint))
            plain[k : k + size] = False
        k += size
    precision = 0.0 if scale is None else float(scale) ** -2

    def log_prior(x):
        x = np.asarray(x, np.float64)
        dev = np.where(plain, x - center, 0.0)
        value = -0.5 * precision * np.sum(dev * dev, axis=1)
        grad = -precision * dev
        for cols, dist, constraint in columns:
            u = x[:, cols]
            v = constraint.lower + np.exp(u)  # Positive constraints (the named ones are)
            s = 1.0
            if isinstance(dist, Gamma) and dist.relative:
                if ranges is None:
                    raise ValueError("a relative Gamma hyperprior needs attributes X")
                s = np.where(ranges > 0, ranges, 1.0)
                s = np.broadcast_to(s, u.shape) if s.shape[1] == u.shape[1] else s[:, :1]
            lp, dlp = _log_density(dist, v, s)
            value = value + np.sum(lp, axis=1)
            grad[:, cols] = dlp * np.exp(u)
        return value, grad

    return log_prior


def feature_ranges(batch, per_query: bool) -> np.ndarray:
    """Each feature's range (max minus min) over the real entities: ``(B, d)`` per query, ``(1,
    d)`` over all queries."""
    X = np.asarray(batch.X, np.float64)
    mask = np.asarray(batch.mask)[..., None]
    hi = np.where(mask, X, -np.inf).max(axis=1)
    lo = np.where(mask, X, np.inf).min(axis=1)
    return hi - lo if per_query else (hi.max(0) - lo.min(0))[None]
