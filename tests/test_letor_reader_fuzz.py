"""The LETOR reader's grammar, pinned: each class of input a fuzz run broke, then property tests.

Every bad line is put at line 3 of its file (two good lines before it, one after) so that an error
blamed on the wrong line (the first, or the last) fails. Expected arrays are built here by hand or
with Python's ``float``, never with the reader's code.
"""

import gzip
import math
import re
from unittest import mock

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bayesrank.data import letor
from bayesrank.data.letor import MAX_FEATURE_ID, load_letor, read_query_file
from bayesrank.data.scores import read_scores

pytestmark = pytest.mark.float32  # dtype-aware: also run with x64 off in CI

HEAD = "0 qid:1 1:0.5 2:1 # docid = A\n1 qid:1 2:0.25\n"  # lines 1-2, valid
TAIL = "2 qid:2 1:3\n"  # line 4, valid


def write(directory, text, name="f.txt", *, gz=False, encoding="utf-8"):
    path = directory / name
    raw = text.encode(encoding)
    path.write_bytes(gzip.compress(raw) if gz else raw)
    return path


def error_at(path, line, **kwargs):
    """The message of the ValueError ``load_letor(path)`` raises, checked to name ``path:line``."""
    with pytest.raises(ValueError) as info:
        load_letor(path, **kwargs)
    message = str(info.value)
    assert message.startswith(f"{path}, line {line}: "), message
    return message


def bits(a):
    """Float64 array as int64 bit patterns: equality of these is exact (-0.0 != 0.0)."""
    return np.ascontiguousarray(a, dtype=np.float64).view(np.int64)


# --- (a) each class of bug, explicitly -----------------------------------------------------------


@pytest.mark.parametrize(
    ("tokens", "fragment"),
    [
        # accepted by one parsing path and rejected by the other before
        ("1.0:0.1", "feature id '1.0' is not an integer"),
        ("1e0:0.1", "feature id '1e0' is not an integer"),
        ("2 :0.3", "feature token '2' is not of the form <id>:<value>"),
        ("1:0.5:2 3:0.3", "feature token '1:0.5:2' is not of the form <id>:<value>"),
        ("+3:1", "feature id '+3' is not an integer"),
        # "no single offending line found" before
        ("1_000:1", "feature id '1_000' is not an integer"),
        ("\u0661\u0662:1", "feature id '\u0661\u0662' is not an integer"),
        ("1:1_0", "feature 1 has non-numeric value '1_0'"),
        ("1:\u0663", "feature 1 has non-numeric value '\u0663'"),
        # OverflowError / MemoryError before
        ("inf:1", "feature id 'inf' is not an integer"),
        ("-2:1", "feature id -2 out of range"),
        ("0:1", "feature id 0 out of range"),
        (":0.5", "feature id '' is not an integer"),
        ("1:", "feature 1 has non-numeric value ''"),
        ("1:0x10", "feature 1 has non-numeric value '0x10'"),
        ("1:1e5.5", "feature 1 has non-numeric value '1e5.5'"),
        ("1:1.2.3", "feature 1 has non-numeric value '1.2.3'"),
        ("1:--1", "feature 1 has non-numeric value '--1'"),
        ("1:e5", "feature 1 has non-numeric value 'e5'"),
        ("1:.", "feature 1 has non-numeric value '.'"),
        ("1:NULL", "feature 1 has non-numeric value 'NULL'"),
        ("1:inf", "feature 1 has non-finite value 'inf'"),
        ("1:-Infinity", "feature 1 has non-finite value '-Infinity'"),
        ("1:nan", "feature 1 has non-finite value 'nan'"),
        ("1:1e400", "feature 1 has non-finite value '1e400'"),
        ("3:1 3:2", "feature id 3 appears twice"),
        ("2:1 1:1 2:1", "feature id 2 appears twice"),
        # separators other than space and tab
        ("1:0.5\x0c2:1", r"unexpected character '\x0c'"),
        ("1:0.5\x0b2:1", r"unexpected character '\x0b'"),
        ("1:0.5\xa02:1", r"unexpected character '\xa0'"),
        ("1:0.5\u20282:1", r"unexpected character '\u2028'"),
        ("1:0.5\x852:1", r"unexpected character '\x85'"),
        ("1:0.5\x1c2:1", r"unexpected character '\x1c'"),
        ("1:0.5\x002:1", r"unexpected character '\x00'"),
        ("1:0.5\r2:1", r"unexpected carriage return '\r'"),
    ],
)
def test_bad_feature_token_names_file_line_and_token(tmp_path, tokens, fragment):
    path = write(tmp_path, HEAD + f"0 qid:1 {tokens} # docid = C\n" + TAIL)
    assert fragment in error_at(path, 3)


