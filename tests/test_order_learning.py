"""Tests for Cohen, Schapire & Singer's online learning of preference-function weights."""

import math
import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from helpers import assert_close, count_compilations

from bayesrank.order_learning import (
    HedgeInfo,
    HedgeState,
    combined_preference,
    hedge,
    hedge_init,
    hedge_step,
    preference_loss,
    ranking_preference,
)
from bayesrank.ordering import greedy_order, net_preference

# --- (a) the lecture notes' worked example of the greedy algorithm ------------------------------

# shared/seeds/000 (Aalto CS-E4710, "Cohen's algorithm"): entities a, b, c, d; F[x, x'] = f(x, x')
# read off its net preference sums, e.g. pi(a) = 0 + 1/4 + 1/8 - (1 + 3/4 + 7/8): f(a, b) = 0,
# f(a, c) = 1/4, f(a, d) = 1/8 out of a; f(b, a) = 1, f(c, a) = 3/4, f(d, a) = 7/8 into a.
A, B, C, D = range(4)
F_NOTES = np.array(
    [
        [0.0, 0.0, 1 / 4, 1 / 8],  # a
        [1.0, 0.0, 1.0, 1.0],  # b
        [3 / 4, 0.0, 0.0, 1 / 8],  # c
        [7 / 8, 0.0, 7 / 8, 0.0],  # d
    ]
)


def test_notes_example_is_a_complementary_preference_function():
    # The notes scale the scores so that f(x, x') + f(x', x) = 1 (they print f(x_i, x_i) +
    # f(x_i, x_i) = 1, a typo for x_j); the example's numbers satisfy it.
    off = ~np.eye(4, dtype=bool)
    np.testing.assert_array_equal((F_NOTES + F_NOTES.T)[off], 1.0)


def test_notes_example_every_step():
    """The example's pi at every step: after x* is placed, pi over the remaining S is the net
    preference of the graph without x* (pi(x) += f(x*, x) - f(x, x*) is exactly that)."""
    steps = [  # (remaining S, pi on S as the notes print it, the node placed)
        ([A, B, C, D], [-18 / 8, 3, -10 / 8, 4 / 8], B),
        ([A, C, D], [-10 / 8, -2 / 8, 12 / 8], D),
        ([A, C], [-2 / 4, 2 / 4], C),
        ([A], [0.0], A),
    ]
    for S, pi, placed in steps:
        mask = np.isin(np.arange(4), S)
        got = np.asarray(net_preference(F_NOTES, mask))[S]
        assert_close(got, pi, rtol=0, atol=1e-15)
        assert S[int(np.argmax(got))] == placed
    np.testing.assert_array_equal(greedy_order(F_NOTES), [B, D, C, A])  # b > d > c > a


def test_notes_example_as_one_round_of_the_learner():
    """The example's f as the only primitive (weight 1): PREF = f, and the round's order is
    the notes' b > d > c > a. Feedback a > d contradicts it (loss 1 - f(a, d) = 7/8)."""
    R = F_NOTES[None]
    assert_close(combined_preference(np.ones(1), R), F_NOTES, rtol=0, atol=0)
    state, info = hedge_step(hedge_init(1), R, np.array([[A, D]]), None, 0.5)
    np.testing.assert_array_equal(info.order, [B, D, C, A])
    assert_close(info.loss, 7 / 8, rtol=1e-15)
    assert_close(info.order_loss, 1.0, rtol=0)  # the order puts d above a
    assert_close(state.weights, [1.0], rtol=0)  # one primitive: w stays 1


# --- ranking functions and Eq. 1 --------------------------------------------------------------


def test_ranking_preference_by_hand():
    # f = (2, nan, 2, 5): item 3 first, items 0 and 2 tied, item 1 unranked.
    R = np.asarray(ranking_preference(np.array([2.0, np.nan, 2.0, 5.0])))
    h = 0.5
    expected = [
        [h, h, h, 0],
        [h, h, h, h],
        [h, h, h, 0],
        [1, h, 1, h],
    ]
    np.testing.assert_array_equal(R, expected)
    # a masked item is unranked; leading axes are kept
    both = ranking_preference(np.array([[2.0, 1.0, 2.0, 5.0]] * 2), np.array([[1, 0, 1, 1]] * 2))
    np.testing.assert_array_equal(both, [expected, expected])


