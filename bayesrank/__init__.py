"""bayesrank: Bayesian preference learning in JAX.

Gaussian-process preference models with a probit pair likelihood, where entities carry attributes
and relations (XPGP, Kersting & Xu 2009); EP inference with two-dimensional sites; LETOR data and
evaluation. The public API is re-exported here; submodules hold the rest.
"""

from . import active, metrics, ordering, parallel, predict, runtime
from .baselines import PRank, RankBoost, RankSVM, SortNet
from .data.letor import Query, load_letor
from .data.pairs import pairs_from_grades, sample_pairs, split_pairs, validate_pairs
from .data.problem import PreferenceProblem
from .data.sample import load_sample, sample_meta_path, sample_path
from .data.userdata import queries_to_arrays
from .evaluation import evaluate_queries
from .inference import ep, laplace, nuts
from .io import load, save
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
from .learning import (
    BFGS,
    EPSettings,
    FitResult,
    GlobalStart,
    Optax,
    Start,
    default_trainable,
    fit_hyperparameters,
)
from .model import Posterior, XPGPModel

__version__ = "0.1.0.dev0"

__all__ = [
    "ARD",
    "BFGS",
    "RBF",
    "XPGP",
    "Diffusion",
    "EPSettings",
    "FitResult",
    "Fixed",
    "GlobalStart",
    "HiddenCommonCause",
    "Independent",
    "Linear",
    "Optax",
    "PRank",
    "Posterior",
    "PreferenceProblem",
    "Query",
    "RankBoost",
    "RankSVM",
    "RegularizedLaplacian",
    "SortNet",
    "Start",
    "XPGPModel",
    "active",
    "default_trainable",
    "ep",
    "evaluate_queries",
    "fit_hyperparameters",
    "laplace",
    "load",
    "load_letor",
    "load_sample",
    "metrics",
    "nuts",
    "ordering",
    "pairs_from_grades",
    "parallel",
    "predict",
    "queries_to_arrays",
    "runtime",
    "sample_meta_path",
    "sample_pairs",
    "sample_path",
    "save",
    "split_pairs",
    "validate_pairs",
]
