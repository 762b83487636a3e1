"""Dataset summary and padding helpers against brute force."""

import itertools

import numpy as np
import pytest

from bayesrank.data.batch import pad_stack
from bayesrank.data.letor import Query
from bayesrank.data.summary import count_preference_pairs, summarize


def brute_force_pairs(grades):
    return sum(1 for i, j in itertools.permutations(range(len(grades)), 2) if grades[i] > grades[j])


@pytest.mark.parametrize("seed", range(20))
def test_count_preference_pairs_against_brute_force(seed):
    rng = np.random.default_rng(seed)
    grades = rng.integers(-1, 4, size=rng.integers(1, 25))
    assert count_preference_pairs(grades) == brute_force_pairs(grades)


def make_query(qid, grades):
    n = len(grades)
    return Query(
        qid, np.zeros((n, 2)), np.asarray(grades), np.array([""] * n), np.arange(n), np.arange(n)
    )


def test_summarize_hand_worked():
    # grades [2, 0, 1]: pairs 2>0, 2>1, 1>0 = 3; [0, 0]: none and no relevant document.
    s = summarize([make_query("a", [2, 0, 1]), make_query("b", [0, 0])])
    assert s.n_queries == 2 and s.n_docs == 5 and s.n_features == 2
    assert s.label_counts == {0: 3, 1: 1, 2: 1}
    assert s.docs_per_query == (2, 2.5, 3)
    assert s.pairs_per_query == (0, 1.5, 3) and s.pairs_total == 3
    assert s.queries_without_relevant == 1
    with pytest.raises(ValueError, match="no queries"):
        summarize([])


def test_pad_stack():
    stacked, mask = pad_stack([np.ones((2, 3)), np.full((4, 3), 2.0)], fill=-1)
    assert stacked.shape == (2, 4, 3)
    np.testing.assert_array_equal(mask, [[1, 1, 0, 0], [1, 1, 1, 1]])
    assert (stacked[0, 2:] == -1).all() and (stacked[1] == 2).all()
    with pytest.raises(ValueError, match="shorter than the longest"):
        pad_stack([np.ones(3)], length=2)
    with pytest.raises(ValueError, match=r"array 1 has shape \(2, 2\)"):
        pad_stack([np.ones((2, 3)), np.ones((2, 2))])
