"""The LETOR / SVMlight reader against a naive reference parser, hand-made files, the real data."""

import gzip
import re

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bayesrank.data.letor import load_letor, read_query_file
from bayesrank.data.scores import read_scores


def naive_parse(text, d):
    """Reference: a deliberately simple parser sharing no code with the library."""
    out = {}
    for line in text.replace("\r\n", "\n").split("\n"):
        if not line.strip():
            continue
        body, _, comment = line.partition("#")
        tokens = body.split()
        qid = tokens[1][len("qid:") :]
        x = [0.0] * d
        for tok in tokens[2:]:
            k, v = tok.split(":")
            x[int(k) - 1] = float(v)
        m = re.search(r"docid\s*=\s*(\S+)", comment)
        out.setdefault(qid, []).append((int(tokens[0]), x, m.group(1) if m else ""))
    return out


def write(tmp_path, name, text, *, gz=False, crlf=False):
    data = text.replace("\n", "\r\n") if crlf else text
    path = tmp_path / name
    raw = data.encode()
    path.write_bytes(gzip.compress(raw) if gz else raw)
    return path


SMALL = (
    "2 qid:7 1:0.5 2:1.25 3:-3 #docid = A1 inc = 1 prob = 0.25\n"
    "0 qid:7 1:0 2:0 3:0.125 #docid = A2\n"
    "1 qid:3 2:7.5 #docid = B1\n"  # sparse: ids 1 and 3 missing
    "0 qid:3 1:1e-3 3:2\n"  # no comment at all
)


@pytest.mark.parametrize("gz", [False, True])
@pytest.mark.parametrize("crlf", [False, True])
def test_small_file_all_encodings(tmp_path, gz, crlf):
    path = write(tmp_path, "small.txt" + (".gz" if gz else ""), SMALL, gz=gz, crlf=crlf)
    queries = load_letor(path)
    assert [q.qid for q in queries] == ["7", "3"]  # order of first appearance
    ref = naive_parse(SMALL, 3)
    for q in queries:
        grades, xs, docs = zip(*ref[q.qid], strict=True)
        np.testing.assert_array_equal(q.grades, grades)
        np.testing.assert_array_equal(q.X, np.array(xs))
        assert list(q.doc_ids) == list(docs)
        assert q.X.dtype == np.float64
    np.testing.assert_array_equal(queries[0].lines, [1, 2])
    np.testing.assert_array_equal(queries[1].rows, [2, 3])


def test_non_contiguous_query_rows_are_gathered_in_file_order(tmp_path):
    text = "1 qid:a 1:1\n0 qid:b 1:2\n2 qid:a 1:3\n# a comment line\n\n0 qid:b 1:4\n"
    queries = load_letor(write(tmp_path, "f.txt", text))
    assert [q.qid for q in queries] == ["a", "b"]
    np.testing.assert_array_equal(queries[0].X[:, 0], [1, 3])
    np.testing.assert_array_equal(queries[1].lines, [2, 6])  # file lines
    np.testing.assert_array_equal(queries[1].rows, [1, 3])  # data-line indices


def test_n_features_pads_and_bounds(tmp_path):
    path = write(tmp_path, "f.txt", "1 qid:1 2:5\n")
    (q,) = load_letor(path, n_features=4)
    np.testing.assert_array_equal(q.X, [[0, 5, 0, 0]])
    with pytest.raises(ValueError, match=r"f\.txt, line 1: feature id 2 out of range \(1\.\.1\)"):
        load_letor(path, n_features=1)


@settings(max_examples=40, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.integers(0, 4),
            st.sampled_from(["1", "2", "30"]),
            st.lists(st.floats(-1e6, 1e6, allow_nan=False, width=32), min_size=5, max_size=5),
            st.lists(st.booleans(), min_size=5, max_size=5),
        ),
        min_size=1,
        max_size=30,
    )
)
def test_round_trip_against_naive_parser(tmp_path_factory, rows):
    lines = []
    for label, qid, values, keep in rows:
        feats = " ".join(
            f"{k + 1}:{v!r}" for k, (v, kp) in enumerate(zip(values, keep, strict=True)) if kp
        )
        lines.append(f"{label} qid:{qid} {feats} #docid = d{len(lines)}")
    lines.append("0 qid:1 5:0")  # fixes d = 5 for both parsers
    text = "\n".join(lines) + "\n"
    path = write(tmp_path_factory.mktemp("rt"), "f.txt", text)
    ref = naive_parse(text, 5)
    queries = load_letor(path)
    assert [q.qid for q in queries] == list(ref)
    for q in queries:
        grades, xs, docs = zip(*ref[q.qid], strict=True)
        np.testing.assert_array_equal(q.grades, grades)
        np.testing.assert_array_equal(q.X, np.array(xs))
        assert list(q.doc_ids) == list(docs)


