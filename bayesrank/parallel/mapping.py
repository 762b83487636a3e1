"""Deprecated module: ``map_queries`` and ``query_map_method`` live in ``bayesrank.querymap``."""

from .._moved import moved

__getattr__ = moved(
    __name__, {"map_queries": "bayesrank.querymap", "query_map_method": "bayesrank.querymap"}
)
