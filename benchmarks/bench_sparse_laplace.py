"""The precision-form Laplace (``bayesrank.inference.sparse``) on graph priors of
growing size: time and memory of the mode and of pair predictions, and the dense engine beside
it where it still fits.

    python benchmarks/bench_sparse_laplace.py [--sizes 1000,10000,100000] [--dense-up-to 2000]

Per ``n``: a random graph of about 4 neighbours per entity, the regularized Laplacian prior
(``beta = 1``, ``iota = 1``, weight 1), ``m = 10 n`` probit pairs drawn from a latent
``u ~ N(0, 1)`` per entity plus judge noise, and 100,000 held-out pairs. Reported: the first
call of ``mode`` (compilation included), a second call, Newton's iterations, the prediction of
the held-out pairs with variances from 200 draws (``sampled_pair_predictions``; first call),
their error against the latent order, the exact (one CG solve per pair) prediction of 200 of
them with the sampled variances' z-scores against it, and the process's peak memory; up to
``--dense-up-to`` also ``laplace.fit`` on the dense ``K = Q^-1`` and the largest difference of
the two modes. Each ``n`` runs in its own process (peak memory per size). Writes
``benchmarks/out/sparse_laplace.json``.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import _harness as harness


def one(n: int, dense_up_to: int) -> dict:
    harness.setup_jax()
    import jax
    import numpy as np
    import scipy.sparse as sp

    from bayesrank.inference import laplace
    from bayesrank.inference import sparse as S

    rng = np.random.default_rng(0)
    edges = rng.integers(0, n, size=(2 * n, 2))
    edges = edges[edges[:, 0] != edges[:, 1]]
    W = sp.coo_matrix((np.ones(len(edges)), (edges[:, 0], edges[:, 1])), shape=(n, n))
    W = ((W + W.T) > 0).astype(float)
    Q = S.laplacian_precision(W)
    prior = S.latent_prior(blocks=[Q])
    u = rng.normal(size=n)
    m = 10 * n
    i = rng.integers(0, n, m)
    j = (i + rng.integers(1, n, m)) % n
    win = u[i] + rng.normal(size=m) > u[j]
    pairs = np.where(win[:, None], np.c_[i, j], np.c_[j, i])
    a = rng.integers(0, n, 100_000)
    b = (a + rng.integers(1, n, 100_000)) % n
    test = np.where((u[a] > u[b])[:, None], np.c_[a, b], np.c_[b, a])

    def fit():
        return jax.block_until_ready(S.mode(prior, pairs))

    first, post = harness.timed(fit)
    second, post = harness.timed(fit)
    sampled_s, (prob, _, var, se) = harness.timed(
        lambda: jax.block_until_ready(
            S.sampled_pair_predictions(prior, pairs, post, test, jax.random.key(0))
        )
    )
    exact_s, (_, _, exact) = harness.timed(
        lambda: jax.block_until_ready(S.pair_predictions(prior, pairs, post, test[:200]))
    )
    z = (np.asarray(var[:200]) - np.asarray(exact)) / np.asarray(se[:200])
    row = {
        "n": n,
        "m": m,
        "edges": int(Q.omega.shape[0]),
        "first_call_s": first,
        "second_call_s": second,
        "newton_iterations": int(post.n_iter),
        "converged": bool(post.converged),
        "predict_100000_pairs_sampled_s": sampled_s,
        "held_out_error": float(np.mean(np.asarray(prob) < 0.5)),
        "predict_200_pairs_exact_s": exact_s,
        "sampled_variance_max_abs_z": float(np.max(np.abs(z))),
        "sampled_variance_relative_se": float(np.median(np.asarray(se / var))),
    }
    if n <= dense_up_to:
        K = np.linalg.inv(Q.dense())
        dense_first, ref = harness.timed(lambda: jax.block_until_ready(laplace.fit(K, pairs)))
        dense_second, ref = harness.timed(lambda: jax.block_until_ready(laplace.fit(K, pairs)))
        row["dense_first_call_s"] = dense_first
        row["dense_second_call_s"] = dense_second
        row["max_mode_difference"] = float(np.max(np.abs(np.asarray(ref.mean - post.mean))))
    row["peak_rss_mb"] = harness.peak_rss_mb()
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1000,10000,100000")
    parser.add_argument("--dense-up-to", type=int, default=2000)
    parser.add_argument("--one", type=int, default=None, help=argparse.SUPPRESS)
    parser.add_argument(
        "--out", type=Path, default=Path(__file__).parent / "out" / "sparse_laplace.json"
    )
    args = parser.parse_args()
    if args.one is not None:
        harness.emit(one(args.one, args.dense_up_to))
        return
    report = {"machine": harness.machine_info(), "versions": harness.versions("jax"), "rows": []}
    for (n,) in harness.parse_sizes(args.sizes):
        row = harness.spawn(
            sys.argv[0], "--one", str(n), "--dense-up-to", str(args.dense_up_to), timeout=1800
        )
        report["rows"].append(row)
        print(json.dumps(row))
    harness.write_json(args.out, report)
    print(f"written: {args.out}")


if __name__ == "__main__":
    main()
