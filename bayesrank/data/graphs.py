"""Weighted relation graphs between the entities of one query (the ``W`` of XPGP's graph kernels).

Every builder returns the adjacency of a weighted undirected graph over ``n`` entities, in entity
order: a dense ``W: (n, n)`` float64 NumPy array that is symmetric, finite, non-negative and has a
zero diagonal (:func:`validate_adjacency` checks exactly this). ``W[i, j] > 0`` is an edge of
weight ``W[i, j]``; isolated entities (zero rows) and disconnected components are allowed. The
graph kernels build the Laplacian ``D - W`` from it (Kersting & Xu 2009, eq. 2).

What is here:

* checks and conversion at the boundary: :func:`validate_adjacency`, :func:`from_networkx`,
  :func:`to_networkx` (networkx is used only in these two);
* similarity graphs: :func:`cosine_similarity_graph`, :func:`knn_sparsify`,
  :func:`feature_similarity_graph`;
* directed relations (Section 7 of the paper): :func:`bibliographic_coupling` (the *linking*
  role), :func:`cocitation` (the *linked* role), :func:`directed_roles` (both);
* bipartite relations projected onto the entities (Section 7): :func:`bipartite_projection`,
  :func:`bipartite_projection_from_pairs`;
* real data: the OHSUMED keyword graph from the LETOR 3.0 ``Meta`` files
  (:func:`read_ohsumed_meta`, :func:`ohsumed_term_vectors`, :func:`ohsumed_keyword_graph`) and
  the HetRec 2011 MovieLens-2k movie relations (:func:`read_hetrec_memberships`,
  :func:`hetrec_relation_graph`, :func:`load_hetrec_relations`);
* placebo relations: :func:`permute_graph`.

These are host-side NumPy functions; randomness comes from an explicit ``jax.random`` key. Bad
input raises ``ValueError`` naming the offending file and line, element, index or value.
"""

from __future__ import annotations

import math
import operator
import os
import xml.etree.ElementTree as ET
from collections.abc import Hashable, Iterable, Sequence
from pathlib import Path
from typing import NamedTuple

import jax
import networkx as nx
import numpy as np

from ._io import read_bytes

__all__ = [
    "HETREC_RELATIONS",
    "OHSUMED_COLLECTION_SIZE",
    "OHSUMED_STREAMS",
    "OhsumedMeta",
    "Projection",
    "bibliographic_coupling",
    "bipartite_projection",
    "bipartite_projection_from_pairs",
    "cocitation",
    "cosine_similarity_graph",
    "directed_roles",
    "feature_similarity_graph",
    "from_networkx",
    "hetrec_relation_graph",
    "knn_sparsify",
    "load_hetrec_relations",
    "ohsumed_keyword_graph",
    "ohsumed_term_vectors",
    "permute_graph",
    "read_hetrec_memberships",
    "read_ohsumed_meta",
    "to_networkx",
    "validate_adjacency",
]

#: Relative tolerance of the symmetry check: ``|W[i, j] - W[j, i]| <= 1e-10 * max|W|``.
SYMMETRY_RTOL = 1e-10

#: Cosine similarities at or below this are rounding noise of orthogonal vectors, not edges.
COSINE_ATOL = 1e-12


# --- checks ---------------------------------------------------------------------------------------


def _as_matrix(M, name: str) -> np.ndarray:
    """``M`` as a 2-D float64 array (a copy), or ``ValueError`` naming its shape or dtype."""
    try:
        arr = np.array(M, dtype=np.float64)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a numeric array") from None
    if arr.ndim != 2:
        raise ValueError(f"{name} must be 2-D, got shape {arr.shape}")
    return arr


def _check_square(M: np.ndarray, name: str) -> None:
    if M.shape[0] != M.shape[1]:
        raise ValueError(f"{name} must be square (n, n), got shape {M.shape}")


def _raise_first(bad: np.ndarray, M: np.ndarray, name: str, problem: str) -> None:
    """Raise naming the first (row-major) index where ``bad`` holds, if any."""
    if bad.any():
        i, j = (int(v) for v in np.argwhere(bad)[0])
        raise ValueError(f"{name}[{i}, {j}] = {float(M[i, j])!r} {problem}")


