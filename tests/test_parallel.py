"""The one batching path: collection façades against the single-query façades, the query map
against a plain loop, and the persistent compilation cache across processes."""

import dataclasses
import itertools
import json
import os
import subprocess
import sys
import textwrap

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from bayesrank import (
    EP,
    NUTS,
    RBF,
    XPGP,
    Independent,
    PreferenceProblem,
    RegularizedLaplacian,
    XPGPModel,
    parallel,
)


def problems(seed, sizes):
    rng = np.random.default_rng(seed)
    out = []
    for n, m in sizes:
        X = rng.normal(size=(n, 2))
        W = (rng.uniform(size=(n, n)) < 0.2).astype(float)
        W = np.triu(W, 1) + np.triu(W, 1).T
        u = X[:, 0] + 0.5 * rng.normal(size=n)
        i = rng.integers(0, n, m)
        j = (i + rng.integers(1, n, m)) % n
        pairs = np.where((u[i] > u[j])[:, None], np.c_[i, j], np.c_[j, i])
        out.append(PreferenceProblem.create(pairs, X=X, relations=[W]))
    return out


PRIOR = XPGP(
    RBF(1.0, 0.8), (RegularizedLaplacian(1.0, 0.7),), jnp.array([1.3, 0.6]), entity=Independent(0.2)
)


@pytest.mark.slow
def test_fit_ep_over_a_collection_equals_each_problems_own_fit():
    """Sizes in three buckets, merged into two size groups (``plan.merge_groups``; one padded
    with a repeated query): each posterior equals XPGPModel.fit on its problem alone."""
    probs = problems(0, [(12, 20), (30, 70), (13, 22), (50, 40), (11, 19)])
    posts = parallel.fit_ep(PRIOR, probs, engine=EP(tol=1e-10))
    tol = 1e-8 if jax.config.jax_enable_x64 else 2e-3
    for p, post in zip(probs, posts, strict=True):
        ref = XPGPModel(PRIOR, EP(tol=1e-10)).fit(p)
        assert post.mean.shape == (p.n,) and post.sites.tau.shape == (len(p.pairs),)
        np.testing.assert_allclose(post.mean, ref.mean, atol=tol)
        np.testing.assert_allclose(post.cov, ref.cov, atol=tol)
        np.testing.assert_allclose(post.log_evidence, ref.log_evidence, rtol=tol)
    preds = parallel.predict_pairs(posts, [p.pairs[:5] for p in probs])
    for p, post, pred in zip(probs, posts, preds, strict=True):
        np.testing.assert_allclose(pred.prob, post.predict_pairs(p.pairs[:5]).prob)


