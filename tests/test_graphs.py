"""Tests for relation graphs: projections, similarity graphs, checks, conversion, real data."""

import gzip
import math
from collections import Counter, defaultdict
from pathlib import Path

import jax
import networkx as nx
import numpy as np
import pytest

from bayesrank.data.graphs import (
    OHSUMED_COLLECTION_SIZE,
    bibliographic_coupling,
    bipartite_projection,
    bipartite_projection_from_pairs,
    cocitation,
    cosine_similarity_graph,
    directed_roles,
    feature_similarity_graph,
    from_networkx,
    hetrec_relation_graph,
    knn_sparsify,
    load_hetrec_relations,
    ohsumed_keyword_graph,
    ohsumed_term_vectors,
    permute_graph,
    read_hetrec_memberships,
    read_ohsumed_meta,
    to_networkx,
    validate_adjacency,
)
from bayesrank.data.letor import load_letor

R = 1 / math.sqrt(2)


def assert_adjacency(W, n):
    assert W.shape == (n, n) and W.dtype == np.float64
    np.testing.assert_array_equal(W, W.T)
    assert (W >= 0).all() and (np.diag(W) == 0).all()


# --- validate_adjacency ---------------------------------------------------------------------------


def test_validate_adjacency_drops_self_loops_and_symmetrises():
    W = np.array([[5.0, 1.0, 0.0], [1.0 + 1e-12, 0.0, 2.0], [0.0, 2.0, 0.0]])
    out = validate_adjacency(W)
    assert_adjacency(out, 3)
    assert out[0, 0] == 0 and out[0, 1] == pytest.approx(1.0)
    assert W[0, 0] == 5.0  # input untouched


def test_validate_adjacency_accepts_isolated_nodes_and_jax_arrays():
    W = jax.numpy.zeros((3, 3))
    np.testing.assert_array_equal(validate_adjacency(W), np.zeros((3, 3)))


@pytest.mark.parametrize(
    ("W", "match"),
    [
        (np.array([[0.0, 1.0], [2.0, 0.0]]), r"not symmetric: W\[0, 1\] = 1.0 but W\[1, 0\] = 2.0"),
        (np.array([[0.0, -1.0], [-1.0, 0.0]]), r"W\[0, 1\] = -1.0 is negative"),
        (np.array([[0.0, 1.0], [1.0, np.nan]]), r"W\[1, 1\] = nan is not finite"),
        (np.zeros((2, 3)), r"square \(n, n\), got shape \(2, 3\)"),
        (np.zeros(3), r"2-D, got shape \(3,\)"),
    ],
)
def test_validate_adjacency_errors(W, match):
    with pytest.raises(ValueError, match=match):
        validate_adjacency(W)


def test_validate_adjacency_error_uses_name():
    with pytest.raises(ValueError, match=r"W_doc\[0, 1\]"):
        validate_adjacency(np.array([[0.0, -1.0], [-1.0, 0.0]]), name="W_doc")


# --- networkx -------------------------------------------------------------------------------------


def test_networkx_round_trip_keeps_isolated_nodes_and_order():
    W = np.array([[0, 2.5, 0, 0], [2.5, 0, 1, 0], [0, 1, 0, 0], [0, 0, 0, 0]])
    nodes = ["d", "a", "c", "b"]
    G = to_networkx(W, nodes)
    assert list(G.nodes) == nodes and G.number_of_edges() == 2
    assert G["d"]["a"]["weight"] == 2.5
    np.testing.assert_array_equal(from_networkx(G, nodes), W)
    reordered = from_networkx(G, ["a", "b", "c", "d"])
    np.testing.assert_array_equal(reordered, W[np.ix_([1, 3, 2, 0], [1, 3, 2, 0])])


