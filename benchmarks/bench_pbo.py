"""Preferential Bayesian optimisation: bayesrank's loop against BoTorch and Optuna.

The protocol is ``_pbo_peers``'s (its docstring): one random pair first (BoTorch's tutorial),
then ``--answers`` proposals, each answered through a probit of the true utility difference,
``a`` wins iff ``u < Phi((f(a) - f(b)) / noise)``, with the same initial designs and the same
uniforms ``u`` for every method of a seed. The noise is set per function from an error rate:
the share of wrong answers among uniformly random pairs (``--error-rates``, bisection on
100,000 such pairs).

bayesrank runs every seed of a (function, noise) in one compiled program
(``active.designs.run_batch``), as a user evaluating a method would, in a fresh worker process
with the compilation cache off; it is timed twice there, the first call with its compilation.
The peers run in fresh worker processes, one per (peer, function, noise), each seed after the
other with torch on one thread. The parent process holds no JAX and only waits.

Measured: the true utility of each model's best guess (the shown design of highest posterior
mean) after each answer; the wall time per iteration.

    python benchmarks/bench_pbo.py --seeds 20 --first-seed 20 --answers 60 --out pbo.json
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _harness as harness
import _pbo_peers as peers

FUNCTIONS = {"hartmann6": (peers.hartmann6, 6), "ackley": (peers.ackley, 4)}


def noise_for(f, dim: int, error_rate: float, n: int = 100_000) -> float:
    """The probit noise at which ``error_rate`` of uniform random pairs are answered wrongly:
    ``mean Phi(-|f(a) - f(b)| / noise) = error_rate``, by bisection on ``log noise``."""
    rng = np.random.default_rng(12345)
    gap = np.abs(f(rng.random((n, dim))) - f(rng.random((n, dim))))
    low, high = -20.0, 10.0
    for _ in range(100):
        mid = 0.5 * (low + high)
        wrong = np.mean(0.5 * np.vectorize(math.erfc)(gap / math.exp(mid) / math.sqrt(2)))
        low, high = (mid, high) if wrong < error_rate else (low, mid)
    return math.exp(0.5 * (low + high))


def protocol_inputs(seeds, n_answers: int, dim: int, n_init: int = 1):
    """The initial designs ``(s, n_init, 2, dim)`` and uniforms ``(s, n_init + n_answers)`` of
    each seed, drawn as ``_pbo_peers`` draws them."""
    X = np.stack([np.random.default_rng(s + 1).random((n_init, 2, dim)) for s in seeds])
    U = np.stack([np.random.default_rng(s).random(n_init + n_answers) for s in seeds])
    return X, U


def run_bayesrank(function: str, noise: float, seeds, n_answers: int, settings: dict) -> dict:
    """Every seed in one compiled program, called twice (compilation, then again)."""
    jax = harness.setup_jax(x64=True, cache=False)
    import jax.numpy as jnp

    from bayesrank.active.designs import Settings, run_batch
    from bayesrank.active.designs.loop import initial_theta
    from bayesrank.data import functions

    spec = functions.get(function)
    X, U = protocol_inputs(seeds, n_answers, spec.dim)
    keys = jax.random.split(jax.random.key(0), len(seeds))
    run = Settings(**settings)

    def call():
        trace = run_batch(spec.fn, jnp.asarray(X), jnp.asarray(U), keys, noise,
                          initial_theta(spec.dim), k=n_answers, settings=run)  # fmt: skip
        return jax.block_until_ready(trace)

    first_s, trace = harness.timed(call)
    again_s, again = harness.timed(call)
    assert np.array_equal(np.asarray(trace.best_guess), np.asarray(again.best_guess))
    return {
        "seeds": list(seeds),
        "best_guess": np.asarray(trace.best_guess).tolist(),
        "best_shown": np.asarray(trace.best_shown).tolist(),
        "first_call_s": first_s,
        "again_s": again_s,
        "settings": run._asdict(),
    }


def bayesrank_worker(args) -> None:
    """bayesrank's loop on every seed at once (a worker process, so that the parent holds no
    JAX threads while the peers run)."""
    settings = {"learn_every": args.learn_every, "learn_steps": args.learn_steps,
                "acquisition": args.acquisition, "engine": args.engine}  # fmt: skip
    harness.emit(run_bayesrank(args.function, args.noise, args.seed_list, args.answers, settings))


def peer_worker(args) -> None:
    """One peer, one function and noise, every seed in turn (a worker process)."""
    f, dim = FUNCTIONS[args.function]
    run = {"botorch": peers.run_botorch, "optuna": peers.run_optuna}[args.peer]
    rows, failed, settings = [], [], None
    for seed in args.seed_list:
        try:
            r = run(f, dim, args.answers, args.noise, seed, torch_threads=1)
        except Exception as err:  # a peer's own failure ends its run, not the benchmark
            failed.append({"seed": seed, "error": f"{type(err).__name__}: {err}"[:500]})
            continue
        if r is None:
            harness.emit({"unavailable": True})
            return
        settings = r["settings"]
        rows.append({"seed": seed, **{k: r[k] for k in ("best_guess", "best_shown",
                                                           "iteration_s", "total_s")}})  # fmt: skip
    harness.emit({"runs": rows, "failed": failed, "settings": settings})


def summary(ours: dict, peer_runs: dict, n_answers: int) -> dict:
    """Final utilities, their paired differences with each peer, and time ratios."""
    final = np.asarray(ours["best_guess"])[:, -1]
    s = len(final)
    out = {"bayesrank": {"final_mean": float(final.mean()),
                         "final_se": float(final.std(ddof=1) / math.sqrt(s)),
                         "per_iteration_s": ours["first_call_s"] / (s * n_answers),
                         "per_iteration_s_compiled": ours["again_s"] / (s * n_answers),
                         "per_seed_s": ours["first_call_s"] / s}}  # fmt: skip
    row_of = {seed: i for i, seed in enumerate(ours.get("seeds", range(s)))}
    for name, res in peer_runs.items():
        if res is None or res.get("unavailable") or not res["runs"]:
            continue
        seeds = [r["seed"] for r in res["runs"]]
        theirs = np.array([r["best_guess"][-1] for r in res["runs"]])
        # paired by seed (a seed the peer failed on is left out)
        diff = final[[row_of[seed] for seed in seeds]] - theirs
        per_iter = statistics.mean(t for r in res["runs"] for t in r["iteration_s"])
        out[name] = {
            "final_mean": float(theirs.mean()),
            "final_se": float(theirs.std(ddof=1) / math.sqrt(len(theirs))),
            "paired_difference": float(diff.mean()),
            "paired_difference_se": float(diff.std(ddof=1) / math.sqrt(len(diff))),
            "bayesrank_wins": int(np.sum(diff > 0)),
            "seeds": len(seeds),
            "failed": res.get("failed", []),
            "ties": int(np.sum(diff == 0)),
            "per_iteration_s": per_iter,
            "time_ratio": per_iter / out["bayesrank"]["per_iteration_s"],
            "time_ratio_one_seed_first_call": sum(r["total_s"] for r in res["runs"])
            / len(res["runs"])
            / out["bayesrank"]["per_seed_s"],
        }
    return out


def table(results) -> str:
    lines = ["| function | error rate | noise | method | final utility (± se) | optimum | "
             "peer − bayesrank, paired (± se) | wins | s / iteration | ratio |",
             "| --- | ---: | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: |"]  # fmt: skip
    for case in results["cases"]:
        for name, row in case["summary"].items():
            paired = (
                ""
                if name == "bayesrank"
                else (f"{-row['paired_difference']:+.3f} ± {row['paired_difference_se']:.3f}")
            )
            wins = "" if name == "bayesrank" else f"{row['bayesrank_wins']}/{row['seeds']}"
            if name != "bayesrank" and row["failed"]:
                failed = len(row["failed"])
                name = f"{name} ({failed} seed{'s' if failed != 1 else ''} failed)"
            ratio = "" if name == "bayesrank" else f"{row['time_ratio']:.1f}x"
            lines.append(
                f"| {case['function']} | {case['error_rate']} | {case['noise']:.4g} | {name} | "
                f"{row['final_mean']:.3f} ± {row['final_se']:.3f} | {case['optimum']:.3f} | "
                f"{paired} | {wins} | {row['per_iteration_s']:.3f} | {ratio} |"
            )
        for name, res in case["peers"].items():
            if name not in case["summary"]:
                why = (res or {}).get("error", "not installed").strip().splitlines()[-1:]
                lines.append(f"| {case['function']} | {case['error_rate']} | "
                             f"{case['noise']:.4g} | {name} | failed: {' '.join(why)[:80]} |"
                             " | | | | |")  # fmt: skip
    return "\n".join(lines)


def curves(results, path: Path) -> Path | None:
    """The mean true utility of the best guess after each answer (± one standard error), one
    panel per (function, error rate), one line per method; None where matplotlib is absent."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    cases = results["cases"]
    fig, axes = plt.subplots(1, len(cases), figsize=(4.2 * len(cases), 3.4), squeeze=False)
    for ax, case in zip(axes[0], cases, strict=True):
        runs = {"bayesrank": np.asarray(case["bayesrank"]["best_guess"])}
        for name, res in case["peers"].items():
            if res and not res.get("unavailable"):
                runs[name] = np.asarray([r["best_guess"] for r in res["runs"]])
        for name, g in runs.items():
            mean, se = g.mean(0), g.std(0, ddof=1) / math.sqrt(len(g))
            x = np.arange(len(mean))
            ax.plot(x, mean, label=name)
            ax.fill_between(x, mean - se, mean + se, alpha=0.2)
        ax.axhline(case["optimum"], color="grey", lw=0.8, ls="--")
        ax.set_title(f"{case['function']}, {case['error_rate']:.0%} wrong answers")
        ax.set_xlabel("answers")
    axes[0][0].set_ylabel("true utility of the best guess")
    axes[0][0].legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    return path


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--functions", nargs="+", default=list(FUNCTIONS), choices=FUNCTIONS)
    parser.add_argument("--error-rates", nargs="+", type=float, default=[0.1, 0.2])
    parser.add_argument("--seeds", type=int, default=20)
    parser.add_argument("--first-seed", type=int, default=0, help="seeds first, first + 1, ...")
    parser.add_argument("--answers", type=int, default=60)
    parser.add_argument("--peers", nargs="*", default=["botorch", "optuna"])
    parser.add_argument("--peer-seeds", type=int, default=None, help="default: --seeds")
    parser.add_argument("--optuna-seeds", type=int, default=None, help="default: --peer-seeds")
    parser.add_argument("--learn-every", type=int, default=1)
    parser.add_argument("--learn-steps", type=int, default=10)
    parser.add_argument("--acquisition", default="eubo")
    parser.add_argument("--engine", default="ep")
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--plot", type=Path, default=None, help="a PNG of the curves")
    parser.add_argument(
        "--from-json", type=Path, default=None, help="the table (and --plot) of an earlier --out"
    )
    parser.add_argument("--worker", choices=("bayesrank", "botorch", "optuna"), default=None)
    parser.add_argument("--function", default=None)
    parser.add_argument("--noise", type=float, default=None)
    parser.add_argument("--seed-list", type=int, nargs="*", default=None)
    args = parser.parse_args(argv)
    if args.from_json:
        import json

        results = json.loads(args.from_json.read_text())
        print(table(results))
        if args.plot:
            print(f"curves: {curves(results, args.plot) or 'matplotlib is not installed'}")
        return results
    if args.worker == "bayesrank":
        bayesrank_worker(args)
        return {}
    if args.worker:
        args.peer = args.worker
        peer_worker(args)
        return {}
    seeds = list(range(args.first_seed, args.first_seed + args.seeds))
    peer_seeds = seeds[: args.peer_seeds or args.seeds]
    optuna_seeds = seeds[: args.optuna_seeds or len(peer_seeds)]
    ours_options = ("--learn-every", str(args.learn_every), "--learn-steps",
                    str(args.learn_steps), "--acquisition", args.acquisition, "--engine",
                    args.engine)  # fmt: skip
    cases = []
    started = time.perf_counter()
    for function in args.functions:
        f, dim = FUNCTIONS[function]
        for rate in args.error_rates:
            noise = noise_for(f, dim, rate)
            ours = harness.spawn(
                __file__, "--worker", "bayesrank", "--function", function, "--noise", repr(noise),
                "--answers", str(args.answers), "--seed-list", *map(str, seeds), *ours_options,
            )  # fmt: skip
            print(f"{function} {rate}: bayesrank first call {ours['first_call_s']:.1f} s, "
                  f"again {ours['again_s']:.1f} s", flush=True)  # fmt: skip
            peer_runs = {}
            for peer in args.peers:
                t = time.perf_counter()
                peer_seed_list = peer_seeds if peer == "botorch" else optuna_seeds
                try:
                    peer_runs[peer] = harness.spawn(
                        __file__, "--worker", peer, "--function", function, "--noise",
                        repr(noise), "--answers", str(args.answers), "--seed-list",
                        *map(str, peer_seed_list),
                    )  # fmt: skip
                except harness.WorkerError as err:
                    peer_runs[peer] = {"unavailable": True, "error": str(err)[-2000:]}
                print(f"  {peer}: {time.perf_counter() - t:.0f} s", flush=True)
            optimum = {"hartmann6": 3.32237, "ackley": 0.0}[function]
            cases.append({"function": function, "dim": dim, "error_rate": rate, "noise": noise,
                          "seeds": len(seeds), "first_seed": args.first_seed,
                          "optimum": optimum, "bayesrank": ours, "peers": peer_runs,
                          "summary": summary(ours, peer_runs, args.answers)})  # fmt: skip
            if args.out:  # after every case: a later failure loses nothing
                harness.write_json(args.out, {"cases": cases, "partial": True})
    results = {"machine": harness.machine_info(), "date": harness.utc_now(),
               "versions": harness.versions("jax", "botorch", "torch", "optuna",
                                            "optuna-dashboard"),
               "answers": args.answers, "cases": cases,
               "seconds": time.perf_counter() - started}  # fmt: skip
    print(table(results))
    if args.out:
        harness.write_json(args.out, results)
    if args.plot:
        print(f"curves: {curves(results, args.plot) or 'matplotlib is not installed'}")
    return results


if __name__ == "__main__":
    main()
