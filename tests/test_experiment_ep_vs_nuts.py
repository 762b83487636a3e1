"""``bayesrank experiment ep-vs-nuts`` (``bayesrank.experiments.ep_vs_nuts``): the reduced protocol
end to end on the bundled sample, checked against references computed here independently: EP's
probabilities by hand from a fresh EP fit at the prior written out by hand (the ``rbf`` prior,
and the ``em-fit`` XPGP prior with its regularized Laplacian), and NUTS within its own Monte
Carlo error; the Monte Carlo standard error against the closed form of an AR(1) chain; the
protocols' presets; then the errors a user can cause.
"""

from __future__ import annotations

import argparse
import importlib.util
from functools import partial

import numpy as np
import pytest
from experiment_helpers import SAMPLE, assert_user_error, gaussian_probs, median_rho
from experiment_helpers import parse as parse_options
from experiment_helpers import run as run_experiment
from scipy.special import ndtr

from bayesrank.experiments import ep_vs_nuts

parse = partial(parse_options, "ep-vs-nuts")
run = partial(run_experiment, "ep-vs-nuts")


def rbf(X, kappa, rho):
    """Eq. 1: ``kappa^2 exp(-rho^2 / 2 ||x - x'||^2)``."""
    sq = ((X[:, None] - X[None]) ** 2).sum(-1)
    return kappa**2 * np.exp(-0.5 * rho**2 * sq)


def check_against_references(written, K_of, n_test):
    """Every query: winner-first disjoint pairs, EP by hand at ``K_of(query)``, NUTS within
    5 MCSE of EP (plus 0.002 for EP's own error: docs/results/ep-vs-nuts.md, mean |dp| 0.002
    at 20 pairs on 50 entities, below NUTS's MCSE there), and the summaries of the pairs."""
    from bayesrank.inference import ep

    (setting,) = written["settings"]
    for row, pairs in zip(setting["problems"], setting["pairs"], strict=True):
        q = SAMPLE[row["problem"]]
        known, test = np.asarray(pairs["known"]), np.asarray(pairs["test"])
        assert (row["known"], row["test"], row["n"]) == (10, n_test, q.n_docs)
        assert np.all(q.grades[known[:, 0]] > q.grades[known[:, 1]])
        assert np.all(q.grades[test[:, 0]] > q.grades[test[:, 1]])
        assert not {tuple(p) for p in known} & {tuple(p) for p in test}
        post = ep.fit(K_of(q), known, tol=1e-10)
        p_ep = gaussian_probs(np.asarray(post.mean), np.asarray(post.cov), test)
        assert np.allclose(pairs["p_ep"], p_ep, atol=1e-6)
        dp = np.abs(np.subtract(pairs["p_ep"], pairs["p_nuts"]))
        mcse = np.asarray(pairs["mcse"])
        assert np.all((mcse > 0) & (mcse < 0.05))
        assert np.all(dp <= 5 * mcse + 0.002), np.max(dp / mcse)
        assert row["dp_max"] == pytest.approx(dp.max())
        assert row["dp_mean"] == pytest.approx(dp.mean())
        z = dp / mcse
        assert row["beyond_2_mcse"] == pytest.approx(np.mean(z > 2))
        for engine in ("ep", "nuts"):  # from the stored probabilities (ties at 1/2 count half)
            p = np.asarray(pairs[f"p_{engine}"])
            assert row[f"acc_{engine}"] == pytest.approx(np.mean(p > 0.5) + 0.5 * np.mean(p == 0.5))
        assert row["divergences"] == 0 and row["r_hat_max"] < 1.05 and row["ep_converged"]
    assert written["overall"]["pairs"] == sum(r["test"] for r in setting["problems"])


