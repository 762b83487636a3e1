"""Issue 49, the miscellaneous faces: old import paths, label rankings, the CLI's files, PRank.

References are the tests' own: the table of moved names is read from the git history (``git log
-S``), label rankings are judged by ``sorted(row) == list(range(c))`` in plain Python, the CLI's
files are parsed with ``csv``/``json``/``float``, PRank is rerun in exact rational arithmetic.
"""

import importlib
import math
import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bayesrank.label_ranking import (
    RPC,
    ConstraintClassification,
    GPLabelRanker,
    orders_to_positions,
)
from bayesrank.label_ranking._checks import check_orders

# ---------------------------------------------------------------------------------------------
# Old import paths: (old module, name, new module), from the history of the last weeks.
MOVED = [
    ("bayesrank.data.letor", "read_scores", "bayesrank.data.scores"),
    ("bayesrank.baselines.ranksvm", "RankSVM", "bayesrank.baselines.svm_estimator"),
    ("bayesrank.learning", "PreparedBatch", "bayesrank.parallel.batching"),
    ("bayesrank.learning", "covariances", "bayesrank.parallel.batching"),
    ("bayesrank.learning", "prepare_batch", "bayesrank.parallel.batching"),
    ("bayesrank.learning", "size_buckets", "bayesrank.data.batch"),
    ("bayesrank.learning", "touched_entities", "bayesrank.data.batch"),
    ("bayesrank.active.loop", "explore", "bayesrank.active.collection"),
    ("bayesrank.threads", "one_blas_thread", "bayesrank.runtime"),
    ("bayesrank.parallel.mapping", "map_queries", "bayesrank.querymap"),
    ("bayesrank.parallel.mapping", "query_map_method", "bayesrank.querymap"),
    *(
        ("bayesrank.active.designs.optimize", name, "bayesrank.active.designs.search")
        for name in ("Proposal", "best_in_pool", "maximize", "mixed")
    ),
    *(
        ("bayesrank.study", name, "bayesrank.experiments.relational")
        for name in (
            "COLLECTIONS",
            "DEFAULT_KNOWN",
            "FULL_STUDY",
            "StudyConfig",
            "load_collection",
            "markdown",
            "model_names",
            "run_all",
            "run_study",
            "table",
            "write",
        )
    ),
    *(
        ("bayesrank.inference.ep", name, f"bayesrank.inference.ep.{new}")
        for name, new in (
            ("EP_ADVICE", "fit"),
            ("MAX_ITER_LIMIT", "settings"),
            ("MIN_DAMPING", "state"),
            ("MIXED_SWITCH", "precision"),
            ("check_settings", "settings"),
            ("check_sites", "host"),
            ("informative_pairs", "sites"),
            ("loop_settings", "host"),
            ("pad_pairs", "host"),
            ("pseudo_data_precision", "evidence"),
            ("site_natural_parameters", "sites"),
            ("site_precision", "sites"),
            ("unpad_posterior", "host"),
            ("validate_problem", "host"),
        )
    ),
    ("bayesrank.inference.ep", "prior_root", "bayesrank.linalg"),
    ("bayesrank.inference.ep", "psd_root", "bayesrank.linalg"),
]


@pytest.mark.parametrize(("old", "name", "new"), MOVED, ids=[f"{o}.{n}" for o, n, _ in MOVED])
def test_an_old_import_path_still_works_with_a_deprecation_warning(old, name, new):
    with pytest.warns(DeprecationWarning, match=rf"{old}\.{name} moved to {new}\.{name}"):
        got = getattr(importlib.import_module(old), name)
    assert got is getattr(importlib.import_module(new), name)


def test_from_import_of_an_old_path_and_unknown_names():
    with pytest.warns(DeprecationWarning, match="bayesrank.data.scores"):
        from bayesrank.data.letor import read_scores
    from bayesrank.data.scores import read_scores as new

    assert read_scores is new
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # an unknown name warns nothing
        with pytest.raises(AttributeError, match="no attribute 'nope'"):
            importlib.import_module("bayesrank.data.letor").nope
        with pytest.raises(ImportError):
            from bayesrank.study import nope  # noqa: F401


# ---------------------------------------------------------------------------------------------
# Label rankings: every input class is refused before anything compiles, naming ``rankings`` and
# the row (index) at fault, or returned unchanged. The reference reads the rows in plain Python.
PROPERTY = settings(max_examples=40, deadline=None, database=None)
LABEL_FAULTS = ("ragged", "duplicate", "out_of_range", "huge", "nan", "inf", "fraction", "bool")


