"""Tests for the greedy ordering of Cohen, Schapire & Singer (1999)."""

import itertools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from bayesrank.ordering import (
    agreement,
    greedy_order,
    greedy_ranks,
    net_preference,
    order_from_probabilities,
)

# Lecture-notes example (Aalto CS-E4710): entities a, b, c, d; row = x, column = x'.
A, B, C, D = range(4)
F_LECTURE = np.array(
    [
        [0.0, 0.0, 1 / 4, 1 / 8],  # a
        [1.0, 0.0, 1.0, 1.0],  # b
        [3 / 4, 0.0, 0.0, 1 / 8],  # c
        [7 / 8, 0.0, 7 / 8, 0.0],  # d
    ]
)


def brute_agreement(F: np.ndarray, order) -> float:
    """AGREE straight from the definition: sum of F[order[a], order[b]] over a < b."""
    return sum(F[order[a], order[b]] for a in range(len(order)) for b in range(a + 1, len(order)))


def reference_greedy(F: np.ndarray) -> list[int]:
    """The greedy algorithm recomputing pi over the remaining set S at every step (no updates)."""
    S = list(range(F.shape[0]))
    order = []
    while S:
        pi = [sum(F[x, y] - F[y, x] for y in S if y != x) for x in S]
        best = S[int(np.argmax(pi))]  # first maximum: lowest index, as S is kept sorted
        order.append(best)
        S.remove(best)
    return order


def random_preferences(rng: np.random.Generator, n: int, complementary: bool) -> np.ndarray:
    """Random F in [0, 1]; with ``complementary``, F[i, j] + F[j, i] = 1 as for probabilities."""
    F = rng.uniform(size=(n, n))
    if complementary:
        F = np.triu(F, 1) + np.tril(1 - F.T, -1)
    np.fill_diagonal(F, rng.uniform(size=n))  # the diagonal must not matter
    return F


def embed_with_padding(rng: np.random.Generator, F: np.ndarray, n_total: int):
    """Place F's entities at sorted random positions of an (n_total, n_total) matrix of junk."""
    n = F.shape[0]
    positions = np.sort(rng.choice(n_total, size=n, replace=False))
    padded = rng.uniform(-5, 5, size=(n_total, n_total))
    padded[np.ix_(positions, positions)] = F
    mask = np.zeros(n_total, dtype=bool)
    mask[positions] = True
    return padded, mask, positions


# --- the worked example -----------------------------------------------------------------------


def test_lecture_example_net_preference():
    np.testing.assert_allclose(net_preference(F_LECTURE), [-18 / 8, 3, -10 / 8, 4 / 8])


def test_lecture_example_order_and_ranks():
    np.testing.assert_array_equal(greedy_order(F_LECTURE), [B, D, C, A])
    np.testing.assert_array_equal(greedy_ranks(F_LECTURE), [4, 1, 3, 2])


def test_lecture_example_agreement():
    # b > d > c > a agrees with f(b,d) + f(b,c) + f(b,a) + f(d,c) + f(d,a) + f(c,a).
    expected = 1 + 1 + 1 + 7 / 8 + 7 / 8 + 3 / 4
    assert float(agreement(F_LECTURE, greedy_order(F_LECTURE))) == pytest.approx(expected)


# --- the algorithm's guarantees, checked by brute force -----------------------------------------


@pytest.mark.parametrize("complementary", [False, True])
@pytest.mark.parametrize("n", [1, 2, 3, 4, 5, 6])
def test_greedy_agree_at_least_half_of_optimum(n, complementary):
    """Cohen, Schapire & Singer (1999), Theorem 3: AGREE(greedy) >= AGREE(optimal) / 2."""
    rng = np.random.default_rng(100 * n + complementary)
    perms = list(itertools.permutations(range(n)))
    for _ in range(5):
        F = random_preferences(rng, n, complementary)
        order = np.asarray(greedy_order(F))
        assert sorted(order) == list(range(n))
        greedy = brute_agreement(F, order)
        assert float(agreement(F, order)) == pytest.approx(greedy)
        optimum = max(brute_agreement(F, p) for p in perms)
        assert greedy >= optimum / 2 - 1e-12


@pytest.mark.parametrize("complementary", [False, True])
def test_matches_reference_implementation(complementary):
    """The incremental pi updates agree with recomputing pi over the remaining set."""
    rng = np.random.default_rng(complementary)
    differs_from_static_sort = 0
    for n in (3, 5, 8, 12):
        for _ in range(6):
            F = random_preferences(rng, n, complementary)
            expected = reference_greedy(F)
            np.testing.assert_array_equal(greedy_order(F), expected)
            differs_from_static_sort += expected != list(np.argsort(-net_preference(F)))
    assert differs_from_static_sort > 0  # the updates matter in these cases