def test_from_networkx_missing_nodes_weights_self_loops_and_multigraphs():
    G = nx.MultiGraph()
    G.add_edge("x", "y", weight=2.0)
    G.add_edge("x", "y", weight=0.5)
    G.add_edge("y", "z")  # no weight attribute: 1
    G.add_edge("z", "z", weight=9.0)  # self-loop: dropped
    W = from_networkx(G, nodes=["x", "y", "z", "w"])
    expected = np.array([[0, 2.5, 0, 0], [2.5, 0, 1, 0], [0, 1, 0, 0], [0, 0, 0, 0]])
    np.testing.assert_array_equal(W, expected)
    np.testing.assert_array_equal(from_networkx(G, ["x", "y", "z"], weight=None)[0, 1], 2.0)


def test_from_networkx_errors():
    G = nx.Graph([(1, 2), (2, 3)])
    with pytest.raises(ValueError, match=r"edge \(2, 3\): node 3 is not in nodes"):
        from_networkx(G, nodes=[1, 2])
    with pytest.raises(ValueError, match=r"nodes\[2\] = 1 repeats nodes\[0\]"):
        from_networkx(G, nodes=[1, 2, 1, 3])
    with pytest.raises(ValueError, match=r"directed.*directed_roles"):
        from_networkx(nx.DiGraph([(1, 2)]))
    G[1][2]["weight"] = -1.0
    with pytest.raises(ValueError, match=r"edge \(1, 2\): weight -1.0"):
        from_networkx(G)


def test_to_networkx_errors():
    with pytest.raises(ValueError, match="3 nodes for a 2 x 2"):
        to_networkx(np.zeros((2, 2)), nodes=["a", "b", "c"])
    with pytest.raises(ValueError, match="not symmetric"):
        to_networkx(np.array([[0.0, 1.0], [0.0, 0.0]]))


# --- bipartite projection -------------------------------------------------------------------------

# Four movies and three genres drawn by hand: m0 {a, b}, m1 {a, b, c}, m2 {c}, m3 {}.
GENRES_B = np.array([[1, 1, 0], [1, 1, 1], [0, 0, 1], [0, 0, 0]], dtype=float)
GENRES_W = np.array([[0, 2, 0, 0], [2, 0, 1, 0], [0, 1, 0, 0], [0, 0, 0, 0]], dtype=float)


def test_bipartite_projection_hand_example():
    W = bipartite_projection(GENRES_B)
    assert_adjacency(W, 4)
    np.testing.assert_array_equal(W, GENRES_W)
    np.testing.assert_array_equal(bipartite_projection(GENRES_B, binary=True), GENRES_W > 0)


def test_bipartite_projection_movies_by_directors():
    # 4 movies x 2 directors: m0, m1 by d0; m2, m3 by d1.
    B = np.array([[1, 0], [1, 0], [0, 1], [0, 1]])
    expected = np.array([[0, 1, 0, 0], [1, 0, 0, 0], [0, 0, 0, 1], [0, 0, 1, 0]])
    np.testing.assert_array_equal(bipartite_projection(B), expected)


def test_bipartite_projection_from_pairs_matches_incidence():
    pairs = [
        ("m1", "c"),
        ("m0", "a"),
        ("m0", "b"),
        ("m0", "a"),  # repeated: counts once
        ("m1", "a"),
        ("m9", "a"),  # unknown movie: ignored, counted
        ("m1", "b"),
        ("m2", "c"),
        ("m9", "a"),
    ]
    W, n_ignored = bipartite_projection_from_pairs(["m0", "m1", "m2", "m3"], pairs)
    np.testing.assert_array_equal(W, GENRES_W)
    assert n_ignored == 1
    binary = bipartite_projection_from_pairs(["m2", "m1", "m0", "m3"], pairs, binary=True).W
    np.testing.assert_array_equal(binary, (GENRES_W > 0)[np.ix_([2, 1, 0, 3], [2, 1, 0, 3])])


def test_bipartite_projection_errors():
    with pytest.raises(ValueError, match=r"B\[1, 0\] = -1.0 is negative"):
        bipartite_projection(np.array([[1.0], [-1.0]]))
    with pytest.raises(ValueError, match=r"nodes\[1\] = 'a' repeats nodes\[0\]"):
        bipartite_projection_from_pairs(["a", "a"], [])


