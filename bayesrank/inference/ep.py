"""Expectation propagation with two-dimensional sites for the probit pair likelihood.

Model (paper Sec. 4.1, DESIGN notation): ``xi_hat ~ N(0, K)``, observed pairs ``(i_s, j_s)`` with
likelihood ``Phi(xi_hat_i - xi_hat_j)``. EP replaces each pair's likelihood by a Gaussian *site on
the two entities it touches*. In natural parameters a site is a 2x2 precision and a 2-vector; the
probit likelihood depends on ``d_s = a_s^T xi_hat`` only (``a_s = e_i - e_j``), so the
moment-matched site is rank one along ``[1, -1]``:

    site_s(xi_i, xi_j) ∝ exp(-1/2 tau_s d_s^2 + nu_s d_s),
    precision_s = tau_s [[1, -1], [-1, 1]],   shift_s = nu_s [1, -1].

The state stores ``(tau, nu)`` per pair; :func:`site_natural_parameters` gives the 2x2 / 2-vector
form. (The paper's moment form, Eq. 7-12, needs the inverse of that 2x2 precision, which is
singular; natural parameters represent the site exactly.)

Posterior ``q = N(mu, Sigma)``, ``Sigma = (K^-1 + S)^-1``, ``S = sum_s tau_s a_s a_s^T``,
``mu = Sigma eta``, ``eta = sum_s nu_s a_s``. It is computed without inverting ``K``: with
``K = L L^T``, ``B = I + L^T S L`` (eigenvalues >= 1, well conditioned), ``Sigma = L B^-1 L^T``.

Site update for pair ``s`` (the cavity and tilted moments of ``d_s``):

    v = a^T Sigma a,  m = a^T mu;   cavity  1/v_c = 1/v - tau_s,  m_c = v_c (m / v - nu_s);
    tilted moments (m_hat, v_hat) of Phi(d) N(d | m_c, v_c)   (likelihoods.tilted_moments);
    tau_s <- 1/v_hat - 1/v_c,   nu_s <- m_hat / v_hat - m_c / v_c   (then damped).

Schedules: ``"sequential"`` updates one site at a time with a rank-one update of ``(mu, Sigma)``
inside ``lax.scan`` (the paper's scheme); ``"parallel"`` updates all sites from the current
marginals and refactorises once per sweep (the form for GPUs and ``vmap``). Both refresh the
posterior from the sites after every sweep and reach the same fixed point.

Numerical policy (counted in the diagnostics, never an exception or NaN): a site whose cavity
variance would be non-positive keeps its old value for that sweep (``n_skipped``); a negative new
site precision (impossible in exact arithmetic for this log-concave likelihood) is set to zero
(``n_clipped``), which keeps ``S`` positive semi-definite and the posterior valid.

The EP evidence (:func:`log_evidence`) is ``log Z_EP = sum_s log Ztilde_s + log int N(xi|0,K)
prod_s site_s``; with the sites fixed it is a differentiable function of ``K``, and at an EP fixed
point its gradient is the gradient of the converged evidence.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import jax.scipy.linalg as jsl
import numpy as np

from ..likelihoods import tilted_moments

__all__ = [
    "EPPosterior",
    "EPState",
    "Sites",
    "fit",
    "init",
    "log_evidence",
    "posterior_from_sites",
    "run",
    "site_natural_parameters",
    "site_precision",
    "step",
]


class Sites(NamedTuple):
    """Site parameters along each pair's difference: ``tau: (m,)`` (>= 0) and ``nu: (m,)``."""

    tau: jax.Array
    nu: jax.Array


def site_natural_parameters(sites: Sites) -> tuple[jax.Array, jax.Array]:
    """The 2-D sites on ``(xi_i, xi_j)``: precisions ``(m, 2, 2)`` and shifts ``(m, 2)``."""
    a = jnp.array([1.0, -1.0], dtype=sites.tau.dtype)
    return sites.tau[:, None, None] * jnp.outer(a, a), sites.nu[:, None] * a


class EPState(NamedTuple):
    """The EP iteration state (a pytree: it passes through ``jit``, ``vmap`` and loops)."""

    sites: Sites
    mean: jax.Array  # (n,)
    cov: jax.Array  # (n, n)
    n_iter: jax.Array  # sweeps done
    max_change: jax.Array  # largest change of a marginal mean or sd in the last sweep
    n_skipped: jax.Array  # site updates skipped for a non-positive cavity variance (total)
    n_clipped: jax.Array  # negative site precisions set to zero (total)