@pytest.mark.parametrize(
    ("label", "fragment"),
    [
        ("1e20", "label '1e20' is out of range"),  # was -9223372036854775808 with a warning
        ("-1e20", "label '-1e20' is out of range"),
        ("9007199254740993", "label '9007199254740993' is out of range"),  # would round to 2**53
        ("1e400", "label '1e400' is out of range"),
        ("2.5", "label '2.5' is not an integer grade"),
        ("1e-999999999", "label '1e-999999999' is not an integer grade"),
        ("inf", "label 'inf' is not an integer grade"),
        ("nan", "label 'nan' is not an integer grade"),
        ("x", "label 'x' is not a number"),
        ("1_0", "label '1_0' is not a number"),
        ("\u0663", "label '\u0663' is not a number"),
        ("0x1", "label '0x1' is not a number"),
    ],
)
def test_bad_label_names_file_line_and_token(tmp_path, label, fragment):
    path = write(tmp_path, HEAD + f"{label} qid:1 1:1\n" + TAIL)
    assert fragment in error_at(path, 3)


@pytest.mark.parametrize(
    ("qid", "fragment"),
    [("qid:", "empty query id"), ("", "missing 'qid:<id>'"), ("qid:a\x0cb", r"'\x0c'")],
)
def test_bad_qid_names_file_and_line(tmp_path, qid, fragment):
    path = write(tmp_path, HEAD + f"1 {qid} 1:1\n" + TAIL)
    assert fragment in error_at(path, 3)


def test_valid_label_variants_parse_exactly(tmp_path):
    labels = ["+1", "1.0", "1e0", "-1", "20e-1", "2.", ".0e5", "-0", "9007199254740992", "0e99"]
    text = "".join(f"{label} qid:1 1:1\n" for label in labels)
    (q,) = load_letor(write(tmp_path, text))
    assert q.grades.dtype == np.int64
    assert q.grades.tolist() == [1, 1, 1, -1, 2, 2, 0, 0, 2**53, 0]


VALUES = [
    "5.",
    "5.e3",
    ".5",
    "-.5e-3",
    "1E+5",
    "+0",
    "-0",
    "-0.0",
    "00012.5000",
    "1e-400",
    "4.9e-324",
    "1.7976931348623157e308",
    "123456789012345678901234567890",
    "0.30000000000000004441",
    "1e-05",
    "3",
]


@pytest.mark.parametrize("sep", [" ", "\t", "  \t "])
def test_valid_value_variants_parse_exactly(tmp_path, sep):
    feats = sep.join(f"{2 * i + 1}:{v}" for i, v in enumerate(VALUES))
    text = HEAD + f"\t 1{sep}qid:7{sep}{feats}{sep}# docid = V\n" + TAIL
    queries = load_letor(write(tmp_path, text))
    assert [q.qid for q in queries] == ["1", "7", "2"]
    row = queries[1].X[0]
    expected = np.zeros(2 * len(VALUES) - 1)
    expected[0::2] = [float(v) for v in VALUES]
    np.testing.assert_array_equal(bits(row), bits(expected))
    assert queries[1].doc_ids.tolist() == ["V"]
    assert queries[1].lines.tolist() == [3]