def test_preference_loss_eq1():
    # Loss(R, F) = sum (1 - R(u, v)) / |F|; F = {(0, 1), (2, 1)}, the third pair padding.
    R = np.array([[0.5, 0.9, 0.2], [0.1, 0.5, 0.4], [0.8, 0.6, 0.5]])
    fb = np.array([[0, 1], [2, 1], [1, 0]])
    got = preference_loss(R, fb, np.array([True, True, False]))
    assert_close(got, ((1 - 0.9) + (1 - 0.6)) / 2, rtol=1e-15)
    assert float(preference_loss(R, fb, np.zeros(3, bool))) == 0.0  # empty F: 0


# --- (b) one round by hand -------------------------------------------------------------------


def test_hedge_step_by_hand():
    """Items 0, 1, 2; feedback F = {(0, 1), (1, 2)} (0 > 1 > 2) plus a padding pair; beta = 1/16.

    R_1 from f_1 = (3, 2, 1):   R_1(0,1) = 1,   R_1(1,2) = 1  -> Loss = 0
    R_2 from f_2 = (2, 3, 1):   R_2(0,1) = 0,   R_2(1,2) = 1  -> Loss = (1 + 0) / 2 = 1/2
    R_3 from f_3 = (nan, 1, 2): R_3(0,1) = 1/2, R_3(1,2) = 0  -> Loss = (1/2 + 1) / 2 = 3/4
    w^1 = (1/3, 1/3, 1/3); beta^Loss = (1, 1/4, 1/8); w^1 beta^Loss = (8, 2, 1) / 24, Z = 11/24
    -> w^2 = (8/11, 2/11, 1/11).
    Loss(PREF^1, F) = (0 + 1/2 + 3/4) / 3 = 5/12.
    PREF^1(0,1) = (1 + 0 + 1/2)/3 = 1/2, PREF(0,2) = (1 + 1 + 1/2)/3 = 5/6, PREF(1,2) = 2/3
    (and PREF(v,u) = 1 - PREF(u,v)): pi = (2/3, 1/3, -1); 0 is placed, then pi(1) = 1/3 + 0,
    pi(2) = -1 + 2/3: order 0, 1, 2, which agrees with both pairs (order loss 0).
    """
    scores = np.array([[3.0, 2.0, 1.0], [2.0, 3.0, 1.0], [np.nan, 1.0, 2.0]])
    R = ranking_preference(scores)
    feedback = np.array([[0, 1], [1, 2], [9, 9]])  # the padding pair may hold anything
    state, info = hedge_step(hedge_init(3), R, feedback, np.array([True, True, False]), 1 / 16)

    assert isinstance(state, HedgeState) and isinstance(info, HedgeInfo)
    assert_close(info.primitive_loss, [0, 1 / 2, 3 / 4], rtol=1e-15)
    assert_close(state.weights, [8 / 11, 2 / 11, 1 / 11], rtol=1e-14)
    assert_close(info.loss, 5 / 12, rtol=1e-14)
    assert_close(info.weights, [1 / 3] * 3, rtol=1e-15)
    pref = combined_preference(info.weights, R)
    assert_close(pref[[0, 0, 1], [1, 2, 2]], [1 / 2, 5 / 6, 2 / 3], rtol=1e-14)
    np.testing.assert_array_equal(info.order, [0, 1, 2])
    assert float(info.order_loss) == 0.0 and int(info.n_feedback) == 2
    assert_close(state.cumulative_primitive_loss, [0, 1 / 2, 3 / 4], rtol=1e-15)
    assert_close(state.cumulative_loss, 5 / 12, rtol=1e-14)


