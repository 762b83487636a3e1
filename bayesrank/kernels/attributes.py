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

import jax
import jax.numpy as jnp

from .base import Kernel
from .params import Positive, param, pytree_dataclass

__all__ = ["ARD", "RBF", "Independent", "Linear", "weighted_sq_distances"]


@jax.custom_jvp
def weighted_sq_distances(X1: jax.Array, X2: jax.Array, w: jax.Array) -> jax.Array:
    """``D[a, b] = sum_k w_k (X1[a, k] - X2[b, k])^2``: ``(n1, n2)``; ``w: (d,)`` or a scalar.

    Computed from the differences (exact: duplicate points are at distance 0, which EP's test
    for uninformative pairs relies on). The derivative is written with matrix products,

        dD = (X1^2 dw) 1^T + 1 (X2^2 dw)^T - 2 X1 diag(dw) X2^T
             + 2 [(X1 * dX1) w] 1^T - 2 dX1 diag(w) X2^T + 2 1 [(X2 * dX2) w]^T
             - 2 X1 diag(w) dX2^T,

    so forward and reverse mode (its transpose) cost ``O(n1 n2 d)`` in products instead of
    passes over ``(n1, n2, d)`` arrays (an ARD kernel and its VJP at ``n = 1000``, ``d = 5``:
    7 ms, against 47 ms by autodiff). Round-off in the derivative's cancellations is harmless.
    """
    return jnp.sum(w * (X1[:, None, :] - X2[None, :, :]) ** 2, axis=-1)


def _is_zero(tangent) -> bool:
    return isinstance(tangent, jax.custom_derivatives.SymbolicZero)


def _sq_distances_jvp(primals, tangents):
    X1, X2, w = primals
    dX1, dX2, dw = tangents
    w_d = jnp.broadcast_to(w, X1.shape[-1:])
    out = weighted_sq_distances(X1, X2, w)
    terms = []
    if not _is_zero(dw):
        dw = jnp.broadcast_to(dw, X1.shape[-1:])
        terms.append((X1**2 @ dw)[:, None] + (X2**2 @ dw)[None, :] - 2.0 * (X1 * dw) @ X2.T)
    if not _is_zero(dX1):
        terms.append(2.0 * ((X1 * dX1) @ w_d)[:, None] - 2.0 * (dX1 * w_d) @ X2.T)
    if not _is_zero(dX2):
        terms.append(2.0 * ((X2 * dX2) @ w_d)[None, :] - 2.0 * (X1 * w_d) @ dX2.T)
    return out, sum(terms) if terms else jnp.zeros_like(out)


weighted_sq_distances.defjvp(_sq_distances_jvp, symbolic_zeros=True)


def _floating(X1, X2):
    """``(X1, X2)`` as floating-point arrays of one dtype."""
    X1, X2 = jnp.asarray(X1), jnp.asarray(X2)
    dtype = jnp.result_type(X1, X2)
    if not jnp.issubdtype(dtype, jnp.floating):
        dtype = jnp.result_type(float)
    return X1.astype(dtype), X2.astype(dtype)


@pytree_dataclass
class RBF(Kernel):
    """Paper Eq. 1: ``kappa^2 exp(-rho^2 / 2 ||x - x'||^2)``; ``kappa``, ``rho`` scalars."""

    kappa: jnp.ndarray = param(Positive(), default=1.0)
    rho: jnp.ndarray = param(Positive(), default=1.0)

    def evaluate(self, x, y):
        return self.kappa**2 * jnp.exp(-0.5 * self.rho**2 * jnp.sum((x - y) ** 2))

    def matrix(self, X1, X2):
        X1, X2 = _floating(X1, X2)
        return self.kappa**2 * jnp.exp(-0.5 * weighted_sq_distances(X1, X2, self.rho**2))


@pytree_dataclass
class ARD(Kernel):
    """Automatic relevance determination: ``kappa^2 exp(-1/2 sum_k ((x_k - x'_k) / ell_k)^2)``.

    ``lengthscales: (d,)``, one per feature (a scalar broadcasts, giving the RBF with
    ``rho = 1 / ell``).
    """

    kappa: jnp.ndarray = param(Positive(), default=1.0)
    lengthscales: jnp.ndarray = param(Positive(), default=1.0)

    def evaluate(self, x, y):
        return self.kappa**2 * jnp.exp(-0.5 * jnp.sum(((x - y) / self.lengthscales) ** 2))

    def matrix(self, X1, X2):
        X1, X2 = _floating(X1, X2)
        w = jnp.broadcast_to(self.lengthscales**-2, X1.shape[-1:])
        return self.kappa**2 * jnp.exp(-0.5 * weighted_sq_distances(X1, X2, w))


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