# --- directed relations ---------------------------------------------------------------------------

# Four pages, links drawn by hand: 0 -> 2, 0 -> 3, 1 -> 2, 1 -> 3, 2 -> 3, 3 -> 0.
LINKS = np.array([[0, 0, 1, 1], [0, 0, 1, 1], [0, 0, 0, 1], [1, 0, 0, 0]], dtype=float)


def test_cocitation_hand_example():
    # Linked by: 0 <- {3}, 1 <- {}, 2 <- {0, 1}, 3 <- {0, 1, 2}: only 2 and 3 share citers (0, 1).
    expected = np.zeros((4, 4))
    expected[2, 3] = expected[3, 2] = 2
    np.testing.assert_array_equal(cocitation(LINKS), expected)


def test_directed_roles_hand_example():
    # Link to: 0 -> {2, 3}, 1 -> {2, 3}, 2 -> {3}, 3 -> {0}.
    linking_expected = np.array([[0, 2, 1, 0], [2, 0, 1, 0], [1, 1, 0, 0], [0, 0, 0, 0]])
    W_linking, W_linked = directed_roles(LINKS)
    np.testing.assert_array_equal(W_linking, linking_expected)
    np.testing.assert_array_equal(W_linked, cocitation(LINKS))
    np.testing.assert_array_equal(bibliographic_coupling(LINKS), linking_expected)
    np.testing.assert_array_equal(cocitation(LINKS.T), linking_expected)


def test_directed_roles_weighted_links():
    A = np.array([[0, 2.0, 3.0], [0, 0, 0], [0, 0, 0]])
    W_linking, W_linked = directed_roles(A)
    np.testing.assert_array_equal(W_linking, np.zeros((3, 3)))
    assert W_linked[1, 2] == 6.0 and W_linked[0, 1] == 0


@pytest.mark.parametrize(
    ("A", "match"),
    [
        (np.zeros((2, 3)), r"A must be square"),
        (np.array([[0.0, -2.0], [0.0, 0.0]]), r"A\[0, 1\] = -2.0 is negative"),
        (np.array([[0.0, np.inf], [0.0, 0.0]]), r"A\[0, 1\] = inf is not finite"),
    ],
)
def test_directed_errors(A, match):
    with pytest.raises(ValueError, match=match):
        directed_roles(A)


# --- similarity graphs ----------------------------------------------------------------------------


def cosine_double_loop(V, threshold):
    n = len(V)
    W = np.zeros((n, n))
    for i in range(n):
        for j in range(n):
            ni, nj = np.linalg.norm(V[i]), np.linalg.norm(V[j])
            if i == j or ni == 0 or nj == 0:
                continue
            s = max(0.0, float(V[i] @ V[j]) / (ni * nj))
            W[i, j] = s if s > threshold else 0.0
    return W


@pytest.mark.parametrize("threshold", [0.0, 0.3])
def test_cosine_graph_matches_double_loop(threshold):
    V = np.array(jax.random.normal(jax.random.key(0), (12, 4)), dtype=np.float64)
    V[3] = 0.0  # zero norm: isolated
    V[5] = 2.5 * V[4]  # parallel: similarity 1
    W = cosine_similarity_graph(V, threshold=threshold)
    assert_adjacency(W, 12)
    np.testing.assert_allclose(W, cosine_double_loop(V, threshold), atol=1e-12)
    assert (W[3] == 0).all() and W[4, 5] == pytest.approx(1.0)


# Hand example for kNN: node 0's two strongest neighbours tie (1 and 2, weight 3).
KNN_W = np.array([[0, 3, 3, 1], [3, 0, 2, 0], [3, 2, 0, 5], [1, 0, 5, 0]], dtype=float)