@pytest.mark.parametrize(
    ("text", "line", "message"),
    [
        ("0 qid:1 1:0.5 2:NULL\n", 1, "feature 2 has non-numeric value 'NULL'"),
        ("0 qid:1 1:1\n1 qid:1 1:abc\n", 2, "feature 1 has non-numeric value 'abc'"),
        ("0 qid:1 1:1\n1 1:0.5 2:1\n", 2, "missing 'qid:<id>'"),
        ("0 qid:1 0:1\n", 1, r"feature id 0 out of range"),
        ("0 qid:1 1:1\n0 qid:1 -2:1\n", 2, r"feature id -2 out of range"),
        ("0 qid:1 1:1 1:2\n", 1, "feature id 1 appears twice"),
        ("0 qid:1 2:1 1:3 2:2\n", 1, "feature id 2 appears twice"),
        ("x qid:1 1:1\n", 1, "label 'x' is not a number"),
        ("1.5 qid:1 1:1\n", 1, "label '1.5' is not an integer grade"),
        ("0 qid:1 1:nan\n", 1, "non-finite value 'nan'"),
        ("0 qid:1 1:1\n0 qid:1 1.5:1\n", 2, "feature id '1.5' is not an integer"),
        ("0 qid:1 1:1\n0 qid:1 7\n", 2, "feature token '7' is not of the form"),
        ("0 qid: 1:1\n", 1, "empty query id"),
    ],
)
def test_bad_input_names_file_and_line(tmp_path, text, line, message):
    path = write(tmp_path, "bad.txt", text)
    with pytest.raises(ValueError, match=rf"bad\.txt, line {line}: .*{message}"):
        load_letor(path)


def test_empty_file_and_missing_file(tmp_path):
    with pytest.raises(ValueError, match=r"empty\.txt: empty file"):
        load_letor(write(tmp_path, "empty.txt", "\n# only a comment\n"))
    with pytest.raises(ValueError, match="no such file"):
        load_letor(tmp_path / "absent.txt")


def test_lightgbm_query_file(tmp_path):
    write(tmp_path, "rank.train", "1 1:0.5 3:1\n0 2:1\n2 1:1\n")
    (tmp_path / "rank.train.query").write_text("2\n1\n")
    queries = load_letor(tmp_path / "rank.train")  # .query found next to the file
    assert [q.qid for q in queries] == ["0", "1"]
    np.testing.assert_array_equal(queries[0].X, [[0.5, 0, 1], [0, 1, 0]])
    np.testing.assert_array_equal(queries[1].grades, [2])
    (tmp_path / "other.query").write_text("1\n1\n")
    with pytest.raises(ValueError, match=r"add up to 2 lines, but .*rank\.train has 3"):
        load_letor(tmp_path / "rank.train", query_file=tmp_path / "other.query")
    (tmp_path / "bad.query").write_text("2\n-1\n")
    with pytest.raises(ValueError, match=r"bad\.query, line 2: group size -1 is not positive"):
        read_query_file(tmp_path / "bad.query")
    write(tmp_path, "noqid.txt", "1 1:0.5\n")  # no qid and no .query file
    with pytest.raises(ValueError, match=r"noqid\.txt, line 1: missing 'qid:<id>'"):
        load_letor(tmp_path / "noqid.txt")


def test_read_scores(tmp_path):
    path = write(tmp_path, "pred.txt", "0.5\n-1e3\n2\n\n")
    np.testing.assert_array_equal(read_scores(path, n_expected=3), [0.5, -1000, 2])
    with pytest.raises(ValueError, match="3 scores for 4 documents"):
        read_scores(path, n_expected=4)
    with pytest.raises(ValueError, match=r"p2\.txt, line 2: score 'oops' is not a number"):
        read_scores(write(tmp_path, "p2.txt", "1\noops\n"))
    with pytest.raises(ValueError, match=r"p3\.txt, line 1: expected one score"):
        read_scores(write(tmp_path, "p3.txt", "1 2\n"))
    with pytest.raises(ValueError, match=r"p4\.txt, line 2: score 'inf' is not finite"):
        read_scores(write(tmp_path, "p4.txt", "1\ninf\n"))


