"""The main job as a newcomer meets it: ``bayesrank experiment relational`` on the bundled
sample, in a fresh process, first with an empty compilation cache, then again with the cache
the first run filled.

Reported for each run: the wall time of the command (its child processes included), and the
programs in the cache afterwards (every compiled program is cached,
``runtime.enable_compilation_cache``; the cold run's count is the number of programs the job
compiles). ``--known`` runs each number of known pairs alone as well, in the same order on
one cache, to show how many programs a second setting adds to the first.

    python benchmarks/bench_main_job.py [--known 20 40] [--out main_job.json]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def programs(cache: Path) -> int:
    """The compiled programs in a JAX compilation cache directory (one file each; JAX's
    ``-atime`` companions are not programs, and the executables bayesrank keeps whole
    (``bayesrank.executables.FOLDER``) are programs JAX's cache holds too)."""
    return sum(
        1
        for p in cache.rglob("*")
        if p.is_file() and not p.name.endswith("-atime") and "bayesrank-executables" not in p.parts
    )


def run(args: list[str], cache: Path, out: Path) -> dict:
    env = {**os.environ, "BAYESRANK_CACHE_DIR": str(cache)}
    command = [sys.executable, "-m", "bayesrank", "experiment", "relational", "--out", str(out)]
    command += args
    start = time.perf_counter()
    subprocess.run(command, env=env, check=True, stdout=subprocess.DEVNULL)
    seconds = time.perf_counter() - start
    table = (out / "table.md").read_text() if (out / "table.md").exists() else None
    return {"args": args, "seconds": round(seconds, 1), "programs": programs(cache), "table": table}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--known", type=int, nargs="*", default=[20, 40])
    parser.add_argument("--out", type=Path, default=None)
    opts = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        cache = tmp / "cache"
        rows.append({"run": "cold", **run([], cache, tmp / "cold")})
        rows.append({"run": "warm", **run([], cache, tmp / "warm")})
        split = tmp / "split-cache"
        for k in opts.known:
            row = run(["--known", str(k)], split, tmp / f"k{k}")
            rows.append({"run": f"--known {k} alone", **row})
    same = rows[0]["table"] == rows[1]["table"]
    for r in rows:
        print(f"{r['run']:>18}: {r['seconds']:6.1f} s, {r['programs']:4d} programs in the cache")
    print(f"cold and warm tables identical: {same}")
    if opts.out:
        opts.out.write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    sys.exit(main())
