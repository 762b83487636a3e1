"""Preferential optimisation with a person answering (``bayesrank.active.designs.session`` and
``bayesrank optimize``).

References: a scripted person who answers by a known utility (the design nearer 0.3 wins) and
checks every recorded answer against it; the session that wrote an answer file, for its replay
(bit for bit, in float64 and float32 alike); the compilation counter for the capacity buckets;
the known optimum of a 1-D quadratic for ``optimize``.
"""

import io
import json
import re
import shlex
import sys

import jax
import numpy as np
import pytest
from helpers import count_compilations

from bayesrank.active.designs.acquisition import ACQUISITIONS
from bayesrank.active.designs.loop import Settings, initial_theta
from bayesrank.active.designs.session import DesignSession, optimize
from bayesrank.cli import main
from bayesrank.cli.optimize import ACQUISITION_CHOICES

#: Small optimiser settings, shared so the tests share compiled programs.
SETTINGS = Settings(n_raw=64, n_starts=4, steps=30)


def utility(x) -> float:
    """The known utility: maximal at 0.3 (in every coordinate)."""
    return -float(np.sum((np.asarray(x) - 0.3) ** 2))


def prefers_first(a, b) -> bool:
    return utility(a) > utility(b)


def answer_by_utility(session: DesignSession, n: int) -> None:
    for _ in range(n):
        a, b = session.propose()
        session.answer(a, b, "first" if prefers_first(a, b) else "second")


# --- the command line, a person at the keyboard -------------------------------------------------


class Person:
    """Standard input of a person who reads what the command printed so far (the ``--describe``
    script shows each design's utility) and types the next key of ``script``: ``"answer"``
    becomes ``1`` or ``2``, whichever design has the higher utility; the end of the script is
    the end of input."""

    def __init__(self, capsys, script):
        self.capsys, self.script, self.seen = capsys, list(script), ""

    def readline(self) -> str:
        self.seen += self.capsys.readouterr().out
        if not self.script:
            return ""
        key = self.script.pop(0)
        if key == "answer":
            first, second = (float(u) for u in re.findall(r"utility (\S+)", self.seen)[-2:])
            key = "1" if first > second else "2"
        return key + "\n"

    def output(self) -> str:
        return self.seen + self.capsys.readouterr().out


def shown_pairs(output: str) -> list[tuple[tuple[float, ...], tuple[float, ...]]]:
    designs = [tuple(json.loads(x)) for x in re.findall(r"design (\[.*?\])", output)]
    return list(zip(designs[::2], designs[1::2], strict=True))


@pytest.fixture
def describe(tmp_path) -> str:
    """A ``--describe`` command: prints each design it is given and its utility."""
    script = tmp_path / "render.py"
    script.write_text(
        "import json, sys\n"
        "for arg in sys.argv[1:]:\n"
        "    x = json.loads(arg)\n"
        "    print(f'design {json.dumps(x)} utility {-sum((v - 0.3) ** 2 for v in x)!r}')\n"
    )
    return f"{shlex.quote(sys.executable)} {shlex.quote(str(script))}"


@pytest.mark.slow
def test_a_scripted_person_answers_through_the_cli_and_a_second_run_resumes(
    tmp_path, monkeypatch, capsys, describe
):
    """Answer, answer, skip, undo (the skip: the skipped pair is asked again), answer, stop;
    then a second run with the same file asks only new pairs, the first of them the one the
    first run stopped at."""
    path = tmp_path / "answers.jsonl"
    command = ["optimize", "--dim", "1", "--k", "6", "--answers", str(path), "--interactive"]
    command += ["--describe", describe]
    person = Person(capsys, ["answer", "answer", "s", "u", "answer", "q"])
    monkeypatch.setattr("sys.stdin", person)
    assert main(command) == 0
    out = person.output()
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    assert [sorted(r) for r in rows] == [["a", "answer", "b"]] * 3
    for r in rows:  # every answer is the person's: the design of higher utility won
        assert r["answer"] == ("first" if prefers_first(r["a"], r["b"]) else "second")
    shown = shown_pairs(out)
    # two answered, the skipped one, a fresh one (undone), the skipped one again, the last
    assert len(shown) == 6
    assert far_from(np.array(shown[3]), np.array(shown[2])) and shown[4] == shown[2]
    assert [(tuple(r["a"]), tuple(r["b"])) for r in rows] == [shown[0], shown[1], shown[4]]
    assert "pair 3 of 6" in out and "best guess: (" in out

    # a second run replays the three answers (not asked again) and appends new ones
    person = Person(capsys, ["answer", "answer"])  # then the end of input
    monkeypatch.setattr("sys.stdin", person)
    assert main(command) == 0
    out = person.output()
    again = shown_pairs(out)
    assert again[0] == shown[5]  # the replayed session proposes what the first run would have
    assert "pair 4 of 6" in out and "pair 3 of 6" not in out
    assert f"resumed from {path}: 3 entries replayed (3 answers, 0 skips)" in out
    new_rows = [json.loads(line) for line in path.read_text().splitlines()]
    assert new_rows[:3] == rows and len(new_rows) == 5
    assert [(tuple(r["a"]), tuple(r["b"])) for r in new_rows[3:]] == again[:2]
    for r in new_rows[3:]:
        assert r["answer"] == ("first" if prefers_first(r["a"], r["b"]) else "second")


