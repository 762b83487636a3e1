"""Reference moments by 1-D quadrature (scipy), shared by the EP and NUTS tests."""

import numpy as np
from scipy import integrate, stats


def probit_tilted_moments(v0):
    """Mean and variance of ``d`` under ``N(d | 0, v0) Phi(d) / Z``: one pair's exact posterior."""

    def moment(p):
        return integrate.quad(
            lambda d: d**p * stats.norm.pdf(d, 0, np.sqrt(v0)) * stats.norm.cdf(d),
            -np.inf,
            np.inf,
            epsabs=1e-14,
            epsrel=1e-13,
        )[0]

    z = moment(0)
    m1 = moment(1) / z
    return m1, moment(2) / z - m1**2, z
