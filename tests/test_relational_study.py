"""The relational study's tables from predictions (experiments/relational.py): a hand-computed
table, and one small end-to-end run on a study directory."""

import sys
from pathlib import Path

import numpy as np
import pytest

EXPERIMENTS = Path(__file__).resolve().parents[1] / "experiments"


@pytest.fixture(scope="module")
def study():
    sys.path.insert(0, str(EXPERIMENTS))
    try:
        import relational
    finally:
        sys.path.remove(str(EXPERIMENTS))
    return relational


def test_evaluate_by_hand(study):
    # 5 entities; known pairs touch 0, 1, 2; test pairs: both seen, one, one, neither, both
    known = np.array([[0, 1], [1, 2]])
    test = np.array([[0, 2], [3, 1], [0, 4], [3, 4], [2, 0]])
    prob = np.array([0.9, 0.4, 0.5004, 0.7, 0.5])  # P(truth): right, wrong, tie, right, tie
    flip = np.array([False, True, False, True, False])
    got = study.evaluate(prob, np.log(prob), test, known, 5, flip)
    assert got["err"] == pytest.approx((0 + 1 + 0.5 + 0 + 0.5) / 5)
    assert got["err_untied"] == pytest.approx((0 + 1 + 0 + 0 + 0.5) / 5)  # 0.5004 counts right
    assert got["ties"] == pytest.approx(2 / 5)
    assert (got["count_both"], got["count_one"], got["count_neither"]) == (2, 2, 1)
    assert got["err_both"] == pytest.approx(0.25) and got["err_one"] == pytest.approx(0.75)
    assert got["err_neither"] == 0.0
    # oriented at random: flipped pairs predict 1 - P with outcome 0
    p = np.array([0.9, 0.6, 0.5004, 0.3, 0.5])
    y = np.array([1, 0, 1, 0, 1.0])
    assert got["brier"] == pytest.approx(np.mean((p - y) ** 2))
    assert got["loglik"] == pytest.approx(np.mean(np.log(prob)))


def test_comparison_by_hand(study):
    rows = {
        "XPGP": [
            {"qid": "a", "rep": 0, "err": 0.1},
            {"qid": "a", "rep": 1, "err": 0.3},
            {"qid": "b", "rep": 0, "err": 0.2},
            {"qid": "b", "rep": 1, "err": 0.2},
        ],
        "PGP": [
            {"qid": "a", "rep": 0, "err": 0.3},
            {"qid": "a", "rep": 1, "err": 0.3},
            {"qid": "b", "rep": 0, "err": 0.1},
            {"qid": "b", "rep": 1, "err": 0.5},
        ],
    }
    got = study.compare(rows, "XPGP", "PGP")
    assert got["reduction"] == pytest.approx((0.3 - 0.2) / 0.3)
    assert got["queries_lower"] == 2 and got["queries"] == 2  # a: 0.2 < 0.3, b: 0.2 < 0.3
    # paired t over the four differences (-0.2, 0, 0.1, -0.3): t = mean / (sd / 2)
    d = np.array([-0.2, 0.0, 0.1, -0.3])
    t = d.mean() / (d.std(ddof=1) / 2)
    from scipy.stats import t as student

    assert got["ttest_p"] == pytest.approx(2 * student.sf(abs(t), 3))
    assert got["wilcoxon_p"] == pytest.approx(0.5)  # two queries, both lower: exact 2 / 4


def test_a_small_study_runs_end_to_end(study, tmp_path):
    """Two queries in the study format, two models, one repetition: every test pair counted
    once in the seen/unseen breakdown, the table and the JSON written."""
    import json

    from bayesrank.data.study import StudyQuery, write_study_dir

    rng = np.random.default_rng(0)
    queries = []
    for q in range(2):
        X = rng.normal(size=(12, 3))
        grades = np.round(X[:, 0] + 0.3 * rng.normal(size=12), 1)
        W = (rng.uniform(size=(12, 12)) < 0.3).astype(float)
        W = np.triu(W, 1) + np.triu(W, 1).T
        from bayesrank.data.pairs import pairs_from_grades

        queries.append(StudyQuery(f"q{q}", X, pairs_from_grades(grades), {"r": W}, grades))
    write_study_dir(tmp_path / "data", queries)
    out = tmp_path / "out"
    study.main(
        [
            "--collection", "dir", "--data-dir", str(tmp_path / "data"), "--known", "10",
            "--repeats", "1", "--models", "XPGP", "RankSVM", "--jobs", "0", "--out", str(out),
        ]
    )  # fmt: skip
    results = json.loads((out / "results.json").read_text())
    block = results["settings"]["10"]
    total = sum(len(q.pairs) - 10 for q in queries)
    for model in ("XPGP", "RankSVM"):
        assert sum(block["summary"][model]["counts"].values()) == total
        assert 0 <= block["summary"][model]["err"]["mean"] <= 1
    assert set(block["comparisons"]) == {"RankSVM"}
    assert "XPGP vs RankSVM" in (out / "table.txt").read_text()
