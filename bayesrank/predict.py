"""Preference prediction from a Gaussian posterior ``q(xi_hat) = N(mu, Sigma)``.

Transductive (paper Sec. 4.2, Eq. 13-14): for any pair ``(i, j)`` of the entities in the problem,

    P(i > j | data) = Phi(delta_mu / sqrt(1 + delta_var)),
    delta_mu = mu_i - mu_j,   delta_var = Sigma_ii + Sigma_jj - 2 Sigma_ij,

``delta_var`` being the uncertainty of the preference degree difference (its predictive standard
deviation is ``sqrt(delta_var)``).

Inductive (beyond the paper): for new entities with cross-covariance ``K_* = K(train, new)``
and prior covariance ``K_** = K(new, new)``, the EP posterior gives (with site precision ``S`` and
shift ``eta``)

    E[xi_*]   = K_*^T K^-1 mu = K_*^T (eta - S mu),
    Cov[xi_*] = K_** - K_*^T (K + S^-1)^-1 K_* = K_** - K_*^T (S - S Sigma S) K_*,

both free of any inverse (``K^-1 mu = eta - S mu`` because ``(K^-1 + S) mu = eta``, and
``(K + S^-1)^-1 = S - S Sigma S`` by Woodbury, extended by continuity to singular ``S``).
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax.scipy.special import log_ndtr

from .likelihoods import (
    Outcomes,
    interval_probability,
    outcome_log_likelihood,
    outcome_probabilities,
    pair_probability,
)

__all__ = [
    "OutcomePrediction",
    "PairPrediction",
    "conditioning",
    "draw_entity_scores",
    "draw_outcome_predictions",
    "draw_pair_predictions",
    "draw_probability_matrix",
    "entity_scores",
    "grade_probabilities",
    "predict_conditioned",
    "predict_new",
    "predict_outcomes",
    "predict_pairs",
    "probability_matrix",
]


class PairPrediction(NamedTuple):
    """Per pair, shapes ``(p,)``: ``prob`` = P(i > j), moments of ``xi_hat_i - xi_hat_j``."""

    prob: jax.Array
    delta_mean: jax.Array
    delta_var: jax.Array


def predict_pairs(mean: jax.Array, cov: jax.Array, pairs: jax.Array) -> PairPrediction:
    """Eq. 13-14 for every row ``(i, j)`` of ``pairs: (p, 2)``; ``mean: (n,)``, ``cov: (n, n)``."""
    pairs = jnp.asarray(pairs)
    i, j = pairs[:, 0], pairs[:, 1]
    delta_mean = mean[i] - mean[j]
    delta_var = jnp.maximum(cov[i, i] + cov[j, j] - 2.0 * cov[i, j], 0.0)
    return PairPrediction(pair_probability(delta_mean, delta_var), delta_mean, delta_var)


class OutcomePrediction(NamedTuple):
    """Per pair, shapes ``(p,)``: ``P(i > j)``, ``P(tie)``, ``P(j > i)`` (summing to 1) under the
    tie model (``bayesrank.likelihoods``), and the moments of ``xi_hat_i - xi_hat_j``."""

    win: jax.Array
    tie: jax.Array
    loss: jax.Array
    delta_mean: jax.Array
    delta_var: jax.Array


def predict_outcomes(mean, cov, pairs, margin) -> OutcomePrediction:
    """The three outcomes' probabilities of each row ``(i, j)`` of ``pairs: (p, 2)``, tie margin
    ``margin``: ``P(i > j) = Phi((dmu - eps) / s)``, ``P(j > i) = Phi((-dmu - eps) / s)``,
    ``P(tie)`` the rest, ``s = sqrt(1 + dvar)`` (Eq. 13-14 with the margin; ``eps = 0`` gives
    ``predict_pairs``' probability and no tie)."""
    pred = predict_pairs(mean, cov, pairs)
    win, tie, loss = outcome_probabilities(pred.delta_mean, pred.delta_var, margin)
    return OutcomePrediction(win, tie, loss, pred.delta_mean, pred.delta_var)


def grade_probabilities(mean, var, thresholds) -> np.ndarray:
    """``(..., K)``: the probability of each grade ``0..K-1`` of entities whose ``xi_hat`` is
    ``N(mean, var)`` (``mean``, ``var``: ``(...)``), under increasing ``thresholds: (K - 1,)``:
    ``Phi((b_k - mu) / s) - Phi((b_{k-1} - mu) / s)``, ``s = sqrt(1 + var)`` (the ordinal
    model, ``bayesrank.likelihoods``)."""
    b = np.asarray(thresholds, np.float64)
    edges = np.concatenate([[-np.inf], b, [np.inf]])
    mean = np.asarray(mean, np.float64)[..., None]
    var = np.broadcast_to(np.asarray(var, np.float64), np.shape(mean)[:-1])[..., None]
    return np.asarray(interval_probability(mean, var, edges[:-1], edges[1:]))


def probability_matrix(mean: jax.Array, cov: jax.Array) -> jax.Array:
    """``P[i, j] = P(i > j | data)`` for all pairs: ``(n, n)`` (diagonal 1/2)."""
    var = jnp.diag(cov)
    delta_var = jnp.maximum(var[:, None] + var[None, :] - 2.0 * cov, 0.0)
    return pair_probability(mean[:, None] - mean[None, :], delta_var)


def entity_scores(mean: jax.Array, cov: jax.Array) -> tuple[jax.Array, jax.Array]:
    """Posterior mean and variance of each entity's preference degree: ``(n,)``, ``(n,)``."""
    return mean, jnp.diag(cov)


def predict_new(
    mean: jax.Array,
    cov: jax.Array,
    site_precision: jax.Array,
    site_shift: jax.Array,
    K_cross: jax.Array,
    K_new: jax.Array,
) -> tuple[jax.Array, jax.Array]:
    """Posterior ``(mean: (p,), cov: (p, p))`` of ``xi_hat`` at new entities (module docstring).

    Args:
        mean, cov: the EP posterior on the ``n`` training entities.
        site_precision, site_shift: ``S: (n, n)`` and ``eta: (n,)`` of the training pairs' EP
            sites (``bayesrank.inference.site_precision``).
        K_cross: ``(n, p)`` prior covariance between training and new entities.
        K_new: ``(p, p)`` prior covariance of the new entities.
    """
    return predict_conditioned(*conditioning(mean, cov, site_precision, site_shift), K_cross, K_new)


def conditioning(mean, cov, site_precision, site_shift) -> tuple[jax.Array, jax.Array]:
    """The part of ``predict_new`` that no new entity enters: ``shift = eta - S mu: (n,)``
    and ``middle = S - S Sigma S: (n, n)`` (``K^-1 mu`` and ``(K + S^-1)^-1``), computed
    once where many new entities follow (an acquisition's ascent)."""
    S, eta = site_precision, site_shift
    return eta - S @ mean, S - S @ cov @ S


def predict_conditioned(shift, middle, K_cross, K_new) -> tuple[jax.Array, jax.Array]:
    """``predict_new`` from ``conditioning``'s ``(shift, middle)``: ``O(n^2 p)``."""
    new_mean = K_cross.T @ shift
    new_cov = K_new - K_cross.T @ middle @ K_cross
    return new_mean, 0.5 * (new_cov + new_cov.T)


# --- Monte Carlo prediction from posterior draws (NUTS) ------------------------------------------


def draw_pair_predictions(draws: jax.Array, pairs: jax.Array) -> PairPrediction:
    """From draws ``(S, n)``: ``prob = mean_t Phi(d_t)``, ``delta_mean``, ``delta_var`` (ddof 0).

    ``d_t = xi_i^(t) - xi_j^(t)`` for each row ``(i, j)`` of ``pairs: (p, 2)``; outputs ``(p,)``.
    Under a Gaussian posterior ``E[Phi(d)] = Phi(delta_mu / sqrt(1 + delta_var))`` (Eq. 13-14):
    the same quantity as ``predict_pairs``.
    """
    pairs = jnp.asarray(pairs)
    d = draws[:, pairs[:, 0]] - draws[:, pairs[:, 1]]
    return PairPrediction(
        jnp.mean(jnp.exp(log_ndtr(d)), axis=0), jnp.mean(d, axis=0), jnp.var(d, axis=0)
    )


def draw_outcome_predictions(draws: jax.Array, pairs: jax.Array, margin) -> OutcomePrediction:
    """From draws ``(S, n)``: each outcome's probability averaged over the draws,
    ``mean_t P(outcome | d_t)``, and the moments of ``d`` (ddof 0), for ``pairs: (p, 2)``."""
    pairs = jnp.asarray(pairs)
    d = draws[:, pairs[:, 0]] - draws[:, pairs[:, 1]]
    margin = jnp.asarray(margin, d.dtype)

    def mean_probability(lower, upper):
        rows = Outcomes(jnp.full(d.shape, lower), jnp.full(d.shape, upper), jnp.ones_like(d))
        return jnp.mean(jnp.exp(outcome_log_likelihood(d, rows)), axis=0)

    return OutcomePrediction(
        mean_probability(margin, jnp.inf),
        mean_probability(-margin, margin),
        mean_probability(-jnp.inf, -margin),
        jnp.mean(d, axis=0),
        jnp.var(d, axis=0),
    )


def draw_probability_matrix(draws: jax.Array) -> jax.Array:
    """``P[i, j] = mean_t Phi(xi_i^(t) - xi_j^(t))``: ``(n, n)``, accumulated over draws ``(S, n)``.

    A ``lax.scan`` over draws keeps memory at ``O(n^2)`` rather than ``O(S n^2)``.
    """
    n = draws.shape[-1]

    def add(total, xi):
        return total + jnp.exp(log_ndtr(xi[:, None] - xi[None, :])), None

    total, _ = jax.lax.scan(add, jnp.zeros((n, n), draws.dtype), draws)
    return total / draws.shape[0]


def draw_entity_scores(draws: jax.Array) -> tuple[jax.Array, jax.Array]:
    """Posterior mean and variance (ddof 0) of each entity's degree: ``(n,)``, ``(n,)``."""
    return jnp.mean(draws, axis=0), jnp.var(draws, axis=0)
