"""XPGP without a dense ``n x n`` matrix: sparse relation precisions, low-rank attributes, and
the Laplace approximation in precision form (``precision``, ``prior``, ``laplace``)."""

from .laplace import SparseLaplace, mode, pair_predictions, sampled_pair_predictions
from .precision import (
    LaplacianPrecision,
    diagonal_precision,
    laplacian_precision,
    membership_precision,
)
from .prior import LatentPrior, latent_prior

__all__ = [
    "LaplacianPrecision",
    "LatentPrior",
    "SparseLaplace",
    "diagonal_precision",
    "laplacian_precision",
    "latent_prior",
    "membership_precision",
    "mode",
    "pair_predictions",
    "sampled_pair_predictions",
]
