"""Active exploration: the paper's rule on a hand-built posterior, BALD against Monte Carlo,
the compiled loop against a plain Python loop fed the same answers, no pair asked twice."""

import itertools
import json
import re

import jax
import numpy as np
import pytest
from scipy.stats import norm

from bayesrank import EP, Laplace, active
from bayesrank.inference import ep, laplace
from bayesrank.kernels import RBF


def moments(mean, cov, pairs):
    i, j = pairs[:, 0], pairs[:, 1]
    return mean[i] - mean[j], cov[i, i] + cov[j, j] - 2 * cov[i, j]


def test_variance_ratio_picks_the_pair_its_formula_says():
    mean = np.array([0.0, 1.0, 1.1, 3.0, -0.5])
    A = np.random.default_rng(0).normal(size=(5, 5))
    cov = A @ A.T / 5 + 0.1 * np.eye(5)
    cands = np.array(list(itertools.combinations(range(5), 2)))
    dm, dv = moments(mean, cov, cands)
    want = int(np.argmax(dv / dm**2))
    got = active.next_pair(mean, cov, cands, np.zeros(len(cands), bool), "variance_ratio")
    assert int(got) == want
    asked = np.zeros(len(cands), bool)
    asked[want] = True  # the next best once it is asked
    got = active.next_pair(mean, cov, cands, asked, "variance_ratio")
    assert int(got) == int(np.argmax(np.where(asked, -np.inf, dv / dm**2)))
    # equal means (before any answer): the most uncertain pair
    got = active.next_pair(np.zeros(5), cov, cands, np.zeros(len(cands), bool), "variance_ratio")
    assert int(got) == int(np.argmax(dv))


@pytest.mark.slow  # 3 s or more in the fast loop
@pytest.mark.parametrize("mu, var", [(0.0, 1e-6), (0.3, 0.5), (-1.2, 1.0), (0.8, 2.5), (2.0, 30.0)])
def test_mutual_information_matches_monte_carlo(mu, var):
    rng = np.random.default_rng(1)
    d = mu + np.sqrt(var) * rng.normal(size=400_000)
    p = norm.cdf(d)
    h = -(p * np.log(np.where(p > 0, p, 1)) + (1 - p) * np.log(np.where(p < 1, 1 - p, 1)))
    p_bar = norm.cdf(mu / np.sqrt(1 + var))
    h_bar = -(p_bar * np.log(p_bar) + (1 - p_bar) * np.log(1 - p_bar))
    mc, se = h_bar - h.mean(), h.std() / np.sqrt(len(h))
    got = float(active.mutual_information(mu, var))
    assert abs(got - mc) < 4 * se + 1e-12, (got, mc, se)


def problem(n=10, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 2))
    K = np.asarray(RBF(1.0, 0.7)(X)) + 0.05 * np.eye(n)
    u = X[:, 0] - X[:, 1] + 0.3 * rng.normal(size=n)
    cands = np.array(list(itertools.combinations(range(n), 2)))
    return K, cands, u[cands[:, 0]] > u[cands[:, 1]]


def python_loop(K, cands, outcome, k, criterion, fit):
    """The greedy rule as a plain loop: NumPy scores (the variance ratio by its formula), the
    answers from ``outcome``, ``fit(pairs)`` cold-started after each. Returns ``(asked, pairs,
    mean, cov)``."""
    asked, pairs = [], []
    mean, cov = np.zeros(len(K)), K
    for _ in range(k):
        dm, dv = moments(mean, cov, cands)
        s = (
            np.asarray(active.score(criterion, dm, dv))
            if criterion != "variance_ratio"
            else dv / (dm**2 + np.finfo(float).tiny)
        )
        s = np.where(np.isin(np.arange(len(cands)), asked), -np.inf, s)
        c = int(np.argmax(s))
        asked.append(c)
        i, j = cands[c]
        pairs.append((i, j) if outcome[c] else (j, i))
        post = fit(np.array(pairs))
        mean, cov = np.asarray(post.mean), np.asarray(post.cov)
    return asked, pairs, mean, cov


