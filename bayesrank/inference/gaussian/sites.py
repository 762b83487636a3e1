"""The Gaussian sites that EP and Laplace share: one rank-one Gaussian per pair, and their algebra.

A pair ``s = (i, j)`` of a probit-type likelihood depends on ``d_s = a_s^T xi_hat`` only
(``a_s = e_i - e_j``), so a Gaussian site for it is rank one along ``[1, -1]``:

    site_s(xi_i, xi_j) ∝ exp(-1/2 tau_s d_s^2 + nu_s d_s),
    precision_s = tau_s [[1, -1], [-1, 1]],   shift_s = nu_s [1, -1].

``Sites`` stores ``(tau, nu)`` per pair; ``site_natural_parameters`` gives the 2x2 /
2-vector form. Summed over pairs, ``S = A^T diag(tau) A`` and ``eta = A^T nu`` (``A``'s rows are
``a_s``); ``S`` is applied sparsely, in ``O(m n)``. EP moment-matches the sites
(``bayesrank.inference.ep.sites``); Laplace's Newton step is the Gaussian of sites
``tau_s = w_s``, ``nu_s = w_s d_s + r_s`` (``bayesrank.inference.laplace``).
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp

__all__ = [
    "Sites",
    "apply_site_precision",
    "factor_marginals",
    "informative_pairs",
    "marginals",
    "pair_mask_or_all",
    "site_natural_parameters",
    "site_precision",
    "to_entities",
    "zero_sites",
]


class Sites(NamedTuple):
    """Site parameters along each pair's difference: ``tau: (m,)`` (>= 0) and ``nu: (m,)``."""

    tau: jax.Array
    nu: jax.Array


def site_natural_parameters(sites: Sites) -> tuple[jax.Array, jax.Array]:
    """The 2-D sites on ``(xi_i, xi_j)``: precisions ``(m, 2, 2)`` and shifts ``(m, 2)``."""
    a = jnp.array([1.0, -1.0], dtype=sites.tau.dtype)
    return sites.tau[:, None, None] * jnp.outer(a, a), sites.nu[:, None] * a


def zero_sites(m: int, dtype) -> Sites:
    """``m`` zero sites (the prior)."""
    zeros = jnp.zeros(m, dtype=dtype)
    return Sites(zeros, zeros)


def pair_mask_or_all(pairs, pair_mask) -> jax.Array:
    """``pair_mask``, or all True for ``pairs: (m, 2)``."""
    return jnp.ones(pairs.shape[0], dtype=bool) if pair_mask is None else pair_mask


def informative_pairs(K, pairs, pair_mask=None) -> jax.Array:
    """``(m,)`` bool: valid pairs whose prior difference variance is not (numerically) zero.

    ``K`` is ``(n, n)``, or ``(n,)`` for a diagonal prior covariance. A pair of entities whose
    prior difference variance is below 100 machine epsilons of ``K_ii + K_jj`` (two documents
    with identical features under an attribute-only kernel) has ``d = 0`` a.s.: its likelihood is
    the constant 1/2, and EP keeps its site at zero.
    """
    K = jnp.asarray(K)
    pairs = jnp.asarray(pairs)
    i, j = pairs[:, 0], pairs[:, 1]
    if K.ndim == 1:
        scale = K[i] + K[j]
        v0 = scale
    else:
        scale = K[i, i] + K[j, j]
        v0 = scale - 2.0 * K[i, j]
    return pair_mask_or_all(pairs, pair_mask) & (v0 > 100 * jnp.finfo(K.dtype).eps * scale)


def to_entities(values, pairs, n: int) -> jax.Array:
    """``A^T values``: ``(n, ...)`` from per-pair ``values: (m, ...)``, ``A``'s rows ``e_i - e_j``.

    Entity ``k`` receives ``+values_s`` for the pairs it wins and ``-values_s`` for those it loses.
    A sorted segment sum: XLA's CPU scatter-add of rows is several times slower.
    """
    ends = jnp.concatenate([pairs[:, 0], pairs[:, 1]])
    order = jnp.argsort(ends)
    data = jnp.concatenate([values, -values])[order]
    return jax.ops.segment_sum(data, ends[order], num_segments=n, indices_are_sorted=True)


def apply_site_precision(X, pairs, tau) -> jax.Array:
    """``S X: (n, k)`` for ``X: (n, k)``, ``S = A^T diag(tau) A``, in O(m k) (``S`` is sparse)."""
    i, j = pairs[:, 0], pairs[:, 1]
    return to_entities(tau[:, None] * (X[i] - X[j]), pairs, X.shape[0])


def site_precision(n: int, pairs, sites: Sites, pair_mask=None):
    """``S = sum_s tau_s a_s a_s^T: (n, n)`` and ``eta = sum_s nu_s a_s: (n,)`` of the sites."""
    pairs = jnp.asarray(pairs)
    i, j = pairs[:, 0], pairs[:, 1]
    pair_mask = pair_mask_or_all(pairs, pair_mask)
    tau = jnp.where(pair_mask, sites.tau, 0.0)
    nu = jnp.where(pair_mask, sites.nu, 0.0)
    S = jnp.zeros((n, n), tau.dtype)
    S = S.at[i, i].add(tau).at[j, j].add(tau).at[i, j].add(-tau).at[j, i].add(-tau)
    return S, to_entities(nu, pairs, n)


def marginals(mean, cov, pairs):
    """``(m_s, v_s)``: the moments of each pair's difference under ``N(mean, cov)``."""
    i, j = pairs[:, 0], pairs[:, 1]
    return mean[i] - mean[j], cov[i, i] + cov[j, j] - 2.0 * cov[i, j]


def factor_marginals(mean, U, pairs, chunk: int = 512):
    """Pair-difference marginals from ``Sigma = U U^T``: ``m_s``, ``v_s = ||U_i - U_j||^2``.

    In chunks of ``chunk`` pairs (``lax.map``), so the gathered rows stay in cache instead of
    an ``(m, n)`` array going through memory (2x faster at ``n = 1000``, ``m = 2000``).
    """
    i, j = pairs[:, 0], pairs[:, 1]
    m = pairs.shape[0]
    if m <= chunk:
        return mean[i] - mean[j], jnp.sum((U[i] - U[j]) ** 2, axis=1)
    padded = jnp.pad(pairs, ((0, -m % chunk), (0, 0))).reshape(-1, chunk, 2)
    v = jax.lax.map(lambda p: jnp.sum((U[p[:, 0]] - U[p[:, 1]]) ** 2, axis=1), padded)
    return mean[i] - mean[j], v.reshape(-1)[:m]