@pytest.mark.slow
def test_reduced_protocol(tmp_path, capsys):
    _, written = run(
        tmp_path / "e", "--queries", 1, "--known", 10, "--test", 50,
        "--warmup", 150, "--samples", 150, "--chains", 2,
    )  # fmt: skip
    p = written["protocol"]
    assert (p["protocol"], p["collection"], p["prior"], p["synthetic"]) == (
        "reduced", "sample", "rbf", 0,
    )  # fmt: skip
    # one query chosen at random (seed 0) among those with 2 x 10 labelled pairs
    assert written["queries"] == ["12"]
    [setting] = written["settings"]
    assert setting["name"] == "sample, 10 known"

    def K_rbf(q):  # RBF (median-heuristic rho) + 0.1^2 I, unit weight and 2 sigma^2 = 1
        return rbf(q.X, 1.0, median_rho(q.X)) + 0.01 * np.eye(q.n_docs)

    check_against_references(written, K_rbf, 50)
    assert (tmp_path / "e" / "table.txt").is_file()
    assert (tmp_path / "e" / "ep_vs_nuts.png").is_file() == (
        importlib.util.find_spec("matplotlib") is not None
    )
    assert "[1/1] sample, 10 known: EP" in capsys.readouterr().err
    text = (tmp_path / "e" / "table.txt").read_text()
    assert "query 12, 10 known" in text and "reduced protocol" in text
    md = ep_vs_nuts.markdown(written).splitlines()
    assert len(md) == 3 and md[2].startswith("| sample, 10 known | 1 | 84 |")


@pytest.mark.slow
def test_em_fit_prior(tmp_path):
    """The full protocol's prior on the sample's keyword graph, by hand: ``K = 1.63^2 RBF(1,
    0.57) + 2.74^2 (L + I / 1.68^2)^-1 + 0.11^2 I``, ``L = D - W`` (Eq. 2 and 5)."""
    from bayesrank.data.graphs import ohsumed_keyword_graph
    from bayesrank.data.sample import sample_meta_path

    written, _ = run(
        None, "--queries", 1, "--known", 10, "--test", 40, "--prior", "em-fit",
        "--warmup", 200, "--samples", 200, "--chains", 2,
    )  # fmt: skip

    def K_em(q):
        W = ohsumed_keyword_graph(sample_meta_path(q.qid), doc_ids=q.doc_ids, k=10)[0]
        L = np.diag(W.sum(1)) - W
        K_r = np.linalg.inv(L + np.eye(q.n_docs) / 1.68**2)
        return 1.63**2 * rbf(q.X, 1.0, 0.57) + 2.74**2 * K_r + 0.11**2 * np.eye(q.n_docs)

    check_against_references(written, K_em, 40)
    assert "EM fit" in written["protocol"]["prior_description"]


def test_monte_carlo_error_ar1():
    """The MCSE of a mean of AR(1) draws (coefficient ``a``, stationary sd 1): ``sqrt((1 + a) /
    (1 - a) / N)``. Each pair's ``Phi(xi_i - xi_j)`` is made such a chain by choosing ``xi``."""
    from scipy.special import ndtri

    from bayesrank.experiments.ep_vs_nuts.comparison import monte_carlo_error

    rng = np.random.default_rng(0)
    C, S, a = 4, 4000, 0.5
    e = rng.normal(size=(C, S + 200, 3))
    x = np.zeros_like(e)
    for t in range(1, S + 200):
        x[:, t] = a * x[:, t - 1] + np.sqrt(1 - a**2) * e[:, t]
    u = ndtr(x[:, 200:])  # (C, S, 3): uniform marginals, autocorrelated
    # entities 0..2 carry ndtri(u) - 0 against entity 3 fixed at 0: Phi(xi_k - xi_3) = u
    samples = np.concatenate([ndtri(u), np.zeros((C, S, 1))], axis=-1)
    pairs = np.array([[0, 3], [1, 3], [2, 3]])
    mcse = monte_carlo_error(samples, pairs)
    # the ESS of the uniform's AR chain: the lag-1 correlation of Phi(x) is 6/pi asin(a/2)
    r = 6 / np.pi * np.arcsin(a / 2)
    expected = u.reshape(-1, 3).std(0) * np.sqrt((1 + r) / (1 - r) / (C * S))
    assert np.allclose(mcse, expected, rtol=0.2)
    # chunked over the pairs, the same numbers
    assert np.allclose(monte_carlo_error(samples, pairs, chunk=2), mcse)


