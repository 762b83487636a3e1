"""The jit policy, by counting compilations (``tests/helpers.py``), never by timing.

Every public façade runs module-level jitted programs at bucketed shapes: a second call with the
same shapes compiles nothing, and a new problem whose sizes fall in the same buckets (a new random
split of the same query) compiles nothing either.
"""

import jax
import numpy as np
import pytest
from helpers import count_compilations

from bayesrank import (
    BFGS,
    RBF,
    XPGP,
    Independent,
    Optax,
    PreferenceProblem,
    RegularizedLaplacian,
    XPGPModel,
)
from bayesrank.data.batch import bucket_size
from bayesrank.inference import ep


def random_problem(seed, n=40, m=80, d=3):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    u = X[:, 0] + 0.3 * rng.normal(size=n)
    i = rng.integers(0, n, m)
    j = (i + rng.integers(1, n, m)) % n
    pairs = np.where((u[i] > u[j])[:, None], np.c_[i, j], np.c_[j, i])
    W = (rng.uniform(size=(n, n)) < 0.1).astype(float)
    W = np.triu(W, 1) + np.triu(W, 1).T
    return X, W, pairs


def test_bucket_size_rounds_up_within_a_sixteenth():
    from bayesrank.data.batch import MIN_BUCKET, SMALLEST

    for size in range(0, 3000, 7):
        b = bucket_size(size)
        assert b >= max(size, SMALLEST)
        assert b - size <= (SMALLEST if size <= SMALLEST else max(MIN_BUCKET, size / 16))
        assert bucket_size(b) == b  # a bucket is its own bucket
    assert {bucket_size(s) for s in range(SMALLEST + 1)} == {SMALLEST}  # small sizes share one


@pytest.mark.slow  # 3 s or more in the fast loop
def test_ep_fit_second_call_and_new_split_compile_nothing():
    X, _, pairs = random_problem(0)
    K = np.asarray(RBF(1.0, 0.7)(X)) + 0.1 * np.eye(len(X))
    first = ep.fit(K, pairs)
    with count_compilations() as n:
        again = ep.fit(K, pairs)
        other = ep.fit(K[:37, :37], random_problem(1, n=37, m=75)[2])  # same buckets (40, 80)
        ep.fit(K, pairs, tol=1e-9, damping=0.7, max_iter=50)  # floats and limits are not static
    assert n[0] == 0
    np.testing.assert_array_equal(again.mean, first.mean)
    assert other.mean.shape == (37,) and other.sites.tau.shape == (75,)


@pytest.mark.slow  # 3 s or more in the fast loop
def test_padded_fit_equals_the_core_on_the_unpadded_problem():
    X, _, pairs = random_problem(2, n=37, m=75)
    K = np.asarray(RBF(1.0, 0.7)(X)) + 0.1 * np.eye(len(X))
    got = ep.fit(K, pairs, tol=1e-10)
    ref = jax.jit(lambda K, p: ep.fit_core(K, p, tol=1e-10))(K, pairs)
    tol = 1e-10 if jax.config.jax_enable_x64 else 1e-4
    np.testing.assert_allclose(got.mean, ref.mean, atol=tol)
    np.testing.assert_allclose(got.cov, ref.cov, atol=tol)
    np.testing.assert_allclose(got.log_evidence, ref.log_evidence, rtol=tol)
    assert int(got.n_iter) == int(ref.n_iter)


@pytest.mark.slow
def test_model_fit_and_prediction_compile_once_per_bucket():
    prior = XPGP(
        RBF(1.0, 0.7), (RegularizedLaplacian(),), np.array([1.0, 0.5]), entity=Independent(0.3)
    )
    X, W, pairs = random_problem(3)
    model = XPGPModel(prior)
    post = model.fit(PreferenceProblem.create(pairs, X=X, relations=[W]))
    post.predict_pairs(pairs[:5])
    with count_compilations() as n:
        for seed in (4, 5, 6):  # new splits of similar size: the same buckets
            X, W, pairs = random_problem(seed, n=34 + seed, m=72 + seed)
            post = model.fit(PreferenceProblem.create(pairs, X=X, relations=[W]))
            post.predict_pairs(pairs[:7])
    assert n[0] == 0
    with count_compilations() as n:  # test sets of every size up to 1000: one program an octave
        for p in range(1, 1001, 13):
            post.predict_pairs(np.zeros((p, 2), np.int64))
    assert n[0] <= 7  # 8, 16, ..., 1024 (8 was compiled above)


def test_evaluate_queries_second_call_compiles_nothing():
    from bayesrank.data.sample import load_sample
    from bayesrank.evaluation import evaluate_queries

    queries = load_sample()
    rng = np.random.default_rng(0)
    first = evaluate_queries(queries, [rng.normal(size=q.n_docs) for q in queries])
    with count_compilations() as n:
        again = evaluate_queries(queries, [rng.normal(size=q.n_docs) for q in queries])
    assert n[0] == 0
    assert first["n_queries"] == again["n_queries"] == len(queries)


@pytest.mark.slow
def test_fit_hyperparameters_second_call_compiles_nothing():
    from bayesrank.learning import fit_hyperparameters

    prior = XPGP(RBF(), (), entity=Independent(0.3))
    X, _, pairs = random_problem(7, n=20, m=40)
    problem = PreferenceProblem.create(pairs, X=X)
    fit_hyperparameters(prior, problem, method="evidence", optimizer=BFGS(max_steps=4))
    X, _, pairs = random_problem(8, n=19, m=38)  # a new split: the same buckets
    with count_compilations() as n:
        fit = fit_hyperparameters(
            prior, PreferenceProblem.create(pairs, X=X), optimizer=BFGS(max_steps=4)
        )
    assert n[0] == 0
    assert fit.posteriors.mean.shape == (1, 19)


@pytest.mark.slow
def test_a_new_optax_optimiser_of_the_same_kind_compiles_nothing():
    """An optax transformation is static (a pair of closures): a freshly built ``adam(0.05)``
    is equal by structure to the last one, so it reuses the compiled steps; ``adam(0.1)``
    (another captured step size) is another program."""
    import optax

    from bayesrank.learning import fit_hyperparameters

    prior = XPGP(RBF(), (), entity=Independent(0.3))
    X, _, pairs = random_problem(9, n=20, m=40)
    problem = PreferenceProblem.create(pairs, X=X)
    first = fit_hyperparameters(prior, problem, optimizer=Optax(optax.adam(0.05), steps=3))
    with count_compilations() as n:  # a new but equal Optax and transformation
        again = fit_hyperparameters(prior, problem, optimizer=Optax(optax.adam(0.05), steps=3))
    assert n[0] == 0
    np.testing.assert_array_equal(again.trace.objective, first.trace.objective)
    with count_compilations() as n:
        fit_hyperparameters(prior, problem, optimizer=Optax(optax.adam(0.1), steps=3))
    assert n[0] > 0