@pytest.mark.parametrize("criterion", ["variance_ratio", "mutual_information"])
@pytest.mark.slow
def test_compiled_loop_equals_a_python_loop(criterion):
    """The same answers fed to a loop of the public ep.fit (cold starts) and scores from NumPy."""
    if not jax.config.jax_enable_x64:
        pytest.skip("argmax ties resolve at float64 resolution")
    K, cands, outcome = problem()
    k = 6
    got = active.explore(K, cands, outcome, k, criterion, engine=EP(tol=1e-10))
    asked, pairs, mean, cov = python_loop(
        K, cands, outcome, k, criterion, lambda p: ep.fit(K, p, tol=1e-10)
    )
    assert list(np.asarray(got.chosen)) == asked
    np.testing.assert_array_equal(np.asarray(got.pairs), np.array(pairs))
    np.testing.assert_allclose(got.mean, mean, atol=1e-8)
    np.testing.assert_allclose(got.cov, cov, atol=1e-8)


@pytest.mark.slow  # 3 s or more in the fast loop
@pytest.mark.parametrize("criterion", active.CRITERIA)
def test_no_pair_is_asked_twice(criterion):
    K, cands, outcome = problem(n=6, seed=2)
    got = active.explore(K, cands, outcome, len(cands), criterion, jax.random.PRNGKey(3))
    assert sorted(np.asarray(got.chosen)) == list(range(len(cands)))


def test_explore_input_errors_name_the_culprit():
    K, cands, outcome = problem(n=5)
    with pytest.raises(ValueError, match="outcome"):
        active.explore(K, cands, outcome[:-1], 3)
    with pytest.raises(ValueError, match="outcome"):
        active.explore(K, cands, outcome.astype(int), 3)
    with pytest.raises(ValueError, match="k"):
        active.explore(K, cands, outcome, len(cands) + 1)
    with pytest.raises(ValueError, match="criterion"):
        active.explore(K, cands, outcome, 2, "entropy")
    with pytest.raises(ValueError, match="candidates"):
        active.explore(K, np.array([[0, 9]]), np.array([True]), 1)


@pytest.mark.slow
def test_a_callable_oracle_asks_what_the_compiled_loop_asks():
    K, cands, outcome = problem(seed=4)
    lookup = {tuple(c): bool(o) for c, o in zip(cands, outcome, strict=True)}
    session = active.ask(K, cands, lambda i, j: lookup[(i, j)], 5, engine=EP(tol=1e-10))
    compiled = active.explore(K, cands, outcome, 5, engine=EP(tol=1e-10))
    assert [s for s, _ in session.log] == list(np.asarray(compiled.chosen))
    np.testing.assert_allclose(session.mean, compiled.mean, atol=1e-6)


@pytest.mark.slow
def test_a_session_updates_by_its_engine():
    """A session on Laplace asks what the compiled loop on Laplace asks, and its posterior is
    Laplace's on the answers (the jitted pure fit, no session code); the old tol= warns and is
    EP(tol=...)."""
    if not jax.config.jax_enable_x64:
        pytest.skip("argmax ties resolve at float64 resolution")
    K, cands, outcome = problem(seed=4)
    lookup = {tuple(c): bool(o) for c, o in zip(cands, outcome, strict=True)}
    engine = Laplace(tol=1e-12)
    session = active.ask(K, cands, lambda i, j: lookup[(i, j)], 4, engine=engine)
    compiled = active.explore(K, cands, outcome, 4, engine=engine)
    assert [s for s, _ in session.log] == list(np.asarray(compiled.chosen))
    reference = jax.jit(lambda p: laplace.fit(K, p, tol=1e-12))(session.pairs)
    np.testing.assert_allclose(session.mean, reference.mean, atol=1e-10)
    np.testing.assert_allclose(session.cov, reference.cov, atol=1e-10)
    with pytest.warns(DeprecationWarning, match=r"engine=EP\(.*tol=0.001"):
        old = active.Session(K, cands, tol=1e-3)
    assert old.engine == EP(tol=1e-3)
    with pytest.raises(ValueError, match="engine"):
        active.Session(K, cands, engine="nuts")


