"""Synthetic test functions of the (preferential) Bayesian optimisation literature.

Every function takes points ``x: (..., d)`` in the unit cube ``[0, 1]^d``, maps them affinely onto
the function's usual domain and returns utilities ``(...,)`` to be **maximised**: the classic
minimisation problems are negated. Pure ``jax.numpy``, so they ``jit``, ``vmap`` and differentiate
(Ackley's gradient is undefined at its optimum, where ``||z|| = 0``).

Formulas, domains and optima follow the Virtual Library of Simulation Experiments (S. Surjanovic
and D. Bingham, https://www.sfu.ca/~ssurjano/optimization.html) and BoTorch's
``botorch/test_functions/synthetic.py`` (https://github.com/pytorch/botorch); Alpine-1 follows
M. Jamil and X.-S. Yang, "A literature survey of benchmark functions for global optimization
problems", IJMMNO 4(2), 2013 (arXiv:1308.4008), function 6.

``get`` returns a ``SyntheticFunction``: the function with its dimension, optimum value
and optimiser (in the unit cube), and a check of the points' last axis.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np

from ..compiler import jit
from ..runtime import is_traced
from .checks import check_int

__all__ = [
    "NAMES",
    "SyntheticFunction",
    "ackley",
    "alpine1",
    "get",
    "hartmann6",
    "levy",
    "quadratic",
]

# Hartmann-6 constants (sfu.ca/~ssurjano/hart6.html), as Python floats: arrays are made per call,
# in the points' dtype.
_H6_ALPHA = (1.0, 1.2, 3.0, 3.2)
_H6_A = (
    (10.0, 3.0, 17.0, 3.5, 1.7, 8.0),
    (0.05, 10.0, 17.0, 0.1, 8.0, 14.0),
    (3.0, 3.5, 1.7, 10.0, 17.0, 8.0),
    (17.0, 8.0, 0.05, 10.0, 0.1, 14.0),
)
_H6_P = (  # times 1e-4
    (1312.0, 1696.0, 5569.0, 124.0, 8283.0, 5886.0),
    (2329.0, 4135.0, 8307.0, 3736.0, 1004.0, 9991.0),
    (2348.0, 1451.0, 3522.0, 2883.0, 3047.0, 6650.0),
    (4047.0, 8828.0, 8732.0, 5743.0, 1091.0, 381.0),
)
_H6_OPTIMIZER = (0.20169, 0.150011, 0.476874, 0.275332, 0.311652, 0.6573)


def _points(x) -> jnp.ndarray:
    """``x`` as a floating array with at least one axis (integers become the default float)."""
    x = jnp.asarray(x)
    if not jnp.issubdtype(x.dtype, jnp.floating):
        x = x.astype(jnp.result_type(float))
    if x.ndim == 0:
        raise ValueError(f"x must have shape (..., d), got a scalar of shape {x.shape}")
    return x


def _to_domain(x, low: float, high: float) -> jnp.ndarray:
    """The unit cube mapped affinely onto ``[low, high]^d``."""
    return low + (high - low) * _points(x)


def ackley(x) -> jnp.ndarray:
    """Negated Ackley function, on ``z = [-32.768, 32.768]^d`` (any ``d``)::

        f(z) = -20 exp(-0.2 sqrt(mean_i z_i^2)) - exp(mean_i cos(2 pi z_i)) + 20 + e

    Returns ``-f``: maximum 0 at ``z = 0`` (``x = 0.5``)."""
    z = _to_domain(x, -32.768, 32.768)
    a, b, c = 20.0, 0.2, 2.0 * math.pi
    f = (
        -a * jnp.exp(-b * jnp.sqrt(jnp.mean(z**2, axis=-1)))
        - jnp.exp(jnp.mean(jnp.cos(c * z), axis=-1))
        + a
        + math.e
    )
    return -f


def hartmann6(x) -> jnp.ndarray:
    """Negated Hartmann-6 function, on ``[0, 1]^6`` (the unit cube itself)::

        f(x) = -sum_{i=1}^4 alpha_i exp(-sum_{j=1}^6 A_ij (x_j - P_ij)^2)

    with the standard ``alpha``, ``A`` and ``P`` (``P`` in units of ``1e-4``). Returns ``-f``:
    maximum 3.32237 at ``x = (0.20169, 0.150011, 0.476874, 0.275332, 0.311652, 0.6573)``."""
    x = _points(x)
    if x.shape[-1] != 6:
        raise ValueError(f"hartmann6 takes points of dimension 6, got x of shape {x.shape}")
    alpha = jnp.asarray(_H6_ALPHA, dtype=x.dtype)
    a = jnp.asarray(_H6_A, dtype=x.dtype)
    p = 1e-4 * jnp.asarray(_H6_P, dtype=x.dtype)
    inner = jnp.sum(a * (x[..., None, :] - p) ** 2, axis=-1)  # (..., 4)
    return jnp.sum(alpha * jnp.exp(-inner), axis=-1)


def levy(x) -> jnp.ndarray:
    """Negated Levy function, on ``z = [-10, 10]^d`` (any ``d``), with ``w_i = 1 + (z_i - 1) / 4``::

        f(z) = sin^2(pi w_1) + sum_{i=1}^{d-1} (w_i - 1)^2 (1 + 10 sin^2(pi w_i + 1))
               + (w_d - 1)^2 (1 + sin^2(2 pi w_d))

    Returns ``-f``: maximum 0 at ``z = (1, ..., 1)`` (``x = 0.55``)."""
    w = 1.0 + (_to_domain(x, -10.0, 10.0) - 1.0) / 4.0
    head, last = w[..., :-1], w[..., -1]
    f = (
        jnp.sin(math.pi * w[..., 0]) ** 2
        + jnp.sum((head - 1.0) ** 2 * (1.0 + 10.0 * jnp.sin(math.pi * head + 1.0) ** 2), axis=-1)
        + (last - 1.0) ** 2 * (1.0 + jnp.sin(2.0 * math.pi * last) ** 2)
    )
    return -f


def alpine1(x) -> jnp.ndarray:
    """Negated Alpine-1 function, on ``z = [-10, 10]^d`` (any ``d``)::

        f(z) = sum_i |z_i sin(z_i) + 0.1 z_i|

    Returns ``-f``: maximum 0 at ``z = 0`` (``x = 0.5``)."""
    z = _to_domain(x, -10.0, 10.0)
    return -jnp.sum(jnp.abs(z * jnp.sin(z) + 0.1 * z), axis=-1)


def quadratic(x) -> jnp.ndarray:
    """A concave quadratic on ``[0, 1]^d`` (the unit cube itself)::

        u(x) = -sum_i (x_i - 0.3)^2

    Maximum 0 at ``x = (0.3, ..., 0.3)``."""
    return -jnp.sum((_points(x) - 0.3) ** 2, axis=-1)


@dataclass(frozen=True)
class SyntheticFunction:
    """A test function of a given dimension, to be maximised over the unit cube.

    Attributes:
        name: one of ``NAMES``.
        dim: the dimension ``d`` of the points.
        fn: the function, ``(..., d)`` points in ``[0, 1]^d`` to ``(...,)`` utilities.
        optimum_value: the maximum of ``fn`` (Hartmann-6: the published 3.32237, rounded).
        optimizer: where ``fn`` attains it, in the unit cube.
    """

    name: str
    dim: int
    fn: Callable
    optimum_value: float
    optimizer: tuple[float, ...]

    def __call__(self, x) -> jnp.ndarray:
        """``fn(x)``, after checking that ``x`` is ``(..., dim)``.

        On concrete points, one compiled program per function and shape (``_evaluate``);
        inside a caller's ``jit``, ``vmap`` or ``grad``, the plain function."""
        x = x if isinstance(x, jax.Array) else np.asarray(x)  # tracers are jax.Arrays too
        if x.shape[-1:] != (self.dim,):
            raise ValueError(
                f"{self.name} has dim {self.dim}: x must have shape (..., {self.dim}), "
                f"got {x.shape}"
            )
        return self.fn(x) if is_traced(x) else _evaluate(x, fn=self.fn)


