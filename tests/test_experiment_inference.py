"""``bayesrank experiment inference`` (``bayesrank.experiments.inference``): the reduced protocol
end to end on the bundled sample, its ``results.json`` checked against references computed here
independently: the posteriors at the stored learned hyperparameters fitted afresh, the measures
and the pooled ECE by hand, ``|dp|`` against NUTS from the stored probabilities; the per-query
fits and their resumption; a peer method as a front end passes one; the full protocol's problems
on the benchmark data; then the errors a user can cause.
"""

from __future__ import annotations

import sys
from functools import partial
from pathlib import Path

import numpy as np
import pytest
from experiment_helpers import SAMPLE, assert_figure, assert_user_error, pair_error
from experiment_helpers import run as run_experiment

from bayesrank.data.pairs import pairs_from_grades

run = partial(run_experiment, "inference")

REPO = Path(__file__).resolve().parents[1]


def scaled(X):
    """Each column of ``X`` mapped to ``[0, 1]`` by hand (a constant column to 0)."""
    X = np.asarray(X, float)
    lo, hi = X.min(0), X.max(0)
    return (X - lo) / np.where(hi > lo, hi - lo, 1.0)


def ece_by_hand(p, y):
    """10 equal-width bins (the last closed): ``sum_b n_b / N |y_b - p_b|``."""
    bins = np.minimum((p * 10).astype(int), 9)
    return sum(
        np.mean(bins == b) * abs(y[bins == b].mean() - p[bins == b].mean()) for b in np.unique(bins)
    )


def prior_of(h):
    """The fitted prior from the stored hyperparameters (RBF plus the entity effect)."""
    import jax.numpy as jnp

    from bayesrank import RBF, XPGP, Independent

    return XPGP(
        RBF(h["kappa"], h["rho"]),
        (),
        weights=jnp.asarray([h["weight"]]),
        sigma=h["sigma"],
        entity=Independent(h["entity"]),
    )


def check_split(problem, pairs, known, test):
    """Known and held-out pairs of a sample query: grade-implied, disjoint, the counts asked."""
    q = SAMPLE[problem["name"].removeprefix("query:")]
    kn, shown, y = (np.asarray(pairs[k]) for k in ("known", "shown", "outcome"))
    held = np.where(y[:, None] == 1, shown, shown[:, ::-1])  # winner first again
    assert np.all(q.grades[kn[:, 0]] > q.grades[kn[:, 1]])
    assert np.all(q.grades[held[:, 0]] > q.grades[held[:, 1]])
    assert not {tuple(p) for p in kn} & {tuple(p) for p in held}
    assert (problem["known"], problem["test"]) == (len(kn), len(held)) == (known, test)
    return q, kn, shown, y


@pytest.mark.slow
def test_inference(tmp_path):
    from bayesrank import PreferenceProblem, XPGPModel

    results, written = run(tmp_path / "i", "--queries", 2, "--known", 20, "--test", 100)
    assert list(written["summary"]) == ["bayesrank", "bayesrank-laplace"]
    assert [q["name"] for q in written["problems"]] == ["query:5", "query:7"]
    assert written["settings"]["theta"] == "shared" and written["engines"] == []
    rows = {(r["problem"], r["method"]): r for r in written["fits"]}
    engine = {"bayesrank": "ep", "bayesrank-laplace": "laplace"}
    for method, info in written["summary"].items():
        assert 0 <= info["pair_error"] <= 0.5 and info["loglik"] < 0
        assert 0 <= info["ece_pooled"] <= 1 and 0 <= info["brier"] <= 1
        hs = [rows[q["name"], method]["hyperparameters"] for q in written["problems"]]
        assert hs[0] == hs[1]  # one theta shared by the queries
        prior = prior_of(hs[0])
        for b, (problem, pairs) in enumerate(
            zip(written["problems"], written["pairs"], strict=True)
        ):
            q, kn, shown, y = check_split(problem, pairs, 20, 100)
            p = np.asarray(pairs["prob"][method])
            if b == 0:  # the posterior at the stored learned hyperparameters, fitted afresh
                problem_ = PreferenceProblem.create(kn, X=scaled(q.X))
                post = XPGPModel(prior, inference=engine[method]).fit(problem_)
                assert np.allclose(p, np.asarray(post.predict_pairs(shown).prob), atol=1e-5)
            # the measures by hand
            m = rows[problem["name"], method]
            assert m["loglik"] == pytest.approx(np.mean(np.where(y == 1, np.log(p), np.log1p(-p))))
            assert m["pair_error"] == pytest.approx(pair_error(np.where(y == 1, p, 1 - p)))
            assert m["brier"] == pytest.approx(np.mean((p - y) ** 2))
            assert m["ece"] == pytest.approx(ece_by_hand(p, y), abs=1e-12)
            assert -1 <= m["kendall"] <= 1 and 0 <= m["ndcg10"] <= 1
        for key in ("pair_error", "loglik", "brier", "ece", "ndcg10", "kendall"):
            mean = np.mean([rows[q["name"], method][key] for q in written["problems"]])
            assert info[key] == pytest.approx(mean)  # the mean over queries
        p = np.concatenate([pairs["prob"][method] for pairs in written["pairs"]])
        y = np.concatenate([pairs["outcome"] for pairs in written["pairs"]])
        assert info["ece_pooled"] == pytest.approx(ece_by_hand(p, y), abs=1e-12)
    assert_figure(tmp_path / "i" / "inference.png")
    assert "| bayesrank-laplace | 2 |" in (tmp_path / "i" / "table.txt").read_text()
    assert results["summary"] == written["summary"]