@pytest.mark.slow
def test_interactive_mode_writes_the_answers_and_resumes(tmp_path, monkeypatch, capsys):
    """Scripted standard input: answer, answer, skip, undo (the skip), answer, stop."""
    import io

    from bayesrank.cli import main

    path = tmp_path / "answers.jsonl"
    monkeypatch.setattr("sys.stdin", io.StringIO("1\n2\ns\nu\n1\nq\n"))
    assert main(["active", "--interactive", "--answers", str(path), "--k", "5"]) == 0
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    assert [r["answer"] for r in rows] == ["first", "second", "first"]
    out = capsys.readouterr().out
    shown = re.findall(r"document (\S+) \(features", out)
    # the pair skipped and undone is asked again, and its answer is the third row
    assert shown[4:6] == shown[8:10] and shown[6:8] != shown[4:6]
    assert len({(r["i"], r["j"]) for r in rows}) == 3
    # a second run resumes from the file: three answers already, so the fourth pair is asked
    monkeypatch.setattr("sys.stdin", io.StringIO("q\n"))
    assert main(["active", "--interactive", "--answers", str(path), "--k", "5"]) == 0
    assert "pair 4 of 5" in capsys.readouterr().out
    assert [json.loads(line) for line in path.read_text().splitlines()] == rows


def test_a_bad_answer_file_names_its_line(tmp_path):
    K, cands, _ = problem(n=5)
    path = tmp_path / "a.jsonl"
    path.write_text('{"i": 0, "j": 1, "answer": "first"}\n{"i": 0, "j": 2, "answer": "maybe"}\n')
    with pytest.raises(ValueError, match="line 2"):
        active.Session(K, cands, answers=path)
    path.write_text('{"i": 0, "j": 7, "answer": "first"}\n')
    with pytest.raises(ValueError, match=r"line 1.*not a candidate"):
        active.Session(K, cands, answers=path)