@st.composite
def rankings_with_one_fault(draw):
    """``(rows, fault, row)``: valid permutations of ``0..c-1`` with at most one fault, put in
    row ``row`` (None: valid)."""
    n, c = draw(st.integers(1, 5)), draw(st.integers(2, 5))
    rows = [list(draw(st.permutations(range(c)))) for _ in range(n)]
    fault = draw(st.sampled_from((None, *LABEL_FAULTS)))
    if fault is None:
        return rows, None, None
    i, j = draw(st.integers(0, n - 1)), draw(st.integers(0, c - 1))
    if fault == "ragged":
        if n == 1:
            rows.append(list(range(c)))
            i = 1
        i = max(i, 1)  # row 0 sets the length
        rows[i] = rows[i][:-1] if draw(st.booleans()) else [*rows[i], c]
    elif fault == "duplicate":
        rows[i][j] = rows[i][(j + 1) % c]
    else:
        rows[i][j] = {
            "out_of_range": draw(st.sampled_from((-1, c, c + 7))),
            "huge": 1e20,
            "nan": math.nan,
            "inf": -math.inf,
            "fraction": 0.5,
            "bool": rows[i][j] == 1,
        }[fault]
    return rows, fault, i


def _reference_fault(rows):
    """The first row at fault by the test's own reading, or None."""
    c = len(rows[0])
    for i, row in enumerate(rows):
        if len(row) != c:
            return i
    for i, row in enumerate(rows):
        if any(isinstance(v, bool) for v in row) or sorted(row) != list(range(c)):
            return i
    return None


@PROPERTY
@given(rankings_with_one_fault())
def test_label_rankings_are_refused_naming_the_row_or_kept(case):
    rows, fault, row = case
    assert _reference_fault(rows) == row  # the generator and the reference agree
    X = np.zeros((len(rows), 1))
    if row is None:
        np.testing.assert_array_equal(check_orders(rows), np.array(rows))
        return
    for fit in (RPC().fit, ConstraintClassification().fit, GPLabelRanker().fit):
        with pytest.raises(ValueError, match=r"^rankings") as info:
            fit(X, rows)
        assert f"rankings[{row}" in str(info.value), (fault, str(info.value))


@pytest.mark.parametrize(
    ("rows", "message"),
    [
        (
            [[0, 1, 2], [1, 0], [2, 1, 0]],
            r"rankings\[1\] has length 2 but rankings\[0\] has length 3",
        ),
        ([[0, 1], [1, True]], r"rankings\[1, 1\] = True is a bool"),
        ([[0, 1], [1, 1e20]], r"rankings\[1, 1\] = 100000000000000000000 is not a label"),
        ([[0, 1], [1, -1]], r"rankings\[1, 1\] = -1 is not a label"),
        ([[0, 1], [1, 1]], r"rankings\[1\] = \[1, 1\] is not a permutation"),
    ],
)
def test_label_ranking_cases_of_issue_49(rows, message):
    with pytest.raises(ValueError, match=message):
        RPC().fit(np.zeros((len(rows), 1)), rows)


def test_orders_to_positions_refuses_what_is_not_a_permutation():
    with pytest.raises(ValueError, match=r"orders\[0\] = \[0, 0\] is not a permutation"):
        orders_to_positions([[0, 0]])
    with pytest.raises(ValueError, match=r"orders\[1\] has length 1"):
        orders_to_positions([[0, 1], [1]])


# ---------------------------------------------------------------------------------------------
# The CLI's files: every file `fit` and `predict` write is read back with the library's reader
# (where it has one) and with a plain parser (csv, json, float()); floats round-trip exactly.
import csv  # noqa: E402
import io  # noqa: E402
import json  # noqa: E402

from bayesrank.cli import main  # noqa: E402
from bayesrank.cli.model import csv_text, exact  # noqa: E402
from bayesrank.data.scores import read_scores  # noqa: E402

FINITE = st.floats(allow_nan=False, allow_infinity=False)


@PROPERTY
@given(st.lists(FINITE, min_size=1, max_size=8))
def test_a_letor_score_file_round_trips_every_finite_float(tmp_path_factory, values):
    """Subnormals, -0.0, 1e300 and integers-as-floats included: the LETOR prediction file's
    lines as `predict` writes them read back bit for bit by read_scores and by float()."""
    path = tmp_path_factory.mktemp("scores") / "s.txt"
    path.write_text("".join(exact(v) + "\n" for v in np.asarray(values)))  # np.float64s
    got = read_scores(path)
    assert got.tobytes() == np.asarray(values, np.float64).tobytes()
    assert [float(line) for line in path.read_text().splitlines()] == values


