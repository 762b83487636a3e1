"""Baselines as pure, differentiable JAX functions with scikit-learn-style estimators.

``ranksvm``: RankSVM (Joachims 2002), linear and kernel, primal Newton (squared hinge or hinge),
both parameterisations of the one solver in ``newton`` (damped Newton, Huber continuation,
implicit differentiation).
``rankboost``: RankBoost (Freund et al. 2003) with threshold weak rankers, one ``lax.scan``.
``cmpnn`` and ``sortnet``: SortNet (Rigutini et al. 2011), ranking by sorting with a learned
comparator network whose weight sharing makes ``P(x > y) = 1 - P(y > x)`` hold by construction.
``prank``: PRank (Crammer & Singer 2001), the online ordinal perceptron on graded labels.
"""

from . import cmpnn, newton, prank, rankboost, ranksvm, sortnet
from .prank import PRank
from .rankboost import RankBoost
from .sortnet import SortNet
from .svm_estimator import RankSVM

__all__ = [
    "PRank",
    "RankBoost",
    "RankSVM",
    "SortNet",
    "cmpnn",
    "newton",
    "prank",
    "rankboost",
    "ranksvm",
    "sortnet",
]
