"""The entity-level split (``bayesrank.data.study.split_entities``): its promises checked by
counting, pair by pair, on random queries (graded and with explicit comparisons)."""

import itertools

import jax
import numpy as np
import pytest

from bayesrank.data.pairs import pairs_from_grades
from bayesrank.data.study import split_entities

KEEP = (0, 1, 2, 5, 10)


def _graded(seed, n=60, levels=3):
    grades = np.random.default_rng(seed).integers(0, levels, n)
    return pairs_from_grades(grades)


def _compared(seed, n=50, m=400):
    rng = np.random.default_rng(seed)
    pairs = rng.integers(0, n, (m, 2))
    return np.unique(pairs[pairs[:, 0] != pairs[:, 1]], axis=0)  # (i, j) and (j, i) both kept


def _multiset(rows):
    return sorted(map(tuple, np.asarray(rows).tolist()))


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("make", [_graded, _compared])
def test_its_promises_pair_by_pair(make, seed):
    pairs = make(seed)
    n = int(pairs.max()) + 1
    split = split_entities(jax.random.PRNGKey(seed), pairs, n, held_out=0.25, keep=KEEP)
    held = set(split.held.tolist())
    judged = set(np.unique(pairs).tolist())
    assert held <= judged and len(held) == round(0.25 * len(judged))
    involves = [bool({i, j} & held) for i, j in pairs.tolist()]
    # every pair that involves no held-out entity trains at every j; a test pair always
    # involves a held-out entity
    among_others = _multiset(pairs[~np.array(involves)])
    assert all(i in held or j in held for i, j in split.test.tolist())
    for j in KEEP:
        known = split.known[j]
        counts = {e: 0 for e in held}
        for a, b in known.tolist():
            assert not (a in held and b in held)  # a pair of two held-out entities is not kept
            for e in (a, b):
                if e in held:
                    counts[e] += 1
        # no held-out entity has more than j training judgements, and each keeps j where it can
        for e, c in counts.items():
            available = sum(1 for a, b in pairs.tolist() if (a == e) != (b == e) and
                            ({a, b} - {e}).isdisjoint(held))  # fmt: skip
            assert c == min(j, available), (e, c, j, available)
        extra = [row for row in known.tolist() if set(row) & held]
        assert _multiset([r for r in known.tolist() if not set(r) & held]) == among_others
        # the kept pairs and the test pairs never overlap; with the largest j they partition
        # the pairs that involve a held-out entity
        if j == max(KEEP):
            assert _multiset(extra + split.test.tolist()) == _multiset(pairs[np.array(involves)])
        assert not set(map(tuple, extra)) & set(map(tuple, split.test.tolist()))
    # nested: what an entity keeps at j it keeps at every larger j
    for small, large in itertools.pairwise(KEEP):
        assert set(map(tuple, split.known[small].tolist())) <= set(
            map(tuple, split.known[large].tolist())
        )


def test_reproducible_from_its_key_and_redrawn_by_another():
    pairs = _graded(7)
    n = int(pairs.max()) + 1
    a = split_entities(jax.random.PRNGKey(3), pairs, n)
    b = split_entities(jax.random.PRNGKey(3), pairs, n)
    np.testing.assert_array_equal(a.held, b.held)
    np.testing.assert_array_equal(a.test, b.test)
    for j in KEEP:
        np.testing.assert_array_equal(a.known[j], b.known[j])
    others = [split_entities(jax.random.PRNGKey(s), pairs, n).held for s in range(4, 9)]
    assert any(not np.array_equal(a.held, h) for h in others)


def test_every_judged_entity_is_held_out_equally_often():
    """Over 400 keys each of 20 judged entities is held out with probability 5/20: the counts
    lie within 4.5 binomial standard deviations of 100 (a test that fails for a biased draw,
    such as the first entities always)."""
    pairs = pairs_from_grades(np.arange(20) % 4)
    hits = np.zeros(20)
    for s in range(400):
        hits[split_entities(jax.random.PRNGKey(s), pairs, 20, held_out=5).held] += 1
    sd = np.sqrt(400 * 0.25 * 0.75)
    assert np.all(np.abs(hits - 100) < 4.5 * sd), hits


def test_n_known_subsamples_the_other_entities_pairs():
    pairs = _graded(2)
    n = int(pairs.max()) + 1
    split = split_entities(jax.random.PRNGKey(0), pairs, n, keep=(0, 3), n_known=40)
    held = set(split.held.tolist())
    base = [r for r in split.known[0].tolist() if not set(r) & held]
    assert len(base) == len(split.known[0]) == 40
    assert set(map(tuple, base)) <= set(map(tuple, pairs.tolist()))
    assert [r for r in split.known[3].tolist() if not set(r) & held] == base


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"held_out": 0.0}, "held_out=0.0 must be a share"),
        ({"held_out": 1.5}, "held_out=1.5 must be a share"),
        ({"held_out": "a"}, "held_out must be a share"),
        ({"held_out": 59}, "leave at least 2"),
        ({"keep": ()}, "keep is empty"),
        ({"keep": (0, -1)}, "keep"),
        ({"keep": 3}, "keep must be a sequence"),
        ({"n_known": 10**6}, "n_known=1000000 exceeds"),
    ],
)
def test_bad_settings_are_named(kwargs, match):
    pairs = pairs_from_grades(np.arange(60) % 3)
    with pytest.raises(ValueError, match=match):
        split_entities(jax.random.PRNGKey(0), pairs, 60, **kwargs)


def test_an_entity_outside_the_query_is_named():
    with pytest.raises(ValueError, match=r"pairs row 1: \[2, 7\] is outside 0..4"):
        split_entities(jax.random.PRNGKey(0), [[0, 1], [2, 7], [3, 4]], 5, held_out=1)
