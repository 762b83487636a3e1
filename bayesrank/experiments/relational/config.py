"""The settings of one run of the relational study, with their defaults per collection."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from ...data.checks import check_choice, check_int
from ...data.study import DEFAULT_KEEP, check_held_out, check_keep
from .._common import held_out_value
from ..protocol import Protocol, given

__all__ = ["DEFAULT_KEEP", "DEFAULT_KNOWN", "SPLITS", "THETA", "StudyConfig", "held_out_value"]

#: How the GP models' hyperparameters are fitted: one ``theta`` shared by the queries of a
#: repetition (the paper's setting), or one per query (users of a recommender, one query each).
THETA = ("shared", "per-query")

#: How the study splits a query's judgements: ``pairs``, the paper's protocol (``k`` known pairs
#: at random, every other pair a test pair), or ``entities`` (``data.study.split_entities``: a
#: share of the entities held out, each keeping ``j`` judgements, for each ``j`` of ``keep``).
SPLITS = ("pairs", "entities")

#: Numbers of known pairs per collection (the paper's 100, 150, 200 on OHSUMED; scaled to the
#: sizes of the others' queries).
DEFAULT_KNOWN = {
    "OHSUMED": (100, 150, 200),
    "MovieLens": (50, 100, 200),
    "MQ2008": (20, 40, 60),
    "dir": (25, 50, 100),
    "sample": (20, 40),
}


@dataclasses.dataclass(frozen=True)
class StudyConfig(Protocol):
    """One run: ``collection`` (see ``collections``), read from ``data_dir``; ``queries``
    chosen (seeded by ``seed``; default every query folder of ``dir``, 10 of the others); for
    each ``k`` in ``known``, ``repeats`` random splits;
    ``models`` (``None``: every model of ``bayesrank.experiments.relational.models.model_names``);
    ``jobs`` child processes at a time (0: everything in this process); results to ``out``;
    ``theta``: the GPs' hyperparameters shared by the queries or one per query (``THETA``).

    ``split="entities"`` (``SPLITS``) holds out ``held_out`` of each query's judged entities
    (a share, or a count), each keeping ``j`` of its judgements for each ``j`` of ``keep``; the
    pairs among the other entities number ``known`` (one value; default the collection's
    largest). Its settings are the ``keep`` values, where the pair split's are ``known``'s."""

    collection: str = "sample"
    data_dir: Path | None = None
    queries: int | None = None  # None: every query folder of "dir", 10 of the others
    known: tuple[int, ...] = ()
    repeats: int = 0
    max_movies: int = 100
    models: tuple[str, ...] | None = None
    seed: int = 0
    jobs: int = 2
    out: Path | None = None
    theta: str = "shared"  # the GPs' hyperparameters: one for all queries, or "per-query"
    split: str = "pairs"
    keep: tuple[int, ...] = DEFAULT_KEEP
    held_out: float = 0.2

    @classmethod
    def from_args(cls, args, **overrides) -> StudyConfig:
        """The config of parsed command-line ``args`` (an ``argparse.Namespace`` with any of
        the fields, None: the default; ``--queries 0`` means all, lists become tuples),
        ``overrides`` last: the one translation the command line, the study's child processes
        and the experiment script share (``experiments.protocol.given``; the study has no
        ``--protocol``: its defaults depend on the collection, ``__post_init__``)."""
        values = {**given(args, cls), **overrides}
        if values.get("queries") == 0:
            values["queries"] = None
        for name in ("known", "models", "keep"):
            if values.get(name) is not None:
                values[name] = tuple(values[name])
        return cls(**values)

    @property
    def settings(self) -> tuple[int, ...]:
        """The study's settings: numbers of known pairs, or of kept judgements (entity split)."""
        return self.keep if self.split == "entities" else self.known

    @property
    def setting_letter(self) -> str:
        """``k`` (known pairs) or ``j`` (judgements a held-out entity keeps)."""
        return "j" if self.split == "entities" else "k"

    def __post_init__(self):
        check_choice(self.split, "split", SPLITS)
        known = tuple(self.known) or DEFAULT_KNOWN.get(self.collection, ())
        if self.split == "entities" and not self.known and known:
            known = (max(known),)
        object.__setattr__(self, "known", tuple(int(k) for k in known))
        if self.split == "entities":
            if len(self.known) != 1:
                raise ValueError(
                    f"split='entities' takes one known (the pairs among the entities not held "
                    f"out), got {list(self.known)}"
                )
            object.__setattr__(self, "keep", check_keep(self.keep))
            check_held_out(self.held_out)
        if not self.repeats:
            object.__setattr__(self, "repeats", 3 if self.collection == "sample" else 20)
        for k in self.known:
            check_int(k, "known", low=1)
        if self.queries is None and self.collection != "dir":
            object.__setattr__(self, "queries", 10)
        check_int(self.queries, "queries", low=1, allow_none=True)
        check_int(self.repeats, "repeats", low=1)
        check_int(self.max_movies, "max_movies", low=2)
        check_int(self.jobs, "jobs", low=0)
        check_choice(self.theta, "theta", THETA)
        if self.data_dir is not None:
            object.__setattr__(self, "data_dir", Path(self.data_dir))
        if self.out is not None:
            object.__setattr__(self, "out", Path(self.out))
        if self.models is not None:
            object.__setattr__(self, "models", tuple(self.models))
