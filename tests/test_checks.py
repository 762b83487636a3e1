"""Tests of bayesrank.data.checks: what each validator accepts, and that every rejection names the
argument, the index and the value at fault.

References are independent of the module: pure-Python loops over the rows for pairs, Counter for
their duplicates and contradictions, ``numpy.linalg.eigvalsh`` for positive semi-definiteness.
"""

import ast
import re
from collections import Counter
from pathlib import Path

import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import bayesrank
from bayesrank.data import checks as C
from bayesrank.data import graphs, pairs
from bayesrank.data.problem import PreferenceProblem


def raises(message: str):
    """``pytest.raises(ValueError)`` matching ``message`` literally (no regex escaping by hand)."""
    return pytest.raises(ValueError, match=re.escape(message))


# --- the module's place -----------------------------------------------------------------------


def test_checks_is_layer_zero():
    """The checks import NumPy, the standard library and each other only (DESIGN: layer 0)."""
    imported = set()
    for path in Path(C.__file__).parent.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                imported |= {alias.name.split(".")[0] for alias in node.names}
            elif isinstance(node, ast.ImportFrom):
                assert node.level in (0, 1), f"{path.name}: import from outside the checks"
                if node.level == 0:
                    imported.add(node.module.split(".")[0])
    assert imported <= {"__future__", "operator", "collections", "typing", "numpy"}


def test_public_names_are_the_same_functions():
    assert bayesrank.validate_pairs is pairs.validate_pairs is C.check_pairs
    assert graphs.validate_adjacency is C.check_adjacency
    assert pairs.PairSummary is C.PairSummary


# --- options ----------------------------------------------------------------------------------


@pytest.mark.parametrize("value", [3, np.int32(3), np.int64(3), np.array(3), jnp.array(3)])
def test_check_int_accepts_integers(value):
    out = C.check_int(value, "k", low=1)
    assert out == 3 and type(out) is int


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (True, "n_rounds must be a positive integer, got True (bool)"),
        (np.True_, "n_rounds must be a positive integer, got True (bool"),  # bool_ in NumPy 1
        (2.5, "n_rounds must be a positive integer, got 2.5 (float)"),
        (2.0, "n_rounds must be a positive integer, got 2.0 (float)"),
        (np.float64(2.0), "n_rounds must be a positive integer, got 2.0 (float64)"),
        ("3", "n_rounds must be a positive integer, got '3' (str)"),
        (None, "n_rounds must be a positive integer, got None (NoneType)"),
        (0, "n_rounds must be a positive integer, got 0"),
    ],
)
def test_check_int_rejects(value, message):
    with raises(message):
        C.check_int(value, "n_rounds", low=1)


def test_check_int_bounds_and_none():
    assert C.check_int(None, "n_features", low=1, allow_none=True) is None
    assert C.check_int(0, "size", low=0) == 0
    assert C.check_int(10, "depth", low=1, high=10) == 10
    with raises("size must be a non-negative integer, got -1"):
        C.check_int(-1, "size", low=0)
    with raises("depth must be an integer in [1, 10], got 11"):
        C.check_int(11, "depth", low=1, high=10)
    with raises("m must be an integer >= 2, got 1"):
        C.check_int(1, "m", low=2)
    with raises("m must be an integer <= 2, got 3"):
        C.check_int(3, "m", high=2)
    with raises("n_features must be a positive integer or None, got 1.5 (float)"):
        C.check_int(1.5, "n_features", low=1, allow_none=True)


@pytest.mark.parametrize(
    "value", [0.5, 1, np.float32(0.5), np.int64(1), np.array(0.5), jnp.array(0.5)]
)
def test_check_float_accepts_real_numbers(value):
    out = C.check_float(value, "damping", 0, 1, low_open=True)
    assert out == float(value) and type(out) is float


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (0.0, "damping must be in (0, 1], got 0.0"),  # open end
        (1.5, "damping must be in (0, 1], got 1.5"),
        (np.nan, "damping must be a finite number in (0, 1], got nan"),
        (True, "damping must be a finite number in (0, 1], got True (bool)"),
        (0.5 + 0j, "damping must be a finite number in (0, 1], got (0.5+0j) (complex)"),
        ("0.5", "damping must be a finite number in (0, 1], got '0.5' (str)"),
        (np.array([0.5]), "damping must be a finite number in (0, 1], got array([0.5]) (ndarray)"),
        (None, "damping must be a finite number in (0, 1], got None (NoneType)"),
    ],
)
def test_check_float_rejects(value, message):
    with raises(message):
        C.check_float(value, "damping", 0, 1, low_open=True)


