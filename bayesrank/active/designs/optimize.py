"""Deprecated module: the maximisers of an acquisition live in ``active.designs.search``."""

from ..._moved import moved

__getattr__ = moved(
    __name__,
    dict.fromkeys(
        ("Proposal", "best_in_pool", "maximize", "mixed"), "bayesrank.active.designs.search"
    ),
)