@PROPERTY
@given(
    st.lists(
        st.tuples(st.text(min_size=1, max_size=6), st.integers(0, 99), FINITE),
        min_size=1,
        max_size=6,
    )
)
def test_a_csv_file_of_the_cli_round_trips_ids_and_floats(rows):
    """qids and document ids with commas, quotes or newlines stay one field; floats (NumPy's
    included) come back exactly from csv + float()."""
    text = csv_text(["qid", "entity", "score"], [[q, i, np.float64(v)] for q, i, v in rows])
    back = list(csv.reader(io.StringIO(text, newline="")))
    assert back[0] == ["qid", "entity", "score"]
    assert [(q, int(i), float(v)) for q, i, v in back[1:]] == rows


def _study_folder(tmp_path):
    from bayesrank.data.study import StudyQuery, write_study_dir

    rng = np.random.default_rng(1)
    queries = []
    for qid in ("q0", "q,1"):  # a comma in a qid
        X = rng.uniform(size=(4, 2))
        grades = np.array([0.0, 1.0, 2.0, 1.0])
        pairs = np.array([(i, j) for i in range(4) for j in range(4) if grades[i] > grades[j]])
        queries.append(StudyQuery(qid, X, pairs, grades=grades))
    return write_study_dir(tmp_path / "study", queries)


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["study", "letor"])
def test_every_file_of_fit_and_predict_reads_back(tmp_path, kind):
    """fit's collection.json and query-k.npz, predict's --scores and --pairs, on a study folder
    (the `np.float64(...)` scores of issue 49) and on a LETOR file."""
    from bayesrank.cli.model import read_collection
    from bayesrank.io import load

    if kind == "study":
        data = _study_folder(tmp_path)
    else:
        data = tmp_path / "tiny.txt"
        lines = [f"{g} qid:{q} 1:{0.25 * d} 2:{g} #docid = d{q}{d}" for q in (1, 2)
                 for d, g in enumerate((0, 1, 2, 1))]  # fmt: skip
        data.write_text("\n".join(lines) + "\n")
    model, scores, pairs = tmp_path / "model", tmp_path / "s.csv", tmp_path / "p.csv"
    assert main(["fit", str(data), "--out", str(model), "--fixed", "--quiet"]) == 0
    assert main(["predict", str(model), "--scores", str(scores), "--pairs", str(pairs)]) == 0
    # collection.json: the library's reader and json
    document = read_collection(model)
    assert document == json.loads((model / "collection.json").read_text())
    means = {}
    for q in document["queries"]:  # query-k.npz: bayesrank.io and numpy
        means[q["qid"]] = np.asarray(load(model / q["file"]).mean)
        with np.load(model / q["file"]) as archive:
            assert len(archive.files) > 0
    text = scores.read_text()
    if kind == "letor":
        got = read_scores(scores, n_expected=8)
        plain = np.array([float(line) for line in text.splitlines()])
        for q in document["queries"]:
            assert got[q["rows"]].tobytes() == means[q["qid"]].tobytes()
        assert plain.tobytes() == got.tobytes()
    else:
        rows = list(csv.DictReader(io.StringIO(text, newline="")))
        assert sorted(r["qid"] for r in rows) == ["q,1"] * 4 + ["q0"] * 4
        for qid, mean in means.items():
            back = [float(r["score"]) for r in rows if r["qid"] == qid]
            assert np.array(back).tobytes() == mean.tobytes()
    rows = list(csv.DictReader(io.StringIO(pairs.read_text(), newline="")))
    assert len(rows) == 2 * 6
    for r in rows:
        i, j = int(r["i"]), int(r["j"])
        assert means[r["qid"]][i] >= means[r["qid"]][j]
        numbers = [float(r[k]) for k in ("prob", "delta_mean", "delta_var", "prob_05", "prob_50",
                                               "prob_95")]
        assert all(math.isfinite(x) for x in numbers) and 0 <= numbers[0] <= 1


# ---------------------------------------------------------------------------------------------
# PRank at every feature scale: the grades, weights and thresholds of exact rational arithmetic
# (Crammer & Singer's Figure 2 with Fractions), or a ValueError when, by that same exact run, a
# score or product left the float range. NaN and inf features are refused naming the entry.
from fractions import Fraction  # noqa: E402

from bayesrank.baselines import PRank  # noqa: E402


