"""``bayesrank experiment active`` (``bayesrank.experiments.active``): the reduced protocol end to
end on the bundled sample and XPGP on the sample's keyword graph, their ``results.json`` checked
against references computed here independently: the prior alone's error (1/2 by the ties rule),
the prior covariances by hand (RBF, regularized Laplacian of the graph, entity effect), an EP
refit on the pairs the loop asked, the pair error and AUC by hand; the two presets; the full
protocol's queries on the benchmark data and its front end; then the errors a user can cause.
"""

from __future__ import annotations

import importlib.util
import sys
from functools import partial
from pathlib import Path

import numpy as np
import pytest
from experiment_helpers import (
    SAMPLE,
    assert_figure,
    assert_user_error,
    gaussian_probs,
    median_rho,
    pair_error,
    strict,
)
from experiment_helpers import parse as parse_options
from experiment_helpers import run as run_experiment

from bayesrank.data.pairs import pairs_from_grades

parse = partial(parse_options, "active")
run = partial(run_experiment, "active")

REPO = Path(__file__).resolve().parents[1]


def prior_covariance(X, kappa=1.0, entity=0.1, graphs=()):
    """The fixed priors by hand: the RBF of Eq. 1, ``kappa^2 exp(-rho^2 / 2 ||x - x'||^2)``
    (``rho`` by the median heuristic), plus Eq. 2's regularized Laplacian ``(L + I)^-1`` of
    each graph (``beta = iota = 1``, ``L = D - W``), plus ``entity^2 I`` (unit weights and
    ``2 sigma^2 = 1``: Eq. 5's factors are 1)."""
    sq = ((X[:, None] - X[None]) ** 2).sum(-1)
    K = kappa**2 * np.exp(-0.5 * median_rho(X) ** 2 * sq) + entity**2 * np.eye(len(X))
    for W in graphs:
        K += np.linalg.inv(np.diag(W.sum(1)) - W + np.eye(len(X)))
    return K


def auc_by_hand(p_winner):
    """The paper's AUC by brute force: every positive ``p_a`` against every negative
    ``1 - p_b``, ties half."""
    p = np.asarray(p_winner)
    pos, neg = p[:, None], 1 - p[None, :]
    return float(np.mean((pos > neg) + 0.5 * (pos == neg)))


def refit(K, asked, test):
    """The error and AUC on ``test`` of an EP fit from scratch on the ``asked`` pairs."""
    from bayesrank.inference import ep

    post = ep.fit(K, asked, tol=1e-10)
    p = gaussian_probs(np.asarray(post.mean), np.asarray(post.cov), test)
    return pair_error(p), auc_by_hand(p), len(test)