def test_knn_rule_with_ties():
    # k = 1: 0 -> 1 (tie with 2, smaller index wins), 1 -> 0, 2 -> 3, 3 -> 2. Edge 0-2 is in
    # nobody's list, so it goes although its weight equals that of the kept edge 0-1.
    expected = np.array([[0, 3, 0, 0], [3, 0, 0, 0], [0, 0, 0, 5], [0, 0, 5, 0]], dtype=float)
    np.testing.assert_array_equal(knn_sparsify(KNN_W, 1), expected)
    # k = 2: 0 -> {1, 2}, 1 -> {0, 2}, 2 -> {3, 0}, 3 -> {2, 0}: every edge survives ("or" rule).
    np.testing.assert_array_equal(knn_sparsify(KNN_W, 2), KNN_W)
    np.testing.assert_array_equal(knn_sparsify(KNN_W, 10), KNN_W)


def test_knn_keeps_or_edges_and_never_adds():
    # A star: every leaf's nearest neighbour is the hub, so the hub keeps all edges with k = 1.
    W = np.zeros((5, 5))
    W[0, 1:] = W[1:, 0] = [1.0, 2.0, 3.0, 4.0]
    np.testing.assert_array_equal(knn_sparsify(W, 1), W)
    np.testing.assert_array_equal(knn_sparsify(np.zeros((3, 3)), 1), np.zeros((3, 3)))


def test_cosine_graph_knn_is_knn_of_complete_graph():
    V = np.abs(np.asarray(jax.random.normal(jax.random.key(1), (20, 3))))
    complete = cosine_similarity_graph(V)
    sparse = cosine_similarity_graph(V, k=3)
    np.testing.assert_array_equal(sparse, knn_sparsify(complete, 3))
    assert ((sparse > 0).sum(axis=1) >= 3).all() and (sparse > 0).sum() < (complete > 0).sum()


def test_similarity_graph_errors():
    with pytest.raises(ValueError, match=r"V\[1, 0\] = nan is not finite"):
        cosine_similarity_graph(np.array([[1.0], [np.nan]]))
    with pytest.raises(ValueError, match=r"threshold must be in \[0, 1\)"):
        cosine_similarity_graph(np.eye(2), threshold=1.0)
    with pytest.raises(ValueError, match="k must be a positive integer"):
        knn_sparsify(np.zeros((2, 2)), 0)
    with pytest.raises(ValueError, match="k must be a positive integer"):
        cosine_similarity_graph(np.eye(2), k=1.5)


def test_feature_similarity_graph_standardises_columns():
    X = np.array([[1.0, 100.0, 7.0], [2.0, 300.0, 7.0], [3.0, 200.0, 7.0], [4.0, 400.0, 7.0]])
    Z = (X - X.mean(0)) / np.where(X.std(0) > 0, X.std(0), 1.0)
    # rows 0 and 2 are orthogonal: the reference's round-off (1e-17, BLAS-dependent) is zero
    np.testing.assert_allclose(
        feature_similarity_graph(X, k=None), cosine_double_loop(Z, 0.0), rtol=1e-7, atol=1e-12
    )
    W = feature_similarity_graph(X, k=1)
    assert_adjacency(W, 4)
    np.testing.assert_array_equal(feature_similarity_graph(X * [1, 1e6, 3] + 5, k=1), W)


# --- placebo --------------------------------------------------------------------------------------


def random_graph(n=9, seed=3):
    weights = np.asarray(jax.random.uniform(jax.random.key(seed), (n, n)), dtype=np.float64)
    W = np.triu(np.where(weights > 0.5, weights, 0.0), k=1)
    return W + W.T