def test_a_failing_describe_command_names_itself_and_its_status(tmp_path, monkeypatch, capsys):
    path = tmp_path / "answers.jsonl"
    monkeypatch.setattr("sys.stdin", io.StringIO("1\n"))
    command = f"{shlex.quote(sys.executable)} -c 'import sys; sys.exit(3)'"
    argv = ["optimize", "--dim", "2", "--interactive", "--answers", str(path)]
    assert main([*argv, "--describe", command]) == 2
    err = capsys.readouterr().err
    assert "--describe" in err and "sys.exit(3)" in err and "status 3" in err
    assert not path.exists()  # nothing was answered


def test_the_command_line_refuses_bad_options(capsys):
    assert main(["optimize", "--dim", "1"]) == 2
    assert "--interactive or --function" in capsys.readouterr().err
    assert main(["optimize", "--dim", "0", "--function", "quadratic"]) == 2
    assert "--dim must be a positive integer, got 0" in capsys.readouterr().err
    assert main(["optimize", "--dim", "2", "--function", "hartmann6"]) == 2
    assert "hartmann6" in capsys.readouterr().err
    assert ACQUISITION_CHOICES == ACQUISITIONS  # the parser's copy of the list


@pytest.mark.slow
def test_a_function_answers_on_the_command_line(capsys):
    argv = ["optimize", "--dim", "1", "--function", "quadratic", "--k", "4", "--seed", "3"]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "4 answers through a probit with noise 0.1" in out
    guess = float(re.search(r"best guess: \((\S+)\)", out)[1])
    true = float(re.search(r"its true utility: (\S+)", out)[1])
    # the guess is printed to 4 decimals: 5e-5 in x moves the utility by 2 |x - 0.3| 5e-5
    assert true == pytest.approx(-((guess - 0.3) ** 2), abs=1e-4 * abs(guess - 0.3) + 1e-8)
    assert "the optimum: 0 at (0.3000)" in out


# --- the Python API ------------------------------------------------------------------------------


@pytest.mark.slow
def test_a_replayed_file_gives_the_state_of_the_session_that_wrote_it(tmp_path):
    path = tmp_path / "answers.jsonl"
    options = {"settings": SETTINGS, "key": jax.random.PRNGKey(5), "n_init": 2, "learn_every": 2}
    writer = DesignSession(1, answers=path, **options)
    answer_by_utility(writer, 3)
    a, b = writer.propose()
    writer.answer(a, b, "skip")
    answer_by_utility(writer, 1)
    writer.undo()
    answer_by_utility(writer, 2)
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    assert [r["answer"] for r in lines][3] == "skip" and len(lines) == 6
    for row, (a, b, reply) in zip(lines, writer.log, strict=True):  # the floats exactly
        assert row == {"a": a.tolist(), "b": b.tolist(), "answer": reply}

    reader = DesignSession(1, answers=path, **options)
    assert len(reader.log) == 6 and len(reader.pairs) == 5
    np.testing.assert_array_equal(reader.X, writer.X)
    np.testing.assert_array_equal(reader.pairs, writer.pairs)
    np.testing.assert_array_equal(reader.theta, writer.theta)
    np.testing.assert_array_equal(reader.mean, writer.mean)
    np.testing.assert_array_equal(reader.propose(), writer.propose())
    assert not np.allclose(writer.theta, initial_theta(1))  # theta was learned
    # the replay writes nothing; the next answer appends
    assert [json.loads(line) for line in path.read_text().splitlines()] == lines
    answer_by_utility(reader, 1)
    assert len(path.read_text().splitlines()) == 7


#: A good first line: a skip, so that with ``n_init=2`` the replay fits nothing (no compile).
GOOD = '{"a": [0.25], "b": [0.75], "answer": "skip"}'


