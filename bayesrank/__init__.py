"""bayesrank: Bayesian preference learning in JAX.

Gaussian-process preference models with a probit pair likelihood, where entities carry attributes
and relations (XPGP, Kersting & Xu 2009); EP inference with two-dimensional sites; LETOR data and
evaluation. The public API is re-exported here; submodules hold the rest.
"""

from . import active, metrics, ordering, parallel, predict, runtime
from ._moved import moved
from ._version import __version__ as __version__
from .baselines import PRank, RankBoost, RankSVM, SortNet
from .data.letor import Query, load_letor
from .data.pairs import pairs_from_grades, sample_pairs, split_pairs, validate_pairs
from .data.problem import PreferenceProblem
from .data.sample import load_sample, sample_meta_path, sample_path
from .data.userdata import queries_to_arrays
from .evaluation import evaluate_queries
from .inference import ep, laplace, nuts
from .inference.engine import Engine, GaussianEngine
from .inference.engines import EP, NUTS, Laplace, SparseLaplace
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
    FitResult,
    GlobalStart,
    Optax,
    Start,
    default_trainable,
    fit_hyperparameters,
)
from .model import Posterior, XPGPModel

__all__ = [
    "ARD",
    "BFGS",
    "EP",
    "NUTS",
    "RBF",
    "XPGP",
    "Diffusion",
    "Engine",
    "FitResult",
    "Fixed",
    "GaussianEngine",
    "GlobalStart",
    "HiddenCommonCause",
    "Independent",
    "Laplace",
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
    "SparseLaplace",
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


#: ``EPSettings`` is the engine ``EP`` now (the same fields, one default each).
__getattr__ = moved(__name__, {"EPSettings": "bayesrank.inference.engines:EP"})
