"""Ratings and comparisons from arrays and CSV files (``PreferenceProblem.from_ratings`` and
``from_comparisons``), and LETOR queries as ``(X, y, qid)`` (``queries_to_arrays``).

References: pairs listed by hand for tiny hand-written files; the bundled OHSUMED sample's
queries for the stacking.
"""

import numpy as np
import pytest

import bayesrank
from bayesrank import PreferenceProblem, RankSVM, load_letor, queries_to_arrays
from bayesrank.data import userdata
from bayesrank.data.letor import Query
from bayesrank.data.sample import SAMPLE_QIDS, sample_path


def write(tmp_path, name, text):
    path = tmp_path / name
    path.write_text(text)
    return path


def pairs_of(problem):
    return sorted(map(tuple, problem.pairs.tolist()))


# -- ratings ---------------------------------------------------------------------------------


def test_ratings_array_gives_every_pair_of_different_ratings_higher_first():
    problem = PreferenceProblem.from_ratings([2.0, 0.0, 2.0, 1.0])
    assert problem.n == 4 and problem.X is None
    assert pairs_of(problem) == [(0, 1), (0, 3), (2, 1), (2, 3), (3, 1)]
    np.testing.assert_array_equal(problem.pairs, bayesrank.pairs_from_grades([2, 0, 2, 1]))


def test_unrated_entities_keep_their_row_but_take_part_in_no_pair():
    X = np.arange(10.0).reshape(5, 2)
    problem = PreferenceProblem.from_ratings([3.0, np.nan, 1.0, np.nan, 3.0], X)
    assert problem.n == 5 and problem.X.shape == (5, 2)
    assert pairs_of(problem) == [(0, 2), (4, 2)]


def test_ties_both_gives_a_pair_each_way():
    problem = PreferenceProblem.from_ratings([1.0, 2.0, 1.0], ties="both")
    assert pairs_of(problem) == [(0, 2), (1, 0), (1, 2), (2, 0)]
    assert problem.pairs.tolist() == sorted(problem.pairs.tolist())  # lexicographic
    with pytest.raises(ValueError, match="ties must be one of 'skip', 'both' or 'tie', got 'drop'"):
        PreferenceProblem.from_ratings([1.0, 2.0], ties="drop")


def test_ratings_csv_by_index_with_header_comments_and_unrated(tmp_path):
    path = write(
        tmp_path,
        "ratings.csv",
        "entity,rating\n# a comment\n0, 4\n\n3,1.5\n1,nan\n2,\n4,4\n",
    )
    problem = PreferenceProblem.from_ratings(path)
    assert problem.n == 5  # the largest index + 1
    assert pairs_of(problem) == [(0, 3), (4, 3)]
    relations = [np.ones((6, 6)) - np.eye(6)]
    wider = PreferenceProblem.from_ratings(str(path), relations=relations)
    assert wider.n == 6 and pairs_of(wider) == [(0, 3), (4, 3)]  # entity 5 unrated


def test_ratings_csv_by_id(tmp_path):
    path = write(tmp_path, "ratings.csv", "id,score\nbob,1\nalice,3\ncarol,1\n")
    X = np.eye(4)
    problem = PreferenceProblem.from_ratings(path, X, entities=["alice", "bob", "carol", "dan"])
    assert problem.n == 4 and pairs_of(problem) == [(0, 1), (0, 2)]
    ids = userdata.entity_ids(path, "ratings")
    assert ids == ["bob", "alice", "carol"]
    assert pairs_of(PreferenceProblem.from_ratings(path, entities=ids)) == [(1, 0), (1, 2)]


