"""Exploration with an answering person (or any callable): a host-side loop that proposes one
pair at a time and takes an answer, a skip or an undo, with the answers kept in a file that a
later session resumes from.

The answer file holds one JSON object a line: ``{"i": 3, "j": 17, "answer": "first"}``
(``"first"``: ``i`` is preferred, ``"second"``: ``j`` is, ``"skip"``: not answered and not to
be asked again); the session replays it on start. The posterior after each answer is EP's
(``bayesrank.inference.ep.fit``, warm-started from the previous sites), proposals follow
the same criteria and tie rule as the compiled loop (``bayesrank.active.next_pair``).
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path

import jax
import numpy as np

from ..data.checks import check_bool, check_choice, check_index_pairs, check_int
from ..data.keys import check_key
from ..inference import ep
from .criteria import CRITERIA
from .loop import next_pair

__all__ = ["ANSWERS", "Session", "ask", "check_oracle", "oracle_answer", "write_lines"]

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


def write_lines(path: Path, lines: list[str]) -> None:
    """Write ``lines`` to ``path``, one a line, through a temporary file renamed over it: a
    session's answers file is never half-written."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text("".join(line + "\n" for line in lines))
    tmp.replace(path)


class Session:
    """One exploration: ``K: (n, n)`` prior covariance, ``candidates: (c, 2)`` pairs that may be
    asked, ``criterion`` (``CRITERIA``); ``answers``: a path (JSON lines,
    replayed if it exists, appended to after every change) or None."""

    def __init__(
        self,
        K,
        candidates,
        criterion: str = "variance_ratio",
        *,
        key=None,
        answers: str | os.PathLike | None = None,
        tol: float | None = None,
    ):
        self.K = np.asarray(K, float)
        self.candidates = check_index_pairs(candidates, len(self.K), name="candidates")
        self.criterion = check_choice(criterion, "criterion", CRITERIA)
        self.key = jax.random.PRNGKey(0) if key is None else check_key(key)
        self.tol = tol
        self.path = None if answers is None else Path(answers)
        self.log: list[tuple[int, str]] = []  # (candidate index, answer), in order
        self._refresh()
        if self.path is not None and self.path.exists():
            self._replay()

    # --- state -------------------------------------------------------------------------------

    @property
    def pairs(self) -> np.ndarray:
        """The answers so far as pairs, winner first: ``(a, 2)``."""
        rows = [
            self.candidates[s] if a == "first" else self.candidates[s][::-1]
            for s, a in self.log
            if a != "skip"
        ]
        return np.asarray(rows, np.int64).reshape(-1, 2)

    def _refresh(self, sites=None):
        pairs = self.pairs
        if len(pairs) == 0:
            self.mean, self.cov, self.sites = np.zeros(len(self.K)), self.K, None
            return
        post = ep.fit(self.K, pairs, sites=sites, tol=self.tol)
        self.mean, self.cov, self.sites = np.asarray(post.mean), np.asarray(post.cov), post.sites

    # --- the loop ----------------------------------------------------------------------------

    def propose(self) -> int | None:
        """The index of the next candidate to ask (None when every one is asked or skipped)."""
        asked = np.zeros(len(self.candidates), bool)
        asked[[s for s, _ in self.log]] = True
        if asked.all():
            return None
        key = jax.random.fold_in(self.key, len(self.log))
        return int(next_pair(self.mean, self.cov, self.candidates, asked, self.criterion, key))

    def answer(self, index: int, answer: str) -> None:
        """Record ``answer`` (one of ``ANSWERS``) to candidate ``index`` and update."""
        answer = check_choice(answer, "answer", ANSWERS)
        if not 0 <= int(index) < len(self.candidates):
            raise ValueError(f"index {index} is not a candidate (0..{len(self.candidates) - 1})")
        if any(s == int(index) for s, _ in self.log):
            raise ValueError(f"candidate {index} was already asked")
        self.log.append((int(index), answer))
        if answer != "skip":
            sites = self.sites
            if sites is not None:  # warm start: the previous sites and a zero one for the new pair
                sites = ep.Sites(*(np.append(np.asarray(x), 0.0) for x in sites))
            self._refresh(sites)
        self._save()

    def undo(self) -> tuple[int, str] | None:
        """Take back the last answer or skip (returned; None if there is none)."""
        if not self.log:
            return None
        last = self.log.pop()
        self._refresh()
        self._save()
        return last

    # --- the file ----------------------------------------------------------------------------

    def _save(self) -> None:
        if self.path is None:
            return
        write_lines(self.path, [
            json.dumps(
                {"i": int(self.candidates[s, 0]), "j": int(self.candidates[s, 1]), "answer": a}
            )
            for s, a in self.log
        ])  # fmt: skip

    def _replay(self) -> None:
        index = {(int(i), int(j)): s for s, (i, j) in enumerate(self.candidates)}
        for lineno, line in enumerate(self.path.read_text().splitlines(), 1):
            if not line.strip():
                continue
            try:  # RecursionError: nested too deep for json; check_int: 1.5, true, "3", inf
                row = json.loads(line)
                key = (check_int(row["i"], "i"), check_int(row["j"], "j"))
                answer = row["answer"]
            except (ValueError, KeyError, TypeError, RecursionError):
                raise ValueError(
                    f"{self.path}, line {lineno}: expected {{'i': int, 'j': int, 'answer': "
                    f"one of {ANSWERS}}}, got {line[:80]!r}"
                ) from None
            if key not in index:
                raise ValueError(f"{self.path}, line {lineno}: pair {key} is not a candidate")
            if answer not in ANSWERS:
                raise ValueError(f"{self.path}, line {lineno}: answer {answer!r} not in {ANSWERS}")
            if any(s == index[key] for s, _ in self.log):
                raise ValueError(f"{self.path}, line {lineno}: pair {key} is answered twice")
            self.log.append((index[key], answer))
        self._refresh()


def ask(K, candidates, oracle: Callable[[int, int], bool | None], k: int, **options) -> Session:
    """Ask ``oracle(i, j)`` (True: ``i`` preferred, False: ``j``, None: skip; the replies of
    ``oracle_answer``) about ``k`` pairs, one at a time, proposed by a ``Session``
    (``options``: its keywords); ``k`` an integer >= 0."""
    check_oracle(oracle)
    check_int(k, "k", low=0)
    session = Session(K, candidates, **options)
    answered = len(session.pairs)
    question = 0
    while answered < k and (s := session.propose()) is not None:
        i, j = (int(x) for x in session.candidates[s])
        reply = oracle_answer(oracle(i, j), f"ask, question {question} (pair ({i}, {j}))")
        session.answer(s, reply)
        answered += reply != "skip"
        question += 1
    return session