class EPPosterior(NamedTuple):
    """Result of :func:`fit`: the Gaussian posterior of ``xi_hat`` and diagnostics."""

    mean: jax.Array
    cov: jax.Array
    log_evidence: jax.Array
    sites: Sites
    n_iter: jax.Array
    converged: jax.Array
    max_change: jax.Array
    n_skipped: jax.Array
    n_clipped: jax.Array


def _default_jitter(dtype) -> float:
    return 1e-10 if jnp.finfo(dtype).bits == 64 else 1e-6


def _pair_mask(pairs, pair_mask):
    return jnp.ones(pairs.shape[0], dtype=bool) if pair_mask is None else pair_mask


class _Factor(NamedTuple):
    mean: jax.Array
    cov: jax.Array
    eta: jax.Array
    logdet_b: jax.Array


def site_precision(n: int, pairs, sites: Sites, pair_mask=None):
    """``S = sum_s tau_s a_s a_s^T: (n, n)`` and ``eta = sum_s nu_s a_s: (n,)`` of the sites."""
    pairs = jnp.asarray(pairs)
    i, j = pairs[:, 0], pairs[:, 1]
    pair_mask = _pair_mask(pairs, pair_mask)
    tau = jnp.where(pair_mask, sites.tau, 0.0)
    nu = jnp.where(pair_mask, sites.nu, 0.0)
    S = jnp.zeros((n, n), tau.dtype)
    S = S.at[i, i].add(tau).at[j, j].add(tau).at[i, j].add(-tau).at[j, i].add(-tau)
    eta = jnp.zeros(n, tau.dtype).at[i].add(nu).at[j].add(-nu)
    return S, eta


def _factor(K, pairs, sites, pair_mask, jitter) -> _Factor:
    n = K.shape[0]
    S, eta = site_precision(n, pairs, sites, pair_mask)
    eye = jnp.eye(n, dtype=K.dtype)
    L = jnp.linalg.cholesky(K + jitter * jnp.mean(jnp.diag(K)) * eye)
    B = eye + L.T @ S @ L
    L_B = jnp.linalg.cholesky(0.5 * (B + B.T))
    V = jsl.solve_triangular(L_B, L.T, lower=True)
    cov = V.T @ V
    return _Factor(cov @ eta, cov, eta, 2.0 * jnp.sum(jnp.log(jnp.diag(L_B))))


def posterior_from_sites(K, pairs, sites: Sites, pair_mask=None, jitter=None):
    """``(mean: (n,), cov: (n, n))`` of ``N(0, K) prod_s site_s``, by one factorisation."""
    K = jnp.asarray(K)
    jitter = _default_jitter(K.dtype) if jitter is None else jitter
    f = _factor(K, pairs, sites, _pair_mask(pairs, pair_mask), jitter)
    return f.mean, f.cov


def _cavity(m, v, sites: Sites):
    """Cavity of each site from the posterior marginal ``N(m, v)`` of its pair difference."""
    lam_c = 1.0 / v - sites.tau
    ok = lam_c > 0
    v_c = 1.0 / jnp.where(ok, lam_c, 1.0)
    m_c = v_c * (m / v - sites.nu)
    return m_c, v_c, ok


def _new_sites(m, v, sites: Sites, damping):
    """Damped moment-matched sites from marginals ``(m, v)``; plus skip and clip flags."""
    m_c, v_c, ok = _cavity(m, v, sites)
    tilted = tilted_moments(m_c, v_c)
    tau_new = 1.0 / tilted.var - 1.0 / v_c
    nu_new = tilted.mean / tilted.var - m_c / v_c
    clipped = ok & (tau_new < 0)
    tau_new = jnp.maximum(tau_new, 0.0)
    tau = jnp.where(ok, (1 - damping) * sites.tau + damping * tau_new, sites.tau)
    nu = jnp.where(ok, (1 - damping) * sites.nu + damping * nu_new, sites.nu)
    return Sites(tau, nu), ~ok, clipped


def _marginals(mean, cov, pairs):
    i, j = pairs[:, 0], pairs[:, 1]
    return mean[i] - mean[j], cov[i, i] + cov[j, j] - 2.0 * cov[i, j]