@pytest.mark.parametrize(
    ("text", "kwargs", "match"),
    [
        ("0,1\n1,2,3\n", {}, r"ratings\.csv, line 2: expected 'entity,rating', got 3 fields"),
        ("0,1\n1,high\n", {}, r"ratings\.csv, line 2: rating 'high' is not a number"),
        ("0,high\n", {}, r"ratings\.csv, line 1: rating 'high' is not a number"),  # no header
        ("entity,rating\n", {"header": False}, r"line 1: rating 'rating' is not a number"),
        ("0,1\n\n1,inf\n", {}, r"ratings\.csv, line 3: rating 'inf' is not finite"),
        ("0,1\n1,2\n0,3\n", {}, r"ratings\.csv, line 3: entity '0' listed again \(first on line 1"),
        ("0,1\n-1,2\n", {}, r"ratings\.csv, line 2: entity -1 outside 0"),
        ("0,1\n7,2\n", {"X": np.eye(3)}, r"ratings\.csv, line 2: entity 7 outside 0\.\.2"),
        ("0,1\nbob,2\n", {}, r"ratings\.csv, line 2: entity 'bob' is not a 0-based row index"),
        ("a,1\nb,2\n", {"entities": ["a"]}, r"ratings\.csv, line 2: unknown entity 'b'"),
        ("# only a comment\n", {}, r"ratings\.csv: no ratings"),
    ],
)
def test_ratings_csv_errors_name_file_and_line(tmp_path, text, kwargs, match):
    path = write(tmp_path, "ratings.csv", text)
    with pytest.raises(ValueError, match=match):
        PreferenceProblem.from_ratings(path, **kwargs)


def test_ratings_array_errors():
    with pytest.raises(ValueError, match=r"ratings\[1\] = inf is not finite"):
        PreferenceProblem.from_ratings([1.0, np.inf])
    with pytest.raises(ValueError, match="ratings has 2 entries for 3 entities"):
        PreferenceProblem.from_ratings([1.0, 2.0], np.eye(3))
    with pytest.raises(ValueError, match=r"got dtype <U1"):
        PreferenceProblem.from_ratings(["a", "b"])
    with pytest.raises(ValueError, match="no such file"):
        PreferenceProblem.from_ratings("no/such/ratings.csv")


# -- comparisons ----------------------------------------------------------------------------------


def test_comparisons_array_by_index_and_by_id():
    problem = PreferenceProblem.from_comparisons(np.array([[2, 0], [0, 1], [2, 0]]))
    assert problem.n == 3 and problem.pairs.tolist() == [[2, 0], [0, 1], [2, 0]]
    by_id = PreferenceProblem.from_comparisons(
        [["c", "a"], ["a", "b"]], np.eye(4), entities=["a", "b", "c", "d"]
    )
    assert by_id.n == 4 and by_id.pairs.tolist() == [[2, 0], [0, 1]]
    with pytest.raises(ValueError, match=r"source\[1, 1\] = 'z' is not in entities"):
        PreferenceProblem.from_comparisons([["c", "a"], ["a", "z"]], entities=["a", "b", "c"])
    with pytest.raises(ValueError, match=r"source row 0 is a self-pair \(1, 1\)"):
        PreferenceProblem.from_comparisons([[1, 1]], np.eye(3))
    with pytest.raises(ValueError, match="no comparisons, and no X"):
        PreferenceProblem.from_comparisons(np.zeros((0, 2), int))
    assert PreferenceProblem.from_comparisons([], np.eye(3)).pairs.shape == (0, 2)


def test_comparisons_csv_by_index(tmp_path):
    path = write(
        tmp_path, "comparisons.csv", "winner,loser\n2,0\n# tie between 0 and 1:\n0,1\n1,0\n"
    )
    problem = PreferenceProblem.from_comparisons(path, np.eye(4))
    assert problem.n == 4 and problem.pairs.tolist() == [[2, 0], [0, 1], [1, 0]]
    assert PreferenceProblem.from_comparisons(path).n == 3  # the largest index + 1
    no_header = write(tmp_path, "plain.csv", "2,0\n0,1\n")
    assert PreferenceProblem.from_comparisons(no_header).pairs.tolist() == [[2, 0], [0, 1]]


