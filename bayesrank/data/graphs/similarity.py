"""Similarity graphs: cosine similarity of entity vectors, kNN sparsification."""

from __future__ import annotations

import numpy as np

from ..checks import check_adjacency, check_float, check_int, check_matrix

__all__ = ["COSINE_ATOL", "cosine_similarity_graph", "feature_similarity_graph", "knn_sparsify"]

#: Cosine similarities at or below this are rounding noise of orthogonal vectors, not edges.
COSINE_ATOL = 1e-12


def knn_sparsify(W, k: int) -> np.ndarray:
    """Keep the edges of each entity's ``k`` nearest neighbours ("or" rule).

    Entity ``j`` is among ``i``'s ``k`` nearest neighbours when ``W[i, j]`` is among the ``k``
    largest positive weights of row ``i`` (``j != i``); ties are broken by index, the smaller
    ``j`` first. Edge ``(i, j)`` is kept, with its weight, when ``j`` is among ``i``'s nearest
    neighbours **or** ``i`` among ``j``'s. The result is the elementwise max of the two one-sided
    kNN graphs, so it is symmetric, and every entity keeps at least ``min(k, degree)`` edges.

    Args:
        W: ``(n, n)`` adjacency.
        k: positive number of neighbours; ``k >= n - 1`` keeps every edge.

    Returns:
        ``W: (n, n)``, a subgraph of the input with the same weights.
    """
    W = check_adjacency(W)
    k = check_int(k, "k", low=1)
    nearest = np.argsort(-W, axis=1, kind="stable")[:, :k]  # stable: ties by smaller index
    keep = np.zeros(W.shape, dtype=bool)
    keep[np.arange(W.shape[0])[:, None], nearest] = True
    keep &= W > 0
    return np.where(keep | keep.T, W, 0.0)


def cosine_similarity_graph(V, k: int | None = None, threshold: float = 0.0) -> np.ndarray:
    """Graph whose edge weights are the cosine similarities of the entities' vectors.

    ``W[i, j] = max(0, <v_i, v_j> / (|v_i| |v_j|))``: negative similarities are clipped to 0
    (a graph weight must be non-negative; "dissimilar" is treated as "unrelated"). A row of zero
    norm has similarity 0 to everything, so its entity is isolated. Weights ``<= threshold`` are
    then dropped, and always those ``<= COSINE_ATOL = 1e-12`` (the rounding noise of orthogonal
    vectors). Finally, if ``k`` is given, the graph is sparsified with ``knn_sparsify`` (the
    "or" rule, ties by index).

    Args:
        V: ``(n, p)`` finite vectors, one row per entity.
        k: number of nearest neighbours to keep, or ``None`` for no sparsification.
        threshold: in ``[0, 1)``; weights at or below it are not edges.

    Returns:
        ``W: (n, n)`` with weights in ``(threshold, 1]``.
    """
    V = check_matrix(V, "V")
    threshold = check_float(threshold, "threshold", 0, 1, high_open=True)
    # each row scaled by its largest entry first: the cosine does not depend on a row's scale,
    # and the norm of a row near 1e200 (or 1e-200) would overflow (underflow)
    peak = np.max(np.abs(V), axis=1, initial=0.0)
    V = V / np.where(peak > 0, peak, 1.0)[:, None]
    norms = np.linalg.norm(V, axis=1)
    U = V / np.where(norms > 0, norms, 1.0)[:, None]
    S = U @ U.T
    S = np.clip((S + S.T) / 2, 0.0, 1.0)
    S[S <= max(threshold, COSINE_ATOL)] = 0.0
    np.fill_diagonal(S, 0.0)
    return S if k is None else knn_sparsify(S, k)


def feature_similarity_graph(X, k: int | None = 10) -> np.ndarray:
    """kNN cosine-similarity graph of column-standardised feature vectors (e.g. LETOR features).

    Each column of ``X`` is centred and scaled to unit standard deviation within the given rows
    (one query's documents), so that every feature counts equally and the similarity is not
    dominated by features with a large range; constant columns become 0. Then
    ``cosine_similarity_graph`` with ``k`` neighbours (negative similarities clipped to 0).

    Args:
        X: ``(n, d)`` finite features of one query's documents.
        k: nearest neighbours to keep, ``None`` for the complete similarity graph.

    Returns:
        ``W: (n, n)``.
    """
    X = check_matrix(X, "X")
    # each column scaled by its largest entry first (standardising does not depend on a
    # column's scale; the variance of a column near 1e200 would overflow)
    peak = np.max(np.abs(X), axis=0, initial=0.0)
    X = X / np.where(peak > 0, peak, 1.0)
    scale = X.std(axis=0)
    Z = (X - X.mean(axis=0)) / np.where(scale > 0, scale, 1.0)
    return cosine_similarity_graph(Z, k=k)