@pytest.mark.parametrize(
    "line, match",
    [
        ("{not json", "not JSON"),
        ('{"a": [0.1, 0.2], "b": [0.5], "answer": "first"}', r"a must have 1 values.*\(2,\)"),
        ('{"a": [0.1], "b": [1.5], "answer": "second"}', r"b\[0\] = 1\.5 is outside"),
        ('{"a": [NaN], "b": [0.5], "answer": "second"}', r"a\[0\] = nan is outside"),
        ('{"a": [0.1], "b": [0.5], "answer": "maybe"}', "answer 'maybe' not in"),
        ('{"a": [0.1], "b": [0.5]}', "expected"),
        ('{"a": [true], "b": [0.5], "answer": "first"}', "a must hold numbers"),
        ('{"a": [0.5], "b": [0.5], "answer": "first"}', "same design"),
    ],
)
def test_a_bad_answer_file_names_its_line(tmp_path, line, match):
    path = tmp_path / "bad.jsonl"
    path.write_text(GOOD + "\n" + line + "\n")
    with pytest.raises(ValueError, match=rf"bad\.jsonl, line 2: .*{match}"):
        DesignSession(1, settings=SETTINGS, answers=path, n_init=2)


def test_inputs_are_checked_at_the_boundary(tmp_path):
    with pytest.raises(ValueError, match="dim must be a positive integer, got 0"):
        DesignSession(0)
    with pytest.raises(ValueError, match="dim must be a positive integer"):
        DesignSession(1.5)
    with pytest.raises(ValueError, match="no directory"):
        DesignSession(1, answers=tmp_path / "missing" / "a.jsonl")
    with pytest.raises(ValueError, match="is a directory"):
        DesignSession(1, answers=tmp_path)
    with pytest.raises(ValueError, match=r"settings\.acquisition must be one of"):
        DesignSession(1, settings=Settings(acquisition="ucb"))
    with pytest.raises(ValueError, match="learn_every must be a non-negative integer"):
        DesignSession(1, learn_every=-1)
    session = DesignSession(2, settings=SETTINGS)  # the first pair is random: nothing compiles
    a, b = session.propose()
    with pytest.raises(ValueError, match="reply must be one of 'first', 'second' or 'skip'"):
        session.answer(a, b, "yes")
    with pytest.raises(ValueError, match=r"a\[1\] = 1\.2 is outside the unit cube"):
        session.answer([0.5, 1.2], b, "first")
    with pytest.raises(ValueError, match=r"b must have 2 values \(dim = 2\), got shape \(3,\)"):
        session.answer(a, [0.1, 0.2, 0.3], "first")
    with pytest.raises(ValueError, match="same design"):
        session.answer(a, a, "second")
    with pytest.raises(ValueError, match="k must be a non-negative integer"):
        optimize(lambda a, b: True, 1, -1)
    assert session.log == [] and session.best() is None and session.undo() is None


def far_from(pair, skipped) -> bool:
    """``pair`` is not ``skipped`` nor its swap, within ``SKIP_RADIUS`` (RMS over both)."""
    from bayesrank.active.designs.loop import SKIP_RADIUS

    rms = [np.sqrt(np.mean((pair - s) ** 2)) for s in (skipped, skipped[::-1])]
    return min(rms) >= SKIP_RADIUS


@pytest.mark.slow
def test_a_skip_is_recorded_and_the_next_proposal_differs_undo_restores_it():
    """A skip means "something else": the next proposal is neither the skipped pair nor its
    swap (the same question, sides exchanged), nor near either; two skips in a row, neither
    comes back; undo restores the proposal before the skip exactly."""
    session = DesignSession(1, settings=SETTINGS)
    answer_by_utility(session, 2)
    X, theta = session.X, session.theta
    skipped = session.propose()
    session.answer(*skipped, "skip")
    assert session.log[-1][2] == "skip" and len(session.pairs) == 2
    np.testing.assert_array_equal(session.X, X)  # a skip teaches nothing
    second = session.propose()
    assert far_from(second, skipped)
    session.answer(*second, "skip")
    third = session.propose()
    assert far_from(third, skipped) and far_from(third, second)
    session.undo()
    np.testing.assert_array_equal(session.propose(), second)
    session.undo()
    np.testing.assert_array_equal(session.propose(), skipped)
    np.testing.assert_array_equal(session.theta, theta)


@pytest.mark.slow  # compiles the pool proposal with skips
def test_a_pool_whose_every_pair_is_skipped_has_nothing_left_to_ask():
    pool = [[0.1, 0.1], [0.5, 0.9], [0.9, 0.4]]  # three pairs
    session = DesignSession(2, settings=SETTINGS, pool=pool, pool_mode="pool", n_init=0)
    asked = []
    while (question := session.question()) is not None:
        pair = np.stack([question.first, question.second])
        assert all(far_from(pair, s) for s in asked)  # never the same two designs again
        asked.append(pair)
        session.reply(question, "skip")
    assert len(asked) == 3 and session.propose() is None
    session.undo()
    assert session.question() is not None  # the last skip taken back: one pair to ask


