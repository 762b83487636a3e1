"""Bad input to the metrics, the greedy ordering, the runtime and the CLI: a ``ValueError`` that
names the argument (index, value), never another exception, a NaN or a silently wrong number.

Reference values are worked by hand. Runs with x64 on and off (``BAYESRANK_TEST_X64=0``).
"""

import math
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bayesrank import metrics as M
from bayesrank import runtime
from bayesrank.cli import main
from bayesrank.ordering import agreement, greedy_order, greedy_ranks, net_preference

pytestmark = pytest.mark.float32

NAN, INF = float("nan"), float("inf")


def raises(match):
    return pytest.raises(ValueError, match=match)


# --- 1. pair indices ----------------------------------------------------------------------------


def test_pair_indices_out_of_range_name_row_and_index():
    s = [5.0, 4.0, 3.0, 2.0, 1.0]
    with raises(r"pairs row 0: index 9 is out of range for n=5"):
        M.pairwise_error_from_scores(s, [[0, 9]])
    with raises(r"pairs row 1: index -1 is out of range for n=5"):
        M.pairwise_error_from_scores(s, [[0, 1], [0, -1]])
    with raises(r"pairs must have shape \(m, 2\)"):
        M.pairwise_error_from_scores(s, [[0, 1, 2]])
    with raises(r"pairs row 0: value 0.5 is not an integer"):
        M.pairwise_error_from_scores(s, [[0.5, 1]])
    with raises(r"mask has shape \(3,\) but pairs has shape \(1,\)"):
        M.pairwise_error_from_scores(s, [[0, 1]], mask=[True, True, False])
    with raises(r"scores\[1\] = nan is not finite"):
        M.pairwise_error_from_scores([0.0, NAN, 1.0], [[0, 1]])


def test_pair_indices_valid_and_padded():
    s = [5.0, 4.0, 3.0, 2.0, 1.0]
    # (0 > 1) right, (4 > 0) wrong, (2 > 2) half: 1.5 / 3
    assert float(M.pairwise_error_from_scores(s, [[0, 1], [4, 0], [2, 2]])) == pytest.approx(0.5)
    # a padded pair may hold any index, and an unused entity any score
    got = M.pairwise_error_from_scores([*s[:4], NAN], [[1, 0], [0, 99]], mask=[True, False])
    assert float(got) == 1.0


# --- 2. negative / non-integer labels -----------------------------------------------------------


@pytest.mark.slow  # 3 s or more in the fast loop
def test_negative_labels_are_rejected():
    with raises(r"labels\[0\] = -1 is negative"):
        M.ndcg_at([1.0, 0.0], [-1, 1], 1)
    for f in (M.average_precision, lambda s, lab: M.precision_at(s, lab, 1), M.letor_metrics):
        with raises(r"labels\[1\] = -2.0 is negative"):
            f([1.0, 0.0], [1.0, -2.0])
    with raises(r"labels\[0\] = 1.5 is not an integer"):
        M.ndcg_at([1.0, 0.0], [1.5, 1], 1)
    with raises(r"labels\[0\] = -1 is negative"):
        M.check_gain_labels([-1, 1])
    # a padded document's label is never checked
    got = M.ndcg_at([1.0, 0.0, 9.0], [1, 0, -5], 1, mask=[True, True, False])
    assert float(got) == 1.0


# --- 3. non-finite scores -----------------------------------------------------------------------


@pytest.mark.slow  # 3 s or more in the fast loop
def test_non_finite_scores_name_the_index():
    with raises(r"scores\[0\] = nan is not finite"):
        M.ndcg_at([NAN, 1.0], [0, 1], 1)
    with raises(r"scores\[0\] = nan is not finite"):
        M.average_precision([NAN, 1.0], [1, 0])
    with raises(r"scores\[1\] = inf is not finite"):
        M.precision_at([0.0, INF], [1, 0], 1)
    with raises(r"a\[2\] = nan is not finite"):
        M.kendall_tau([1.0, 2.0, NAN], [1.0, 2.0, 3.0])
    with raises(r"b\[0\] = -inf is not finite"):
        M.spearman_rho([1.0, 2.0], [-INF, 1.0])
    with raises(r"probs\[0\] = nan is not finite"):
        M.pairwise_auc([NAN, 0.5])
    with raises(r"F\[0, 1\] = nan is not finite"):
        greedy_order(np.array([[0.0, NAN], [1.0, 0.0]]))
    for f in (net_preference, greedy_ranks):
        with raises(r"F\[1, 0\] = inf is not finite"):
            f(np.array([[0.0, 1.0], [INF, 0.0]]))
    # the diagonal and padded entities are ignored, whatever they hold
    F = np.array([[NAN, 1.0, NAN], [0.0, INF, NAN], [NAN, NAN, NAN]])
    np.testing.assert_array_equal(greedy_order(F, np.array([True, True, False])), [0, 1, 2])
    # a masked score may be NaN (padding)
    assert float(M.ndcg_at([NAN, 1.0], [0, 1], 1, mask=[False, True])) == 1.0


