"""Relation graphs to and from networkx (the only module of the package that imports it)."""

from __future__ import annotations

import math
from collections.abc import Hashable, Sequence

import networkx as nx
import numpy as np

from ..checks import check_adjacency, check_distinct

__all__ = ["from_networkx", "to_networkx"]


def from_networkx(
    G: nx.Graph, nodes: Sequence[Hashable] | None = None, weight: str | None = "weight"
) -> np.ndarray:
    """The adjacency matrix of an undirected networkx graph, in a given entity order.

    Args:
        G: undirected ``nx.Graph`` or ``nx.MultiGraph`` (parallel edges add up; self-loops are
            dropped).
        nodes: the entity order; default ``list(G.nodes)``. Entities without edges in ``G`` (or
            absent from it) are isolated; nodes of ``G`` that are not listed and have no edges
            are ignored.
        weight: the edge attribute holding the weight (missing means 1); ``None`` gives every
            edge weight 1.

    Returns:
        ``W: (n, n)`` with ``n = len(nodes)``.

    Raises:
        ValueError: for a directed graph (use ``directed_roles`` or ``cocitation`` on its
            adjacency), a repeated entry of ``nodes``, an edge to a node not in ``nodes``, or a
            weight that is not a finite non-negative number (naming the edge).
    """
    if G.is_directed():
        raise ValueError(
            "G is directed; turn its adjacency A = nx.to_numpy_array(G, nodelist=nodes) into "
            "undirected graphs with directed_roles(A) or cocitation(A)"
        )
    nodes = list(G.nodes) if nodes is None else list(nodes)
    index = check_distinct(nodes, "nodes")
    W = np.zeros((len(nodes), len(nodes)))
    for u, v, data in G.edges(data=True):
        for end in (u, v):
            if end not in index:
                raise ValueError(f"edge ({u!r}, {v!r}): node {end!r} is not in nodes")
        value = 1.0 if weight is None else data.get(weight, 1.0)
        try:
            w = float(value)
        except (TypeError, ValueError):
            raise ValueError(f"edge ({u!r}, {v!r}): weight {value!r} is not a number") from None
        if not (math.isfinite(w) and w >= 0):
            raise ValueError(f"edge ({u!r}, {v!r}): weight {value!r} is not finite and >= 0")
        if u != v:
            W[index[u], index[v]] += w
            W[index[v], index[u]] += w
    return W


def to_networkx(W, nodes: Sequence[Hashable] | None = None) -> nx.Graph:
    """An undirected ``nx.Graph`` with every entity as a node and an edge where ``W[i, j] > 0``.

    Args:
        W: ``(n, n)`` adjacency (checked with ``check_adjacency``).
        nodes: ``n`` distinct node labels in entity order; default ``range(n)``.

    Returns:
        Graph with nodes in entity order (isolated ones included) and the weight in the edge
        attribute ``"weight"`` (a Python float).
    """
    W = check_adjacency(W)
    nodes = list(range(W.shape[0])) if nodes is None else list(nodes)
    if len(nodes) != W.shape[0]:
        raise ValueError(f"{len(nodes)} nodes for a {W.shape[0]} x {W.shape[0]} adjacency")
    check_distinct(nodes, "nodes")
    G = nx.Graph()
    G.add_nodes_from(nodes)
    rows, cols = np.nonzero(np.triu(W, k=1))
    G.add_weighted_edges_from(
        (nodes[i], nodes[j], float(W[i, j])) for i, j in zip(rows, cols, strict=True)
    )
    return G
