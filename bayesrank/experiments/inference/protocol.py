"""The inference study's protocol: one configuration, two presets (``reduced``, the command's
default on the bundled sample; ``full``, the 32 real problems of ``docs/results/inference.md``),
any setting overridable; the checks that name the option; and the problems it runs on."""

from __future__ import annotations

import dataclasses

from .._common import check_positive
from ..protocol import Protocol as _Base
from ..protocol import from_args as _preset_with_options
from ..protocol import preset_of

__all__ = ["PRESETS", "PROBLEMS", "THETA", "InferenceProtocol", "Protocol"]

#: Where the problems come from (``problems`` module docstring).
PROBLEMS = ("queries", "accuracy", "hetrec21", "all")
THETA = ("shared", "per-query")


@dataclasses.dataclass(frozen=True)
class InferenceProtocol(_Base):
    """One run's settings (the package docstring says what each means); ``settings()`` is the
    results' copy."""

    problems: str = "queries"
    queries: int | None = 5  # at most this many problems; None: all
    known: int | None = 50  # known pairs per query (``queries`` only)
    test: int = 1000  # held-out pairs per problem, at most
    methods: tuple[str, ...] = ("bayesrank", "bayesrank-laplace")
    theta: str = "shared"
    nuts: bool = False
    warmup: int = 500
    samples: int = 500
    chains: int = 2
    seed: int = 0


#: The two presets (``experiments.protocol``); an option given overrides its value.
PRESETS = {
    "reduced": InferenceProtocol(),
    "full": InferenceProtocol(
        problems="accuracy",
        queries=None,
        known=None,
        methods=(
            "bayesrank",
            "bayesrank-laplace",
            "bayesrank-em",
            "bayesrank-no-entity",
            "bayesrank-plain",
            "bayesrank-ard",
            "bayesrank-ard-botorch",
        ),
        theta="per-query",
        nuts=True,
        warmup=1000,
        samples=2000,
        chains=4,
    ),
}


def from_args(args, peers=()) -> InferenceProtocol:
    """The preset ``args.protocol`` with every option of ``args`` that is not None; checked,
    ``ValueError`` naming the option. ``peers``: the names of the peer methods a front end
    offers (allowed in ``--methods`` besides bayesrank's)."""
    from .methods import METHODS

    _, base = preset_of(args, PRESETS)
    p = _preset_with_options(args, PRESETS, seed=int(getattr(args, "seed", 0) or 0))
    known_given = getattr(args, "known", None) is not None
    if p.problems != "queries":
        if known_given:
            raise ValueError(
                "--known is for --problems queries (the accuracy problems fix their known pairs "
                "per collection: OHSUMED 150, MQ2008 60, HetRec 300; hetrec21 150)"
            )
        p = dataclasses.replace(p, known=None)
    elif base.known is None and not known_given:
        p = dataclasses.replace(p, known=PRESETS["reduced"].known)
    if p.problems not in PROBLEMS:
        raise ValueError(f"--problems must be one of {', '.join(PROBLEMS)}, got {p.problems!r}")
    if p.theta not in THETA:
        raise ValueError(f"--theta must be one of {', '.join(THETA)}, got {p.theta!r}")
    methods = tuple(dict.fromkeys(p.methods))  # in the order given, once each
    unknown = [m for m in methods if m not in METHODS and m not in peers]
    if unknown:
        raise ValueError(
            f"--methods: unknown {', '.join(unknown)}; give some of {', '.join([*METHODS, *peers])}"
        )
    if not methods and not p.nuts:
        raise ValueError("--methods: give at least one method (or --nuts for part 1 alone)")
    for name, low in (("test", 1), ("warmup", 0), ("samples", 4), ("chains", 1)):
        check_positive(getattr(p, name), f"--{name}", low=low)
    if p.queries is not None:
        check_positive(p.queries, "--queries")
    if p.known is not None:
        check_positive(p.known, "--known")
    return dataclasses.replace(p, methods=methods)


def load_problems(p: InferenceProtocol, data_dir) -> tuple[list[dict], str]:
    """The problems of ``p`` and where they came from: the queries of ``data_dir`` (a LETOR file
    or folder; None: the bundled sample), or the accuracy and HetRec21 sets of the benchmark data
    folder ``data_dir``; the first ``p.queries`` of them."""
    from .._common import load_queries
    from . import problems

    if p.problems == "queries":
        queries, source = load_queries(data_dir)
        return problems.query_problems(queries, source, p.queries, p.known, p.test, p.seed), source
    if data_dir is None:
        raise ValueError(
            f"--problems {p.problems} needs --data-dir (the folder that holds OHSUMED/, MQ2008/ "
            "and hetrec2011-movielens-2k/)"
        )
    out = []
    if p.problems in ("accuracy", "all"):
        out += problems.accuracy_problems(data_dir, p.seed, max_held_out=p.test)
    if p.problems in ("hetrec21", "all"):
        out += problems.hetrec_genre_problems(data_dir, p.seed, max_held_out=p.test)
    return out[: p.queries], f"{p.problems} problems of {data_dir}"


#: The old name (the base is ``experiments.protocol.Protocol``).
Protocol = InferenceProtocol