def test_agreement_order_must_be_a_permutation():
    F = np.array([[0.0, 1.0], [0.0, 0.0]])
    with raises(r"order\[1\] = 0 repeats"):
        agreement(F, np.array([0, 0]))
    with raises(r"order\[0\] = 2 is out of range \[0, 2\)"):
        agreement(F, np.array([2, 0]))
    assert float(agreement(F, np.array([0, 1]))) == 1.0


# --- 4. probabilities and outcomes --------------------------------------------------------------


def test_probabilities_and_outcomes_are_checked():
    with raises(r"outcomes has shape \(1,\) but probs has shape \(2,\)"):
        M.brier_score([0.5, 0.2], [1])
    with raises(r"probs\[0\] = 1.5 is not a probability"):
        M.brier_score([1.5], [1])
    with raises(r"outcomes\[0\] = 2 is not an outcome"):
        M.brier_score([0.5], [2])
    with raises(r"probs\[0\] = 1.5 is not a probability"):
        M.log_loss([1.5], [1])
    with raises(r"probs\[0\] = nan is not finite"):
        M.log_loss([NAN], [1])
    with raises(r"probs\[0\] = 1.5 is not a probability"):
        M.pairwise_error([1.5, 0.2])
    with raises(r"probs\[1\] = -0.25 is not a probability"):
        M.expected_calibration_error([0.5, -0.25], [1, 0])
    with raises("relevant_threshold must be a finite number"):
        M.precision_at([1.0, 0.0], [1, 0], 1, relevant_threshold=NAN)
    # hand-worked: (0.25 + 0.04) / 2 = 0.145; log loss -(log .5 + log .8) / 2
    assert float(M.brier_score([0.5, 0.2], [1, 0])) == pytest.approx(0.145, rel=1e-6)
    want = -(math.log(0.5) + math.log(0.8)) / 2
    assert float(M.log_loss([0.5, 0.2], [1, 0])) == pytest.approx(want, rel=1e-6)
    assert float(M.brier_score([0.5, 7.0], [True, False], mask=[True, False])) == 0.25


# --- 5. shapes ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "f",
    [
        lambda s, lab, **kw: M.ndcg_at(s, lab, 2, **kw),
        lambda s, lab, **kw: M.precision_at(s, lab, 2, **kw),
        M.average_precision,
        M.letor_metrics,
        M.position_error,
    ],
)
def test_shape_mismatch_names_both_shapes(f):
    with raises(r"labels has shape \(2,\) but scores has shape \(3,\)"):
        f([3.0, 2.0, 1.0], [1, 0])
    with raises(r"scores must be 1-D, got shape \(1, 2\)"):
        f([[3.0, 2.0]], [1, 0])
    with raises(r"scores must be a real numeric array, got dtype <U1"):
        f(["a", "b"], [1, 0])
    with raises(r"mask has shape \(3,\) but scores has shape \(2,\)"):
        f([3.0, 2.0], [1, 0], mask=[True, True, False])


def test_shape_mismatch_correlations_and_traced():
    for f in (M.kendall_tau, M.spearman_rho, M.kendall_distance, M.spearman_footrule):
        with raises(r"b has shape \(2,\) but a has shape \(3,\)"):
            f([1.0, 2.0, 3.0], [1.0, 2.0])
    # shapes are static: checked under jit as well
    with raises(r"labels has shape \(2,\) but scores has shape \(3,\)"):
        jax.jit(M.average_precision)(jnp.zeros(3), jnp.zeros(2))


# --- 6. static options --------------------------------------------------------------------------


def test_static_options_are_checked():
    s, lab = [2.0, 1.0, 0.0], [1, 0, 1]
    for k in (2.5, 1.0, None, True, "2", 0):
        with raises("k must be an integer in"):
            M.ndcg_at(s, lab, k)
        with raises("k must be"):
            M.precision_at(s, lab, k)
        with raises("max_k must be"):
            M.letor_metrics(s, lab, max_k=k)
        with raises("n_bins must be"):
            M.reliability_curve([0.5], [1], n_bins=k)
    with raises("max_k must be an integer in"):
        M.letor_metrics(s, lab, max_k=10**11)
    with raises("normalize must be True or False, got 'x'"):
        M.spearman_footrule(s, s, normalize="x")
    with raises("normalize must be True or False"):
        M.kendall_distance(s, s, normalize=None)
    with raises("short_query must be 'letor' or 'truncate'"):
        M.ndcg_at(s, lab, 1, short_query=1)
    # a traced k is both a TypeError (for JAX) and a ValueError
    with raises("k must be a static Python int"):
        jax.jit(M.precision_at)(jnp.zeros(3), jnp.zeros(3, int), 3)


