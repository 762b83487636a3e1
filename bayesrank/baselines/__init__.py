"""Baselines as pure, differentiable JAX functions with scikit-learn-style estimators.

``ranksvm``: RankSVM (Joachims 2002), linear and kernel, primal Newton (squared hinge or hinge),
both parameterisations of the one solver in ``newton`` (damped Newton, Huber continuation,
implicit differentiation).
``rankboost``: RankBoost (Freund et al. 2003) with threshold weak rankers, one ``lax.scan``.
"""

from . import newton, rankboost, ranksvm
from .rankboost import RankBoost
from .svm_estimator import RankSVM

__all__ = ["RankBoost", "RankSVM", "newton", "rankboost", "ranksvm"]
