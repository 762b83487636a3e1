"""The experiment commands (``bayesrank.experiments``): each runs end to end on the bundled sample
at its smallest sizes, and its ``results.json`` is checked against references computed here
independently: the prior alone's error (1/2 by the ties rule) and an EP refit on the pairs the
loop asked (active); MAP, NDCG and P from the stored scores (baselines); EP's probabilities by
hand and NUTS within its own Monte Carlo error (ep-vs-nuts); the posteriors at the stored learned
hyperparameters and the log-likelihood by hand (inference). Then the errors a user can cause.
"""

from __future__ import annotations

import argparse
import gzip
import importlib.util
import json

import numpy as np
import pytest
from scipy.special import ndtr

from bayesrank.data.sample import load_sample, sample_path
from bayesrank.experiments import EXPERIMENTS, _common

SAMPLE = {q.qid: q for q in load_sample()}


def _strict(text: str):
    def refuse(name):
        raise AssertionError(f"results.json holds {name}: not strict JSON")

    return json.loads(text, parse_constant=refuse)


def run(name, out, *argv, data_dir=None, seed=0):
    """``run`` of one experiment as the command line calls it: ``(results, results.json)``."""
    module = EXPERIMENTS[name]
    parser = argparse.ArgumentParser()
    module.add_arguments(parser)
    args = parser.parse_args([str(a) for a in argv])
    args.data_dir, args.out, args.seed = data_dir, out, seed
    results = module.run(args)
    written = None if out is None else _strict((out / "results.json").read_text())
    return results, written


def assert_figure(path):
    """The PNG is there exactly when matplotlib is installed."""
    assert path.is_file() == (importlib.util.find_spec("matplotlib") is not None)


def median_rho(X):
    d = [np.linalg.norm(X[i] - X[j]) for i in range(len(X)) for j in range(i + 1, len(X))]
    return 1.0 / np.median([x for x in d if x > 0])


def prior_covariance(X, kappa=1.0, entity=0.1):
    """The experiments' fixed prior by hand: the RBF of Eq. 1, ``kappa^2 exp(-rho^2 / 2
    ||x - x'||^2)`` (``rho`` by the median heuristic), plus ``entity^2 I`` (unit weight and
    ``2 sigma^2 = 1``: Eq. 5's factors are 1)."""
    sq = ((X[:, None] - X[None]) ** 2).sum(-1)
    return kappa**2 * np.exp(-0.5 * median_rho(X) ** 2 * sq) + entity**2 * np.eye(len(X))


def gaussian_probs(mean, cov, pairs):
    """Eq. 13-14 by hand: ``Phi(dmu / sqrt(1 + dvar))``."""
    i, j = pairs[:, 0], pairs[:, 1]
    dvar = cov[i, i] + cov[j, j] - 2 * cov[i, j]
    return ndtr((mean[i] - mean[j]) / np.sqrt(1 + dvar))


def pair_error(p_winner):
    p = np.asarray(p_winner)
    return float(np.mean(p < 0.5) + 0.5 * np.mean(p == 0.5))


def test_registry():
    assert set(EXPERIMENTS) == {"active", "baselines", "ep-vs-nuts", "inference"}
    for name, module in EXPERIMENTS.items():
        assert module.NAME == name and module.HELP and "\n" not in module.HELP
        assert callable(module.add_arguments) and callable(module.run)