def test_feature_ids_are_capped(tmp_path):
    for token, message in [
        ("10000000000000:1", "feature id 10000000000000 out of range (1..1000000"),
        (f"{MAX_FEATURE_ID + 1}:1", f"feature id {MAX_FEATURE_ID + 1} out of range"),
        ("9" * 5000 + ":1", "feature id 9999999999999999999999999999999999999... out of range"),
        ("0" * 30 + "10000000:1", "feature id 10000000 out of range"),
        (
            "-" + "9" * 5000 + ":1",
            "feature id -999999999999999999999999999999999999... out of range",
        ),
    ]:
        path = write(tmp_path, HEAD + f"0 qid:1 {token}\n" + TAIL)
        found = error_at(path, 3)
        assert message in found
        assert len(found) < len(str(path)) + 200  # a 5000-digit id is not echoed in full
    path = write(tmp_path, HEAD + "0 qid:1 3:1\n" + TAIL)
    assert "feature id 3 out of range (1..2)" in error_at(path, 3, n_features=2)
    (q, *_) = load_letor(write(tmp_path, HEAD + "0 qid:1 007:1\n" + TAIL))
    np.testing.assert_array_equal(
        q.X, [[0.5, 1, 0, 0, 0, 0, 0], [0, 0.25, 0, 0, 0, 0, 0], [0] * 6 + [1]]
    )
    # An explicit n_features lifts the cap (and is the matrix width).
    path = write(tmp_path, f"0 qid:1 {MAX_FEATURE_ID + 1}:2\n")
    (q,) = load_letor(path, n_features=MAX_FEATURE_ID + 1)
    assert q.X.shape == (1, MAX_FEATURE_ID + 1) and q.X[0, -1] == 2 and q.X.sum() == 2


def test_matrix_too_large_for_memory_is_a_value_error(tmp_path):
    path = write(tmp_path, HEAD)
    with pytest.raises(ValueError, match=r"f\.txt: the 2 x 10000000000000 feature matrix"):
        load_letor(path, n_features=10**13)


def test_lines_end_at_line_feed_only(tmp_path):
    # Form feed, \v, \x1c-\x1e, NEL, U+2028/2029 are comment text, not line ends (a lone \r
    # is an error, even in a comment: test_a_lone_carriage_return_is_an_error_even_in_a_comment).
    text = (
        "0 qid:1 1:1 # docid = A a\x0cb\x0bc\x1cd\x1de\x1ef\x85g\u2028h\u2029ij\n"
        "# comment line \x0c 2 qid:x 1:y \u2028 junk\n"
        "1 qid:1 2:2 #docid = B\r\n"
        "\n"
        "  \t\n"
        "2 qid:1 1:3 # docid = C \x0c\n"
    )
    for crlf in (False, True):  # (all CRLF: "\r\r\n" would hold a lone "\r")
        path = write(tmp_path, text.replace("\r\n", "\n").replace("\n", "\r\n") if crlf else text)
        (q,) = load_letor(path)
        np.testing.assert_array_equal(q.X, [[1, 0], [0, 2], [3, 0]])
        assert q.lines.tolist() == [1, 3, 6]
        assert q.rows.tolist() == [0, 1, 2]
        assert q.doc_ids.tolist() == ["A", "B", "C"]
    # ... so a bad line after such comments is still blamed on its own line.
    path = write(tmp_path, "0 qid:1 1:1 # a\x0cb\u2028c\x85d\n# x\x0cy\n0 qid:1 1:x\n")
    assert "feature 1 has non-numeric value 'x'" in error_at(path, 3)
    # Old Mac line endings are one long line with carriage returns inside.
    path = write(tmp_path, "0 qid:1 1:1\r1 qid:1 1:2\r")
    assert "carriage return" in error_at(path, 1)


@pytest.mark.parametrize("crlf", [False, True])
def test_featureless_lines_are_all_zero(tmp_path, crlf):
    text = "2 qid:1\n0 qid:1 2:0.5 # docid = D1\n1 qid:1 # docid = D2\n1 qid:2   \n"
    path = write(tmp_path, text.replace("\n", "\r\n") if crlf else text)
    q1, q2 = load_letor(path)
    np.testing.assert_array_equal(q1.X, [[0, 0], [0, 0.5], [0, 0]])
    assert q1.grades.tolist() == [2, 0, 1]
    assert q1.doc_ids.tolist() == ["", "D1", "D2"]
    np.testing.assert_array_equal(q2.X, [[0, 0]])
    # A file with no feature at all: width 0, or n_features.
    path = write(tmp_path, "2 qid:1\n1 qid:1 # doc\n")
    (q,) = load_letor(path)
    assert q.X.shape == (2, 0) and q.grades.tolist() == [2, 1]
    (q,) = load_letor(path, n_features=3)
    np.testing.assert_array_equal(q.X, np.zeros((2, 3)))


