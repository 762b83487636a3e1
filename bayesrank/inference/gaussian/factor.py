"""The Gaussian ``N(0, K) prod_s site_s`` in factored form, never inverting ``K``.

Posterior ``q = N(mu, Sigma)``, ``Sigma = (K^-1 + S)^-1``, ``mu = Sigma eta`` (``S``, ``eta``:
``sites``). With a root ``K = M M^T`` (``bayesrank.linalg.prior_root``, once per fit) and
``B = I + M^T S M = L_B L_B^T`` (eigenvalues >= 1, so its Cholesky always succeeds):

    Sigma = U U^T,   U = M L_B^-T,   log|I + K S| = log|B| = 2 sum log diag(L_B).

A sweep costs one ``n^3`` product (``M^T (S M)``, with ``S M`` sparse), one Cholesky and one
triangular solve. ``posterior_from_sites`` is the differentiable form in ``K`` itself.

EP computes its posterior after each sweep this way (``bayesrank.inference.ep``), and Laplace
its Newton steps and its posterior (``bayesrank.inference.laplace``); ``pseudo_data_precision``
is the precision ``(K + S^-1)^-1`` that both engines' evidence gradients and the learning's
Fisher information use.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import jax.scipy.linalg as jsl

from ...linalg import blocked_size, gram, prior_root, psd_root, tril_inverse_t
from .sites import (
    Sites,
    apply_site_precision,
    informative_pairs,
    pair_mask_or_all,
    site_precision,
    to_entities,
)

__all__ = [
    "Factor",
    "covariance",
    "dense",
    "from_root",
    "posterior_from_sites",
    "posterior_moments",
    "pseudo_data_precision",
]


class Factor(NamedTuple):
    mean: jax.Array
    factor: jax.Array  # U, Sigma = U U^T
    logdet: jax.Array  # log|B|


def dense(K) -> jax.Array:
    """``K: (n, n)`` as given, or the diagonal matrix of a diagonal prior given as ``(n,)``."""
    return jnp.diag(K) if K.ndim == 1 else K


def _diagonal_B(r, pairs, tau, size: int) -> jax.Array:
    """The lower triangle of ``B = I + R S R``, ``R = diag(r)``, by O(m) scatter (``S`` sparse).

    Built as ``(size, size)`` with an identity block beyond ``n`` (``blocked_size``, so the
    triangular inverse needs no padded copy).
    """
    i, j = pairs[:, 0], pairs[:, 1]
    lo, hi = jnp.maximum(i, j), jnp.minimum(i, j)
    B = jnp.eye(size, dtype=r.dtype).at[i, i].add(tau * r[i] ** 2).at[j, j].add(tau * r[j] ** 2)
    return B.at[lo, hi].add(-tau * r[i] * r[j])


def from_root(root, pairs, sites, pair_mask) -> Factor:
    """``Sigma = U U^T``, ``U = M L_B^-T``, ``B = I + M^T S M = L_B L_B^T`` (used in the loop).

    For a diagonal prior (``root: (n,)``, ``M = diag(root)``) ``B`` is sparse and built in O(m),
    and ``U`` is ``M L_B^-T``: a sweep costs a Cholesky and a triangular inverse, no product.
    ``U`` is kept by rows (entities), so a pair's marginal gathers two contiguous rows.
    """
    n = root.shape[0]
    valid = pair_mask_or_all(pairs, pair_mask)
    tau = jnp.where(valid, sites.tau, 0.0)
    nu = jnp.where(valid, sites.nu, 0.0)
    if root.ndim == 1:
        B = _diagonal_B(root, pairs, tau, blocked_size(n))
    else:
        B = jnp.eye(n, dtype=root.dtype) + root.T @ apply_site_precision(root, pairs, tau)
    L_B = jax.lax.linalg.cholesky(B, symmetrize_input=False)  # reads the lower triangle
    if root.ndim == 1:
        U = root[:, None] * tril_inverse_t(L_B)[:n, :n]
    else:  # U L_B^T = M
        U = jax.lax.linalg.triangular_solve(
            L_B, root, left_side=False, lower=True, transpose_a=True
        )
    eta = to_entities(nu, pairs, n)
    return Factor(U @ (eta @ U), U, 2.0 * jnp.sum(jnp.log(jnp.diag(L_B))))


def covariance(factor: Factor, diagonal_prior: bool) -> jax.Array:
    """``Sigma = U U^T`` (by blocks where ``U`` is upper triangular: a diagonal prior)."""
    return gram(factor.factor, upper=diagonal_prior)


def _from_kernel(K, pairs, sites, pair_mask):
    """``(mean, cov)``: ``Sigma = K - K G^T C^-1 G K``, ``C = I + G K G^T``, ``S = G^T G``.

    Linear in ``K`` apart from one factorisation of ``C`` (eigenvalues >= 1): differentiable.
    """
    n = K.shape[0]
    S, eta = site_precision(n, pairs, jax.lax.stop_gradient(sites), pair_mask)
    G = psd_root(jax.lax.stop_gradient(S)).T
    K = 0.5 * (K + K.T)
    GK = G @ K
    C = jnp.eye(n, dtype=K.dtype) + GK @ G.T
    L_C = jnp.linalg.cholesky(C)
    V = jsl.solve_triangular(L_C, GK, lower=True)
    cov = K - V.T @ V
    return cov @ eta, cov


def posterior_from_sites(K, pairs, sites: Sites, pair_mask=None):
    """``(mean: (n,), cov: (n, n))`` of ``N(0, K) prod_s site_s`` (differentiable in ``K``)."""
    return _from_kernel(dense(jnp.asarray(K)), jnp.asarray(pairs), sites, pair_mask)


def posterior_moments(K, pairs, sites: Sites, pair_mask=None):
    """``(mean: (n,), cov: (n, n))`` of ``N(0, K) prod_s site_s`` through ``K``'s root.

    As the EP loop computes them (``prior_root``, ``B = I + M^T S M``): for
    reading a posterior off given sites, e.g. at entities that EP left out. Not for
    differentiation (``posterior_from_sites`` is).
    """
    K = jnp.asarray(K)
    pairs = jnp.asarray(pairs)
    active = informative_pairs(K, pairs, pair_mask)
    post = from_root(prior_root(K), pairs, sites, active)
    return post.mean, covariance(post, jnp.ndim(K) == 1)


def pseudo_data_precision(cov, pairs, sites: Sites, pair_mask=None) -> jax.Array:
    """``W = (K + S^-1)^-1 = S - S Sigma S: (n, n)`` from ``Sigma = cov = (K^-1 + S)^-1``.

    The precision of the sites' pseudo-observations ``mu_tilde = S^-1 eta ~ N(0, K + S^-1)``
    (the Gaussian part of ``Z_EP``); ``S - S Sigma S`` also holds where ``S`` is singular.
    ``log Z_EP``'s gradient with respect to ``K`` contains ``-W / 2``, and the Fisher
    information of the hyperparameters in that Gaussian is ``1/2 tr(W dK_j W dK_k)``
    (``learning``). ``S`` is applied sparsely: O(m n). ``pair_mask``: pairs whose site counts.
    """
    tau = jnp.where(pair_mask_or_all(pairs, pair_mask), sites.tau, 0.0)
    S_cov = apply_site_precision(cov, pairs, tau)  # S Sigma
    eye = jnp.eye(cov.shape[0], dtype=cov.dtype)
    return apply_site_precision(eye - S_cov.T, pairs, tau)  # S (I - Sigma S) = S P