def test_beta_extremes():
    """beta = 1: no learning. beta = 0: every primitive with positive loss drops to weight 0;
    when all have positive loss Z = 0, and the weights are kept (the module's convention)."""
    R = ranking_preference(np.array([[3.0, 2.0, 1.0], [1.0, 2.0, 3.0], [2.0, 2.0, 2.0]]))
    fb = np.array([[0, 1], [1, 2]])
    w0 = hedge_init(3)
    assert_close(hedge_step(w0, R, fb, None, 1.0)[0].weights, [1 / 3] * 3, rtol=1e-15)
    assert_close(hedge_step(w0, R, fb, None, 0.0)[0].weights, [1, 0, 0], rtol=0)
    state, info = hedge_step(hedge_init(2), R[1:], fb, None, 0.0)  # losses 1, 1/2: Z = 0
    assert_close(info.primitive_loss, [1, 1 / 2], rtol=0)
    assert_close(state.weights, [1 / 2, 1 / 2], rtol=0)


# --- (c) a plain NumPy reference over several rounds ------------------------------------------


def numpy_allocate_weights(rounds, beta):
    """Fig. 1 in plain Python/NumPy, one round at a time: ``rounds`` is a list of
    ``(scores_or_None, R_or_None, feedback)``; each primitive is a score vector (NaN: unranked;
    turned into R_f by comparisons) or a given matrix. Returns the per-round weights, losses,
    combined losses and greedy orders, and the final weights."""
    w = None
    out = []
    for prims, F in rounds:
        Rs = []
        for p in prims:
            if p.ndim == 1:  # a ranking function's scores
                n = len(p)
                R = np.full((n, n), 0.5)
                for u in range(n):
                    for v in range(n):
                        if p[u] > p[v]:
                            R[u, v] = 1.0
                        elif p[u] < p[v]:
                            R[u, v] = 0.0
                Rs.append(R)
            else:
                Rs.append(p)
        N, n = len(Rs), Rs[0].shape[0]
        if w is None:
            w = np.full(N, 1.0 / N)
        pref = np.zeros((n, n))
        for i in range(N):
            pref += w[i] * Rs[i]
        # the greedy algorithm as the notes' pseudocode writes it
        pi = [sum(pref[x, y] - pref[y, x] for y in range(n) if y != x) for x in range(n)]
        S, order = list(range(n)), []
        while S:
            best = max(S, key=lambda x: (pi[x], -x))  # ties: lowest index
            order.append(best)
            S.remove(best)
            for x in S:
                pi[x] += pref[best, x] - pref[x, best]
        losses = np.array([sum(1 - R[u, v] for u, v in F) / len(F) for R in Rs])
        combined = sum(1 - pref[u, v] for u, v in F) / len(F)
        out.append((w.copy(), losses, combined, order))
        w = w * beta**losses
        w = w / w.sum()
    return out, w


def test_hedge_matches_numpy_reference():
    rng = np.random.default_rng(0)
    T, N, n, f, beta = 6, 4, 5, 7, 0.3
    rounds, R_rounds, fb_rounds = [], [], []
    for _ in range(T):
        prims = []
        for i in range(N):
            if i < 2:  # ranking functions, with an unranked item and a tie now and then
                s = rng.integers(0, 4, size=n).astype(float)
                s[rng.integers(n)] = np.nan
                prims.append(s)
            else:  # general preference functions in [0, 1]
                prims.append(rng.uniform(size=(n, n)))
        pairs = [tuple(rng.choice(n, size=2, replace=False)) for _ in range(f)]
        rounds.append((prims, pairs))
        R_rounds.append(
            np.stack([p if p.ndim == 2 else np.asarray(ranking_preference(p)) for p in prims])
        )
        fb_rounds.append(np.array(pairs))
    ref, w_final = numpy_allocate_weights(rounds, beta)

    state, info = hedge(np.stack(R_rounds), np.stack(fb_rounds), None, beta)
    assert_close(info.weights, np.array([r[0] for r in ref]), rtol=1e-12)
    assert_close(info.primitive_loss, np.array([r[1] for r in ref]), rtol=1e-12, atol=1e-12)
    assert_close(info.loss, np.array([r[2] for r in ref]), rtol=1e-12)
    np.testing.assert_array_equal(info.order, np.array([r[3] for r in ref]))
    assert_close(state.weights, w_final, rtol=1e-12)
    assert_close(state.cumulative_loss, sum(r[2] for r in ref), rtol=1e-12)

    # and hedge_step, one round at a time, is the same
    s = hedge_init(N)
    for t in range(T):
        s, _ = hedge_step(s, R_rounds[t], fb_rounds[t], None, beta)
    assert_close(s.weights, w_final, rtol=1e-12)


