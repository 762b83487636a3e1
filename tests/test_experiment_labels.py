"""``bayesrank experiment labels`` (``bayesrank.experiments.labels``): the judgements drawn as
the protocol says (checked by set arithmetic on hand-made grades), the reduced protocol end to
end on the bundled sample with its summary recomputed from its rows, and the user's errors."""

from __future__ import annotations

from functools import partial

import numpy as np
import pytest
from experiment_helpers import SAMPLE, assert_figure
from experiment_helpers import run as run_experiment
from scipy.stats import wilcoxon

from bayesrank.experiments import labels
from bayesrank.experiments.labels.runner import judgements

run = partial(run_experiment, "labels")


def test_judgements_are_drawn_and_answered_as_the_protocol_says():
    grades = np.array([2, 0, 1, 1, 0, 2, 1, 0])
    n = len(grades)
    everything = {(i, j) for i in range(n) for j in range(i + 1, n)}
    for seed in range(5):
        drawn = judgements(grades, grades.astype(float), 12, np.random.default_rng(seed))
        pairs, ties, graded = drawn["pairs"], drawn["ties"], drawn["graded"]
        judged = {tuple(sorted(p)) for p in np.concatenate([pairs, ties])}
        assert len(pairs) + len(ties) == 12 == len(judged)  # distinct unordered pairs
        assert np.all(grades[pairs[:, 0]] > grades[pairs[:, 1]])  # the winner first
        assert np.all(grades[ties[:, 0]] == grades[ties[:, 1]])
        assert len(np.unique(graded[:, 0])) == min(12, n)
        np.testing.assert_array_equal(graded[:, 1], grades[graded[:, 0]])
        held_out = {(i, j) for i, j in everything - judged if grades[i] != grades[j]}
        assert {tuple(sorted(p)) for p in drawn["test"]} == held_out
        assert np.all(grades[drawn["test"][:, 0]] > grades[drawn["test"][:, 1]])
        unjudged = {tuple(p) for p in drawn["unjudged"]}
        assert unjudged == everything - judged
        tied = {tuple(p) for p, t in zip(drawn["unjudged"], drawn["tied"], strict=True) if t}
        assert tied == {(i, j) for i, j in unjudged if grades[i] == grades[j]}


@pytest.mark.slow  # end to end: three learned fits and their posteriors
def test_the_reduced_protocol_on_the_sample(tmp_path):
    results, written = run(tmp_path / "out", "--queries", "2", "--budget", "12")
    assert written["settings"]["budget"] == [12]
    rows = written["rows"]
    assert {(r["way"], r["query"]) for r in rows} == {
        (w, q["qid"]) for w in ("pairs", "ties", "grades") for q in written["queries"]
    }
    for row in rows:
        q = SAMPLE[row["query"]]
        g = q.grades
        strict_pairs = int(np.sum(g[:, None] > g[None, :]))
        assert 0 < row["test_pairs"] <= strict_pairs  # every held-out pair has a winner
        assert 0.0 <= row["pair_error"] <= 1.0 and row["log_lik"] < 0.0
        assert 0.0 <= row["ndcg10"] <= 1.0 and 0.0 <= row["ap"] <= 1.0
        if row["way"] == "ties":
            assert 0.0 < row["p_tie"] < 1.0
            equal = np.sum(np.triu(g[:, None] == g[None, :], 1))
            assert 0.0 < row["tie_rate"] <= equal / (len(g) * (len(g) - 1) / 2) * 1.5
    # the summary: the mean over queries of each way, and the paired differences
    for way in ("pairs", "ties", "grades"):
        entry = written["summary"][f"{way}@12"]
        mine = {r["query"]: r["pair_error"] for r in rows if r["way"] == way}
        assert entry["pair_error"] == pytest.approx(np.mean(list(mine.values())))
        if way != "pairs":
            base = {r["query"]: r["pair_error"] for r in rows if r["way"] == "pairs"}
            d = [mine[k] - base[k] for k in sorted(mine)]
            assert entry["pair_error_vs_pairs"] == pytest.approx(np.mean(d))
            if np.any(np.asarray(d) != 0):
                assert entry["pair_error_wilcoxon_p"] == pytest.approx(
                    wilcoxon(
                        [mine[k] for k in sorted(mine)], [base[k] for k in sorted(mine)]
                    ).pvalue
                )
    assert (tmp_path / "out" / "table.txt").read_text().startswith("sample: 2 queries")
    assert "| judgements | way |" in labels.markdown(results)
    # the figure's bands: the mean over queries and its t interval (two queries: 1 dof)
    from scipy import stats

    from bayesrank.experiments.labels.report import error_bands, plot

    for way, (budgets, mean, lo, hi) in error_bands(written).items():
        per_query = [r["pair_error"] for r in rows if r["way"] == way]
        half = stats.t.ppf(0.975, 1) * np.std(per_query, ddof=1) / np.sqrt(2)
        assert list(budgets) == [12] and mean[0] == pytest.approx(np.mean(per_query))
        assert hi[0] - mean[0] == pytest.approx(half) and mean[0] - lo[0] == pytest.approx(half)
    assert plot([written], tmp_path / "labels.png").stat().st_size > 0
    assert_figure(tmp_path / "out" / "labels.png")  # the command's own figure
    assert "labels.png" in written["files"]


@pytest.mark.parametrize(
    ("argv", "match"),
    [
        (["--budget", "1"], "--budget"),
        (["--queries", "0"], "--queries"),
        (["--protocol", "full"], "--data-dir must be the folder that holds OHSUMED/"),
    ],
)
def test_bad_options_name_the_option(tmp_path, argv, match):
    with pytest.raises(ValueError, match=match):
        run(None, *argv)
