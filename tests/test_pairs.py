"""Tests for preference pairs: construction from grades, sampling, splitting, validation."""

import itertools
import math
from collections import Counter

import jax
import numpy as np
import pytest

from bayesrank.data.pairs import (
    PairSummary,
    pairs_from_grades,
    sample_pairs,
    split_pairs,
    validate_pairs,
)


def as_multiset(pairs) -> Counter:
    return Counter(map(tuple, np.asarray(pairs).tolist()))


def hoeffding_halfwidth(n_draws: int, n_tests: int, alpha: float = 1e-6) -> float:
    """Half-width t with P(any of n_tests frequencies deviates from its mean by >= t) <= alpha.

    Hoeffding: P(|X/K - p| >= t) <= 2 exp(-2 K t^2) for a frequency over K independent draws;
    a union bound over n_tests frequencies gives t = sqrt(log(2 n_tests / alpha) / (2 K)).
    """
    return math.sqrt(math.log(2 * n_tests / alpha) / (2 * n_draws))


@pytest.fixture(scope="module")
def many_keys():
    return list(jax.random.split(jax.random.key(2024), 2000))


# --- pairs_from_grades ---------------------------------------------------------------------------


@pytest.mark.parametrize("seed", range(8))
def test_pairs_from_grades_matches_double_loop(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(0, 12))
    grades = rng.integers(0, 3, size=n) if seed % 2 else rng.choice([0.5, -1.0, 2.25], size=n)
    expected = [(i, j) for i in range(n) for j in range(n) if grades[i] > grades[j]]
    pairs = pairs_from_grades(grades)
    assert pairs.shape == (len(expected), 2)
    assert pairs.dtype == np.int64
    assert [tuple(row) for row in pairs.tolist()] == expected  # same pairs, lexicographic order


def test_pairs_from_grades_all_ties_and_empty():
    assert pairs_from_grades([2, 2, 2]).shape == (0, 2)
    assert pairs_from_grades([]).shape == (0, 2)


def test_pairs_from_grades_rejects_bad_grades():
    with pytest.raises(ValueError, match=r"grades must be 1-D, got shape \(2, 2\)"):
        pairs_from_grades([[1, 2], [3, 4]])
    with pytest.raises(ValueError, match=r"grades\[2\] = nan is not finite"):
        pairs_from_grades([1.0, 0.0, np.nan, np.inf])
    with pytest.raises(ValueError, match=r"grades\[1\] = -inf is not finite"):
        pairs_from_grades([1.0, -np.inf])


# --- sample_pairs / split_pairs ------------------------------------------------------------------

PAIRS = np.array([(i, j) for i in range(8) for j in range(8) if i != j][:30])  # 30 distinct rows


def test_sample_is_a_deterministic_function_of_the_key():
    key = jax.random.key(0)
    np.testing.assert_array_equal(sample_pairs(key, PAIRS, 10), sample_pairs(key, PAIRS, 10))
    legacy = jax.random.PRNGKey(0)
    np.testing.assert_array_equal(sample_pairs(legacy, PAIRS, 10), sample_pairs(legacy, PAIRS, 10))
    known, held_out = split_pairs(key, PAIRS, 10)
    again = split_pairs(key, PAIRS, 10)
    np.testing.assert_array_equal(known, again[0])
    np.testing.assert_array_equal(held_out, again[1])


def test_different_keys_give_different_samples():
    # Two uniform 10-subsets of 30 rows coincide with probability 1 / C(30, 10) ~ 3e-8.
    samples = {sample_pairs(jax.random.key(s), PAIRS, 10).tobytes() for s in range(5)}
    assert len(samples) == 5
    splits = {split_pairs(jax.random.key(s), PAIRS, 10)[0].tobytes() for s in range(5)}
    assert len(splits) == 5


def test_sample_is_a_subset_in_input_order():
    sample = sample_pairs(jax.random.key(1), PAIRS, 12)
    assert sample.shape == (12, 2)
    assert sample.dtype == np.int64
    positions = [PAIRS.tolist().index(row) for row in sample.tolist()]
    assert positions == sorted(set(positions))  # distinct rows, input order kept


