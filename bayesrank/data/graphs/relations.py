"""Relation graphs projected from other structures, and placebo relations.

Directed links become two undirected *role* graphs and bipartite memberships (entity x other, e.g.
movie x director) a graph of shared memberships (Kersting & Xu 2009, Section 7); a permuted graph
is a placebo relation that says nothing about which entity is which.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Sequence
from typing import NamedTuple

import numpy as np

from ..checks import check_adjacency, check_distinct, check_matrix
from ..keys import permutation

__all__ = [
    "Projection",
    "bibliographic_coupling",
    "bipartite_projection",
    "bipartite_projection_from_pairs",
    "cocitation",
    "directed_roles",
    "permute_graph",
]


def _shared_neighbours(B: np.ndarray) -> np.ndarray:
    """``B B^T`` with a zero diagonal, exactly symmetric: ``W[i, j] = sum_k B[i, k] B[j, k]``;
    ``ValueError`` naming the first weight that float64 cannot hold (weights near 1e200
    multiply to 1e400): a graph's kernels depend on its scale, so it is not rescaled here."""
    with np.errstate(over="ignore", invalid="ignore"):
        W = B @ B.T
        W = (W + W.T) / 2
    np.fill_diagonal(W, 0.0)
    bad = np.argwhere(~np.isfinite(W))
    if bad.size:
        i, j = (int(x) for x in bad[0])
        raise ValueError(
            f"the shared-neighbour weight W[{i}, {j}] = sum_k B[{i}, k] B[{j}, k] overflows "
            f"float64 (largest input weight {np.max(B):.3g}): rescale the weights"
        )
    return W


def _link_matrix(A) -> np.ndarray:
    return check_matrix(A, "A", square=True, nonnegative=True)


def bibliographic_coupling(A) -> np.ndarray:
    """Entities related in their *linking* role: they link to the same pages.

    ``W = A A^T`` off the diagonal, ``W[i, j] = sum_k A[i, k] A[j, k]`` (for 0/1 links: the
    number of pages that both ``i`` and ``j`` link to). Self-links ``A[i, i]`` are kept as data.

    Args:
        A: ``(n, n)`` finite non-negative link weights, ``A[i, j]`` for a link ``i -> j``
            (not necessarily symmetric).

    Returns:
        ``W: (n, n)``.
    """
    return _shared_neighbours(_link_matrix(A))


def cocitation(A) -> np.ndarray:
    """Entities related in their *linked* role: they are linked by the same pages (co-citation).

    ``W = A^T A`` off the diagonal, ``W[i, j] = sum_k A[k, i] A[k, j]`` (for 0/1 links: the
    number of pages linking to both ``i`` and ``j``). This is the projection Kersting & Xu use for
    the TREC hyperlinks (after Silva et al.), and ``directed_roles(A)[1]``.

    Args:
        A: ``(n, n)`` finite non-negative link weights, ``A[i, j]`` for a link ``i -> j``.

    Returns:
        ``W: (n, n)``.
    """
    return _shared_neighbours(_link_matrix(A).T)


def directed_roles(A) -> tuple[np.ndarray, np.ndarray]:
    """The two role graphs of a directed relation (Section 7: ``xi = w1 f + w2 g^linking + w3
    g^linked``), each to get its own graph kernel.

    Args:
        A: ``(n, n)`` finite non-negative link weights, ``A[i, j]`` for a link ``i -> j``.

    Returns:
        ``(W_linking, W_linked)``, both ``(n, n)``: ``W_linking = A A^T`` off the diagonal
        (``bibliographic_coupling``: linking to the same pages) and ``W_linked = A^T A``
        off the diagonal (``cocitation``: linked by the same pages).
    """
    return bibliographic_coupling(A), cocitation(A)


def bipartite_projection(B, binary: bool = False) -> np.ndarray:
    """Project a bipartite relation (entities x others, e.g. movie x director) onto the entities.

    Two entities are related iff they link to the same other entity; all entities of one other
    form a clique. ``W = B B^T`` off the diagonal, so for 0/1 memberships ``W[i, j]`` is the
    number of others shared by ``i`` and ``j``.

    Args:
        B: ``(n, p)`` finite non-negative membership weights, ``B[i, k] > 0`` when entity ``i``
            links to other ``k``.
        binary: give every edge weight 1 instead.

    Returns:
        ``W: (n, n)``.
    """
    B = check_matrix(B, "B", nonnegative=True)
    W = _shared_neighbours(B)
    return (W > 0).astype(np.float64) if binary else W


class Projection(NamedTuple):
    """The result of ``bipartite_projection_from_pairs``.

    Attributes:
        W: ``(n, n)`` projected adjacency over the given entities.
        n_ignored: distinct ``(entity_id, other_id)`` pairs whose entity is not among the given
            entities (they were left out).
    """

    W: np.ndarray
    n_ignored: int


def bipartite_projection_from_pairs(
    entity_ids: Sequence[Hashable],
    memberships: Iterable[tuple[Hashable, Hashable]],
    binary: bool = False,
) -> Projection:
    """``bipartite_projection`` of a membership list, over a given entity order.

    Memberships are a set: a repeated ``(entity_id, other_id)`` pair counts once, so
    ``W[i, j]`` is the number of distinct others shared by entities ``i`` and ``j`` (or 1 with
    ``binary``). Ids are compared with ``==`` and hashing (``1`` and ``"1"`` differ). Entities
    without memberships are isolated; pairs of entities not in ``entity_ids`` are ignored and
    counted in ``Projection.n_ignored``.

    Args:
        entity_ids: ``n`` distinct entity ids, in entity order.
        memberships: ``(entity_id, other_id)`` pairs.
        binary: give every edge weight 1.

    Returns:
        ``Projection`` ``(W, n_ignored)``, ``W: (n, n)``.
    """
    index = check_distinct(entity_ids, "nodes")
    members: dict[Hashable, set[int]] = {}
    ignored: set[tuple[Hashable, Hashable]] = set()
    for entity, other in memberships:
        if entity in index:
            members.setdefault(other, set()).add(index[entity])
        else:
            ignored.add((entity, other))
    # An other with a single member adds nothing off the diagonal: leave its column out of B.
    shared = [sorted(rows) for rows in members.values() if len(rows) > 1]
    B = np.zeros((len(index), len(shared)))
    for column, rows in enumerate(shared):
        B[rows, column] = 1.0
    return Projection(bipartite_projection(B, binary=binary), len(ignored))


# --- placebo relations ----------------------------------------------------------------------------


def permute_graph(key, W) -> tuple[np.ndarray, np.ndarray]:
    """A placebo relation: the same graph with the entities shuffled uniformly at random.

    ``W_perm = P W P^T`` with ``P[i, perm[i]] = 1``, i.e. ``W_perm[i, j] = W[perm[i], perm[j]]``:
    entity ``i`` receives the relations of entity ``perm[i]``. The degree multiset and the weight
    multiset are unchanged, but the graph says nothing about which entity is which.

    Args:
        key: ``jax.random`` key; ``perm = jax.random.permutation(key, n)``.
        W: ``(n, n)`` adjacency.

    Returns:
        ``(W_perm, perm)``: ``(n, n)`` float64 and ``(n,)`` int64.
    """
    W = check_adjacency(W)
    perm = permutation(key, W.shape[0]).astype(np.int64)
    return W[np.ix_(perm, perm)], perm