@pytest.mark.slow
def test_engines_against_nuts(tmp_path):
    """Part 1 on one query: EP, Laplace and NUTS at the default fit's prior; EP's probabilities
    against a fresh EP fit there, ``|dp|`` from the stored probabilities, EP near NUTS."""
    from bayesrank import PreferenceProblem, XPGPModel

    _, written = run(
        tmp_path / "e", "--queries", 1, "--known", 20, "--test", 50, "--methods", "bayesrank",
        "--nuts", "--warmup", 150, "--samples", 150, "--chains", 2,
    )  # fmt: skip
    (pairs,), (problem,) = written["pairs"], written["problems"]
    q, kn, shown, y = check_split(problem, pairs, 20, 50)
    by = {r["engine"]: r for r in written["engines"]}
    assert list(by) == ["ep", "laplace", "nuts"]
    probs = {e: np.asarray(pairs["prob_engines"][e]) for e in by}
    # the engines ran at the default fit's prior: EP's is that fit's own posterior
    assert np.allclose(probs["ep"], pairs["prob"]["bayesrank"], atol=1e-6)
    prior = prior_of(written["fits"][0]["hyperparameters"])
    post = XPGPModel(prior, inference="laplace").fit(PreferenceProblem.create(kn, X=scaled(q.X)))
    assert np.allclose(probs["laplace"], np.asarray(post.predict_pairs(shown).prob), atol=1e-6)
    for e, row in by.items():
        dp = np.abs(probs[e] - probs["nuts"])
        assert row["mean_abs_dp"] == pytest.approx(dp.mean(), abs=1e-12)
        assert row["max_abs_dp"] == pytest.approx(dp.max(), abs=1e-12)
        assert row["pair_error"] == pytest.approx(
            pair_error(np.where(y == 1, probs[e], 1 - probs[e]))
        )
    # 300 draws: NUTS's Monte Carlo error per pair is a few hundredths at most; EP's own error is
    # 0.005 on average (docs/results/inference.md)
    assert by["ep"]["mean_abs_dp"] < 0.03
    assert by["nuts"]["divergences"] == 0 and by["nuts"]["max_rhat"] < 1.05
    assert "EP closer to NUTS than Laplace" in (tmp_path / "e" / "table.txt").read_text()


@pytest.mark.slow
def test_per_query_fits_resume(tmp_path, monkeypatch):
    """``--theta per-query``: each query its own theta (its posterior there, fitted afresh,
    predicts what was stored); a rerun takes every row from ``rows.json`` and fits nothing."""
    from bayesrank import PreferenceProblem, XPGPModel
    from bayesrank.experiments.inference import runner

    argv = ("--theta", "per-query", "--queries", 2, "--known", 20, "--test", 50,
            "--methods", "bayesrank")  # fmt: skip
    _, written = run(tmp_path / "p", *argv)
    assert (tmp_path / "p" / "rows.json").is_file()
    hs = [r["hyperparameters"] for r in written["fits"]]
    assert len(hs) == 2 and hs[0]["rho"] != hs[1]["rho"]
    for h, problem, pairs in zip(hs, written["problems"], written["pairs"], strict=True):
        q, kn, shown, _ = check_split(problem, pairs, 20, 50)
        post = XPGPModel(prior_of(h)).fit(PreferenceProblem.create(kn, X=scaled(q.X)))
        assert np.allclose(pairs["prob"]["bayesrank"], post.predict_pairs(shown).prob, atol=1e-5)

    def refuse(*_):
        raise AssertionError("a resumed run fitted again")

    monkeypatch.setattr(runner, "fit_method", refuse)
    _, again = run(tmp_path / "p", *argv)
    assert again["fits"] == written["fits"] and again["pairs"] == written["pairs"]


