"""EP's sites: the moment matching of one rank-one Gaussian per pair.

The sites themselves (``Sites``: ``(tau, nu)`` along each pair's difference ``d_s``) and their
sparse algebra (``S = A^T diag(tau) A``, ``eta = A^T nu``) are shared with Laplace and live in
``bayesrank.inference.gaussian.sites``; this module re-exports them.

Site update for pair ``s`` from the posterior marginal ``N(m, v)`` of ``d_s``:

    cavity  1/v_c = 1/v - tau_s,  m_c = v_c (m / v - nu_s);
    tilted moments (m_hat, v_hat) of Phi(d) N(d | m_c, v_c)   (likelihoods.tilted_moments);
    tau_s <- 1/v_hat - 1/v_c,   nu_s <- m_hat / v_hat - m_c / v_c   (then damped).

With ``Outcomes`` (ties, weights, a tie margin: ``bayesrank.likelihoods``) the tilted moments are
each row's outcome's, and a row of weight ``c`` holds the site of ``c`` copies: its cavity removes
one copy (``tau_s / c``, ``nu_s / c``) and the new site is ``c`` times one copy's, so at a fixed
point it is exactly the ``c`` copies' sum (the copies' sites are equal there).
"""

from __future__ import annotations

import jax.numpy as jnp

from ...likelihoods import Outcomes, outcome_tilted_moments, tilted_moments

# The shared site algebra lives in ``bayesrank.inference.gaussian.sites``; these names stay
# importable from here.
from ..gaussian.sites import (
    Sites,
    apply_site_precision,
    factor_marginals,
    informative_pairs,
    marginals,
    pair_mask_or_all,
    site_natural_parameters,
    site_precision,
    to_entities,
    zero_sites,
)

__all__ = [
    "Sites",
    "apply_site_precision",
    "cavity",
    "factor_marginals",
    "informative_pairs",
    "marginals",
    "new_sites",
    "one_copy",
    "pair_mask_or_all",
    "site_natural_parameters",
    "site_precision",
    "tilted",
    "to_entities",
    "zero_sites",
]


def cavity(m, v, sites: Sites):
    """Cavity ``(m_c, v_c, ok)`` of each site from the marginal ``N(m, v)`` of its difference;
    ``ok`` is False where the cavity precision ``1/v - tau`` is not positive."""
    lam_c = 1.0 / v - sites.tau
    ok = lam_c > 0
    v_c = 1.0 / jnp.where(ok, lam_c, 1.0)
    m_c = v_c * (m / v - sites.nu)
    return m_c, v_c, ok


def tilted(m_c, v_c, outcomes: Outcomes | None):
    """One copy's tilted moments: the probit pair's, or each row's outcome's."""
    if outcomes is None:
        return tilted_moments(m_c, v_c)
    return outcome_tilted_moments(m_c, v_c, outcomes)


def one_copy(sites: Sites, outcomes: Outcomes | None) -> Sites:
    """The site of one copy of each row: ``sites`` divided by the rows' weights."""
    if outcomes is None:
        return sites
    return Sites(sites.tau / outcomes.weight, sites.nu / outcomes.weight)


def new_sites(m, v, sites: Sites, damping, residual: bool = False, outcomes=None):
    """Damped moment-matched sites from marginals ``(m, v)``; plus skip and clip flags.

    A site whose cavity is improper keeps its value (skipped); a negative new precision
    (impossible in exact arithmetic for these log-concave likelihoods) is set to zero (clipped).
    With ``residual``, also each pair's moment-matching gap ``max(|m_t - m|, |sd_t - sd|)``
    between its tilted moments and its marginal (0 where the cavity is improper).
    ``outcomes``: ties, weights and margin (module docstring); None: probit pairs, weight 1.
    """
    m_c, v_c, ok = cavity(m, v, one_copy(sites, outcomes))
    moments = tilted(m_c, v_c, outcomes)
    tau_new = 1.0 / moments.var - 1.0 / v_c
    nu_new = moments.mean / moments.var - m_c / v_c
    if outcomes is not None:
        tau_new, nu_new = outcomes.weight * tau_new, outcomes.weight * nu_new
    clipped = ok & (tau_new < 0)
    tau_new = jnp.maximum(tau_new, 0.0)
    tau = jnp.where(ok, (1 - damping) * sites.tau + damping * tau_new, sites.tau)
    nu = jnp.where(ok, (1 - damping) * sites.nu + damping * nu_new, sites.nu)
    if residual:
        gap = jnp.maximum(jnp.abs(moments.mean - m), jnp.abs(jnp.sqrt(moments.var) - jnp.sqrt(v)))
        return Sites(tau, nu), ~ok, clipped, jnp.where(ok, gap, 0.0)
    return Sites(tau, nu), ~ok, clipped
