"""Dense linear algebra for Gaussian posteriors: PSD roots and blocked triangular products.

What EP, NUTS and prediction need from a prior covariance ``K`` and a posterior factor, kept apart
from the algorithms that use them:

- ``psd_root``: ``M`` with ``A = M M^T`` by ``eigh`` (negative round-off eigenvalues
  clipped, so a singular ``A`` is fine);
- ``prior_root``: the Cholesky factor of ``K`` where it exists, else ``psd_root``;
  a diagonal ``K`` given as ``(n,)`` has the root ``sqrt(K)``;
- ``tril_inverse_t``: ``L^-T`` of a lower-triangular ``L`` by blocks, in one batched LAPACK
  call;
- ``gram``: ``U U^T``, by blocks for an upper-triangular ``U``; ``times_upper`` and
  ``upper_times``: products with an upper-triangular matrix that skip its zero block.

All are pure and jit-, vmap- and grad-compatible (``psd_root`` is not meant to be differentiated:
``eigh``'s gradient is undefined at repeated eigenvalues).
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp

__all__ = [
    "blocked_size",
    "gram",
    "prior_root",
    "psd_root",
    "times_upper",
    "tril_inverse_t",
    "upper_times",
]


def psd_root(A: jax.Array) -> jax.Array:
    """``M: (n, n)`` with ``A = M M^T`` for a symmetric PSD ``A: (n, n)``, by ``eigh``.

    Eigenvalues below zero (round-off) are clipped, so singular matrices are fine. Not meant to be
    differentiated (``eigh``'s gradient is undefined at repeated eigenvalues).
    """
    evals, evecs = jnp.linalg.eigh(0.5 * (A + A.T))
    return evecs * jnp.sqrt(jnp.clip(evals, 0.0, None))[None, :]


def prior_root(K: jax.Array) -> jax.Array:
    """``M: (n, n)`` with ``K = M M^T``: the Cholesky factor, or ``psd_root`` where it fails.

    A diagonal ``K`` given as its diagonal ``(n,)`` has the root ``sqrt(K): (n,)`` (a diagonal
    matrix, kept as a vector; negative entries are clipped to 0).

    A Cholesky factorisation is an order of magnitude cheaper than ``eigh`` and backward stable,
    so it serves wherever it succeeds; a Gram matrix that is singular in floating point (duplicate
    documents, float32) makes it return NaN, and then the clipped eigendecomposition is used.

    Under ``vmap`` the fallback runs only if some matrix of the batch needs it (a plain
    ``lax.cond`` with a batched predicate would run ``eigh`` on every matrix, every time: 10x the
    Cholesky's cost). Its input depends on the Cholesky's outcome, so the two batched LAPACK
    calls run one after the other: run concurrently, they can deadlock jaxlib 0.10's CPU thread
    pool (``docs/development/implementation.md``).
    """
    if K.ndim == 1:
        return jnp.sqrt(jnp.clip(K, 0.0, None))
    return _cholesky_or_eigh_root(K)


def _root_with_fallback(K, L, ok):
    """``L`` where ``ok``, else the clipped ``eigh`` root of ``K`` (``ok: (...)``, batched)."""
    select = ok[..., None, None]
    fallback = jnp.where(select, jnp.eye(K.shape[-1], dtype=K.dtype), K)
    root = jnp.vectorize(psd_root, signature="(n,n)->(n,n)")(fallback)
    return jnp.where(select, L, root)


def _cholesky_root(K):
    """The Cholesky factors of ``K: (..., n, n)``, with the ``eigh`` fallback for those that
    fail; the fallback runs only if one does (one ``lax.cond`` on the whole batch)."""
    L = jax.lax.linalg.cholesky(K, symmetrize_input=False)
    ok = jnp.all(jnp.isfinite(L), axis=(-2, -1))
    return jax.lax.cond(jnp.all(ok), lambda: L, lambda: _root_with_fallback(K, L, ok))


@jax.custom_batching.custom_vmap
def _cholesky_or_eigh_root(K):
    return _cholesky_root(K)


@_cholesky_or_eigh_root.def_vmap
def _cholesky_or_eigh_root_vmap(axis_size, in_batched, K):
    del axis_size
    return _cholesky_root(K), in_batched[0]


def times_upper(X, T, min_size: int = 128) -> jax.Array:
    """``X T: (..., p, q)`` for an upper-triangular ``T: (..., q, q)``, skipping its zero block.

    ``[X1, X2] [[T1, T2], [0, T3]] = [X1 T1, X1 T2 + X2 T3]``: three quarter-size products
    instead of one full one (one level; small ``q`` gains nothing).
    """
    q = T.shape[-1]
    if q < min_size:
        return X @ T
    h = q // 2
    X1, X2 = X[..., :h], X[..., h:]
    left = X1 @ T[..., :h, :h]
    right = X1 @ T[..., :h, h:] + X2 @ T[..., h:, h:]
    return jnp.concatenate([left, right], axis=-1)


def upper_times(T, X, min_size: int = 128) -> jax.Array:
    """``T X`` for an upper-triangular ``T``: ``(X^T T^T)^T``, the same saving."""
    q = T.shape[-1]
    if q < min_size:
        return T @ X
    h = q // 2
    X1, X2 = X[..., :h, :], X[..., h:, :]
    top = T[..., :h, :h] @ X1 + T[..., :h, h:] @ X2
    bottom = T[..., h:, h:] @ X2
    return jnp.concatenate([top, bottom], axis=-2)


def blocked_size(n: int, leaf: int = 64) -> int:
    """The size ``2^k b >= n`` (``b`` about ``leaf``) that ``tril_inverse_t`` works at."""
    if n <= 2 * leaf:
        return n
    n_blocks = 2 ** math.ceil(math.log2(n / leaf))
    return n_blocks * -(-n // n_blocks)


def tril_inverse_t(L, leaf: int = 64) -> jax.Array:
    """``L^-T`` (upper triangular) of a lower-triangular ``L: (n, n)``, by blocks, bottom up.

    ``L`` is padded with the identity to ``2^k`` diagonal blocks of size ``b`` (about ``leaf``);
    one batched triangular solve inverts them all; then each level joins neighbouring blocks,

        [[A, 0], [C, D]]^-T = [[A^-T, -A^-T C^T D^-T], [0, D^-T]],

    with one batched product. The products skip the zero triangle that a dense right-hand side
    would carry, and the single LAPACK call leaves no two of them running at once (concurrent
    calls contend for the BLAS threads: several times slower on the CPU).
    """
    n = L.shape[0]
    eye = jnp.eye(n, dtype=L.dtype)
    if n <= 2 * leaf:
        return jax.lax.linalg.triangular_solve(L, eye, left_side=True, lower=True, transpose_a=True)
    N = blocked_size(n, leaf)
    n_blocks = 2 ** math.ceil(math.log2(n / leaf))
    b = N // n_blocks
    Lp = L if N == n else jnp.eye(N, dtype=L.dtype).at[:n, :n].set(L)
    k = jnp.arange(n_blocks)
    diag = Lp.reshape(n_blocks, b, n_blocks, b)[k, :, k, :]  # (n_blocks, b, b)
    T = jax.lax.linalg.triangular_solve(
        diag,
        jnp.broadcast_to(jnp.eye(b, dtype=L.dtype), diag.shape),
        left_side=True,
        lower=True,
        transpose_a=True,
    )
    size = b
    while T.shape[0] > 1:
        c = T.shape[0]
        A_it, D_it = T[0::2], T[1::2]
        p = jnp.arange(c // 2)
        C = Lp.reshape(c, size, c, size)[2 * p + 1, :, 2 * p, :]  # (c/2, size, size)
        top_right = -upper_times(A_it, times_upper(jnp.swapaxes(C, 1, 2), D_it))
        top = jnp.concatenate([A_it, top_right], axis=2)
        bottom = jnp.concatenate([jnp.zeros_like(D_it), D_it], axis=2)
        T = jnp.concatenate([top, bottom], axis=1)
        size *= 2
    return T[0, :n, :n]


def gram(U, upper: bool = False, leaf: int = 128) -> jax.Array:
    """``U U^T``; for an upper-triangular ``U`` by 2x2 blocks, a third of a dense product's cost.

    ``[[A, B], [0, D]] [[A, B], [0, D]]^T = [[A A^T + B B^T, B D^T], [D B^T, D D^T]]``.
    """
    n = U.shape[0]
    if not upper or n <= leaf:
        return U @ U.T
    h = n // 2
    A, B, D = U[:h, :h], U[:h, h:], U[h:, h:]
    BDt = B @ D.T
    top = jnp.concatenate([gram(A, True, leaf) + B @ B.T, BDt], axis=1)
    return jnp.concatenate([top, jnp.concatenate([BDt.T, gram(D, True, leaf)], axis=1)], axis=0)