@pytest.mark.slow
def test_active(tmp_path, capsys):
    k = 10  # the reference EP fit then shares its compiled program with test_ep_vs_nuts's
    results, written = run(
        tmp_path / "a", "--k", k, "--repeats", 2, "--queries", 2, "--min-pairs", 20,
        "--criteria", "variance_ratio", "random",
    )  # fmt: skip
    assert written["experiment"] == "active" and written["ks"] == list(range(k + 1))
    assert written["settings"]["protocol"] == "reduced"
    assert list(written["models"]) == ["GP+entity"]  # the reduced protocol's one prior
    model = written["models"]["GP+entity"]
    assert set(model["curves"]) == set(model["auc"]) == {"variance_ratio", "random"}
    assert [q["qid"] for q in written["queries"]] == ["5", "7"]  # the first with >= 20 pairs
    assert (tmp_path / "a" / "table.txt").is_file()
    assert_figure(tmp_path / "a" / "active.png")
    out, err = capsys.readouterr()
    assert "variance_ratio" in out and "[2/2] GP+entity random k=10 x 2 runs" in err
    for c, entry in model["curves"].items():
        curves = np.asarray(entry["per_query"])
        assert curves.shape == (2, k + 1) and np.all((curves >= 0) & (curves <= 1))
        assert np.allclose(entry["mean"], curves.mean(axis=0))
        auc = np.asarray(model["auc"][c]["per_query"])
        assert auc.shape == (2,) and np.allclose(model["auc"][c]["mean"], auc.mean())
        if c == "random":
            assert np.asarray(entry["repetitions"]).shape == (2, 2, k + 1)
            assert np.allclose(np.mean(model["auc"][c]["repetitions"], axis=1), auc)
    for b, (qinfo, test) in enumerate(zip(written["queries"], written["test_pairs"], strict=True)):
        q = SAMPLE[qinfo["qid"]]
        test = np.asarray(test)
        K = prior_covariance(q.X)
        assert qinfo["rho"] == pytest.approx(median_rho(q.X), rel=1e-12)
        assert qinfo["test"] + qinfo["candidates"] == qinfo["pairs"]
        assert qinfo["pairs"] == len(pairs_from_grades(q.grades)) and qinfo["test"] == len(test)
        assert np.all(q.grades[test[:, 0]] > q.grades[test[:, 1]])  # winner first
        # k = 0: the prior alone, zero mean: every test pair at 1/2, error 1/2 by the ties rule
        assert pair_error(gaussian_probs(np.zeros(q.n_docs), K, test)) == 0.5
        for c in model["curves"]:
            assert model["curves"][c]["per_query"][b][0] == 0.5
        asked = np.asarray(model["asked"]["variance_ratio"][b])
        assert asked.shape == (k, 2) and np.all(q.grades[asked[:, 0]] > q.grades[asked[:, 1]])
        assert not {tuple(p) for p in asked} & {tuple(p) for p in test}  # never a test pair
        if b:
            continue
        # k = K: an EP fit from scratch on the pairs the variance ratio asked (query 5)
        error, auc, m = refit(K, asked, test)
        tol = 1.5 / m  # a pair within rounding of 1/2 may flip
        assert model["curves"]["variance_ratio"]["per_query"][b][k] == pytest.approx(error, abs=tol)
        assert model["auc"]["variance_ratio"]["per_query"][b] == pytest.approx(auc, abs=tol)
    assert results["models"] == written["models"]


@pytest.mark.slow
def test_xpgp_on_the_sample_graph(tmp_path):
    """``--collection sample``: the full protocol's XPGP prior on the sample's keyword graph."""
    from bayesrank.data.graphs import ohsumed_keyword_graph
    from bayesrank.data.sample import sample_meta_path

    k = 6
    _, written = run(
        tmp_path / "x", "--collection", "sample", "--models", "XPGP", "GP", "--queries", 1,
        "--k", k, "--criteria", "variance_ratio", "random", "--repeats", 2,
    )  # fmt: skip
    assert list(written["models"]) == ["XPGP", "GP"]
    (qinfo,), (test,) = written["queries"], written["test_pairs"]
    assert qinfo["relations"] == ["keyword"]
    q = SAMPLE[qinfo["qid"]]
    test = np.asarray(test)
    W = ohsumed_keyword_graph(sample_meta_path(q.qid), doc_ids=q.doc_ids, k=10)[0]
    priors = {
        "XPGP": prior_covariance(q.X, graphs=[W]),
        "GP": prior_covariance(q.X, entity=0.0) + 1e-6 * np.eye(q.n_docs),
    }
    for name, K in priors.items():
        model = written["models"][name]
        asked = np.asarray(model["asked"]["variance_ratio"][0])
        error, auc, m = refit(K, asked, test)
        assert model["curves"]["variance_ratio"]["per_query"][0][k] == pytest.approx(
            error, abs=1.5 / m
        )
        assert model["auc"]["variance_ratio"]["per_query"][0] == pytest.approx(auc, abs=1.5 / m)
        assert model["curves"]["random"]["per_query"][0][0] == 0.5