def init(K, pairs, sites: Sites | None = None, pair_mask=None, jitter=None) -> EPState:
    """Start EP from ``sites`` (a warm start) or from zero sites (the prior).

    Args:
        K: ``(n, n)`` prior covariance of ``xi_hat`` (padded entities already decoupled, e.g. by
            :func:`~bayesrank.kernels.xpgp.mask_covariance`).
        pairs: ``(m, 2)`` int, row ``(i, j)`` = *i preferred to j*.
        sites: optional warm start; ``pair_mask: (m,)`` bool, False for padded pairs (zero site).
    """
    K = jnp.asarray(K)
    pairs = jnp.asarray(pairs)
    if sites is None:
        zeros = jnp.zeros(pairs.shape[0], dtype=K.dtype)
        sites = Sites(zeros, zeros)
    mean, cov = posterior_from_sites(K, pairs, sites, pair_mask, jitter)
    zero = jnp.zeros((), dtype=jnp.int32)
    return EPState(sites, mean, cov, zero, jnp.asarray(jnp.inf, K.dtype), zero, zero)


def _sequential_sweep(state: EPState, pairs, pair_mask, damping):
    def update(carry, inputs):
        tau, nu, mean, cov, skipped, clipped = carry
        s, (i, j), valid = inputs
        sa = cov[:, i] - cov[:, j]
        v = sa[i] - sa[j]
        m = mean[i] - mean[j]
        old = Sites(tau[s], nu[s])
        new, skip, clip = _new_sites(m, v, old, damping)
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
    init_carry = (*state.sites, state.mean, state.cov, state.n_skipped, state.n_clipped)
    (tau, nu, _, _, skipped, clipped), _ = jax.lax.scan(
        update, init_carry, (jnp.arange(m), pairs, pair_mask)
    )
    return Sites(tau, nu), skipped, clipped


def _parallel_sweep(state: EPState, pairs, pair_mask, damping):
    m, v = _marginals(state.mean, state.cov, pairs)
    new, skip, clip = _new_sites(m, v, state.sites, damping)
    sites = Sites(
        jnp.where(pair_mask, new.tau, state.sites.tau), jnp.where(pair_mask, new.nu, state.sites.nu)
    )
    skipped = state.n_skipped + jnp.sum(skip & pair_mask).astype(jnp.int32)
    clipped = state.n_clipped + jnp.sum(clip & pair_mask).astype(jnp.int32)
    return sites, skipped, clipped


def step(
    state: EPState,
    K,
    pairs,
    *,
    schedule: str = "parallel",
    damping: float = 0.5,
    pair_mask=None,
    jitter=None,
) -> EPState:
    """One EP sweep over all sites, then a fresh factorisation of the posterior."""
    K = jnp.asarray(K)
    pairs = jnp.asarray(pairs)
    pair_mask = _pair_mask(pairs, pair_mask)
    jitter = _default_jitter(K.dtype) if jitter is None else jitter
    if schedule == "sequential":
        sites, skipped, clipped = _sequential_sweep(state, pairs, pair_mask, damping)
    elif schedule == "parallel":
        sites, skipped, clipped = _parallel_sweep(state, pairs, pair_mask, damping)
    else:
        raise ValueError(f"schedule must be 'sequential' or 'parallel', got {schedule!r}")
    f = _factor(K, pairs, sites, pair_mask, jitter)
    sd_old, sd_new = jnp.sqrt(jnp.diag(state.cov)), jnp.sqrt(jnp.diag(f.cov))
    change = jnp.maximum(jnp.max(jnp.abs(f.mean - state.mean)), jnp.max(jnp.abs(sd_new - sd_old)))
    return EPState(sites, f.mean, f.cov, state.n_iter + 1, change, skipped, clipped)


def run(
    K,
    pairs,
    *,
    max_iter: int = 100,
    tol: float = 1e-6,
    damping: float | None = None,
    schedule: str = "parallel",
    sites: Sites | None = None,
    pair_mask=None,
    jitter=None,
) -> EPState:
    """Iterate :func:`step` until the marginals change by less than ``tol`` or ``max_iter``.

    ``damping`` defaults to 1 (none) for the sequential schedule and 0.5 for the parallel one.
    The loop is a ``lax.while_loop``: use :func:`fit` (or :func:`log_evidence`) to differentiate.
    """
    if damping is None:
        damping = 1.0 if schedule == "sequential" else 0.5
    if not 0.0 < damping <= 1.0:
        raise ValueError(f"damping must be in (0, 1], got {damping}")
    state = init(K, pairs, sites, pair_mask, jitter)

    def cond(st):
        return (st.n_iter < max_iter) & ~(st.max_change < tol)

    def body(st):
        return step(
            st, K, pairs, schedule=schedule, damping=damping, pair_mask=pair_mask, jitter=jitter
        )

    return jax.lax.while_loop(cond, body, state)


