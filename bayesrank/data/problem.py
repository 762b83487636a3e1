"""One query's preference-learning problem: entities, their attributes and relations, pairs."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from .graphs import validate_adjacency
from .pairs import validate_pairs

__all__ = ["PreferenceProblem"]


@dataclass(frozen=True, eq=False)
class PreferenceProblem:
    """Validated host-side inputs of one query (use :meth:`create`).

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
            X = np.asarray(X, dtype=np.float64)
            if X.ndim != 2:
                raise ValueError(f"X must be (n, d), got shape {X.shape}")
            bad = np.argwhere(~np.isfinite(X))
            if bad.size:
                raise ValueError(f"X[{bad[0][0]}, {bad[0][1]}] = {X[tuple(bad[0])]} is not finite")
        rels = tuple(validate_adjacency(W, name=f"relations[{r}]") for r, W in enumerate(relations))
        sizes = {len(X)} if X is not None else set()
        sizes |= {W.shape[0] for W in rels}
        if n is not None:
            sizes.add(int(n))
        if len(sizes) != 1:
            raise ValueError(
                f"X, relations and n disagree on the number of entities: {sorted(sizes)}"
            )
        (n,) = sizes
        summary = validate_pairs(pairs, n)
        return cls(pairs=summary.pairs, n=n, X=X, relations=rels)
