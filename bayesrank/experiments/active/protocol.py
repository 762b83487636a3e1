"""The protocol of ``bayesrank experiment active``: its options and their two presets, the
queries (a LETOR file or one of the relational study's collections), the split of a query's
pairs into test pairs and candidates, and the fixed priors compared.

Host-side only; nothing here compiles.
"""

from __future__ import annotations

import argparse
import dataclasses
from typing import NamedTuple

import numpy as np

from ...inference.engines import names
from .._common import (
    check_fraction,
    check_positive,
    load_queries,
    median_rho,
    rbf_entity_prior,
    rng_for,
)
from ..protocol import Protocol, add_protocol_argument, from_args, preset_of

__all__ = [
    "COLLECTIONS",
    "CRITERIA",
    "ENGINES",
    "MODELS",
    "PRESETS",
    "PROTOCOLS",
    "RELATIONS",
    "ActiveProtocol",
    "ActiveQuery",
    "add_arguments",
    "check",
    "covariance",
    "load",
    "split_query",
]

CRITERIA = ("variance_ratio", "mutual_information", "random")
ENGINES = names(gaussian=True)
#: The fixed priors: XPGP (RBF + a regularized Laplacian per relation + entity effect),
#: GP+entity (RBF + entity effect), GP (RBF alone, 1e-6 jitter).
MODELS = ("XPGP", "GP+entity", "GP")
#: ``letor``: the LETOR queries of ``--data-dir`` (the bundled sample without it), no relation;
#: the others: ``bayesrank.experiments.relational.collections.load_collection``'s.
COLLECTIONS = ("letor", "sample", "OHSUMED", "MQ2008", "MovieLens")
#: The relations XPGP uses per collection (MQ2008 ships none; its study graph is built from
#: the attributes themselves, so it is no relation here).
RELATIONS = {
    "sample": ("keyword",),
    "OHSUMED": ("keyword",),
    "MovieLens": ("co_director", "co_genre"),
}


@dataclasses.dataclass(frozen=True)
class ActiveProtocol(Protocol):
    """The settings ``--protocol`` presets (``add_arguments`` says what each means); ``models``
    None: every model the collection supports (XPGP only with relations)."""

    collection: str = "letor"
    queries: int = 5
    k: int = 10
    repeats: int = 5
    min_pairs: int = 20
    models: tuple[str, ...] | None = ("GP+entity",)


#: The presets of ``--protocol`` (``experiments.protocol``); an option given on the command
#: line overrides its value.
PRESETS = {
    "reduced": ActiveProtocol(),
    "full": ActiveProtocol(
        collection="OHSUMED", queries=10, k=50, repeats=20, min_pairs=200, models=None
    ),
}
#: The old name of ``PRESETS``.
PROTOCOLS = PRESETS


class ActiveQuery(NamedTuple):
    """One query: ``X: (n, d)``, ``grades: (n,)``, ``relations``: name -> ``W: (n, n)``."""

    qid: str
    X: np.ndarray
    grades: np.ndarray
    relations: dict


