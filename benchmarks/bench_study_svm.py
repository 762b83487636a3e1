"""The relational study's ranking SVMs as a user meets them: wall time of the study's RankSVM and
LapRankSVM task, compilation included.

Issue 32's measure. For each collection, a fresh process runs
``bayesrank.experiments.relational.run_study(StudyConfig(collection,
models=("RankSVM", "LapRankSVM"), ...))``
with the collection's default numbers of known pairs and repetitions (or ``--repeats``), every
task in that process (``jobs=0``), the persistent compilation cache off (a user's first run);
also, with ``--gp``, the GP models' tasks in the same way, for the comparison the issue draws
("the RankSVM baselines took longer than all GP models together").

``--theta per-query``, ``--known`` and ``--queries`` set the study's options of those names
(issue 51's case: ``--collections MovieLens --queries 12 --known 100 --repeats 3 --theta
per-query --gp``).

Usage::

    python benchmarks/bench_study_svm.py [--collections sample MQ2008] [--repeats 20] [--gp]
        [--theta shared|per-query] [--known 100 ...] [--queries 12]

Writes ``benchmarks/out/bench_study_svm.json``: per collection and model group the seconds, and
the chosen settings' error (mean held-out pair error over queries and repetitions).
"""

from __future__ import annotations

import argparse
from pathlib import Path

import _harness as harness

HERE = Path(__file__).resolve().parent
SVMS = ("RankSVM", "LapRankSVM")
GPS = ("PGP", "PGP+I", "XPGP", "XPGP-Silva", "XPGP-diffusion", "placebo")


def worker(collection: str, data_dir: str, repeats: int, models: list[str], study) -> dict:
    harness.setup_jax(cache=False)  # x64, as the study's command and its children
    from bayesrank.experiments.relational import StudyConfig, run_study

    config = StudyConfig(
        collection=collection,
        data_dir=None if collection == "sample" else Path(data_dir),
        repeats=repeats,
        models=tuple(models),
        jobs=0,
        theta=study.theta,
        known=tuple(study.known or ()),
        queries=study.queries,
    )
    seconds, results = harness.timed(run_study, config, verbose=False)
    errors = {
        k: {m: round(s["summary"][m]["err"]["mean"], 4) for m in models}
        for k, s in results["settings"].items()
    }
    return {
        "seconds": seconds,
        "known": list(config.known),
        "repeats": config.repeats,
        "queries": len(results["queries"]),
        "error": errors,
    }


def spawn(collection, data_dir, repeats, models, study) -> dict:
    env = {"BAYESRANK_CACHE_DIR": "off", "JAX_PLATFORMS": "cpu"}
    argv = [__file__, "--worker", collection, "--data-dir", data_dir, "--repeats", repeats]
    argv += ["--theta", study.theta]
    argv += ["--known", *study.known] if study.known else []
    argv += ["--queries", study.queries] if study.queries else []
    return harness.spawn(*argv, "--models", *models, env=env)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--collections", nargs="+", default=["sample", "MQ2008"])
    parser.add_argument("--data-dir", default=str(HERE.parent.parent / "shared" / "data"))
    parser.add_argument("--repeats", type=int, default=0, help="0: the collection's default")
    parser.add_argument("--gp", action="store_true", help="also time the GP models' tasks")
    parser.add_argument("--theta", default="shared", help="the study's --theta")
    parser.add_argument("--known", type=int, nargs="+", help="the study's --known")
    parser.add_argument("--queries", type=int, help="the study's --queries")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    parser.add_argument("--models", nargs="+", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        harness.emit(worker(args.worker, args.data_dir, args.repeats, args.models, args))
        return
    report = {}
    for collection in args.collections:
        report[collection] = {"SVMs": spawn(collection, args.data_dir, args.repeats, SVMS, args)}
        if args.gp:
            report[collection]["GPs"] = spawn(collection, args.data_dir, args.repeats, GPS, args)
        for group, r in report[collection].items():
            print(
                f"{collection} {group}: {r['seconds']:.1f} s ({r['queries']} queries, known "
                f"{r['known']}, {r['repeats']} repetitions); error {r['error']}",
                flush=True,
            )
    harness.write_json(HERE / "out" / "bench_study_svm.json", report, indent=1)


if __name__ == "__main__":
    main()
