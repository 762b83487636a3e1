"""Pair predictions of the sparse engine, as users meet them: (1) exact variances (one CG solve
per pair) against sampled ones (``n_samples`` draws, one CG solve each) by number of pairs, the
cost behind ``SparseLaplace.exact_up_to``; (2) ``bayesrank predict --pairs`` on a sparse model
of one query of ``--entities`` entities (every pair: ``n (n - 1) / 2``), wall time and peak
memory of the command, which streams the pair file in blocks.

    python benchmarks/bench_sparse_pairs.py [--n 5000] [--counts 50,200,1000]
        [--entities 2000] [--pythonpath DIR]

``--pythonpath``: run part (2) with another checkout's ``bayesrank`` (before and after).
Writes ``benchmarks/out/sparse_pairs.json``.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import _harness as harness


def problem(n: int, m: int, seed: int = 0):
    """``n`` entities with 3 uniform attributes and a random graph, ``m`` probit-free pairs of
    a known utility (winner first)."""
    import numpy as np

    rng = np.random.default_rng(seed)
    X = rng.uniform(size=(n, 3))
    a, b = rng.integers(0, n, size=(2, 2 * n))
    edges = np.unique(np.sort(np.c_[a, b][a != b], axis=1), axis=0)
    utility = np.sin(6 * X[:, 0]) + X[:, 1]
    i, j = rng.integers(0, n, size=(2, m))
    keep = i != j
    i, j = i[keep], j[keep]
    pairs = np.where((utility[i] > utility[j])[:, None], np.c_[i, j], np.c_[j, i])
    return X, edges, pairs


def exact_against_sampled(n: int, counts: list[int]) -> list[dict]:
    import jax
    import numpy as np

    from bayesrank import PreferenceProblem, SparseLaplace, XPGPModel
    from bayesrank.inference.sparse.laplace import pair_predictions, sampled_pair_predictions
    from bayesrank.kernels import RBF, XPGP, Independent, RegularizedLaplacian

    X, edges, pairs = problem(n, 8 * n + max(counts))
    W = np.zeros((n, n))
    W[edges[:, 0], edges[:, 1]] = W[edges[:, 1], edges[:, 0]] = 1.0
    prior = XPGP(RBF(1.0, 2.0), (RegularizedLaplacian(),), entity=Independent(0.7))
    train, test = pairs[: 8 * n], pairs[8 * n :]
    post = (
        XPGPModel(prior, SparseLaplace(rank=128))
        .fit(PreferenceProblem.create(train, X=X, relations=[W]))
        .result
    )
    rows = []
    for p in counts:

        def exact(p=p):
            return jax.block_until_ready(
                pair_predictions(post.latent, post.pairs, post.fit, test[:p])
            )

        def sampled(p=p):
            return jax.block_until_ready(sampled_pair_predictions(
                post.latent, post.pairs, post.fit, test[:p], jax.random.key(0)))  # fmt: skip

        row = {"pairs": p}
        for name, fn in (("exact", exact), ("sampled", sampled)):
            row[f"{name}_cold_s"], _ = harness.timed(fn)
            row[f"{name}_warm_s"], _ = harness.timed(fn)
        rows.append(row)
        print(f"n = {n}, {p} pairs: exact {row['exact_warm_s']:.2f} s, sampled (200 draws) "
              f"{row['sampled_warm_s']:.2f} s (warm)", flush=True)  # fmt: skip
    return rows


def predict_command(entities: int, pythonpath: str | None) -> dict:
    """``bayesrank fit`` (sparse, fixed) then ``bayesrank predict --pairs`` on a study folder
    of one query; the predict command's wall seconds and peak RSS (``/usr/bin/time``-free:
    ``resource.getrusage`` of the child)."""
    import numpy as np

    X, edges, pairs = problem(entities, 10 * entities)
    env = {**os.environ, "BAYESRANK_CACHE_DIR": "off"}
    if pythonpath:
        env["PYTHONPATH"] = pythonpath
    with tempfile.TemporaryDirectory() as work:
        query = Path(work) / "data" / "q1"
        query.mkdir(parents=True)
        np.savetxt(query / "attributes.csv", X, delimiter=",")
        np.savetxt(query / "comparisons.csv", pairs, fmt="%d", delimiter=",")
        np.savetxt(query / "relation-graph.csv", edges, fmt="%d", delimiter=",")
        bayesrank = [sys.executable, "-m", "bayesrank"]
        fit = [*bayesrank, "fit", str(query.parent), "--out", f"{work}/m", "--approximation",
               "sparse", "--inference", "laplace", "--fixed", "--quiet"]  # fmt: skip
        # cwd: the temporary folder, so that ``python -m`` imports the --pythonpath bayesrank,
        # not the checkout's (``-m`` puts the working directory first on sys.path)
        subprocess.run(fit, check=True, env=env, capture_output=True, cwd=work)
        code = (
            "import resource, subprocess, sys, time, json; t = time.perf_counter(); "
            "r = subprocess.run(sys.argv[1:], capture_output=True, text=True); "
            "print(json.dumps({'rc': r.returncode, 'wall_s': time.perf_counter() - t, "
            "'peak_rss_mb': resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024, "
            "'err': r.stderr[-500:]}))"
        )
        predict = [*bayesrank, "predict", f"{work}/m", "--pairs", f"{work}/p.csv"]
        done = subprocess.run([sys.executable, "-c", code, *predict], env=env, cwd=work,
                              capture_output=True, text=True, check=True)  # fmt: skip
        import json

        out = json.loads(done.stdout.strip().splitlines()[-1])
        out["pairs"] = entities * (entities - 1) // 2
        out["file_mb"] = (Path(work) / "p.csv").stat().st_size / 2**20 if out["rc"] == 0 else 0
    print(f"bayesrank predict --pairs, {entities} entities ({out['pairs']} pairs): "
          f"{out['wall_s']:.1f} s, peak RSS {out['peak_rss_mb']:.0f} MB, rc {out['rc']}"
          + (f" ({out['err']})" if out["rc"] else ""), flush=True)  # fmt: skip
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=5000, help="entities of part (1)")
    parser.add_argument("--counts", default="50,200,1000", help="pair counts of part (1)")
    parser.add_argument("--entities", type=int, default=2000, help="entities of part (2)")
    parser.add_argument("--pythonpath", default=None, help="bayesrank of part (2)")
    parser.add_argument("--parts", default="1,2", help="which parts to run")
    args = parser.parse_args()
    harness.setup_jax()
    parts = set(args.parts.split(","))
    started = time.strftime("%Y-%m-%d %H:%M")
    result = {"machine": harness.machine_info(), "started": started}
    if "1" in parts:
        result["exact_against_sampled"] = exact_against_sampled(
            args.n, [int(c) for c in args.counts.split(",")]
        )
    if "2" in parts:
        result["predict_command"] = predict_command(args.entities, args.pythonpath)
    harness.write_json(Path(__file__).parent / "out" / "sparse_pairs.json", result)


if __name__ == "__main__":
    main()