def add_arguments(
    parser: argparse.ArgumentParser, *, protocol: str = "reduced", allow_all: bool = False
) -> None:
    """The protocol's options (the common ``--data-dir``, ``--out``, ``--seed`` are the
    CLI's). ``protocol``: the preset by default; ``allow_all``: ``--collection all`` (for a
    front end that runs the three collections in turn)."""
    full = PRESETS["full"]
    add_protocol_argument(
        parser,
        PRESETS,
        default=protocol,
        help="the defaults of the options below: reduced (the bundled sample in seconds) or "
        f"full (Kersting & Xu's Fig. 4 on a collection of --data-dir; default {protocol})",
    )
    parser.add_argument(
        "--collection",
        choices=COLLECTIONS + (("all",) if allow_all else ()),
        default=None,
        help="letor: the LETOR file or folder of --data-dir (the bundled sample without it), "
        "no relation; sample: the bundled sample with its keyword graph; OHSUMED, MQ2008, "
        "MovieLens: --data-dir is the benchmark data's folder"
        + ("; all: those three in turn" if allow_all else "")
        + f" (default: reduced letor, full {full.collection})",
    )
    parser.add_argument("--k", type=int, default=None, help="answers per query (10; full 50)")
    parser.add_argument(
        "--repeats", type=int, default=None, help="runs of the random criterion (5; full 20)"
    )
    parser.add_argument(
        "--queries", type=int, default=None, help="at most this many queries (5; full 10)"
    )
    parser.add_argument(
        "--min-pairs",
        type=int,
        default=None,
        help="a query needs this many labelled pairs (20; full 200)",
    )
    parser.add_argument(
        "--test-fraction",
        type=float,
        default=0.5,
        help="share of each query's pairs held out as test pairs, never asked (default 0.5)",
    )
    parser.add_argument(
        "--models",
        nargs="+",
        choices=MODELS,
        default=None,
        help="the priors (GP+entity; full: all three, XPGP where the collection has relations)",
    )
    parser.add_argument(
        "--criteria",
        nargs="+",
        choices=CRITERIA,
        default=list(CRITERIA),
        help=f"which criteria, of {', '.join(CRITERIA)} (default all three)",
    )
    parser.add_argument(
        "--engine",
        choices=ENGINES,
        default="ep",
        help=f"the posterior update after each answer, of {', '.join(ENGINES)} (default ep)",
    )
    parser.add_argument(
        "--max-movies", type=int, default=100, help="MovieLens: movies per user (default 100)"
    )


def check(args) -> dict:
    """The options with the preset's values filled in, checked (``ValueError`` naming the
    option)."""
    protocol, _ = preset_of(args, PRESETS)
    p = from_args(args, PRESETS)
    collection = p.collection
    if collection not in COLLECTIONS:
        raise ValueError(
            f"--collection must be one of {', '.join(COLLECTIONS)}, got {collection!r}"
        )
    criteria = list(dict.fromkeys(args.criteria))
    for c in criteria:
        if c not in CRITERIA:
            raise ValueError(f"--criteria: {c!r} is not one of {', '.join(CRITERIA)}")
    if not criteria:
        raise ValueError("--criteria: name at least one criterion")
    if args.engine not in ENGINES:
        raise ValueError(f"--engine must be one of {', '.join(ENGINES)}, got {args.engine!r}")
    has = collection in RELATIONS
    models = p.models
    models = list(dict.fromkeys(models)) if models else [m for m in MODELS if has or m != "XPGP"]
    for m in models:
        if m not in MODELS:
            raise ValueError(f"--models: {m!r} is not one of {', '.join(MODELS)}")
    if "XPGP" in models and not has:
        raise ValueError(
            f"--models XPGP needs relations, which --collection {collection} does not have "
            f"(those with relations: {', '.join(RELATIONS)})"
        )
    return {
        "protocol": protocol,
        "collection": collection,
        "k": check_positive(p.k, "--k"),
        "repeats": check_positive(p.repeats, "--repeats"),
        "queries": check_positive(p.queries, "--queries"),
        "min_pairs": check_positive(p.min_pairs, "--min-pairs", low=2),
        "test_fraction": check_fraction(args.test_fraction, "--test-fraction"),
        "models": models,
        "criteria": criteria,
        "engine": args.engine,
        "max_movies": check_positive(getattr(args, "max_movies", 100), "--max-movies", low=2),
        "seed": int(args.seed),
    }


