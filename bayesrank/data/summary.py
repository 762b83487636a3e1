"""Descriptive statistics of a ranking dataset: queries, documents, labels, implied pairs."""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import numpy as np

from .letor import Query

__all__ = ["DatasetSummary", "count_preference_pairs", "summarize"]


def count_preference_pairs(grades: np.ndarray) -> int:
    """Number of pairs ``(i, j)`` with ``grades[i] > grades[j]`` in one query.

    From the label histogram: ``sum_{a > b} c_a c_b``, with ``c_a`` the count of grade ``a``.
    """
    _, counts = np.unique(np.asarray(grades), return_counts=True)  # levels ascending
    below = np.cumsum(counts) - counts
    return int((counts * below).sum())


class DatasetSummary(NamedTuple):
    """What ``bayesrank data summary`` reports for one file.

    ``docs_per_query`` and ``pairs_per_query`` are ``(min, mean, max)``; ``label_counts`` maps each
    grade to its number of documents; ``pairs_total`` is the number of preference pairs implied by
    the grades within queries (ties give none).
    """

    n_queries: int
    n_docs: int
    n_features: int
    label_counts: dict[int, int]
    docs_per_query: tuple[int, float, int]
    pairs_per_query: tuple[int, float, int]
    pairs_total: int
    queries_without_relevant: int

    def to_dict(self) -> dict:
        out = self._asdict()
        out["label_counts"] = {str(k): v for k, v in self.label_counts.items()}
        return out


def summarize(queries: Sequence[Query], relevant_threshold: int = 1) -> DatasetSummary:
    """Summarise a list of queries. A query "without relevant" has no grade >= the threshold."""
    if not queries:
        raise ValueError("no queries to summarise")
    sizes = np.array([q.n_docs for q in queries])
    pairs = np.array([count_preference_pairs(q.grades) for q in queries])
    grades = np.concatenate([q.grades for q in queries])
    levels, counts = np.unique(grades, return_counts=True)
    return DatasetSummary(
        n_queries=len(queries),
        n_docs=int(sizes.sum()),
        n_features=max(q.n_features for q in queries),
        label_counts={int(k): int(c) for k, c in zip(levels, counts, strict=True)},
        docs_per_query=(int(sizes.min()), float(sizes.mean()), int(sizes.max())),
        pairs_per_query=(int(pairs.min()), float(pairs.mean()), int(pairs.max())),
        pairs_total=int(pairs.sum()),
        queries_without_relevant=sum(int((q.grades < relevant_threshold).all()) for q in queries),
    )
