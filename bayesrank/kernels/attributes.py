"""Kernels on entity attributes ``X: (n, d)`` (and one on entity identity).

=================  ==============================================================  ============
kernel             ``k(x, x')``                                                    parameters
=================  ==============================================================  ============
``RBF``            ``kappa^2 exp(-rho^2 / 2 ||x - x'||^2)``  (paper Eq. 1)          kappa, rho
``ARD``            ``kappa^2 exp(-1/2 sum_k (x_k - x'_k)^2 / ell_k^2)``             kappa, ell
``Linear``         ``s^2 <x, x'> + c^2``                                           s, c
``Independent``    ``s^2 [i == i']`` on entity indices                             s
=================  ==============================================================  ============

``rho`` in Eq. 1 is an inverse lengthscale (``ell = 1 / rho``). ``Independent`` is a random effect
per entity: evaluated on integer entity indices (``jnp.arange(n)``), it gives ``s^2 I``, the part
that the ``I / iota^2`` term contributes to a regularized Laplacian on a sparse graph. Two
different entities with equal attributes stay independent under it, which is why it takes indices,
not attributes.
"""

from __future__ import annotations

import jax.numpy as jnp

from .base import Kernel
from .params import Positive, param, pytree_dataclass

__all__ = ["ARD", "RBF", "Independent", "Linear"]


@pytree_dataclass
class RBF(Kernel):
    """Paper Eq. 1: ``kappa^2 exp(-rho^2 / 2 ||x - x'||^2)``; ``kappa``, ``rho`` scalars."""

    kappa: jnp.ndarray = param(Positive(), default=1.0)
    rho: jnp.ndarray = param(Positive(1e-6), default=1.0)

    def evaluate(self, x, y):
        return self.kappa**2 * jnp.exp(-0.5 * self.rho**2 * jnp.sum((x - y) ** 2))


@pytree_dataclass
class ARD(Kernel):
    """Automatic relevance determination: ``kappa^2 exp(-1/2 sum_k ((x_k - x'_k) / ell_k)^2)``.

    ``lengthscales: (d,)``, one per feature (a scalar broadcasts, giving the RBF with
    ``rho = 1 / ell``).
    """

    kappa: jnp.ndarray = param(Positive(), default=1.0)
    lengthscales: jnp.ndarray = param(Positive(1e-6), default=1.0)

    def evaluate(self, x, y):
        return self.kappa**2 * jnp.exp(-0.5 * jnp.sum(((x - y) / self.lengthscales) ** 2))


@pytree_dataclass
class Linear(Kernel):
    """``s^2 <x, x'> + c^2`` (a Bayesian linear model with a random offset)."""

    scale: jnp.ndarray = param(Positive(), default=1.0)
    offset: jnp.ndarray = param(Positive(), default=1e-3)

    def evaluate(self, x, y):
        return self.scale**2 * jnp.dot(x, y) + self.offset**2


@pytree_dataclass
class Independent(Kernel):
    """``s^2 [i == i']`` on entity indices ``i`` (call it with ``jnp.arange(n)``)."""

    scale: jnp.ndarray = param(Positive(), default=1.0)

    def evaluate(self, x, y):
        return jnp.where(jnp.all(x == y), self.scale**2, 0.0)
