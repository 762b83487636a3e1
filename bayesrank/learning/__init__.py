"""Hyperparameter learning for the XPGP prior: EM-EP and EP-evidence maximisation.

The package, one concept a module:

- ``config``: what is learned (``default_trainable``), the free/fixed split of the prior's
  unconstrained values, the static ``Config`` and the traced ``Traced`` of a fit;
- ``objectives``: the EM bound ``Q`` (Eq. 15-16), the EP evidence with its gradient, the
  Fisher information, for a batch sharing ``theta`` and per query;
- ``em``: EM-EP's E- and M-steps and the optax steps on the evidence, compiled;
- ``guard``: the optax path's host check of every step (a non-finite one rejected);
- ``evidence``: the compiled evidence programs bucket by bucket, summed on the host;
- ``bfgs``: the host-driven BFGS, for many fits in lockstep (and why it is host-driven);
- ``initialize``: the median heuristic, restarts with an explicit key, coarse subsets;
- ``design``: the global start, a space-filling design scored by the evidence, BFGS from
  its best distinct points;
- ``settings``: the façade's grouped settings, the optimiser (``BFGS``, ``Optax``) and the
  start (``Start``); the engine's are its own (``engine=EP(...)``, ``bayesrank.inference.engines``);
- ``options``: the groups resolved, with their defaults and the old keywords, before a fit;
- ``fit``: ``fit_hyperparameters``, the façade;
- ``stages``: a fit of one layout: prepare, run from every start, finish;
- ``results``: ``FitResult`` and ``Trace``;
- ``diagnostics``: the warnings a fit gives (its cap reached; restarts at distinct optima).

Optionally (``hyperprior_scale``, on by default) a log-normal hyperprior centred on the initial
values, i.e. a normal prior of that standard deviation on each unconstrained value, turns the
fit into MAP-II; it is what keeps a lengthscale from collapsing on a query with few informative
pairs.
"""

from .._moved import moved
from .config import FROZEN_BY_DEFAULT, default_trainable
from .design import GlobalStart
from .diagnostics import (
    LearningConvergenceWarning,
    MultimodalEvidenceWarning,
    NonFiniteStartError,
    NonFiniteStepWarning,
)
from .fit import fit_hyperparameters
from .initialize import initialize
from .objectives import expected_log_prior
from .results import Design, FitResult, Trace
from .settings import BFGS, Optax, Start
from .sparse_evidence import (
    LatentLearning,
    SparseLearning,
    fit_latent_scales,
    fit_sparse_hyperparameters,
)

__all__ = [
    "BFGS",
    "FROZEN_BY_DEFAULT",
    "Design",
    "FitResult",
    "GlobalStart",
    "LatentLearning",
    "LearningConvergenceWarning",
    "MultimodalEvidenceWarning",
    "NonFiniteStartError",
    "NonFiniteStepWarning",
    "Optax",
    "SparseLearning",
    "Start",
    "Trace",
    "default_trainable",
    "expected_log_prior",
    "fit_hyperparameters",
    "fit_latent_scales",
    "fit_sparse_hyperparameters",
    "initialize",
]


# The batching helpers moved when learning became a package (to parallel and data.batch).
__getattr__ = moved(
    __name__,
    {
        "EPSettings": "bayesrank.inference.engines:EP",
        "PreparedBatch": "bayesrank.parallel.batching",
        "covariances": "bayesrank.parallel.batching",
        "prepare_batch": "bayesrank.parallel.batching",
        "size_buckets": "bayesrank.data.batch",
        "touched_entities": "bayesrank.data.batch",
    },
)
