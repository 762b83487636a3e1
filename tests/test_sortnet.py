"""CmpNN and SortNet (bayesrank.baselines.cmpnn, .sortnet): the comparator's symmetries for any
weights, its outputs against a plain NumPy forward pass, the bitonic sort against brute-force
enumeration of orders and against sorting by a score, the misordered comparisons against a
direct check, and the training on data with a known ranking."""

from __future__ import annotations

import itertools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from bayesrank.baselines import SortNet, cmpnn, sortnet


def sigmoid(z):
    return 1.0 / (1.0 + np.exp(-z))


def numpy_outputs(p, x, y):
    """The network written out unit by unit: hidden unit ``i`` and its dual ``i'``."""
    h = len(p.b)
    gt = lt = float(p.b_out)
    for i in range(h):
        unit = sigmoid(np.dot(p.v_x[i], x) + np.dot(p.v_y[i], y) + p.b[i])
        dual = sigmoid(np.dot(p.v_x[i], y) + np.dot(p.v_y[i], x) + p.b[i])  # weights swapped
        gt += p.w_gt[i] * unit + p.w_lt[i] * dual  # w_{i', >} = w_{i, <}
        lt += p.w_lt[i] * unit + p.w_gt[i] * dual  # w_{i', <} = w_{i, >}
    return sigmoid(gt), sigmoid(lt)


def random_params(seed, d=4, h=5):
    p = cmpnn.init(jax.random.key(seed), d, h)
    rng = np.random.default_rng(seed)  # biases away from 0, so they are tested too
    return p._replace(b=jnp.asarray(rng.normal(size=h)), b_out=jnp.asarray(rng.normal()))


def test_the_comparator_is_antisymmetric_for_any_weights():
    rng = np.random.default_rng(0)
    for seed in range(3):
        p = random_params(seed)
        X = rng.normal(size=(7, 4))
        for x, y in itertools.product(X, X):
            gt, lt = cmpnn.outputs(p, x, y)
            want = numpy_outputs(jax.tree_util.tree_map(np.asarray, p), x, y)
            np.testing.assert_allclose([gt, lt], want, rtol=1e-12)
            swapped = cmpnn.outputs(p, y, x)
            np.testing.assert_allclose(swapped, (lt, gt), rtol=1e-12)  # N_>(y, x) = N_<(x, y)
            both = float(cmpnn.preference(p, x, y) + cmpnn.preference(p, y, x))
            assert both == pytest.approx(1.0, abs=1e-14)
        np.testing.assert_allclose(cmpnn.preference(p, X[0], X[0]), 0.5, atol=1e-15)


def test_the_pair_loss_is_the_seeds_squared_error():
    p = random_params(1)
    rng = np.random.default_rng(1)
    W, L = rng.normal(size=(6, 4)), rng.normal(size=(6, 4))
    mask = np.array([True] * 4 + [False] * 2)
    errors = [
        (1 - gt) ** 2 + lt**2
        for gt, lt in (
            numpy_outputs(jax.tree_util.tree_map(np.asarray, p), w, v)
            for w, v in zip(W, L, strict=True)
        )
    ]
    np.testing.assert_allclose(cmpnn.pair_loss(p, W, L, mask), np.mean(errors[:4]), rtol=1e-12)
    assert float(cmpnn.pair_loss(p, W, L, np.zeros(6, bool))) == 0.0


def score_params(w, scale=30.0):
    """A comparator consistent with the score ``w . x``: one hidden pair, ``v_x = w``,
    ``v_y = -w``, so ``N_> - N_<`` has the sign of ``w . (x - y)``."""
    return cmpnn.CmpNNParams(
        jnp.asarray(scale * w)[None],
        jnp.asarray(-scale * w)[None],
        jnp.zeros(1),
        jnp.ones(1),
        -jnp.ones(1),
        jnp.zeros(()),
    )


def test_the_bitonic_stages_sort_every_permutation_of_eight():
    """The network's schedule sorts numbers (Batcher's 0-1 principle, here checked on every
    permutation of 8 numbers directly)."""
    stages = sortnet.bitonic_stages(8)
    assert len(stages) == 3 * 4 // 2
    for perm in itertools.permutations(range(8)):
        a = list(perm)
        for k, j in stages:
            for i in range(8):
                partner = i ^ j
                if partner > i:
                    up = (i & k) == 0
                    if (a[i] > a[partner]) == up:
                        a[i], a[partner] = a[partner], a[i]
        assert a == sorted(a)
    with pytest.raises(ValueError, match="power of two"):
        sortnet.bitonic_stages(6)


