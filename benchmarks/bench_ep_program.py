"""The size of EP's compiled programs: fused kernels, XLA compile time, trace and lowering.

Issue 51's measure of EP's program at one bucket. Each case is a user's call, made in a fresh
process with no compilation cache, as the README makes it:

- ``ep.fit``: ``ep.fit(K, pairs)`` at ``n = 20`` entities and ``m = 40`` pairs (the buckets of
  32 entities and 40 pairs), an RBF prior; again with ``accelerate=True`` and with
  ``precision="mixed"``;
- ``learned fit``: ``XPGPModel(XPGP(RBF())).fit(problem, learn_hyperparameters=True)`` at
  ``n = 150`` with 150 pairs and 21 attributes (``bench_first_fit.py``'s problem), whose
  programs are the evidence with its gradient and the Fisher information.

Per case, two processes: one times the call (the summed ``backend_compile_duration``, the
tracing and lowering, from ``jax.monitoring``; the first call's wall time; the median of five
later calls, the programs compiled); the other makes the same call with XLA's dump
on (``--xla_dump_to``, which slows compiling, so it is not timed) and counts the fusions in
each program's optimised HLO. ``--pythonpath DIR`` runs another checkout of bayesrank (``git
worktree add /tmp/before <commit>``), for a before/after comparison in one run.
``--xla-options both`` (the default) runs every case with the package's XLA options
(``bayesrank.compiler.COMPILER_OPTIONS``) and with XLA's defaults
(``BAYESRANK_XLA_OPTIONS=default``), side by side.

Usage::

    python benchmarks/bench_ep_program.py [--repeats 3] [--pythonpath DIR]
        [--xla-options both|package|default]
"""

from __future__ import annotations

import argparse
import collections
import os
import re
import statistics
import tempfile
import time
from pathlib import Path

import _harness as harness

CASES = ("ep.fit", "ep.fit accelerate", "ep.fit mixed", "learned fit")
#: One fusion instruction of an optimised HLO module (``%name = type fusion(...), kind=...``).
FUSION = re.compile(r"^\s*(?:ROOT\s+)?%\S+ = .* fusion\(", re.M)


def call(case: str):
    """The user's call of ``case`` (module docstring), run once."""
    import jax

    from bayesrank import RBF, XPGP, PreferenceProblem, XPGPModel
    from bayesrank.inference import ep

    if case == "learned fit":
        X, pairs = harness.linear_utility_problem(150, 21, 150)
        post = XPGPModel(XPGP(RBF())).fit(
            PreferenceProblem.create(pairs, X=X), learn_hyperparameters=True
        )
        return jax.block_until_ready(post.mean)
    X, pairs = harness.linear_utility_problem(20, 3, 40)
    K = RBF()(X)
    options = {"accelerate": True} if "accelerate" in case else {}
    if "mixed" in case:
        options["precision"] = "mixed"
    return jax.block_until_ready(ep.fit(K, pairs, **options).mean)


def worker(case: str) -> dict:
    import jax.monitoring

    events = collections.defaultdict(list)
    jax.monitoring.register_event_duration_secs_listener(
        lambda name, duration, **_: events[name].append(duration)
    )
    harness.setup_jax(cache=False)  # float64; no persistent cache: every program compiles
    start = time.perf_counter()
    call(case)
    first = time.perf_counter() - start
    compiles = list(events["/jax/core/compile/backend_compile_duration"])
    later = []
    for _ in range(5):
        start = time.perf_counter()
        call(case)
        later.append(time.perf_counter() - start)
    return {
        "first_s": first,
        "later_ms": 1e3 * statistics.median(later),
        "programs": len(compiles),
        "compile_s": sum(compiles),
        "trace_s": sum(events["/jax/core/compile/jaxpr_trace_duration"]),
        "lower_s": sum(events["/jax/core/compile/jaxpr_to_mlir_module_duration"]),
    }


def count_fusions(dump: Path) -> dict[str, int]:
    """Fusions per program in an XLA dump directory, programs by their module name."""
    counts = {}
    for f in dump.glob("*after_optimizations.txt"):
        name = f.name.split(".", 2)[1] if f.name.count(".") >= 2 else f.name
        counts[name] = len(FUSION.findall(f.read_text()))
    return counts


def spawn(case: str, pythonpath: str | None, options: str, dump: str | None = None) -> dict:
    env = {"JAX_PLATFORMS": "cpu", "BAYESRANK_CACHE_DIR": "off"}
    if options == "default":
        env["BAYESRANK_XLA_OPTIONS"] = "default"
    if pythonpath:
        env["PYTHONPATH"] = pythonpath
    if dump:
        env["XLA_FLAGS"] = (
            os.environ.get("XLA_FLAGS", "") + f" --xla_dump_to={dump} --xla_dump_hlo_as_text"
        )
    return harness.spawn(__file__, "--worker", case, env=env)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--repeats", type=int, default=3, help="timed processes per case")
    parser.add_argument("--pythonpath", default=None, help="run another checkout of bayesrank")
    parser.add_argument("--cases", default=",".join(CASES), help="comma-separated")
    parser.add_argument(
        "--xla-options",
        default="both",
        choices=("both", "package", "default"),
        help="the package's XLA options, XLA's defaults, or both side by side",
    )
    parser.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        harness.emit(worker(args.worker))
        return
    settings = ("package", "default") if args.xla_options == "both" else (args.xla_options,)
    print(
        "| case | XLA options | programs | fusions (per program) | compile s (median) | "
        "trace s | lower s | first call s | later calls ms |"
    )
    print("| --- | --- | ---: | --- | ---: | ---: | ---: | ---: | ---: |")
    for case in args.cases.split(","):
        for options in settings:
            with tempfile.TemporaryDirectory() as dump:
                spawn(case, args.pythonpath, options, dump)
                fusions = count_fusions(Path(dump))
            rows = [spawn(case, args.pythonpath, options) for _ in range(args.repeats)]
            per = ", ".join(
                f"{n} {name}" for name, n in sorted(fusions.items(), key=lambda x: -x[1])
            )
            keys = ("compile_s", "trace_s", "lower_s", "first_s", "later_ms")
            med = {k: statistics.median(r[k] for r in rows) for k in keys}
            print(
                f"| {case} | {options} | {rows[0]['programs']} | {sum(fusions.values())}: {per} | "
                f"{med['compile_s']:.2f} | {med['trace_s']:.2f} | {med['lower_s']:.2f} | "
                f"{med['first_s']:.2f} | {med['later_ms']:.1f} |",
                flush=True,
            )


if __name__ == "__main__":
    main()