def test_comparisons_csv_by_id_in_file_order(tmp_path):
    path = write(tmp_path, "c.csv", "winner,loser\nalice,bob\nbob,carol\ncarol,alice\n")
    ids = userdata.entity_ids(path, header=True)
    assert ids == ["alice", "bob", "carol"]
    problem = PreferenceProblem.from_comparisons(path, entities=ids)
    assert problem.n == 3 and problem.pairs.tolist() == [[0, 1], [1, 2], [2, 0]]
    # the X rows named by another order
    X = np.arange(6.0).reshape(3, 2)
    other = PreferenceProblem.from_comparisons(path, X, entities=["carol", "bob", "alice"])
    assert other.pairs.tolist() == [[2, 1], [1, 0], [0, 2]]
    with pytest.raises(ValueError, match="needs header=True or header=False"):
        userdata.entity_ids(path)
    assert userdata.entity_ids(path, header=False)[:2] == ["winner", "loser"]


@pytest.mark.parametrize(
    ("text", "kwargs", "match"),
    [
        ("0,1\n1,2,x\n", {}, r"c\.csv, line 2: weight 'x' is not a number > 0 \(or the"),
        ("0,1\n1,2,0\n", {}, r"c\.csv, line 2: weight '0' is not a number > 0"),
        ("0,1\n1,2,tie,-1\n", {}, r"c\.csv, line 2: weight '-1' is not a number > 0"),
        ("0,1\n1,2,1,2\n", {}, r"c\.csv, line 2: expected 'a,b', 'a,b,weight', 'a,b,tie' or"),
        ("0,1\n1,2,tie,1,2\n", {}, r"c\.csv, line 2: expected .* got 5 fields"),
        ("0,1\n# x\n2\n", {}, r"c\.csv, line 3: expected 'winner,loser', got 1 fields"),
        ("0,1\n1,1\n", {}, r"c\.csv, line 2: entity '1' compared with itself"),
        ("0,1\n1,5\n", {"X": np.eye(3)}, r"c\.csv, line 2: entity 5 outside 0\.\.2"),
        ("0,1\n1,x\n", {}, r"c\.csv, line 2: entity 'x' is not a 0-based row index"),
        ("a,b\nb,z\n", {"entities": "abc"}, r"c\.csv, line 2: unknown entity 'z'"),
        ("a,z\n", {"entities": "abc"}, r"c\.csv, line 1: unknown entity 'z'"),
        ("a,a\n", {"entities": "abc"}, r"c\.csv, line 1: entity 'a' compared with itself"),
        ("winner,loser\n0,1\n", {"header": False}, r"c\.csv, line 1: entity 'winner' is not"),
    ],
)
def test_comparisons_csv_errors_name_file_and_line(tmp_path, text, kwargs, match):
    if isinstance(kwargs.get("entities"), str):
        kwargs = {**kwargs, "entities": list(kwargs["entities"])}
    path = write(tmp_path, "c.csv", text)
    with pytest.raises(ValueError, match=match):
        PreferenceProblem.from_comparisons(path, **kwargs)


def test_entities_must_be_distinct_and_agree_with_X(tmp_path):
    path = write(tmp_path, "c.csv", "a,b\n")
    with pytest.raises(ValueError, match=r"entities\[2\] = 'a' repeats entities\[0\]"):
        PreferenceProblem.from_comparisons(path, entities=["a", "b", "a"])
    with pytest.raises(ValueError, match=r"number of entities: X has 3 rows, n = 2"):
        PreferenceProblem.from_comparisons(path, np.eye(3), entities=["a", "b"])


def test_a_generator_of_relations_is_read_once():
    W = np.ones((3, 3)) - np.eye(3)
    problem = PreferenceProblem.from_comparisons([[0, 1]], relations=(w for w in [W]))
    assert problem.n == 3 and len(problem.relations) == 1


# -- LETOR queries as arrays -------------------------------------------------------------------


def test_queries_to_arrays_on_the_bundled_sample():
    queries = load_letor(sample_path())
    X, y, qid = queries_to_arrays(queries)
    sizes = [q.n_docs for q in queries]
    assert X.shape == (271, 45) and X.dtype == np.float64
    assert y.shape == qid.shape == (271,) and y.dtype == np.int64
    assert qid.dtype.kind == "U" and tuple(dict.fromkeys(qid.tolist())) == SAMPLE_QIDS
    bounds = np.cumsum([0, *sizes])
    for q, a, b in zip(queries, bounds[:-1], bounds[1:], strict=True):
        np.testing.assert_array_equal(X[a:b], q.X)
        np.testing.assert_array_equal(y[a:b], q.grades)
        assert set(qid[a:b]) == {q.qid}


