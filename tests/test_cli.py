"""The ``bayesrank`` command: data summary and evaluate, on the bundled sample and small files."""

import json
import math
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from bayesrank.cli import main
from bayesrank.data.sample import load_sample, sample_path


def test_summary_default_is_bundled_sample(capsys):
    assert main(["data", "summary"]) == 0
    out = capsys.readouterr().out
    assert "queries              5" in out and "documents            271" in out
    assert "0: 223, 1: 18, 2: 30" in out


def test_summary_json(capsys):
    assert main(["data", "summary", str(sample_path()), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["n_queries"] == 5 and report["n_docs"] == 271
    assert report["label_counts"] == {"0": 223, "1": 18, "2": 30}


def write_letor(tmp_path):
    # Query 1: labels [0, 2, 1]; query 2: labels [0, 0] (no relevant document).
    text = "0 qid:1 1:0\n2 qid:1 1:1\n1 qid:1 1:2\n0 qid:2 1:0\n0 qid:2 1:1\n"
    path = tmp_path / "data.txt"
    path.write_text(text)
    return path


def test_evaluate_hand_worked(tmp_path, capsys):
    data = write_letor(tmp_path)
    scores = tmp_path / "pred.txt"
    # Query 1 ranked by score: doc0 (label 0), doc2 (label 1), doc1 (label 2).
    scores.write_text("3\n1\n2\n5\n4\n")
    assert main(["evaluate", str(data), str(scores), "--json", "--max-k", "3"]) == 0
    result = json.loads(capsys.readouterr().out)
    # AP of query 1: relevant at positions 2 and 3 -> (1/2 + 2/3) / 2; query 2 scores 0.
    assert result["MAP"] == pytest.approx(((1 / 2 + 2 / 3) / 2 + 0) / 2, abs=1e-12)
    # DCG@3 = 0 + 1 + 3/log2(3); ideal = 3 + 1 + 0.
    ndcg3 = (1 + 3 / math.log2(3)) / 4
    assert result["NDCG@3"] == pytest.approx(ndcg3 / 2, abs=1e-12)
    assert result["NDCG@1"] == 0.0
    assert result["P@2"] == pytest.approx((1 / 2 + 0) / 2, abs=1e-12)
    assert [row["qid"] for row in result["per_query"]] == ["1", "2"]
    assert result["per_query"][0]["NDCG@3"] == pytest.approx(ndcg3, abs=1e-12)


def test_evaluate_beyond_the_longest_query(tmp_path, capsys):
    """Issue 32: --max-k 1000 on short queries was refused. Past a query's end the official
    scripts' conventions give NDCG@k = 0 and P@k = (relevant documents) / k, worked here by
    hand (query 1: two relevant of three; query 2: none); k within the queries is unchanged."""
    data = write_letor(tmp_path)
    scores = tmp_path / "pred.txt"
    scores.write_text("3\n1\n2\n5\n4\n")
    assert main(["evaluate", str(data), str(scores), "--json", "--max-k", "1000"]) == 0
    wide = json.loads(capsys.readouterr().out)
    assert main(["evaluate", str(data), str(scores), "--json", "--max-k", "3"]) == 0
    narrow = json.loads(capsys.readouterr().out)
    for key in ("MAP", "NDCG@1", "NDCG@3", "P@2", "P@3"):
        assert wide[key] == narrow[key]
    for k in (4, 17, 1000):
        assert wide[f"NDCG@{k}"] == 0.0
        assert wide["per_query"][0][f"P@{k}"] == pytest.approx(2 / k, rel=1e-12)
        assert wide[f"P@{k}"] == pytest.approx((2 / k + 0) / 2, rel=1e-12)
    assert main(["evaluate", str(data), str(scores), "--max-k", "1000"]) == 0
    table = capsys.readouterr().out
    assert "  1000" in table and "NDCG@k" in table  # the first ten k and the last


def test_evaluate_table_and_errors(tmp_path, capsys):
    data = write_letor(tmp_path)
    scores = tmp_path / "pred.txt"
    scores.write_text("1\n2\n3\n4\n5\n")
    assert main(["evaluate", str(data), str(scores)]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0] == "queries  2" and out.splitlines()[1].startswith("MAP")
    scores.write_text("1\n2\n")
    assert main(["evaluate", str(data), str(scores)]) == 2
    assert "2 scores for 5 documents" in capsys.readouterr().err


def test_evaluate_perfect_scores_on_sample(tmp_path, capsys):
    queries = load_sample()
    scores = np.concatenate([q.grades for q in queries]).astype(float)
    pred = tmp_path / "pred.txt"
    pred.write_text("\n".join(map(str, scores)) + "\n")
    assert main(["evaluate", str(sample_path()), str(pred), "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    for row in result["per_query"]:
        relevant = row["qid"] != "8"
        assert row["NDCG@10"] == pytest.approx(1.0 if relevant else 0.0)
        assert row["MAP"] == pytest.approx(1.0 if relevant else 0.0)


@pytest.mark.slow  # a child process
def test_python_dash_m(tmp_path):
    out = subprocess.run(
        [sys.executable, "-m", "bayesrank", "data", "summary", "--json"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert json.loads(out)["n_docs"] == 271


def test_version_and_help(capsys):
    import bayesrank

    with pytest.raises(SystemExit) as done:
        main(["--version"])
    assert done.value.code == 0
    assert capsys.readouterr().out.strip() == f"bayesrank {bayesrank.__version__}"
    with pytest.raises(SystemExit):
        main(["--help"])
    text = capsys.readouterr().out
    assert "experiment" in text and "fit" in text and "predict" in text
    assert "``" not in text and ":mod:" not in text  # no raw reST in the help


def _tiny_letor(tmp_path):
    """Two queries of six documents, three features; grades follow feature 1 but not exactly."""
    rng = np.random.default_rng(0)
    lines = []
    for qid in (1, 2):
        X = rng.uniform(size=(6, 3))
        grades = np.clip(np.round(2 * X[:, 0] + 0.3 * rng.normal(size=6)), 0, 2).astype(int)
        for d, (g, x) in enumerate(zip(grades, X, strict=True)):
            feats = " ".join(f"{k + 1}:{v:.4f}" for k, v in enumerate(x))
            lines.append(f"{g} qid:{qid} {feats} #docid = d{qid}{d}")
    path = tmp_path / "tiny.txt"
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.mark.slow
def test_fit_save_load_predict_evaluate(tmp_path, capsys):
    """fit -> model folder -> predict (scores, pairs) -> evaluate: the scores are each entity's
    posterior mean (the model file loaded by bayesrank.io gives the same), the pair file's
    probabilities follow Eq. 13-14 from its moments, and evaluate reads the scores."""
    from scipy.stats import norm

    from bayesrank.data.letor import load_letor
    from bayesrank.io import load

    data = _tiny_letor(tmp_path)
    model = tmp_path / "model"
    assert main(["fit", str(data), "--out", str(model), "--quiet"]) == 0
    assert main(["predict", str(model), "--scores", str(tmp_path / "s.txt"),
                 "--pairs", str(tmp_path / "p.csv")]) == 0  # fmt: skip
    scores = np.loadtxt(tmp_path / "s.txt")
    queries = load_letor(data)
    assert scores.shape == (12,)
    for k, q in enumerate(queries):
        posterior = load(model / f"query-{k}.npz")
        np.testing.assert_array_equal(scores[q.rows], np.asarray(posterior.mean))
    rows = np.genfromtxt(tmp_path / "p.csv", delimiter=",", names=True, dtype=None)
    assert len(rows) == 2 * 15  # every pair of each query's six documents
    prob = norm.cdf(rows["delta_mean"] / np.sqrt(1 + rows["delta_var"]))
    np.testing.assert_allclose(rows["prob"], prob, rtol=1e-4)
    assert np.all(rows["prob_05"] <= rows["prob_95"])
    assert np.all(rows["delta_mean"] >= -1e-9)  # the higher-ranked entity first
    capsys.readouterr()
    assert main(["evaluate", str(data), str(tmp_path / "s.txt"), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["n_queries"] == 2


@pytest.mark.slow  # 3 s or more in the fast loop
def test_fit_and_predict_errors(tmp_path, capsys):
    data = _tiny_letor(tmp_path)
    assert main(["fit", str(data), "--out", str(tmp_path / "m"), "--query", "9"]) == 2
    assert "--query '9' is not in" in capsys.readouterr().err
    assert main(["predict", str(tmp_path)]) == 2
    assert "not a model folder" in capsys.readouterr().err
    model = tmp_path / "m2"
    assert main(["fit", str(data), "--out", str(model), "--query", "1", "--fixed",
                 "--quiet"]) == 0  # fmt: skip
    assert main(["predict", str(model), "--scores", str(tmp_path / "s.txt")]) == 2
    assert "covers 6 of the 12 data lines" in capsys.readouterr().err
    both = ["--scores", str(tmp_path / "s.txt"), "--pairs", str(tmp_path / "p.csv")]
    assert main(["predict", str(model), *both]) == 2  # said, not silent: which, and what to do
    assert "nothing written (without --scores, the pairs are)" in capsys.readouterr().err
    assert not (tmp_path / "s.txt").exists() and not (tmp_path / "p.csv").exists()
    index = json.loads((model / "collection.json").read_text())
    index["format_version"] = 99
    (model / "collection.json").write_text(json.dumps(index))
    assert main(["predict", str(model)]) == 2
    assert "format_version 99 is newer" in capsys.readouterr().err


@pytest.mark.slow
def test_fit_predict_and_the_study_on_the_bundled_sample(tmp_path, capsys):
    """The default data is the bundled sample: fit one of its queries, predict every pair of
    it; and the study command on it, reduced to one query, one model, one repetition."""
    model = tmp_path / "model"
    assert main(["fit", "--query", "10", "--fixed", "--quiet", "--out", str(model)]) == 0
    assert main(["predict", str(model), "--pairs", str(tmp_path / "p.csv")]) == 0
    rows = (tmp_path / "p.csv").read_text().splitlines()
    assert len(rows) == 1 + 35 * 34 // 2  # query 10 has 35 documents
    assert all(row.startswith("10,") for row in rows[1:])
    out = tmp_path / "study"
    argv = ["experiment", "relational", "--queries", "1", "--known", "20", "--repeats", "1"]
    argv += ["--models", "XPGP", "PGP+I", "--jobs", "0", "--out", str(out)]
    capsys.readouterr()
    assert main(argv) == 0
    printed = capsys.readouterr()
    assert "== sample, 20 known pairs ==" in printed.out
    assert json.loads((out / "results.json").read_text())["collection"] == "sample"
    # every file the command says it wrote is there, the figures included (a new user found
    # "written: ... curves.png" printed where matplotlib was missing and nothing was written)
    lines = printed.err.splitlines()
    named = [line.split("written: ", 1)[1] for line in lines if line.startswith("written: ")]
    names = {"results.json", "table.txt", "table.md", "curves.png", "paired.png"}
    assert {Path(p).name for p in named} == names
    for path in named:
        assert Path(path).parent == out and Path(path).stat().st_size > 0
    assert Path(named[-2]).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.slow
def test_fit_predict_with_the_sparse_approximation(tmp_path, capsys):
    """``--approximation sparse`` at a rank of at least the query's size predicts what the
    dense Laplace fit predicts (to 1e-6 in the file's 6 digits); it needs --inference laplace."""
    data = _tiny_letor(tmp_path)
    for approx in ("dense", "sparse"):
        out = tmp_path / approx
        assert main(["fit", str(data), "--out", str(out), "--inference", "laplace", "--fixed",
                     "--approximation", approx, "--rank", "6", "--quiet"]) == 0  # fmt: skip
        assert main(["predict", str(out), "--pairs", str(tmp_path / f"{approx}.csv")]) == 0
    dense = np.genfromtxt(tmp_path / "dense.csv", delimiter=",", names=True, dtype=None)
    sparse = np.genfromtxt(tmp_path / "sparse.csv", delimiter=",", names=True, dtype=None)
    np.testing.assert_allclose(sparse["prob"], dense["prob"], atol=2e-6)
    np.testing.assert_allclose(sparse["delta_var"], dense["delta_var"], rtol=1e-5)
    capsys.readouterr()
    assert main(["fit", str(data), "--out", str(tmp_path / "x"), "--approximation", "sparse"]) == 2
    assert "needs --inference laplace" in capsys.readouterr().err


@pytest.mark.parametrize(
    "command", [["fit"], ["experiment", "relational"], ["optimize", "--dim", "1"]]
)
@pytest.mark.parametrize("seed", ["-1", str(2**64 + 1), "1.5"])
def test_every_seed_option_is_checked_before_anything_runs(command, seed, capsys):
    """Issue 49: ``fit --seed 2**64+1`` ended in JAX's OverflowError traceback, ``experiment
    --seed -1`` in NumPy's; every ``--seed`` is now argparse's one-line error, exit 2."""
    with pytest.raises(SystemExit) as stop:
        main([*command, "--seed", seed])
    assert stop.value.code == 2
    err = capsys.readouterr().err
    assert "argument --seed: must be an integer" in err and "Traceback" not in err


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("1e300", r"1e\+300"),
        ("1180591620717411303424", r"1\.18059\d*e\+21"),
        ("1e12", "1000000000000"),
    ],
)
def test_fit_labels_grades_names_a_grade_too_large_without_a_warning(tmp_path, capsys, text, shown):
    """Issue 49: grades.csv ``-0.0 1 2 1e300 0 1`` gave NumPy's RuntimeWarning and "graded row 3:
    grade -9223372036854775808 is negative" (the int64 cast wrapped first); 1e12 asked for 7 TiB
    of thresholds. The grade is named as written, before anything is fitted."""
    import warnings

    from bayesrank.data.study import StudyQuery, write_study_dir

    X = np.random.default_rng(0).normal(size=(6, 2))
    query = StudyQuery("q0", X, np.zeros((0, 2), int), {}, np.zeros(6))
    write_study_dir(tmp_path / "data", [query])
    (tmp_path / "data" / "q0" / "grades.csv").write_text(f"-0.0\n1\n2\n{text}\n0\n1\n")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a RuntimeWarning of the cast fails the test
        code = main(["fit", str(tmp_path / "data"), "--out", str(tmp_path / "m"), "--fixed",
                     "--quiet", "--labels", "grades"])  # fmt: skip
    assert code == 2
    err = capsys.readouterr().err
    assert re.search(rf"query 'q0': graded row 3: grade {shown} is too large: above 65535", err)
    assert "Warning" not in err and "-9223372036854775808" not in err


def test_predict_help_shows_a_percent_sign_not_two(capsys):
    """Issue 49: ``bayesrank predict --help`` printed "90%%" (a description is not %-formatted)."""
    with pytest.raises(SystemExit):
        main(["predict", "--help"])
    text = capsys.readouterr().out
    assert "90% interval" in " ".join(text.split()) and "%%" not in text
    assert "prob_50" in text  # the columns named, the mean and the median told apart


@pytest.mark.slow  # a learned fit of a sample query, and a fixed one with ties
@pytest.mark.parametrize("labels", ["pairs", "ties"])
def test_predict_pair_columns_keep_the_documented_relations_on_a_real_fit(tmp_path, labels):
    """The pair file's ``prob`` is the posterior mean of ``Phi(d)``, ``d = xi_i - xi_j - eps``
    (Gauss-Hermite quadrature over ``N(delta_mean, delta_var)``), ``prob_05``, ``prob_50``,
    ``prob_95`` its quantiles (``P(Phi(d) <= prob_q) = q`` under that normal, by SciPy's CDF),
    and, as ``bayesrank predict --help`` and docs/guide/cli.md say, ``prob`` lies between
    ``prob_50`` and 1/2 and outside ``[prob_05, prob_95]`` only where ``|a| sqrt(v) > 3.29``,
    on a learned fit of a bundled sample query (where such pairs occur)."""
    from scipy.stats import norm

    from bayesrank.io import load

    model, pairs = tmp_path / "m", tmp_path / "p.csv"
    fixed = ["--fixed"] if labels == "ties" else []
    argv = ["fit", "--query", "5", "--labels", labels, "--out", str(model), "--quiet", *fixed]
    assert main(argv) == 0
    assert main(["predict", str(model), "--pairs", str(pairs)]) == 0
    rows = np.genfromtxt(pairs, delimiter=",", names=True, dtype=None, encoding="utf-8")
    margin = load(model / "query-0.npz").prior.margin
    eps = 0.0 if margin is None else float(margin)
    assert ("prob_tie" in rows.dtype.names) == (labels == "ties")
    a, v = rows["delta_mean"] - eps, rows["delta_var"]
    # E[Phi(a + s t)] = P(e < a + s t) = E[Phi((a - e) / s)], t, e ~ N(0, 1): Gauss-Hermite
    # over whichever variable makes the integrand at least as wide as the weight
    t, w = np.polynomial.hermite_e.hermegauss(120)
    s, w = np.sqrt(v)[:, None], w / w.sum()
    mean = np.where(s[:, 0] > 1, norm.cdf((a[:, None] - t) / np.maximum(s, 1)) @ w,
                    norm.cdf(a[:, None] + np.minimum(s, 1) * t) @ w)  # fmt: skip
    np.testing.assert_allclose(rows["prob"], mean, rtol=0, atol=1e-9)
    for q, column in ((0.05, "prob_05"), (0.5, "prob_50"), (0.95, "prob_95")):
        inside = np.abs(rows[column] - 0.5) < 0.5 - 1e-6  # ppf is exact enough there
        d_q = norm.ppf(rows[column][inside])
        np.testing.assert_allclose(norm.cdf((d_q - a[inside]) / np.sqrt(v[inside])), q,
                                   atol=1e-6)  # fmt: skip
    p, lo, mid, hi = (rows[c] for c in ("prob", "prob_05", "prob_50", "prob_95"))
    assert np.all((lo <= mid) & (mid <= hi))
    assert np.all((np.minimum(mid, 0.5) <= p + 1e-15) & (p <= np.maximum(mid, 0.5) + 1e-15))
    outside = (p < lo) | (p > hi)
    assert np.all(np.abs(a[outside]) * np.sqrt(v[outside]) > 2 * norm.ppf(0.95))
    if labels == "pairs":
        assert outside.any()  # the sample's learned fit has such pairs: the rule is exercised


@pytest.mark.slow  # a sparse fit of 300 entities and 44,850 pair predictions
def test_predict_streams_a_sparse_model_with_one_set_of_draws(tmp_path, monkeypatch):
    """``bayesrank predict --pairs`` writes every pair of a sparse model in blocks (here 45 of
    1,000 pairs), all from one set of posterior draws (made once): the file equals the model's
    own prediction of all 44,850 pairs in one call (``predict_pairs``: by draws of the same
    key), pair by pair, to rounding."""
    import bayesrank.cli.pairfile as pairfile
    from bayesrank.inference.sparse import SparsePosterior
    from bayesrank.io import load

    rng = np.random.default_rng(3)
    n = 300
    query = tmp_path / "data" / "q1"
    query.mkdir(parents=True)
    X = rng.uniform(size=(n, 2))
    utility = np.sin(5 * X[:, 0]) + X[:, 1]
    i, j = rng.integers(0, n, size=(2, 1500))
    i, j = i[i != j], j[i != j]
    pairs = np.where((utility[i] > utility[j])[:, None], np.c_[i, j], np.c_[j, i])
    np.savetxt(query / "attributes.csv", X, delimiter=",")
    np.savetxt(query / "comparisons.csv", pairs, fmt="%d", delimiter=",")
    model, out = tmp_path / "m", tmp_path / "p.csv"
    assert main(["fit", str(query.parent), "--out", str(model), "--approximation", "sparse",
                 "--inference", "laplace", "--fixed", "--quiet"]) == 0  # fmt: skip
    monkeypatch.setattr(pairfile, "PAIR_BLOCK", 1000)
    blocks, draws = [], []
    real_blocks, real_draws = pairfile.upper_pairs, SparsePosterior.draws

    def counted_blocks(order, block):
        return (blocks.append(b) or b for b in real_blocks(order, block))

    monkeypatch.setattr(pairfile, "upper_pairs", counted_blocks)
    monkeypatch.setattr(SparsePosterior, "draws", lambda self: draws.append(1) or real_draws(self))
    assert main(["predict", str(model), "--pairs", str(out)]) == 0
    assert len(blocks) == 45 and max(map(len, blocks)) == 1000 and len(draws) == 1
    rows = np.genfromtxt(out, delimiter=",", names=True, dtype=None, encoding="utf-8")
    assert len(rows) == n * (n - 1) // 2
    posterior = load(model / "query-0.npz")
    whole = posterior.predict_pairs(np.c_[rows["i"], rows["j"]])  # > exact_up_to: the draws
    # the same draws, from another compiled program: equal but for the last bit of rounding
    np.testing.assert_allclose(rows["prob"], np.asarray(whole.prob), rtol=1e-13, atol=0)
    np.testing.assert_allclose(rows["delta_var"], np.asarray(whole.delta_var), rtol=1e-12)


@pytest.mark.slow
def test_fit_with_the_sparse_approximation_learns_each_querys_hyperparameters(tmp_path):
    """``fit --inference laplace --approximation sparse`` without ``--fixed`` learns each
    query's prior from the sparse engine's evidence: the model files hold the prior that
    ``XPGPModel(prior, SparseLaplace(rank)).fit(problem, learn_hyperparameters=True)`` learns
    in Python with the command's key, and its learning result."""
    import jax

    from bayesrank.cli.model import read_collection
    from bayesrank.data.letor import load_letor
    from bayesrank.inference.engines import SparseLaplace
    from bayesrank.io import load
    from bayesrank.kernels import RBF, XPGP, Independent
    from bayesrank.learning import SparseLearning
    from bayesrank.model import XPGPModel

    data, out = _tiny_letor(tmp_path), tmp_path / "model"
    assert main(["fit", str(data), "--out", str(out), "--inference", "laplace",
                 "--approximation", "sparse", "--rank", "6", "--quiet"]) == 0  # fmt: skip
    index = read_collection(out)["queries"]
    queries = load_letor(data)
    for k, entry in enumerate(index):
        saved = load(out / entry["file"])
        assert isinstance(saved.learning, SparseLearning)
        prior = XPGP(RBF(), (), entity=Independent())
        key = jax.random.fold_in(jax.random.PRNGKey(0), k)
        again = XPGPModel(prior, SparseLaplace(rank=6)).fit(
            saved.problem, key=key, learn_hyperparameters=True
        )
        np.testing.assert_allclose(saved.prior.weights, again.prior.weights, rtol=1e-10)
        np.testing.assert_allclose(saved.prior.attribute.rho, again.prior.attribute.rho,
                                   rtol=1e-10)  # fmt: skip
        np.testing.assert_allclose(saved.mean, again.mean, atol=1e-10)
    assert len(index) == len(queries)