def test_check_float_infinity_nan_and_bounds():
    assert C.check_float(1.0, "damping", 0, 1, low_open=True) == 1.0  # closed end
    with raises("threshold must be in [0, 1), got 1.0"):
        C.check_float(1.0, "threshold", 0, 1, high_open=True)
    with raises("C must be a finite number > 0, got inf"):
        C.check_float(np.inf, "C", 0, low_open=True)
    with raises("C must be > 0, got -inf"):
        C.check_float(-np.inf, "C", 0, low_open=True, allow_inf=True)
    assert C.check_float(np.inf, "C", 0, low_open=True, allow_inf=True) == np.inf
    assert np.isnan(C.check_float(np.nan, "tol", 0, allow_nan=True))
    with raises("x must be a finite number, got -inf"):
        C.check_float(-np.inf, "x")
    with raises("x must be <= 0, got 1.0"):
        C.check_float(1.0, "x", high=0)
    assert C.check_float(None, "temperature", 0, allow_none=True) is None


def test_check_bool():
    assert C.check_bool(True, "normalize") is True
    assert C.check_bool(np.False_, "normalize") is False
    for value, shown in [(1, "1 (int)"), ("false", "'false' (str)"), (None, "None (NoneType)")]:
        with raises(f"normalize must be True or False, got {shown}"):
            C.check_bool(value, "normalize")


def test_check_choice():
    assert C.check_choice("mixed", "precision", ("full", "mixed")) == "mixed"
    out = C.check_choice(np.str_("full"), "precision", ("full", "mixed"))
    assert out == "full" and type(out) is str
    assert C.check_choice(np.int64(2), "stream", (1, 2, 3)) == 2
    with raises("precision must be 'full' or 'mixed', got 'half'"):
        C.check_choice("half", "precision", ("full", "mixed"))
    with raises("stream must be one of 1, 2 or 3, got 3.0"):
        C.check_choice(3.0, "stream", (1, 2, 3))
    with raises("stream must be one of 1, 2 or 3, got True"):
        C.check_choice(True, "stream", (1, 2, 3))
    with raises("method must be 'vmap', got ['vmap']"):
        C.check_choice(["vmap"], "method", ("vmap",))


# --- generic matrices, ids, adjacency ---------------------------------------------------------


def test_check_matrix_returns_a_float64_copy():
    M = np.array([[1, 0], [2, 3]])
    out = C.check_matrix(M, "B", nonnegative=True)
    assert out.dtype == np.float64
    out[0, 0] = 9
    assert M[0, 0] == 1
    np.testing.assert_array_equal(C.check_matrix(np.eye(2, dtype=bool)), np.eye(2))


@pytest.mark.parametrize(
    ("M", "kwargs", "message"),
    [
        (np.eye(2) + 0j, {}, "A must be a real numeric array, got dtype complex128"),
        (np.array([["1", "2"]]), {}, "A must be a real numeric array, got dtype <U1"),
        (np.array([None, 1.0]), {}, "A must be a real numeric array, got dtype object"),
        ([[0.0, 1.0], [2.0]], {}, "A must be a real numeric array: setting an array element"),
        (np.zeros(3), {}, "A must be 2-D, got shape (3,)"),
        (np.zeros((2, 3)), {"square": True}, "A must be square (n, n), got shape (2, 3)"),
        (np.array([[0.0, np.inf], [0.0, 0.0]]), {}, "A[0, 1] = inf is not finite"),
        (np.array([[0.0, 0.0], [-2.0, 0.0]]), {"nonnegative": True}, "A[1, 0] = -2.0 is negative"),
    ],
)
def test_check_matrix_rejects(M, kwargs, message):
    with raises(message):
        C.check_matrix(M, "A", **kwargs)


def test_check_distinct():
    assert C.check_distinct(["a", 1, "1"]) == {"a": 0, 1: 1, "1": 2}
    with raises("nodes[2] = 1.0 repeats nodes[1]"):
        C.check_distinct(["a", 1, 1.0])
    with raises("movie_ids[1] = [2] is not hashable"):
        C.check_distinct([1, [2]], "movie_ids")