def test_missing_paths_raise_file_not_found(tmp_path):
    with pytest.raises(FileNotFoundError, match=r"absent\.txt: no such file"):
        load_letor(tmp_path / "absent.txt")
    with pytest.raises(ValueError, match="no such file"):  # still a ValueError, for the CLI
        load_letor(tmp_path / "absent.txt")
    with pytest.raises(FileNotFoundError):
        read_scores(tmp_path / "absent.pred")
    with pytest.raises(FileNotFoundError):
        read_query_file(tmp_path / "absent.query")
    with pytest.raises(FileNotFoundError):
        load_letor(write(tmp_path, "1 1:1\n"), query_file=tmp_path / "absent.query")
    with pytest.raises(ValueError, match="not a regular file"):
        load_letor(tmp_path)


def test_corrupt_gzip_names_the_file(tmp_path):
    raw = gzip.compress(HEAD.encode() * 50)
    path = tmp_path / "f.txt.gz"
    path.write_bytes(raw[:40] + bytes(30) + raw[70:])
    with pytest.raises(ValueError, match=r"f\.txt\.gz: corrupt gzip data"):
        load_letor(path)
    path.write_bytes(raw[:-12])
    with pytest.raises(ValueError, match=r"f\.txt\.gz: corrupt gzip data"):
        load_letor(path)


def test_encodings(tmp_path):
    (q,) = load_letor(
        write(tmp_path, "\ufeff1 qid:\u03a9 1:2 # docid = \u00e9\n", encoding="utf-8")
    )
    assert (q.qid, q.grades.tolist(), q.doc_ids.tolist()) == ("\u03a9", [1], ["\u00e9"])
    (q,) = load_letor(write(tmp_path, "1 qid:1 1:2 # docid = \u00e9\xff\n", encoding="latin-1"))
    assert q.doc_ids.tolist() == ["\u00e9\xff"]


def test_query_and_score_files_follow_the_same_rules(tmp_path):
    for size, message in [
        ("1_0", "group size '1_0' is not an integer"),
        ("\u0663", "group size '\u0663' is not an integer"),
        ("2.0", "group size '2.0' is not an integer"),
        ("0", "group size 0 is not positive"),
        ("-1", "group size -1 is not positive"),
        ("1\x0c1", "group size '1\\x0c1' is not an integer"),
        ("9" * 5000, "group size " + "9" * 37 + "... is too large"),
        ("-" + "9" * 5000, "group size -" + "9" * 36 + "... is not positive"),
    ]:
        path = write(tmp_path, f"1\n\n{size}\n2\n", name="f.query")
        with pytest.raises(ValueError, match=re.escape(f"{path}, line 3: {message}")):
            read_query_file(path)
    assert read_query_file(write(tmp_path, "1\r\n\r\n 2\t\r\n", name="g.query")).tolist() == [1, 2]
    for score, message in [
        ("1_0", "score '1_0' is not a number"),
        ("\u0663", "score '\u0663' is not a number"),
        ("inf", "score 'inf' is not finite"),
        ("1e400", "score '1e400' is not finite"),
        ("1\x0c2", r"unexpected character '\x0c'"),
        ("1 2", "expected one score, got '1 2'"),
        ("", "expected one score"),
    ]:
        path = write(tmp_path, f"0.5\n-1\n{score}\n2\n", name="p.txt")
        with pytest.raises(ValueError, match=re.escape(f"{path}, line 3: {message}")):
            read_scores(path)
    path = write(tmp_path, "0.5\r\n-1e-05\r\n\t5.\r\n.5 \r\n\r\n", name="q.txt")
    np.testing.assert_array_equal(read_scores(path, n_expected=4), [0.5, -1e-05, 5.0, 0.5])


