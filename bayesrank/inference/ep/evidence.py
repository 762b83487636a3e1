"""The EP evidence ``log Z_EP`` and its gradient with respect to ``K`` in closed form.

With the sites fixed, ``log Z_EP`` is a differentiable function of ``K``; at an EP fixed point
its gradient is the gradient of the converged evidence (the evidence is stationary in the
sites). The gradient is written in closed form (``_evidence_bwd``), so it never passes through a
factorisation of ``K``.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jax.scipy.special import log_ndtr

from ...likelihoods import Outcomes, outcome_tilted_moments
from ...linalg import prior_root
from ..gaussian.factor import dense, from_root, pseudo_data_precision
from ..gaussian.sites import (
    Sites,
    apply_site_precision,
    factor_marginals,
    informative_pairs,
    marginals,
    pair_mask_or_all,
    to_entities,
)
from .sites import cavity, one_copy, tilted

__all__ = ["log_evidence", "pseudo_data_precision"]


def site_log_normalisers(m, v, sites: Sites, active, valid, outcomes: Outcomes | None = None):
    """Per-pair terms of ``log Z_EP`` from the posterior marginals ``N(m_s, v_s)`` of the pairs.

    Informative pairs: ``log Phi(m_c / sqrt(1 + v_c)) + 1/2 log(1 + tau v_c) - 1/2 m^2 / v
    + 1/2 m_c^2 / v_c``; uninformative ones (``d = 0`` a.s.): ``log Phi(m / sqrt(1 + v))``.
    With ``outcomes``, ``log Phi`` is each row's outcome's ``log Z``, the cavity and ``tau``
    are one copy's, and a row of weight ``c`` counts ``c`` times (``c`` equal copies).
    """
    v_safe = jnp.where(active, v, 1.0)  # padded and uninformative pairs: keep the algebra finite
    copy = one_copy(sites, outcomes)
    m_c, v_c, ok = cavity(m, v_safe, copy)
    terms = (
        tilted(m_c, v_c, outcomes).log_z
        + 0.5 * jnp.log1p(copy.tau * v_c)
        - 0.5 * m**2 / v_safe
        + 0.5 * m_c**2 / v_c
    )
    terms = jnp.where(active & ok, terms, 0.0)
    v_flat = jnp.maximum(v, 0.0)
    if outcomes is None:
        flat = log_ndtr(m / jnp.sqrt(1.0 + v_flat))
    else:
        flat = outcome_tilted_moments(m, v_flat, outcomes).log_z
    terms = terms + jnp.where(valid & ~active, flat, 0.0)
    return terms if outcomes is None else outcomes.weight * terms


def _evidence_parts(cov, pairs, sites, active, valid, factor=None, outcomes=None):
    """``(log Z_EP without -1/2 log|I + K S|, mean, eta, m, v)`` from ``Sigma = cov``.

    With ``factor`` (``U``, ``Sigma = U U^T``) the pairs' variances are ``||U_i - U_j||^2``
    instead of ``Sigma_ii + Sigma_jj - 2 Sigma_ij``: the latter cancels catastrophically at
    large kernel scales (float32 at ``K ~ 1e7``: negative variances, a NaN evidence)."""
    eta = to_entities(jnp.where(active, sites.nu, 0.0), pairs, cov.shape[0])
    mean = cov @ eta
    if factor is None:
        m, v = marginals(mean, cov, pairs)
    else:
        m, v = factor_marginals(mean, factor, pairs)
    value = jnp.sum(site_log_normalisers(m, v, sites, active, valid, outcomes)) + 0.5 * mean @ eta
    return value, mean, eta, m, v


def evidence_from_posterior(
    K, cov, logdet, pairs, sites, active, valid, factor=None, outcomes=None
):
    """``log Z_EP`` given ``cov = (K^-1 + S)^-1`` and ``logdet = log|I + K S|`` (of these sites).

    ``cov`` and ``logdet`` are functions of ``K`` computed by the caller; the custom VJP gives
    the gradient with respect to ``K`` in closed form (see ``_evidence_bwd``), and with respect
    to the rows' interval ends (``outcomes.lower``, ``outcomes.upper``: so to a tie margin or
    an ordinal model's thresholds; the weights are data). ``factor``: ``U`` with
    ``cov = U U^T``, for the pairs' variances without cancellation.
    """
    if outcomes is None:
        return _evidence(K, None, cov, logdet, pairs, sites, active, valid, factor, None)
    ends = (outcomes.lower, outcomes.upper)
    weights = jax.lax.stop_gradient(outcomes.weight)
    return _evidence(K, ends, cov, logdet, pairs, sites, active, valid, factor, weights)


def _outcomes(ends, weights):
    return None if weights is None else Outcomes(*ends, weights)


@jax.custom_vjp
def _evidence(K, ends, cov, logdet, pairs, sites, active, valid, factor, weights):
    del K
    outcomes = _outcomes(ends, weights)
    value, *_ = _evidence_parts(cov, pairs, sites, active, valid, factor, outcomes)
    return value - 0.5 * logdet


def _evidence_fwd(K, ends, cov, logdet, pairs, sites, active, valid, factor, weights):
    residuals = (cov, pairs, sites, active, valid, ends, weights)
    value = _evidence(K, ends, cov, logdet, pairs, sites, active, valid, factor, weights)
    return value, residuals


def _evidence_bwd(res, ct):
    """``d log Z_EP / dK`` with the sites fixed, for any sites (not only at a fixed point).

    With ``P = (I + K S)^-1`` (so ``P^T = I - S Sigma``), ``dSigma = P dK P^T`` and
    ``dmu = P dK b``, ``b = P^T eta = eta - S mu``; ``d log|I + K S| = tr(S P dK)``. With
    ``g_s, h_s`` the derivatives of the pair terms in ``m_s`` and ``v_s``:

        dlogZ/dK = W + sym(u b^T) - 1/2 R + 1/2 b b^T,
        u = P^T A^T g,  W = P^T A^T diag(h) A P,  R = S P = S - S Sigma S.

    ``S`` is applied as the sparse ``A^T diag(tau) A`` (O(m n)); one ``n^3`` product (``W``).
    """
    cov, pairs, sites, active, valid, ends, weights = res
    n = cov.shape[0]
    tau = jnp.where(active, sites.tau, 0.0)
    outcomes = _outcomes(ends, weights)
    _, _, eta, m, v = _evidence_parts(cov, pairs, sites, active, valid, outcomes=outcomes)

    def pair_terms(m, v, ends):
        terms = site_log_normalisers(m, v, sites, active, valid, _outcomes(ends, weights))
        return jnp.sum(terms)

    _, vjp = jax.vjp(pair_terms, m, v, ends)
    g, h, d_ends = vjp(jnp.ones((), cov.dtype))
    S_cov = apply_site_precision(cov, pairs, tau)  # S Sigma
    Pt = jnp.eye(n, dtype=cov.dtype) - S_cov  # P^T
    b = eta - to_entities(tau * m, pairs, n)  # eta - S mu
    u = Pt @ to_entities(g, pairs, n)
    i, j = pairs[:, 0], pairs[:, 1]
    ZP = to_entities(h[:, None] * (Pt.T[i] - Pt.T[j]), pairs, n)  # A^T H A P
    W = Pt @ ZP
    SP = apply_site_precision(Pt.T, pairs, tau)  # S P = pseudo_data_precision
    grad = W + 0.5 * (jnp.outer(u, b) + jnp.outer(b, u)) - 0.5 * SP + 0.5 * jnp.outer(b, b)
    grad = 0.5 * (grad + grad.T)
    d_ends = None if d_ends is None else jax.tree_util.tree_map(lambda x: ct * x, d_ends)
    return (ct * grad, d_ends) + (None,) * 8


_evidence.defvjp(_evidence_fwd, _evidence_bwd)


def log_evidence(K, pairs, sites: Sites, pair_mask=None, outcomes=None) -> jax.Array:
    """The EP approximation ``log Z_EP`` of ``log P(pairs | K)`` for given sites.

    With cavity ``N(m_c, v_c)`` and posterior marginal ``N(m, v)`` of each pair difference,

        log Z_EP = sum_s [log Phi(m_c / sqrt(1 + v_c)) + 1/2 log(1 + tau_s v_c)
                          - 1/2 m^2 / v + 1/2 m_c^2 / v_c]
                   - 1/2 log|I + K S| + 1/2 mu^T eta,

    i.e. the site normalisers that make each site's mass equal its tilted mass, times the Gaussian
    integral of prior and sites. Differentiable in ``K`` (closed-form gradient, ``_evidence_bwd``);
    the sites are held fixed (no gradient flows to them; at an EP fixed point the evidence is
    stationary in them). ``outcomes``: each row's interval and weight (``log Phi`` becomes each
    row's tilted ``log Z``, weighted; differentiable in the intervals' ends too).
    """
    K = jnp.asarray(K)
    pairs = jnp.asarray(pairs)
    valid = pair_mask_or_all(pairs, pair_mask)
    K0 = jax.lax.stop_gradient(K)
    active = informative_pairs(K0, pairs, valid)
    sites = jax.tree_util.tree_map(jax.lax.stop_gradient, sites)
    post = from_root(prior_root(K0), pairs, sites, active)
    cov = post.factor @ post.factor.T
    return evidence_from_posterior(
        dense(K), cov, post.logdet, pairs, sites, active, valid, post.factor, outcomes
    )
