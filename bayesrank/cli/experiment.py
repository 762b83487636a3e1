"""``bayesrank experiment NAME``: the project's studies as commands, on the bundled sample by
default (a few minutes on a laptop CPU) or on a collection in ``--data-dir``.

- ``relational``: the relational study of ``bayesrank.experiments.relational`` (Kersting &
  Xu 2009, Sec. 6) with the controls (PGP+I, placebo graphs) and the ranking SVMs;
- ``active``, ``baselines``, ``ep-vs-nuts``, ``inference``, ``label-ranking``, ``labels``,
  ``large``: ``bayesrank.experiments.EXPERIMENTS`` (a module's ``DATA_DIR`` is its
  ``--data-dir`` help, None for no such option; ``FIGURE = False``: it draws no figure).

Each prints its summary table, shows progress on stderr and writes ``results.json``, a table
and (with matplotlib, all but ``large``) a figure to ``--out``.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from ._common import seed, setup_jax

__all__ = ["add_parser"]

DEVICES = ("cpu", "gpu", "tpu")


#: ``--data-dir``'s help where an experiment module says nothing else (its ``DATA_DIR``).
DATA_DIR = "the data (default: the bundled sample)"


def _common(
    parser: argparse.ArgumentParser,
    name: str,
    out: str | None = None,
    data_dir: str | None = DATA_DIR,
    figure: bool = True,
) -> None:
    """The options every experiment shares. ``data_dir``: ``--data-dir``'s help (None: the
    experiment reads no data folder, and has no such option); ``figure``: whether ``--out``
    gets a figure."""
    if data_dir is None:
        parser.set_defaults(data_dir=None)
    else:
        parser.add_argument("--data-dir", type=Path, default=None, help=data_dir)
    what = "results.json, the table and the figure" if figure else "results.json and the table"
    parser.add_argument(
        "--out",
        type=Path,
        default=None,
        help=f"folder for {what} (default: {out or f'./bayesrank-{name}'})",
    )
    parser.add_argument("--seed", type=seed, default=0, help="seed of every random choice")
    parser.add_argument(
        "--device",
        choices=DEVICES,
        default=None,
        help="the JAX platform: cpu, gpu or tpu (default: JAX's choice)",
    )


def _device(args) -> None:
    """``--device``: the platform for this process and the study's child processes."""
    if args.device is None:
        return
    os.environ["JAX_PLATFORMS"] = args.device
    import jax

    jax.config.update("jax_platforms", args.device)


def _relational(args) -> int:
    _device(args)
    setup_jax()
    from ..experiments.relational import StudyConfig, run_all, run_study, table

    collection = args.collection or ("sample" if args.data_dir is None else "dir")
    out = args.out or Path(f"bayesrank-relational-{collection.lower()}")
    config = StudyConfig.from_args(args, collection=collection, out=out)
    if collection == "all":
        if args.data_dir is None:
            raise ValueError("--collection all needs --data-dir (the benchmark data's folder)")
        every = list(run_all(config).values())
        for results in every:
            print(table(results) + f"run time {results['seconds']:.0f} s\n")
        total = sum(r["seconds"] for r in every)
        print(f"the full study: {total:.0f} s")
    else:
        every = [run_study(config)]
        print(table(every[0]) + f"run time {every[0]['seconds']:.0f} s")
    for path in (p for results in every for p in results["files"]):
        print(f"written: {path}", file=sys.stderr)
    return 0


def _other(module):
    def command(args) -> int:
        _device(args)
        setup_jax()
        if args.out is None:
            args.out = Path(f"bayesrank-{module.NAME}")
        module.run(args)
        print(f"written: {args.out}", file=sys.stderr)
        return 0

    return command


