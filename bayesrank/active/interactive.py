"""The interactive session, once: a person (or any callable) answers one pair at a time, takes
back the last answer, and the answers live in a file that a later session resumes from.

Two proposers build on ``InteractiveSession``: ``active.Session`` (pairs of candidate
entities, EP's posterior over them) and ``active.designs.DesignSession`` (pairs of new designs
in the unit cube, the compiled optimisation step). This base keeps what they share:

- the answer vocabulary ``ANSWERS`` (``"first"``: the first of the pair is preferred,
  ``"second"``: the second is, ``"skip"``: not answered), and ``oracle_answer``, the reading
  of a callable's reply;
- the ``log`` of entries (each a tuple whose last item is the answer), ``undo`` and the
  answers file: one JSON object a line, its keys the proposer's ``FIELDS`` and ``"answer"``,
  rewritten atomically (``write_lines``) after every change and replayed line by line when a
  session starts with it; a line it cannot read is refused naming the file and the line;
- ``question`` / ``reply``: one pair to show (a ``Question``) and its answer, the same two
  calls for both proposers, through which ``answer_by_oracle`` (the oracle loop of
  ``active.ask`` and ``designs.optimize``) and the command line's question loop
  (``bayesrank.cli``) ask.

A proposer says how it proposes the next pair (``question``, ``pairs``) and how an answer
enters its posterior (``_record``, ``_retract``, ``_replayed``), and how an entry reads and
writes as a line of the file (``_entry``, ``_row``, ``_form``).
"""

from __future__ import annotations

import abc
import copy
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple

from ..data.checks import check_bool

__all__ = [
    "ANSWERS",
    "InteractiveSession",
    "Question",
    "answer_by_oracle",
    "check_answers_path",
    "check_oracle",
    "oracle_answer",
    "write_lines",
]

#: What an answer may be.
ANSWERS = ("first", "second", "skip")


def oracle_answer(reply, where: str) -> str:
    """The answer (one of ``ANSWERS``) that an oracle's ``reply`` about a pair stands for:
    ``True`` (also ``np.True_`` or a 0-d bool array, NumPy's or JAX's, as ``f(a) > f(b)``
    gives): ``"first"``; ``False``: ``"second"``; ``None``: ``"skip"``; or one of ``ANSWERS``
    itself. Anything else raises ``ValueError`` naming ``where``, the reply and its type: an
    integer too (``1`` could be the truth value or the prompt's key for the first design, and
    ``0`` the truth value or the winner's position: taking them as truth values could invert
    an answer), a float (NaN is truthy) and a string that is not an answer."""
    if reply is None:
        return "skip"
    if isinstance(reply, str):
        if reply in ANSWERS:
            return str(reply)
    else:
        try:
            return "first" if check_bool(reply, "reply") else "second"
        except ValueError:
            pass
    shown = repr(reply)
    shown = shown if len(shown) <= 80 else shown[:77] + "..."
    raise ValueError(
        f"{where}: the oracle replied {shown} of type {type(reply).__name__}; a reply must be "
        f"True (the first design is preferred), False (the second is), None (skip) or one of "
        f"{ANSWERS}"
    )


def check_oracle(oracle):
    """``oracle`` if it is callable, else ``ValueError`` naming its type."""
    if not callable(oracle):
        raise ValueError(f"oracle must be a callable oracle(a, b), got {type(oracle).__name__}")
    return oracle


def check_answers_path(answers) -> Path | None:
    """``answers`` (a path or None) as a ``Path``: a file, or none yet, in a directory that
    exists; else ``ValueError`` naming it."""
    if answers is None:
        return None
    if not isinstance(answers, str | os.PathLike):
        raise ValueError(f"answers must be a path or None, got {type(answers).__name__}")
    path = Path(answers)
    if path.is_dir():
        raise ValueError(f"answers {str(path)!r} is a directory, not a file")
    if not path.parent.is_dir():
        raise ValueError(f"answers {str(path)!r}: no directory {str(path.parent)!r}")
    return path