def test_presets():
    from bayesrank.experiments.active.protocol import check

    def opt(*argv):
        args = parse(*argv)
        args.seed = 0
        return check(args)

    reduced = opt()
    assert (reduced["collection"], reduced["models"]) == ("letor", ["GP+entity"])
    assert [reduced[o] for o in ("queries", "k", "repeats", "min_pairs")] == [5, 10, 5, 20]
    full = opt("--protocol", "full")
    assert (full["collection"], full["models"]) == ("OHSUMED", ["XPGP", "GP+entity", "GP"])
    assert [full[o] for o in ("queries", "k", "repeats", "min_pairs")] == [10, 50, 20, 200]
    assert opt("--protocol", "full", "--collection", "MQ2008")["models"] == ["GP+entity", "GP"]
    assert opt("--protocol", "full", "--k", 7, "--models", "GP")["k"] == 7  # an option wins
    for o in (reduced, full):
        assert o["test_fraction"] == 0.5 and o["engine"] == "ep" and len(o["criteria"]) == 3


@pytest.mark.slow
@pytest.mark.shared_data
def test_full_queries(shared_data):
    """The full protocol's queries: ten per collection, each with >= 200 labelled pairs, the
    relations XPGP uses."""
    from bayesrank.experiments.active.protocol import check, load

    for collection, relations in (
        ("OHSUMED", ["keyword"]),
        ("MQ2008", []),
        ("MovieLens", ["co_director", "co_genre"]),
    ):
        args = parse("--protocol", "full", "--collection", collection)
        args.seed = 0
        queries, _ = load(check(args), shared_data)
        assert len(queries) == 10 and len({q.qid for q in queries}) == 10
        for q in queries:
            assert len(pairs_from_grades(q.grades)) >= 200 and list(q.relations) == relations
            n = len(q.X)
            assert all(W.shape == (n, n) and np.allclose(W, W.T) for W in q.relations.values())
            if collection == "MovieLens":
                assert n <= 100 and q.X.shape[1] == 27


@pytest.mark.slow
@pytest.mark.shared_data
def test_the_script_runs_the_full_protocol(shared_data, tmp_path, monkeypatch):
    """``experiments/active.py``: the package's run with the full preset, one folder per
    collection."""
    sys.path.insert(0, str(REPO / "experiments"))
    try:
        spec = importlib.util.spec_from_file_location(
            "active_script", REPO / "experiments/active.py"
        )
        script = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(script)
    finally:
        sys.path.remove(str(REPO / "experiments"))
    script.main([
        "--data-dir", str(shared_data), "--collection", "MQ2008", "--queries", "1", "--k", "2",
        "--models", "GP+entity", "--criteria", "variance_ratio", "--out", str(tmp_path),
    ])  # fmt: skip
    written = strict((tmp_path / "mq2008" / "results.json").read_text())
    s = written["settings"]
    assert (s["protocol"], s["collection"], s["min_pairs"], s["repeats"]) == (
        "full", "MQ2008", 200, 20,
    )  # fmt: skip
    assert written["queries"][0]["pairs"] >= 200 and written["ks"] == [0, 1, 2]


@pytest.mark.parametrize(
    ("argv", "data_dir", "match"),
    [
        ([], "missing", "--data-dir 'missing' does not exist"),
        ([], "bad", r"--data-dir: cannot read .*bad\.txt, line 1"),
        ([], "empty", "holds no LETOR file"),
        (["--k", 1000], None, r"--k 1000 is larger than the \d+ candidate pairs of query 5"),
        (["--k", 0], None, "--k must be an integer >= 1"),
        (["--test-fraction", 1.5], None, "--test-fraction must be a number in"),
        (["--models", "XPGP"], None, "--models XPGP needs relations"),
        (["--protocol", "full", "--collection", "MQ2008", "--models", "XPGP"], None, "XPGP"),
        (["--protocol", "full"], None, "--collection OHSUMED needs --data-dir"),
        (["--collection", "MovieLens"], "empty", "--collection MovieLens: .*hetrec2011"),
        (["--min-pairs", 5000], None, "--min-pairs 5000"),
    ],
)
def test_user_errors(tmp_path, monkeypatch, argv, data_dir, match):
    monkeypatch.chdir(tmp_path)
    assert_user_error("active", tmp_path, argv, data_dir, match)
