"""The relational study (bayesrank.experiments.relational): its tables from predictions against
a hand-computed table, the SVMs' touched-entity solve against a full one, and a small end-to-end
run on a study directory, in this process and in a child process."""

import json

import jax
import numpy as np
import pytest

from bayesrank.data.pairs import pairs_from_grades
from bayesrank.data.study import StudyQuery, write_study_dir
from bayesrank.experiments.relational import StudyConfig, measures, run_study


@pytest.fixture(scope="module")
def study():
    return measures


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
    # AUC by brute force over positives p_a and negatives 1 - p_b, the TIE rule first (0.5004
    # is a tie): so that a prediction of 1/2 +- rounding does not order them by its last bits
    s = np.where(np.abs(prob - 0.5) < study.TIE, 0.5, prob)
    pos, neg = s[:, None], 1 - s[None, :]
    assert got["auc"] == pytest.approx(np.mean((pos > neg) + 0.5 * (pos == neg)))
    nudged = study.evaluate(prob + np.array([0, 0, 1e-13, 0, -1e-13]), None, test, known, 5, None)
    assert nudged["auc"] == got["auc"]


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


@pytest.mark.slow
def test_svm_scores_on_touched_entities_equal_a_full_solve():
    """A kernel RankSVM's beta vanishes off the entities its pairs touch: the study's solve on
    those alone scores every entity as the solve on all of them does."""
    from bayesrank.baselines.ranksvm import fit_kernel, rbf_kernel
    from bayesrank.experiments.relational.models import _solve_all

    rng = np.random.default_rng(3)
    Ks, pair_lists, full = [], [], []
    for n in (14, 9):
        X = rng.normal(size=(n, 2))
        K = np.asarray(rbf_kernel(X, X, 0.5))
        pairs = np.array([[0, 3], [5, 2], [3, 7], [2, 0]])
        Ks.append(K)
        pair_lists.append(pairs)
        full.append(K @ np.asarray(fit_kernel(K, pairs, 10.0, tol=1e-12).beta))
    got = [s[0] for s in _solve_all(Ks, pair_lists, [[10.0], [10.0]])]
    for g, f in zip(got, full, strict=True):
        np.testing.assert_allclose(g, f, rtol=1e-7, atol=1e-9)


@pytest.mark.slow
def test_svm_path_along_c_equals_solves_from_zero():
    """The cross-validation's fits along the C grid, each started from the last C's solution,
    reach the optimum that a solve from zero at that C reaches (the tolerance is relative to
    the residual at zero, not at the warm start)."""
    from bayesrank.baselines.ranksvm import fit_kernel, rbf_kernel
    from bayesrank.experiments.relational.models import SVM_C, _solve_all

    rng = np.random.default_rng(4)
    Ks, pair_lists = [], []
    for n in (16, 11):
        X = rng.normal(size=(n, 3))
        Ks.append(np.asarray(rbf_kernel(X, X, 0.3)))
        pair_lists.append(rng.choice(n, size=(9, 2), replace=True))
    pair_lists = [p[p[:, 0] != p[:, 1]] for p in pair_lists]
    grids = np.tile(SVM_C, (2, 1))
    got = _solve_all(Ks, pair_lists, grids)
    for K, pairs, scores in zip(Ks, pair_lists, got, strict=True):
        for C, s in zip(SVM_C, scores, strict=True):
            cold = K @ np.asarray(fit_kernel(K, pairs, C, tol=1e-12).beta)
            np.testing.assert_allclose(s, cold, rtol=1e-6, atol=1e-8 * max(1.0, C))


def _tiny_collection(folder):
    rng = np.random.default_rng(0)
    queries = []
    for q in range(2):
        X = rng.normal(size=(12, 3))
        grades = np.round(X[:, 0] + 0.3 * rng.normal(size=12), 1)
        W = (rng.uniform(size=(12, 12)) < 0.3).astype(float)
        W = np.triu(W, 1) + np.triu(W, 1).T
        queries.append(StudyQuery(f"q{q}", X, pairs_from_grades(grades), {"r": W}, grades))
    write_study_dir(folder, queries)
    return queries