def log_evidence(K, pairs, sites: Sites, pair_mask=None, jitter=None) -> jax.Array:
    """The EP approximation ``log Z_EP`` of ``log P(pairs | K)`` for given sites.

    With cavity ``N(m_c, v_c)`` and posterior marginal ``N(m, v)`` of each pair difference,

        log Z_EP = sum_s [log Phi(m_c / sqrt(1 + v_c)) + 1/2 log(1 + tau_s v_c)
                          - 1/2 m^2 / v + 1/2 m_c^2 / v_c]
                   - 1/2 log|I + K S| + 1/2 mu^T eta,

    i.e. the site normalisers that make each site's mass equal its tilted mass, times the Gaussian
    integral of prior and sites. Differentiable in ``K`` (sites held fixed).
    """
    K = jnp.asarray(K)
    pairs = jnp.asarray(pairs)
    pair_mask = _pair_mask(pairs, pair_mask)
    jitter = _default_jitter(K.dtype) if jitter is None else jitter
    f = _factor(K, pairs, sites, pair_mask, jitter)
    m, v = _marginals(f.mean, f.cov, pairs)
    m_c, v_c, ok = _cavity(m, v, sites)
    tilted = tilted_moments(m_c, v_c)
    terms = tilted.log_z + 0.5 * jnp.log1p(sites.tau * v_c) - 0.5 * m**2 / v + 0.5 * m_c**2 / v_c
    terms = jnp.where(pair_mask & ok, terms, 0.0)
    return jnp.sum(terms) - 0.5 * f.logdet_b + 0.5 * f.mean @ f.eta


def fit(
    K,
    pairs,
    *,
    max_iter: int = 100,
    tol: float = 1e-6,
    damping: float | None = None,
    schedule: str = "parallel",
    sites: Sites | None = None,
    pair_mask=None,
    jitter=None,
) -> EPPosterior:
    """Run EP to convergence and return the posterior, the EP evidence and diagnostics.

    Args:
        K: ``(n, n)`` prior covariance of ``xi_hat`` (paper Eq. 5).
        pairs: ``(m, 2)`` int, row ``(i, j)`` meaning *i is preferred to j*.
        max_iter, tol: at most ``max_iter`` sweeps; converged when no marginal mean or standard
            deviation moved by ``tol`` or more in the last sweep.
        damping: fraction of each site update taken (default 1 sequential, 0.5 parallel).
        schedule: ``"parallel"`` or ``"sequential"``.
        sites: warm start (e.g. the previous EM iteration's sites).
        pair_mask: ``(m,)`` bool, False for padded pairs.
        jitter: added to ``K``'s diagonal relative to its mean (default 1e-10 in float64, 1e-6 in
            float32).

    ``log_evidence`` is differentiable with respect to ``K``: the EP loop runs on
    ``stop_gradient(K)`` and the evidence is re-evaluated at the converged sites, whose own
    gradient vanishes at a fixed point.
    """
    K = jnp.asarray(K)
    pairs = jnp.asarray(pairs)
    state = run(
        jax.lax.stop_gradient(K),
        pairs,
        max_iter=max_iter,
        tol=tol,
        damping=damping,
        schedule=schedule,
        sites=sites,
        pair_mask=pair_mask,
        jitter=jitter,
    )
    sites_fixed = jax.tree_util.tree_map(jax.lax.stop_gradient, state.sites)
    mean, cov = posterior_from_sites(K, pairs, sites_fixed, pair_mask, jitter)
    return EPPosterior(
        mean=mean,
        cov=cov,
        log_evidence=log_evidence(K, pairs, sites_fixed, pair_mask, jitter),
        sites=sites_fixed,
        n_iter=state.n_iter,
        converged=state.max_change < tol,
        max_change=state.max_change,
        n_skipped=state.n_skipped,
        n_clipped=state.n_clipped,
    )


def validate_problem(K, pairs) -> None:
    """Host-side checks before EP: ``K`` square, symmetric, finite; pairs in range, no self-pairs.

    Raises ``ValueError`` naming the offending entry. (Inside compiled code nothing is checked.)
    """
    from ..data.pairs import validate_pairs

    K = np.asarray(K)
    if K.ndim != 2 or K.shape[0] != K.shape[1]:
        raise ValueError(f"K must be square (n, n), got shape {K.shape}")
    bad = np.argwhere(~np.isfinite(K))
    if bad.size:
        i, j = bad[0]
        raise ValueError(f"K[{i}, {j}] = {K[i, j]} is not finite")
    asym = np.abs(K - K.T) > 1e-8 * max(1.0, np.abs(K).max())
    if asym.any():
        i, j = np.argwhere(asym)[0]
        raise ValueError(f"K is not symmetric: K[{i}, {j}] = {K[i, j]} but K[{j}, {i}] = {K[j, i]}")
    validate_pairs(pairs, K.shape[0])
