"""The first learned fit in a fresh process, with a cold and a warm compilation cache.

Issue 31's first-call measure: ``n = 150`` entities with 21 standard-normal attributes, 150
distinct pairs (winners by a noisy linear utility, seeded), and the README's call,
``XPGPModel(XPGP(RBF())).fit(problem, learn_hyperparameters=True)`` after
``bayesrank.runtime.enable_compilation_cache()``. Each repetition runs two fresh processes on a
new, empty cache directory: the first (cold) compiles and writes the cache, the second (warm)
finds it. Reported per process: the first fit's wall time and a second fit's (the steady state),
the number of programs XLA compiled and their summed compile time (``jax.monitoring``), and the
time spent tracing and lowering. ``--pythonpath DIR`` runs another checkout of bayesrank (e.g.
``git worktree add /tmp/before <commit>``) for a before/after comparison in one run.

Usage::

    python benchmarks/bench_first_fit.py [--repeats 3] [--pythonpath DIR]
"""

from __future__ import annotations

import argparse

import _harness as harness


def worker() -> dict:
    import collections

    import jax.monitoring

    events = collections.defaultdict(list)
    jax.monitoring.register_event_duration_secs_listener(
        lambda name, duration, **_: events[name].append(duration)
    )
    harness.setup_jax()  # float64, the compilation cache (BAYESRANK_CACHE_DIR)
    from bayesrank import RBF, XPGP, PreferenceProblem, XPGPModel

    X, pairs = harness.linear_utility_problem(150, 21, 150)
    problem = PreferenceProblem.create(pairs, X=X)

    def fit():  # the README's call
        post = XPGPModel(XPGP(RBF())).fit(problem, learn_hyperparameters=True)
        jax.block_until_ready(post.mean)
        return post

    out = {}
    for label in ("first_s", "second_s"):
        out[label], _ = harness.timed(fit)
        if label == "first_s":
            compile_events = list(events["/jax/core/compile/backend_compile_duration"])
            out["programs"] = len(compile_events)
            out["compile_s"] = sum(compile_events)
            out["trace_lower_s"] = sum(events["/jax/core/compile/jaxpr_trace_duration"]) + sum(
                events["/jax/core/compile/jaxpr_to_mlir_module_duration"]
            )
            out["cache_hits"] = len(events["/jax/compilation_cache/cache_retrieval_time_sec"])
    return out


def spawn(cache: str, pythonpath: str | None) -> dict:
    env = {"BAYESRANK_CACHE_DIR": cache, "JAX_PLATFORMS": "cpu"}
    if pythonpath:
        env["PYTHONPATH"] = pythonpath
    return harness.spawn(__file__, "--worker", env=env)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--pythonpath", default=None, help="run another checkout of bayesrank")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        harness.emit(worker())
        return
    print("| run | cache | first fit s | second fit s | programs | compile s | trace+lower s |")
    print("| --- | --- | ---: | ---: | ---: | ---: | ---: |")
    for r in range(args.repeats):
        for state, cache in harness.cold_and_warm():
            row = spawn(cache, args.pythonpath)
            print(
                f"| {r + 1} | {state} | {row['first_s']:.2f} | {row['second_s']:.3f} | "
                f"{row['programs'] - row['cache_hits']} | {row['compile_s']:.2f} | "
                f"{row['trace_lower_s']:.2f} |",
                flush=True,
            )


if __name__ == "__main__":
    main()
