"""Kernels of the XPGP prior: attribute kernels, graph kernels and their weighted sum (Eq. 5)."""

from .attributes import ARD, RBF, Independent, Linear
from .base import Kernel
from .graph import (
    Diffusion,
    Fixed,
    HiddenCommonCause,
    LaplacianSpectrum,
    RegularizedLaplacian,
    hidden_common_cause,
    laplacian,
    laplacian_spectrum,
)
from .params import Bounded, Positive, Real, constrain, unconstrain
from .xpgp import XPGP, ComponentPosterior, component_posterior, mask_covariance

__all__ = [
    "ARD",
    "RBF",
    "XPGP",
    "Bounded",
    "ComponentPosterior",
    "Diffusion",
    "Fixed",
    "HiddenCommonCause",
    "Independent",
    "Kernel",
    "LaplacianSpectrum",
    "Linear",
    "Positive",
    "Real",
    "RegularizedLaplacian",
    "component_posterior",
    "constrain",
    "hidden_common_cause",
    "laplacian",
    "laplacian_spectrum",
    "mask_covariance",
    "unconstrain",
]