@pytest.mark.slow
def test_a_small_study_runs_end_to_end(tmp_path):
    """Two queries in the study format, two models, one repetition, in a child process (jobs 1;
    tests/test_cli.py runs the command in its own process): every test pair counted once in the
    seen/unseen breakdown, the table and the JSON written."""
    jobs = 1
    queries = _tiny_collection(tmp_path / "data")
    out = tmp_path / "out"
    config = StudyConfig(
        collection="dir",
        data_dir=tmp_path / "data",
        known=(10,),
        repeats=1,
        models=("XPGP", "RankSVM"),
        jobs=jobs,
        out=out,
    )
    run_study(config, verbose=False)
    results = json.loads((out / "results.json").read_text())
    block = results["settings"]["10"]
    total = sum(len(q.pairs) - 10 for q in queries)
    for model in ("XPGP", "RankSVM"):
        assert sum(block["summary"][model]["counts"].values()) == total
        assert 0 <= block["summary"][model]["err"]["mean"] <= 1
    assert set(block["comparisons"]) == {"RankSVM"}
    assert "XPGP vs RankSVM" in (out / "table.txt").read_text()


def test_a_study_folder_uses_every_query_and_says_what_it_drops(tmp_path):
    """Issue 32: ``--collection dir`` took 10 query folders by default and dropped the rest in
    silence. Now every folder counts unless --queries says otherwise, and a dropped folder is
    named in a warning."""
    from bayesrank.experiments.relational.collections import load_collection

    _tiny_collection(tmp_path / "data")
    every = load_collection(StudyConfig(collection="dir", data_dir=tmp_path / "data"))
    assert [q.qid for q in every] == ["q0", "q1"]
    with pytest.warns(UserWarning, match=r"using 1 of its 2 query folders \(--queries 1\)"):
        one = load_collection(StudyConfig(collection="dir", data_dir=tmp_path / "data", queries=1))
    assert len(one) == 1
    assert StudyConfig(collection="sample").queries == 10  # the others still choose 10


@pytest.mark.slow
def test_per_query_theta_equals_fits_by_hand(tmp_path):
    """Issue 32: the study fitted one theta shared by all queries, with no other choice. With
    ``theta="per-query"`` each query's posterior is that of its own fit, done here by hand with
    ``fit_hyperparameters`` on that query alone; and the study runs with it (in this process)."""
    from bayesrank.data.problem import PreferenceProblem
    from bayesrank.data.study import split_known
    from bayesrank.experiments.relational.models import fit_gp, gp_prior
    from bayesrank.learning import fit_hyperparameters

    queries = _tiny_collection(tmp_path / "data")
    splits = [
        split_known(jax.random.fold_in(jax.random.PRNGKey(0), b), q.pairs, 10)
        for b, q in enumerate(queries)
    ]
    posts, _ = fit_gp("PGP+I", queries, splits, ["r"], rep=0, per_query=True)
    shared, _ = fit_gp("PGP+I", queries, splits, ["r"], rep=0)
    start, trainable, _ = gp_prior("PGP+I", ["r"])
    for b, q in enumerate(queries):
        alone = fit_hyperparameters(
            start, [PreferenceProblem.create(splits[b][0], q.X)], trainable=trainable
        )
        n = q.n  # the study's posteriors are padded to the batch's entities
        mean, cov = np.asarray(alone.posteriors.mean[0]), np.asarray(alone.posteriors.cov[0])
        np.testing.assert_allclose(posts[b][0][:n], mean[:n], atol=1e-6)
        np.testing.assert_allclose(posts[b][1][:n, :n], cov[:n, :n], atol=1e-6)
    assert np.max(np.abs(posts[0][0] - shared[0][0])) > 1e-3  # and it is not the shared fit
    config = StudyConfig(
        collection="dir",
        data_dir=tmp_path / "data",
        known=(10,),
        repeats=1,
        models=("PGP+I",),
        jobs=0,
        out=tmp_path / "out",
        theta="per-query",
    )
    results = run_study(config, verbose=False)
    assert results["config"]["theta"] == "per-query"
    with pytest.raises(ValueError, match="theta must be 'shared' or 'per-query'"):
        StudyConfig(theta="each")


def _processes_with(text: str) -> list[int]:
    """Pids of the processes whose command line holds ``text`` (Linux's /proc)."""
    from pathlib import Path

    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
            except OSError:
                continue
            if text in cmdline and "bayesrank.experiments.relational.runner" in cmdline:
                found.append(int(entry.name))
    return found