def test_permute_graph_preserves_degrees_and_weights():
    W = random_graph()
    W_perm, perm = permute_graph(jax.random.key(7), W)
    assert_adjacency(W_perm, 9)
    assert sorted(perm.tolist()) == list(range(9))
    for i in range(9):
        for j in range(9):
            assert W_perm[i, j] == W[perm[i], perm[j]]
    np.testing.assert_array_equal(np.sort(W_perm.sum(1)), np.sort(W.sum(1)))
    np.testing.assert_array_equal(np.sort((W_perm > 0).sum(1)), np.sort((W > 0).sum(1)))
    np.testing.assert_array_equal(np.sort(W_perm, axis=None), np.sort(W, axis=None))
    P = np.eye(9)[perm]  # P[i, perm[i]] = 1
    np.testing.assert_array_equal(W_perm, P @ W @ P.T)
    # identity broken: most entities receive another entity's relations
    assert np.sum(perm != np.arange(9)) >= 6 and not np.array_equal(W_perm, W)
    moved = [i for i in range(9) if not np.array_equal(W_perm[i], W[i])]
    assert len(moved) >= 6


def test_permute_graph_is_a_function_of_the_key():
    W = random_graph()
    a, perm_a = permute_graph(jax.random.key(1), W)
    b, perm_b = permute_graph(jax.random.key(1), W)
    c, perm_c = permute_graph(jax.random.key(2), W)
    np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(perm_a, perm_b)
    assert not np.array_equal(perm_a, perm_c) and not np.array_equal(a, c)


# --- OHSUMED Meta ---------------------------------------------------------------------------------


def meta_xml(tf, labels=(2, 0, 1), doc_ids=("101", "102", "103"), doc_freq=((50, 80), (10, 40))):
    """A LETOR 3.0 Meta file for query 77: ``tf[d][s - 1]`` is doc d's (term 1, term 2) in stream s.

    ``doc_freq[t - 1]`` is term t's (title, abstract) document frequency; stream 3 is their sum.
    """
    terms = ""
    for t, (word, (df1, df2)) in enumerate(zip(["heart", "attack"], doc_freq, strict=True), 1):
        streams = "".join(
            f"<stream><streamid>{s}</streamid><streamfrequency>{df}</streamfrequency>"
            f"<streamtermfrequency>{df}</streamtermfrequency></stream>"
            for s, df in enumerate([df1, df2, df1 + df2], 1)
        )
        terms += f"<term><termid>{t}</termid><word>{word}</word>{streams}</term>"
    docs = ""
    for doc_id, label, per_stream in zip(doc_ids, labels, tf, strict=True):
        streams = ""
        for s, freqs in enumerate(per_stream, 1):
            cells = "".join(
                f"<term><termid>{t}</termid><termfrequency>{f}</termfrequency></term>"
                for t, f in enumerate(freqs, 1)
            )
            streams += f"<stream><streamid>{s}</streamid><length>{10 * s}</length>"
            streams += f"<uniquelength>{5 * s}</uniquelength>{cells}</stream>"
        docs += f"<doc><docid>{doc_id}</docid><label>{label}</label>{streams}</doc>"
    return (
        '<?xml version="1.0" encoding="utf-8"?>\n<query><id>77</id>'
        f"<terminfo><termnum>2</termnum>{terms}</terminfo>"
        f"<docinfo><docnum>{len(doc_ids)}</docnum>{docs}</docinfo></query>\n"
    )


# Per doc, (title, abstract, title + abstract) frequencies of (term 1, term 2).
TINY_TF = [
    [(1, 0), (0, 0), (1, 0)],  # doc 101
    [(0, 0), (1, 1), (1, 1)],  # doc 102
    [(0, 1), (0, 1), (0, 2)],  # doc 103
]


@pytest.fixture
def tiny_meta(tmp_path) -> Path:
    path = tmp_path / "query-77.xml.gz"
    path.write_bytes(gzip.compress(meta_xml(TINY_TF).encode()))
    return path


def test_read_ohsumed_meta(tiny_meta):
    meta = read_ohsumed_meta(tiny_meta)
    assert meta.qid == "77" and meta.terms == ("heart", "attack")
    assert meta.doc_ids.tolist() == ["101", "102", "103"]
    assert meta.labels.tolist() == [2, 0, 1]
    np.testing.assert_array_equal(meta.tf, np.transpose(TINY_TF, (0, 2, 1)))
    np.testing.assert_array_equal(meta.lengths, [[10, 20, 30]] * 3)
    np.testing.assert_array_equal(meta.doc_freq, [[50, 80, 130], [10, 40, 50]])


