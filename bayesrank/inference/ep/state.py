"""EP's iteration state, its initialisation and one plain sweep (sequential or parallel).

A sweep updates every site from the current posterior marginals (``sites.new_sites``),
then refactorises the posterior from the new sites (``factor.from_root``):

- ``"sequential"``: one site at a time, with a rank-one update of ``(mu, Sigma)`` inside
  ``lax.scan`` (the paper's scheme);
- ``"parallel"``: all sites from the same marginals (the form for GPUs and ``vmap``).

Both refresh the posterior from the sites after every sweep and reach the same fixed point.

Damping: each sweep moves the sites a fraction ``damping`` of the way to their moment-matched
values (damping does not change the fixed points). It starts at the given value (1: a full step)
and, with ``adapt_damping``, is halved, down to ``MIN_DAMPING``, whenever the largest marginal
change fails to shrink by ``CONTRACTION`` from one sweep to the next: the sign of the
oscillation that undamped parallel EP falls into on strongly separable problems with large
kernel scales. The oscillation's amplitude may decay slowly (sites alternating between two
values, the change falling by 1% a sweep): halving only on a *growing* change left such
problems at 400-1,200 sweeps against the sequential schedule's 13, a contraction of 0.9 brings
them under 100 with the median unchanged (``docs/development/reliability.md``). A problem that
converges undamped pays nothing for the safeguard. (A lower floor, a recovering damping and
rejecting the growing sweep were all slower on such problems; a given damping below 1/2 is kept
fixed.)

The state carries ``active``, the pairs that take part: valid (``pair_mask``) and informative
(``sites.informative_pairs``, decided once from ``K`` by ``init``), so a loop of
``bayesrank.inference.ep.step`` over the state behaves as ``bayesrank.inference.ep.run``.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from ...linalg import prior_root
from ..gaussian.factor import Factor, from_root
from ..gaussian.sites import (
    Sites,
    factor_marginals,
    informative_pairs,
    pair_mask_or_all,
    zero_sites,
)
from .sites import new_sites

#: Damping is halved down to this floor when the marginals' largest change does not shrink by
#: ``CONTRACTION`` (a smaller
#: damping given by the user stays as it is).
MIN_DAMPING = 0.5
#: A sweep whose largest change is not below this fraction of the last one's halves the damping.
CONTRACTION = 0.9

SCHEDULES = ("sequential", "parallel")


class EPState(NamedTuple):
    """The EP iteration state (a pytree: it passes through ``jit``, ``vmap`` and loops)."""

    sites: Sites
    mean: jax.Array  # (n,)
    factor: jax.Array  # (n, n) U with Sigma = U U^T (Sigma itself is formed only when needed)
    logdet: jax.Array  # log|B| = log|I + K S| of the current sites
    root: jax.Array  # (n, n) M with K = M M^T, fixed during the iteration
    damping: jax.Array  # fraction of the next site update taken (halved on a growing change)
    n_iter: jax.Array  # sweeps done
    max_change: jax.Array  # largest change of a marginal mean or sd in the last sweep
    n_skipped: jax.Array  # site updates skipped for a non-positive cavity variance (total)
    n_clipped: jax.Array  # negative site precisions set to zero (total)
    sd: jax.Array  # (n,) posterior marginal standard deviations (for the convergence check)
    active: jax.Array | None = None  # (m,) bool: valid, informative pairs (fixed)
    history: Any = None  # Anderson history (.acceleration) when accelerated, else None
    outcomes: Any = None  # likelihoods.Outcomes (ties, weights, margin), or None: probit pairs


def row_norms(U) -> jax.Array:
    return jnp.sqrt(jnp.sum(U**2, axis=1))


def init_plain(
    K, pairs, sites: Sites | None = None, pair_mask=None, *, damping=1.0, outcomes=None
) -> EPState:
    """The state at ``sites`` (or at the prior): ``K`` factorised once, the active pairs decided."""
    K = jnp.asarray(K)
    pairs = jnp.asarray(pairs)
    active = informative_pairs(K, pairs, pair_mask)
    return start(prior_root(K), pairs, sites, active, damping, outcomes)


def start(root, pairs, sites, active, damping, outcomes=None) -> EPState:
    """The state given the prior's root ``M`` (``K = M M^T``) and the ``active`` pairs."""
    pairs = jnp.asarray(pairs)
    n, dtype = root.shape[0], root.dtype
    if sites is None:  # the prior: Sigma = M M^T, no factorisation needed
        sites = zero_sites(pairs.shape[0], dtype)
        U = jnp.diag(root) if root.ndim == 1 else root
        post = Factor(jnp.zeros(n, dtype), U, jnp.zeros((), dtype))
    else:
        post = from_root(root, pairs, sites, active)
    zero = jnp.zeros((), dtype=jnp.int32)
    return EPState(
        sites=sites,
        mean=post.mean,
        factor=post.factor,
        logdet=post.logdet,
        root=root,
        damping=jnp.asarray(damping, dtype),
        n_iter=zero,
        max_change=jnp.asarray(jnp.inf, dtype),
        n_skipped=zero,
        n_clipped=zero,
        sd=row_norms(post.factor),
        active=active,
        outcomes=outcomes,
    )


