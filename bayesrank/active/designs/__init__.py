"""Preferential Bayesian optimisation: propose a pair of new designs anywhere in the unit cube.

``acquisition`` scores a pair from the utility's posterior at it (EUBO, qEUBO, the paper's
variance criterion, BALD); ``belief`` predicts that posterior at new designs from any
``GaussianEngine``'s fit (EP, Laplace, a user's) or NUTS's draws, on the XPGP prior with an ARD
kernel, and learns its hyperparameters; ``search`` maximises an acquisition
from many starts in one compiled program, over the cube, a pool or both; ``loop`` runs the
whole optimisation with a function for the answers, many seeds at once; ``session`` asks a
person (or any callable), one pair at a time, with an answers file to resume from: the designs
proposer of the interactive session (``active.interactive``).
"""

from . import acquisition, belief, loop, search
from .acquisition import ACQUISITIONS, bald, eubo, qeubo, variance_criterion
from .loop import DesignTrace, Trace, run_batch, run_core
from .search import Proposal, best_in_pool, maximize, mixed
from .session import DesignSession, optimize
from .settings import Settings

__all__ = [
    "ACQUISITIONS",
    "DesignSession",
    "DesignTrace",
    "Proposal",
    "Settings",
    "Trace",
    "acquisition",
    "bald",
    "belief",
    "best_in_pool",
    "eubo",
    "loop",
    "maximize",
    "mixed",
    "optimize",
    "qeubo",
    "run_batch",
    "run_core",
    "search",
    "variance_criterion",
]
