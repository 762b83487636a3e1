"""Ties or grades against pairs alone at equal labelling cost: the full protocol of
``bayesrank.experiments.labels`` (the same code as ``bayesrank experiment labels --protocol
full``) on the data in ``../shared/data``. This script sets the data folder, the output folder
and the full protocol, pins the run to one CPU and writes the Markdown table of
``docs/results/labels.md``.

    python experiments/labels.py [--data-dir ../shared/data] [--out experiments/out/labels]
        [--all-cpus] [--protocol full|reduced] [--collection OHSUMED|MQ2008|MovieLens|sample]
        [--queries 30] [--budget 25 50 100] [--repeats 2] [--seed 0]

Writes ``<out>/results.json``, ``table.txt`` and ``table.md``. With ``--figure PATH --from
DIR [DIR ...]`` it runs nothing and draws the pair error of the runs in those folders (their
``results.json``; runs of one collection joined by budget) to ``PATH``: the figure of
``docs/results/labels.md``.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import jax

jax.config.update("jax_enable_x64", True)
from bayesrank.experiments import labels  # noqa: E402
from bayesrank.runtime import enable_compilation_cache, pin_to_one_cpu  # noqa: E402

REPO_ROOT = Path(__file__).resolve().parents[1]


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--data-dir", type=Path, default=REPO_ROOT / ".." / "shared" / "data")
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--all-cpus", action="store_true", help="do not pin to one CPU")
    parser.add_argument("--figure", type=Path, default=None, help="draw the runs of --from")
    parser.add_argument("--from", dest="runs", type=Path, nargs="+", default=[])
    labels.add_arguments(parser)
    parser.set_defaults(protocol="full")
    args = parser.parse_args(argv)
    if args.figure is not None:
        if not args.runs:
            parser.error("--figure needs --from DIR [DIR ...]: the folders of earlier runs")
        from bayesrank.experiments.labels.report import plot

        runs = [json.loads((folder / "results.json").read_text()) for folder in args.runs]
        print(f"written: {plot(runs, args.figure)}")
        return
    if not args.all_cpus:
        pin_to_one_cpu()  # before the first computation
    enable_compilation_cache()
    args.data_dir = args.data_dir.resolve()
    if args.out is None:
        collection = args.collection or labels_collection(args.protocol)
        args.out = REPO_ROOT / "experiments/out/labels" / collection
    results = labels.run(args)
    (args.out / "table.md").write_text(labels.markdown(results) + "\n")
    print(f"\n{labels.markdown(results)}\n\nwritten: {args.out}")


def labels_collection(protocol: str) -> str:
    from bayesrank.experiments.labels.protocol import PRESETS

    return PRESETS[protocol].collection


if __name__ == "__main__":
    main()
