"""The Laplace posterior's Hessian in precision form and its linear solves.

``H = P + J^T A^T diag(w) A J`` for the latent ``z`` of a ``LatentPrior`` and the pairs' curvatures
``w: (m,)``: its product (``O(n r + m + nnz(P))``), the block preconditioner that makes CG converge
in tens to hundreds of iterations on problems of 10^5 entities, and preconditioned CG itself.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp

from .prior import LatentPrior

__all__ = ["Preconditioner", "differences", "hessian_matvec", "pcg", "preconditioner", "solve",
           "to_entities"]  # fmt: skip


def differences(xi, pairs):
    """``A xi: (m,)``, each pair's ``xi_i - xi_j``."""
    return xi[pairs[:, 0]] - xi[pairs[:, 1]]


def to_entities(values, pairs, n):
    """``A^T values: (n,)``."""
    return jax.ops.segment_sum(values, pairs[:, 0], n) - jax.ops.segment_sum(values, pairs[:, 1], n)


def hessian_matvec(prior: LatentPrior, pairs, w):
    """``v -> H v`` (module docstring)."""

    def matvec(v):
        d = differences(prior.entities(v), pairs)
        return prior.precision_matvec(v) + prior.latent(to_entities(w * d, pairs, prior.n))

    return matvec


def _feature_curvature(features, pairs, w, chunk: int = 4096):
    """``Phi^T A^T diag(w) A Phi: (r, r)``, summed over chunks of pairs (``O(chunk r)`` memory)."""
    m, r = pairs.shape[0], features.shape[1]
    pad = -m % chunk
    pairs = jnp.pad(pairs, ((0, pad), (0, 0)))
    w = jnp.pad(w, (0, pad))

    def add(total, block):
        p, wc = block
        D = features[p[:, 0]] - features[p[:, 1]]
        return total + D.T @ (wc[:, None] * D), None

    blocks = (pairs.reshape(-1, chunk, 2), w.reshape(-1, chunk))
    total, _ = jax.lax.scan(add, jnp.zeros((r, r), features.dtype), blocks)
    return total


class Preconditioner(NamedTuple):
    """``M = C C^T``, ``C = blockdiag(chol(H_ww), chol(M_1), ..., chol(M_n))``: the attribute
    block of ``H`` exactly (``I + Phi^T A^T W A Phi``, ``r x r``: ``m`` pairs make it far from
    diagonal) and, per entity ``i``, the ``K x K`` block of the relation latents at ``i``,

        M_i = diag(Q_1[i, i], ..., Q_K[i, i]) + c_i 1 1^T,   c_i = (A^T W A)[i, i],

    because the pairs see only the sum ``g_1 + ... + g_K``: a diagonal (Jacobi) preconditioner
    counts their curvature once per block, and the directions that trade one block against
    another (which the pairs do not see) then have eigenvalues ``~ prior / c_i``: CG's iterations
    grow with the number of pairs per entity."""

    chol_w: jax.Array
    inv_chol_g: jax.Array

    def _split(self, v):
        r, (n, K, _) = self.chol_w.shape[0], self.inv_chol_g.shape
        return v[:r], v[r:].reshape(K, n).T

    def _join(self, head, tail):
        return jnp.concatenate([head, tail.T.reshape(-1)])

    def solve(self, v):
        """``M^-1 v``."""
        head, tail = self._split(v)
        head = jax.scipy.linalg.cho_solve((self.chol_w, True), head)
        inv = self.inv_chol_g
        tail = jnp.einsum("nji,njk,nk->ni", inv, inv, tail)
        return self._join(head, tail)

    def half_solve(self, v, trans: int = 0):
        """``C^-1 v`` (``C^-T v`` with ``trans=1``)."""
        head, tail = self._split(v)
        head = jax.scipy.linalg.solve_triangular(self.chol_w, head, lower=True, trans=trans)
        inv = self.inv_chol_g
        tail = jnp.einsum("nji,nj->ni" if trans else "nij,nj->ni", inv, tail)
        return self._join(head, tail)

    def logdet(self):
        """``log det M``."""
        diag_g = jnp.diagonal(self.inv_chol_g, axis1=1, axis2=2)
        return 2 * (jnp.sum(jnp.log(jnp.diag(self.chol_w))) - jnp.sum(jnp.log(diag_g)))


def preconditioner(prior: LatentPrior, pairs, w) -> Preconditioner:
    """The block preconditioner of ``H`` at the curvatures ``w: (m,)`` (``Preconditioner``)."""
    n, K = prior.n, len(prior.blocks)
    degree = jax.ops.segment_sum(w, pairs[:, 0], n) + jax.ops.segment_sum(w, pairs[:, 1], n)
    H_ww = jnp.eye(prior.rank, dtype=w.dtype) + _feature_curvature(prior.features, pairs, w)
    lam = jnp.stack([b.diagonal() for b in prior.blocks], 1) if K else jnp.zeros((n, 0), w.dtype)
    M = jax.vmap(jnp.diag)(lam) + degree[:, None, None]
    # K x K triangular inverses once, applied as products: n tiny LAPACK calls in every CG
    # iteration cost more than the Hessian's product
    eye = jnp.broadcast_to(jnp.eye(K, dtype=w.dtype), M.shape)
    inv = jax.scipy.linalg.solve_triangular(jnp.linalg.cholesky(M), eye, lower=True)
    return Preconditioner(jnp.linalg.cholesky(H_ww), inv)


def pcg(matvec, b, x0, precondition, tol, maxiter):
    """Preconditioned conjugate gradients for ``M x = b``: ``(x, iterations)``, stopping when
    ``||b - M x|| <= tol ||b||`` or after ``maxiter`` iterations."""
    bnorm = jnp.linalg.norm(b)
    r0 = b - matvec(x0)
    z0 = precondition(r0)
    state = (x0, r0, z0, z0, r0 @ z0, jnp.asarray(0))

    def cond(s):
        _, r, _, _, _, k = s
        return (jnp.linalg.norm(r) > tol * bnorm) & (k < maxiter)

    def body(s):
        x, r, z, p, rz, k = s
        q = matvec(p)
        alpha = rz / (p @ q)
        x = x + alpha * p
        r = r - alpha * q
        z = precondition(r)
        rz_new = r @ z
        return x, r, z, z + (rz_new / rz) * p, rz_new, k + 1

    x, *_, k = jax.lax.while_loop(cond, body, state)
    return x, k


def solve(prior, pairs, w, b, x0, cg_tol, M=None):
    """``(H^-1 b, iterations)`` by ``pcg`` from ``x0`` (``M``: a ``Preconditioner``, built here
    where not given)."""
    if M is None:
        M = preconditioner(prior, pairs, w)
    return pcg(hessian_matvec(prior, pairs, w), b, x0, M.solve, cg_tol, 10 * prior.size)
