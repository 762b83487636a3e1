"""XPGP without a dense ``n x n`` matrix: sparse relation precisions, low-rank attributes, and
the Laplace approximation in precision form (``precision``, ``prior``, ``laplace``)."""

from .laplace import (
    Evidence,
    SparseLaplace,
    log_evidence,
    mode,
    pair_predictions,
    sampled_pair_predictions,
)
from .precision import (
    LaplacianPrecision,
    diagonal_precision,
    laplacian_precision,
    membership_precision,
)
from .prior import LatentPrior, latent_prior

__all__ = [
    "Evidence",
    "LaplacianPrecision",
    "LatentPrior",
    "SparseLaplace",
    "diagonal_precision",
    "laplacian_precision",
    "latent_prior",
    "log_evidence",
    "membership_precision",
    "mode",
    "pair_predictions",
    "sampled_pair_predictions",
]