def sequential_sweep(state: EPState, pairs, pair_mask):
    """Site by site, each from the marginals after the previous update (rank-one updates)."""

    outcomes = state.outcomes

    def update(carry, inputs):
        tau, nu, mean, cov, skipped, clipped = carry
        s, (i, j), valid = inputs
        sa = cov[:, i] - cov[:, j]
        v = sa[i] - sa[j]
        m = mean[i] - mean[j]
        old = Sites(tau[s], nu[s])
        row = jax.tree_util.tree_map(lambda x: x[s], outcomes)
        new, skip, clip = new_sites(m, v, old, state.damping, outcomes=row)
        dtau = jnp.where(valid, new.tau - old.tau, 0.0)
        dnu = jnp.where(valid, new.nu - old.nu, 0.0)
        c = dtau / (1.0 + dtau * v)
        cov = cov - c * jnp.outer(sa, sa)
        mean = mean + sa * (dnu - c * (m + dnu * v))
        carry = (
            tau.at[s].add(dtau),
            nu.at[s].add(dnu),
            mean,
            cov,
            skipped + (skip & valid),
            clipped + (clip & valid),
        )
        return carry, None

    m = pairs.shape[0]
    cov = state.factor @ state.factor.T
    init_carry = (*state.sites, state.mean, cov, state.n_skipped, state.n_clipped)
    (tau, nu, _, _, skipped, clipped), _ = jax.lax.scan(
        update, init_carry, (jnp.arange(m), pairs, pair_mask)
    )
    return Sites(tau, nu), skipped, clipped


def parallel_sweep(state: EPState, pairs, pair_mask):
    """All sites from the current marginals; also the sweep's moment-matching residual.

    The residual is the largest ``|m_t - m_s|`` or ``|sd_t - sd_s|`` over the updated pairs,
    between each pair's tilted moments and its current marginal: the change each undamped new
    site would make to its own pair's marginal, 0 at an EP fixed point.
    """
    m, v = factor_marginals(state.mean, state.factor, pairs)
    new, skip, clip, gap = new_sites(
        m, v, state.sites, state.damping, residual=True, outcomes=state.outcomes
    )
    sites = Sites(
        jnp.where(pair_mask, new.tau, state.sites.tau), jnp.where(pair_mask, new.nu, state.sites.nu)
    )
    skipped = state.n_skipped + jnp.sum(skip & pair_mask).astype(jnp.int32)
    clipped = state.n_clipped + jnp.sum(clip & pair_mask).astype(jnp.int32)
    residual = jnp.max(jnp.where(pair_mask, gap, 0.0), initial=0.0)
    return sites, skipped, clipped, residual


def refresh(state: EPState, sites, skipped, clipped, pairs, pair_mask, adapt_damping) -> EPState:
    """The state at new ``sites``: a fresh factorisation, the change, the damping rule.

    A factorisation that is not finite (``B``'s Cholesky fails where its condition number
    exceeds ``1 / eps``: contradicting copies of one pair at ``K = 1e6 I`` in float32) is
    refused: the state keeps its sites and posterior, the sweep counts, ``max_change`` is
    ``inf`` (not converged) and the damping is halved, so the next sweep takes a shorter step.
    The loop thus ends at the last finite posterior, flagged, never at NaN.
    """
    post = from_root(state.root, pairs, sites, pair_mask)
    sd = row_norms(post.factor)
    change = jnp.maximum(jnp.max(jnp.abs(post.mean - state.mean)), jnp.max(jnp.abs(sd - state.sd)))
    damping = state.damping
    if adapt_damping:
        slower = jnp.maximum(0.5 * damping, jnp.minimum(MIN_DAMPING, damping))
        damping = jnp.where(change > CONTRACTION * state.max_change, slower, damping)
    ok = jnp.isfinite(change) & jnp.isfinite(post.logdet)
    accepted = state._replace(
        sites=sites,
        mean=post.mean,
        factor=post.factor,
        logdet=post.logdet,
        damping=damping,
        max_change=change,
        sd=sd,
    )
    refused = state._replace(damping=0.5 * state.damping, max_change=jnp.full_like(change, jnp.inf))
    # One branch taken, not a select per field: fewer kernels, and no (n, n) select per sweep
    # (under vmap the cond becomes that select again).
    new = jax.lax.cond(ok, lambda: accepted, lambda: refused)
    return new._replace(n_iter=state.n_iter + 1, n_skipped=skipped, n_clipped=clipped)


def active_pairs(state: EPState, pairs, pair_mask) -> jax.Array:
    """The pairs a sweep updates: the state's ``active`` ones, and ``pair_mask`` if given."""
    active = pair_mask_or_all(pairs, None) if state.active is None else state.active
    return active if pair_mask is None else active & pair_mask


def plain_step(state: EPState, pairs, schedule, pair_mask, adapt_damping) -> EPState:
    """One sweep of ``schedule`` over the ``pair_mask`` pairs, then a fresh factorisation."""
    if schedule == "sequential":
        sites, skipped, clipped = sequential_sweep(state, pairs, pair_mask)
    else:
        sites, skipped, clipped, _ = parallel_sweep(state, pairs, pair_mask)
    return refresh(state, sites, skipped, clipped, pairs, pair_mask, adapt_damping)
