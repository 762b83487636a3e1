"""Data layer: LETOR readers, preference pairs, relation graphs, problems, batching.

Submodules: ``letor``, ``pairs``, ``graphs``, ``problem``, ``batch``, ``summary``, ``sample``,
``userdata`` (ratings and comparisons from arrays or CSV files; LETOR queries as ``X, y, qid``),
``files`` (plain or gzipped files read with errors that name the file).
"""

from .userdata import queries_to_arrays

__all__ = ["queries_to_arrays"]
