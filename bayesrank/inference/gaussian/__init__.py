"""The Gaussian site algebra that EP, Laplace and the designs' belief share.

A pair's likelihood depends on ``d_s = xi_i - xi_j`` only, so its Gaussian approximation is a
rank-one *site* ``exp(-1/2 tau_s d_s^2 + nu_s d_s)``; the posterior is
``N(0, K) prod_s site_s = N(mu, Sigma)``, ``Sigma = (K^-1 + S)^-1``, ``mu = Sigma eta``. EP finds
the sites by moment matching (``bayesrank.inference.ep``), Laplace by Newton's method at the
mode (``bayesrank.inference.laplace``); both compute the rest here, one concept a module:

- ``sites``: ``Sites``, the informative pairs, ``S = A^T diag(tau) A`` and ``eta = A^T nu``
  (sparse), the pairs' marginals;
- ``factor``: the posterior from a root ``K = M M^T`` and ``B = I + M^T S M`` (eigenvalues
  >= 1), ``posterior_moments``, ``posterior_from_sites`` (differentiable in ``K``) and
  ``pseudo_data_precision`` ``(K + S^-1)^-1``;
- ``predict``: ``predict_new``, the posterior at new entities from the sites.
"""

from .factor import posterior_from_sites, posterior_moments, pseudo_data_precision
from .predict import predict_new
from .sites import Sites, informative_pairs, site_natural_parameters, site_precision, zero_sites

__all__ = [
    "Sites",
    "informative_pairs",
    "posterior_from_sites",
    "posterior_moments",
    "predict_new",
    "pseudo_data_precision",
    "site_natural_parameters",
    "site_precision",
    "zero_sites",
]
