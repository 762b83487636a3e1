"""The precision-form engine's public face under careless input (issue 49): a ``ValueError`` that
names the argument and the value or index at fault, or a result equal to the dense Laplace
engine's on the same prior's covariance, built here by hand with NumPy (the test's own reference).

Faces: ``inference.sparse.mode``, ``pair_predictions``, ``sampled_pair_predictions``,
``log_evidence``, ``expected_quadratics``, ``evidence_gradient``, ``learning.sparse_em.
em_variances`` and ``XPGPModel(approximation="sparse")``. Pair lists are judged by the test's
own rule (whole numbers in ``[0, n)``, no self pair for training; self pairs allowed for
prediction). Cheap by construction: one small prior (``n = 6``), pair lists of fixed length (one
compiled program each), refusals before any compilation.
"""

from __future__ import annotations

import functools
import math
import re
from fractions import Fraction

import jax
import numpy as np
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from bayesrank.inference import laplace
from bayesrank.inference import sparse as S
from bayesrank.learning.sparse_em import em_variances

pytestmark = pytest.mark.float32  # dtype-aware: also run with x64 off in CI

FUZZ = settings(
    max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow], database=None
)
X64 = jax.config.jax_enable_x64
DTYPE = np.float64 if X64 else np.float32
#: the sparse engine (CG, Newton to 1e-10) against the dense one (Cholesky, Newton to 1e-12)
ATOL = 1e-7 if X64 else 2e-3
N = 6
TRAIN = np.array([[0, 1], [2, 1], [3, 4], [5, 2], [4, 0]])
VALID_TEST = [[0, 5], [3, 3], [1, 4]]

# Values a user may type for an entity index: the edges of every type.
ENTRY = st.one_of(
    st.integers(-2, N + 1),
    st.integers(0, N - 1).map(float),
    st.floats(allow_nan=True, allow_infinity=True, width=64),
    st.sampled_from([True, False, -0.0, 0.5, 2**31, 2**63, 2**70, -(2**63), None, "1"]),
)
ROW = st.one_of(st.tuples(ENTRY, ENTRY).map(list), st.lists(ENTRY, min_size=1, max_size=3))


@functools.cache
def problem():
    """``(prior, K)``: attributes at rank 2, a regularized Laplacian on a graph and an entity
    effect as a ``LatentPrior``, and its covariance ``K = Phi Phi^T + Q^-1 + diag(v)`` by hand."""
    rng = np.random.default_rng(0)
    Phi = 0.7 * rng.normal(size=(N, 2))
    W = np.zeros((N, N))
    for i, j in [(0, 1), (1, 2), (3, 4), (4, 5), (2, 5)]:
        W[i, j] = W[j, i] = 1.0
    v = np.array([0.3, 0.5, 0.2, 0.4, 0.3, 0.6])
    blocks = [S.laplacian_precision(W, beta=1.0, iota=1.5, weight=2.0), S.diagonal_precision(v)]
    L = np.diag(W.sum(1)) - W
    K = Phi @ Phi.T + np.linalg.inv((L + np.eye(N) / 1.5**2) / 2.0) + np.diag(v)
    return S.latent_prior(Phi, blocks), K


@functools.cache
def dense(pairs: tuple):
    """The dense Laplace engine on ``K`` and the (valid) training pairs."""
    return laplace.fit(problem()[1], np.array(pairs, dtype=np.int64).reshape(-1, 2), tol=1e-12)


@functools.cache
def trained():
    """``(prior, fit)`` of ``TRAIN`` (compiles the engine)."""
    prior = problem()[0]
    return prior, S.mode(prior, TRAIN)


def unfitted():
    """``(prior, fit)`` with a ``SparseMode`` of ``TRAIN``'s shapes, all zeros: for the
    refusals, which come before anything is compiled."""
    prior = problem()[0]
    zeros = np.zeros(prior.size), np.zeros(N), np.zeros(len(TRAIN))
    return prior, S.SparseMode(*zeros, np.int32(0), np.False_, np.int32(0))


def _entry_ok(v, self_pairs_too: bool = False) -> bool:
    if isinstance(v, bool) or not isinstance(v, int | float):
        return False
    return (isinstance(v, int) or math.isfinite(v)) and v == int(v) and 0 <= v < N


def _row_ok(row, self_pairs: bool) -> bool:
    """The test's own rule for one row: two whole numbers in ``[0, N)`` (distinct for training)."""
    if not (isinstance(row, list) and len(row) == 2 and all(_entry_ok(v) for v in row)):
        return False
    return self_pairs or int(row[0]) != int(row[1])


def _valid(pairs, self_pairs: bool) -> bool:
    return all(_row_ok(row, self_pairs) for row in pairs)


def _names_a_bad_row(message: str, pairs, name: str, self_pairs: bool) -> None:
    """The message names ``name``; where it names a row (``row 3``, ``name[3, 1]``), that row is
    bad by the test's own rule."""
    assert name in message, message
    found = re.search(rf"row (\d+)|{name}\[(\d+)", message)
    if found:
        row = int(found.group(1) or found.group(2))
        assert not _row_ok(pairs[row], self_pairs), (message, pairs)


# ------------------------------------------------------------------ issue 49, case 2: the cases