def test_check_adjacency_canonical_form():
    W = np.array([[3, 1, 0], [1, 0, 2], [0, 2, 0]])  # integer weights, a self-loop
    out = C.check_adjacency(W)
    np.testing.assert_array_equal(out, [[0, 1, 0], [1, 0, 2], [0, 2, 0]])
    assert out.dtype == np.float64
    assert C.check_adjacency(np.zeros((0, 0))).shape == (0, 0)


@pytest.mark.parametrize(
    ("W", "message"),
    [
        (np.eye(2) * 1j, "W must be a real numeric array, got dtype complex128"),
        (np.array([[0.0, 1.0], [3.0, 0.0]]), "W is not symmetric: W[0, 1] = 1.0 but W[1, 0] = 3.0"),
        (np.array([[0.0, -1.0], [-1.0, 0.0]]), "W[0, 1] = -1.0 is negative"),
        (np.array([[np.nan, 0.0], [0.0, 0.0]]), "W[0, 0] = nan is not finite"),
    ],
)
def test_check_adjacency_rejects(W, message):
    with raises(message):
        C.check_adjacency(W)


# --- features, grades, query ids --------------------------------------------------------------


def test_check_features_accepts():
    X = np.arange(6.0).reshape(3, 2)
    assert C.check_features(X) is X  # float64 NumPy input is not copied
    out = C.check_features([[1, 2], [3, 4]], n_features=2, n=2)
    assert out.dtype == np.float64
    np.testing.assert_array_equal(out, [[1, 2], [3, 4]])
    assert C.check_features(np.zeros((0, 3))).shape == (0, 3)  # no rows: nothing to score


@pytest.mark.parametrize(
    ("X", "kwargs", "message"),
    [
        (np.zeros((3, 0)), {}, "X has shape (3, 0): it needs at least one feature column"),
        (np.zeros(3), {}, "X must be 2-D (n, d), got shape (3,)"),
        (np.zeros((2, 2)) + 0j, {}, "X must be a real numeric array, got dtype complex128"),
        (np.zeros((3, 2)), {"n": 4}, "X has 3 rows, expected n = 4 (one per entity)"),
        (np.array([[0.0, 1.0], [np.inf, 0.0]]), {}, "X[1, 0] = inf is not finite"),
        (np.zeros((3, 4)), {"n_features": 5}, "X has 4 features; the model was fitted on 5"),
    ],
)
def test_check_features_rejects(X, kwargs, message):
    with raises(message):
        C.check_features(X, **kwargs)


def test_check_grades_and_query_ids():
    np.testing.assert_array_equal(C.check_grades([2, 0, 1]), [2.0, 0.0, 1.0])
    assert C.check_grades([]).shape == (0,)
    with raises("grades must be 1-D, got shape (2, 2)"):
        C.check_grades([[1, 2], [3, 4]])
    with raises("y has shape (2,), expected (3,): one value per row"):
        C.check_grades([1, 2], n=3, name="y")
    with raises("grades[1] = -inf is not finite"):
        C.check_grades([0.0, -np.inf])
    with raises("grades must be a real numeric array, got dtype <U1"):
        C.check_grades(["1", "2"])
    np.testing.assert_array_equal(C.check_query_ids(["a", "a", "b"], 3), ["a", "a", "b"])
    with raises("qid has shape (2,), expected (3,): one id per row"):
        C.check_query_ids([1, 1], 3)


def test_check_ranking_data():
    X, y, qid = C.check_ranking_data(np.ones((3, 2)), [0, 1, 2], [7, 7, 8])
    assert X.dtype == y.dtype == np.float64 and qid.tolist() == [7, 7, 8]
    with raises("X has no rows"):
        C.check_ranking_data(np.ones((0, 2)), [], [])
    with raises("y[1] = nan is not finite"):
        C.check_ranking_data(np.ones((3, 2)), [0, np.nan, 1], [1, 1, 1])


# --- preference pairs -------------------------------------------------------------------------


def reference_summary(rows, n):
    """The counts of a valid pair list, by Counter over tuples."""
    rows = [tuple(r) for r in rows]
    counts = Counter(rows)
    both = {frozenset(r) for r in counts if (r[1], r[0]) in counts}
    touched = {i for r in rows for i in r}
    return len(rows), len(rows) - len(counts), len(both), len(touched)