def _send_to_a_worker_thread(pid: int, signum: int) -> None:
    """``signum`` to the newest thread of process ``pid`` that is not its main thread (the
    study's worker thread, reading its child's output): where the kernel may deliver a
    process's signal under load (Linux's ``tgkill``)."""
    import ctypes
    import os

    threads = sorted(int(t) for t in os.listdir(f"/proc/{pid}/task") if int(t) != pid)
    libc = ctypes.CDLL(None, use_errno=True)
    if not threads or not hasattr(libc, "tgkill"):
        pytest.skip("needs a worker thread and glibc's tgkill")
    assert libc.tgkill(pid, threads[-1], signum) == 0, ctypes.get_errno()


@pytest.mark.skipif(not __import__("sys").platform.startswith("linux"), reason="reads /proc")
@pytest.mark.parametrize("signal_name", ["SIGINT", "SIGTERM", "SIGKILL", "SIGINT-to-a-thread"])
@pytest.mark.slow  # child processes, 3-8 s each
def test_an_interrupted_study_leaves_no_child_running(tmp_path, signal_name):
    """Issue 32: Ctrl-C or SIGTERM on the parent left its child processes running. Interrupt a
    study while its child runs: the parent exits and no child of it is left (after SIGKILL, the
    child's own guard: the kernel's signal on its parent's death).

    Issue 49: a Ctrl-C that the kernel delivered to a worker thread, not the main one (as it
    may under load), left the parent waiting for its child, which runs for hours here
    (``SIGINT-to-a-thread``: sent to that thread on purpose)."""
    import signal
    import subprocess
    import sys
    import textwrap
    import time

    _tiny_collection(tmp_path / "data")
    # Ctrl-C's handler as a terminal's Python has it: a parent started from a background job
    # (CI's) inherits SIGINT ignored, and Python then installs no KeyboardInterrupt for it
    script = textwrap.dedent(
        f"""
        import signal
        signal.signal(signal.SIGINT, signal.default_int_handler)
        from bayesrank.experiments.relational import StudyConfig, run_study
        run_study(StudyConfig(collection="dir", data_dir={str(tmp_path / "data")!r},
                              known=(10,), repeats=5000, models=("PGP",), jobs=1),
                  verbose=False)
        """
    )
    # the scratch folder of a parent killed by SIGKILL stays: in the test's folder, not /tmp
    env = dict(__import__("os").environ, TMPDIR=str(tmp_path))
    parent = subprocess.Popen([sys.executable, "-c", script], env=env)
    try:
        deadline = time.monotonic() + 120
        while not _processes_with(str(tmp_path / "data")):
            assert parent.poll() is None, "the study ended before its child could be seen"
            assert time.monotonic() < deadline, "no child process started"
            time.sleep(0.1)
        if signal_name == "SIGINT-to-a-thread":
            _send_to_a_worker_thread(parent.pid, signal.SIGINT)
        else:
            parent.send_signal(getattr(signal, signal_name))
        parent.wait(60)
        deadline = time.monotonic() + 15
        while _processes_with(str(tmp_path / "data")) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert _processes_with(str(tmp_path / "data")) == []
    finally:
        if parent.poll() is None:
            parent.kill()
        for pid in _processes_with(str(tmp_path / "data")):
            __import__("os").kill(pid, 9)


@pytest.mark.parametrize("jobs", [0, 1])
@pytest.mark.slow
def test_progress_counts_repetitions(tmp_path, capsys, jobs):
    """Issue 32: the progress bar counted tasks and sat at 13/14 for a quarter of an hour. It
    now counts every task's repetitions, from a child process (its stdout) or in process."""
    _tiny_collection(tmp_path / "data")
    config = StudyConfig(
        collection="dir",
        data_dir=tmp_path / "data",
        known=(10,),
        repeats=3,
        models=("PGP", "RankSVM"),
        jobs=jobs,
    )
    run_study(config)
    err = capsys.readouterr().err
    states = [part.split(" (")[0] for part in err.split("\r") if part.startswith("[")]
    done = [s.split("] ")[1].split(" ")[0] for s in states]
    assert sorted(done, key=lambda d: int(d.split("/")[0])) == [f"{i}/6" for i in range(1, 7)]
    assert any("k=10 PGP repetition 3/3" in s for s in states)
    assert any("k=10 RankSVM repetition 3/3" in s for s in states)