def _check_finite(M: np.ndarray, name: str) -> None:
    _raise_first(~np.isfinite(M), M, name, "is not finite")


def _check_finite_nonnegative(M: np.ndarray, name: str) -> None:
    _check_finite(M, name)
    _raise_first(M < 0, M, name, "is negative")


def validate_adjacency(W, name: str = "W") -> np.ndarray:
    """Check a weighted undirected adjacency matrix and return it in canonical form.

    Args:
        W: ``(n, n)`` array-like (NumPy or JAX): finite, non-negative, symmetric up to
            ``|W[i, j] - W[j, i]| <= 1e-10 * max|W|``.
        name: what to call ``W`` in error messages.

    Returns:
        ``(n, n)`` float64 copy, exactly symmetric (``(W + W^T) / 2``), with the diagonal set to
        zero: self-loops are dropped, not rejected (the Laplacian ``D - W`` ignores them anyway).

    Raises:
        ValueError: for a non-square or non-2-D input, or naming the first index ``(i, j)`` and
            value that is not finite, negative, or differs from ``W[j, i]``.
    """
    W = _as_matrix(W, name)
    _check_square(W, name)
    _check_finite_nonnegative(W, name)
    tolerance = SYMMETRY_RTOL * (float(W.max()) if W.size else 0.0)
    asymmetric = np.abs(W - W.T) > tolerance
    if asymmetric.any():
        i, j = (int(v) for v in np.argwhere(asymmetric)[0])
        raise ValueError(
            f"{name} is not symmetric: {name}[{i}, {j}] = {float(W[i, j])!r} but "
            f"{name}[{j}, {i}] = {float(W[j, i])!r}"
        )
    W = (W + W.T) / 2
    np.fill_diagonal(W, 0.0)
    return W


# --- networkx at the boundary ---------------------------------------------------------------------


def _node_index(nodes: Sequence[Hashable]) -> dict[Hashable, int]:
    index: dict[Hashable, int] = {}
    for position, node in enumerate(nodes):
        if node in index:
            raise ValueError(f"nodes[{position}] = {node!r} repeats nodes[{index[node]}]")
        index[node] = position
    return index


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
        ValueError: for a directed graph (use :func:`directed_roles` or :func:`cocitation` on its
            adjacency), a repeated entry of ``nodes``, an edge to a node not in ``nodes``, or a
            weight that is not a finite non-negative number (naming the edge).
    """
    if G.is_directed():
        raise ValueError(
            "G is directed; turn its adjacency A = nx.to_numpy_array(G, nodelist=nodes) into "
            "undirected graphs with directed_roles(A) or cocitation(A)"
        )
    nodes = list(G.nodes) if nodes is None else list(nodes)
    index = _node_index(nodes)
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
        W: ``(n, n)`` adjacency (checked with :func:`validate_adjacency`).
        nodes: ``n`` distinct node labels in entity order; default ``range(n)``.

    Returns:
        Graph with nodes in entity order (isolated ones included) and the weight in the edge
        attribute ``"weight"`` (a Python float).
    """
    W = validate_adjacency(W)
    nodes = list(range(W.shape[0])) if nodes is None else list(nodes)
    if len(nodes) != W.shape[0]:
        raise ValueError(f"{len(nodes)} nodes for a {W.shape[0]} x {W.shape[0]} adjacency")
    _node_index(nodes)
    G = nx.Graph()
    G.add_nodes_from(nodes)
    rows, cols = np.nonzero(np.triu(W, k=1))
    G.add_weighted_edges_from(
        (nodes[i], nodes[j], float(W[i, j])) for i, j in zip(rows, cols, strict=True)
    )
    return G