@pytest.mark.parametrize("n_known", [0, 1, 17, 30])
def test_split_is_disjoint_and_covers_the_input(n_known):
    pairs = np.concatenate([PAIRS, PAIRS[:5], PAIRS[[3]]])  # with duplicated rows
    known, held_out = split_pairs(jax.random.key(n_known), pairs, n_known)
    assert known.shape == (n_known, 2)
    assert held_out.shape == (len(pairs) - n_known, 2)
    assert as_multiset(known) + as_multiset(held_out) == as_multiset(pairs)
    # Disjoint by row: on distinct rows, the two parts share nothing.
    known, held_out = split_pairs(jax.random.key(n_known), PAIRS, n_known)
    assert not set(as_multiset(known)) & set(as_multiset(held_out))


def test_sample_equals_known_part_of_split():
    key = jax.random.key(5)
    np.testing.assert_array_equal(sample_pairs(key, PAIRS, 7), split_pairs(key, PAIRS, 7)[0])


def test_float_pairs_are_cast():
    sample = sample_pairs(jax.random.key(0), PAIRS.astype(float), 30)
    assert sample.dtype == np.int64
    np.testing.assert_array_equal(sample, PAIRS)


@pytest.mark.slow  # 3 s or more in the fast loop
def test_each_row_is_included_with_probability_size_over_m(many_keys):
    """Inclusion frequency of every row over K keys is within a Hoeffding bound of size / m.

    With K = 2000 and 20 rows, a union bound at alpha = 1e-6 gives a half-width of ~0.066 around
    p = 0.25: a correct sampler fails with probability < 1e-6, a biased one (e.g. always the first
    rows) is far outside.
    """
    m, size = 20, 5
    pairs = PAIRS[:m]
    counts = np.zeros(m)
    for key in many_keys:
        sample = sample_pairs(key, pairs, size)
        counts += (pairs[:, None, :] == sample[None, :, :]).all(axis=2).any(axis=1)
    freq = counts / len(many_keys)
    assert np.all(np.abs(freq - size / m) < hoeffding_halfwidth(len(many_keys), m))


def test_every_subset_is_equally_likely(many_keys):
    """All C(4, 2) = 6 subsets appear with frequency within a Hoeffding bound of 1/6."""
    pairs = PAIRS[:4]
    subsets = Counter(sample_pairs(key, pairs, 2).tobytes() for key in many_keys)
    expected = {pairs[list(c)].tobytes() for c in itertools.combinations(range(4), 2)}
    assert set(subsets) == expected
    freq = np.array(list(subsets.values())) / len(many_keys)
    assert np.all(np.abs(freq - 1 / 6) < hoeffding_halfwidth(len(many_keys), 6))


def test_sample_and_split_reject_bad_sizes():
    key = jax.random.key(0)
    with pytest.raises(ValueError, match=r"size=31 exceeds the number of pairs m=30"):
        sample_pairs(key, PAIRS, 31)
    with pytest.raises(ValueError, match=r"size=-1 must be non-negative"):
        sample_pairs(key, PAIRS, -1)
    with pytest.raises(ValueError, match=r"n_known=40 exceeds the number of pairs m=30"):
        split_pairs(key, PAIRS, 40)
    with pytest.raises(ValueError, match=r"pairs must have shape \(m, 2\), got \(30, 3\)"):
        sample_pairs(key, np.zeros((30, 3), dtype=int), 1)


# --- validate_pairs ------------------------------------------------------------------------------


def test_validate_counts_duplicates_and_contradictions():
    pairs = [
        [0, 1],  # row 0
        [1, 0],  # contradicts row 0
        [0, 1],  # duplicate of row 0
        [2, 1],
        [1, 2],  # contradicts row 3
        [1, 2],  # duplicate of row 4
        [1, 2],  # duplicate of row 4
        [3, 0],
        [4, 6],
    ]
    summary = validate_pairs(pairs, 7)
    assert isinstance(summary, PairSummary)
    np.testing.assert_array_equal(summary.pairs, pairs)
    assert summary.pairs.dtype == np.int64
    assert summary.n_pairs == 9
    assert summary.n_duplicates == 3
    assert summary.n_contradictions == 2  # {0, 1} and {1, 2}
    assert summary.n_entities_touched == 6  # 0, 1, 2, 3, 4, 6