@pytest.mark.slow
def test_answers_within_a_capacity_bucket_compile_nothing():
    """Pairs are padded to powers of two (at least ``SMALLEST``, 32): one program per bucket,
    not per answer."""
    from bayesrank.data.batch import SMALLEST

    settings = Settings(n_raw=32, n_starts=2, steps=10, learn_steps=5)  # this test's own
    session = DesignSession(1, settings=settings)
    answer_by_utility(session, 2)  # the first model step compiles the smallest bucket
    with count_compilations() as n:
        answer_by_utility(session, 3)  # 5 pairs
        session.best()
    assert n[0] == 0
    answer_by_utility(session, SMALLEST - 5)  # SMALLEST pairs: the bucket is full
    with count_compilations() as n:
        answer_by_utility(session, 1)  # SMALLEST + 1: the next bucket, twice as large
    assert n[0] >= 1
    with count_compilations() as n:
        answer_by_utility(session, 3)
    assert n[0] == 0


@pytest.mark.slow
def test_optimize_finds_the_optimum_of_a_quadratic_with_a_noiseless_oracle():
    session = optimize(prefers_first, 1, 12, settings=SETTINGS, key=jax.random.PRNGKey(1))
    assert len(session.pairs) == 12 and len(session.log) == 12
    x, mean = session.best()
    assert abs(x[0] - 0.3) < 0.05
    assert mean == np.max(session.mean)


def test_optimize_stops_when_the_oracle_only_skips():
    calls = []
    session = optimize(lambda a, b: calls.append(1), 2, 1, settings=SETTINGS, n_init=20)
    assert len(calls) == 10 and len(session.pairs) == 0 and session.best() is None


@pytest.mark.slow  # compiles the pool and the mixed proposals
def test_a_pool_session_proposes_pool_designs_and_mixed_scores_at_least_as_high():
    from bayesrank.active.designs import belief as B
    from bayesrank.active.designs.acquisition import eubo

    pool = np.random.default_rng(4).random((6, 2))
    settings = Settings(n_raw=32, n_starts=2, steps=20, learn_every=0)

    def oracle(a, b):
        return bool(np.sum((a - 0.3) ** 2) < np.sum((b - 0.3) ** 2))

    on_pool = optimize(oracle, 2, 3, settings=settings, n_init=1, pool=pool, pool_mode="pool")
    rows = {tuple(x) for x in pool.tolist()}
    for a, b, _ in on_pool.log[1:]:  # after the random first pair
        assert tuple(a.tolist()) in rows and tuple(b.tolist()) in rows
    # brute force over the pool's pairs under the session's posterior: the proposal is the best
    X, pairs = on_pool.X, on_pool.pairs
    mask, pair_mask = np.ones(len(X), bool), np.ones(len(pairs), bool)
    theta = on_pool.theta
    post = B.fit(theta, X, mask, pairs, pair_mask, engine="ep")
    belief = B.from_posterior(theta, X, mask, pairs, pair_mask, post)
    scores = {(i, j): float(eubo(*B.latent(belief, pool[[i, j]])))
              for i in range(6) for j in range(i + 1, 6)}  # fmt: skip
    a, b = on_pool.propose()
    got = float(eubo(*B.latent(belief, np.stack([a, b]))))
    assert got == pytest.approx(max(scores.values()), rel=1e-4)
    mixed = DesignSession(2, settings=settings, n_init=0, pool=pool, pool_mode="mixed")
    for a, b, r in on_pool.log:
        mixed.answer(a, b, r)
    a, b = mixed.propose()
    assert float(eubo(*B.latent(belief, np.stack([a, b])))) >= max(scores.values()) - 1e-4
    with pytest.raises(ValueError, match=r"pool\[1\]\[0\] = 1.5"):
        DesignSession(2, pool=[[0.1, 0.2], [1.5, 0.0]])
    with pytest.raises(ValueError, match="pool_mode"):
        DesignSession(2, pool=pool, pool_mode="cube")


def test_a_bad_pool_file_names_its_line(tmp_path, capsys):
    pool = tmp_path / "pool.csv"
    pool.write_text("# my designs\n0.1, 0.2\n0.3, 1.7\n")
    argv = ["optimize", "--dim", "2", "--function", "quadratic", "--pool", str(pool)]
    assert main(argv) == 2
    assert f"{pool}, line 3: expected 2 numbers in [0, 1]" in capsys.readouterr().err
    assert main(["optimize", "--dim", "1", "--function", "quadratic", "--time-budget", "-1"]) == 2
    assert "--time-budget must be a finite number >= 0, got -1.0" in capsys.readouterr().err