@pytest.mark.parametrize(("bad", "value"), [([0, N], N), ([-1, 2], -1), ([N + 3, 1], N + 3)])
def test_mode_refuses_an_entity_that_does_not_exist(bad, value):
    """Before: ``xi[n]`` was read as ``xi[n - 1]`` and the pair dropped from the curvature, a
    wrong posterior without an error."""
    prior, _ = problem()
    pairs = [[0, 1], bad, [3, 4]]
    with pytest.raises(ValueError, match=rf"pairs row 1: index {value} is out of range for n=6"):
        S.mode(prior, pairs)


def test_mode_refuses_a_self_pair():
    """Before: ``(i, i)`` has ``d = 0``: ``log 2`` off the evidence, taken silently."""
    with pytest.raises(ValueError, match=r"pairs row 2 is a self-pair \(3, 3\)"):
        S.mode(problem()[0], [[0, 1], [2, 1], [3, 3]])


@pytest.mark.slow  # compiles the engine and the dense reference
def test_mode_takes_whole_float_pairs_as_the_dense_face_does():
    """Before: ``TypeError`` from JAX's indexing. ``PreferenceProblem.create`` takes whole
    floats; so does ``mode``, with the dense engine's result; a fraction is refused by row."""
    prior, _ = problem()
    got = S.mode(prior, TRAIN.astype(float))
    np.testing.assert_allclose(got.mean, dense(tuple(TRAIN.ravel())).mean, atol=ATOL)
    with pytest.raises(ValueError, match=r"pairs row 1: value 2.5 is not an integer"):
        S.mode(prior, [[0, 1], [2.5, 1]])


def test_mode_refuses_a_z0_of_another_shape_or_not_finite():
    """Before: ``TypeError`` (broadcasting) for the shape; a NaN in ``z0`` gave a NaN mode."""
    prior, _ = problem()
    with pytest.raises(ValueError, match=rf"z0 has shape \(3,\), expected \({prior.size},\)"):
        S.mode(prior, TRAIN, z0=np.zeros(3))
    z0 = np.zeros(prior.size)
    z0[4] = np.nan
    with pytest.raises(ValueError, match=r"z0\[4\] = nan is not finite"):
        S.mode(prior, TRAIN, z0=z0)


def test_a_warm_start_too_far_out_is_refused():
    """Before: ``z0 = 1e300`` gave a NaN mode; ``z0 = 1e7`` (pair differences of 5e6, where
    the probit's curvature is lost to round-off) stopped where it started, reported converged;
    ``1e150`` in ``J``'s null space likewise."""
    prior, _ = problem()
    eps = np.finfo(prior.features.dtype).eps
    with pytest.raises(ValueError, match=r"z0\[\d+\] = 1e\+150 is beyond"):
        S.mode(prior, TRAIN, z0=np.full(prior.size, 1e150))
    big = 0.5 * eps**-0.5  # within |z0|'s bound, its pair differences far beyond eps^-1/4
    with pytest.raises(ValueError, match=r"z0 puts pair \d+ \(\d, \d\) at a difference"):
        S.mode(prior, TRAIN, z0=np.full(prior.size, big))


def test_attributes_whose_variance_overflows_are_refused():
    """Attributes of 1e160 (1e20 in float32): their prior variance overflows the dtype. Before:
    a mode of zeros in one Newton step, reported converged."""
    prior, _ = problem()
    scale = 1e160 if X64 else 1e20
    with pytest.raises(ValueError, match=r"features row \d: the attribute variance .* overflows"):
        S.latent_prior(prior.features * scale, prior.blocks)
    with pytest.raises(ValueError, match=r"features\[0, 0\] = inf is not finite"):
        S.latent_prior(np.full((N, 1), np.inf))


@pytest.mark.parametrize(("bad", "value"), [([0, N], N), ([-1, 2], -1)])
def test_pair_predictions_refuse_an_entity_that_does_not_exist(bad, value):
    """Before: a prediction for an entity that does not exist (clamped to the last one)."""
    prior, fit = unfitted()
    with pytest.raises(ValueError, match=rf"test\[1, \d\] = {value} is not an entity"):
        S.pair_predictions(prior, TRAIN, fit, [[0, 1], bad])
    with pytest.raises(ValueError, match=r"pairs row 1: index"):
        S.pair_predictions(prior, [[0, 1], bad, *TRAIN[2:]], fit, VALID_TEST)
    key = jax.random.key(0)
    with pytest.raises(ValueError, match=r"test\[1, \d\]"):
        S.sampled_pair_predictions(prior, TRAIN, fit, [[0, 1], bad], key, n_samples=4)
    with pytest.raises(ValueError, match=r"pairs row 1: index"):
        S.log_evidence(prior, [[0, 1], bad, *TRAIN[2:]], fit, key)
    for f in (S.evidence_gradient, S.evidence.expected_quadratics):
        with pytest.raises(ValueError, match=r"pairs row 1: index"):
            f(prior, [[0, 1], bad, *TRAIN[2:]], fit, key)


@pytest.mark.parametrize("bad", [[0, N], [-1, 2], [3, 3]])
def test_em_variances_refuses_a_pair_the_engine_cannot_take(bad):
    """Before: EM ran on clamped indices and returned variances learned from other pairs."""
    with pytest.raises(ValueError, match=r"pairs row 1"):
        em_variances(problem()[0], [[0, 1], bad], jax.random.key(0), max_iter=3)


