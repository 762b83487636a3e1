"""Exploration with an answering person (or any callable): the pool proposer of the
interactive session (``active.interactive``), which proposes one pair of candidate entities at
a time and takes an answer, a skip or an undo, with the answers kept in a file that a later
session resumes from.

The answer file holds one JSON object a line: ``{"i": 3, "j": 17, "answer": "first"}``
(``"first"``: ``i`` is preferred, ``"second"``: ``j`` is, ``"skip"``: not answered and not to
be asked again); the session replays it on start. The posterior after each answer is the
session's engine's (any ``GaussianEngine``, EP by default, through
``bayesrank.inference.problem.fit_covariance``, warm-started from the previous sites),
proposals follow the same criteria and tie rule as the compiled loop
(``bayesrank.active.next_pair``).
"""

from __future__ import annotations

import dataclasses
import os
import warnings
from collections.abc import Callable

import jax
import numpy as np

from ..data.checks import check_choice, check_index_pairs, check_int
from ..data.keys import check_key
from ..inference.engine import GaussianEngine
from ..inference.engines import EP, resolve
from ..inference.problem import fit_covariance
from .criteria import CRITERIA
from .interactive import (
    ANSWERS,
    InteractiveSession,
    Question,
    answer_by_oracle,
    check_oracle,
    oracle_answer,
    write_lines,
)
from .loop import next_pair

__all__ = ["ANSWERS", "Session", "ask", "check_oracle", "oracle_answer", "write_lines"]


class Session(InteractiveSession):
    """One exploration: ``K: (n, n)`` prior covariance, ``candidates: (c, 2)`` pairs that may be
    asked, ``criterion`` (``CRITERIA``); ``answers``: a path (JSON lines, replayed if it
    exists, rewritten after every change) or None; ``engine``: the posterior update after
    each answer, a ``GaussianEngine`` (``EP(...)``, ``Laplace(...)``, your own) or its name
    (``tol=``: the old spelling of ``engine=EP(tol=...)``, a ``DeprecationWarning``).
    ``log``: ``(candidate index, answer)`` entries, in order."""

    FIELDS = ("i", "j")

    def __init__(
        self,
        K,
        candidates,
        criterion: str = "variance_ratio",
        *,
        key=None,
        answers: str | os.PathLike | None = None,
        engine: GaussianEngine | str = EP.name,
        tol: float | None = None,
    ):
        self.K = np.asarray(K, float)
        self.candidates = check_index_pairs(candidates, len(self.K), name="candidates")
        self.criterion = check_choice(criterion, "criterion", CRITERIA)
        self.key = jax.random.PRNGKey(0) if key is None else check_key(key)
        self.engine = resolve(engine, gaussian=True)
        if tol is not None:
            self.engine = dataclasses.replace(self.engine, tol=tol)
            warnings.warn(
                f"Session(tol={tol!r}) is deprecated: pass engine={self.engine!r}",
                DeprecationWarning,
                stacklevel=2,
            )
        super().__init__(answers)
        self._index = {(int(i), int(j)): s for s, (i, j) in enumerate(self.candidates)}
        self._refresh()
        self._resume()

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
        post = fit_covariance(self.engine, self.K, pairs, sites)
        self.mean, self.cov, self.sites = np.asarray(post.mean), np.asarray(post.cov), post.sites

    def _asked(self, index: int) -> bool:
        return any(s == index for s, _ in self.log)

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
        if self._asked(int(index)):
            raise ValueError(f"candidate {index} was already asked")
        self._commit((int(index), answer))

    def question(self) -> Question | None:
        """The next candidate (``propose``): its entities ``i``, ``j`` and its index; None
        when every one is asked or skipped."""
        s = self.propose()
        if s is None:
            return None
        i, j = (int(x) for x in self.candidates[s])
        return Question(i, j, s)

    def reply(self, question: Question, answer: str) -> None:
        """Record ``answer`` (one of ``ANSWERS``) to a ``question()``."""
        self.answer(question.index, answer)

    # --- the base's hooks --------------------------------------------------------------------

    def _record(self, entry: tuple[int, str], *, replay: bool = False) -> None:
        self.log.append(entry)
        if replay or entry[1] == "skip":  # a replay fits once, at the end
            return
        sites = self.sites
        if sites is not None:  # warm start: the previous sites and a zero one for the new pair
            sites = type(sites)(*(np.append(np.asarray(x), 0.0) for x in sites))
        self._refresh(sites)

    def _retract(self) -> None:
        self._refresh()

    def _replayed(self) -> None:
        self._refresh()

    def _row(self, entry: tuple[int, str]) -> dict:
        i, j = self.candidates[entry[0]]
        return {"i": int(i), "j": int(j)}

    def _entry(self, row: dict) -> tuple[int, str]:
        key = (check_int(row["i"], "i"), check_int(row["j"], "j"))  # not 1.5, true, "3", inf
        if key not in self._index:
            raise ValueError(f"pair {key} is not a candidate")
        if self._asked(self._index[key]):
            raise ValueError(f"pair {key} is answered twice")
        return self._index[key], row["answer"]

    def _form(self) -> str:
        return f"'i': int, 'j': int, 'answer': one of {ANSWERS}"


def ask(K, candidates, oracle: Callable[[int, int], bool | None], k: int, **options) -> Session:
    """Ask ``oracle(i, j)`` (True: ``i`` preferred, False: ``j``, None: skip; the replies of
    ``oracle_answer``) about ``k`` pairs, one at a time, proposed by a ``Session``
    (``options``: its keywords); ``k`` an integer >= 0."""
    check_oracle(oracle)
    k = check_int(k, "k", low=0)
    session = Session(K, candidates, **options)
    return answer_by_oracle(
        session, oracle, k, lambda t, q: f"ask, question {t} (pair ({q.first}, {q.second}))"
    )