@pytest.mark.slow
def test_active(tmp_path, capsys):
    k = 10  # the reference EP fit then shares its compiled program with test_ep_vs_nuts's
    results, written = run(
        "active", tmp_path / "a", "--k", k, "--repeats", 2, "--queries", 2, "--min-pairs", 20,
        "--criteria", "variance_ratio", "random",
    )  # fmt: skip
    assert written["experiment"] == "active" and written["ks"] == list(range(k + 1))
    assert set(written["curves"]) == {"variance_ratio", "random"}
    assert [q["qid"] for q in written["queries"]] == ["5", "7"]  # the first with >= 20 pairs
    assert (tmp_path / "a" / "table.txt").is_file()
    assert_figure(tmp_path / "a" / "active.png")
    out, err = capsys.readouterr()
    assert "variance_ratio" in out and "[3/3] random k=10 x 2 runs" in err
    for c, entry in written["curves"].items():
        curves = np.asarray(entry["per_query"])
        assert curves.shape == (2, k + 1) and np.all((curves >= 0) & (curves <= 1))
        assert np.allclose(entry["mean"], curves.mean(axis=0))
        if c == "random":
            assert np.asarray(entry["repetitions"]).shape == (2, 2, k + 1)
    for b, (qinfo, test) in enumerate(zip(written["queries"], written["test_pairs"], strict=True)):
        q = SAMPLE[qinfo["qid"]]
        test = np.asarray(test)
        K = prior_covariance(q.X)
        assert qinfo["rho"] == pytest.approx(median_rho(q.X), rel=1e-12)
        assert np.all(q.grades[test[:, 0]] > q.grades[test[:, 1]])  # winner first
        # k = 0: the prior alone, zero mean: every test pair at 1/2, error 1/2 by the ties rule
        assert pair_error(gaussian_probs(np.zeros(q.n_docs), K, test)) == 0.5
        for c in written["curves"]:
            assert written["curves"][c]["per_query"][b][0] == 0.5
        asked = np.asarray(written["asked"]["variance_ratio"][b])
        assert asked.shape == (k, 2) and np.all(q.grades[asked[:, 0]] > q.grades[asked[:, 1]])
        assert not {tuple(p) for p in asked} & {tuple(p) for p in test}  # never a test pair
        if b:
            continue
        # k = K: an EP fit from scratch on the pairs the variance ratio asked (query 5)
        from bayesrank.inference import ep

        post = ep.fit(K, asked, tol=1e-10)
        p = gaussian_probs(np.asarray(post.mean), np.asarray(post.cov), test)
        assert written["curves"]["variance_ratio"]["per_query"][b][k] == pytest.approx(
            pair_error(p),
            abs=1.5 / len(test),  # a pair within rounding of 1/2 may flip
        )
    assert results["curves"] == written["curves"]


def test_baselines_query_folds(tmp_path, capsys):
    # RankBoost here, RankSVM in test_baselines_fold_folder: each fit compiles (~2 s)
    results, written = run(
        "baselines", tmp_path / "b", "--folds", 2, "--methods", "RankBoost", "--rounds", 5, 10,
        "--n-thresholds", 3, "--max-k", 5,
    )  # fmt: skip
    assert written["mode"] == "query folds"
    qids = [q["qid"] for q in written["test_queries"]]
    assert qids == ["5", "7", "8", "10", "12"]
    for fold in written["folds"]:  # every query scored by a model that never saw it
        assert not set(fold["train"]) & set(fold["test"])
    assert sorted(q for f in written["folds"] for q in f["test"]) == sorted(qids)
    assert [(r["method"], r["params"]) for r in written["rows"]] == [
        ("RankBoost", {"T": 5}),
        ("RankBoost", {"T": 10}),
    ]
    grades = [SAMPLE[q].grades for q in qids]
    for row in written["rows"]:
        assert row["metrics"]["MAP"] == pytest.approx(map_by_hand(row["scores"], grades))
        # NDCG and P: bayesrank.metrics on the stored scores, query by query, then the mean
        m = letor_by_query(row["scores"], grades, 5)
        assert 0 <= row["metrics"]["MAP"] <= 1 and float(m[2].map) == 0.0  # 8: none relevant
        for k in (1, 5):
            ndcg = np.mean([x.ndcg[k - 1] for x in m])
            prec = np.mean([x.precision[k - 1] for x in m])
            assert row["metrics"][f"NDCG@{k}"] == pytest.approx(ndcg, abs=1e-12)
            assert row["metrics"][f"P@{k}"] == pytest.approx(prec, abs=1e-12)
    assert "RankBoost T=10" in capsys.readouterr().out
    assert results["rows"][0]["metrics"] == written["rows"][0]["metrics"]
    assert_figure(tmp_path / "b" / "baselines.png")