# --- similarity graphs ----------------------------------------------------------------------------


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
    W = validate_adjacency(W)
    if isinstance(k, bool) or not isinstance(k, int | np.integer) or k < 1:
        raise ValueError(f"k must be a positive integer, got {k!r}")
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
    vectors). Finally, if ``k`` is given, the graph is sparsified with :func:`knn_sparsify` (the
    "or" rule, ties by index).

    Args:
        V: ``(n, p)`` finite vectors, one row per entity.
        k: number of nearest neighbours to keep, or ``None`` for no sparsification.
        threshold: in ``[0, 1)``; weights at or below it are not edges.

    Returns:
        ``W: (n, n)`` with weights in ``(threshold, 1]``.
    """
    V = _as_matrix(V, "V")
    _check_finite(V, "V")
    if not 0.0 <= threshold < 1.0:
        raise ValueError(f"threshold must be in [0, 1), got {threshold}")
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
    :func:`cosine_similarity_graph` with ``k`` neighbours (negative similarities clipped to 0).

    Args:
        X: ``(n, d)`` finite features of one query's documents.
        k: nearest neighbours to keep, ``None`` for the complete similarity graph.

    Returns:
        ``W: (n, n)``.
    """
    X = _as_matrix(X, "X")
    _check_finite(X, "X")
    scale = X.std(axis=0)
    Z = (X - X.mean(axis=0)) / np.where(scale > 0, scale, 1.0)
    return cosine_similarity_graph(Z, k=k)


# --- directed and bipartite relations -------------------------------------------------------------


def _shared_neighbours(B: np.ndarray) -> np.ndarray:
    """``B B^T`` with a zero diagonal, exactly symmetric: ``W[i, j] = sum_k B[i, k] B[j, k]``."""
    W = B @ B.T
    W = (W + W.T) / 2
    np.fill_diagonal(W, 0.0)
    return W


def _link_matrix(A) -> np.ndarray:
    A = _as_matrix(A, "A")
    _check_square(A, "A")
    _check_finite_nonnegative(A, "A")
    return A


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
        (:func:`bibliographic_coupling`: linking to the same pages) and ``W_linked = A^T A``
        off the diagonal (:func:`cocitation`: linked by the same pages).
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
    B = _as_matrix(B, "B")
    _check_finite_nonnegative(B, "B")
    W = _shared_neighbours(B)
    return (W > 0).astype(np.float64) if binary else W


