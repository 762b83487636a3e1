"""Active preference exploration (paper Sec. 5): choose the pair the model is least sure of.

:mod:`.criteria` scores candidate pairs (the paper's variance ratio, BALD's mutual information,
random); :mod:`.loop` runs the greedy loop, one compiled ``lax.scan`` of selections and EP
updates warm-started from the previous sites.
"""

from .criteria import CRITERIA, mutual_information, score, variance_ratio
from .loop import Exploration, explore, explore_core, next_pair

__all__ = [
    "CRITERIA",
    "Exploration",
    "explore",
    "explore_core",
    "mutual_information",
    "next_pair",
    "score",
    "variance_ratio",
]