def map_by_hand(scores, grades) -> float:
    """LETOR's MAP: per query the mean precision at the relevant documents' ranks (0 without
    one; ties ranked by index, the library's convention), then the mean over queries."""
    aps = []
    for s, g in zip(scores, grades, strict=True):
        rel = np.asarray(g)[np.argsort(-np.asarray(s), kind="stable")] > 0
        precision = np.cumsum(rel) / np.arange(1, len(rel) + 1)
        aps.append(precision[rel].mean() if rel.any() else 0.0)
    return float(np.mean(aps))


def letor_by_query(scores, grades, max_k):
    """:func:`bayesrank.metrics.letor_metrics` of each query, padded to one length (masked) so
    that it compiles once."""
    import jax

    from bayesrank.metrics import letor_metrics

    fn = jax.jit(letor_metrics, static_argnames="max_k")
    n = max(len(g) for g in grades)
    out = []
    for s, g in zip(scores, grades, strict=True):
        S, G = np.zeros(n), np.zeros(n, np.asarray(g).dtype)
        S[: len(s)], G[: len(g)] = s, g
        out.append(jax.device_get(fn(S, G, np.arange(n) < len(g), max_k=max_k)))
    return out


def _write_letor(path, qids):
    """The sample's lines of ``qids`` as a plain LETOR file."""
    with gzip.open(sample_path(), "rt", newline="") as f:
        lines = [x for x in f if x.split()[1].removeprefix("qid:") in qids]
    path.write_text("".join(lines))


def test_baselines_fold_folder(tmp_path):
    fold = tmp_path / "Fold1"
    fold.mkdir()
    _write_letor(fold / "train.txt", {"5", "8"})
    _write_letor(fold / "vali.txt", {"7"})
    _write_letor(fold / "test.txt", {"10", "12"})
    results, written = run(
        "baselines", None, "--methods", "RankSVM", "--C", 0.01, 1, data_dir=str(fold)
    )
    assert written is None and not any(tmp_path.rglob("results.json"))  # --out None
    assert results["mode"] == "train/test"
    assert [q["qid"] for q in results["test_queries"]] == ["10", "12"]
    assert results["folds"] == [{"train": ["5", "8"], "test": ["10", "12"], "vali": ["7"]}]
    (row,) = results["rows"]  # the grid's value with the best vali MAP, first on ties
    vali = row["vali_MAP"]
    assert row["chosen_on_vali"] and set(vali) == {"0.01", "1.0"}
    assert row["params"]["C"] == max([0.01, 1.0], key=lambda c: vali[str(c)])
    grades = [SAMPLE[q].grades for q in ("10", "12")]
    assert row["metrics"]["MAP"] == pytest.approx(map_by_hand(row["scores"], grades), abs=1e-12)
    # a Path works as well as a str, and the same data give the same scores
    again, _ = run("baselines", None, "--methods", "RankSVM", "--C", 0.01, 1, data_dir=fold)
    assert again["rows"][0]["scores"] == row["scores"]