@pytest.mark.slow
def test_peer_methods(tmp_path):
    """A front end's peer: a fit that knows nothing (``P = 1/2`` everywhere) scores exactly
    the chance values; one that fails is a row with its error, not a crash."""

    def chance(p, seed):
        n = p["X"].shape[0]
        return {"mean": np.zeros(n), "cov": np.eye(n), "noise_var": 1.0, "seconds": 0.0}

    def broken(p, seed):
        raise RuntimeError("no fit")

    peers = {"chance": chance, "broken": broken}
    results, _ = run(None, "--queries", 2, "--methods", "chance", "broken", peers=peers)
    rows = {(r["problem"], r["method"]): r for r in results["fits"]}
    for problem, pairs in zip(results["problems"], results["pairs"], strict=True):
        row = rows[problem["name"], "chance"]
        assert row["pair_error"] == 0.5 and row["brier"] == 0.25
        # one bin: ECE = |mean outcome - 1/2|
        assert row["ece"] == pytest.approx(abs(np.mean(pairs["outcome"]) - 0.5), abs=1e-12)
        assert row["loglik"] == pytest.approx(np.log(0.5))
        assert "RuntimeError('no fit')" in rows[problem["name"], "broken"]["error"]
    assert list(results["summary"]) == ["chance"]
    # the problems: the sample's first queries with more than 50 pairs, features in [0, 1]
    assert [p["name"] for p in results["problems"]] == ["query:5", "query:7"]
    assert all(len(pairs_from_grades(SAMPLE[q].grades)) > 50 for q in ("5", "7"))
    with pytest.raises(ValueError, match="--methods: unknown chance"):
        run(None, "--methods", "chance")  # a peer exists only where a front end passes it


@pytest.mark.shared_data
def test_accuracy_problems(shared_data):
    """The full protocol's 32 problems: counts, sizes, disjoint grade-implied splits; the old
    script's module re-exports them (benchmarks/bench_study.py imports it)."""
    from bayesrank.experiments.inference.problems import accuracy_problems

    problems = accuracy_problems(shared_data, 0)
    names = [p["name"] for p in problems]
    assert [sum(n.startswith(c) for n in names) for c in ("OHSUMED:", "MQ2008:", "HetRec:")] == [
        12,
        10,
        10,
    ]
    for p in problems:
        n = len(p["grades"])
        assert p["X"].shape[0] == n <= 150 and p["X"].min() >= 0 and p["X"].max() <= 1
        for part in ("known", "held_out"):
            pairs = p[part]
            assert np.all(p["grades"][pairs[:, 0]] > p["grades"][pairs[:, 1]])
        assert not {tuple(r) for r in p["known"]} & {tuple(r) for r in p["held_out"]}
        known = {"OHSUMED": 150, "MQ2008": 60, "HetRec": 300}[p["name"].split(":")[0]]
        assert len(p["known"]) == known and 0 < len(p["held_out"]) <= 1000
    sys.path.insert(0, str(REPO / "experiments"))
    try:
        import accuracy_data
    finally:
        sys.path.remove(str(REPO / "experiments"))
    again = accuracy_data.problems(shared_data, 0)
    assert [p["name"] for p in again] == names
    assert all(np.array_equal(a["known"], b["known"]) for a, b in zip(again, problems, strict=True))
    assert callable(accuracy_data.hetrec_genre_problems)


@pytest.mark.parametrize(
    ("argv", "data_dir", "match"),
    [
        ([], "missing", "--data-dir 'missing' does not exist"),
        ([], "bad", r"--data-dir: cannot read .*bad\.txt, line 1"),
        (["--known", 5000], None, "--known 5000 is too large"),
        (["--known", 0], None, "--known must be an integer >= 1"),
        (["--samples", 1], None, "--samples must be an integer >= 4"),
        (["--protocol", "full"], None, "--problems accuracy needs --data-dir"),
        (["--problems", "accuracy", "--known", 10], "missing", "--known is for --problems queries"),
        (["--problems", "hetrec21"], "empty", "--data-dir: .* does not exist"),
    ],
)
def test_user_errors(tmp_path, monkeypatch, argv, data_dir, match):
    monkeypatch.chdir(tmp_path)
    assert_user_error("inference", tmp_path, argv, data_dir, match)


@pytest.mark.parametrize(
    "call, match",
    [
        (lambda m: m.pair_metrics([0.2, np.nan], [1.0, 0.0]), r"probs\[1\] = nan is not finite"),
        (lambda m: m.pair_metrics([0.2, 0.3], [1.0, 2.0]), r"outcomes\[1\] = 2.0 is not"),
        (lambda m: m.pair_metrics([0.2, 0.3], [1.0]), "outcomes has shape"),
        (lambda m: m.calibration_error([0.1, 1.5], [0.0, 1.0]), r"probs\[1\] = 1.5 is not a prob"),
        (lambda m: m.ranking_metrics([0.1, np.nan], [0, 1]), r"scores\[1\] = nan is not finite"),
        (lambda m: m.ranking_metrics([0.1, 0.2], [0, 1, 2]), "labels has shape"),
        (lambda m: m.ranking_metrics([0.1, 0.2], [0, -1]), r"labels\[1\] = -1 is negative"),
    ],
)
def test_the_measures_refuse_a_broken_fits_numbers(call, match):
    """The measures run as compiled programs over padded arrays; a NaN, an outcome that is not
    0 or 1 or arrays of two lengths are still refused on the host, naming the index."""
    from bayesrank.experiments.inference import methods

    with pytest.raises(ValueError, match=match):
        call(methods)
