"""Compile once, fit many: new random splits of a real query, and a long loop over problems of
varied sizes, counted in compilations (``tests/helpers.py``) and memory maps, never timed.
"""

from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from helpers import count_compilations

from bayesrank import (
    BFGS,
    RBF,
    XPGP,
    Independent,
    PreferenceProblem,
    RegularizedLaplacian,
    XPGPModel,
)
from bayesrank.data.graphs import feature_similarity_graph
from bayesrank.data.letor import load_letor
from bayesrank.data.pairs import pairs_from_grades, split_pairs
from bayesrank.learning import fit_hyperparameters


@pytest.fixture(scope="module")
def ohsumed_query(shared_data):
    queries = load_letor(shared_data / "OHSUMED/QueryLevelNorm/Fold1/train.txt.gz")
    q = next(q for q in queries if 120 <= q.n_docs <= 160)
    return q, feature_similarity_graph(q.X)


@pytest.mark.shared_data
@pytest.mark.parametrize("learn", [False, True], ids=["fixed-prior", "learned"])
@pytest.mark.slow
def test_five_splits_of_a_query_compile_at_most_once(ohsumed_query, learn):
    """Five random splits of one OHSUMED query, 100 known pairs each: the first fit compiles,
    the other four reuse its programs (the entities a split touches never set a shape)."""
    q, W = ohsumed_query
    pairs = pairs_from_grades(q.grades)
    prior = XPGP(RBF(1.0, 0.5), (RegularizedLaplacian(),), jnp.array([2.0, 1.0]))
    model = XPGPModel(prior)
    options = {"learn_hyperparameters": True, "optimizer": BFGS(max_steps=3)} if learn else {}
    counts = []
    for seed in range(5):
        known, held_out = split_pairs(jax.random.key(seed), pairs, n_known=100)
        problem = PreferenceProblem.create(known, X=q.X, relations=[W])
        with count_compilations() as n:
            posterior = model.fit(problem, **options)
            posterior.predict_pairs(held_out[: 140 + 25 * seed])  # sizes of one bucket (256)
        counts.append(n[0])
        assert np.all(np.isfinite(np.asarray(posterior.mean)))
    assert counts[0] > 0
    assert counts[1:] == [0, 0, 0, 0], counts


@pytest.mark.slow
def test_per_query_batch_equals_single_fits_and_compiles_once():
    """A per-query fit over a padded batch equals each query's own fit; a second batch of the
    same sizes compiles nothing."""
    rng = np.random.default_rng(3)

    def problem(n, m):
        X = rng.normal(size=(n, 2))
        u = X[:, 0] + 0.5 * rng.normal(size=n)
        i = rng.integers(0, n, m)
        j = (i + rng.integers(1, n, m)) % n
        return PreferenceProblem.create(
            np.where((u[i] > u[j])[:, None], np.c_[i, j], np.c_[j, i]), X=X
        )

    prior = XPGP(RBF(), (), entity=Independent(0.3))
    problems = [problem(14, 30), problem(20, 40), problem(9, 25)]
    joint = fit_hyperparameters(prior, problems, method="evidence", per_query=True)
    for b, p in enumerate(problems):
        single = fit_hyperparameters(prior, p, method="evidence")
        np.testing.assert_allclose(
            joint.prior.attribute.rho[b], single.prior.attribute.rho, rtol=1e-6
        )
        np.testing.assert_allclose(joint.prior.weights[b], single.prior.weights, rtol=1e-6)
    again = [problem(14, 30), problem(20, 40), problem(9, 25)]
    with count_compilations() as n:
        fit_hyperparameters(prior, again, method="evidence", per_query=True)
    assert n[0] == 0


def memory_maps() -> int:
    path = Path("/proc/self/maps")
    return len(path.read_text().splitlines()) if path.exists() else 0


@pytest.mark.slow
def test_two_hundred_problems_of_varied_sizes_stay_bounded():
    """Fit (and predict) 200 problems of varied sizes in one process: the compiled programs, and
    the memory maps they hold, stop growing once every size bucket has been met (the crash this
    guards against: ~800 maps per program, up to the system's limit, after ~16 problems)."""
    rng = np.random.default_rng(0)
    prior = XPGP(RBF(1.0, 0.7), (), jnp.array([1.5]), entity=Independent(0.3))
    model = XPGPModel(prior)
    sizes = rng.integers(5, 61, size=200)
    compiles, maps = [], []
    for k, n in enumerate(sizes):
        X = rng.normal(size=(n, 3))
        m = 2 * int(n)
        i = rng.integers(0, n, m)
        j = (i + rng.integers(1, n, m)) % n
        problem = PreferenceProblem.create(np.c_[i, j], X=X)
        with count_compilations() as c:
            post = model.fit(problem)
            post.predict_pairs(np.c_[j[: 1 + k % 40], i[: 1 + k % 40]])
        compiles.append(c[0])
        if k in (99, 199):
            maps.append(memory_maps())
        assert bool(post.result.converged), (n, m)
    distinct = len(set(sizes.tolist()))
    assert sum(compiles) < distinct  # bucketed: far fewer programs than sizes
    assert sum(compiles[100:]) <= 2, compiles  # the second hundred reuses the first's programs
    if maps[0]:
        assert maps[1] - maps[0] < 0.05 * maps[0], maps
