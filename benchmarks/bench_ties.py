"""The cost of ties, grades and weighted (repeated) judgements against pairs alone, at equal ``m``.

    python benchmarks/bench_ties.py [--sizes 300x600,300x1200] [--repeats 7]

Per size ``n x m``, on one RBF prior over ``n`` entities with random features, ``m`` judgements
drawn from the tie model itself (``xi = 2 x_0``, judge noise N(0, 1), margin 0.5, so about a
fifth are ties), through the public ``ep.fit`` as a user calls it:

1. ``pairs``: the judgements as probit pairs, ties dropped (today's model, ``m`` rows fewer ties);
2. ``pairs + ties``: every judgement, ties as ties (``ties=``, ``margin=0.5``): ``m`` rows;
3. ``copies``: the same judgements made ``c = 4`` times each, as ``4 m`` rows;
4. ``weights``: the same as ``m`` rows of weight 4 (the same posterior as 3, to 1e-9);
5. ``grades``: ``m`` grades instead (the ordinal model, 3 grades, thresholds -0.5 and 0.5),
   each of a random entity: ``m`` rows against the anchor entity (``n + 1`` entities).

Reports the first call (compilation included), the median of the repeated calls, EP's sweeps,
and each row's ratio to ``pairs``. Writes ``benchmarks/out/ties.json``.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import _harness as harness


def problem(n: int, m: int, seed: int = 0):
    import numpy as np

    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 3))
    K = np.exp(-0.5 * ((X[:, None] - X[None]) ** 2).sum(-1) / 3.0) + 0.05 * np.eye(n)
    f = 2.0 * X[:, 0]
    i = rng.integers(0, n, m)
    j = (i + rng.integers(1, n, m)) % n
    d = f[i] - f[j] + rng.normal(size=m)
    tie = np.abs(d) <= 0.5
    rows = np.where((d > 0)[:, None], np.stack([i, j], 1), np.stack([j, i], 1))
    return K, rows, tie


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="300x600,300x1200")
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--out", type=Path, default=Path(__file__).parent / "out" / "ties.json")
    args = parser.parse_args()
    harness.setup_jax()
    import jax
    import numpy as np

    from bayesrank.inference import ep
    from bayesrank.likelihoods import grade_outcomes

    copies = 4
    report = {"machine": harness.machine_info(), "versions": harness.versions("jax"), "rows": []}
    for n, m in harness.parse_sizes(args.sizes):
        K, rows, tie = problem(n, m)
        cases = {
            "pairs": lambda K=K, rows=rows, tie=tie: ep.fit(K, rows[~tie]),
            "pairs + ties": lambda K=K, rows=rows, tie=tie: ep.fit(K, rows, ties=tie, margin=0.5),
            "copies": lambda K=K, rows=rows, tie=tie: ep.fit(
                K, np.repeat(rows, copies, 0), ties=np.repeat(tie, copies), margin=0.5
            ),
            "weights": lambda K=K, rows=rows, tie=tie, m=m: ep.fit(
                K, rows, ties=tie, weights=np.full(m, float(copies)), margin=0.5
            ),
        }
        rng = np.random.default_rng(1)
        who = rng.integers(0, n, m)  # m grades of random entities, against the anchor n
        f = 2.0 * np.linalg.cholesky(K + 1e-9 * np.eye(n)) @ rng.normal(size=n) / 2.0
        grade = np.digitize(f[who] + rng.normal(size=m), [-0.5, 0.5])
        K_anchor = np.zeros((n + 1, n + 1))
        K_anchor[:n, :n] = K
        K_anchor[n, n] = np.finfo(float).eps ** 2 * np.max(np.diag(K))
        graded = np.column_stack([who, np.full(m, n)])
        cases["grades"] = lambda K_anchor=K_anchor, graded=graded, grade=grade, m=m: ep.fit(
            K_anchor, graded, outcomes=grade_outcomes(grade, np.ones(m), np.array([-0.5, 0.5]))
        )
        print(f"n = {n}, m = {m} ({int(tie.sum())} ties)")
        base = None
        for name, fit in cases.items():

            def call(fit=fit):
                return jax.block_until_ready(fit())

            first, post = harness.timed(call)
            times, post = harness.repeat(call, args.repeats)
            median = harness.best_and_median(times)["median_s"]
            base = median if base is None else base
            row = {
                "n": n,
                "m": m,
                "case": name,
                "first_call_s": first,
                "median_s": median,
                "sweeps": int(post.n_iter),
                "converged": bool(post.converged),
                "ratio_to_pairs": median / base,
            }
            report["rows"].append(row)
            print(
                f"  {name:14s} first {first:6.2f} s   median {median * 1e3:8.1f} ms   "
                f"sweeps {row['sweeps']:3d}   x{row['ratio_to_pairs']:.2f} of pairs"
            )
    harness.write_json(args.out, report)
    print(f"written: {args.out}")


if __name__ == "__main__":
    main()
