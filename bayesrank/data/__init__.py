"""Data layer: LETOR readers, preference pairs, relation graphs, problems, batching.

Submodules: ``letor``, ``pairs``, ``graphs``, ``problem``, ``batch``, ``summary``, ``sample``,
``userdata`` (ratings and comparisons from arrays or CSV files; LETOR queries as ``X, y, qid``).
"""

from .userdata import queries_to_arrays

__all__ = ["queries_to_arrays"]
