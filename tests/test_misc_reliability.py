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
