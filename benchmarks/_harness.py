"""The benchmarks' shared harness: timing, fresh worker processes, machine facts, JSON output.

Every script in ``benchmarks/`` measures the public API as a user calls it. This module holds
what they have in common, and imports nothing beyond the standard library at module level, so
that a peer's worker (choix, BoTorch) pays for no JAX import and its memory stays its own::

    import _harness as harness

    seconds, post = harness.timed(fit)                 # one call
    times, post = harness.repeat(fit, 5)               # steady-state calls
    out = harness.spawn(__file__, "--worker", "ep")    # a fresh process; its JSON result
    harness.emit({"first_call_s": seconds})            # ... which the worker prints last

A worker prints its result as JSON on the last line of its standard output (``emit``); ``spawn``
reads it back, so compilation, imports and first-use costs are paid afresh in each process, as a
user pays them.
"""

from __future__ import annotations

import datetime
import json
import math
import os
import platform
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

SPAWNED_AT = "BENCH_SPAWNED_AT"  # spawn's clock reading, passed to the worker's environment

# --- timing ---------------------------------------------------------------------------------------


def timed(fn: Callable, *args, **kwargs) -> tuple[float, Any]:
    """Call ``fn(*args, **kwargs)`` once; returns ``(wall seconds, its result)``.

    Block inside ``fn`` on asynchronous results (``jax.block_until_ready``)."""
    start = time.perf_counter()
    out = fn(*args, **kwargs)
    return time.perf_counter() - start, out


def repeat(
    fn: Callable, repeats: int, *, budget: float = math.inf, first: float = 0.0, min_calls: int = 0
) -> tuple[list[float], Any]:
    """Up to ``repeats`` timed calls of ``fn()``; returns ``(seconds of each call, last result)``.

    With a ``budget`` (seconds), stops early once the next call, estimated as long as the last,
    would take the time spent past it; ``first`` is a call already made (counted as spent, and
    the first estimate), and ``min_calls`` calls are always made.
    """
    times: list[float] = []
    out, spent = None, first
    while len(times) < repeats:
        last = times[-1] if times else first
        if len(times) >= min_calls and spent + last > budget:
            break
        t, out = timed(fn)
        times.append(t)
        spent += t
    return times, out


def best_and_median(times: list[float]) -> dict:
    """``{"best_s": min(times), "median_s": median(times)}``."""
    return {"best_s": min(times), "median_s": statistics.median(times)}


# --- worker processes -----------------------------------------------------------------------------


class WorkerError(RuntimeError):
    """A worker process failed, or printed no JSON result; the message is its output's tail."""


def spawn(*argv: str, env: dict | None = None, timeout: float | None = None) -> dict:
    """Run ``python *argv`` in a fresh process; returns the JSON object its last stdout line holds.

    ``env`` adds to (or overrides) this process's environment. Raises ``WorkerError`` (the tail
    of stderr, or of stdout) where the process fails, and ``subprocess.TimeoutExpired`` past
    ``timeout`` seconds (the process is killed).
    """
    env = {**os.environ, **(env or {}), SPAWNED_AT: repr(time.monotonic())}
    cmd = [sys.executable, *(str(a) for a in argv)]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=timeout)
    lines = proc.stdout.strip().splitlines()
    if proc.returncode == 0 and lines:
        try:
            return json.loads(lines[-1])
        except json.JSONDecodeError:
            pass
    raise WorkerError((proc.stderr or proc.stdout)[-4000:])


def emit(result: dict) -> None:
    """The worker's side of ``spawn``: prints ``result`` as JSON, as the last line of stdout."""
    print(json.dumps(result), flush=True)


def since_spawn() -> float | None:
    """Seconds from ``spawn`` starting this process (interpreter start and imports included) to
    now; ``None`` where it was not started by ``spawn``. (``time.monotonic`` is system-wide.)"""
    spawned_at = os.environ.get(SPAWNED_AT)
    return None if spawned_at is None else time.monotonic() - float(spawned_at)


