"""Which pair to ask about: scores of candidate pairs from their predictive moments.

For a candidate pair ``(i, j)`` the posterior gives ``d = xi_i - xi_j ~ N(delta_mu, delta_var)``
(paper Eq. 13-14) and the answer "i beats j" has probability ``p = Phi(delta_mu / sqrt(1 +
delta_var))``. Every score is larger for the pair more worth asking:

- ``"variance_ratio"`` (the paper's greedy rule, Sec. 5): ``delta_var / delta_mu^2``, the pair
  whose latent preference degrees are closest and most uncertain. Exact ties in the mean
  (``delta_mu = 0``, e.g. before any answer) are broken by the larger variance: the score is
  ``delta_var / (delta_mu^2 + eps)`` with ``eps`` the dtype's smallest normal number.
- ``"mutual_information"`` (BALD, Houlsby et al. 2011; the paper's "natural next step"): the
  information the answer ``y`` carries about the latent degrees,
  ``I(y; xi) = h(p) - E_d[h(Phi(d))]``, ``h`` the binary entropy in nats. The expectation has no
  closed form; it is computed by quadrature: Gauss-Hermite in the Gaussian's own scale where
  ``sd(d) <= 1`` (there ``h(Phi(.))``, which varies on a scale of 1, is smooth relative to the
  Gaussian), Gauss-Legendre over ``d`` in ``[-L, L]`` otherwise (``h(Phi(d)) < 1e-20`` beyond
  ``L = 10``), both accurate to about 1e-10.
- ``"random"``: a uniform random score (the reference), candidate ``s``'s drawn from
  ``fold_in(key, s)``, so that padding the candidate list does not change the draws.
"""

from __future__ import annotations

from functools import cache

import jax
import jax.numpy as jnp
import numpy as np
from jax.scipy.special import log_ndtr

__all__ = ["CRITERIA", "binary_entropy", "mutual_information", "score", "variance_ratio"]

CRITERIA = ("variance_ratio", "mutual_information", "random")

#: Half-width of the Gauss-Legendre interval over d (beyond it h(Phi(d)) < 1e-20).
_HALF_WIDTH = 10.0


def variance_ratio(delta_mean, delta_var):
    """The paper's score ``delta_var / (delta_mu^2 + eps)`` (module docstring), shape of the
    inputs."""
    eps = jnp.finfo(jnp.result_type(delta_var)).tiny
    return delta_var / (jnp.square(delta_mean) + eps)


def binary_entropy(log_p, log_q):
    """``-p log p - q log q`` from ``log p`` and ``log q = log(1 - p)`` (nats; 0 at p = 0 or 1)."""
    return -(jnp.exp(log_p) * log_p + jnp.exp(log_q) * log_q)


def _h_probit(d):
    """``h(Phi(d))``, stably in both tails."""
    return binary_entropy(log_ndtr(d), log_ndtr(-d))


@cache
def _nodes(kind: str, count: int):
    if kind == "hermite":
        return np.polynomial.hermite.hermgauss(count)
    return np.polynomial.legendre.leggauss(count)


def mutual_information(delta_mean, delta_var, n_hermite: int = 64, n_legendre: int = 256):
    """BALD's ``I(y; xi) = h(p) - E[h(Phi(d))]``, ``d ~ N(delta_mean, delta_var)`` (nats), for
    arrays of any (common) shape; quadrature as in the module docstring."""
    delta_mean = jnp.asarray(delta_mean)
    delta_var = jnp.maximum(jnp.asarray(delta_var), 0.0)
    dtype = jnp.result_type(delta_mean, delta_var, float)
    sd = jnp.sqrt(delta_var)[..., None]
    mu = delta_mean[..., None]
    x, w = (jnp.asarray(a, dtype) for a in _nodes("hermite", n_hermite))
    narrow = jnp.sum(w * _h_probit(mu + jnp.sqrt(2.0) * sd * x), axis=-1) / jnp.sqrt(jnp.pi)
    u, v = (jnp.asarray(a, dtype) for a in _nodes("legendre", n_legendre))
    d = _HALF_WIDTH * u
    safe_sd = jnp.maximum(sd, 1.0)
    density = jnp.exp(-0.5 * jnp.square((d - mu) / safe_sd)) / (safe_sd * jnp.sqrt(2 * jnp.pi))
    wide = _HALF_WIDTH * jnp.sum(v * _h_probit(d) * density, axis=-1)
    expected = jnp.where(sd[..., 0] <= 1.0, narrow, wide)
    z = delta_mean / jnp.sqrt(1.0 + delta_var)
    return jnp.maximum(binary_entropy(log_ndtr(z), log_ndtr(-z)) - expected, 0.0)


def score(criterion: str, delta_mean, delta_var, key=None):
    """The score of each candidate under ``criterion`` (one of ``CRITERIA``); ``key``: a
    JAX PRNG key, needed by ``"random"``."""
    if criterion == "variance_ratio":
        return variance_ratio(delta_mean, delta_var)
    if criterion == "mutual_information":
        return mutual_information(delta_mean, delta_var)
    if criterion == "random":
        dtype = jnp.result_type(delta_var)
        index = jnp.arange(jnp.size(delta_mean)).reshape(jnp.shape(delta_mean))
        draw = jax.vmap(lambda s: jax.random.uniform(jax.random.fold_in(key, s), (), dtype))
        return draw(index.reshape(-1)).reshape(index.shape)
    raise ValueError(f"criterion must be one of {CRITERIA}, got {criterion!r}")
