"""Active preference exploration (Kersting & Xu 2009, Fig. 4) on the full data in
``../shared/data``: the protocol, priors and measures are ``bayesrank.experiments.active``'s
(``bayesrank experiment active --protocol full`` is the same command); this script sets the
full protocol, the data folder and the output folder, and runs ``--collection all`` as the
three collections in turn.

    python experiments/active.py [--collection OHSUMED|MQ2008|MovieLens|all]
        [--data-dir ../shared/data] [--queries 10] [--k 50] [--repeats 20] [--min-pairs 200]
        [--models XPGP GP+entity GP] [--criteria ...] [--engine ep|laplace] [--seed 0]
        [--out DIR]

Writes ``<out>/<collection>/results.json``, ``table.txt`` and, with matplotlib,
``active.png``; default ``<out>``: ``experiments/out/active`` (``--engine laplace``:
``<collection>_laplace``).
"""

from __future__ import annotations

import argparse
from pathlib import Path

import jax

jax.config.update("jax_enable_x64", True)
from bayesrank.experiments import active  # noqa: E402
from bayesrank.runtime import enable_compilation_cache  # noqa: E402

REPO_ROOT = Path(__file__).resolve().parents[1]
ALL = ("OHSUMED", "MQ2008", "MovieLens")


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    p.add_argument("--data-dir", type=Path, default=REPO_ROOT / ".." / "shared" / "data")
    p.add_argument("--out", type=Path, default=None, help="default experiments/out/active")
    p.add_argument("--seed", type=int, default=0, help="seed of every random choice")
    active.add_arguments(p, protocol="full", allow_all=True)
    args = p.parse_args(argv)
    enable_compilation_cache()
    collection = args.collection or active.PRESETS[args.protocol].collection
    out = args.out or REPO_ROOT / "experiments" / "out" / "active"
    total = 0.0
    for c in ALL if collection == "all" else (collection,):
        folder = out / (c.lower() + ("" if args.engine == "ep" else f"_{args.engine}"))
        results = active.run(argparse.Namespace(**{**vars(args), "collection": c, "out": folder}))
        total += results["seconds"]
        print(f"written {folder}\n", flush=True)
    print(f"total {total:.0f} s")


if __name__ == "__main__":
    main()
