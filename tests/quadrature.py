"""Reference moments by 1-D quadrature (scipy), shared by the EP and NUTS tests."""

import numpy as np
from scipy import integrate, special


def normal_pdf(x, mean, sd):
    """``N(x | mean, sd^2)`` written out: inside a quadrature's integrand, scipy.stats' per-call
    overhead (tens of microseconds) was most of a test's time."""
    return np.exp(-0.5 * ((x - mean) / sd) ** 2) / (sd * np.sqrt(2.0 * np.pi))


def normal_cdf(x):
    """``Phi(x)`` (``scipy.special.ndtr``)."""
    return special.ndtr(x)


def probit_tilted_moments(v0):
    """Mean and variance of ``d`` under ``N(d | 0, v0) Phi(d) / Z``: one pair's exact posterior."""

    def moment(p):
        return integrate.quad(
            lambda d: d**p * normal_pdf(d, 0.0, np.sqrt(v0)) * normal_cdf(d),
            -np.inf,
            np.inf,
            epsabs=1e-14,
            epsrel=1e-13,
        )[0]

    z = moment(0)
    m1 = moment(1) / z
    return m1, moment(2) / z - m1**2, z