@pytest.mark.parametrize("empty", [[], np.empty((0, 2)), np.zeros((0, 2), dtype=np.int32)])
def test_no_pairs_yet_is_a_valid_problem(empty):
    """Active learning starts before the first comparison: ``[]`` and ``(0, 2)`` are accepted."""
    summary = C.check_pairs(empty, 5)
    assert summary.pairs.shape == (0, 2) and summary.pairs.dtype == np.int64
    assert summary[1:] == (0, 0, 0, 0)
    problem = PreferenceProblem.create(empty, X=np.zeros((5, 2)))
    assert problem.n == 5 and problem.pairs.shape == (0, 2)
    assert C.check_index_pairs(empty, 5).shape == (0, 2)


@pytest.mark.parametrize(
    ("n", "message"),
    [
        (2.5, "n must be an integer, got 2.5 (float)"),
        (True, "n must be an integer, got True (bool)"),
        ("3", "n must be an integer, got '3' (str)"),
        (-1, "n=-1 must be non-negative"),
    ],
)
def test_check_pairs_rejects_bad_n(n, message):
    with raises(message):
        C.check_pairs([[0, 1]], n)


def test_check_pairs_accepts_numpy_n_and_whole_floats():
    summary = C.check_pairs(np.array([[0.0, 2.0], [2.0, 0.0]]), np.int64(3))
    np.testing.assert_array_equal(summary.pairs, [[0, 2], [2, 0]])
    assert summary.pairs.dtype == np.int64
    assert summary[1:] == (2, 0, 1, 2)


@pytest.mark.parametrize(
    ("P", "message"),
    [
        (np.array([[0, 1]]) + 0j, "pairs must be integer-valued, got dtype complex128"),
        (np.array([[0, 1]], dtype=object), "pairs must be integer-valued, got dtype object"),
        (np.array([[0.0, 1.0], [1.0, 1.5]]), "pairs row 1: value 1.5 is not an integer"),
        (np.array([[0.0, np.inf]]), "pairs row 0: value inf is not an integer"),
        (np.array([[0.0, 1e30]]), "pairs row 0: index 1e+30 is out of range for n=4 entities"),
        (np.array([[0, 1], [3, 12]]), "pairs row 1: index 12 is out of range for n=4 entities"),
        (np.array([[0, 1], [2, 0], [2, 2]]), "pairs row 2 is a self-pair (2, 2)"),
        (np.zeros((2, 3), dtype=int), "pairs must have shape (m, 2), got (2, 3)"),
    ],
)
def test_check_pairs_rejects(P, message):
    with raises(message):
        C.check_pairs(P, 4)


def test_check_pair_array_selects_rows_without_n():
    np.testing.assert_array_equal(C.check_pair_array([[5, 9], [9, 9]]), [[5, 9], [9, 9]])
    with raises("known row 0: value 0.5 is not an integer"):
        C.check_pair_array([[0.5, 1.0]], "known")


pair_arrays = st.integers(0, 6).flatmap(
    lambda n: st.tuples(
        st.just(n),
        hnp.arrays(
            np.int64, st.tuples(st.integers(0, 8), st.just(2)), elements=st.integers(-2, n + 2)
        ),
    )
)


@settings(max_examples=50, deadline=None)
@given(pair_arrays)
def test_check_pairs_accepts_unchanged_or_names_the_first_bad_row(case):
    n, P = case
    rows = P.tolist()
    out_of_range = [r for r, row in enumerate(rows) if any(not 0 <= i < n for i in row)]
    self_pairs = [r for r, row in enumerate(rows) if row[0] == row[1]]
    if out_of_range:
        r = out_of_range[0]
        bad = next(i for i in rows[r] if not 0 <= i < n)
        with raises(f"pairs row {r}: index {bad} is out of range for n={n} entities"):
            C.check_pairs(P, n)
    elif self_pairs:
        r = self_pairs[0]
        with raises(f"pairs row {r} is a self-pair ({rows[r][0]}, {rows[r][0]})"):
            C.check_pairs(P, n)
    else:
        summary = C.check_pairs(P, n)
        np.testing.assert_array_equal(summary.pairs, P)
        assert summary[1:] == reference_summary(rows, n)


@settings(max_examples=50, deadline=None)
@given(pair_arrays)
def test_check_index_pairs_allows_self_pairs_and_names_the_element(case):
    n, P = case
    bad = [(r, c) for r, row in enumerate(P.tolist()) for c, i in enumerate(row) if not 0 <= i < n]
    if bad:
        r, c = bad[0]
        with raises(f"pairs[{r}, {c}] = {P[r, c]} is not an entity index (n = {n})"):
            C.check_index_pairs(P, n)
    else:
        out = C.check_index_pairs(P, n)
        assert out.dtype == np.int64
        np.testing.assert_array_equal(out, P)


