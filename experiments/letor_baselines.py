"""The LETOR baseline protocol for bayesrank's RankSVM and RankBoost (and XGBoost and LightGBM)
on the full data in ``../shared/data``: the study is ``bayesrank.experiments.baselines``'s
(``bayesrank experiment baselines --protocol full --data-dir ../shared/data`` is the same
command); this script only sets the full protocol, the data folder and the output folder.

For every fold of OHSUMED (LETOR 3.0, QueryLevelNorm) and MQ2008 (LETOR 4.0): train on
``train``, choose ``C`` / ``T`` / the number of trees on ``vali`` by MAP, report MAP,
NDCG@1..10 and P@1..10 on ``test``, then the mean over the folds, beside the published LETOR
3.0 figures. XGBoost and LightGBM need the ``bench`` extra; without it they are skipped, saying
so (naming them in ``--methods`` makes a missing one an error).

    python experiments/letor_baselines.py [--data-dir ../shared/data]
        [--collection OHSUMED MQ2008] [--letor-folds 1 2 3 4 5] [--methods ...]
        [--C 1e-7 ... 1e-1] [--rounds 10 25 50 100 200 300 500] [--trees 25 50 100 200]
        [--n-thresholds 10] [--out experiments/out/letor_baselines]

Writes ``<out>/results.json`` (per fold: the chosen value, the vali MAP of every candidate, the
test metrics and scores, fit times; versions), ``<out>/table.txt``, ``<out>/table.md`` (the
Markdown tables of ``docs/results/baselines.md``) and, with matplotlib, ``<out>/baselines.png``.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

import jax

from bayesrank.experiments import baselines
from bayesrank.runtime import enable_compilation_cache

REPO_ROOT = Path(__file__).resolve().parents[1]


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    p.add_argument(
        "--data-dir",
        type=Path,
        default=os.environ.get("BAYESRANK_SHARED_DATA", REPO_ROOT / ".." / "shared" / "data"),
    )
    p.add_argument("--out", type=Path, default=REPO_ROOT / "experiments/out/letor_baselines")
    p.add_argument("--seed", type=int, default=0)
    baselines.add_arguments(p)
    p.set_defaults(protocol="full")
    args = p.parse_args(argv)
    jax.config.update("jax_enable_x64", True)  # here, not at import: tests load this module
    enable_compilation_cache()
    baselines.run(args)
    print(f"written {args.out}")


if __name__ == "__main__":
    main()
