"""The relational study's protocol pieces: the known/test split, the seen/unseen breakdown, the
on-disk format (round trip, errors that name the file and line)."""

import jax
import numpy as np
import pytest

from bayesrank.data.study import (
    SEEN,
    StudyQuery,
    read_study_dir,
    seen_category,
    split_known,
    write_study_dir,
)


def test_split_known_leaves_no_known_pair_in_the_test_set():
    pairs = np.array([(i, j) for i in range(8) for j in range(i + 1, 8)])
    for seed in range(5):
        known, test = split_known(jax.random.PRNGKey(seed), pairs, 10)
        assert len(known) == 10 and len(test) == len(pairs) - 10
        as_set = lambda a: {tuple(r) for r in a}  # noqa: E731
        assert not as_set(known) & as_set(test)
        assert as_set(known) | as_set(test) == as_set(pairs)


def test_seen_category_by_hand():
    known = np.array([[0, 1], [2, 1]])  # entities 0, 1, 2 seen; 3, 4 not
    test = np.array([[0, 2], [1, 3], [4, 0], [3, 4], [2, 1]])
    got = seen_category(known, test, 5)
    np.testing.assert_array_equal(got, [2, 1, 1, 0, 2])
    # every test pair counted once, in exactly one category
    counts = {name: int(np.sum(got == code)) for name, code in SEEN.items()}
    assert counts == {"neither": 1, "one": 2, "both": 2}
    assert sum(counts.values()) == len(test)


def query(qid, n=5, grades=True, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 3))
    W = np.zeros((n, n))
    W[0, 1] = W[1, 0] = 2.5
    W[2, 4] = W[4, 2] = 1.0
    if grades:
        g = rng.integers(0, 3, n).astype(float)
        from bayesrank.data.pairs import pairs_from_grades

        return StudyQuery(qid, X, pairs_from_grades(g), {"cites": W, "empty": 0 * W}, g)
    return StudyQuery(qid, X, np.array([[0, 1], [3, 2], [0, 1]]), {"cites": W, "empty": 0 * W})


def test_the_format_round_trips(tmp_path):
    qs = [query("q1"), query("q2", n=6, grades=False, seed=1)]
    write_study_dir(tmp_path, qs)
    got = read_study_dir(tmp_path)
    assert [g.qid for g in got] == ["q1", "q2"]
    for a, b in zip(qs, got, strict=True):
        np.testing.assert_array_equal(a.X, b.X)
        np.testing.assert_array_equal(a.pairs, b.pairs)
        assert sorted(b.relations) == ["cites", "empty"]
        for name in a.relations:
            np.testing.assert_array_equal(a.relations[name], b.relations[name])
    assert got[1].grades is None and got[0].grades is not None


def test_format_errors_name_the_file_and_line(tmp_path):
    write_study_dir(tmp_path, [query("q1")])
    edges = tmp_path / "q1" / "relation-cites.csv"
    edges.write_text("0,1\n# a comment\n2,7\n")
    with pytest.raises(ValueError, match=r"relation-cites.csv, line 3: entity 7 outside 0..4"):
        read_study_dir(tmp_path)
    edges.write_text("0,1,-2\n")
    with pytest.raises(ValueError, match=r"line 1: weight -2 must be positive"):
        read_study_dir(tmp_path)
    edges.write_text("0,1\n")
    (tmp_path / "q1" / "grades.csv").write_text("1\n2\nthree\n0\n1\n")
    with pytest.raises(ValueError, match=r"grades.csv, line 3: not a number"):
        read_study_dir(tmp_path)
    (tmp_path / "q1" / "grades.csv").write_text("1\n2\nnan\n0\n1\n")  # issue 32: no file, no line
    with pytest.raises(ValueError, match=r"grades.csv, line 3: 'nan' is not a finite number"):
        read_study_dir(tmp_path)
    (tmp_path / "q1" / "grades.csv").write_text("1\n2\n")
    with pytest.raises(ValueError, match=r"2 grades for 5 entities"):
        read_study_dir(tmp_path)
    (tmp_path / "q1" / "comparisons.csv").write_text("0,1\n")
    with pytest.raises(ValueError, match=r"exactly one of grades\.csv and comparisons\.csv"):
        read_study_dir(tmp_path)
    (tmp_path / "q1" / "grades.csv").unlink()
    write_study_dir(tmp_path / "two", [query("a"), query("b")])
    (tmp_path / "two" / "b" / "relation-empty.csv").unlink()
    with pytest.raises(ValueError, match=r"relations \['cites'\], other queries"):
        read_study_dir(tmp_path / "two")