def _exact_prank(X, y, n_grades, n_epochs):
    """``(w, b, grades, left)``: PRank in rationals; ``left``: a score, weight or product of the
    run was beyond float64's largest number, or a nonzero product below its smallest normal."""
    info = np.finfo(np.float64)
    big, tiny = Fraction(float(info.max)), Fraction(float(info.tiny))
    Xf = [[Fraction(float(v)) for v in row] for row in X]
    w, b = [Fraction(0)] * len(Xf[0]), [Fraction(0)] * (n_grades - 1)
    left = False

    def rank(s):
        return next((r for r in range(n_grades - 1) if s - b[r] < 0), n_grades - 1)

    for _ in range(n_epochs):
        for x, g in zip(Xf, y, strict=True):
            products = [wk * xk for wk, xk in zip(w, x, strict=True)]
            s = sum(products, Fraction(0))
            left |= abs(s) > big or any(abs(p) > big or 0 < abs(p) < tiny for p in products)
            if rank(s) != g:
                yr = [-1 if g <= r else 1 for r in range(n_grades - 1)]
                tau = [yr[r] if (s - b[r]) * yr[r] <= 0 else 0 for r in range(n_grades - 1)]
                w = [wk + sum(tau) * xk for wk, xk in zip(w, x, strict=True)]
                b = [br - t for br, t in zip(b, tau, strict=True)]
                left |= any(abs(wk) > big for wk in w)
    return w, b, [rank(sum((wk * xk for wk, xk in zip(w, x, strict=True)), Fraction(0)))
                  for x in Xf], left  # fmt: skip


@settings(max_examples=30, deadline=None, database=None)
@given(
    st.lists(st.tuples(st.integers(-3, 3), st.integers(-3, 3)), min_size=4, max_size=4),
    st.permutations([0, 1, 2, 1]),
    st.one_of(  # (scale, whether it is a power of two: then float arithmetic is exact)
        st.integers(-1074, 1023).map(lambda k: (math.ldexp(1.0, k), True)),
        st.integers(-300, 300).map(lambda k: (10.0**k, k == 0)),
    ),
)
def test_prank_at_any_feature_scale_is_exact_or_refused(rows, grades, scaled):
    scale, power_of_two = scaled
    with np.errstate(over="ignore"):
        X = np.array(rows, np.float64) * scale
    y = np.array(grades)
    if not np.all(np.isfinite(X)):  # the features themselves overflowed: refused, named
        with pytest.raises(ValueError, match=r"X\[\d, \d\] = -?inf is not finite"):
            PRank(n_epochs=2).fit(X, y)
        return
    w, b, g, left = _exact_prank(X, y, 3, 2)
    try:
        model = PRank(n_epochs=2).fit(X, y)
        got = model.predict_grade(X)
    except ValueError as err:
        assert "left float64's range" in str(err) or "is subnormal in float64" in str(err)
        assert left, "refused although the exact run stayed in range"
        return
    if power_of_two:
        assert not left
        assert model.coef_.tolist() == [float(v) for v in w]
        assert model.thresholds_.tolist() == [float(v) for v in b]
        assert got.tolist() == g
    assert np.all(np.isfinite(model.predict(X)))


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_prank_refuses_non_finite_features_naming_the_entry(bad):
    X = np.ones((4, 2))
    X[2, 1] = bad
    with pytest.raises(ValueError, match=r"X\[2, 1\] = (nan|inf|-inf) is not finite"):
        PRank().fit(X, np.array([0, 1, 2, 1]))


def test_prank_features_scaled_by_1e200_are_refused_not_wrong():
    """Issue 49's case: ±inf scores and wrong grades, without a word."""
    X = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0], [2.0, 0.5]]) * 1e200
    with pytest.raises(ValueError, match=r"score x \. w of X\[2\] at step 2 left float64's"):
        PRank(n_epochs=3).fit(X, np.array([0, 1, 2, 1]))
    model = PRank(n_epochs=3).fit(X / 1e50, np.array([0, 1, 2, 1]))  # coef_ ~ 1e150
    with pytest.raises(ValueError, match=r"score X\[0\] \. coef_ = -inf left float64's range"):
        model.predict(X)