@pytest.mark.slow  # 3 s or more in the fast loop
def test_hand_worked_values_still_hold():
    # ranking by score: labels [2, 0, 1]; DCG@3 = 3 + 0 + 1/log2(3); ideal = 3 + 1 + 0
    want = (3 + 1 / math.log2(3)) / 4
    assert float(M.ndcg_at([3.0, 2.0, 1.0], [2, 0, 1], 3)) == pytest.approx(want, rel=1e-6)
    assert float(M.average_precision([3.0, 2.0, 1.0], [2, 0, 1])) == pytest.approx(
        (1 + 2 / 3) / 2, rel=1e-6
    )
    assert float(M.precision_at([3.0, 2.0, 1.0], [2, 0, 1], 2)) == pytest.approx(0.5)
    assert float(M.kendall_tau([1.0, 2.0, 3.0], [3.0, 2.0, 1.0])) == pytest.approx(-1.0)
    # AUC of probs [0.9, 0.2]: positives {.9, .2}, negatives {.1, .8}: 3 wins of 4
    assert float(M.pairwise_auc([0.9, 0.2])) == pytest.approx(0.75)


# --- Hypothesis: corrupted inputs ---------------------------------------------------------------

CORRUPT = st.sampled_from(["none", "nan", "inf", "neg_label", "short_labels", "short_mask"])


@settings(max_examples=40, deadline=None)
@given(
    st.lists(st.floats(-5, 5, allow_nan=False, width=32), min_size=1, max_size=6),
    st.lists(st.integers(0, 3), min_size=6, max_size=6),
    CORRUPT,
    st.integers(0, 5),
)
@pytest.mark.slow
def test_corrupted_inputs_raise_or_give_finite_results(scores, labels, corruption, where):
    scores = np.array(scores)
    n = len(scores)
    labels = np.array(labels[:n])
    i = where % n
    mask = None
    argument = None
    if corruption == "nan":
        scores[i], argument = NAN, rf"scores\[{i}\]"
    elif corruption == "inf":
        scores[i], argument = -INF, rf"scores\[{i}\]"
    elif corruption == "neg_label":
        labels[i], argument = -1, rf"labels\[{i}\]"
    elif corruption == "short_labels":
        labels, argument = labels[:-1], "labels has shape"
    elif corruption == "short_mask":
        mask, argument = np.ones(n + 1, bool), "mask has shape"
    calls = {
        "ndcg": (lambda: M.ndcg_at(scores, labels, 3, mask=mask), (0, 1)),
        "p": (lambda: M.precision_at(scores, labels, 2, mask=mask), (0, 1)),
        "ap": (lambda: M.average_precision(scores, labels, mask=mask), (0, 1)),
        "rho": (lambda: M.spearman_rho(scores, labels, mask=mask), (-1, 1)),
        "pe": (lambda: M.position_error(scores, labels, mask=mask), (0, n)),
    }
    for name, (call, (low, high)) in calls.items():
        if argument is None or (name in ("rho", "pe") and corruption == "neg_label"):
            out = float(call())
            assert math.isfinite(out) and low <= out <= high, (name, out)
        else:
            arg = (
                argument.replace("scores", "a").replace("labels", "b")
                if name == "rho"
                else argument
            )
            with raises(arg):
                call()


# --- 7. runtime and CLI -------------------------------------------------------------------------


def test_cache_dir_that_cannot_be_created_warns(tmp_path):
    afile = tmp_path / "file"
    afile.write_text("x")
    for bad in (afile, afile / "sub", "/proc/nope"):
        with pytest.warns(RuntimeWarning, match="compilation cache disabled: cannot use"):
            assert runtime.enable_compilation_cache(bad) is None


def _write(tmp_path, labels, stem="data"):
    data = tmp_path / f"{stem}.txt"
    data.write_text("".join(f"{lab} qid:1 1:{i}\n" for i, lab in enumerate(labels)))
    scores = tmp_path / f"{stem}.pred"
    scores.write_text("".join(f"{len(labels) - i}\n" for i in range(len(labels))))
    return str(data), str(scores)


def test_cli_user_errors_exit_2_without_traceback(tmp_path, capsys, monkeypatch):
    data, scores = _write(tmp_path, [1, 0, 2])
    assert main(["evaluate", data, scores, "--max-k", "100000000000"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("bayesrank: error: --max-k") and "Traceback" not in err
    assert main(["evaluate", data, scores, "--max-k", "11"]) == 0  # past the query: issue 32
    capsys.readouterr()
    assert main(["evaluate", data, str(tmp_path / "missing.txt")]) == 2
    assert capsys.readouterr().err.count("\n") == 1

    bad_data, bad_scores = _write(tmp_path, [1, -1, 0], "bad")
    assert main(["evaluate", bad_data, bad_scores]) == 2
    err = capsys.readouterr().err
    assert err.startswith("bayesrank: error:") and "-1" in err and err.count("\n") == 1

    afile = tmp_path / "cachefile"
    afile.write_text("")
    for cache in ("/proc/nope", str(afile)):
        monkeypatch.setenv("BAYESRANK_CACHE_DIR", cache)
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            assert main(["evaluate", data, scores, "--max-k", "3"]) == 0
        captured = capsys.readouterr()
        assert captured.err.startswith("bayesrank: warning: compilation cache disabled")
        assert "MAP" in captured.out