# --- (d) Theorem 1 ---------------------------------------------------------------------------


def random_sequence(rng, T, N, n, f):
    """Random primitives in [0, 1] and random feedback of 1..f pairs per round (padded to f)."""
    R = rng.uniform(size=(T, N, n, n))
    R[:, : N // 2] = rng.integers(0, 2, size=(T, N // 2, n, n))  # some 0/1 primitives
    fb = np.zeros((T, f, 2), dtype=np.int64)
    masks = np.zeros((T, f), dtype=bool)
    for t in range(T):
        k = rng.integers(1, f + 1)
        fb[t, :k] = [rng.choice(n, size=2, replace=False) for _ in range(k)]
        masks[t, :k] = True
    return R, fb, masks


def adversarial_sequence(T, n=4):
    """Two primitives, each right on alternate rounds (the best has cumulative loss ~T/2)."""
    up = np.triu(np.ones((n, n)), 1)
    R = np.stack([np.stack([up, up.T]) if t % 2 == 0 else np.stack([up.T, up]) for t in range(T)])
    fb = np.tile(np.array([[0, 1], [1, 2], [2, 3]]), (T, 1, 1))
    return R, fb, np.ones(fb.shape[:2], dtype=bool)


@pytest.mark.parametrize("beta", [0.05, 0.3, 0.6, 0.9, 0.99])
def test_theorem_1_bound(beta):
    """sum_t Loss(PREF^t, F^t) <= (ln(1/beta) min_i L_i + ln N) / (1 - beta), with
    L_i = sum_t Loss(R_i^t, F^t) and uniform w^1 (Cohen et al. Theorem 1; Freund & Schapire's
    Hedge bound). The combination's loss is the weighted mean of the primitives' (Eq. 1 is
    linear in R), which is the loss the bound is about; the greedy order's is not bounded."""
    rng = np.random.default_rng(int(beta * 100))
    cases = [random_sequence(rng, 30, 6, 5, 6) for _ in range(3)] + [adversarial_sequence(40)]
    for R, fb, masks in cases:
        N = R.shape[1]
        state, info = hedge(R, fb, masks, beta)
        mean = np.sum(np.asarray(info.weights) * np.asarray(info.primitive_loss), axis=1)
        assert_close(info.loss, mean, rtol=1e-12, atol=1e-15)
        L = np.asarray(state.cumulative_primitive_loss)
        assert_close(L, np.asarray(info.primitive_loss).sum(0), rtol=1e-12)
        bound = (math.log(1 / beta) * L.min() + math.log(N)) / (1 - beta)
        assert float(state.cumulative_loss) <= bound, (float(state.cumulative_loss), bound)


# --- (e) learning the right primitive ---------------------------------------------------------


def test_weight_concentrates_on_the_perfect_primitive():
    """One primitive ranks by the true scores, four others by random ones; each round brings
    new items and random pairs ordered by the truth. The perfect primitive never loses, the
    others lose ~1/2 a round, so after T rounds their weights are ~beta^(T/2) of its own."""
    rng = np.random.default_rng(7)
    T, N, n, f, beta, perfect = 30, 5, 8, 6, 0.5, 2
    R, fb = [], []
    for _ in range(T):
        truth = rng.normal(size=n)
        scores = rng.normal(size=(N, n))
        scores[perfect] = truth
        R.append(np.asarray(ranking_preference(scores)))
        pairs = np.array([rng.choice(n, size=2, replace=False) for _ in range(f)])
        swap = truth[pairs[:, 0]] < truth[pairs[:, 1]]
        pairs[swap] = pairs[swap][:, ::-1]
        fb.append(pairs)
    state, info = hedge(np.stack(R), np.stack(fb), None, beta)
    assert np.all(np.asarray(info.primitive_loss)[:, perfect] == 0)
    assert float(state.weights[perfect]) > 0.99
    assert int(np.argmax(info.weights[T // 2])) == perfect
    # once PREF is dominated by the perfect primitive, the greedy order is the true one
    assert float(info.order_loss[-1]) == 0.0
    last_truth = np.asarray(R[-1][perfect])
    np.testing.assert_array_equal(info.order[-1], greedy_order(last_truth))


# --- (f) padding and vmap ---------------------------------------------------------------------


def embed(rng, problem, T_max, n_max, f_max):
    """Pad one problem (R: (T, N, n, n), feedback: (T, f, 2)) to (T_max, n_max, f_max): its items
    at sorted random positions, NaN in the padded entries of R, garbage padding pairs, padded
    rounds with no valid pair. Returns the padded arrays and the positions."""
    R, fb = problem
    T, N, n, _ = R.shape
    f = fb.shape[1]
    pos = np.sort(rng.choice(n_max, size=n, replace=False))
    Rp = np.full((T_max, N, n_max, n_max), np.nan)
    Rp[np.ix_(range(T), range(N), pos, pos)] = R
    fbp = rng.integers(-3, 50, size=(T_max, f_max, 2))
    fbp[:T, :f] = pos[fb]
    masks = np.zeros((T_max, f_max), dtype=bool)
    masks[:T, :f] = True
    items = np.zeros((T_max, n_max), dtype=bool)
    items[:, pos] = True
    return Rp, fbp, masks, items, pos


@pytest.mark.slow  # 3 s or more in the fast loop
def test_vmap_over_padded_problems_equals_each_alone():
    rng = np.random.default_rng(3)
    N, beta, T_max, n_max, f_max = 3, 0.4, 5, 6, 5
    problems = []
    for T, n, f in [(4, 4, 3), (3, 5, 4)]:  # both padded in rounds, items and pairs
        R = rng.uniform(size=(T, N, n, n))
        fb = np.array([[rng.choice(n, size=2, replace=False) for _ in range(f)] for _ in range(T)])
        problems.append((R, fb))
    padded = [embed(rng, p, T_max, n_max, f_max) for p in problems]
    stacked = [np.stack([p[k] for p in padded]) for k in range(4)]

    batched = jax.vmap(hedge, in_axes=(0, 0, 0, None, 0))(*stacked[:3], beta, stacked[3])
    batched = jax.tree.map(np.asarray, batched)
    for b, ((R, fb), (*_, pos)) in enumerate(zip(problems, padded, strict=True)):
        T = R.shape[0]
        alone_state, alone = hedge(R, fb, None, beta)
        state = jax.tree.map(lambda x, b=b: x[b], batched[0])
        info = jax.tree.map(lambda x, b=b: x[b], batched[1])
        for got, want in zip(state, alone_state, strict=True):
            assert_close(got, want, rtol=1e-12, atol=1e-15)
        assert_close(info.weights[:T], alone.weights, rtol=1e-12)
        assert_close(info.loss[:T], alone.loss, rtol=1e-12)
        assert_close(info.primitive_loss[:T], alone.primitive_loss, rtol=1e-12)
        assert_close(info.order_loss[:T], alone.order_loss, rtol=1e-12)
        n = len(pos)
        np.testing.assert_array_equal(info.order[:T, :n], pos[np.asarray(alone.order)])
        assert np.all(info.loss[T:] == 0) and np.all(info.n_feedback[T:] == 0)
        assert_close(info.weights[T:], np.broadcast_to(alone_state.weights, (T_max - T, N)), rtol=0)


def test_step_is_jittable_and_hedge_does_not_recompile():
    rng = np.random.default_rng(5)
    R, fb, masks = random_sequence(rng, 4, 3, 5, 4)
    step = jax.jit(hedge_step)
    s_jit, i_jit = step(hedge_init(3), R[0], fb[0], masks[0], 0.5)
    s, i = hedge_step(hedge_init(3), R[0], fb[0], masks[0], 0.5)
    for got, want in zip((*s_jit, *i_jit), (*s, *i), strict=True):
        assert_close(got, want, rtol=1e-15)
    hedge(R, fb, masks, 0.5)
    R2, fb2, masks2 = random_sequence(rng, 4, 3, 5, 4)
    with count_compilations() as n:
        jax.block_until_ready(hedge(R2, fb2, masks2, 0.7))
    assert n[0] == 0


# --- (g) bad input ----------------------------------------------------------------------------


def _round():
    R = np.full((2, 3, 3), 0.5)
    fb = np.array([[0, 1], [1, 2]])
    return R, fb


def bad_R():
    R, fb = _round()
    R[1, 0, 2] = 1.5
    return lambda: hedge_step(hedge_init(2), R, fb, None, 0.5)


def bad_R_nan():
    R, fb = _round()
    R[0, 2, 1] = np.nan
    return lambda: hedge_step(hedge_init(2), R, fb, None, 0.5)


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: hedge_step(hedge_init(2), *_round(), None, 1.5), "beta = 1.5 is outside [0, 1]"),
        (lambda: hedge_step(hedge_init(2), *_round(), None, -0.1), "beta = -0.1 is outside"),
        (lambda: hedge_step(hedge_init(2), *_round(), None, np.nan), "beta = nan is outside"),
        (
            lambda: hedge(np.stack([_round()[0]] * 2), np.stack([_round()[1]] * 2), None, 2.0),
            "beta = 2.0",
        ),
        (bad_R(), "R[1, 0, 2] = 1.5 is outside [0, 1]"),
        (bad_R_nan(), "R[0, 2, 1] = nan is outside [0, 1]"),
        (
            lambda: hedge_step(hedge_init(2), _round()[0], np.array([[0, 1], [3, 1]]), None, 0.5),
            "feedback[1, 0] = 3 is out of range [0, 3)",
        ),
        (
            lambda: hedge_step(hedge_init(2), _round()[0], np.array([[0, -1]]), None, 0.5),
            "feedback[0, 1] = -1 is out of range [0, 3)",
        ),
        (
            lambda: hedge_step(hedge_init(2), _round()[0], np.array([[0, 1], [2, 2]]), None, 0.5),
            "feedback[1] = (2, 2) pairs an item with itself",
        ),
        (
            lambda: hedge_step(hedge_init(2), _round()[0], np.array([[0.0, 1.0]]), None, 0.5),
            "feedback must hold integer item indices, got dtype float64",
        ),
        (
            lambda: hedge_step(hedge_init(2), *_round(), None, 0.5, np.array([1, 1, 0], bool)),
            "feedback[1, 1] = 2 is a padded item (mask[2] = False)",
        ),
        (
            lambda: hedge_step(hedge_init(3), *_round(), None, 0.5),
            "state.weights has shape (3,) but R has 2 primitives",
        ),
        (
            lambda: hedge_step(hedge_init(2), _round()[0], np.array([0, 1]), None, 0.5),
            "feedback must have shape (f, 2) to match R, got (2,)",
        ),
        (
            lambda: hedge_step(hedge_init(2), *_round(), np.ones(3, bool), 0.5),
            "feedback_mask must have shape (2,) to match feedback, got (3,)",
        ),
        (
            lambda: hedge(np.stack([_round()[0]] * 2), np.array([[[0, 1]], [[1, 5]]]), None, 0.5),
            "feedback_rounds[1, 0, 1] = 5 is out of range [0, 3)",
        ),
        (lambda: combined_preference(np.ones(3) / 3, _round()[0]), "w must have shape (2,)"),
        (
            lambda: combined_preference(np.array([0.5, -0.5]), _round()[0]),
            "w[1] = -0.5 is outside [0, 1]",
        ),
        (lambda: hedge_init(0), "n_primitives = 0 must be at least 1"),
        (lambda: ranking_preference(np.array([1.0, 2.0]), np.array([1, 2])), "mask[1] = 2"),
    ],
)
def test_bad_input(call, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        call()


def test_padded_entries_are_not_checked():
    """NaN or out-of-range values in padded items' entries and padding pairs are allowed."""
    R, _ = _round()
    R[:, 2, :] = np.nan
    R[:, :, 2] = 7.0
    mask = np.array([True, True, False])
    fbp = np.array([[0, 1], [2, 2], [8, -1]])
    state, info = hedge_step(hedge_init(2), R, fbp, np.array([True, False, False]), 0.5, mask)
    assert np.all(np.isfinite(state.weights)) and int(info.n_feedback) == 1
    assert int(info.order[-1]) == 2  # the padded item is placed last
    assert jnp.isfinite(info.loss)