def add_parser(sub) -> None:
    from ..experiments import EXPERIMENTS
    from ..experiments.relational import COLLECTIONS
    from ..experiments.relational.config import (
        DEFAULT_KEEP,
        DEFAULT_KNOWN,
        SPLITS,
        THETA,
        held_out_value,
    )

    names = ", ".join(["relational", *EXPERIMENTS])
    experiment = sub.add_parser(
        "experiment",
        help=f"run a study ({names})",
        description=f"The project's studies ({names}), on the bundled sample by default or "
        "on a collection in --data-dir (large needs it; label-ranking reads scikit-learn's "
        "iris and wine); each prints its table and writes results.json, a table and (all but "
        "large) a figure to --out.",
    )
    studies = experiment.add_subparsers(dest="experiment", required=True, metavar="NAME")
    rel = studies.add_parser(
        "relational",
        help="do relations help beyond an entity effect? (Kersting & Xu 2009, Sec. 6)",
        description="The relational study: PGP, PGP+I, XPGP (regularized Laplacian, Silva, "
        "diffusion), placebo graphs, RankSVM and the Laplacian RankSVM; error, AUC, "
        "calibration, the seen/unseen breakdown and significance tests per number of known "
        "pairs. Default: the bundled OHSUMED sample (4 queries, 20 and 40 known pairs, 3 "
        "repetitions).",
    )
    _common(rel, "relational", out="./bayesrank-relational-COLLECTION, e.g. -sample, -dir")
    rel.add_argument(
        "--collection",
        choices=[*sorted(COLLECTIONS), "all"],
        default=None,
        help="sample (the default without --data-dir), dir (a folder in the study format; the "
        "default with --data-dir), or OHSUMED, MovieLens, MQ2008 or all three (--data-dir "
        "holding the benchmark data)",
    )
    rel.add_argument(
        "--queries",
        type=int,
        default=None,
        help="queries chosen at random; 0: all (default: every query folder of dir, 10 of the "
        "others; dir says which it leaves out)",
    )
    defaults = "; ".join(f"{c} {' '.join(map(str, k))}" for c, k in DEFAULT_KNOWN.items())
    rel.add_argument(
        "--known",
        type=int,
        nargs="+",
        default=(),
        help=f"numbers of known pairs (default per collection: {defaults})",
    )
    rel.add_argument("--repeats", type=int, default=0, help="repetitions (sample: 3, else 20)")
    rel.add_argument("--max-movies", type=int, default=100, help="MovieLens: movies per user")
    rel.add_argument("--models", nargs="+", default=None, help="a subset of the models")
    rel.add_argument("--jobs", type=int, default=2, help="child processes at a time (0: none)")
    rel.add_argument(
        "--theta",
        choices=THETA,
        default="shared",
        help="the GPs' hyperparameters: shared (one theta for the queries of a repetition; "
        "the default, the paper's setting) or per-query (one theta per query, e.g. one user "
        "per query)",
    )
    rel.add_argument(
        "--split",
        choices=SPLITS,
        default="pairs",
        help="pairs (the paper's protocol: --known pairs at random, the rest test pairs; the "
        "default) or entities (a share of each query's entities held out, each keeping --keep "
        "of its judgements; the test pairs the rest of theirs; --known: one number, the pairs "
        "among the other entities)",
    )
    rel.add_argument(
        "--keep",
        type=int,
        nargs="+",
        default=DEFAULT_KEEP,
        help=f"--split entities: the judgements each held-out entity keeps, one setting each "
        f"(default {' '.join(map(str, DEFAULT_KEEP))}; 0 is the cold start)",
    )
    rel.add_argument(
        "--held-out",
        type=held_out_value,
        default=0.2,
        help="--split entities: the share (0.2, the default) or number of each query's judged "
        "entities held out",
    )
    rel.set_defaults(func=_relational)
    for name, module in EXPERIMENTS.items():
        parser = studies.add_parser(name, help=module.HELP, description=module.HELP)
        _common(parser, name, data_dir=getattr(module, "DATA_DIR", DATA_DIR),
                figure=getattr(module, "FIGURE", True))  # fmt: skip
        module.add_arguments(parser)
        parser.set_defaults(func=_other(module))
