"""``bayesrank experiment baselines`` (``bayesrank.experiments.baselines``) and its full-data
front end ``experiments/letor_baselines.py``.

References computed here independently: LETOR's MAP by hand from the stored scores, NDCG and P
from ``bayesrank.metrics`` query by query, the value chosen on vali from the stored vali MAPs,
the mean over folds from the folds' rows. The peers (XGBoost, LightGBM) are blocked
(``sys.modules[name] = None``), installed or not: the preset skips them, saying so, and naming
one is an error. Then the errors a user can cause.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from functools import partial
from pathlib import Path

import numpy as np
import pytest
from experiment_helpers import SAMPLE, assert_figure, assert_user_error, write_letor
from experiment_helpers import run as run_experiment

from bayesrank.experiments.baselines import methods as baseline_methods

run = partial(run_experiment, "baselines")

SCRIPT = Path(__file__).resolve().parents[1] / "experiments" / "letor_baselines.py"


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


def _fold(folder, train, vali, test):
    folder.mkdir(parents=True)
    for part, qids in (("train", train), ("vali", vali), ("test", test)):
        write_letor(folder / f"{part}.txt", qids)
    return folder


@pytest.mark.slow
def test_baselines_query_folds(tmp_path, capsys):
    # RankBoost here, RankSVM in test_baselines_fold_folder: each fit compiles (~2 s)
    results, written = run(
        tmp_path / "b", "--folds", 2, "--methods", "RankBoost", "--rounds", 5, 10,
        "--n-thresholds", 3, "--max-k", 5,
    )  # fmt: skip
    assert written["mode"] == "query folds" and written["settings"]["protocol"] == "reduced"
    (unit,) = written["runs"]
    qids = [q["qid"] for q in unit["test_queries"]]
    assert qids == ["5", "7", "8", "10", "12"]
    for fold in unit["splits"]:  # every query scored by a model that never saw it
        assert not set(fold["train"]) & set(fold["test"])
    assert sorted(q for f in unit["splits"] for q in f["test"]) == sorted(qids)
    assert [(r["method"], r["params"]) for r in unit["rows"]] == [
        ("RankBoost", {"T": 5}),
        ("RankBoost", {"T": 10}),
    ]
    grades = [SAMPLE[q].grades for q in qids]
    for row in unit["rows"]:
        assert row["metrics"]["MAP"] == pytest.approx(map_by_hand(row["scores"], grades))
        # NDCG and P: bayesrank.metrics on the stored scores, query by query, then the mean
        m = letor_by_query(row["scores"], grades, 5)
        assert 0 <= row["metrics"]["MAP"] <= 1 and float(m[2].map) == 0.0  # 8: none relevant
        for k in (1, 5):
            ndcg = np.mean([x.ndcg[k - 1] for x in m])
            prec = np.mean([x.precision[k - 1] for x in m])
            assert row["metrics"][f"NDCG@{k}"] == pytest.approx(ndcg, abs=1e-12)
            assert row["metrics"][f"P@{k}"] == pytest.approx(prec, abs=1e-12)
    # one run: its summary is its rows
    assert [r["metrics"] for r in written["summary"]["data"]] == [
        r["metrics"] for r in unit["rows"]
    ]
    assert "RankBoost T=10" in capsys.readouterr().out
    assert results["runs"][0]["rows"][0]["metrics"] == unit["rows"][0]["metrics"]
    assert_figure(tmp_path / "b" / "baselines.png")
    assert (tmp_path / "b" / "table.md").is_file() and "table.md" in written["files"]


@pytest.mark.slow  # 3 s or more in the fast loop
def test_baselines_fold_folder(tmp_path):
    fold = _fold(tmp_path / "Fold1", {"5", "8"}, {"7"}, {"10", "12"})
    results, written = run(None, "--methods", "RankSVM", "--C", 0.01, 1, data_dir=str(fold))
    assert written is None and not any(tmp_path.rglob("results.json"))  # --out None
    assert results["mode"] == "train/test"
    (unit,) = results["runs"]
    assert [q["qid"] for q in unit["test_queries"]] == ["10", "12"]
    assert unit["splits"] == [{"train": ["5", "8"], "test": ["10", "12"], "vali": ["7"]}]
    (row,) = unit["rows"]  # the grid's value with the best vali MAP, first on ties
    vali = row["vali_MAP"]
    assert row["chosen_on_vali"] and set(vali) == {"0.01", "1.0"}
    assert row["params"]["C"] == max([0.01, 1.0], key=lambda c: vali[str(c)])
    grades = [SAMPLE[q].grades for q in ("10", "12")]
    assert row["metrics"]["MAP"] == pytest.approx(map_by_hand(row["scores"], grades), abs=1e-12)
    # a Path works as well as a str, and the same data give the same scores
    again, _ = run(None, "--methods", "RankSVM", "--C", 0.01, 1, data_dir=fold)
    assert again["runs"][0]["rows"][0]["scores"] == row["scores"]


@pytest.mark.slow  # three learned rankers, each compiling its programs (~30 s)
def test_sortnet_prank_and_xpgp_through_the_same_protocol(tmp_path):
    """The rankers of issue 35 in the study: chosen on vali, scored the LETOR way; SortNet's
    scores are places in each test query's sort."""
    fold = _fold(tmp_path / "Fold1", {"5", "8"}, {"7"}, {"10", "12"})
    results, _ = run(
        None, "--methods", "SortNet", "PRank", "XPGP", "--hidden", 2, 3, "--epochs", 1, 3,
        "--n-docs", 40, data_dir=fold,
    )  # fmt: skip
    (unit,) = results["runs"]
    rows = {r["method"]: r for r in unit["rows"]}
    assert set(rows) == {"SortNet", "PRank", "XPGP"}
    grades = [SAMPLE[q].grades for q in ("10", "12")]
    for method, row in rows.items():
        assert row["metrics"]["MAP"] == pytest.approx(map_by_hand(row["scores"], grades)), method
    assert rows["SortNet"]["chosen_on_vali"] and rows["PRank"]["chosen_on_vali"]
    for scores, g in zip(rows["SortNet"]["scores"], grades, strict=True):
        assert sorted(scores) == list(range(1, len(g) + 1))