def test_queries_to_arrays_by_position_takes_a_reused_qid_as_another_query():
    """Folds' files may reuse a qid: by position, each query is its own group."""
    queries = load_letor(sample_path())
    twice = queries + queries[:1]
    with pytest.raises(ValueError, match=rf"queries\[{len(queries)}\] has qid"):
        queries_to_arrays(twice)
    X, _, qid = queries_to_arrays(twice, by_position=True)
    sizes = [q.n_docs for q in twice]
    np.testing.assert_array_equal(qid, np.repeat(np.arange(len(twice)), sizes))
    np.testing.assert_array_equal(X[-sizes[-1] :], queries[0].X)


def test_a_ranksvm_fits_through_queries_to_arrays():
    queries = load_letor(sample_path())
    X, y, qid = queries_to_arrays(queries)
    model = RankSVM(C=1e-2).fit(X, y, qid)
    # pairs only within queries: as many as the per-query grade pairs
    assert len(model.pairs_) == sum(len(bayesrank.pairs_from_grades(q.grades)) for q in queries)
    assert 0.5 < model.score(X, y, qid) <= 1.0


def test_queries_to_arrays_errors_name_the_query():
    queries = load_letor(sample_path())
    with pytest.raises(ValueError, match="queries is empty"):
        queries_to_arrays([])
    q = queries[1]
    narrow = Query(q.qid + "x", q.X[:, :40], q.grades, q.doc_ids, q.lines, q.rows)
    with pytest.raises(
        ValueError, match=r"queries\[2\] \(qid '7x'\) has 40 features, queries\[0\]"
    ):
        queries_to_arrays([queries[0], queries[1], narrow])
    with pytest.raises(ValueError, match=r"queries\[2\] has qid '5', as queries\[0\]"):
        queries_to_arrays([queries[0], queries[1], queries[0]])
    with pytest.raises(ValueError, match=r"queries\[1\] is a tuple, not a Query"):
        queries_to_arrays([queries[0], (1, 2)])


def test_comparisons_csv_with_ties_and_weights(tmp_path):
    """``a,b,tie`` lines are ties, a trailing number a weight; ``read_comparisons`` (pairs
    only) refuses such a file rather than dropping its ties."""
    path = write(tmp_path, "c.csv", "winner,loser\n0,1\n1,2,3\n2,3,tie\n3,0,TIE,2.5\n0,1\n")
    problem = PreferenceProblem.from_comparisons(path)
    np.testing.assert_array_equal(problem.pairs, [[0, 1], [1, 2], [0, 1]])
    np.testing.assert_array_equal(problem.weights, [1.0, 3.0, 1.0])
    np.testing.assert_array_equal(problem.ties, [[2, 3], [3, 0]])
    np.testing.assert_array_equal(problem.tie_weights, [1.0, 2.5])
    assert problem.n == 4
    plain = write(tmp_path, "p.csv", "0,1\n1,2\n")
    assert PreferenceProblem.from_comparisons(plain).weights is None
    with pytest.raises(ValueError, match="has ties or weights, which pairs alone cannot hold"):
        userdata.read_comparisons(path)


def test_equal_ratings_as_ties(tmp_path):
    path = write(tmp_path, "r.csv", "0,2\n1,1\n2,2\n3,nan\n4,1\n")
    problem = PreferenceProblem.from_ratings(path, ties="tie")
    np.testing.assert_array_equal(problem.pairs, [[0, 1], [0, 4], [2, 1], [2, 4]])
    np.testing.assert_array_equal(problem.ties, [[0, 2], [1, 4]])
    assert PreferenceProblem.from_ratings(path).ties.shape == (0, 2)
    with pytest.raises(ValueError, match="ties"):
        PreferenceProblem.from_ratings(path, ties="equal")