def test_usual_files_take_the_fast_path(tmp_path):
    text = "".join(
        f"{i % 3} qid:{i // 4} 1:0.{i}1 2:-1.5e-05 3:{i} 4:1E+3 5:-.25 #docid = d{i} inc = 1\r\n"
        for i in range(20)
    )
    path = write(tmp_path, text)
    with mock.patch.object(letor, "_parse_slow", side_effect=AssertionError("slow path taken")):
        queries = load_letor(path)
    assert sum(q.n_docs for q in queries) == 20
    np.testing.assert_array_equal(queries[1].X[0], [0.41, -1.5e-05, 4, 1000, -0.25])


# --- (b) property tests --------------------------------------------------------------------------

WHITESPACE = [" ", "\t", "  ", " \t "]
# no lone "\r": it is an error even in a comment (test_a_lone_carriage_return_is_an_error...)
COMMENT_JUNK = ["", "\x0c", "\x0b", "\u2028", "\x85", "\x1c", "#", ":", "\u00e9", " 1:2 "]


def fmt_value(x, style):
    if style == "lead-dot":  # "0.25" -> ".25", "-0.25" -> "-.25"
        text = f"{x:.4f}"
        text = text.replace("0.", ".", 1) if text.lstrip("-").startswith("0.") else text
    else:
        text = repr(x) if style == "repr" else style % x
    return text if math.isfinite(float(text)) else repr(x)  # "%.3e" % 1.7976e308 is "1.798e+308"


VALUE_STYLES = ["repr", "%.6f", "%g", "%e", "%.17g", "%E", "%+.3e", "lead-dot"]


def fmt_label(k, style):
    return {"plain": str(k), "float": f"{k}.0", "exp": f"{k}e0", "dot": f"{k}."}[style]


@st.composite
def letor_documents(draw, max_rows=12):
    """Rows of a valid LETOR file (text by ``render``), each with the label, features and doc id
    it must give."""
    n_rows = draw(st.integers(1, max_rows))
    rows = []
    for r in range(n_rows):
        label = draw(st.integers(-3, 30))
        ids = draw(st.lists(st.integers(1, 40), unique=True, max_size=7))
        values = [
            fmt_value(
                draw(st.floats(allow_nan=False, allow_infinity=False)),
                draw(st.sampled_from(VALUE_STYLES)),
            )
            for _ in ids
        ]
        has_comment = draw(st.booleans())
        rows.append(
            {
                "lead": draw(st.sampled_from(["", " ", "\t"])),
                "tokens": [
                    fmt_label(label, draw(st.sampled_from(["plain", "float", "exp", "dot"]))),
                    "qid:" + draw(st.sampled_from(["1", "2", "10", "a", "q-7", "x:y", "\u03a9"])),
                    *[f"{i}:{v}" for i, v in zip(ids, values, strict=True)],
                ],
                "seps": draw(st.lists(st.sampled_from(WHITESPACE), min_size=12, max_size=12)),
                "trail": draw(st.sampled_from(["", " ", "\t "])),
                "comment": (
                    draw(st.sampled_from(COMMENT_JUNK))
                    + f" docid = D{r} inc = 1"
                    + draw(st.sampled_from(COMMENT_JUNK))
                )
                if has_comment
                else None,
                "before": draw(
                    st.lists(
                        st.sampled_from(["", " ", "\t", "# c\x0c", "  # 1 qid:1 1:x"]), max_size=2
                    )
                ),
                "label": label,
                "features": dict(zip(ids, [float(v) for v in values], strict=True)),
                "doc_id": f"D{r}" if has_comment else "",
            }
        )
    return rows


def render(rows, newline):
    """The file text of ``rows`` and the 1-based line number of each data row."""
    out, linenos = [], []
    for row in rows:
        out += row["before"]
        body = row["tokens"][0]
        for sep, token in zip(
            row["seps"][: len(row["tokens"]) - 1], row["tokens"][1:], strict=True
        ):
            body += sep + token
        comment = "" if row["comment"] is None else "#" + row["comment"]
        out.append(row["lead"] + body + row["trail"] + comment)
        linenos.append(len(out))
    return newline.join(out) + newline, linenos