def test_check_index_pairs():
    out = C.check_index_pairs(np.array([[1.0, 1.0], [0.0, 2.0], [0.0, 2.0]]), 3)
    np.testing.assert_array_equal(out, [[1, 1], [0, 2], [0, 2]])  # self-pair and repeat: fine
    with raises("pairs[3, 1] = 12 is not an entity index (n = 10): out of range [0, 10)"):
        C.check_index_pairs([[0, 1], [1, 2], [2, 3], [3, 12]], 10)
    with raises("pairs[0, 0] = 0.5 is not an integer"):
        C.check_index_pairs([[0.5, 1]], 3)
    with raises("pairs must be (p, 2), got shape (2,)"):
        C.check_index_pairs([0, 1], 3)
    with raises("pairs must be integer-valued, got dtype bool"):
        C.check_index_pairs(np.ones((1, 2), dtype=bool), 3)
    with raises("n must be a non-negative integer, got 2.5 (float)"):
        C.check_index_pairs([[0, 1]], 2.5)


def test_check_pair_mask():
    np.testing.assert_array_equal(C.check_pair_mask(None, (2, 3)), np.ones((2, 3), dtype=bool))
    mask = np.array([True, False])
    assert C.check_pair_mask(mask, (2,)) is mask
    with raises("pair_mask must be a bool array of shape (2,), got dtype int64 and shape (2,)"):
        C.check_pair_mask(np.array([1, 0]), (2,))
    with raises("pair_mask must be a bool array of shape (2,), got dtype bool and shape (3,)"):
        C.check_pair_mask(np.ones(3, dtype=bool), (2,))


# --- covariances ------------------------------------------------------------------------------


def test_check_covariance_accepts():
    rng = np.random.default_rng(0)
    A = rng.normal(size=(5, 3))
    K = A @ A.T  # rank 3: PSD, singular
    assert C.check_covariance(K) is not None
    out = C.check_covariance(jnp.asarray(K, dtype=jnp.float32))
    assert isinstance(out, np.ndarray) and out.dtype == np.float32
    np.testing.assert_array_equal(C.check_covariance(np.array([1.0, 0.0, 2.5])), [1.0, 0.0, 2.5])
    assert C.check_covariance(np.stack([K, 2 * K]), batched=True).shape == (2, 5, 5)
    assert C.check_covariance(np.ones((2, 3)), batched=True).shape == (2, 3)


def test_check_covariance_tolerates_rounding():
    """A perfectly correlated pair in float32 and a zero-variance entity with rounding-level
    covariances are PSD up to rounding, so they pass."""
    v = np.array([1.0, 1 / 3, 7.0], dtype=np.float32)
    assert C.check_covariance(np.outer(v, v)).dtype == np.float32  # rank one
    K = np.diag([2.0, 0.0, 1.0])
    K[0, 1] = K[1, 0] = 1e-9  # |K_01| <= sqrt(eps) * max(1, max|K|)
    C.check_covariance(K)


@pytest.mark.parametrize(
    ("K", "message"),
    [
        (np.eye(2) + 0j, "K must be a real floating array, got dtype complex128"),
        (np.eye(2, dtype=int), "K must be a real floating array, got dtype int64"),
        (np.eye(2, dtype=bool), "K must be a real floating array, got dtype bool"),
        (np.eye(2).astype(object), "K must be a real floating array, got dtype object"),
        (np.zeros((2, 3)), "K must be square (n, n) or a diagonal (n,), got shape (2, 3)"),
        (np.zeros((1, 2, 2)), "K must be square (n, n) or a diagonal (n,), got shape (1, 2, 2)"),
        (np.zeros((0, 0)), "K has shape (0, 0): a covariance needs at least one entity"),
        (np.zeros(0), "K has shape (0,): a covariance needs at least one entity"),
        (np.array([[1.0, 0.0], [0.0, np.nan]]), "K[1, 1] = nan is not finite"),
        (np.array([[1.0, np.inf], [0.0, 1.0]]), "K[0, 1] = inf is not finite"),
        (np.array([1.0, -np.inf]), "K[1] = -inf is not finite"),
        (np.array([1.0, 2.0, -1.0]), "K[2] = -1.0 is negative: a variance must be >= 0"),
        (np.diag([1.0, -0.5]), "K[1, 1] = -0.5 is negative: a variance must be >= 0"),
        (
            np.array([[1.0, 0.0, 1.5], [0.0, 1.0, 0.0], [0.5, 0.0, 1.0]]),
            "K is not symmetric: K[0, 2] = 1.5 but K[2, 0] = 0.5",
        ),
        (
            np.array([[1.0, 0.1, 0.0], [0.1, 4.0, 2.5], [0.0, 2.5, 1.0]]),
            "K is not positive semi-definite: K[1, 2] = 2.5 but K[1, 1] * K[2, 2] = 4.0 * 1.0 "
            "< K[1, 2]^2",
        ),
    ],
)
def test_check_covariance_rejects(K, message):
    with raises(message):
        C.check_covariance(K)


