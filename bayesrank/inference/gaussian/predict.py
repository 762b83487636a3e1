"""Prediction at new entities from a Gaussian posterior of prior and sites.

For the posterior ``N(mean, cov)`` of ``N(0, K) prod_s site_s`` on ``n`` training entities
(``sites``: ``S``, ``eta``) and new entities with prior covariances ``K_cross: (n, p)`` and
``K_new: (p, p)``, the formula of ``bayesrank.predict.predict_new`` gives the posterior at the new
entities; here from the sites themselves, as EP's and Laplace's fits hold them.
"""

from __future__ import annotations

from ...predict import predict_new as _predict_new
from .sites import Sites, site_precision

__all__ = ["predict_new"]


def predict_new(mean, cov, pairs, sites: Sites, K_cross, K_new, pair_mask=None):
    """Posterior ``(mean: (p,), cov: (p, p))`` of ``xi_hat`` at new entities from a fit's sites.

    ``mean, cov``: the posterior (EP or Laplace) on the ``n`` training entities; ``pairs``,
    ``sites``, ``pair_mask``: the training pairs and their sites; ``K_cross: (n, p)``,
    ``K_new: (p, p)``: prior covariances with and of the new entities
    (``bayesrank.predict.predict_new``).
    """
    S, eta = site_precision(mean.shape[0], pairs, sites, pair_mask)
    return _predict_new(mean, cov, S, eta, K_cross, K_new)