@pytest.mark.slow
def test_ep_vs_nuts(tmp_path, capsys):
    from bayesrank.inference import ep

    _, written = run(
        "ep-vs-nuts", tmp_path / "e", "--queries", 1, "--known", 10, "--test", 50,
        "--warmup", 150, "--samples", 150, "--chains", 2,
    )  # fmt: skip
    (row,), (pairs,) = written["queries"], written["pairs"]
    q = SAMPLE[row["qid"]]
    assert (row["qid"], row["known"], row["test"]) == ("5", 10, 50)
    known, test = np.asarray(pairs["known"]), np.asarray(pairs["test"])
    assert np.all(q.grades[known[:, 0]] > q.grades[known[:, 1]])
    assert not {tuple(p) for p in known} & {tuple(p) for p in test}
    # EP's probabilities by hand from a fresh EP fit at the same prior
    post = ep.fit(prior_covariance(q.X), known, tol=1e-10)
    p_ep = gaussian_probs(np.asarray(post.mean), np.asarray(post.cov), test)
    assert np.allclose(pairs["p_ep"], p_ep, atol=1e-6)
    # NUTS within its own Monte Carlo error of EP: every pair within 5 MCSE, plus 0.002 for
    # EP's own error (docs/results/ep-vs-nuts.md: mean |dp| 0.002 at 20 pairs on 50 entities,
    # below NUTS's MCSE there)
    dp = np.abs(np.subtract(pairs["p_ep"], pairs["p_nuts"]))
    mcse = np.asarray(pairs["mcse"])
    assert np.all((mcse > 0) & (mcse < 0.05))
    assert np.all(dp <= 5 * mcse + 0.002), np.max(dp / mcse)
    assert row["dp_max"] == pytest.approx(dp.max()) and row["dp_mean"] == pytest.approx(dp.mean())
    assert 0 <= row["beyond_2_mcse"] <= 1 and written["overall"]["pairs"] == 50
    assert row["divergences"] == 0 and row["r_hat_max"] < 1.05
    assert_figure(tmp_path / "e" / "ep_vs_nuts.png")
    assert "[2/2] query 5 NUTS" in capsys.readouterr().err


@pytest.mark.slow
def test_inference(tmp_path):
    import jax.numpy as jnp

    from bayesrank import RBF, XPGP, Independent, PreferenceProblem, XPGPModel

    results, written = run(
        "inference", tmp_path / "i", "--queries", 2, "--known", 20, "--test", 100
    )
    assert list(written["engines"]) == ["ep", "laplace"]
    assert [q["qid"] for q in written["queries"]] == ["5", "7"]
    for engine, info in written["engines"].items():
        assert 0 <= info["pair_error"] <= 0.5 and info["loglik"] < 0
        assert 0 <= info["ece_pooled"] <= 1 and 0 <= info["brier"] <= 1
        h = info["hyperparameters"]
        prior = XPGP(
            RBF(h["kappa"], h["rho"]),
            (),
            weights=jnp.asarray([h["weight"]]),
            sigma=h["sigma"],
            entity=Independent(h["entity"]),
        )
        for b, (qinfo, pairs) in enumerate(zip(written["queries"], written["pairs"], strict=True)):
            q = SAMPLE[qinfo["qid"]]
            shown, y = np.asarray(pairs["shown"]), np.asarray(pairs["outcome"])
            p = np.asarray(pairs["prob"][engine])
            if b == 0:  # the posterior at the stored learned hyperparameters, fitted afresh
                problem = PreferenceProblem.create(np.asarray(pairs["known"]), X=q.X)
                post = XPGPModel(prior, inference=engine).fit(problem)
                assert np.allclose(p, np.asarray(post.predict_pairs(shown).prob), atol=1e-5)
            # the measures by hand
            m = qinfo[engine]
            assert m["loglik"] == pytest.approx(np.mean(np.where(y == 1, np.log(p), np.log1p(-p))))
            assert m["pair_error"] == pytest.approx(pair_error(np.where(y == 1, p, 1 - p)))
            assert m["brier"] == pytest.approx(np.mean((p - y) ** 2))
            assert (qinfo["known"], qinfo["test"]) == (20, 100)
        for key in ("pair_error", "loglik", "brier"):  # the mean over queries
            assert info[key] == pytest.approx(np.mean([q[engine][key] for q in written["queries"]]))
        # ECE by hand, pooled: 10 equal-width bins (the last closed), sum_b n_b / N |y_b - p_b|
        p = np.concatenate([pairs["prob"][engine] for pairs in written["pairs"]])
        y = np.concatenate([pairs["outcome"] for pairs in written["pairs"]])
        bins = np.minimum((p * 10).astype(int), 9)
        ece = sum(
            np.mean(bins == b) * abs(y[bins == b].mean() - p[bins == b].mean())
            for b in np.unique(bins)
        )
        assert info["ece_pooled"] == pytest.approx(ece, abs=1e-12)
    assert_figure(tmp_path / "i" / "inference.png")
    assert results["engines"]["ep"]["pair_error"] == written["engines"]["ep"]["pair_error"]