def test_a_fit_of_another_prior_or_other_pairs_is_refused():
    """Before: JAX's broadcasting error, naming no argument."""
    prior, fit = unfitted()
    with pytest.raises(ValueError, match=r"fit.w has shape \(5,\), expected \(2,\)"):
        S.pair_predictions(prior, TRAIN[:2], fit, VALID_TEST)
    with pytest.raises(ValueError, match="fit must be a SparseMode"):
        S.pair_predictions(prior, TRAIN, tuple(fit), VALID_TEST)
    with pytest.raises(ValueError, match="prior must be a LatentPrior"):
        S.mode(problem()[1], TRAIN)


@pytest.mark.parametrize(
    ("call", "option"),
    [
        (lambda p, f, k: S.sampled_pair_predictions(p, TRAIN, f, VALID_TEST, k, n_samples=1),
         "n_samples"),
        (lambda p, f, k: S.sampled_pair_predictions(p, TRAIN, f, VALID_TEST, None), "key"),
        (lambda p, f, k: S.log_evidence(p, TRAIN, f, k, n_probes=1), "n_probes"),
        (lambda p, f, k: S.log_evidence(p, TRAIN, f, k, n_steps=0), "n_steps"),
        (lambda p, f, k: S.evidence_gradient(p, TRAIN, f, k, n_samples=0), "n_samples"),
        (lambda p, f, k: S.evidence_gradient(p, TRAIN, f, k, cg_tol=-1.0), "cg_tol"),
        (lambda p, f, k: S.pair_predictions(p, TRAIN, f, VALID_TEST, cg_tol=1.0), "cg_tol"),
        (lambda p, f, k: em_variances(p, TRAIN, k, n_samples=0), "n_samples"),
        (lambda p, f, k: em_variances(p, TRAIN, k, tol=math.nan), "tol"),
        (lambda p, f, k: em_variances(p, TRAIN, k, max_iter=-1), "max_iter"),
        (lambda p, f, k: em_variances(p, TRAIN, k, learn=[1, 0, 1]), "learn"),
        (lambda p, f, k: em_variances(p, TRAIN, 0), "key"),
        (lambda p, f, k: em_variances(p, TRAIN, k, objective=None), "objective"),
    ],
)  # fmt: skip
def test_an_option_outside_its_domain_is_named(call, option):
    """Before: ``n_samples = 1`` gave a standard error of 0, ``n_probes = 1`` a NaN one,
    ``cg_tol = 1`` a mode of zeros, ``learn = [1, 0, 1]`` was cast, ``tol = nan`` never
    converged, a missing key was a ``TypeError``."""
    prior, fit = unfitted()
    with pytest.raises(ValueError, match=option):
        call(prior, fit, jax.random.key(0))


def test_the_sparse_posterior_names_a_margin_it_cannot_take():
    """Before: ``float(None)``'s ``TypeError``."""
    prior, fit = unfitted()
    posterior = S.SparsePosterior(prior, TRAIN, fit, jax.random.key_data(jax.random.key(0)))
    with pytest.raises(ValueError, match=r"margin must be a finite number >= 0\.0, got None"):
        posterior.predict_outcomes(VALID_TEST, None)
    with pytest.raises(ValueError, match="no tie model"):
        posterior.predict_outcomes(VALID_TEST, 0.5)


# ------------------------------------------------------------ issue 49, case 7c: the model face


@pytest.mark.parametrize("graphs", [0, 2])
def test_the_sparse_face_names_a_missing_or_extra_relation(graphs):
    """Before: "zip() argument 2 is shorter than argument 1". The dense face's message."""
    from bayesrank import PreferenceProblem, XPGPModel
    from bayesrank.kernels import RBF, XPGP, RegularizedLaplacian

    problem_ = PreferenceProblem.create(TRAIN, X=np.eye(N), relations=[np.ones((N, N))] * graphs)
    prior = XPGP(RBF(), (RegularizedLaplacian(),))
    for approximation in ("dense", "sparse"):
        model = XPGPModel(prior, inference="laplace", approximation=approximation)
        with pytest.raises(ValueError, match=rf"^1 relation kernels but {graphs} graphs$"):
            model.fit(problem_)


def test_the_sparse_face_refuses_weighted_pairs():
    """The sparse engine fits strict pairs: a weight is refused, not dropped (as before)."""
    from bayesrank import PreferenceProblem, XPGPModel
    from bayesrank.kernels import RBF, XPGP

    weighted = PreferenceProblem.create(TRAIN, X=np.eye(N), weights=np.full(len(TRAIN), 2.0))
    model = XPGPModel(XPGP(RBF(), ()), inference="laplace", approximation="sparse")
    with pytest.raises(ValueError, match="strict pairs only"):
        model.fit(weighted)


# ------------------------------------------------------------------------- properties


