"""The Gaussian ``N(0, K) prod_s site_s`` in factored form: moved to
``bayesrank.inference.gaussian.factor`` (shared with Laplace), prediction at new entities to
``bayesrank.inference.gaussian.predict``; the names stay importable from here.
"""

from ..gaussian.factor import (
    Factor,
    covariance,
    dense,
    from_root,
    posterior_from_sites,
    posterior_moments,
)
from ..gaussian.predict import predict_new

__all__ = [
    "Factor",
    "covariance",
    "dense",
    "from_root",
    "posterior_from_sites",
    "posterior_moments",
    "predict_new",
]