def test_ohsumed_keyword_graph_by_hand(tiny_meta):
    # Stream 3 vectors: 101 (1, 0), 102 (1, 1), 103 (0, 2).
    W, doc_ids = ohsumed_keyword_graph(tiny_meta, doc_ids=["101", "102", "103"])
    np.testing.assert_allclose(W, [[0, R, 0], [R, 0, R], [0, R, 0]])
    assert doc_ids.tolist() == ["101", "102", "103"]
    # Titles: 101 (1, 0), 102 (0, 0) has zero norm, 103 (0, 1) orthogonal to 101: no edges.
    np.testing.assert_array_equal(ohsumed_keyword_graph(tiny_meta, stream=1)[0], np.zeros((3, 3)))
    # Abstracts: 101 (0, 0), 102 (1, 1), 103 (0, 1).
    W_abstract, _ = ohsumed_keyword_graph(tiny_meta, stream=2)
    np.testing.assert_allclose(W_abstract, [[0, 0, 0], [0, 0, R], [0, R, 0]])


def test_ohsumed_tfidf_by_hand(tiny_meta):
    idf1 = math.log(OHSUMED_COLLECTION_SIZE / 130)
    idf2 = math.log(OHSUMED_COLLECTION_SIZE / 50)
    norm_102 = math.hypot(idf1, idf2)  # vectors 101 (idf1, 0), 102 (idf1, idf2), 103 (0, 2 idf2)
    W, _ = ohsumed_keyword_graph(tiny_meta, weighting="tfidf")
    expected = np.array(
        [[0, idf1 / norm_102, 0], [idf1 / norm_102, 0, idf2 / norm_102], [0, idf2 / norm_102, 0]]
    )
    np.testing.assert_allclose(W, expected)
    np.testing.assert_allclose(
        ohsumed_term_vectors(read_ohsumed_meta(tiny_meta), 3, "tfidf"),
        [[idf1, 0], [idf1, idf2], [0, 2 * idf2]],
    )


def test_ohsumed_tfidf_term_absent_from_collection(tmp_path):
    path = tmp_path / "query-77.xml"
    path.write_text(meta_xml(TINY_TF, doc_freq=((0, 80), (10, 40))))
    vectors = ohsumed_term_vectors(read_ohsumed_meta(path), stream=1, weighting="tfidf")
    assert np.isfinite(vectors).all() and (vectors[:, 0] == 0).all()


def test_ohsumed_keyword_graph_errors(tiny_meta, tmp_path):
    with pytest.raises(ValueError, match=r"doc #2 is '102', expected '999'"):
        ohsumed_keyword_graph(tiny_meta, doc_ids=["101", "999", "103"])
    with pytest.raises(ValueError, match="3 documents, expected 2"):
        ohsumed_keyword_graph(tiny_meta, doc_ids=["101", "102"])
    with pytest.raises(ValueError, match="stream must be one of"):
        ohsumed_keyword_graph(tiny_meta, stream=4)
    with pytest.raises(ValueError, match="weighting must be"):
        ohsumed_keyword_graph(tiny_meta, weighting="bm25")
    bad = tmp_path / "bad.xml"
    bad.write_text(meta_xml([*TINY_TF[:2], [(0, 1), (0, "x"), (0, 2)]]))
    with pytest.raises(ValueError, match=r"doc #3 \(docid 103\), stream 2, term 2: .* 'x'"):
        read_ohsumed_meta(bad)
    missing = tmp_path / "missing.xml"
    term_2_once = "<term><termid>2</termid><termfrequency>1</termfrequency></term>"
    missing.write_text(meta_xml(TINY_TF).replace(term_2_once, "", 1))
    with pytest.raises(
        ValueError, match=r"\(docid 102\): no termfrequency of termid 2 in stream 2"
    ):
        read_ohsumed_meta(missing)
    broken = tmp_path / "broken.xml"
    broken.write_text("<query><id>1</id>")
    with pytest.raises(ValueError, match=r"broken\.xml: malformed XML"):
        read_ohsumed_meta(broken)
    with pytest.raises(ValueError, match="no such file"):
        read_ohsumed_meta(tmp_path / "nowhere.xml.gz")