@pytest.mark.slow  # compiles the engine (one program per shape) and the reference
@FUZZ
@given(pairs=st.lists(ROW, min_size=4, max_size=4))
@example(pairs=[[0, 1], [2, 3], [4, 5], [5, N]])  # issue 49: JAX clamped it
@example(pairs=[[0, 1], [2, 3], [4, 5], [-1, 0]])  # issue 49: JAX wrapped it
@example(pairs=[[0, 1], [2, 2], [4, 5], [5, 0]])  # issue 49: a self pair, log 2 off
@example(pairs=[[0.0, 1.0], [2.0, 3.0], [4.0, 5.0], [5.0, 0.0]])  # issue 49: TypeError
@example(pairs=[[0, True], [2, 3], [4, 5], [5, 0]])  # NumPy would read True as 1
def test_training_pairs_are_taken_exactly_or_refused_by_row(pairs):
    """``mode`` and ``em_variances`` (no EM step: its fit is the mode at the prior's variances)
    on four pairs of any entries: refused naming the pairs (and a row that is bad), or the dense
    engine's mode on the same pairs read by the test."""
    prior, _ = problem()
    valid = _valid(pairs, self_pairs=False)
    for run in (
        lambda: S.mode(prior, pairs),
        lambda: em_variances(prior, pairs, jax.random.key(0), max_iter=0).fit,
    ):
        try:
            fit = run()
        except ValueError as error:
            assert not valid, (pairs, str(error))
            _names_a_bad_row(str(error), pairs, "pairs", self_pairs=False)
            continue
        assert valid, pairs
        want = dense(tuple(int(v) for row in pairs for v in row))
        np.testing.assert_allclose(fit.mean, want.mean, atol=ATOL)
        assert bool(fit.converged)


@pytest.mark.slow  # compiles the engine (one program per shape) and the reference
@FUZZ
@given(test=st.lists(ROW, min_size=3, max_size=3))
@example(test=[[0, 1], [2, N], [4, 5]])  # issue 49: a prediction for no entity
@example(test=[[0, 1], [2, -1], [4, 5]])
@example(test=[[0.0, 1.0], [3.0, 3.0], [4.0, 5.0]])  # whole floats, a self pair: P = 1/2
def test_test_pairs_are_predicted_exactly_or_refused_by_element(test):
    """``pair_predictions`` of three pairs of any entries: refused naming ``test`` (and a row
    that is bad), or the dense engine's prediction (a self pair is ``P = 1/2``)."""
    prior, fit = trained()
    valid = _valid(test, self_pairs=True)
    try:
        prob, mean, var = S.pair_predictions(prior, TRAIN, fit, test)
    except ValueError as error:
        assert not valid, (test, str(error))
        _names_a_bad_row(str(error), test, "test", self_pairs=True)
        return
    assert valid, test
    want = dense(tuple(TRAIN.ravel())).predict_pairs(np.array(test, dtype=float).astype(int))
    np.testing.assert_allclose(mean, want.delta_mean, atol=ATOL)
    np.testing.assert_allclose(var, want.delta_var, atol=ATOL)
    np.testing.assert_allclose(prob, want.prob, atol=ATOL)


def _real(v) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool) and not math.isnan(v)


MODE_OPTIONS = {
    "max_iter": lambda v: isinstance(v, int) and not isinstance(v, bool) and 0 <= v < 2**31,
    "tol": lambda v: _real(v) and 0 <= v < math.inf,
    # documented floor: below sqrt(tiny) CG's residual underflows (1e-77 gave NaN in float32)
    "cg_tol": lambda v: _real(v) and math.sqrt(np.finfo(DTYPE).tiny) <= v < 1,
}
OPTION_VALUES = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True, width=64),
    st.sampled_from([0, 50, -1, 2**31, 2**70, 1.5, 2.0, 1e-12, 0.5, 1, True, False, None, "1"]),
)


@pytest.mark.slow  # compiles the engine (one program per shape) and the reference
@FUZZ
@given(option=st.sampled_from(sorted(MODE_OPTIONS)), value=OPTION_VALUES)
@example(option="max_iter", value=-1)  # was run as 0 steps
@example(option="cg_tol", value=1e300)  # was a mode of zeros, reported converged
@example(option="cg_tol", value=-1.0)  # was NaN
@example(option="tol", value=math.nan)  # was never converged
@example(option="cg_tol", value=1e-77)  # NaN in float32: 0 / 0 in CG
def test_mode_options_are_taken_or_named(option, value):
    """``mode``'s ``max_iter`` (0 or 50 among the valid: one program each), ``tol``,
    ``cg_tol``: refused naming the option, or a finite mode; the dense engine's where the
    tolerances are tight and it converged; the start itself at ``max_iter = 0``."""
    prior, _ = problem()
    valid = MODE_OPTIONS[option](value)
    if valid and option == "max_iter" and value not in (0, 50):
        return  # valid, but each value is a program of its own
    try:
        fit = S.mode(prior, TRAIN, **{option: value})
    except ValueError as error:
        assert not valid, (option, value, str(error))
        assert option in str(error), str(error)
        return
    assert valid, (option, value)
    assert np.all(np.isfinite(np.asarray(fit.mean)))
    if option == "max_iter" and value == 0:
        assert not bool(fit.converged) and np.all(np.asarray(fit.mean) == 0)
    tight = (option != "tol" or value <= 1e-8) and (option != "cg_tol" or value <= 1e-6)
    if tight and bool(fit.converged):
        np.testing.assert_allclose(fit.mean, dense(tuple(TRAIN.ravel())).mean, atol=ATOL)