@pytest.mark.slow  # 3 s or more in the fast loop
def test_baselines_collection_folds(tmp_path):
    """A collection's folds under ``--data-dir`` (``--collection``, ``--letor-folds``): each
    fold trained, chosen on vali and scored on its own test queries; the summary is the mean
    over the folds of each fold's mean, LETOR's figure."""
    base = tmp_path / "data" / "OHSUMED" / "QueryLevelNorm"
    _fold(base / "Fold1", {"5", "8"}, {"7"}, {"10", "12"})
    _fold(base / "Fold2", {"10", "12"}, {"8"}, {"5", "7"})
    _fold(base / "Fold3", {"7"}, {"8"}, {"5"})  # not asked for
    _, written = run(
        tmp_path / "o", "--collection", "OHSUMED", "--letor-folds", 1, 2, "--methods",
        "RankSVM", "--C", 0.01, 1, data_dir=tmp_path / "data",
    )  # fmt: skip
    assert [(r["collection"], r["fold"]) for r in written["runs"]] == [
        ("OHSUMED", "Fold1"),
        ("OHSUMED", "Fold2"),
    ]
    for unit in written["runs"]:
        (row,) = unit["rows"]
        grades = [SAMPLE[q["qid"]].grades for q in unit["test_queries"]]
        assert row["metrics"]["MAP"] == pytest.approx(map_by_hand(row["scores"], grades))
    (mean,) = written["summary"]["OHSUMED"]
    assert mean["params"] is None and mean["n_folds"] == 2
    assert mean["chosen"] == [u["rows"][0]["params"] for u in written["runs"]]
    for key in ("MAP", "NDCG@1", "P@10"):
        folds = [u["rows"][0]["metrics"][key] for u in written["runs"]]
        assert mean["metrics"][key] == pytest.approx(np.mean(folds), abs=1e-15)
    text = (tmp_path / "o" / "table.txt").read_text()
    assert "OHSUMED: mean over 2 folds (Fold1 Fold2)" in text
    assert "RankSVM (published)" in text  # the published figures beside
    md = (tmp_path / "o" / "table.md").read_text()
    assert "**OHSUMED, test, mean of 2 folds: MAP, NDCG@k**" in md
    assert f"| RankSVM | {mean['metrics']['MAP']:.4f} |" in md
    # the collection's own folder is the same run
    again, _ = run(None, "--letor-folds", 1, 2, "--methods", "RankSVM", "--C", 0.01, 1,
                   data_dir=base)  # fmt: skip
    assert again["summary"]["QueryLevelNorm"][0]["metrics"] == mean["metrics"]


