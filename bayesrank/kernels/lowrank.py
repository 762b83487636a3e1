"""A low-rank root of an attribute kernel by pivoted Cholesky: ``K ~ Phi Phi^T``.

The greedy pivoted Cholesky (Harbrecht, Peters & Schneider 2012; GPyTorch's preconditioner)
picks, at each step, the entity whose variance is worst explained so far and makes it an inducing
point:

    p_k = argmax_i d_i,   phi_k = (K[:, p_k] - Phi Phi[p_k]^T) / sqrt(d_{p_k}),   d <- d - phi_k^2,

with ``d = diag(K - Phi Phi^T)`` (starting at ``diag(K)``). ``Phi Phi^T`` is the Nyström
approximation on the pivots ``K[:, p] K[p, p]^-1 K[p, :]``, so the residual ``R = K - Phi Phi^T``
is positive semi-definite and ``d = diag(R)`` is known exactly: ``||R||_2 <= trace(R) =
sum(d)``, and a pair's prior variance is off by ``(e_i - e_j)^T R (e_i - e_j) <= 2 (d_i + d_j)``
(Cauchy-Schwarz on the PSD ``R``). At rank ``n`` it is the full pivoted Cholesky, ``R = 0``.
Cost ``O(n r^2)`` and ``r`` kernel columns; no ``n x n`` matrix.
"""

from __future__ import annotations

from functools import partial
from typing import NamedTuple

import jax
import jax.numpy as jnp

from ..compiler import jit
from .base import Kernel

__all__ = ["LowRank", "pivoted_cholesky"]


class LowRank(NamedTuple):
    """``features: (n, r)`` with ``K ~ features @ features.T``; ``pivots: (r,)`` the inducing
    entities in the order chosen; ``residual: (n,)`` the diagonal of ``K - features
    features^T`` (non-negative; its sum bounds the approximation's spectral error)."""

    features: jax.Array
    pivots: jax.Array
    residual: jax.Array


@partial(jit, static_argnames=("rank",))
def pivoted_cholesky(kernel: Kernel, X, rank: int) -> LowRank:
    """The rank-``rank`` pivoted Cholesky root of ``kernel(X, X)`` (module docstring), ``X: (n,
    d)``. A step whose largest residual is not positive (the kernel exhausted before ``rank``:
    ``K``'s rank is lower) adds a zero column."""
    X = jnp.asarray(X)
    n = X.shape[0]
    d0 = jax.vmap(kernel.evaluate)(X, X)
    dtype = d0.dtype
    features0 = jnp.zeros((n, rank), dtype)

    def step(k, carry):
        features, pivots, d = carry
        p = jnp.argmax(d).astype(jnp.int32)
        column = kernel(X, X[p][None, :])[:, 0] - features @ features[p]
        scale = jnp.where(d[p] > 0, jax.lax.rsqrt(jnp.where(d[p] > 0, d[p], 1.0)), 0.0)
        phi = column * scale
        # the pivot's own residual is exactly zero; round-off must not leave it negative
        d = jnp.maximum(d - phi**2, 0.0).at[p].set(0.0)
        return features.at[:, k].set(phi), pivots.at[k].set(p), d

    features, pivots, d = jax.lax.fori_loop(
        0, rank, step, (features0, jnp.zeros(rank, jnp.int32), d0)
    )
    return LowRank(features, pivots, d)