@pytest.mark.slow  # compiles the engine (one program per shape) and the reference
@FUZZ
@given(
    size=st.sampled_from(["right", "short", "long", "scalar"]),
    values=st.lists(
        st.one_of(st.floats(-1e3, 1e3), st.sampled_from([math.nan, math.inf, -math.inf])),
        min_size=1,
        max_size=3,
    ),
)
def test_a_warm_start_is_taken_or_named(size, values):
    """``z0`` of any length and entries: refused naming ``z0`` (the shape, the entry, or the pair
    it puts too far apart), or the same mode as from 0 (the Laplace objective is concave). The
    test's own reading: ``xi = Phi w + g_1 + g_2`` by hand, the documented bounds ``|z0| <=
    eps^-1/2`` and ``|xi_i - xi_j| <= eps^-1/4`` on the training pairs."""
    prior, _ = problem()
    length = {"right": prior.size, "short": prior.size - 1, "long": prior.size + 2}.get(size)
    z0 = values[0] if length is None else np.resize(np.array(values), length)
    valid = length == prior.size and bool(np.all(np.isfinite(z0)))
    if valid:
        eps = np.finfo(prior.features.dtype).eps
        Phi = np.asarray(prior.features, np.float64)
        xi = Phi @ z0[:2] + z0[2 : 2 + N] + z0[2 + N :]
        d = xi[TRAIN[:, 0]] - xi[TRAIN[:, 1]]
        valid = np.max(np.abs(z0)) <= eps**-0.5 and np.max(np.abs(d)) <= eps**-0.25
    try:
        fit = S.mode(prior, TRAIN, z0=z0)
    except ValueError as error:
        assert not valid, (z0, str(error))
        assert "z0" in str(error), str(error)
        if length == prior.size and not np.all(np.isfinite(z0)):
            bad = int(np.flatnonzero(~np.isfinite(z0))[0])
            assert f"z0[{bad}]" in str(error), str(error)
        return
    assert valid, z0
    np.testing.assert_allclose(fit.mean, dense(tuple(TRAIN.ravel())).mean, atol=ATOL)


# ------------------------------------------ issue 49, fix A: the sparse priors' pieces by hand

TINY, HUGE = float(np.finfo(DTYPE).tiny), float(np.finfo(DTYPE).max)
#: a variance whose reciprocal overflows the working dtype (1e-320 is subnormal in float64)
OVERFLOWING_VARIANCE = 1e-320 if X64 else 1e-40


def _normal(value: Fraction) -> bool:
    """Whether an exact ratio is a finite normal number of the working dtype."""
    return Fraction(TINY) <= value <= Fraction(HUGE)


def _number(v) -> bool:
    """A real number by the test's rule: a Python or NumPy int or float, not a bool."""
    return isinstance(v, int | float | np.integer | np.floating) and not isinstance(v, bool)


def _positive(v) -> bool:
    """A finite number > 0 (an int beyond float64 is not one)."""
    try:
        return _number(v) and math.isfinite(float(v)) and v > 0
    except OverflowError:
        return False


def _options_ok(beta, iota, weight) -> bool:
    """Finite numbers > 0 whose ratios ``beta / weight`` and ``beta / (weight iota^2)`` (exact)
    are finite normal numbers of the working dtype: the documented domain."""
    if not all(_positive(v) for v in (beta, iota, weight)):
        return False
    scale = Fraction(float(beta)) / Fraction(float(weight))
    return _normal(scale) and _normal(scale / Fraction(float(iota)) ** 2)


def _at_a_bound(beta, iota, weight) -> bool:
    """Whether a ratio lies within rounding (8 eps) of the dtype's smallest normal or largest
    number: there the library's rounded division may land on either side, both right."""
    if not all(_positive(v) for v in (beta, iota, weight)):
        return False
    scale = Fraction(float(beta)) / Fraction(float(weight))
    slack = Fraction(8 * float(np.finfo(DTYPE).eps))
    return any(
        abs(value / Fraction(bound) - 1) <= slack
        for value in (scale, scale / Fraction(float(iota)) ** 2)
        for bound in (TINY, HUGE)
    )


def _laplacian(W: np.ndarray, beta, iota, weight) -> np.ndarray:
    """``(beta / weight) (D - W + I / iota^2)`` by hand."""
    L = np.diag(W.sum(1)) - W
    scale = float(beta) / float(weight)
    return scale * L + np.eye(len(W)) * (scale / float(iota) / float(iota))


def test_a_variance_whose_precision_overflows_is_refused_by_index():
    """Issue 49: ``diagonal_precision([1e-320, 1, ...])`` stored ``1 / 1e-320 = inf`` and
    ``mode`` returned a mean of zeros reported converged (1e-307 raised properly)."""
    variances = [OVERFLOWING_VARIANCE] + [1.0] * (N - 1)
    overflow = r"variances\[0\] = .*1 / variances\[0\] = (inf|1e\+40) is not a finite normal"
    with pytest.raises(ValueError, match=overflow):
        S.diagonal_precision(variances)
    with pytest.raises(ValueError, match=r"variances\[2\] = True is a bool"):
        S.diagonal_precision([1.0, 2.0, True])


