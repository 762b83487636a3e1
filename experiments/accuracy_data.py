"""The inference study's real preference problems, re-exported from their home,
``bayesrank.experiments.inference.problems`` (``benchmarks/bench_study.py`` imports
``hetrec_genre_problems`` from here): OHSUMED and MQ2008 queries, HetRec users, as dicts with
``name``, ``X``, ``grades``, ``known`` and ``held_out``."""

from bayesrank.data.movielens import movie_attributes, scale01, user_ratings
from bayesrank.experiments.inference.problems import accuracy_problems as problems
from bayesrank.experiments.inference.problems import (
    hetrec_genre_problems,
    hetrec_problems,
    letor_problems,
    split,
)

__all__ = [
    "hetrec_genre_problems",
    "hetrec_problems",
    "letor_problems",
    "movie_attributes",
    "problems",
    "scale01",
    "split",
    "user_ratings",
]