def write_lines(path: Path, lines: list[str]) -> None:
    """Write ``lines`` to ``path``, one a line, through a temporary file renamed over it: a
    session's answers file is never half-written."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text("".join(line + "\n" for line in lines))
    tmp.replace(path)


class Question(NamedTuple):
    """One pair to show: ``first`` and ``second`` (entity indices, or designs ``(dim,)``) and
    ``index``, the proposer's own handle on the pair (a candidate's index; None where the pair
    is its own handle)."""

    first: object
    second: object
    index: int | None = None


class InteractiveSession(abc.ABC):
    """The base of an interactive session (module docstring). ``answers``: a path (JSON lines,
    replayed if it exists, rewritten after every change) or None; a proposer calls
    ``_resume()`` at the end of its constructor, once its posterior is ready."""

    #: The keys of a line of the answers file, besides ``"answer"``.
    FIELDS: tuple[str, ...] = ()

    def __init__(self, answers: str | os.PathLike | None):
        self.path = check_answers_path(answers)
        self.log: list[tuple] = []  # the entries, in order; an entry's last item its answer

    # --- what a proposer says ------------------------------------------------------------------

    @property
    @abc.abstractmethod
    def pairs(self):
        """The answers so far as pairs, winner first: ``(a, 2)`` (skips are not among them)."""

    @abc.abstractmethod
    def question(self) -> Question | None:
        """The next pair to show (None when nothing is left to ask)."""

    @abc.abstractmethod
    def reply(self, question: Question, answer: str) -> None:
        """Record ``answer`` (one of ``ANSWERS``) to a ``question()``."""

    @abc.abstractmethod
    def _record(self, entry: tuple, *, replay: bool = False) -> None:
        """Append a checked ``entry`` to ``log`` and update the posterior (``replay``: while
        the file is read, where the proposer may wait for ``_replayed``); on failure the log
        is as before."""

    @abc.abstractmethod
    def _retract(self) -> None:
        """The posterior after the last entry of ``log`` was taken back."""

    @abc.abstractmethod
    def _replayed(self) -> None:
        """The posterior once the answers file is read."""

    @abc.abstractmethod
    def _row(self, entry: tuple) -> dict:
        """``entry`` as a line of the answers file (without ``"answer"``)."""

    @abc.abstractmethod
    def _entry(self, row: dict) -> tuple:
        """A line of the answers file (its keys checked, its answer in ``ANSWERS``) as an
        entry, or ``ValueError`` saying what is wrong."""

    @abc.abstractmethod
    def _form(self) -> str:
        """A line of the answers file, as the messages describe it."""

    # --- answer, undo ----------------------------------------------------------------------------

    def _commit(self, entry: tuple) -> None:
        """Record a checked ``entry`` and rewrite the answers file."""
        self._record(entry)
        self._save()

    def undo(self) -> tuple | None:
        """Take back the last answer or skip (returned: the log's entry; None if there is
        none)."""
        if not self.log:
            return None
        last = self.log.pop()
        self._retract()
        self._save()
        return last

    # --- the file --------------------------------------------------------------------------------

    def _save(self) -> None:
        if self.path is not None:
            write_lines(self.path, [json.dumps({**self._row(e), "answer": e[-1]})
                                    for e in self.log])  # fmt: skip

    def _resume(self) -> None:
        """Replay the answers file, if there is one."""
        if self.path is not None and self.path.exists():
            self._replay()

    def _replay(self) -> None:
        try:
            text = self.path.read_text(encoding="utf-8")
        except UnicodeDecodeError as err:
            raise ValueError(f"{self.path}: not a UTF-8 text file ({err.reason} at byte "
                             f"{err.start})") from None  # fmt: skip
        for lineno, line in enumerate(text.splitlines(), 1):
            if not line.strip():
                continue
            where = f"{self.path}, line {lineno}"
            try:
                row = json.loads(line)
            except (ValueError, RecursionError) as err:  # RecursionError: nested too deep
                raise ValueError(f"{where}: not JSON ({err}): {line[:80]!r}") from None
            if not isinstance(row, dict) or set(row) != {*self.FIELDS, "answer"}:
                raise ValueError(f"{where}: expected {{{self._form()}}}, got {line[:80]!r}")
            if row["answer"] not in ANSWERS:
                raise ValueError(f"{where}: answer {row['answer']!r} not in {ANSWERS}")
            try:
                self._record(self._entry(row), replay=True)
            except ValueError as err:
                raise ValueError(f"{where}: {err}") from None
        self._replayed()


def answer_by_oracle(
    session: InteractiveSession,
    oracle: Callable,
    k: int,
    where: Callable[[int, Question], str],
    max_questions: int | None = None,
) -> InteractiveSession:
    """Ask ``oracle(first, second)`` (copies of a ``session.question()``'s) until ``k`` pairs
    are answered (those of a resumed answers file count), nothing is left to ask, or
    ``max_questions`` questions are asked; its replies read by ``oracle_answer``, a refused
    one named ``where(question number, question)`` and not recorded."""
    answered = len(session.pairs)
    asked = 0
    while answered < k and (max_questions is None or asked < max_questions):
        question = session.question()
        if question is None:
            break
        reply = oracle(copy.copy(question.first), copy.copy(question.second))
        reply = oracle_answer(reply, where(asked, question))
        session.reply(question, reply)
        answered += reply != "skip"
        asked += 1
    return session