@pytest.mark.parametrize(
    ("field", "index", "value", "message"),
    [
        ("diag", 0, np.inf, r"blocks\[1\]\.diag\[0\] = inf is not finite"),
        ("diag", 3, np.nan, r"blocks\[1\]\.diag\[3\] = nan is not finite"),
        ("diag", 2, -1.0, r"blocks\[1\]\.diag\[2\] = -1\.0 is negative"),
        ("omega", 1, np.inf, r"blocks\[1\]\.omega\[1\] = inf is not finite"),
        ("members", 0, N, rf"blocks\[1\]\.members\[0, 0\] = {N} is not an entity index"),
    ],
)
def test_latent_prior_refuses_a_block_that_is_not_finite(field, index, value, message):
    """Issue 49: a ``LaplacianPrecision`` holding ``inf`` (however it was built) was taken, and
    the mode was zeros, reported converged; a membership past ``n`` was clamped by JAX."""
    good = S.membership_precision([0, 1, 2, 3], [0, 0, 1, 1], N)
    arrays = {f: np.array(getattr(good, f)) for f in ("members", "omega", "diag")}
    arrays[field].reshape(-1)[index * (2 if field == "members" else 1)] = value
    bad = S.LaplacianPrecision(arrays["members"], arrays["omega"], arrays["diag"], N)
    with pytest.raises(ValueError, match=message):
        S.latent_prior(problem()[0].features, [good, bad])


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: S.membership_precision([0.5, 1.7], [0, 0], 3), r"entities\[0\] = 0\.5 is not an"),
        (lambda: S.membership_precision([True, False], [0, 0], 3), r"entities\[0\] = True is a bo"),
        (lambda: S.membership_precision([0, 1], [0, 0], 2.5), r"n must be a positive .* 2\.5"),
        (lambda: S.membership_precision([0, 1], 5, 3), r"groups must be a sequence of 2 ids"),
        (lambda: S.membership_precision([0, 1], [0, 0, 1], 3), r"groups has 3 ids, expected 2"),
        (lambda: S.membership_precision([0, 1], [0, True], 3), r"groups\[1\] = True is a bool"),
        (lambda: S.membership_precision([0, 1], [0, 0], 3, normalize=1), r"normalize must be"),
        (lambda: S.membership_precision([0, 1], [0, 0], 3, iota="1"), r"iota must be a finite"),
        (lambda: S.laplacian_precision(np.eye(N), beta="1"), r"beta must be a finite .* '1'"),
        (lambda: S.laplacian_precision(np.eye(N), beta=None), r"beta must be a finite .* None"),
        (lambda: S.laplacian_precision(np.eye(N), weight=True), r"weight must be .* True"),
        (lambda: S.laplacian_precision(np.eye(N), iota=1e200), r"beta / \(weight iota\^2\) = 0"),
        (lambda: S.laplacian_precision(None), r"W must be a real numeric array"),
        (lambda: S.laplacian_precision([[0, np.nan], [np.nan, 0]]), r"W\[0, 1\] = nan is not"),
    ],
)  # fmt: skip
def test_every_argument_of_the_precisions_is_named(call, message):
    """Issue 49: fractions were truncated to entities, bools read as entities 1 and 0, ``n =
    2.5``, a scalar ``groups`` and ``beta = '1'`` or ``None`` ended in a ``TypeError``, ``iota =
    1e200`` in an ``OverflowError``, ``W = None`` was a one-entity graph."""
    with pytest.raises(ValueError, match=message):
        call()


# The values a careless caller may pass for an entity, a group id, a count and an option.
ENTITY = st.one_of(
    st.integers(-1, 4),
    st.integers(0, 3).map(float),
    st.sampled_from([True, False, 0.5, 1.7, math.nan, math.inf, 1e20, None, "1"]),
)
GROUP = st.one_of(
    st.integers(-2, 2), st.integers(-2, 2).map(float), st.sampled_from([True, 0.5, math.nan, None])
)
COUNT = st.sampled_from([4, np.int64(4), 2, 1, 0, -1, 2.5, 4.0, True, None, "4"])
OPTION = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True, width=64),
    st.sampled_from([1, 2, 0, -1, 0.5, 1e-200, 1e200, 1e-30, 1e30, np.float32(0.7), True, None,
                     "1"]),
)  # fmt: skip
VARIANCE = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True, width=64),
    st.sampled_from([1, 2, 0.3, 1e-320, 1e-307, 1e-40, 1e-38, 1e38, 1e300, 4.6e307, True,
                     None, "1"]),
)  # fmt: skip
FAST = settings(max_examples=40, deadline=None, database=None)


def _membership_reference(entities, groups, n, scale, diag, normalize):
    """``Q`` by hand: ``W_ij`` = the groups ``i`` and ``j`` share (each weighted ``1 / s_g``
    with ``normalize``), repeated memberships counted once."""
    members: dict = {}
    for e, g in zip(entities, groups, strict=True):
        members.setdefault(g, set()).add(int(e))
    W = np.zeros((n, n))
    for group in members.values():
        for i in group:
            for j in group:
                if i != j:
                    W[i, j] += 1.0 / len(group) if normalize else 1.0
    return scale * (np.diag(W.sum(1)) - W) + diag * np.eye(n)


def _named(message: str, names) -> bool:
    return any(name in message for name in names)


@FAST
@given(
    entities=st.lists(ENTITY, min_size=0, max_size=5),
    strings=st.booleans(),
    groups=st.lists(GROUP, min_size=0, max_size=5),
    labels=st.lists(st.sampled_from("abc"), min_size=0, max_size=5),
    length=st.sampled_from(["same", "same", "same", "short", "scalar"]),
    n=COUNT,
    options=st.tuples(OPTION, OPTION, OPTION),
    normalize=st.sampled_from([False, True, np.True_, 1, None]),
)
@example(entities=[0.5, 1.7], strings=False, groups=[0, 0], labels=[], length="same", n=3,
         options=(1.0, 1.0, 1.0), normalize=False)  # issue 49: truncated to [0, 1]
