"""Preferential optimisation with an answering person (or any callable): the designs proposer
of the interactive session (``active.interactive``), a host-side loop over the unit cube
``[0, 1]^dim`` that proposes one pair of new designs at a time and takes an answer, a skip or
an undo, with the answers kept in a file that a later session resumes from.

The answer file holds one JSON object a line: ``{"a": [0.1, 0.5], "b": [0.7, 0.2], "answer":
"first"}`` (``"first"``: ``a`` is preferred, ``"second"``: ``b`` is, ``"skip"``: not answered);
the session replays it on start and rewrites it (atomically) after every change. Designs are
kept as the exact floats shown (JSON round-trips them).

Each step is the compiled loop's (``loop.propose``, one jitted program per capacity bucket):
after ``n_init`` uniform random pairs (each fitted by ``loop.fitted``, a smaller program, since
their proposal is not the model's), re-learn ``theta`` before every ``learn_every``-th
proposal (every log entry is a step, skips included), fit the posterior warm-started from the
previous sites, and maximise the acquisition.

The state after ``N`` log entries (theta, sites, the posterior mean at the shown designs and the
next proposal) is computed when the entry is added and kept, so ``undo`` restores the previous
one exactly and a replayed file gives the state of the session that wrote it. Step ``N`` uses
the key ``fold_in(key, N)``. A skip means "show me something else": no later proposal lies
near a skipped pair in either order (``loop.SKIP_RADIUS``; a swapped pair is not a new
question), and a pool whose every pair left was skipped has nothing more to ask.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from ...data.batch import bucket_size
from ...data.checks import check_choice, check_distinct, check_float, check_int
from ...data.keys import check_key
from ...inference.ep.sites import Sites
from ..interactive import ANSWERS, InteractiveSession, Question, answer_by_oracle, check_oracle
from . import loop
from .settings import Settings, check_settings

__all__ = ["ANSWERS", "DesignSession", "optimize"]

#: ``optimize`` asks at most this many questions per answer wanted (an oracle that skips every
#: pair must not loop forever).
MAX_QUESTIONS_PER_ANSWER = 10


class _State(NamedTuple):
    """After ``N`` log entries: ``theta: (1 + dim,)``, ``sites`` (``tau``, ``nu``: ``(a,)``
    each, ``a`` answered pairs), ``mean: (2 a,)`` at the shown designs, ``proposal: (2, dim)``,
    or None where every pair left to propose is a skipped one (a pool asked through)."""

    theta: np.ndarray
    sites: tuple[np.ndarray, np.ndarray]
    mean: np.ndarray
    proposal: np.ndarray | None


def _check_design(x, name: str, dim: int) -> np.ndarray:
    """``x`` as a ``(dim,)`` float64 array in the unit cube, or ``ValueError`` naming it."""
    values = list(x) if isinstance(x, list | tuple) else None
    if values is not None and any(isinstance(v, bool | np.bool_) for v in values):
        raise ValueError(f"{name} must hold numbers, got {x!r}")
    try:
        arr = np.asarray(x)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a design of {dim} numbers, got {x!r}") from None
    if arr.dtype.kind not in "iuf":
        raise ValueError(f"{name} must be a design of {dim} numbers, got {x!r}")
    if arr.shape != (dim,):
        raise ValueError(f"{name} must have {dim} values (dim = {dim}), got shape {arr.shape}")
    arr = arr.astype(np.float64)
    bad = ~((arr >= 0.0) & (arr <= 1.0))  # NaN is bad too
    if bad.any():
        k = int(np.argmax(bad))
        raise ValueError(f"{name}[{k}] = {float(arr[k])!r} is outside the unit cube [0, 1]")
    return arr


def _check_pool(pool, dim: int, dtype) -> np.ndarray:
    """``pool`` as ``(p, dim)`` float64 designs: numbers (not bools), ``p >= 2``, each in the
    unit cube, all distinct in the working ``dtype`` (a pair of equal designs asks nothing),
    or ``ValueError`` naming the row at fault (``pool[2] = (0.5, 0.5) repeats pool[0]``)."""
    try:
        arr = np.asarray(pool)
    except (TypeError, ValueError):  # ragged rows
        raise ValueError(f"pool must be a (p, {dim}) array of designs, got rows of "
                         f"different lengths") from None  # fmt: skip
    if arr.ndim != 2 or arr.shape[1] != dim:
        raise ValueError(f"pool must be a (p, {dim}) array of designs (dim = {dim}), got shape "
                         f"{arr.shape}")  # fmt: skip
    if len(arr) < 2:
        raise ValueError(f"pool must hold at least 2 designs, got {len(arr)}")
    rows = pool if isinstance(pool, list | tuple) else arr  # a list's own items: bools show
    designs = np.stack([_check_design(x, f"pool[{i}]", dim) for i, x in enumerate(rows)])
    try:
        check_distinct([tuple(x) for x in designs.astype(dtype).tolist()], "pool")
    except ValueError as err:
        raise ValueError(f"{err}: a pool's designs must be distinct (in the working precision, "
                         f"{np.dtype(dtype).name})") from None  # fmt: skip
    return designs


class DesignSession(InteractiveSession):
    """Preferential optimisation over ``[0, 1]^dim`` (module docstring). ``settings``: the
    loop's (``designs.Settings``, default ``Settings()``); ``key``: a PRNG key (default
    ``PRNGKey(0)``); ``answers``: a path (JSON lines, replayed if it exists, rewritten after
    every change) or None; ``n_init`` uniform random pairs first; ``learn_every`` (default
    ``settings.learn_every``; 0: never); ``pool: (p, dim)`` designs the user already has, in
    the unit cube, with ``pool_mode`` ``"pool"`` (propose two of them) or ``"mixed"`` (two of
    them, or a pair anywhere in the cube where the acquisition is higher); ``time_budget_s``:
    seconds a proposal's search over the cube may take, at most ``settings.steps`` steps
    (``loop.propose_within``: the fit always runs; None: no limit but the steps). ``log``:
    ``(a, b, answer)`` entries, in order; ``undo`` brings back the state before the last one
    exactly, its proposal included."""

    FIELDS = ("a", "b")

    def __init__(
        self,
        dim: int,
        *,
        settings: Settings | None = None,
        key=None,
        answers: str | os.PathLike | None = None,
        n_init: int = 1,
        learn_every: int | None = None,
        pool=None,
        pool_mode: str = "mixed",
        time_budget_s: float | None = None,
    ):
        self.dim = check_int(dim, "dim", 1)
        settings = Settings() if settings is None else settings
        check_settings(settings)  # kept as spelled (an engine's name stays one: ``propose``)
        learn_every = settings.learn_every if learn_every is None else learn_every
        self.settings = settings._replace(learn_every=check_int(learn_every, "learn_every", 0))
        self.n_init = check_int(n_init, "n_init", 0)
        self.key = jax.random.PRNGKey(0) if key is None else check_key(key)
        super().__init__(answers)
        self.dtype = np.dtype(jnp.result_type(float))  # the working precision, fixed here
        self.time_budget_s = None
        if time_budget_s is not None:
            self.time_budget_s = check_float(time_budget_s, "time_budget_s", 0.0)
        self.steps_taken: list[int] = []  # the ascent's steps of each budgeted proposal
        self.pool, self.candidates, self.mode = None, None, "cube"
        pool_mode = check_choice(pool_mode, "pool_mode", ("pool", "mixed"))
        if pool is None and pool_mode == "pool":
            raise ValueError("pool_mode 'pool' proposes designs of a pool: give pool")
        if pool is not None:
            self.mode = pool_mode
            loop.check_mode(self.mode, self.settings)
            self.pool = _check_pool(pool, self.dim, self.dtype)
            self.candidates = np.array(np.triu_indices(len(self.pool), 1), np.int32).T
        theta = np.asarray(loop.initial_theta(self.dim, self.dtype))
        self._states: list[_State] = []  # _states[N]: after N log entries
        self._states.append(self._step(theta, (np.zeros(0), np.zeros(0))))
        self._resume()

    # --- state -------------------------------------------------------------------------------

    @property
    def X(self) -> np.ndarray:
        """The designs of the answered pairs, in the order shown: ``(2 a, dim)`` (skipped pairs
        are not among them: they carry no information)."""
        rows = [x for a, b, r in self.log if r != "skip" for x in (a, b)]
        return np.asarray(rows, np.float64).reshape(-1, self.dim)

    @property
    def pairs(self) -> np.ndarray:
        """The answers as rows of ``X``, winner first: ``(a, 2)``."""
        replies = [r for _, _, r in self.log if r != "skip"]
        rows = [(2 * s, 2 * s + 1) if r == "first" else (2 * s + 1, 2 * s) for s, r in
                enumerate(replies)]  # fmt: skip
        return np.asarray(rows, np.int64).reshape(-1, 2)

    @property
    def theta(self) -> np.ndarray:
        """The hyperparameters ``(log kappa^2, log ell_1..dim)`` of the current posterior."""
        return self._states[-1].theta.copy()

    @property
    def mean(self) -> np.ndarray:
        """The posterior mean of the utility at ``X``: ``(2 a,)``."""
        return self._states[-1].mean.copy()

    def best(self) -> tuple[np.ndarray, float] | None:
        """The shown design of highest posterior mean and that mean (None before any answer)."""
        mean = self._states[-1].mean
        if len(mean) == 0:
            return None
        i = int(np.argmax(mean))
        return self.X[i].copy(), float(mean[i])

    def _step(self, theta, sites) -> _State:
        """The state after the current log: fit (re-learning ``theta`` where due) from the
        previous ``theta`` and ``sites``, and the next proposal."""
        N, d = len(self.log), self.dim
        key = jax.random.fold_in(self.key, N)
        model = N >= self.n_init
        X, pairs = self.X, self.pairs
        a = len(pairs)
        if not model and a == 0:  # nothing to fit yet
            return _State(theta, sites, np.zeros(0), self._random_pair(key))
        m_cap = bucket_size(a, per_octave=1)  # powers of two, at least 32: one program a bucket
        Xp = np.zeros((2 * m_cap, d), self.dtype)
        Xp[: 2 * a] = X
        mask = np.arange(2 * m_cap) < 2 * a
        pp = np.zeros((m_cap, 2), np.int32)
        pp[:a] = pairs
        pair_mask = np.arange(m_cap) < a
        # warm start: the previous sites, and zero ones for the new pair and the padding
        warm = tuple(np.zeros(m_cap, self.dtype) for _ in range(2))
        for w, s in zip(warm, sites, strict=True):
            w[: len(s)] = s
        every = self.settings.learn_every
        learn_now = model and every > 0 and (N - self.n_init) % every == 0
        args = (
            Xp,
            mask,
            pp,
            pair_mask,
            Sites(*warm),
            np.asarray(theta, self.dtype),
            key,
            None if self.pool is None else self.pool.astype(self.dtype),
            self.candidates,
            self._skipped(),
        )
        options = {"settings": self.settings, "learn_now": bool(learn_now), "mode": self.mode}
        if not model:  # an initial random pair: the fit alone, no proposal to compile
            out = loop.fitted(*args[:7], settings=self.settings)
        elif self.time_budget_s is None:
            out = loop.propose(*args, **options)
        else:
            out, steps = loop.propose_within(*args, **options, time_budget_s=self.time_budget_s)
            self.steps_taken.append(steps)
        proposal = np.asarray(out.X, np.float64) if model else self._random_pair(key)
        if model and not np.isfinite(out.value):  # every candidate left was skipped
            proposal = None
        return _State(
            np.asarray(out.theta),
            tuple(np.asarray(s)[:a] for s in out.sites),
            np.asarray(out.mean)[: 2 * a].astype(np.float64),
            proposal,
        )

    def _skipped(self):
        """The skipped pairs, for ``loop.propose``'s ``avoid``: ``(skipped: (s_cap, 2, dim),
        mask: (s_cap,))`` in capacity buckets (powers of two, at least 32: one program a
        bucket), all masked out before any skip, so that the first skip compiles nothing new
        (``avoid=None`` is a second program; masked-out rows change no value). A skip asks for
        something else: no proposal lies near a skipped pair, in either order
        (``loop.SKIP_RADIUS``)."""
        rows = [(a, b) for a, b, r in self.log if r == "skip"]
        cap = bucket_size(len(rows), per_octave=1)
        skipped = np.zeros((cap, 2, self.dim), self.dtype)
        if rows:
            skipped[: len(rows)] = rows
        return skipped, np.arange(cap) < len(rows)

    def _random_pair(self, key) -> np.ndarray:
        return np.asarray(jax.random.uniform(key, (2, self.dim), self.dtype), np.float64)

    # --- the loop ----------------------------------------------------------------------------

    def propose(self) -> np.ndarray | None:
        """The next pair of designs to ask about: ``(2, dim)`` (the same until the log
        changes; never near a skipped pair, in either order), or None when the pool's every
        pair left is a skipped one."""
        proposal = self._states[-1].proposal
        return None if proposal is None else proposal.copy()

    def answer(self, a, b, reply: str) -> None:
        """Record ``reply`` (one of ``ANSWERS``) about designs ``a`` and ``b`` (``(dim,)`` each,
        in the unit cube; usually the last ``propose()``) and update."""
        reply = check_choice(reply, "reply", ANSWERS)
        self._commit((_check_design(a, "a", self.dim), _check_design(b, "b", self.dim), reply))

    def question(self) -> Question | None:
        """The next pair of designs (``propose``), ``a`` and ``b``: ``(dim,)`` each; None when
        nothing is left to ask."""
        proposal = self.propose()
        return None if proposal is None else Question(*proposal)

    def reply(self, question: Question, answer: str) -> None:
        """Record ``answer`` (one of ``ANSWERS``) to a ``question()``."""
        self.answer(question.first, question.second, answer)

    # --- the base's hooks --------------------------------------------------------------------

    def _record(self, entry: tuple[np.ndarray, np.ndarray, str], *, replay: bool = False) -> None:
        a, b, _ = entry
        if np.array_equal(a, b):
            raise ValueError(f"a and b are the same design {a.tolist()}: nothing to compare")
        if np.array_equal(a.astype(self.dtype), b.astype(self.dtype)):
            raise ValueError(f"a = {a.tolist()} and b = {b.tolist()} are the same design in "
                             f"the working precision ({self.dtype.name})")  # fmt: skip
        self.log.append(entry)
        last = self._states[-1]
        try:
            self._states.append(self._step(last.theta, last.sites))
        except BaseException:
            self.log.pop()
            raise

    def _retract(self) -> None:
        self._states.pop()  # the state before: exactly, its proposal included

    def _replayed(self) -> None:
        pass  # each replayed entry took its step: the state is the writer's

    def _row(self, entry: tuple[np.ndarray, np.ndarray, str]) -> dict:
        return {"a": entry[0].tolist(), "b": entry[1].tolist()}

    def _entry(self, row: dict) -> tuple[np.ndarray, np.ndarray, str]:
        a = _check_design(row["a"], "a", self.dim)
        return a, _check_design(row["b"], "b", self.dim), row["answer"]

    def _form(self) -> str:
        return (f"'a': [{self.dim} numbers], 'b': [{self.dim} numbers], 'answer': one of "
                f"{ANSWERS}")  # fmt: skip


def optimize(oracle: Callable[[np.ndarray, np.ndarray], bool | None], dim: int, k: int,
             **options) -> DesignSession:  # fmt: skip
    """Ask ``oracle(a, b)`` (``a``, ``b``: ``(dim,)`` designs; True: ``a`` preferred, False:
    ``b``, None: skip, or one of ``ANSWERS``: ``active.session.oracle_answer``, which refuses
    any other reply, an integer or NaN too, naming the iteration) until ``k`` pairs are
    answered (those of a resumed answer file count), one at a time, proposed by a
    ``DesignSession`` (``options``: its keywords); at most ``MAX_QUESTIONS_PER_ANSWER * k``
    questions in all. A refused reply is not recorded: the answers before it are kept (and
    in the answers file)."""
    check_oracle(oracle)
    k = check_int(k, "k", 0)
    session = DesignSession(dim, **options)
    return answer_by_oracle(session, oracle, k, lambda t, _: f"optimize, iteration {t}",
                            max_questions=MAX_QUESTIONS_PER_ANSWER * k)  # fmt: skip
