"""The paper's relational study (Kersting & Xu 2009, Sec. 6, Fig. 2), with the controls it lacks,
on the full data in ``../shared/data``: the protocol, models and measures are
``bayesrank.experiments.relational``'s (``bayesrank experiment relational`` is the same
command; this script
only sets the data folder and the output folder).

    python experiments/relational.py --collection OHSUMED|MovieLens|MQ2008|all|dir|sample
        [--data-dir DIR] [--queries 10] [--known 100 150 200] [--repeats 20] [--models ...]
        [--max-movies 100] [--seed 0] [--jobs 2] [--out DIR]

Writes ``<out>/results.json`` (every query-repetition's numbers), ``<out>/table.txt``,
``<out>/table.md`` and, with matplotlib, ``<out>/curves.png``; default ``<out>``:
``experiments/out/relational_<collection>``.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import jax

jax.config.update("jax_enable_x64", True)
from bayesrank.experiments.relational import COLLECTIONS, StudyConfig, run_all, run_study, table  # noqa: E402
from bayesrank.experiments.relational.config import THETA  # noqa: E402
from bayesrank.runtime import enable_compilation_cache  # noqa: E402

REPO_ROOT = Path(__file__).resolve().parents[1]


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    p.add_argument("--collection", default="OHSUMED", choices=[*COLLECTIONS, "all"])
    p.add_argument("--data-dir", type=Path, default=REPO_ROOT / ".." / "shared" / "data")
    p.add_argument("--queries", type=int, default=None, help="default: all of dir, 10 else")
    p.add_argument("--known", type=int, nargs="+", default=())
    p.add_argument("--repeats", type=int, default=0, help="default 20 (sample: 3)")
    p.add_argument("--max-movies", type=int, default=100)
    p.add_argument("--models", nargs="+", default=None)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--jobs", type=int, default=2, help="child processes at a time (0: none)")
    p.add_argument("--out", type=Path, default=None)
    p.add_argument("--theta", choices=THETA, default="shared", help="or one theta per query")
    args = p.parse_args(argv)
    enable_compilation_cache()
    out = args.out or REPO_ROOT / "experiments/out" / f"relational_{args.collection.lower()}"
    config = StudyConfig.from_args(args, out=out)
    every = run_all(config) if args.collection == "all" else {args.collection: run_study(config)}
    for results in every.values():
        print(table(results) + f"run time {results['seconds']:.0f} s\n")
    print(f"total {sum(r['seconds'] for r in every.values()):.0f} s; written {out}")


if __name__ == "__main__":
    main()
