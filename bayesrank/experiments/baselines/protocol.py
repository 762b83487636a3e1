"""The study's two protocol presets, its options, their checks, and what data they run on.

``reduced`` (the default) and ``full`` differ only in their defaults (``PRESETS``, of
``BaselinesProtocol``: ``experiments.protocol``'s shape); every option given on the command line
overrides its preset's value.
"""

from __future__ import annotations

import argparse
import dataclasses
import re
from pathlib import Path

import numpy as np

from .._common import check_positive, fold_files
from ..protocol import Protocol, add_protocol_argument, from_args, preset_of
from .methods import METHODS

__all__ = [
    "COLLECTIONS",
    "PRESETS",
    "PROTOCOLS",
    "BaselinesProtocol",
    "add_arguments",
    "plan",
    "settings",
]


@dataclasses.dataclass(frozen=True)
class BaselinesProtocol(Protocol):
    """The settings ``--protocol`` presets: the methods, each method's grid, and the benchmark
    collections (None: the query folds of the sample or ``--data-dir``)."""

    methods: tuple[str, ...] = ("RankSVM", "RankBoost")
    C: tuple[float, ...] = (1.0,)
    rounds: tuple[int, ...] = (300,)
    trees: tuple[int, ...] = (100,)
    hidden: tuple[int, ...] = (10,)
    epochs: tuple[int, ...] = (5,)
    n_docs: tuple[int, ...] = (300,)
    collection: tuple[str, ...] | None = None


#: The presets: the default of every option that is not given.
PRESETS = {
    "reduced": BaselinesProtocol(),
    "full": BaselinesProtocol(
        methods=METHODS,
        C=(1e-7, 1e-6, 1e-5, 1e-4, 1e-3, 1e-2, 1e-1),
        rounds=(10, 25, 50, 100, 200, 300, 500),
        trees=(25, 50, 100, 200),
        hidden=(10, 20),
        epochs=(1, 5, 20),
        n_docs=(1500,),
        collection=("OHSUMED", "MQ2008"),
    ),
}
#: The old name of ``PRESETS``.
PROTOCOLS = PRESETS

#: The benchmark collections, by their folder under ``--data-dir``: LETOR 3.0 OHSUMED
#: (QueryLevelNorm) and LETOR 4.0 MQ2008, five folds each.
COLLECTIONS = {"OHSUMED": Path("OHSUMED/QueryLevelNorm"), "MQ2008": Path("MQ2008")}