def test_load_queries_folder(tmp_path):
    folder = tmp_path / "data"
    folder.mkdir()
    _write_letor(folder / "b.txt", {"7"})
    with gzip.open(folder / "a.txt.gz", "wt") as f:
        f.write("1 qid:1 1:0.5 # docid = x\n0 qid:1 2:0.25\n")  # two features only
    queries, _ = _common.load_queries(folder)
    assert [q.qid for q in queries] == ["1", "7"]  # by file name
    assert {q.n_features for q in queries} == {45}  # padded to one width
    assert queries[0].X[0, 0] == 0.5 and np.all(queries[0].X[:, 2:] == 0)
    _write_letor(folder / "test.txt", {"10"})
    _write_letor(folder / "train.txt", {"12"})
    assert [q.qid for q in _common.load_queries(folder)[0]] == ["12", "10"]  # a fold: train first


def test_strict_json(tmp_path):
    with pytest.raises(ValueError, match=r"\['rows'\]\[1\]\['MAP'\] is not a finite number"):
        _common.strict_json({"rows": [{"MAP": 0.5}, {"MAP": float("nan")}]})
    with pytest.raises(ValueError, match="not a finite"):
        _common.write_outputs({"x": float("inf")}, tmp_path / "o", "table", None, "x")
    assert not (tmp_path / "o").exists()  # nothing written


@pytest.mark.parametrize(
    ("name", "argv", "data_dir", "match"),
    [
        ("active", [], "missing", "--data-dir 'missing' does not exist"),
        ("baselines", [], "missing", "--data-dir 'missing' does not exist"),
        ("ep-vs-nuts", [], "missing", "--data-dir"),
        ("inference", [], "missing", "--data-dir"),
        ("active", [], "bad", r"--data-dir: cannot read .*bad\.txt, line 1"),
        ("baselines", [], "bad", r"bad\.txt, line 1"),
        ("active", [], "empty", "holds no LETOR file"),
        (
            "active",
            ["--k", 1000],
            None,
            r"--k 1000 is larger than the \d+ candidate pairs of query 5",
        ),
        ("active", ["--k", 0], None, "--k must be an integer >= 1"),
        ("active", ["--test-fraction", 1.5], None, "--test-fraction must be a number in"),
        ("baselines", ["--folds", 6], None, "--folds 6 is more than the 5 queries"),
        ("baselines", ["--C", -1], None, "--C must be"),
        ("baselines", [], "fold", "is not a LETOR fold folder: no train"),
        ("ep-vs-nuts", ["--known", 5000], None, "--known 5000 is too large"),
        ("ep-vs-nuts", ["--samples", 1], None, "--samples must be an integer >= 4"),
        ("inference", ["--known", 5000], None, "--known 5000 is too large"),
        ("inference", ["--engines", "nuts"], None, "add ep"),
    ],
)
def test_user_errors(tmp_path, monkeypatch, name, argv, data_dir, match):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "bad.txt").write_text("this is not LETOR\n")
    (tmp_path / "empty").mkdir()
    (tmp_path / "fold").mkdir()
    (tmp_path / "fold" / "test.txt").write_text("1 qid:1 1:0.5\n")
    (tmp_path / "fold" / "notes.txt").write_text("")
    data = {"bad": tmp_path / "bad.txt"}.get(data_dir, data_dir)
    with pytest.raises(ValueError, match=match):
        run(name, tmp_path / "out", *argv, data_dir=data)
    assert not (tmp_path / "out").exists()