@settings(
    max_examples=100,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    rows=letor_documents(),
    newline=st.sampled_from(["\n", "\r\n"]),
    gz=st.booleans(),
    extra_width=st.none() | st.integers(0, 3),
)
@pytest.mark.slow  # 3 s or more in the fast loop
def test_valid_documents_round_trip_exactly(tmp_path, rows, newline, gz, extra_width):
    text, linenos = render(rows, newline)
    path = write(tmp_path, text, gz=gz)
    width = max((i for row in rows for i in row["features"]), default=0)
    n_features = None if extra_width is None else max(width + extra_width, 1)
    queries = load_letor(path, n_features=n_features)

    d = width if n_features is None else n_features
    order = list(dict.fromkeys(row["tokens"][1][4:] for row in rows))
    assert [q.qid for q in queries] == order
    for q in queries:
        mine = [(k, row) for k, row in enumerate(rows) if row["tokens"][1][4:] == q.qid]
        expected = np.zeros((len(mine), d))
        for j, (_, row) in enumerate(mine):
            for i, v in row["features"].items():
                expected[j, i - 1] = v
        assert q.X.shape == expected.shape and q.X.dtype == np.float64
        np.testing.assert_array_equal(bits(q.X), bits(expected))
        assert q.grades.tolist() == [row["label"] for _, row in mine]
        assert q.doc_ids.tolist() == [row["doc_id"] for _, row in mine]
        assert q.lines.tolist() == [linenos[k] for k, _ in mine]
        assert q.rows.tolist() == [k for k, _ in mine]


BAD_FEATURES = [
    "1.0:1",
    "1e0:1",
    "1_000:1",
    "\u0661:1",
    "inf:1",
    "+3:1",
    "-2:1",
    "0:1",
    ":1",
    "7",
    "1:",
    "1:0.5:2",
    "1:1_0",
    "1:0x1",
    "1:nan",
    "1:-inf",
    "1:1e999",
    "1:1e5.5",
    "1:1.2.3",
    "1:--1",
    "1:e5",
    "1:.",
    "1:NULL",
    "1:\u0663",
    f"{MAX_FEATURE_ID + 1}:1",
    "10000000000000:1",
    "-99999999999999999999:1",
    "qid:3",
]
BAD_LABELS = ["1e20", "2.5", "x", "inf", "nan", "1_0", "\u0663", "9007199254740993", "--1", "qid:5"]
BAD_SEPARATORS = ["\x0c", "\x0b", "\xa0", "\u2028", "\x85", "\x1c", "\r", "\x00", "\u3000"]