def _grid(preset: str, name: str) -> str:
    return " ".join(f"{v:g}" for v in getattr(PRESETS[preset], name))


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The study's options (the common ``--data-dir``, ``--out``, ``--seed`` are the CLI's)."""
    add_protocol_argument(
        parser,
        PRESETS,
        help="the defaults of the options below: reduced (default: RankSVM and RankBoost at "
        "one value each) or full (the LETOR protocol: every method, grids chosen on vali, the "
        "5 folds of OHSUMED and MQ2008 under --data-dir)",
    )
    parser.add_argument(
        "--methods",
        nargs="+",
        choices=METHODS,
        default=None,
        help=f"of {', '.join(METHODS)}; reduced: RankSVM RankBoost; full: all nine (XGBoost "
        "and LightGBM where their packages import, else skipped; named here, a missing one is "
        "an error)",
    )
    for name, flag, what in (
        ("C", "--C", "RankSVM's C (both losses)"),
        ("rounds", "--rounds", "RankBoost's rounds T (both variants; prefixes of one run)"),
        ("trees", "--trees", "XGBoost's and LightGBM's numbers of trees"),
        ("hidden", "--hidden", "SortNet's hidden unit pairs"),
        ("epochs", "--epochs", "PRank's epochs (averaged PRank)"),
        ("n_docs", "--n-docs", "XPGP's training documents (a random subset)"),
    ):
        parser.add_argument(
            flag,
            nargs="+",
            type=float if name == "C" else int,
            default=None,
            help=f"{what}, one or more: the best on vali by MAP where there is a vali, else "
            f"each reported (reduced: {_grid('reduced', name)}; full: {_grid('full', name)})",
        )
    parser.add_argument(
        "--n-thresholds", type=int, default=10, help="RankBoost's thresholds per feature (10)"
    )
    parser.add_argument(
        "--collection",
        nargs="+",
        choices=tuple(COLLECTIONS),
        default=None,
        help="benchmark collections under --data-dir (OHSUMED/QueryLevelNorm/Fold*, "
        "MQ2008/Fold*), each fold trained, chosen on vali, scored on test, then averaged "
        "(full: both, where --data-dir is neither a fold folder nor a collection folder)",
    )
    parser.add_argument(
        "--letor-folds",
        nargs="+",
        type=int,
        default=None,
        help="which FoldN of a collection (default: every one there)",
    )
    parser.add_argument(
        "--folds",
        type=int,
        default=5,
        help="query folds on the sample or a file (default 5; at most the number of queries)",
    )
    parser.add_argument("--max-k", type=int, default=10, help="largest cut-off (default 10)")


def settings(args) -> dict:
    """The run's settings: the preset's values where an option is not given, each checked
    (``ValueError`` naming the option)."""
    protocol, _ = preset_of(args, PRESETS)
    p = from_args(args, PRESETS)
    explicit = args.methods is not None
    methods = list(dict.fromkeys(p.methods))
    for m in methods:
        if m not in METHODS:
            raise ValueError(f"--methods: {m!r} is not one of {', '.join(METHODS)}")
    if not methods:
        raise ValueError("--methods: name at least one method")
    C = [float(c) for c in p.C]
    if not C or not all(np.isfinite(c) and c > 0 for c in C):
        raise ValueError(f"--C must be one or more positive finite numbers, got {args.C!r}")
    rounds = [check_positive(t, "--rounds") for t in p.rounds]
    trees = [check_positive(t, "--trees") for t in p.trees]
    hidden = [check_positive(h, "--hidden") for h in p.hidden]
    epochs = [check_positive(e, "--epochs") for e in p.epochs]
    n_docs = [check_positive(e, "--n-docs", low=2) for e in p.n_docs]
    if not rounds or not trees or not hidden or not epochs or not n_docs:
        raise ValueError(
            "--rounds, --trees, --hidden, --epochs and --n-docs: give at least one number each"
        )
    folds = args.letor_folds
    if folds is not None:
        folds = list(dict.fromkeys(check_positive(f, "--letor-folds") for f in folds))
    return {
        "protocol": protocol,
        "methods": methods,
        "methods_explicit": explicit,
        "C": list(dict.fromkeys(C)),
        "rounds": list(dict.fromkeys(rounds)),
        "trees": list(dict.fromkeys(trees)),
        "hidden": list(dict.fromkeys(hidden)),
        "epochs": list(dict.fromkeys(epochs)),
        "n_docs": list(dict.fromkeys(n_docs)),
        "n_thresholds": check_positive(args.n_thresholds, "--n-thresholds"),
        "collection": args.collection,  # None: the preset's, which ``plan`` resolves
        "letor_folds": folds,
        "folds": check_positive(args.folds, "--folds", low=2),
        "max_k": check_positive(args.max_k, "--max-k"),
        "seed": int(args.seed),
    }


def _fold_number(path: Path) -> int | None:
    match = re.fullmatch(r"Fold(\d+)", path.name)
    return int(match.group(1)) if match and path.is_dir() else None


def _collection_folds(name: str, folder: Path, wanted) -> list[tuple[str, str, Path]]:
    """``[(collection, FoldN, folder)]`` of a folder holding ``Fold1``, ``Fold2``, ...:
    ``wanted`` (numbers) or every one there."""
    found = {n: p for p in folder.iterdir() if (n := _fold_number(p)) is not None}
    numbers = sorted(found) if wanted is None else wanted
    missing = [n for n in numbers if n not in found]
    if missing:
        raise ValueError(
            f"--letor-folds: {str(folder)!r} has no Fold{missing[0]} "
            f"(it has {', '.join(f'Fold{n}' for n in sorted(found)) or 'none'})"
        )
    for n in numbers:
        fold_files(found[n])  # a fold without train or test fails now, not after the others
    return [(name, f"Fold{n}", found[n]) for n in numbers]


def plan(data_dir, opt: dict) -> tuple[str, list]:
    """``(mode, units)``: ``"query folds"`` with ``[(None, None, data_dir)]`` (the sample, a
    file, or a folder of LETOR files), or ``"train/test"`` with ``[(collection, fold,
    fold folder)]`` (a fold folder; a collection folder of ``FoldN`` folders; ``--collection``
    names under ``--data-dir``)."""
    names = opt["collection"]
    if names is None and opt["protocol"] == "full":
        names = PRESETS["full"].collection
        if data_dir is None:
            raise ValueError(
                "--protocol full needs --data-dir: the folder that holds OHSUMED/ and MQ2008/ "
                "(e.g. ../shared/data), a collection's folder of Fold1..Fold5, or a fold folder"
            )
    path = None if data_dir is None else Path(data_dir)
    if path is not None and not path.exists():
        raise ValueError(f"--data-dir {str(path)!r} does not exist (a LETOR file or a folder)")
    if path is not None and path.is_dir():
        if fold_files(path, required=()):  # train, vali or test here: one fold
            return "train/test", [(path.name, None, path)]
        if any(_fold_number(p) is not None for p in path.iterdir()):
            return "train/test", _collection_folds(path.name, path, opt["letor_folds"])
    if opt["collection"] is None and (opt["protocol"] == "reduced" or path is None):
        return "query folds", [(None, None, data_dir)]
    option = "--collection" if opt["collection"] else "--protocol full"
    if path is None or not path.is_dir():
        raise ValueError(
            f"{option} needs --data-dir, the folder that holds {' and '.join(names)}; "
            f"got {data_dir!r}"
        )
    units = []
    for name in names:
        folder = path / COLLECTIONS[name]
        if not folder.is_dir():
            raise ValueError(
                f"{option}: collection {name}: --data-dir {str(path)!r} has no {COLLECTIONS[name]}/"
            )
        units += _collection_folds(name, folder, opt["letor_folds"])
    return "train/test", units
