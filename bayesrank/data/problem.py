"""One query's preference-learning problem: entities, their attributes and relations, pairs."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import numpy as np

from .checks import check_adjacency, check_features, check_int, check_pairs

__all__ = ["PreferenceProblem"]


@dataclass(frozen=True, eq=False)
class PreferenceProblem:
    """Validated host-side inputs of one query (use :meth:`create`; :mod:`.checks` does the
    checking). A problem may have no pairs yet (the start of active learning).

    Attributes:
        pairs: ``(m, 2)`` int64, row ``(i, j)`` = *i preferred to j* (duplicates and contradicting
            pairs allowed: they are noisy observations).
        n: number of entities.
        X: ``(n, d)`` float64 attributes, or ``None``.
        relations: one ``(n, n)`` weighted adjacency per relation type (validated: square,
            symmetric, finite, non-negative; zero diagonal).
    """

    pairs: np.ndarray
    n: int
    X: np.ndarray | None = None
    relations: tuple[np.ndarray, ...] = ()

    @classmethod
    def create(
        cls,
        pairs,
        X=None,
        relations: Sequence = (),
        n: int | None = None,
    ) -> PreferenceProblem:
        """Check and assemble a problem; ``n`` defaults to ``len(X)`` or the relations' size."""
        if X is not None:
            X = check_features(X)
        relations = () if relations is None else relations
        if isinstance(relations, Iterator):  # a generator of adjacencies: taken once
            relations = tuple(relations)
        if isinstance(relations, np.ndarray) or not isinstance(relations, Sequence):
            raise ValueError(
                "relations must be a list of (n, n) adjacency matrices (one per relation type), "
                f"got {type(relations).__name__}"
            )
        rels = tuple(check_adjacency(W, name=f"relations[{r}]") for r, W in enumerate(relations))
        sizes = {len(X)} if X is not None else set()
        sizes |= {W.shape[0] for W in rels}
        if n is not None:
            sizes.add(check_int(n, "n", low=1))
        if len(sizes) != 1:
            raise ValueError(
                f"X, relations and n disagree on the number of entities: {sorted(sizes)}"
            )
        (n,) = sizes
        summary = check_pairs(pairs, n)
        return cls(pairs=summary.pairs, n=n, X=X, relations=rels)