@example(entities=[True, False], strings=False, groups=[0, 0], labels=[], length="same", n=3,
         options=(1.0, 1.0, 1.0), normalize=False)  # issue 49: read as entities 1, 0
@example(entities=[0, 1], strings=False, groups=[0, 0], labels=[], length="same", n=2.5,
         options=(1.0, 1.0, 1.0), normalize=False)  # issue 49: TypeError
@example(entities=[0, 1], strings=False, groups=[5], labels=[], length="scalar", n=3,
         options=(1.0, 1.0, 1.0), normalize=False)  # issue 49: TypeError
@example(entities=[0, 1], strings=False, groups=[0, 0], labels=[], length="same", n=3,
         options=("1", 1.0, 1.0), normalize=False)  # issue 49: TypeError
def test_membership_precision_is_exact_or_names_the_argument(
    entities, strings, groups, labels, length, n, options, normalize
):
    """Five classes of input at once (entities, group ids numeric or strings, their length, n,
    beta / iota / weight, normalize): a ``ValueError`` naming an argument that is bad by the
    test's own rule (and, where it names an entry, a bad one), or ``Q`` equal to the one built
    by hand from the memberships. NumPy only: nothing compiles."""
    k = len(entities)
    ids = (labels if strings else groups) + ["a" if strings else 0] * (k + 1)
    ids = {"same": ids[:k], "short": ids[: max(k - 1, 0)] if k else ids[:1], "scalar": ids[0]}[
        length
    ]
    beta, iota, weight = options
    if _at_a_bound(beta, iota, weight):
        return  # either answer is right within rounding
    n_ok = _number(n) and isinstance(n, int | np.integer) and n >= 1
    bad = {
        "n": not n_ok,
        "entities": not all(
            _number(e) and math.isfinite(e) and e == int(e) and (not n_ok or 0 <= e < n)
            for e in entities
        ),
        "groups": not isinstance(ids, list) or len(ids) != k or not all(
            isinstance(g, str) if strings else _number(g) and math.isfinite(g) and g == int(g)
            for g in ids
        ),
        "normalize": not isinstance(normalize, bool | np.bool_),
        "beta": not _options_ok(beta, iota, weight),
    }  # fmt: skip
    try:
        Q = S.membership_precision(entities, ids, n, beta, iota, weight, normalize)
    except ValueError as error:
        message = str(error)
        assert any(bad.values()), message
        patterns = {"n": ["n must"], "beta": ["beta", "iota", "weight"]}
        names = [p for name, b in bad.items() if b for p in patterns.get(name, [name])]
        assert _named(message, names), (message, bad)
        found = re.search(r"(entities|groups)\[(\d+)\] = ", message)
        if found and found.group(1) == "entities":
            e = entities[int(found.group(2))]
            assert not (_number(e) and math.isfinite(e) and e == int(e) and 0 <= e < n), message
        return
    assert not any(bad.values()), (bad, Q)
    scale = float(beta) / float(weight)
    want = _membership_reference(entities, ids, int(n), scale, scale / float(iota) / float(iota),
                                 bool(normalize))  # fmt: skip
    np.testing.assert_allclose(Q.dense(), want, rtol=1e-12 if X64 else 1e-6, atol=TINY)


@pytest.mark.slow  # 3-10 s in the fast loop (many examples, EP compiles)
@FAST
@given(options=st.tuples(OPTION, OPTION, OPTION), edge=OPTION)
@example(options=("1", 1.0, 1.0), edge=1.0)  # issue 49: TypeError
@example(options=(None, 1.0, 1.0), edge=1.0)  # issue 49: TypeError
@example(options=(1.0, 1e200, 1.0), edge=1.0)  # OverflowError (Python's iota**2)
@example(options=(1e10, 1.0, 1.0), edge=1e300)  # an edge's weight beyond the dtype
@example(options=(1e100, 1e200, 1.0), edge=0.0)  # iota^2 overflows, the ratio (1e-300) does not
def test_laplacian_precision_is_exact_or_names_the_option(options, edge):
    """Two classes (the options beta / iota / weight; an edge weight of ``W``): refused naming
    the option (or ``W``), or ``Q = (beta / weight)(L + I / iota^2)`` built by hand."""
    beta, iota, weight = options
    if _at_a_bound(beta, iota, weight):
        return  # either answer is right within rounding
    W = np.zeros((N, N))
    for i, j in [(0, 1), (2, 3)]:
        W[i, j] = W[j, i] = float(edge) if _number(edge) else 1.0
    # W's own rule: entries finite and >= 0; the edge's weight in Q, edge * beta / weight (exact),
    # at most the dtype's largest number (a subnormal one only weakens the edge)
    valid = _positive(edge) or (_number(edge) and edge == 0)
    valid = valid and _options_ok(*options) and (
        Fraction(float(edge)) * Fraction(float(beta)) / Fraction(float(weight)) <= HUGE
    )
    try:
        Q = S.laplacian_precision(W if _number(edge) else edge, beta, iota, weight)
    except ValueError as error:
        assert not valid, (options, edge, str(error))
        assert _named(str(error), ["beta", "iota", "weight", "W"]), str(error)
        return
    assert valid, (options, edge)
    want = _laplacian(W, beta, iota, weight)
    np.testing.assert_allclose(Q.dense(), want, rtol=1e-12 if X64 else 1e-6, atol=TINY)