@pytest.mark.slow
def test_batch_rounds_follow_the_believer_rule():
    """Rounds of 3 picks, each answered by its more probable side until the round's real
    answers arrive: against a loop of the public ep.fit and NumPy scores."""
    if not jax.config.jax_enable_x64:
        pytest.skip("argmax ties resolve at float64 resolution")
    K, cands, outcome = problem(seed=5)
    k, q = 6, 3
    got = active.explore(K, cands, outcome, k, batch=q, engine=EP(tol=1e-10))
    asked, real = [], []
    mean, cov = np.zeros(len(K)), K
    for _ in range(k // q):
        fantasy, m, c = list(real), mean, cov
        for _ in range(q):
            dm, dv = moments(m, c, cands)
            s = np.where(np.isin(np.arange(len(cands)), asked), -np.inf, dv / (dm**2 + 1e-300))
            pick = int(np.argmax(s))
            asked.append(pick)
            i, j = cands[pick]
            fantasy.append((i, j) if dm[pick] >= 0 else (j, i))
            post = ep.fit(K, np.array(fantasy), tol=1e-10)
            m, c = np.asarray(post.mean), np.asarray(post.cov)
        for pick in asked[-q:]:
            i, j = cands[pick]
            real.append((i, j) if outcome[pick] else (j, i))
        post = ep.fit(K, np.array(real), tol=1e-10)
        mean, cov = np.asarray(post.mean), np.asarray(post.cov)
    assert list(np.asarray(got.chosen)) == asked
    np.testing.assert_array_equal(np.asarray(got.pairs), np.array(real))
    np.testing.assert_allclose(got.mean, mean, atol=1e-8)
    with pytest.raises(ValueError, match="multiple of batch"):
        active.explore(K, cands, outcome, 5, batch=3)


@pytest.mark.slow
def test_repeats_in_one_call_equal_single_runs_and_the_curve_is_the_error():
    K, cands, outcome = problem(seed=6)
    truth = np.where(outcome[:, None], cands, cands[:, ::-1])  # winner first
    key = jax.random.PRNGKey(7)
    many = active.explore(K, cands, outcome, 4, "random", key, repeats=3, test=truth)
    assert many.chosen.shape == (3, 4) and many.curve.shape == (3, 4)
    assert len({tuple(np.asarray(r)) for r in many.chosen}) > 1
    for r, sub in enumerate(jax.random.split(key, 3)):
        one = active.explore(K, cands, outcome, 4, "random", sub, test=truth)
        np.testing.assert_array_equal(one.chosen, many.chosen[r])
        np.testing.assert_allclose(one.curve, many.curve[r])
        dm, dv = moments(np.asarray(one.mean), np.asarray(one.cov), truth)
        p = norm.cdf(dm / np.sqrt(1 + dv))
        assert float(one.curve[-1]) == pytest.approx(np.mean((p < 0.5) + 0.5 * (p == 0.5)))


@pytest.mark.slow
def test_the_laplace_engine_loop_equals_a_python_loop_of_laplace_fits():
    """engine="laplace": each answer updates the Laplace approximation (warm-started); against
    a loop of cold-started laplace.fit calls and NumPy scores."""
    if not jax.config.jax_enable_x64:
        pytest.skip("argmax ties resolve at float64 resolution")

    K, cands, outcome = problem(seed=8)
    k = 4
    got = active.explore(K, cands, outcome, k, engine=Laplace(tol=1e-12))
    reference = jax.jit(lambda p: laplace.fit(K, p, tol=1e-12))  # one compile per pair count
    asked, _, mean, cov = python_loop(K, cands, outcome, k, "variance_ratio", reference)
    assert list(np.asarray(got.chosen)) == asked
    np.testing.assert_allclose(got.mean, mean, atol=1e-8)
    np.testing.assert_allclose(got.cov, cov, atol=1e-8)
    # and it is not EP's posterior: the engines differ once answers arrive
    ep_run = active.explore(K, cands, outcome, k, engine=EP(tol=1e-12))
    assert np.max(np.abs(np.asarray(ep_run.mean) - mean)) > 1e-3


@pytest.mark.parametrize("criterion", ["variance_ratio", "random"])
@pytest.mark.slow
def test_a_collection_in_one_call_equals_each_query_alone(criterion):
    """Three queries of different sizes (so padded entities, candidates and test pairs) with
    their repetitions in one call: each query's result is its own run's, key fold_in(key, q)."""
    problems = [problem(n=n, seed=s) for n, s in ((7, 10), (10, 11), (5, 12))]
    Ks = [K for K, _, _ in problems]
    cands = [c for _, c, _ in problems]
    outs = [o for _, _, o in problems]
    tests = [np.where(o[:, None], c, c[:, ::-1]) for _, c, o in problems]
    key = jax.random.PRNGKey(1)
    repeats = 3 if criterion == "random" else None
    many = active.explore_queries(
        Ks, cands, outs, 4, criterion, key, repeats=repeats, tests=tests, engine=EP(tol=1e-10)
    )
    for q, (K, c, o) in enumerate(problems):
        one = active.explore(
            K,
            c,
            o,
            4,
            criterion,
            jax.random.fold_in(key, q),
            repeats=repeats,
            test=tests[q],
            engine=EP(tol=1e-10),
        )
        np.testing.assert_array_equal(many[q].chosen, one.chosen)
        np.testing.assert_array_equal(many[q].pairs, one.pairs)
        assert many[q].mean.shape == one.mean.shape and one.mean.shape[-1] == len(K)
        np.testing.assert_allclose(many[q].mean, one.mean, atol=1e-9)
        np.testing.assert_allclose(many[q].curve, one.curve, atol=1e-12)
        assert set(np.asarray(one.chosen).reshape(-1)) <= set(range(len(c)))


def test_collection_input_errors_name_the_query():
    K, cands, outcome = problem(n=5)
    K2, cands2, outcome2 = problem(n=4, seed=1)
    with pytest.raises(ValueError, match="query 1: outcome"):
        active.explore_queries([K, K2], [cands, cands2], [outcome, outcome2[:-1]], 2)
    with pytest.raises(ValueError, match="query 1 has 6 candidates, fewer than k=8"):
        active.explore_queries([K, K2], [cands, cands2], [outcome, outcome2], 8)
    with pytest.raises(ValueError, match="engine"):
        active.explore(K, cands, outcome, 2, engine="nuts")