def outcome_problems(seed):
    """Problems with ties, weights and grades beside their pairs (and one of pairs only), their
    judgements drawn from the tie and ordinal models with a graph on the entities."""
    rng = np.random.default_rng(seed)
    out = []
    for n, kind in ((9, "ties"), (16, "grades"), (10, "pairs"), (26, "both")):
        base = problems(int(rng.integers(1000)), [(n, 3 * n)])[0]
        i = rng.integers(0, n, 6)
        ties = np.c_[i, (i + rng.integers(1, n, 6)) % n]
        graded = np.c_[rng.permutation(n)[: n // 2], rng.integers(0, 3, n // 2)]
        extra = {
            "ties": dict(ties=ties, weights=rng.integers(1, 4, len(base.pairs)).astype(float)),
            "grades": dict(graded=graded),
            "pairs": {},
            "both": dict(ties=ties, graded=graded, grade_weights=np.full(len(graded), 2.0)),
        }[kind]
        out.append(
            PreferenceProblem.create(base.pairs, X=base.X, relations=base.relations, **extra)
        )
    return out


OUTCOME_PRIOR = dataclasses.replace(
    PRIOR, margin=jnp.asarray(0.3), threshold=jnp.asarray(-0.5), threshold_gaps=jnp.array([1.0])
)


@pytest.mark.slow
def test_collections_with_ties_weights_and_grades_equal_each_problems_own_fit():
    """Ties, weights and grades (with their anchors) in ``fit_ep`` and ``fit_predict``: each
    query's posterior, evidence and test-pair outcome probabilities equal XPGPModel.fit's on
    the problem alone (which the engines' own tests check against quadrature and NUTS)."""
    probs = outcome_problems(0)
    tests = [np.array([[0, 1], [2, 3], [4, 1]]) for _ in probs]
    posts = parallel.fit_ep(OUTCOME_PRIOR, probs, engine=EP(tol=1e-10))
    preds = parallel.fit_predict(OUTCOME_PRIOR, probs, tests, engine=EP(tol=1e-10))
    tol = 1e-8 if jax.config.jax_enable_x64 else 2e-3
    for q, (p, post) in enumerate(zip(probs, posts, strict=True)):
        ref = XPGPModel(OUTCOME_PRIOR, EP(tol=1e-10)).fit(p)
        assert post.mean.shape == (p.n,) and post.sites.tau.shape == (len(p.rows),)
        np.testing.assert_allclose(post.mean, ref.mean, atol=tol)
        np.testing.assert_allclose(post.log_evidence, ref.log_evidence, rtol=tol)
        assert preds.mean[q].shape == (p.n,)
        np.testing.assert_allclose(preds.mean[q], ref.mean, atol=tol)
        np.testing.assert_allclose(preds.var[q], np.diag(ref.cov), atol=tol)
        np.testing.assert_allclose(preds.log_evidence[q], ref.log_evidence, rtol=tol)
        want = ref.predict_outcomes(tests[q])
        got = preds.outcomes[q]
        for field in ("win", "tie", "loss"):
            np.testing.assert_allclose(getattr(got, field), getattr(want, field), atol=tol)
    pairs_only = parallel.fit_predict(PRIOR, probs[2:3], tests[2:3])
    assert pairs_only.outcomes is None


@pytest.mark.slow
def test_sample_nuts_over_a_collection_agrees_with_ep():
    """``parallel.sample_nuts`` (its import of the sampler was broken and nothing ran it): two
    size groups, each posterior over its own entities, its mean within Monte Carlo reach of the
    other engine's (EP at the same prior; they differ by EP's small bias, a few hundredths
    here), its sds within 15% of EP's (EP's are a few percent smaller, and 800 draws give an sd
    to about 4%)."""
    probs = problems(3, [(8, 14), (21, 30)])
    engine = NUTS(num_warmup=300, num_samples=400, num_chains=2)
    posts = parallel.sample_nuts(jax.random.key(5), PRIOR, probs, engine=engine)
    for p, post in zip(probs, posts, strict=True):
        ref = XPGPModel(PRIOR).fit(p)
        assert post.mean.shape == (p.n,)
        np.testing.assert_allclose(post.mean, ref.mean, atol=0.12)
        np.testing.assert_allclose(np.sqrt(np.diag(post.cov)), np.sqrt(np.diag(ref.cov)), rtol=0.15)


@pytest.mark.parametrize("method", ["map", "vmap"])
def test_map_queries_equals_a_loop(method):
    rng = np.random.default_rng(1)
    A = rng.normal(size=(4, 6, 6))
    K = A @ np.swapaxes(A, 1, 2) + np.eye(6)
    got = jax.jit(lambda K: parallel.map_queries(jnp.linalg.cholesky, K, method=method))(K)
    for b in range(4):
        np.testing.assert_allclose(got[b], np.linalg.cholesky(K[b]), atol=1e-10)
    with pytest.raises(ValueError, match="method"):
        parallel.query_map_method("pmap")


@pytest.mark.parametrize("n", [1, 7, 16, 17, 40])
def test_map_in_batches_equals_a_loop_with_one_body(n):
    """Every item's result as a loop of single calls gives it, pytrees and PRNG keys included;
    one copy of the body in the program, where ``lax.map``'s remainder makes a second (17 and
    40 items at 16 a time)."""
    from bayesrank.querymap import map_in_batches

    def fn(item):
        x, key = item
        return {"s": jnp.sin(x) @ x, "d": x * jax.random.normal(key, x.shape)}

    xs = (np.random.default_rng(n).normal(size=(n, 3)), jax.random.split(jax.random.key(n), n))
    got = jax.jit(lambda xs: map_in_batches(fn, xs, 16))(xs)
    for b in range(n):
        want = fn((xs[0][b], xs[1][b]))
        np.testing.assert_allclose(got["s"][b], want["s"], rtol=1e-12)
        np.testing.assert_allclose(got["d"][b], want["d"], rtol=1e-12)
    assert got["d"].shape == (n, 3)
    ours = str(jax.make_jaxpr(lambda xs: map_in_batches(fn, xs, 16))(xs))
    theirs = str(jax.make_jaxpr(lambda xs: jax.lax.map(fn, xs, batch_size=16))(xs))
    assert ours.count(" sin ") == 1
    assert theirs.count(" sin ") == (2 if n > 16 and n % 16 else 1)


def test_query_map_method_follows_the_backend():
    expected = "map" if jax.default_backend() == "cpu" else "vmap"
    assert parallel.query_map_method() == expected


def test_problem_validation():
    with pytest.raises(ValueError, match="empty"):
        parallel.fit_ep(PRIOR, [])
    with pytest.raises(ValueError, match=r"problems\[1\]"):
        parallel.fit_ep(PRIOR, [problems(0, [(5, 4)])[0], "not a problem"])


SCRIPT = textwrap.dedent(
    """
    import json, sys
    import jax
    jax.config.update("jax_enable_x64", True)
    import numpy as np
    import bayesrank
    from bayesrank import RBF, XPGP, PreferenceProblem, XPGPModel
    sys.path.insert(0, {tests!r})
    from helpers import count_compilations
    bayesrank.runtime.enable_compilation_cache({cache!r})
    rng = np.random.default_rng(0)
    X = rng.normal(size=(20, 2))
    problem = PreferenceProblem.create([[0, 1], [2, 3], [4, 5], [1, 7]], X=X)
    with count_compilations() as n:
        post = XPGPModel(XPGP(RBF(1.0, 0.5))).fit(problem)
        post.predict_pairs([[0, 2]])
    print(json.dumps({{"compiled": n[0] - n[1], "loaded": n[1], "mean": float(post.mean[0])}}))
    """
)


@pytest.mark.slow
def test_a_second_process_with_the_cache_compiles_nothing(tmp_path):
    """``runtime.enable_compilation_cache``: the second process loads every program from disk."""
    tests = os.path.dirname(os.path.abspath(__file__))
    code = SCRIPT.format(tests=tests, cache=str(tmp_path / "cache"))
    runs = []
    for _ in range(2):
        out = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, check=True
        )
        runs.append(json.loads(out.stdout.strip().splitlines()[-1]))
    assert runs[0]["compiled"] > 0 and runs[0]["loaded"] == 0
    assert runs[1]["compiled"] == 0 and runs[1]["loaded"] == runs[0]["compiled"], runs
    assert runs[1]["mean"] == runs[0]["mean"]


@pytest.mark.slow
def test_baselines_and_metrics_per_query_equal_the_single_query_cores():
    from bayesrank.baselines import rankboost, ranksvm
    from bayesrank.metrics import pairwise_error_from_scores

    rng = np.random.default_rng(4)
    Xs, pairs_list = [], []
    for n, m in ((15, 30), (22, 50), (9, 12)):
        X = rng.normal(size=(n, 3))
        u = X @ np.array([1.0, -0.5, 0.2]) + 0.3 * rng.normal(size=n)
        i = rng.integers(0, n, m)
        j = (i + rng.integers(1, n, m)) % n
        Xs.append(X)
        pairs_list.append(np.where((u[i] > u[j])[:, None], np.c_[i, j], np.c_[j, i]))
    svm = parallel.fit_ranksvm(Xs, pairs_list, C=0.5)
    boost, _ = parallel.fit_rankboost(Xs, pairs_list, n_rounds=5, n_thresholds=4)
    errors = parallel.pairwise_errors([X @ w for X, w in zip(Xs, svm.w, strict=True)], pairs_list)
    tol = 1e-8 if jax.config.jax_enable_x64 else 1e-4
    for q, (X, p) in enumerate(zip(Xs, pairs_list, strict=True)):
        ref = ranksvm.fit_linear(X, p, 0.5)
        np.testing.assert_allclose(svm.w[q], ref.w, atol=tol)
        model, _ = rankboost.fit(X, p, rankboost.candidate_thresholds(X, 4), 5)
        np.testing.assert_allclose(boost.alphas[q], model.alphas, atol=tol)
        np.testing.assert_array_equal(boost.features[q], model.features)
        ref_error = pairwise_error_from_scores(X @ np.asarray(svm.w[q]), p)
        np.testing.assert_allclose(errors[q], ref_error, atol=1e-12)
    with pytest.raises(ValueError, match=r"pairs\[1\]\[0, 0\]"):
        parallel.fit_ranksvm(Xs, [pairs_list[0], pairs_list[1] + 100, pairs_list[2]])


def _exhaustive_merge(keys, slack):
    """``plan.merge_groups`` by enumeration: every cut of the sorted distinct keys into
    consecutive runs, the fewest runs within ``slack`` of no merging, the least work among
    those; the padded work of each query is written out here, not taken from the module."""

    def work(t, n, m):
        return t**3 + m * t**2 + n**2 * t

    distinct = sorted(set(keys))
    K = len(distinct)
    finest = sum(work(*k) for k in keys)
    for g in range(1, K + 1):
        best = None
        for cuts in itertools.combinations(range(1, K), g - 1):
            runs = list(zip((0, *cuts), (*cuts, K), strict=True))
            total = 0
            for a, b in runs:
                top = tuple(max(k[d] for k in distinct[a:b]) for d in range(3))
                total += sum(keys.count(k) for k in distinct[a:b]) * work(*top)
            if best is None or total < best:
                best = total
        if best <= slack * finest:
            return g, best
    raise AssertionError("unreachable: g = K is no merging")


def test_size_groups_merge_to_the_fewest_within_the_slack():
    from bayesrank.parallel.plan import PADDING_SLACK, merge_groups

    rng = np.random.default_rng(0)
    for _ in range(150):
        distinct = {
            (int(rng.choice([32, 40, 56, 96, 152])), int(rng.choice([32, 64, 128])), int(m))
            for m in rng.choice([32, 48, 208], size=rng.integers(1, 7))
        }
        keys = [k for k in sorted(distinct) for _ in range(int(rng.integers(1, 5)))]
        slack = float(rng.choice([1.0, 1.1, PADDING_SLACK, 2.0, 10.0]))
        merged = merge_groups(keys, slack)
        groups, work = _exhaustive_merge(keys, slack)
        assert len(set(merged)) == groups
        total = sum(t**3 + m * t**2 + n**2 * t for t, n, m in merged)
        assert total == pytest.approx(work, rel=1e-12)
        # every query padded to at least its own size
        for padded, key in zip(merged, keys, strict=True):
            assert all(p >= k for p, k in zip(padded, key, strict=True))
    assert merge_groups([(32, 32, 32), (40, 40, 40)], 1.0) == [(32, 32, 32), (40, 40, 40)]
    with pytest.raises(ValueError, match="slack"):
        merge_groups([(32, 32, 32)], 0.5)
    with pytest.raises(ValueError, match="slack"):
        parallel.fit_predict(PRIOR, problems(0, [(10, 15)]), [np.array([[0, 1]])], slack=0.9)