def test_bundled_sample():
    from bayesrank.data.sample import SAMPLE_QIDS, load_sample, sample_meta_path

    queries = load_sample()
    assert tuple(q.qid for q in queries) == SAMPLE_QIDS
    assert [q.n_docs for q in queries] == [56, 54, 42, 35, 84]
    assert all(q.n_features == 45 for q in queries)
    assert all(0.0 <= q.X.min() and q.X.max() <= 1.0 for q in queries)  # QueryLevelNorm
    assert (queries[2].grades == 0).all()  # query 8 has no relevant document
    assert all(sample_meta_path(q).is_file() for q in SAMPLE_QIDS)
    with pytest.raises(ValueError, match="not in the bundled sample"):
        sample_meta_path(1)


# --- the real data (../shared/data) -------------------------------------------------------------


@pytest.mark.shared_data
def test_ohsumed_all(shared_data):
    queries = load_letor(shared_data / "OHSUMED/Feature-min/ALL/OHSUMED.txt.gz")
    assert len(queries) == 106
    assert sum(q.n_docs for q in queries) == 16140
    grades = np.concatenate([q.grades for q in queries])
    assert np.bincount(grades).tolist() == [11303, 2585, 2252]
    assert [q.qid for q in queries] == [str(i) for i in range(1, 107)]
    sizes = [q.n_docs for q in queries]
    assert (min(sizes), max(sizes)) == (35, 320)
    assert all(q.n_features == 45 for q in queries)
    # Query-level normalised version: same rows, same order, features in [0, 1].
    qln = load_letor(shared_data / "OHSUMED/QueryLevelNorm/Fold2/test.txt.gz")
    assert [q.qid for q in qln] == [str(i) for i in range(1, 22)]
    for a, b in zip(qln, queries[:21], strict=True):
        np.testing.assert_array_equal(a.doc_ids, b.doc_ids)
        np.testing.assert_array_equal(a.grades, b.grades)
        assert 0 <= a.X.min() and a.X.max() <= 1


@pytest.mark.shared_data
def test_ohsumed_feature_null_is_rejected_with_its_line(shared_data):
    path = shared_data / "OHSUMED/Feature-null/ALL/OHSUMED.txt.gz"
    with gzip.open(path, "rt") as f:
        first = next(i for i, line in enumerate(f, start=1) if "NULL" in line)
    with pytest.raises(
        ValueError, match=rf"line {first}: feature \d+ has non-numeric value 'NULL'"
    ):
        load_letor(path)


MQ2008_FOLDS = {  # (train, vali, test) as (rows, queries), from ../shared/data/README.md
    1: ((9630, 471), (2707, 157), (2874, 156)),
    2: ((9404, 471), (2874, 156), (2933, 157)),
    3: ((8643, 470), (2933, 157), (3635, 157)),
    4: ((8514, 470), (3635, 157), (3062, 157)),
    5: ((9442, 470), (3062, 157), (2707, 157)),
}


@pytest.mark.shared_data
@pytest.mark.parametrize("fold", sorted(MQ2008_FOLDS))
def test_mq2008_folds(shared_data, fold):
    for part, (rows, n_queries) in zip(("train", "vali", "test"), MQ2008_FOLDS[fold], strict=True):
        queries = load_letor(shared_data / f"MQ2008/Fold{fold}/{part}.txt.gz")
        assert (sum(q.n_docs for q in queries), len(queries)) == (rows, n_queries)
        assert all(q.n_features == 46 for q in queries)
        assert all(d.startswith("GX") for q in queries for d in q.doc_ids)


@pytest.mark.shared_data
def test_lightgbm_sample(shared_data):
    base = shared_data / "samples/lightgbm_lambdarank"
    train = load_letor(base / "rank.train.gz", query_file=base / "rank.train.query", n_features=300)
    assert (len(train), sum(q.n_docs for q in train)) == (201, 3005)
    grades = np.concatenate([q.grades for q in train])
    assert np.bincount(grades).tolist() == [645, 1211, 858, 222, 69]
    test = load_letor(base / "rank.test.gz")  # rank.test.query found automatically
    assert (len(test), sum(q.n_docs for q in test)) == (50, 768)