# --- HetRec (tiny synthetic copy) -----------------------------------------------------------------


def test_hetrec_reader_headers_crlf_and_latin1(tmp_path):
    (tmp_path / "movie_directors.dat").write_bytes(
        b"movieID\tdirectorID\tdirectorName\r\n"
        b"1\tjo\tJo Gru\xf1\r\n2\tjo\tJo Gru\xf1\r\n3\tal\tAl\r\n"
    )
    (tmp_path / "movie_countries.dat.gz").write_bytes(
        gzip.compress(b"1\tUSA\r\n3\tUSA\r\n2\tUK\r\n")
    )
    assert read_hetrec_memberships(tmp_path, "co_director") == [(1, "jo"), (2, "jo"), (3, "al")]
    graphs = load_hetrec_relations(tmp_path, [3, 2, 1, 4], relations=["co_director", "co_country"])
    np.testing.assert_array_equal(graphs["co_director"][1:3, 1:3], [[0, 1], [1, 0]])
    assert graphs["co_director"].sum() == 2
    assert graphs["co_country"][0, 2] == 1 and graphs["co_country"].sum() == 2
    with pytest.raises(ValueError, match=r"movie_ids\[1\] = '2' is not an integer"):
        hetrec_relation_graph(tmp_path, [1, "2"], "co_director")
    with pytest.raises(ValueError, match="unknown relation 'co_actor'"):
        read_hetrec_memberships(tmp_path, "co_actor")
    with pytest.raises(ValueError, match=r"neither movie_tags.dat.gz nor movie_tags.dat"):
        read_hetrec_memberships(tmp_path, "shared_tag")
    (tmp_path / "movie_genres.dat").write_text("movieID\tgenre\n1\tDrama\nx1\tComedy\n")
    with pytest.raises(ValueError, match=r"movie_genres.dat, line 3: movieID 'x1'"):
        read_hetrec_memberships(tmp_path, "co_genre")


# --- real data ------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def ohsumed_queries(shared_data):
    return {q.qid: q for q in load_letor(shared_data / "OHSUMED/Feature-min/ALL/OHSUMED.txt.gz")}


@pytest.mark.slow
@pytest.mark.shared_data
def test_all_ohsumed_meta_files_match_letor(shared_data, ohsumed_queries):
    meta_dir = shared_data / "OHSUMED/Meta"
    assert len(ohsumed_queries) == 106
    for qid, query in ohsumed_queries.items():
        meta = read_ohsumed_meta(meta_dir / f"query-{qid}.xml.gz")
        assert meta.qid == qid
        np.testing.assert_array_equal(meta.doc_ids, query.doc_ids)
        np.testing.assert_array_equal(meta.labels, query.grades)
        np.testing.assert_array_equal(meta.tf[:, :, 0] + meta.tf[:, :, 1], meta.tf[:, :, 2])
    W, _ = ohsumed_keyword_graph(
        meta_dir / "query-10.xml.gz", doc_ids=ohsumed_queries["10"].doc_ids, k=5
    )
    assert_adjacency(W, 35)


def raw_director_movies(hetrec_dir: Path) -> dict[str, list[int]]:
    """director -> movies, read straight from the raw file (independently of the module)."""
    movies = defaultdict(list)
    lines = gzip.decompress((hetrec_dir / "movie_directors.dat.gz").read_bytes()).splitlines()
    for line in lines[1:]:
        movie, director = line.decode("latin-1").split("\t")[:2]
        movies[director].append(int(movie))
    return movies