@FAST
@given(variances=st.lists(VARIANCE, min_size=1, max_size=4))
@example(variances=[1e-320, 1.0, 1.0])  # issue 49: 1 / 1e-320 = inf, a mode of zeros
@example(variances=[1.0, True])  # a bool read as 1
def test_diagonal_precision_is_exact_or_names_the_variance(variances):
    """One class (the variances, entry by entry): refused naming ``variances[i]`` of an entry
    that is bad by the test's rule (a number > 0 whose exact reciprocal is a finite normal
    number of the working dtype), or ``diag = 1 / variances`` that ``latent_prior`` takes."""
    def ok(v):
        return _positive(v) and _normal(1 / Fraction(float(v)))

    try:
        Q = S.diagonal_precision(variances)
    except ValueError as error:
        assert not all(ok(v) for v in variances), str(error)
        found = re.search(r"variances\[(\d+)\]", str(error))
        assert found or "variances must" in str(error), str(error)
        if found:
            assert not ok(variances[int(found.group(1))]), str(error)
        return
    assert all(ok(v) for v in variances), variances
    want = [1 / float(v) for v in variances]
    np.testing.assert_allclose(np.asarray(Q.diag, float), want, rtol=2 * np.finfo(DTYPE).eps)
    S.latent_prior(None, [Q])


# ----------------------------------------------- issue 49, fix A: XPGP.sigma in every engine


def _sigma_ok(sigma) -> bool:
    """The test's rule: a number (not a bool) whose exact ``sigma^2`` and ``1 / (2 sigma^2)``
    are finite normal numbers of the working dtype."""
    if not _positive(sigma):
        return False
    square = Fraction(float(sigma)) ** 2
    return _normal(square) and _normal(1 / (2 * square))


@pytest.mark.parametrize(
    "sigma", [1e-200, np.float64(1e-200), 1e200, 10**400], ids=["1e-200", "np", "1e200", "10**400"]
)
@pytest.mark.parametrize("engine", ["ep", "sparse", "sparse with relations"])
def test_a_sigma_beyond_the_dtype_is_refused_by_every_engine(sigma, engine):
    """Issue 49: ``sigma = 1e-200`` was a ``ZeroDivisionError`` (dense and sparse), ``1e200``
    with relations an ``OverflowError``: Python's arithmetic on a Python float."""
    from bayesrank import PreferenceProblem, XPGPModel
    from bayesrank.kernels import RBF, XPGP, Independent, RegularizedLaplacian

    X = np.random.default_rng(0).normal(size=(N, 2))
    W = np.zeros((N, N))
    W[0, 1] = W[1, 0] = 1.0
    relations = engine == "sparse with relations"
    prior = XPGP(RBF(), (RegularizedLaplacian(),) if relations else (), sigma=sigma,
                 entity=Independent() if relations else None)  # fmt: skip
    options = {} if engine == "ep" else {"inference": "laplace", "approximation": "sparse"}
    data = PreferenceProblem.create([[0, 1]], X=X, relations=[W] if relations else [])
    with pytest.raises(ValueError, match=r"XPGP\.sigma"):
        XPGPModel(prior, **options).fit(data)
    with pytest.raises(ValueError, match=r"XPGP\.sigma"):
        S.from_xpgp(prior, X, [W] if relations else [], N, 2)


@FAST
@given(
    sigma=st.one_of(
        st.floats(allow_nan=True, allow_infinity=True, width=64),
        st.floats(1e-25, 1e25),
        st.sampled_from([1e-200, 1e200, 1e-154, 1.5e-154, 4.7e153, 4.8e153, 1.1e-19, 1e-19,
                         6.5e18, 6.6e18, 1, 3, 10**400, np.float32(0.5), None, "1", True]),
    )
)  # fmt: skip
@example(sigma=1e-200)  # issue 49: ZeroDivisionError
@example(sigma=1e200)  # issue 49: OverflowError
def test_sigma_is_taken_or_named_by_the_prior_check(sigma):
    """One class (``XPGP.sigma``, a scalar of any type and size): ``check_prior`` and
    ``XPGP.covariance`` refuse it naming ``XPGP.sigma``, or ``K``'s diagonal is ``1 / (2
    sigma^2)`` (RBF, kappa = 1). Eager, one shape: the few small programs compile once."""
    from bayesrank.kernels import RBF, XPGP
    from bayesrank.kernels.xpgp import check_prior

    prior = XPGP(RBF(), sigma=sigma)
    valid = _sigma_ok(sigma)
    for call in (lambda: check_prior(prior), lambda: prior.covariance(np.zeros((2, 1)))):
        try:
            K = call()
        except ValueError as error:
            assert not valid, (sigma, str(error))
            assert "XPGP.sigma" in str(error), str(error)
            continue
        assert valid, sigma
    if valid:
        want = 1 / (2 * float(sigma) ** 2)
        np.testing.assert_allclose(np.diag(np.asarray(K)), [want, want], rtol=1e-6)
