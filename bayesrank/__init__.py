"""bayesrank: Bayesian preference learning in JAX.

Gaussian-process preference models with a probit pair likelihood, where entities carry attributes
and relations (XPGP, Kersting & Xu 2009); EP inference with two-dimensional sites; LETOR data and
evaluation. The public API is re-exported here; submodules hold the rest.
"""

from . import metrics, ordering, parallel, predict, runtime
from .baselines import RankBoost, RankSVM
from .data.letor import Query, load_letor
from .data.pairs import pairs_from_grades, sample_pairs, split_pairs, validate_pairs
from .data.problem import PreferenceProblem
from .data.userdata import queries_to_arrays
from .inference import ep, nuts
from .kernels import (
    ARD,
    RBF,
    XPGP,
    Diffusion,
    Fixed,
    HiddenCommonCause,
    Independent,
    Linear,
    RegularizedLaplacian,
)
from .model import Posterior, XPGPModel

__version__ = "0.1.0.dev0"

__all__ = [
    "ARD",
    "RBF",
    "XPGP",
    "Diffusion",
    "Fixed",
    "HiddenCommonCause",
    "Independent",
    "Linear",
    "Posterior",
    "PreferenceProblem",
    "Query",
    "RankBoost",
    "RankSVM",
    "RegularizedLaplacian",
    "XPGPModel",
    "ep",
    "load_letor",
    "metrics",
    "nuts",
    "ordering",
    "pairs_from_grades",
    "parallel",
    "predict",
    "queries_to_arrays",
    "runtime",
    "sample_pairs",
    "split_pairs",
    "validate_pairs",
]
