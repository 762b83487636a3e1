"""LETOR prediction files: one score per document, one per line, in the data file's order (the
official evaluation scripts' input). The numbers follow the grammar of
``bayesrank.data.letor``'s feature values."""

from __future__ import annotations

import os

import numpy as np

from .checks import check_int
from .files import as_path
from .letor import _Bad, _error, _number, _read_text, _show, _split_lines, _tokens

__all__ = ["read_scores"]


def read_scores(path: str | os.PathLike, n_expected: int | None = None) -> np.ndarray:
    """Read a prediction file: one score per line (LETOR's format). Returns ``(n,)`` float64.

    Blank lines are not allowed between scores (each line belongs to one document); a trailing
    newline is fine. ``n_expected`` checks the count against the data file's number of documents.
    A score is a finite decimal number, as a feature value in the module docstring's grammar.
    """
    n_expected = check_int(n_expected, "n_expected", low=0, allow_none=True)
    path = as_path(path)
    rows = _split_lines(_read_text(path), path)
    while rows and not rows[-1].strip(" \t"):
        rows.pop()
    if not rows:
        raise ValueError(f"{path}: empty score file")
    scores = np.empty(len(rows), dtype=np.float64)
    for lineno, row in enumerate(rows, start=1):
        try:
            tokens = _tokens(row)
        except _Bad as bad:
            raise _error(path, lineno, str(bad)) from None
        if len(tokens) != 1:
            raise _error(path, lineno, f"expected one score, got {_show(' '.join(tokens))}")
        value = _number(tokens[0])
        if isinstance(value, str):
            problem = "is not finite" if value == "non-finite" else "is not a number"
            raise _error(path, lineno, f"score {_show(tokens[0])} {problem}")
        scores[lineno - 1] = value
    if n_expected is not None and scores.size != n_expected:
        raise ValueError(
            f"{path}: {scores.size} scores for {n_expected} documents in the data file"
        )
    return scores
