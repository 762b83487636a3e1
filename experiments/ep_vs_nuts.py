"""How far is EP from NUTS? The full protocol of ``bayesrank.experiments.ep_vs_nuts`` (the same
code as ``bayesrank experiment ep-vs-nuts --protocol full``) on the data in ``../shared/data``:
10 OHSUMED queries with 100 and 200 known pairs under the keyword-graph XPGP prior fixed at its EM
fit, plus 24 synthetic problems; NUTS 4 chains x 1000 draws after 500 warm-up. This script sets
the data folder, the output folder and the full protocol, pins the run to one CPU and writes the
Markdown table of ``docs/results/ep-vs-nuts.md``.

    python experiments/ep_vs_nuts.py [--data-dir ../shared/data] [--out experiments/out/ep_vs_nuts]
        [--all-cpus] [--protocol full|reduced] [--collection ...] [--queries 10]
        [--known 100 200] [--test 0] [--prior em-fit|rbf] [--synthetic 4] [--warmup 500]
        [--samples 1000] [--chains 4] [--seed 0]

Writes ``<out>/results.json``, ``table.txt``, ``table.md`` and, with matplotlib,
``ep_vs_nuts.png``.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import jax

jax.config.update("jax_enable_x64", True)
from bayesrank.experiments import ep_vs_nuts  # noqa: E402
from bayesrank.runtime import enable_compilation_cache, pin_to_one_cpu  # noqa: E402

REPO_ROOT = Path(__file__).resolve().parents[1]


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--data-dir", type=Path, default=REPO_ROOT / ".." / "shared" / "data")
    parser.add_argument("--out", type=Path, default=REPO_ROOT / "experiments/out/ep_vs_nuts")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--all-cpus", action="store_true", help="do not pin to one CPU")
    ep_vs_nuts.add_arguments(parser)
    parser.set_defaults(protocol="full")
    args = parser.parse_args(argv)
    if not args.all_cpus:
        pin_to_one_cpu()  # before the first computation
    enable_compilation_cache()
    args.data_dir = args.data_dir.resolve()
    results = ep_vs_nuts.run(args)
    (args.out / "table.md").write_text(ep_vs_nuts.markdown(results) + "\n")
    print(f"\n{ep_vs_nuts.markdown(results)}\n\nwritten: {args.out}")


if __name__ == "__main__":
    main()