def test_protocol_presets():
    _check = ep_vs_nuts._check
    opt = _check(parse())
    assert (opt["collection"], opt["queries"], opt["known"]) == ("sample", 2, [20])
    assert opt["test"] == 200
    assert (opt["prior"], opt["synthetic"], opt["chains"], opt["samples"]) == ("rbf", 0, 2, 500)
    assert _check(parse(data_dir="x"))["collection"] == "letor"  # a LETOR file or folder
    full = _check(parse("--protocol", "full", data_dir="data"))
    assert (full["collection"], full["queries"], full["known"], full["test"]) == (
        "OHSUMED", 10, [100, 200], 0,
    )  # fmt: skip
    assert (full["prior"], full["synthetic"], full["warmup"], full["samples"], full["chains"]) == (
        "em-fit", 4, 500, 1000, 4,
    )  # fmt: skip
    # an option given overrides its preset, the others keep theirs
    mixed = _check(parse("--protocol", "full", "--queries", 2, "--known", 100, data_dir="data"))
    assert (mixed["queries"], mixed["known"], mixed["chains"]) == (2, [100], 4)


def test_letor_collection(tmp_path):
    """``--data-dir`` a LETOR file: its queries with twice ``--known`` labelled pairs, no
    relation; the bundled sample's queries, read back unchanged."""
    import gzip

    from bayesrank.data.pairs import pairs_from_grades
    from bayesrank.data.sample import sample_path
    from bayesrank.experiments.ep_vs_nuts.problems import load

    with gzip.open(sample_path(), "rt", newline="") as f:
        lines = [x for x in f if x.split()[1].removeprefix("qid:") in {"7", "8", "10"}]
    (tmp_path / "q.txt").write_text("".join(lines))
    opt = ep_vs_nuts._check(parse("--queries", 5, "--known", 20, data_dir=tmp_path / "q.txt"))
    queries, source = load(opt, tmp_path / "q.txt")
    enough = [q for q in ("7", "8", "10") if len(pairs_from_grades(SAMPLE[q].grades)) >= 40]
    assert [q.qid for q in queries] == enough and "q.txt" in source
    for q in queries:
        assert q.relations == {} and np.array_equal(q.X, SAMPLE[q.qid].X)
        assert np.array_equal(q.pairs, pairs_from_grades(SAMPLE[q.qid].grades))


def test_help_states_the_presets():
    parser = argparse.ArgumentParser()
    ep_vs_nuts.add_arguments(parser)
    text = " ".join(parser.format_help().split())
    for what in ("(reduced 2, full 10)", "(reduced 20, full 100 200)", "(reduced 0, full 4)",
                 "(reduced rbf, full em-fit)", "(reduced 500, full 1000)"):  # fmt: skip
        assert what in text, what


@pytest.mark.parametrize(
    ("argv", "data_dir", "match"),
    [
        ([], "missing", "--data-dir"),
        (["--known", 5000], None, "--known 5000 is too large"),
        (["--samples", 1], None, "--samples must be an integer >= 4"),
        (["--queries", 0], None, "nothing to compare"),
        (["--protocol", "full"], None, "--collection OHSUMED reads --data-dir"),
        (["--collection", "OHSUMED"], "empty", "--data-dir must be the folder that holds OHSUMED"),
        (["--prior", "em-fit"], "bad", "--prior em-fit is OHSUMED's keyword-graph fit"),
        (["--kappa", -1], None, "--kappa must be a positive"),
    ],
)
def test_user_errors(tmp_path, monkeypatch, argv, data_dir, match):
    monkeypatch.chdir(tmp_path)
    assert_user_error("ep-vs-nuts", tmp_path, argv, data_dir, match)
