"""``pytest --compile-time``: how much of the run's time is JAX compiling, and which programs.

JAX reports three durations for every program it builds (``jax.monitoring``): tracing to a
jaxpr, lowering it to MLIR, and XLA's compilation (a load from the persistent cache counts here
too, as the short time it takes). With the option, each process of the run (xdist's workers
included; child processes that tests start are not seen) writes one JSON line per program to a
directory of the run's own, and the process that started the run prints the totals, the share of
the tests' time, how the compile time splits between short and long programs, and the programs
and test modules that cost the most. Off by default; the report is for whoever is looking for
where the time goes (docs/development/tests.md).
"""

from __future__ import annotations

import collections
import json
import os
from pathlib import Path

EVENTS = {
    "/jax/core/compile/jaxpr_trace_duration": "trace",
    "/jax/core/compile/jaxpr_to_mlir_module_duration": "lower",
    "/jax/core/compile/backend_compile_duration": "compile",
}
ENV = "BAYESRANK_COMPILE_TIME_DIR"
#: Upper bounds (seconds) and labels of the compile-time classes in the report.
SIZES = ((0.1, "under 0.1 s"), (0.5, "0.1-0.5 s"), (2.0, "0.5-2 s"), (float("inf"), "2 s or more"))


def start(directory: Path) -> None:
    """In every process of the run: record each program's durations to
    ``directory/<worker>.jsonl`` (a directory of the run's own, ``conftest._run_directory``)."""
    from jax import monitoring

    name = os.environ.get("PYTEST_XDIST_WORKER", "main")
    out = open(directory / f"{name}.jsonl", "a", buffering=1)

    def listen(event, duration, **kwargs):
        if event in EVENTS:
            line = {
                "phase": EVENTS[event],
                "seconds": duration,
                "program": kwargs.get("fun_name"),
                "test": os.environ.get("PYTEST_CURRENT_TEST", "").rsplit(" ", 1)[0],
            }
            out.write(json.dumps(line) + "\n")

    monitoring.register_event_duration_secs_listener(listen)


def report(directory: Path, terminalreporter) -> None:
    """In the process that started the run: the totals, the programs by their compile time, and
    the ten costliest programs and test modules."""
    rows = []
    for f in directory.glob("*.jsonl"):
        rows += [json.loads(line) for line in f.read_text().splitlines()]
    phases = collections.Counter()
    programs = collections.defaultdict(lambda: [0, 0.0])
    modules = collections.defaultdict(lambda: [0, 0.0])  # programs compiled, seconds in JAX
    sizes = collections.defaultdict(lambda: [0, 0.0])  # by each program's compile time
    for row in rows:
        phases[row["phase"]] += row["seconds"]
        module = modules[row.get("test", "").split("::")[0] or "(outside a test)"]
        module[1] += row["seconds"]
        if row["phase"] == "compile":
            programs[row["program"]][0] += 1
            programs[row["program"]][1] += row["seconds"]
            module[0] += 1
            size = next(label for bound, label in SIZES if row["seconds"] < bound)
            sizes[size][0] += 1
            sizes[size][1] += row["seconds"]
    tests = sum(  # setup, call and teardown of every test
        r.duration for reports in terminalreporter.stats.values() for r in reports
        if hasattr(r, "when") and hasattr(r, "duration")
    )  # fmt: skip
    write = terminalreporter.write_line
    terminalreporter.section("compile time")
    total = sum(phases.values())
    write(
        f"{total:.0f} s of the tests' {tests:.0f} s ({100 * total / max(tests, 1e-9):.0f} %): "
        + ", ".join(f"{phase} {phases[phase]:.0f} s" for phase in ("trace", "lower", "compile"))
        + f"; {sum(n for n, _ in programs.values())} programs compiled or loaded"
    )
    write(
        "by each program's compile time: "
        + ", ".join(f"{label}: {sizes[label][0]} ({sizes[label][1]:.0f} s)" for _, label in SIZES)
    )
    write("the costliest programs:")
    for program, (n, seconds) in sorted(programs.items(), key=lambda kv: -kv[1][1])[:10]:
        write(f"{seconds:8.1f} s {n:6d}x  {program}")
    write("the test modules that spend the most in tracing, lowering and compiling:")
    for module, (n, seconds) in sorted(modules.items(), key=lambda kv: -kv[1][1])[:10]:
        write(f"{seconds:8.1f} s {n:6d}x  {module}")
