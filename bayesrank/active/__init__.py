"""Active preference exploration (paper Sec. 5): choose the pair the model is least sure of.

``criteria`` scores candidate pairs (the paper's variance ratio, BALD's mutual information,
random); ``loop`` runs the greedy loop, one compiled ``lax.scan`` of selections and EP (or
Laplace) updates warm-started from the previous sites; ``collection`` runs it on host arrays,
for one query or a whole collection with its random repetitions in one compiled call;
``interactive`` is the one interactive session, a person (or any callable) answering one pair
at a time, with skip, undo and an answer file to resume from; ``session`` is its pool proposer
over candidate pairs (``bayesrank active --interactive``), ``designs.session`` its proposer of
new designs (``bayesrank optimize --interactive``).
"""

from .._moved import moved
from .collection import explore, explore_queries
from .criteria import CRITERIA, mutual_information, score, variance_ratio
from .loop import Exploration, explore_core, next_pair
from .session import ANSWERS, Session, ask

__all__ = [
    "ANSWERS",
    "CRITERIA",
    "Exploration",
    "Session",
    "ask",
    "explore",
    "explore_core",
    "explore_queries",
    "mutual_information",
    "next_pair",
    "score",
    "variance_ratio",
]

# The loop's engines by name are the one registry of engines now.
__getattr__ = moved(__name__, {"ENGINES": "bayesrank.inference.engines"})