def load(opt: dict, data_dir) -> tuple[list[ActiveQuery], str]:
    """The queries with at least ``min_pairs`` labelled pairs, and where they came from.

    ``letor``: the first ``queries`` in file order (``_common.load_queries``); a collection:
    ``queries`` of them chosen at random (seeded), as the relational study chooses them
    (``load_collection``, whose eligibility counts ``2 * known`` pairs: ``known`` is
    ``ceil(min_pairs / 2)``, and an odd ``min_pairs`` needs one pair more).
    """
    from ...data.pairs import pairs_from_grades

    if opt["collection"] == "letor":
        queries, source = load_queries(data_dir)
        usable = [
            ActiveQuery(q.qid, q.X, q.grades, {})
            for q in queries
            if len(pairs_from_grades(q.grades)) >= opt["min_pairs"]
        ][: opt["queries"]]
    else:
        from ..relational.collections import load_collection
        from ..relational.config import StudyConfig

        if opt["collection"] != "sample" and data_dir is None:
            raise ValueError(
                f"--collection {opt['collection']} needs --data-dir (the benchmark data's folder)"
            )
        config = StudyConfig(
            collection=opt["collection"],
            data_dir=data_dir,
            queries=opt["queries"],
            known=(-(-opt["min_pairs"] // 2),),
            max_movies=opt["max_movies"],
            seed=opt["seed"],
        )
        try:
            found = load_collection(config)
        except ValueError as err:
            raise ValueError(f"--collection {opt['collection']}: {err}") from None
        keep = RELATIONS.get(opt["collection"], ())
        usable = [
            ActiveQuery(q.qid, q.X, np.asarray(q.grades), {r: q.relations[r] for r in keep})
            for q in found
            if len(q.pairs) >= opt["min_pairs"]
        ]
        source = opt["collection"] + ("" if data_dir is None else f" in {data_dir}")
    if not usable:
        raise ValueError(
            f"no query of {source} has --min-pairs {opt['min_pairs']} labelled pairs or more"
        )
    return usable, source


def split_query(grades, b: int, seed: int, test_fraction: float):
    """One query's test pairs and candidates.

    Args:
        grades: ``(n,)`` relevance grades; b: the query's index (seeds its split).

    Returns:
        ``test: (t, 2)`` (winner first), ``candidates: (c, 2)`` (random orientation),
        ``outcome: (c,)`` bool (True where the candidate's first document wins); ``t + c`` is the
        number of labelled pairs, ``t = round(test_fraction * (t + c))`` within ``[1, t + c - 1]``.
    """
    from ...data.pairs import pairs_from_grades

    truth = pairs_from_grades(grades)
    m = len(truth)
    rng = rng_for(seed, b)
    perm = rng.permutation(m)
    n_test = min(max(round(test_fraction * m), 1), m - 1)
    test = truth[np.sort(perm[:n_test])]
    asked = truth[np.sort(perm[n_test:])]
    flip = rng.uniform(size=len(asked)) < 0.5
    return test, np.where(flip[:, None], asked[:, ::-1], asked), ~flip


def covariance(model: str, q: ActiveQuery) -> tuple[np.ndarray, float]:
    """``(K: (n, n), rho)``: the fixed prior's covariance of query ``q`` under ``model``: an RBF
    with ``kappa = 1`` and ``rho`` by the median heuristic, unit weights, ``2 sigma^2 = 1``;
    XPGP adds a regularized Laplacian of each relation, XPGP and GP+entity an independent
    per-document effect of scale 0.1, GP a 1e-6 jitter (its prior is near singular)."""
    from ...kernels import RBF, XPGP, Independent, RegularizedLaplacian

    rho = median_rho(q.X)
    rbf = RBF(1.0, rho)
    if model == "XPGP":
        W = list(q.relations.values())
        prior = XPGP(rbf, tuple(RegularizedLaplacian() for _ in W), entity=Independent(0.1))
        return np.asarray(prior.covariance(q.X, prior.prepare(W))), rho
    if model == "GP+entity":
        return np.asarray(rbf_entity_prior(q.X).covariance(q.X)), rho
    return np.asarray(XPGP(rbf, ()).covariance(q.X)) + 1e-6 * np.eye(len(q.X)), rho