def test_check_peers_skips_or_refuses():
    def fake_import(name):
        if name == "xgboost":
            raise ModuleNotFoundError("No module named 'xgboost'")
        if name == "lightgbm":
            raise OSError("libgomp.so.1: cannot open shared object file\nsecond line")

    methods, skipped = baseline_methods.check_peers(
        ["RankSVM", "XGBoost", "LightGBM", "RankBoost"], False, fake_import
    )
    assert methods == ["RankSVM", "RankBoost"]
    assert list(skipped) == ["XGBoost", "LightGBM"]
    assert skipped["XGBoost"] == (
        "skipping XGBoost: cannot import xgboost (ModuleNotFoundError: No module named "
        "'xgboost'); pip install xgboost-cpu (or xgboost), or the bench extra "
        "(benchmarks/README.md)"
    )
    assert "\n" not in skipped["LightGBM"] and "libgomp.so.1" in skipped["LightGBM"]
    with pytest.raises(ValueError, match=r"--methods LightGBM: cannot import lightgbm .*libgomp"):
        baseline_methods.check_peers(["RankSVM", "LightGBM"], True, fake_import)
    every = baseline_methods.METHODS
    assert baseline_methods.check_peers(every, True, lambda name: None) == (list(every), {})


@pytest.mark.slow
def test_full_preset_skips_missing_peers(tmp_path, monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "xgboost", None)  # as if not installed
    monkeypatch.setitem(sys.modules, "lightgbm", None)
    fold = _fold(tmp_path / "Fold1", {"5", "8"}, {"7"}, {"10", "12"})
    _, written = run(
        tmp_path / "o", "--protocol", "full", "--C", 1e-3, "--rounds", 2, 3, "--n-thresholds", 2,
        "--hidden", 2, "--epochs", 1, "--n-docs", 40, data_dir=fold,
    )  # fmt: skip
    rows = written["runs"][0]["rows"]
    assert [r["method"] for r in rows] == [
        "RankSVM", "RankSVM-hinge", "RankBoost", "RankBoost-RankLib", "SortNet", "PRank", "XPGP",
    ]  # fmt: skip
    # one value each but RankBoost's two: only those are chosen on vali
    assert [r["chosen_on_vali"] for r in rows] == [False, False, True, True, False, False, False]
    assert set(written["skipped"]) == {"XGBoost", "LightGBM"}
    assert written["versions"]["xgboost"] is None
    err = capsys.readouterr().err
    assert err.startswith("skipping XGBoost: cannot import xgboost")  # before any work
    with pytest.raises(ValueError, match="--methods XGBoost: cannot import xgboost"):
        run(tmp_path / "x", "--methods", "RankSVM", "XGBoost", data_dir=fold)
    assert not (tmp_path / "x").exists()


