"""The ``bayesrank`` command: data summary and evaluate, on the bundled sample and small files."""

import json
import math
import subprocess
import sys

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


def test_python_dash_m(tmp_path):
    out = subprocess.run(
        [sys.executable, "-m", "bayesrank", "data", "summary", "--json"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert json.loads(out)["n_docs"] == 271