@settings(
    max_examples=100,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(rows=letor_documents(max_rows=6), newline=st.sampled_from(["\n", "\r\n"]), data=st.data())
def test_one_corrupted_line_is_named(tmp_path, rows, newline, data):
    k = data.draw(st.integers(0, len(rows) - 1), label="row")
    row = rows[k]
    tokens = row["tokens"]
    kind = data.draw(st.sampled_from(["feature", "label", "separator", "duplicate", "no qid"]))
    if kind == "feature":
        at = data.draw(st.integers(2, len(tokens)), label="at")
        tokens.insert(at, data.draw(st.sampled_from(BAD_FEATURES), label="token"))
    elif kind == "label":
        tokens[0] = data.draw(st.sampled_from(BAD_LABELS), label="label")
    elif kind == "separator":
        at = data.draw(st.integers(0, len(tokens) - 2), label="at")
        row["seps"][at] = data.draw(st.sampled_from(BAD_SEPARATORS), label="separator")
    elif kind == "duplicate":
        tokens.append(tokens[-1] if len(tokens) > 2 else "5:1")
        if len(tokens) == 3:
            tokens.append("5:2")
    else:
        del tokens[1]
    text, linenos = render(rows, newline)
    path = write(tmp_path, text)
    error_at(path, linenos[k])


# Pieces of near-valid feature tokens: most combinations are valid, many are not, a few are valid
# but outside the fast path's subset ("5.", "5.e3").
ID_PIECES = ["1", "2", "12", "007", "", "1.0", "+1", "-1", "1e0", "\u0661", "1_0", "inf", "0"]
SIGNS = ["", "", "+", "-", "--"]
MANTISSAS = ["0", "12", "", "007", "1.5", ".5", "5.", ".", "1_0", "\u0663"]
EXPONENTS = ["", "", "e5", "E-3", "e+07", "e", "e-", "e5.5", "e400", "e-400", "x"]


@st.composite
def near_valid_lines(draw):
    out = []
    for _ in range(draw(st.integers(1, 5))):
        label = draw(st.sampled_from(["0", "1", "2.0", "1e1", "x", "+1"]))
        feats = []
        for _ in range(draw(st.integers(0, 5))):
            id_text = draw(st.sampled_from(ID_PIECES))
            value = draw(st.sampled_from(SIGNS)) + draw(st.sampled_from(MANTISSAS))
            value += draw(st.sampled_from(EXPONENTS))
            colon = draw(st.sampled_from([":", ":", ":", "::", " :", ""]))
            feats.append(id_text + colon + value)
        seps = draw(st.lists(st.sampled_from([" ", " ", "\t", "  ", "\x0c"]), min_size=7))
        tokens = [label, "qid:" + draw(st.sampled_from(["1", "2", ""])), *feats]
        line = tokens[0] + "".join(
            s + t for s, t in zip(seps, tokens[1:], strict=False)
        )  # seps longer
        out.append(line + draw(st.sampled_from(["", " # docid = x", "#"])))
    return "\n".join(out) + "\n"


@settings(
    max_examples=100,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(text=near_valid_lines() | letor_documents(max_rows=4).map(lambda r: render(r, "\n")[0]))
def test_fast_and_line_by_line_paths_agree(tmp_path, text):
    """Same arrays, or the same error message, with the vectorised path on and off."""
    path = write(tmp_path, text)

    def outcome():
        try:
            return [
                (q.qid, bits(q.X).tolist(), q.grades.tolist(), q.doc_ids.tolist(), q.lines.tolist())
                for q in load_letor(path)
            ]
        except ValueError as err:
            return str(err)

    fast = outcome()
    with mock.patch.object(letor, "_parse_fast", return_value=None):
        slow = outcome()
    assert fast == slow


@pytest.mark.parametrize(
    "text, line",
    [
        ("0 qid:1 1:1 # docid = A\r1 qid:1 1:2 # docid = B\n", 1),  # inside a data line's comment
        ("# header\r0 qid:1 1:1\n", 1),  # inside a comment line
        ("0 qid:1 1:1\n0 qid:1 1:2 # a\rb\r\n", 2),  # before a CRLF ending
    ],
)
def test_a_lone_carriage_return_is_an_error_even_in_a_comment(tmp_path, text, line):
    """Issue 32: a lone ``\\r`` inside a comment was comment text, so old Mac line endings read
    several documents as one; the grammar says a lone ``\\r`` is an error."""
    path = write(tmp_path, text)
    assert "unexpected carriage return" in error_at(path, line)


@settings(max_examples=60, deadline=None)
@given(
    comment=st.text(
        alphabet=st.characters(blacklist_characters="\n", blacklist_categories=("Cs",)),
        max_size=20,
    ),
)
def test_property_a_carriage_return_in_a_comment_is_refused_or_ends_the_line(comment):
    """Any comment text: the file reads as exactly one document, or (a ``\\r`` not ending the
    line) fails naming line 1; never several documents read as one, never a silent merge."""
    import tempfile
    from pathlib import Path

    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "f.txt"
        path.write_bytes(f"0 qid:1 1:1 # {comment}\n".encode())
        body = comment[:-1] if comment.endswith("\r") else comment
        if "\r" in body:
            assert "unexpected carriage return" in error_at(path, 1)
        else:
            (q,) = load_letor(path)
            assert q.n_docs == 1