@pytest.mark.skipif(
    any(importlib.util.find_spec(m) is None for m in ("xgboost", "lightgbm")),
    reason="needs the bench extra's xgboost and lightgbm",
)
def test_peers_through_the_same_protocol(tmp_path):
    fold = _fold(tmp_path / "Fold1", {"5", "8"}, {"7"}, {"10", "12"})
    results, _ = run(None, "--methods", "XGBoost", "LightGBM", "--trees", 2, 4, data_dir=fold)
    grades = [SAMPLE[q].grades for q in ("10", "12")]
    for row in results["runs"][0]["rows"]:
        assert row["chosen_on_vali"] and row["params"]["n_trees"] in (2, 4)
        assert row["metrics"]["MAP"] == pytest.approx(map_by_hand(row["scores"], grades))


def _script(args, tmp_path):
    code = (
        "import runpy, sys\n"
        "sys.modules['xgboost'] = sys.modules['lightgbm'] = None  # as if not installed\n"
        f"sys.argv = [{str(SCRIPT)!r}, *{args!r}]\n"
        f"runpy.run_path({str(SCRIPT)!r}, run_name='__main__')\n"
    )
    env = dict(os.environ)  # the run's compilation cache (conftest)
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=tmp_path
    )


@pytest.mark.slow
def test_the_script_runs_the_full_protocol(tmp_path):
    """The front end: the full preset on a data folder of one OHSUMED fold (the sample), the
    missing peers skipped at the start, the outputs written."""
    fold = tmp_path / "data" / "OHSUMED" / "QueryLevelNorm" / "Fold1"
    _fold(fold, {"5", "8"}, {"7"}, {"10", "12"})
    (tmp_path / "data" / "MQ2008" / "Fold1").mkdir(parents=True)  # no files: an error
    out = tmp_path / "out"
    args = ["--data-dir", str(tmp_path / "data"), "--collection", "OHSUMED", "--C", "1e-3",
            "1", "--rounds", "2", "3", "--n-thresholds", "2", "--hidden", "2", "--epochs", "1",
            "--n-docs", "40", "--out", str(out)]  # fmt: skip
    done = _script(args, tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stderr.startswith("skipping XGBoost: cannot import xgboost")
    results = json.loads((out / "results.json").read_text())
    assert results["settings"]["protocol"] == "full"
    assert set(results["skipped"]) == {"XGBoost", "LightGBM"}
    (mean,) = [r for r in results["summary"]["OHSUMED"] if r["method"] == "RankSVM"]
    assert mean["params"] is None and mean["n_folds"] == 1  # chosen on vali
    assert "RankSVM (published)" in (out / "table.md").read_text()
    assert "OHSUMED Fold1 RankBoost-RankLib" in done.stderr  # progress
    both = _script([*args[:2], *args[4:]], tmp_path)  # both collections: MQ2008's fold is empty
    assert both.returncode == 1 and "is not a LETOR fold folder: no train" in both.stderr


@pytest.mark.parametrize(
    ("argv", "data_dir", "match"),
    [
        ([], "missing", "--data-dir 'missing' does not exist"),
        ([], "bad", r"bad\.txt, line 1"),
        (["--folds", 6], None, "--folds 6 is more than the 5 queries"),
        (["--C", -1], None, "--C must be"),
        ([], "fold", "is not a LETOR fold folder: no train"),
        (["--protocol", "full"], None, "--protocol full needs --data-dir"),
        (["--collection", "MQ2008"], "empty", "--collection: collection MQ2008: .* no MQ2008/"),
        (["--letor-folds", 7], "collection", "--letor-folds: .* has no Fold7 .*has Fold1"),
        (["--rounds", 0], None, "--rounds must be an integer >= 1"),
    ],
)
def test_user_errors(tmp_path, monkeypatch, argv, data_dir, match):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "fold").mkdir()
    (tmp_path / "fold" / "test.txt").write_text("1 qid:1 1:0.5\n")
    (tmp_path / "fold" / "notes.txt").write_text("")
    (tmp_path / "collection" / "Fold1").mkdir(parents=True)
    assert_user_error("baselines", tmp_path, argv, data_dir, match)
