"""Weighted relation graphs between the entities of one query (the ``W`` of XPGP's graph kernels).

Every builder returns the adjacency of a weighted undirected graph over ``n`` entities, in entity
order: a dense ``W: (n, n)`` float64 NumPy array that is symmetric, finite, non-negative and has a
zero diagonal (``validate_adjacency`` checks exactly this). ``W[i, j] > 0`` is an edge of
weight ``W[i, j]``; isolated entities (zero rows) and disconnected components are allowed. The
graph kernels build the Laplacian ``D - W`` from it (Kersting & Xu 2009, eq. 2).

What is here:

* the check (``validate_adjacency``, which is
  ``bayesrank.data.checks.check_adjacency``) and conversion at the boundary
  (``convert``: ``from_networkx``, ``to_networkx``; networkx is used only there);
* similarity graphs (``similarity``): ``cosine_similarity_graph``, ``knn_sparsify``,
  ``feature_similarity_graph``;
* relations projected from other structures (``relations``, Section 7 of the paper): directed
  links as ``bibliographic_coupling`` (the *linking* role), ``cocitation`` (the *linked*
  role), ``directed_roles`` (both); bipartite memberships as ``bipartite_projection``,
  ``bipartite_projection_from_pairs``; placebo relations, ``permute_graph``;
* dataset readers, apart: the OHSUMED keyword graph from the LETOR 3.0 ``Meta`` files
  (``ohsumed``: ``read_ohsumed_meta``, ``ohsumed_term_vectors``,
  ``ohsumed_keyword_graph``) and the HetRec 2011 MovieLens-2k movie relations (``hetrec``:
  ``read_hetrec_memberships``, ``hetrec_relation_graph``, ``load_hetrec_relations``).

Every name is importable from ``bayesrank.data.graphs`` itself.

These are host-side NumPy functions; randomness comes from an explicit ``jax.random`` key. Bad
input raises ``ValueError`` naming the offending file and line, element, index or value.
"""

from __future__ import annotations

# The tolerance constants stay importable from here, outside __all__ as before.
from ..checks import ADJACENCY_SYMMETRY_RTOL as SYMMETRY_RTOL  # noqa: F401
from ..checks import check_adjacency as validate_adjacency
from .convert import from_networkx, to_networkx
from .hetrec import (
    HETREC_RELATIONS,
    hetrec_relation_graph,
    load_hetrec_relations,
    read_hetrec_memberships,
)
from .ohsumed import (
    OHSUMED_COLLECTION_SIZE,
    OHSUMED_STREAMS,
    OhsumedMeta,
    ohsumed_keyword_graph,
    ohsumed_term_vectors,
    read_ohsumed_meta,
)
from .relations import (
    Projection,
    bibliographic_coupling,
    bipartite_projection,
    bipartite_projection_from_pairs,
    cocitation,
    directed_roles,
    permute_graph,
)
from .similarity import (
    COSINE_ATOL,  # noqa: F401
    cosine_similarity_graph,
    feature_similarity_graph,
    knn_sparsify,
)

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
