"""Acquisitions for a pair of new designs, from the posterior of the utility at them.

Each function takes the latent utility's posterior at the ``q`` designs on offer: a Gaussian
``(mean: (q,), cov: (q, q))`` (EP, Laplace) or draws ``(S, q)`` (NUTS), and returns a value to
maximise. Every one is differentiable in the moments, hence in the designs through
``belief.latent``.

- **EUBO** (Lin et al. 2022), the expected utility of the best option shown,
  ``E[max(f_1, f_2)]``. For two options under a Gaussian it is Clark's (1961) closed form: with
  ``d = f_1 - f_2 ~ N(mu_d, s^2)``,

      E[max(f_1, f_2)] = mu_2 + E[max(d, 0)] = mu_2 + mu_d Phi(mu_d / s) + s phi(mu_d / s).

- **qEUBO** (Astudillo et al. 2023), the same for ``q`` options, by Monte Carlo with fixed base
  samples ``eps: (S, q)`` as BoTorch does: ``f = mean + eps L^T``, ``L L^T = cov``; the value
  comes with its standard error ``sd(max_i f_i) / sqrt(S)``. From NUTS draws it is the draws'
  own average.
- **The paper's variance criterion** (Sec. 5), ``r = var(d) / mu_d^2``, extended to new points
  as ``r / (1 + r) = var(d) / (mu_d^2 + var(d))``: the same order of pairs, but bounded, so that
  a gradient ascent over designs has a maximum to reach (``r`` itself is unbounded wherever the
  two means are equal). It is maximal for every pair of equal means, so it picks among many
  optima; it is offered because it is the paper's rule, not as a good optimiser.
- **BALD** (Houlsby et al. 2011): the mutual information between the answer and the latent
  utilities, ``criteria.mutual_information`` of ``(mu_d, var(d))``.
- **The knowledge gradient** (Wu & Gardner 2026, arXiv 2601.22335), the expected maximum of
  the posterior mean after the answer, taken one-shot as BoTorch takes qKG: over four designs,
  the pair ``x_1, x_2`` and a look-ahead design for each answer, ``x_+`` (if ``x_1`` wins) and
  ``x_-`` (if ``x_2`` wins), maximised jointly. The answer is ``x_1`` iff ``d + eps > 0``, ``d =
  f_1 - f_2``, ``eps ~ N(0, 1)`` (``likelihoods``' probit), so under a Gaussian posterior the
  look-ahead mean is an extended skew normal's, in closed form (Stein's lemma): with ``s^2 = 1 +
  var(d)``, ``z = mu_d / s`` and ``c(x) = cov(f(x), d)``,

      P(x_1 wins) E[f(x_+) | x_1 wins] = Phi(z) mu(x_+) + phi(z) c(x_+) / s,
      P(x_2 wins) E[f(x_-) | x_2 wins] = Phi(-z) mu(x_-) - phi(z) c(x_-) / s,

  and the value is their sum (the current maximum of the mean, a constant, is not subtracted).
  From draws ``f^(s)`` (NUTS) the look-ahead posterior is the draws reweighted by the answer's
  likelihood, so the value is exact under the draws: ``mean_s [Phi(d^(s)) f^(s)(x_+) +
  Phi(-d^(s)) f^(s)(x_-)]``.
"""

from __future__ import annotations

import jax.numpy as jnp
from jax.scipy.special import ndtr

from ..criteria import mutual_information

__all__ = [
    "ACQUISITIONS",
    "bald",
    "eubo",
    "eubo_from_draws",
    "knowledge_gradient",
    "knowledge_gradient_from_draws",
    "pair_moments",
    "qeubo",
    "variance_criterion",
]

ACQUISITIONS = ("eubo", "qeubo", "variance", "bald", "kg")

#: The designs an acquisition is a function of: the pair, and for ``"kg"`` its two look-ahead
#: designs (module docstring).
DESIGNS = {"kg": 4}