@pytest.mark.shared_data
def test_hetrec_co_director_graph(shared_data):
    hetrec_dir = shared_data / "hetrec2011-movielens-2k"
    by_director = raw_director_movies(hetrec_dir)
    assert sum(len(m) > 1 for m in by_director.values()) == 1710
    assert sum(len(m) for m in by_director.values() if len(m) > 1) == 7805
    # Vertigo (903) and Rear Window (904) are both Hitchcock's; Toy Story (1) is Lasseter's.
    W = hetrec_relation_graph(hetrec_dir, [1, 903, 904], "co_director")
    np.testing.assert_array_equal(W, [[0, 0, 0], [0, 0, 1], [0, 1, 0]])
    # Every directed movie with id below 3000: one clique per director.
    subset = sorted(m for movies in by_director.values() for m in movies if m < 3000)
    W = hetrec_relation_graph(hetrec_dir, subset, "co_director")
    sizes = Counter(m for movies in by_director.values() for m in movies if m < 3000)
    assert max(sizes.values()) == 1  # one director per movie here
    in_subset = [sum(m < 3000 for m in movies) for movies in by_director.values()]
    assert (W > 0).sum() // 2 == sum(c * (c - 1) // 2 for c in in_subset)
    assert ((W > 0).any(axis=1)).sum() == sum(c for c in in_subset if c > 1)
    assert set(np.unique(W)) == {0.0, 1.0}


@pytest.mark.shared_data
def test_hetrec_genre_country_tag_graphs(shared_data):
    hetrec_dir = shared_data / "hetrec2011-movielens-2k"
    graphs = load_hetrec_relations(hetrec_dir, [1, 2, 3])
    # Toy Story {Adventure, Animation, Children, Comedy, Fantasy}, Jumanji {Adventure, Children,
    # Fantasy}, Grumpier Old Men {Comedy, Romance}.
    np.testing.assert_array_equal(graphs["co_genre"], [[0, 3, 1], [3, 0, 0], [1, 0, 0]])
    np.testing.assert_array_equal(graphs["co_country"], [[0, 1, 1], [1, 0, 1], [1, 1, 0]])
    assert_adjacency(graphs["shared_tag"], 3)
    assert graphs["shared_tag"][0, 1] >= 1


# Issue 32: the similarity builders overflowed on features near 1e200 (an all-zero graph, with
# only NumPy's warnings), the coupling builders gave inf weights.
from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402


@settings(max_examples=40, deadline=None)
@given(
    seed=st.integers(0, 2**16),
    exponent=st.sampled_from([-300, -200, -100, -20, 0, 20, 100, 200, 300]),
    per_row=st.booleans(),
)
def test_property_similarity_graphs_do_not_depend_on_scale(seed, exponent, per_row):
    """Cosine similarity is invariant to each row's scale and the standardised feature graph to
    each column's: the graphs at 10**exponent equal those at unit scale, down to rounding."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(7, 4))
    if per_row:  # rows (cosine) at very different scales
        scaled = X * (10.0**exponent) ** rng.uniform(0, 1, size=(7, 1))
        np.testing.assert_allclose(
            cosine_similarity_graph(scaled), cosine_similarity_graph(X), rtol=1e-9, atol=1e-12
        )
    else:  # columns (standardised features) at very different scales
        scaled = X * (10.0**exponent) ** rng.uniform(0, 1, size=(1, 4))
        np.testing.assert_allclose(
            feature_similarity_graph(scaled, k=None),
            feature_similarity_graph(X, k=None),
            rtol=1e-9,
            atol=1e-12,
        )
        assert np.any(feature_similarity_graph(scaled, k=None) > 0)


def test_coupling_weights_beyond_float64_are_an_error():
    A = np.zeros((3, 3))
    A[0, 2] = A[1, 2] = 1e200  # both link to page 2: weight 1e400
    with pytest.raises(ValueError, match=r"W\[0, 1\] = sum_k B\[0, k\] B\[1, k\] overflows"):
        bibliographic_coupling(A)
    with pytest.raises(ValueError, match="overflows float64"):
        cocitation(A.T)
    np.testing.assert_allclose(bibliographic_coupling(A * 1e-200)[0, 1], 1.0)  # representable