def test_validate_clean_and_empty_pairs():
    pairs = pairs_from_grades([3, 1, 2, 1])
    summary = validate_pairs(pairs, 4)
    assert summary == PairSummary(summary.pairs, len(pairs), 0, 0, 4)
    np.testing.assert_array_equal(summary.pairs, pairs)
    empty = validate_pairs(np.zeros((0, 2), dtype=int), 0)
    assert empty.pairs.shape == (0, 2)
    assert (empty.n_pairs, empty.n_duplicates, empty.n_contradictions) == (0, 0, 0)
    assert empty.n_entities_touched == 0


def test_validate_accepts_whole_floats():
    summary = validate_pairs(np.array([[0.0, 2.0], [1.0, 0.0]]), 3)
    assert summary.pairs.dtype == np.int64
    np.testing.assert_array_equal(summary.pairs, [[0, 2], [1, 0]])


@pytest.mark.parametrize(
    ("pairs", "message"),
    [
        (np.zeros((3,)), r"pairs must have shape \(m, 2\), got \(3,\)"),
        (np.zeros((2, 3)), r"pairs must have shape \(m, 2\), got \(2, 3\)"),
        (np.array([["a", "b"]]), r"pairs must be integer-valued, got dtype <U1"),
        (np.array([[0, 1], [True, False]]).astype(bool), r"integer-valued, got dtype bool"),
        (np.array([[0.0, 1.0], [2.0, np.nan]]), r"pairs row 1: value nan is not an integer"),
        (np.array([[0.0, 1.0], [1.0, 2.0], [0.5, 1.0]]), r"pairs row 2: value 0.5 is not an int"),
        (np.array([[0, 1], [1, 5]]), r"pairs row 1: index 5 is out of range for n=5 entities"),
        (np.array([[0, 1], [1, 2], [-1, 2]]), r"pairs row 2: index -1 is out of range for n=5"),
        (np.array([[0, 1], [3, 3]]), r"pairs row 1 is a self-pair \(3, 3\)"),
    ],
)
def test_validate_rejects_bad_pairs(pairs, message):
    with pytest.raises(ValueError, match=message):
        validate_pairs(pairs, 5)


def test_validate_rejects_negative_n():
    with pytest.raises(ValueError, match=r"n=-1 must be non-negative"):
        validate_pairs(np.zeros((0, 2), dtype=int), -1)


@pytest.mark.slow
@pytest.mark.float32
@pytest.mark.parametrize("make_key", [jax.random.key, jax.random.PRNGKey])
def test_permutation_is_jax_permutation_for_every_size(make_key):
    """The host-side shuffle draws JAX's bits at a power-of-two size: the same permutation as
    ``jax.random.permutation`` (reference: JAX itself), at sizes of one and two sorting rounds,
    both key kinds."""
    from bayesrank.data.keys import permutation

    for m in [0, 1, 2, 3, 63, 64, 65, 100, 257, 1625, 1626, 4099, 70_001]:
        key = make_key(m + 11)
        np.testing.assert_array_equal(
            permutation(key, m), np.asarray(jax.random.permutation(key, m)), err_msg=str(m)
        )


def test_sampling_pairs_of_many_sizes_compiles_per_size_class_only():
    """A collection's queries each have their own number of pairs; drawing from each compiled a
    program per size. Now the programs are per power of two: once one size of a class has run,
    40 other sizes of it compile nothing (``jax.random.permutation`` compiled 40)."""
    from helpers import count_compilations

    pairs = np.tile([0, 1], (300, 1))
    sample_pairs(jax.random.key(0), pairs[:257], 10)  # the 512 class compiled once
    with count_compilations() as n:
        for m in range(260, 300):
            sample_pairs(jax.random.key(m), pairs[:m], 10)
    assert n[0] == 0