@pytest.mark.parametrize("n", [1, 2, 5, 6, 17])
def test_consistent_preferences_recover_the_sort(n):
    rng = np.random.default_rng(n)
    s = rng.permutation(n) + rng.uniform(0, 0.5, size=n)  # distinct scores
    F = (s[:, None] > s[None, :]).astype(float)
    np.testing.assert_array_equal(greedy_order(F), np.argsort(-s))
    np.testing.assert_array_equal(order_from_probabilities(F), np.argsort(-s))


def test_ties_go_to_the_lowest_index():
    np.testing.assert_array_equal(greedy_order(np.zeros((5, 5))), np.arange(5))
    # 0 and 2 tie for first place; 1 and 3 tie for last.
    F = np.zeros((4, 4))
    F[0, 1] = F[2, 3] = 1.0
    np.testing.assert_array_equal(greedy_order(F), [0, 2, 1, 3])


def test_diagonal_is_ignored():
    rng = np.random.default_rng(3)
    F = random_preferences(rng, 6, complementary=True)
    G = F.copy()
    np.fill_diagonal(G, 100.0)
    order = greedy_order(F)
    np.testing.assert_array_equal(greedy_order(G), order)
    assert float(agreement(G, order)) == pytest.approx(float(agreement(F, order)))


def test_integer_matrix_is_accepted():
    F = np.array([[0, 0, 1], [1, 0, 1], [0, 0, 0]])
    np.testing.assert_array_equal(greedy_order(F), [1, 0, 2])


# --- padding, jit, vmap -------------------------------------------------------------------------


@pytest.mark.parametrize("seed", range(5))
def test_padding_invariance(seed):
    rng = np.random.default_rng(seed)
    F = random_preferences(rng, 5, complementary=bool(seed % 2))
    padded, mask, positions = embed_with_padding(rng, F, 9)
    expected_order = np.concatenate([positions[np.asarray(greedy_order(F))], np.flatnonzero(~mask)])
    np.testing.assert_array_equal(greedy_order(padded, mask), expected_order)
    np.testing.assert_allclose(net_preference(padded, mask)[positions], net_preference(F))
    np.testing.assert_allclose(net_preference(padded, mask)[~mask], 0.0)
    np.testing.assert_array_equal(greedy_ranks(padded, mask)[positions], greedy_ranks(F))
    assert float(agreement(padded, expected_order, mask)) == pytest.approx(
        float(agreement(F, greedy_order(F)))
    )


def test_all_padded_gives_index_order():
    F = np.random.default_rng(0).uniform(size=(4, 4))
    np.testing.assert_array_equal(greedy_order(F, np.zeros(4, dtype=bool)), np.arange(4))


@pytest.mark.slow  # 3 s or more in the fast loop
def test_jit_matches_eager():
    """The public functions are jitted; under ``disable_jit`` the loop runs as plain Python."""
    rng = np.random.default_rng(7)
    F = random_preferences(rng, 8, complementary=False)
    _, mask, _ = embed_with_padding(rng, np.zeros((6, 6)), 8)
    for args in ((F,), (F, mask)):
        jitted = [greedy_order(*args), greedy_ranks(*args), net_preference(*args)]
        with jax.disable_jit():
            eager = [greedy_order(*args), greedy_ranks(*args), net_preference(*args)]
        for a, b in zip(jitted, eager, strict=True):
            np.testing.assert_array_equal(a, b)
    order = greedy_order(F)
    with jax.disable_jit():
        eager_agree = float(agreement(F, order))
    assert float(agreement(F, order)) == pytest.approx(eager_agree)


def test_vmap_matches_loop():
    rng = np.random.default_rng(11)
    batch = [embed_with_padding(rng, random_preferences(rng, k, True), 7) for k in (3, 5, 7, 1)]
    Fs = jnp.stack([b[0] for b in batch])
    masks = jnp.stack([b[1] for b in batch])
    orders = jax.vmap(greedy_order)(Fs, masks)
    for k, (F, mask, _) in enumerate(batch):
        np.testing.assert_array_equal(orders[k], greedy_order(F, mask))
    np.testing.assert_array_equal(
        jax.vmap(greedy_ranks)(Fs, masks), [greedy_ranks(F, m) for F, m, _ in batch]
    )
    np.testing.assert_allclose(
        jax.vmap(agreement)(Fs, orders, masks),
        [agreement(F, o, m) for (F, m, _), o in zip(batch, orders, strict=True)],
    )


# --- shape errors -------------------------------------------------------------------------------


def test_non_square_matrix_is_rejected():
    with pytest.raises(ValueError, match=r"square \(n, n\) matrix, got shape \(3, 4\)"):
        greedy_order(np.zeros((3, 4)))
    with pytest.raises(ValueError, match=r"got shape \(4,\)"):
        greedy_order(np.zeros(4))


def test_mask_and_order_shapes_are_checked():
    with pytest.raises(ValueError, match=r"mask must have shape \(3,\) to match F, got \(4,\)"):
        greedy_order(np.zeros((3, 3)), np.ones(4, dtype=bool))
    with pytest.raises(ValueError, match=r"order must have shape \(3,\) to match F, got \(2,\)"):
        agreement(np.zeros((3, 3)), np.array([0, 1]))