# ---------------------------------------------------------------------------------------------
# Saving (issue 49): save(problem, path) raised TypeError; the contract's is a ValueError.
@pytest.mark.parametrize("kind", ["problem", "dict", "None", "str"])
def test_save_names_what_it_takes_when_given_something_else(tmp_path, kind):
    from bayesrank import PreferenceProblem, save

    X = np.random.default_rng(0).normal(size=(6, 2))
    wrong = {"problem": PreferenceProblem.create([[0, 1]], X=X), "dict": {"mean": X[:, 0]},
             "None": None, "str": "posterior"}[kind]  # fmt: skip
    with pytest.raises(ValueError, match=r"save expects a bayesrank\.model\.Posterior"):
        save(wrong, tmp_path / "x.npz")
    assert list(tmp_path.iterdir()) == []


# ---------------------------------------------------------------------------------------------
# Label rankers at extreme scales (issue 49): RPC on X * 1e200 and ConstraintClassification at
# C = 1e40 gave all-zero weights (a constant order) with only converged_ = False. The test's
# reading: C * max|X|^2 beyond float64's range (1e400, 1e40 * 1.7) leaves Newton no finite step,
# so a fit there must be flagged AND warned; a converged fit warns nothing.
def _label_data():
    rng = np.random.default_rng(0)
    return rng.normal(size=(6, 2)), np.array([rng.permutation(3) for _ in range(6)])


@pytest.mark.slow  # compiles RPC's and ConstraintClassification's Newton solves (~6 s)
@pytest.mark.skipif(not __import__("jax").config.jax_enable_x64, reason="float64 scales")
@pytest.mark.parametrize(
    ("make", "scale", "hopeless"),
    [(RPC, 1.0, False), (RPC, 1e200, True), (lambda: ConstraintClassification(C=1e40), 1.0, True),
     (ConstraintClassification, 1.0, False)],
    ids=["rpc", "rpc-1e200", "cc-C1e40", "cc"],
)  # fmt: skip
def test_a_label_ranker_that_cannot_converge_warns_naming_the_scale(make, scale, hopeless):
    from bayesrank.diagnostics import ConvergenceWarning

    X, R = _label_data()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model = make().fit(X * scale, R)
    flagged = not np.all(model.converged_)
    warned = [w for w in caught if issubclass(w.category, ConvergenceWarning)]
    assert flagged == bool(warned), (flagged, [str(w.message) for w in caught])
    if hopeless:
        assert warned and "max |X|" in str(warned[0].message) and "C = " in str(warned[0].message)


@pytest.mark.parametrize(
    "huge", [1e20, 2**63, np.uint64(2**64 - 1), 2**16, 1e12], ids=str
)
def test_prank_refuses_a_grade_too_large_naming_y_and_the_index(huge):
    """Issue 49: ``y[3] = 1e20`` wrapped to -2**63 in the int64 cast and PRank fitted 3 grades;
    a grade above 65535 (its thresholds, one per level) is refused before any compilation."""
    y = np.array([0, 1, 2, 0, 0, 1], dtype=np.uint64 if isinstance(huge, np.uint64) else float)
    y[3] = huge
    with pytest.raises(ValueError, match=r"y\[3\] = \S+ is too large: above 65535"):
        PRank().fit(np.eye(6, 2), y)


#: y classes: whole int and whole float grades, fraction, negative, NaN, inf, huge (1e20, 2**63,
#: one above the largest grade)
PRANK_Y = st.one_of(
    st.integers(0, 2),
    st.integers(0, 2).map(float),
    st.floats(0.1, 1.9).filter(lambda v: v != int(v)),
    st.sampled_from([-1, -1e20, math.nan, math.inf, 1e20, float(2**63), 2**16]),
)


@settings(max_examples=30, deadline=None, database=None)
@given(st.lists(st.tuples(st.integers(0, 5), PRANK_Y), max_size=2))
def test_prank_grades_are_refused_naming_y_or_fitted_as_given(changes):
    """The test's own reading: a grade is a whole number in [0, 65535]; the rows keep grades
    0..2 (one compiled shape) unless a change puts a bad value there, then ``y[i]`` is named."""
    y = [0.0, 1.0, 2.0, 2.0, 0.0, 1.0]
    for i, v in changes:
        y[i] = v
    bad = [i for i, v in enumerate(y) if not (math.isfinite(v) and v == int(v) and 0 <= v < 2**16)]
    X = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0], [2.0, 0.5], [0.5, 2.0], [1.0, -1.0]])
    if bad:
        with pytest.raises(ValueError, match=r"y\[(\d+)\]") as error:
            PRank().fit(X, y)
        named = int(str(error.value).split("y[")[1].split("]")[0])
        assert named in bad
        return
    model = PRank().fit(X, y)
    assert model.n_grades_ == int(max(y)) + 1
    assert set(model.predict_grade(X).tolist()) <= set(range(model.n_grades_))
