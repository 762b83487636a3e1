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

import math
from collections.abc import Callable, Mapping
from typing import NamedTuple

import jax
import numpy as np

from ..kernels.params import Positive, map_params

__all__ = [
    "Gamma",
    "SmoothedBox",
    "botorch_priors",
    "check_hyperprior",
    "feature_ranges",
    "log_prior_fn",
]


class Gamma(NamedTuple):
    """Gamma(concentration, rate) on the value (divided by the feature's range if ``relative``)."""

    concentration: float
    rate: float
    relative: bool = False


class SmoothedBox(NamedTuple):
    """Flat on ``[a, b]``, normal tails of sd ``sigma`` (GPyTorch's ``SmoothedBoxPrior``)."""

    a: float
    b: float
    sigma: float = 0.01


def botorch_priors() -> dict:
    """BoTorch ``PairwiseGP``'s default priors in bayesrank's parameters (module docstring)."""
    return {
        "ARD.lengthscales": Gamma(2.4, 2.7, relative=True),
        "RBF.rho": None,  # BoTorch's kernel is ARD; an isotropic RBF keeps the default prior
        "XPGP.weights": SmoothedBox(math.sqrt(0.005), math.sqrt(50.0), 0.01 / (4 * 0.0707)),
    }


def check_hyperprior(hyperprior) -> dict | None:
    """``hyperprior`` as a dict of ``"Class.field"`` to ``Gamma`` / ``SmoothedBox``
    (``None`` values dropped), ``"botorch"`` for ``botorch_priors``; ``ValueError`` naming a
    bad entry."""
    if hyperprior is None:
        return None
    if isinstance(hyperprior, str):
        if hyperprior != "botorch":
            raise ValueError(f"hyperprior must be 'botorch', a dict or None, got {hyperprior!r}")
        hyperprior = botorch_priors()
    if not isinstance(hyperprior, Mapping):
        raise ValueError(f"hyperprior must be 'botorch', a dict or None, got {hyperprior!r}")
    out = {}
    for name, dist in hyperprior.items():
        if not isinstance(name, str) or name.count(".") != 1:
            raise ValueError(f"hyperprior keys name 'Class.field', got {name!r}")
        if dist is None:
            continue
        if isinstance(dist, Gamma):
            ok = dist.concentration > 0 and dist.rate > 0
        elif isinstance(dist, SmoothedBox):
            ok = dist.a < dist.b and dist.sigma > 0
        else:
            ok = False
        if not ok:
            raise ValueError(f"hyperprior[{name!r}] must be a valid Gamma or SmoothedBox: {dist!r}")
        out[name] = dist
    return out


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