@pytest.mark.parametrize("n", [2, 5, 6])
def test_a_consistent_comparator_sorts_as_brute_force_ordering(n):
    """With a comparator consistent with a score, the sort is the one order (found by
    enumerating all ``n!``) that agrees with every pairwise decision, i.e. descending score;
    padded documents come last."""
    rng = np.random.default_rng(n)
    w = rng.normal(size=3)
    X = rng.normal(size=(n, 3))
    p = score_params(w)
    decide = {
        (a, b): float(cmpnn.preference(p, X[a], X[b])) > 0.5
        for a in range(n)
        for b in range(n)
        if a != b
    }
    agreeing = [
        order
        for order in itertools.permutations(range(n))
        if all(decide[(order[s], order[t])] for s in range(n) for t in range(s + 1, n))
    ]
    assert len(agreeing) == 1
    N = 8
    Xp = np.zeros((N, 3))
    Xp[:n] = X
    mask = np.arange(N) < n
    result = sortnet.comparator_sort(p, jnp.asarray(Xp), jnp.asarray(mask))
    order = np.asarray(result.order)
    assert tuple(order[:n]) == agreeing[0]
    assert tuple(order[:n]) == tuple(np.argsort(-(X @ w), kind="stable"))
    assert set(order[n:]) == set(range(n, N))
    scores = sortnet.sort_queries(p, [X])[0]
    np.testing.assert_array_equal(np.argsort(-scores, kind="stable"), order[:n])


def test_the_misordered_comparisons_are_those_against_the_grades():
    """Each recorded comparison is checked directly: its two documents have different grades,
    and the sort's decision put the worse one first."""
    rng = np.random.default_rng(3)
    p = random_params(3, d=3, h=4)
    X = rng.normal(size=(16, 3))
    grades = rng.integers(0, 3, 16).astype(float)
    mask = np.arange(16) < 13
    result = sortnet.comparator_sort(p, jnp.asarray(X), jnp.asarray(mask), jnp.asarray(grades))
    errors, pairs = np.asarray(result.errors), np.asarray(result.pairs)
    assert errors.shape == (len(sortnet.bitonic_stages(16)), 16) and errors.any()
    for s, i in zip(*np.nonzero(errors), strict=True):
        better, worse = pairs[s, i]
        assert mask[better] and mask[worse] and grades[better] > grades[worse]
        # the comparator preferred the worse one (no exact 1/2 here)
        assert float(cmpnn.preference(p, X[worse], X[better])) > 0.5


@pytest.mark.slow
def test_sortnet_learns_a_ranking_from_its_own_errors():
    """Algorithm 1 on queries graded by a linear score: the validation MAP of the kept network
    is near 1, better than the random network's, and the pair sets only grow."""
    rng = np.random.default_rng(0)
    w = rng.normal(size=4)

    def query(n):
        X = rng.uniform(size=(n, 4))
        s = X @ w
        return X, np.digitize(s, np.quantile(s, [0.6, 0.85]))

    train = [query(int(rng.integers(10, 30))) for _ in range(12)]
    vali = [query(20) for _ in range(4)]
    params, info = sortnet.fit(jax.random.key(1), train, vali, n_hidden=4, max_iter=6, n_steps=60)
    assert info.vali_map[info.best] == max(info.vali_map) and info.vali_map[info.best] > 0.95
    assert info.vali_map[info.best] > info.vali_map[0]
    assert np.all(np.diff(info.train_pairs) >= 0) and np.all(np.diff(info.vali_pairs) >= 0)
    # the kept network is the one whose sort scored that validation MAP
    from bayesrank.metrics import average_precision

    scores = sortnet.sort_queries(params, [x for x, _ in vali])
    aps = [float(average_precision(s, g)) for s, (_, g) in zip(scores, vali, strict=True)]
    assert np.mean(aps) == pytest.approx(info.vali_map[info.best], abs=1e-12)
    # the estimator: the same computation, validated on held-out training queries
    X = np.concatenate([x for x, _ in train])
    y = np.concatenate([g for _, g in train])
    qid = np.repeat(np.arange(len(train)), [len(x) for x, _ in train])
    model = SortNet(n_hidden=4, max_iter=6, n_steps=60).fit(X, y, qid)
    Xv = np.concatenate([x for x, _ in vali])
    yv = np.concatenate([g for _, g in vali])
    qv = np.repeat(np.arange(len(vali)), 20)
    assert model.score(Xv, yv, qv) > 0.9
    scores = model.predict(Xv, qv)
    assert sorted(scores[qv == 0]) == list(range(1, 21))  # places 1..n within each query


@pytest.mark.slow  # 3 s or more in the fast loop
def test_bad_input_names_the_culprit():
    X = np.random.default_rng(0).normal(size=(6, 2))
    y = np.array([0, 1, 2, 0, 1, 2])
    with pytest.raises(ValueError, match="n_hidden"):
        SortNet(n_hidden=0).fit(X, y)
    with pytest.raises(ValueError, match="validation_fraction"):
        SortNet(validation_fraction=1.0).fit(X, y)
    with pytest.raises(ValueError, match="not fitted"):
        SortNet().predict(X)
    bad = X.copy()
    bad[2, 1] = np.nan
    with pytest.raises(ValueError, match=r"X\[2, 1\] = nan"):
        SortNet().fit(bad, y)
    model = SortNet(max_iter=1, n_steps=2).fit(X, y)
    with pytest.raises(ValueError, match="3 features, but SortNet is expecting 2"):
        model.predict(np.zeros((4, 3)))