def peak_rss_mb() -> float:
    """This process's peak resident memory so far (``ru_maxrss``), in MiB."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def cold_and_warm(warm: bool = True) -> Iterator[tuple[str, str]]:
    """Yields ``("cold", directory)`` for a new, empty compilation cache directory, then (with
    ``warm``) ``("warm", directory)``, the same one: spawn a worker on each (``--cache-dir`` or
    ``BAYESRANK_CACHE_DIR``). The directory is deleted afterwards."""
    with tempfile.TemporaryDirectory(prefix="bayesrank-cache-") as cache:
        yield "cold", cache
        if warm:
            yield "warm", cache


# --- the libraries --------------------------------------------------------------------------------


def setup_jax(*, x64: bool = True, cache=True, pin: bool = False, platforms: str | None = None):
    """Configure JAX as the benchmarks run it; returns the ``jax`` module. Call it first.

    ``x64``: float64 on. ``cache``: ``True`` keeps compiled programs on disk in bayesrank's
    default directory (``bayesrank.runtime.enable_compilation_cache``, which honours
    ``BAYESRANK_CACHE_DIR``, ``off`` included), a path in that directory, ``False`` leaves the
    cache off. ``pin``: ``bayesrank.runtime.pin_to_one_cpu`` (skipped with ``--all-cpus``).
    ``platforms``: ``JAX_PLATFORMS`` (``"cpu"`` hides GPUs), set before JAX starts.
    """
    if platforms:
        os.environ["JAX_PLATFORMS"] = platforms
    import jax

    jax.config.update("jax_enable_x64", x64)
    from bayesrank import runtime

    if pin:
        runtime.pin_to_one_cpu()
    if cache:
        runtime.enable_compilation_cache(None if cache is True else cache)
    return jax


def setup_torch(threads: int = 2):
    """Import torch limited to ``threads`` intra-op threads (the peers' setting); returns it."""
    import torch

    torch.set_num_threads(threads)
    return torch


def optional(name: str, say: bool = True):
    """The module ``name``, or ``None`` (with ``say``, printing that it is skipped) where it is
    not installed or fails to load (e.g. a native library missing)."""
    import importlib

    try:
        return importlib.import_module(name)
    except Exception as err:  # ImportError, or OSError from a missing shared library
        if say:
            print(f"{name} not available ({type(err).__name__}: {err}): skipped", flush=True)
        return None


# --- machine and output ---------------------------------------------------------------------------


def cpu_model() -> str:
    """The CPU's model name (``/proc/cpuinfo``; ``platform.processor()`` elsewhere)."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor()


def cores() -> int:
    """The CPUs this process may run on (its affinity; ``os.cpu_count()`` where unknown)."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def linear_utility_problem(n: int, d: int, m: int, seed: int = 0):
    """``(X: (n, d), pairs: (m, 2))``: standard-normal attributes, ``m`` distinct pairs whose
    winner has the larger noisy linear utility ``0.3 X w + N(0, 1)`` (seeded)."""
    import numpy as np

    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    u = X @ rng.normal(size=d) * 0.3 + rng.normal(size=n)
    pairs: set = set()
    while len(pairs) < m:
        i, j = (int(k) for k in rng.integers(0, n, 2))
        if i != j and (j, i) not in pairs:
            pairs.add((i, j) if u[i] > u[j] else (j, i))
    return X, np.array(sorted(pairs))


def machine_info() -> dict:
    """``{"cpu", "cores", "memory_gib", "python", "platform"}`` of this machine."""
    mem = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    return {
        "cpu": cpu_model() or "?",
        "cores": cores(),
        "memory_gib": round(mem, 1),
        "python": platform.python_version(),
        "platform": platform.platform(),
    }


def versions(*packages: str) -> dict:
    """``{package: installed version}`` (distribution names; ``None`` where not installed)."""
    from importlib import metadata

    out = {}
    for name in packages:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = None
    return out


def utc_now(timespec: str = "seconds") -> str:
    """The time now, UTC, in ISO 8601 (``timespec`` as ``datetime.isoformat``)."""
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec=timespec)


def write_json(path: str | os.PathLike, payload, indent: int = 2) -> Path:
    """Write ``payload`` as JSON to ``path``, creating its folder; returns the path."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(payload, indent=indent))
    return path


def parse_sizes(text: str) -> list[tuple[int, ...]]:
    """``"150x200,300x600"`` -> ``[(150, 200), (300, 600)]``."""
    return [tuple(int(v) for v in s.lower().split("x")) for s in text.split(",")]


def fmt(x, spec: str) -> str:
    """``format(x, spec)``, or ``"-"`` right-aligned in the spec's width where ``x`` is None."""
    width = "".join(ch for ch in spec.split(".")[0] if ch.isdigit())
    return format("-", f">{width}") if x is None else format(x, spec)