@partial(jit, static_argnames=("fn",))
def _evaluate(x, fn: Callable) -> jnp.ndarray:
    """``fn(x)`` compiled, one program per function and shape: host calls run one program,
    not one per operation."""
    return fn(x)


# name -> (function, default dim, optimum value, optimiser's coordinate: the same in every dim)
_REGISTRY = {
    "ackley": (ackley, 4, 0.0, 0.5),
    "hartmann6": (hartmann6, 6, 3.32237, None),
    "levy": (levy, 4, 0.0, 0.55),
    "alpine1": (alpine1, 4, 0.0, 0.5),
    "quadratic": (quadratic, 1, 0.0, 0.3),
}
#: The names ``get`` knows.
NAMES = tuple(_REGISTRY)


def get(name: str, dim: int | None = None) -> SyntheticFunction:
    """The test function ``name`` (one of ``NAMES``) in dimension ``dim``.

    ``dim=None`` takes the default: 4 for ``ackley``, ``levy`` and ``alpine1``, 1 for
    ``quadratic``; ``hartmann6`` is 6 only.

    Raises:
        ValueError: an unknown name (the choices listed), a ``dim`` that is not a positive
            integer, or ``hartmann6`` with a ``dim`` other than 6.
    """
    if name not in _REGISTRY:
        raise ValueError(f"unknown test function {name!r}; choose one of {', '.join(NAMES)}")
    fn, default_dim, optimum_value, coord = _REGISTRY[name]
    dim = default_dim if dim is None else check_int(dim, "dim", low=1)
    if name == "hartmann6":
        if dim != 6:
            raise ValueError(f"hartmann6 is defined for dim 6 only, got dim {dim}")
        optimizer = _H6_OPTIMIZER
    else:
        optimizer = (coord,) * dim
    return SyntheticFunction(name, dim, fn, optimum_value, optimizer)
