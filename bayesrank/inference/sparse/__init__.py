"""XPGP without a dense ``n x n`` matrix: sparse relation precisions, low-rank attributes, and
the Laplace approximation in precision form (``precision``, ``prior``, ``laplace``,
``evidence``)."""

from .evidence import Evidence, evidence_gradient, log_evidence
from .laplace import SparseMode, mode, pair_predictions, sampled_pair_predictions
from .precision import (
    LaplacianPrecision,
    diagonal_precision,
    laplacian_precision,
    membership_precision,
    residual_precision,
)
from .prior import LatentPrior, latent_prior, scale_prior
from .xpgp import SparsePosterior, fit_problem, from_xpgp

__all__ = [
    "Evidence",
    "LaplacianPrecision",
    "LatentPrior",
    "SparseMode",
    "SparsePosterior",
    "diagonal_precision",
    "evidence_gradient",
    "fit_problem",
    "from_xpgp",
    "laplacian_precision",
    "latent_prior",
    "log_evidence",
    "membership_precision",
    "mode",
    "pair_predictions",
    "residual_precision",
    "sampled_pair_predictions",
    "scale_prior",
]