def test_check_covariance_batched_names_the_problem():
    K = np.stack([np.eye(3)] * 2)
    K[1, 0, 2] = 0.3
    with raises("K is not symmetric: K[1, 0, 2] = 0.3 but K[1, 2, 0] = 0.0"):
        C.check_covariance(K, batched=True)
    with raises("K[1, 2] = -1.0 is negative"):
        C.check_covariance(np.array([[1.0, 1.0, 1.0], [1.0, 1.0, -1.0]]), batched=True)
    with raises("K has shape (0, 3, 3): a covariance needs at least one problem and one entity"):
        C.check_covariance(np.zeros((0, 3, 3)), batched=True)
    with raises("K must be square (B, n, n) or a diagonal (B, n), got shape (3,)"):
        C.check_covariance(np.ones(3), batched=True)


symmetric_matrices = st.integers(1, 5).flatmap(
    lambda n: hnp.arrays(np.float64, (n, n), elements=st.floats(-3, 3, width=32))
)


@settings(max_examples=50, deadline=None)
@given(symmetric_matrices)
def test_psd_rejection_implies_a_negative_eigenvalue(M):
    """The 2x2-minor check is necessary for PSD: whatever it rejects has a negative eigenvalue, and
    every Gram matrix ``M M^T`` (PSD by construction) passes."""
    K = (M + M.T) / 2
    np.fill_diagonal(K, np.abs(np.diag(K)))
    try:
        C.check_covariance(K)
    except ValueError as err:
        assert "positive semi-definite" in str(err)
        assert np.linalg.eigvalsh(K).min() < 0
    C.check_covariance(M @ M.T)


# --- whole problems ---------------------------------------------------------------------------


def test_check_problem():
    _, P, mask = C.check_problem(np.eye(3), [[0, 1.0], [2, 2]], np.array([True, False]))
    assert P.dtype == np.int64 and mask.tolist() == [True, False]  # a padded self-pair is fine
    with raises("pairs[1] = (2, 2) is a self-pair"):
        C.check_problem(np.eye(3), [[0, 1], [2, 2]])
    with raises("pairs[1, 0] = 3 is not an entity index (n = 3): out of range [0, 3)"):
        C.check_problem(np.eye(3), [[0, 1], [3, 0]], np.array([True, False]))  # padded too
    _, P, mask = C.check_problem(np.ones(3), [])
    assert P.shape == (0, 2) and mask.shape == (0,)


def test_check_problem_batched():
    K = np.stack([np.eye(3)] * 2)
    P = np.array([[[0, 1], [1, 1]], [[2, 0], [1, 2]]])
    with raises("pairs[0, 1] = (1, 1) is a self-pair"):
        C.check_problem(K, P, batched=True)
    mask = np.array([[True, False], [True, True]])
    _, out, _ = C.check_problem(K, P, mask, batched=True)
    np.testing.assert_array_equal(out, P)
    with raises("pairs must be (B, m, 2) with B = K.shape[0], got shape (3, 1, 2)"):
        C.check_problem(K, np.zeros((3, 1, 2), dtype=int), batched=True)
    with raises("pairs[1, 0, 1] = 5 is not an entity index (n = 3)"):
        C.check_problem(K, np.array([[[0, 1]], [[0, 5]]]), batched=True)
    with raises("pair_mask must be a bool array of shape (2, 2)"):
        C.check_problem(K, P, np.ones((2, 3), dtype=bool), batched=True)