def pair_moments(mean, cov):
    """``(mu_d, var(d))`` of ``d = f_1 - f_2`` from ``mean: (2,)``, ``cov: (2, 2)``."""
    delta_var = cov[0, 0] + cov[1, 1] - 2.0 * cov[0, 1]
    return mean[0] - mean[1], jnp.maximum(delta_var, 0.0)


def eubo(mean, cov):
    """``E[max(f_1, f_2)]`` in closed form (module docstring): ``mean: (2,)``, ``cov: (2, 2)``.

    Where ``var(d) = 0`` (two equal designs) it is ``max(mu_1, mu_2)``, with a finite gradient.
    """
    mu_d, var_d = pair_moments(mean, cov)
    tiny = jnp.finfo(jnp.result_type(var_d)).tiny
    positive = var_d > tiny
    s = jnp.sqrt(jnp.where(positive, var_d, 1.0))
    z = mu_d / s
    smooth = mu_d * ndtr(z) + s * jnp.exp(-0.5 * z * z) / jnp.sqrt(2.0 * jnp.pi)
    return mean[1] + jnp.where(positive, smooth, jnp.maximum(mu_d, 0.0))


def _root(cov):
    """A Cholesky root of ``cov: (q, q)`` with a jitter of ``1e-10`` of its mean diagonal
    (enough for two equal designs, whose covariance is singular)."""
    q = cov.shape[-1]
    jitter = 1e-10 * jnp.maximum(jnp.trace(cov) / q, jnp.finfo(cov.dtype).tiny)
    return jnp.linalg.cholesky(cov + jitter * jnp.eye(q, dtype=cov.dtype))


def qeubo(mean, cov, base):
    """``E[max_i f_i]`` by Monte Carlo with fixed base samples ``base: (S, q)``; returns
    ``(value, standard error)`` (module docstring)."""
    f = mean + base @ _root(cov).T
    return eubo_from_draws(f)


def eubo_from_draws(draws):
    """``E[max_i f_i]`` from posterior draws ``(S, q)``: ``(value, standard error)``; the error
    assumes independent draws (for NUTS, divide ``S`` by the integrated autocorrelation)."""
    best = jnp.max(draws, axis=-1)
    s = draws.shape[0]
    return jnp.mean(best), jnp.std(best, ddof=1) / jnp.sqrt(s)


def variance_criterion(mean, cov):
    """The paper's ratio ``r = var(d) / mu_d^2`` as ``r / (1 + r)`` (module docstring)."""
    mu_d, var_d = pair_moments(mean, cov)
    tiny = jnp.finfo(jnp.result_type(var_d)).tiny
    return var_d / (mu_d * mu_d + var_d + tiny)


def bald(mean, cov):
    """BALD's mutual information (nats) of the answer for the pair (module docstring)."""
    return mutual_information(*pair_moments(mean, cov))


def knowledge_gradient(mean, cov):
    """The one-shot knowledge gradient (module docstring) of the pair ``x_1, x_2`` with
    look-ahead designs ``x_+, x_-``: ``mean: (4,)``, ``cov: (4, 4)`` in that order."""
    mu_d, var_d = pair_moments(mean[:2], cov[:2, :2])
    s = jnp.sqrt(1.0 + var_d)
    z = mu_d / s
    c = cov[2:, 0] - cov[2:, 1]
    pdf = jnp.exp(-0.5 * z * z) / jnp.sqrt(2.0 * jnp.pi)
    return ndtr(z) * mean[2] + ndtr(-z) * mean[3] + pdf * (c[0] - c[1]) / s


def knowledge_gradient_from_draws(draws):
    """The knowledge gradient under posterior draws ``(S, 4)`` of ``(f_1, f_2, f_+, f_-)``
    (module docstring): ``(value, standard error)``, the error for independent draws."""
    win = ndtr(draws[:, 0] - draws[:, 1])
    terms = win * draws[:, 2] + (1.0 - win) * draws[:, 3]
    return jnp.mean(terms), jnp.std(terms, ddof=1) / jnp.sqrt(draws.shape[0])