class Projection(NamedTuple):
    """The result of :func:`bipartite_projection_from_pairs`.

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
    """:func:`bipartite_projection` of a membership list, over a given entity order.

    Memberships are a set: a repeated ``(entity_id, other_id)`` pair counts once, so
    ``W[i, j]`` is the number of distinct others shared by entities ``i`` and ``j`` (or 1 with
    ``binary``). Ids are compared with ``==`` and hashing (``1`` and ``"1"`` differ). Entities
    without memberships are isolated; pairs of entities not in ``entity_ids`` are ignored and
    counted in :attr:`Projection.n_ignored`.

    Args:
        entity_ids: ``n`` distinct entity ids, in entity order.
        memberships: ``(entity_id, other_id)`` pairs.
        binary: give every edge weight 1.

    Returns:
        :class:`Projection` ``(W, n_ignored)``, ``W: (n, n)``.
    """
    index = _node_index(entity_ids)
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


# --- files ----------------------------------------------------------------------------------------


# --- OHSUMED keyword graph ------------------------------------------------------------------------

#: Documents in the OHSUMED collection (``Meta/collectioninfo.xml``): the ``N`` of the idf.
OHSUMED_COLLECTION_SIZE = 348_566

#: LETOR 3.0 OHSUMED streams: 1 = title, 2 = abstract, 3 = title + abstract.
OHSUMED_STREAMS = (1, 2, 3)


class OhsumedMeta(NamedTuple):
    """One LETOR 3.0 OHSUMED ``Meta/query-<qid>.xml`` file.

    Attributes:
        qid: the query id (``<id>``).
        terms: the ``T`` stemmed query terms; ``terms[t - 1]`` has ``<termid>`` ``t``.
        doc_ids: ``(n,)`` str, the judged documents in file order (the LETOR feature file's
            row order for the query).
        labels: ``(n,)`` int64 relevance labels.
        tf: ``(n, T, 3)`` int64; ``tf[d, t - 1, s - 1]`` is the frequency of term ``t`` in
            stream ``s`` of document ``d``.
        lengths: ``(n, 3)`` int64 document length (tokens) per stream.
        doc_freq: ``(T, 3)`` int64 number of collection documents whose stream ``s`` contains
            term ``t`` (``<streamfrequency>``).
    """

    qid: str
    terms: tuple[str, ...]
    doc_ids: np.ndarray
    labels: np.ndarray
    tf: np.ndarray
    lengths: np.ndarray
    doc_freq: np.ndarray


def _text(elem: ET.Element, tag: str, where: str) -> str:
    found = elem.find(tag)
    if found is None or found.text is None or not found.text.strip():
        raise ValueError(f"{where}: missing <{tag}>")
    return found.text.strip()


def _integer(elem: ET.Element, tag: str, where: str, low: int = 0, high: int | None = None) -> int:
    text = _text(elem, tag, where)
    try:
        value = int(text)
    except ValueError:
        raise ValueError(f"{where}: <{tag}> {text!r} is not an integer") from None
    if value < low or (high is not None and value > high):
        bound = f"{low}..{high}" if high is not None else f">= {low}"
        raise ValueError(f"{where}: <{tag}> {value} is out of range ({bound})")
    return value


def _fill_term_frequencies(doc: ET.Element, where: str, n_terms: int, out: np.ndarray) -> None:
    """Fill ``out[t - 1, s - 1]`` with the ``<termfrequency>`` of term ``t`` in stream ``s``."""
    for stream in doc.findall("stream"):
        s = _integer(stream, "streamid", where, 1, 3)
        for term in stream.findall("term"):
            t = _integer(term, "termid", f"{where}, stream {s}", 1, n_terms)
            out[t - 1, s - 1] = _integer(term, "termfrequency", f"{where}, stream {s}, term {t}")


def _first_missing(values: np.ndarray) -> tuple[int, ...] | None:
    missing = np.argwhere(values < 0)
    return tuple(int(v) for v in missing[0]) if missing.size else None


def read_ohsumed_meta(path: str | os.PathLike) -> OhsumedMeta:
    """Parse a LETOR 3.0 OHSUMED ``Meta/query-<qid>.xml`` file (plain or gzipped).

    Raises:
        ValueError: naming the file and the element (term, or document position and docid,
            stream, term) that is missing, not an integer or out of range, or a repeated termid.
    """
    path = Path(path)
    try:
        root = ET.fromstring(read_bytes(path))
    except ET.ParseError as err:
        raise ValueError(f"{path}: malformed XML ({err})") from None
    qid = _text(root, "id", f"{path}")
    term_elems = root.findall("terminfo/term")
    n_terms = len(term_elems)
    if n_terms == 0:
        raise ValueError(f"{path}: no <terminfo><term> elements")
    words: list[str | None] = [None] * n_terms
    doc_freq = np.full((n_terms, 3), -1, dtype=np.int64)
    for position, term in enumerate(term_elems, start=1):
        where = f"{path}, term #{position}"
        t = _integer(term, "termid", where, 1, n_terms)
        if words[t - 1] is not None:
            raise ValueError(f"{where}: termid {t} appears twice")
        words[t - 1] = _text(term, "word", where)
        for stream in term.findall("stream"):
            s = _integer(stream, "streamid", f"{where} (termid {t})", 1, 3)
            doc_freq[t - 1, s - 1] = _integer(stream, "streamfrequency", f"{where}, stream {s}")
    if (missing := _first_missing(doc_freq)) is not None:
        raise ValueError(f"{path}: termid {missing[0] + 1} has no stream {missing[1] + 1}")

    doc_elems = root.findall("docinfo/doc")
    n_docs = len(doc_elems)
    doc_ids, labels = [], []
    tf = np.full((n_docs, n_terms, 3), -1, dtype=np.int64)
    lengths = np.full((n_docs, 3), -1, dtype=np.int64)
    for d, doc in enumerate(doc_elems):
        where = f"{path}, doc #{d + 1}"
        doc_ids.append(_text(doc, "docid", where))
        where = f"{where} (docid {doc_ids[-1]})"
        labels.append(_integer(doc, "label", where))
        for stream in doc.findall("stream"):
            s = _integer(stream, "streamid", where, 1, 3)
            lengths[d, s - 1] = _integer(stream, "length", f"{where}, stream {s}")
        _fill_term_frequencies(doc, where, n_terms, tf[d])
        if (missing := _first_missing(tf[d])) is not None:
            t, s = missing[0] + 1, missing[1] + 1
            raise ValueError(f"{where}: no termfrequency of termid {t} in stream {s}")
        if (missing := _first_missing(lengths[d])) is not None:
            raise ValueError(f"{where}: no <length> of stream {missing[0] + 1}")
    return OhsumedMeta(
        qid=qid,
        terms=tuple(words),
        doc_ids=np.asarray(doc_ids, dtype=str),
        labels=np.asarray(labels, dtype=np.int64),
        tf=tf,
        lengths=lengths,
        doc_freq=doc_freq,
    )


def ohsumed_term_vectors(meta: OhsumedMeta, stream: int = 3, weighting: str = "tf") -> np.ndarray:
    """Each document's vector of query-term weights in one stream.

    Args:
        meta: a parsed Meta file.
        stream: 1 = title, 2 = abstract, 3 = title + abstract.
        weighting: ``"tf"`` (default: raw term frequencies) or ``"tfidf"``: ``tf * idf`` with
            ``idf_t = log(N / df_t)``, ``N`` = :data:`OHSUMED_COLLECTION_SIZE` and ``df_t`` the
            collection document frequency of the term in that stream (``idf_t = 0`` where
            ``df_t = 0``: the term occurs in no document's stream, so its ``tf`` is 0 as well).

    Returns:
        ``(n, T)`` float64.
    """
    if stream not in OHSUMED_STREAMS:
        raise ValueError(f"stream must be one of {OHSUMED_STREAMS}, got {stream!r}")
    tf = meta.tf[:, :, stream - 1].astype(np.float64)
    if weighting == "tf":
        return tf
    if weighting == "tfidf":
        df = meta.doc_freq[:, stream - 1].astype(np.float64)
        idf = np.log(OHSUMED_COLLECTION_SIZE / np.where(df > 0, df, OHSUMED_COLLECTION_SIZE))
        return tf * idf
    raise ValueError(f"weighting must be 'tf' or 'tfidf', got {weighting!r}")


def ohsumed_keyword_graph(
    meta_xml_path: str | os.PathLike,
    doc_ids: Sequence[str] | None = None,
    stream: int = 3,
    k: int | None = None,
    weighting: str = "tf",
) -> tuple[np.ndarray, np.ndarray]:
    """The OHSUMED document graph of Kersting & Xu (Section 6): cosine similarity of keywords.

    The documents' query-term vectors (:func:`ohsumed_term_vectors`) go through
    :func:`cosine_similarity_graph`. Only the query's own terms are known (LETOR ships no full
    document text), so documents containing none of them in the stream are isolated.

    Args:
        meta_xml_path: ``Meta/query-<qid>.xml[.gz]``.
        doc_ids: the expected document ids in order (e.g. ``Query.doc_ids`` of the LETOR
            feature file), checked against the Meta file.
        stream: 1 = title, 2 = abstract, 3 = title + abstract.
        k: keep each document's ``k`` nearest neighbours ("or" rule), ``None`` for all edges.
        weighting: ``"tf"`` or ``"tfidf"``.

    Returns:
        ``(W, doc_ids)``: ``W: (n, n)`` in the Meta file's document order and ``(n,)`` doc ids.

    Raises:
        ValueError: if ``doc_ids`` differ from the file's, naming the first mismatch.
    """
    meta = read_ohsumed_meta(meta_xml_path)
    if doc_ids is not None:
        expected = [str(d) for d in doc_ids]
        for position, (want, got) in enumerate(zip(expected, meta.doc_ids.tolist(), strict=False)):
            if want != got:
                raise ValueError(
                    f"{meta_xml_path}: doc #{position + 1} is {got!r}, expected {want!r}"
                )
        if len(expected) != len(meta.doc_ids):
            raise ValueError(
                f"{meta_xml_path}: {len(meta.doc_ids)} documents, expected {len(expected)}"
            )
    vectors = ohsumed_term_vectors(meta, stream=stream, weighting=weighting)
    return cosine_similarity_graph(vectors, k=k), meta.doc_ids


# --- HetRec 2011 MovieLens-2k ---------------------------------------------------------------------

#: The HetRec movie relations: name -> file whose first two columns are ``movieID`` and the other
#: entity (director id, genre, country, tag id). Each relation projects onto the movies.
HETREC_RELATIONS = {
    "co_director": "movie_directors.dat",
    "co_genre": "movie_genres.dat",
    "co_country": "movie_countries.dat",
    "shared_tag": "movie_tags.dat",
}


def _hetrec_file(data_dir: Path, name: str) -> Path:
    for candidate in (data_dir / f"{name}.gz", data_dir / name):
        if candidate.is_file():
            return candidate
    raise ValueError(f"{data_dir}: neither {name}.gz nor {name} exists")


def read_hetrec_memberships(data_dir: str | os.PathLike, relation: str) -> list[tuple[int, str]]:
    """``(movieID, other)`` pairs of one HetRec relation, in file order.

    Reads ``<data_dir>/<file>[.gz]`` (see :data:`HETREC_RELATIONS`): Latin-1, tab-separated, LF
    or CRLF. A first line starting with ``movieID`` is a header and skipped (the original files
    have one for directors and genres, none for countries and tags). Further columns (director
    name, tag weight) are not used: ``movie_tags.dat``'s tagWeight is ignored.

    Raises:
        ValueError: for an unknown relation, or naming the file and line with fewer than two
            columns, a non-integer movieID, or an empty second column.
    """
    if relation not in HETREC_RELATIONS:
        raise ValueError(f"unknown relation {relation!r}; expected one of {list(HETREC_RELATIONS)}")
    path = _hetrec_file(Path(data_dir), HETREC_RELATIONS[relation])
    pairs = []
    for lineno, line in enumerate(read_bytes(path).decode("latin-1").splitlines(), start=1):
        fields = line.split("\t")
        if (lineno == 1 and fields[0] == "movieID") or not line.strip():
            continue
        if len(fields) < 2 or not fields[1].strip():
            raise ValueError(f"{path}, line {lineno}: expected movieID<TAB>{relation} value")
        try:
            movie = int(fields[0])
        except ValueError:
            raise ValueError(
                f"{path}, line {lineno}: movieID {fields[0]!r} is not an integer"
            ) from None
        pairs.append((movie, fields[1].strip()))
    return pairs


def _movie_id_list(movie_ids: Sequence[int]) -> list[int]:
    ids = []
    for position, movie in enumerate(movie_ids):
        try:
            ids.append(operator.index(movie))
        except TypeError:
            raise ValueError(f"movie_ids[{position}] = {movie!r} is not an integer") from None
    return ids


def hetrec_relation_graph(
    data_dir: str | os.PathLike, movie_ids: Sequence[int], relation: str, binary: bool = False
) -> np.ndarray:
    """One HetRec relation projected onto the given movies.

    ``W[i, j]`` is the number of directors (``"co_director"``), genres (``"co_genre"``),
    countries (``"co_country"``) or tags (``"shared_tag"``, regardless of tagWeight) that movies
    ``movie_ids[i]`` and ``movie_ids[j]`` share; 1 for every edge with ``binary``. Movies without
    an entry in the file are isolated.

    Args:
        data_dir: the ``hetrec2011-movielens-2k`` directory.
        movie_ids: ``n`` distinct MovieLens movie ids (integers), in entity order.
        relation: a key of :data:`HETREC_RELATIONS`.

    Returns:
        ``W: (n, n)``.
    """
    ids = _movie_id_list(movie_ids)
    memberships = read_hetrec_memberships(data_dir, relation)
    return bipartite_projection_from_pairs(ids, memberships, binary=binary).W


def load_hetrec_relations(
    data_dir: str | os.PathLike,
    movie_ids: Sequence[int],
    relations: Iterable[str] = tuple(HETREC_RELATIONS),
) -> dict[str, np.ndarray]:
    """Several :func:`hetrec_relation_graph` s at once: relation name -> ``W: (n, n)``."""
    return {name: hetrec_relation_graph(data_dir, movie_ids, name) for name in relations}


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
    W = validate_adjacency(W)
    perm = np.asarray(jax.random.permutation(key, W.shape[0])).astype(np.int64)
    return W[np.ix_(perm, perm)], perm
