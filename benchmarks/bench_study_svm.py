"""The relational study's ranking SVMs as a user meets them: wall time of the study's RankSVM and
LapRankSVM task, compilation included.

Issue 32's measure. For each collection, a fresh process runs
``bayesrank.experiments.relational.run_study(StudyConfig(collection,
models=("RankSVM", "LapRankSVM"), ...))``
with the collection's default numbers of known pairs and repetitions (or ``--repeats``), every
task in that process (``jobs=0``), the persistent compilation cache off (a user's first run);
also, with ``--gp``, the GP models' tasks in the same way, for the comparison the issue draws
("the RankSVM baselines took longer than all GP models together").

Usage::

    python benchmarks/bench_study_svm.py [--collections sample MQ2008] [--repeats 20] [--gp]

Writes ``benchmarks/out/bench_study_svm.json``: per collection and model group the seconds, and
the chosen settings' error (mean held-out pair error over queries and repetitions).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
SVMS = ("RankSVM", "LapRankSVM")
GPS = ("PGP", "PGP+I", "XPGP", "XPGP-Silva", "XPGP-diffusion", "placebo")


def worker(collection: str, data_dir: str, repeats: int, models: list[str]) -> dict:
    import time

    import jax

    jax.config.update("jax_enable_x64", True)  # as the study's command and its children
    from bayesrank.experiments.relational import StudyConfig, run_study

    config = StudyConfig(
        collection=collection,
        data_dir=None if collection == "sample" else Path(data_dir),
        repeats=repeats,
        models=tuple(models),
        jobs=0,
    )
    start = time.perf_counter()
    results = run_study(config, verbose=False)
    seconds = time.perf_counter() - start
    errors = {
        k: {m: round(s["summary"][m]["err"]["mean"], 4) for m in models}
        for k, s in results["settings"].items()
    }
    return {"seconds": seconds, "known": list(config.known), "repeats": config.repeats,
            "queries": len(results["queries"]), "error": errors}


def spawn(collection, data_dir, repeats, models) -> dict:
    env = dict(os.environ, BAYESRANK_CACHE_DIR="off", JAX_PLATFORMS="cpu")
    command = [sys.executable, __file__, "--worker", collection, "--data-dir", data_dir,
               "--repeats", str(repeats), "--models", *models]
    out = subprocess.run(command, env=env, capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--collections", nargs="+", default=["sample", "MQ2008"])
    parser.add_argument("--data-dir", default=str(HERE.parent.parent / "shared" / "data"))
    parser.add_argument("--repeats", type=int, default=0, help="0: the collection's default")
    parser.add_argument("--gp", action="store_true", help="also time the GP models' tasks")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    parser.add_argument("--models", nargs="+", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        print(json.dumps(worker(args.worker, args.data_dir, args.repeats, args.models)))
        return
    report = {}
    for collection in args.collections:
        report[collection] = {"SVMs": spawn(collection, args.data_dir, args.repeats, SVMS)}
        if args.gp:
            report[collection]["GPs"] = spawn(collection, args.data_dir, args.repeats, GPS)
        for group, r in report[collection].items():
            print(f"{collection} {group}: {r['seconds']:.1f} s ({r['queries']} queries, known "
                  f"{r['known']}, {r['repeats']} repetitions); error {r['error']}", flush=True)
    out = HERE / "out" / "bench_study_svm.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
