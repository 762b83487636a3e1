"""The precision-form Laplace (``bayesrank.inference.sparse``) on problems of growing size: time
and memory of the mode, of pair predictions and of the evidence, each curve's slope, and the
dense engine beside it where it still fits.

    python benchmarks/bench_sparse_laplace.py [--sizes 1000,3000,10000,30000,100000]
        [--prior graph|xpgp] [--dense-up-to 2000]

Per ``n``: a random graph of about 4 neighbours per entity and the regularized Laplacian prior
(``beta = iota = 1``, weight 1); with ``--prior xpgp`` also an RBF kernel on 5 random attributes
at rank 64 (pivoted Cholesky, its residual and an entity effect of 0.5 as a diagonal block).
``m = 10 n`` probit pairs drawn from the prior's own latent preferences plus judge noise, and
100,000 held-out pairs. Reported: the first call of ``mode`` (compilation included), a second
call, Newton's iterations and the most CG iterations of a step, the prediction of the held-out
pairs with variances from 64 draws (``sampled_pair_predictions``, first call), the held-out error
against the latent order, the exact (one CG solve per pair) prediction of 200 of them with the
sampled variances' z-scores, the evidence (64 probes, first call), the process's peak memory;
up to ``--dense-up-to`` also ``laplace.fit`` on the dense covariance and the largest difference of
the two modes. Each ``n`` runs in its own process (peak memory per size). The slopes are
least-squares fits of ``log time`` (and ``log memory``) on ``log n`` over the sizes, second calls
for the mode. Writes ``benchmarks/out/sparse_laplace_<prior>.json``.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import _harness as harness


def one(n: int, dense_up_to: int, kind: str) -> dict:
    harness.setup_jax()
    import jax
    import numpy as np
    import scipy.sparse as sp

    from bayesrank.inference import laplace
    from bayesrank.inference import sparse as S
    from bayesrank.kernels import RBF
    from bayesrank.kernels.lowrank import pivoted_cholesky

    rng = np.random.default_rng(0)
    edges = rng.integers(0, n, size=(2 * n, 2))
    edges = edges[edges[:, 0] != edges[:, 1]]
    W = sp.coo_matrix((np.ones(len(edges)), (edges[:, 0], edges[:, 1])), shape=(n, n))
    W = ((W + W.T) > 0).astype(float)
    blocks = [S.laplacian_precision(W)]
    features = None
    if kind == "xpgp":
        X = rng.uniform(size=(n, 5))
        low = pivoted_cholesky(RBF(1.0, 2.0), X, 64)
        features = low.features
        blocks.append(S.diagonal_precision(np.asarray(low.residual) + 0.5))
    prior = S.latent_prior(features, blocks)
    # the latent preferences: a prior draw (a posterior draw given one empty pair)
    no_pairs = S.SparseMode(np.zeros(prior.size), np.zeros(n), np.zeros(1), 0, True, 0)
    u = np.asarray(
        S.laplace.posterior_draws(prior, np.zeros((1, 2), np.int32), no_pairs,
                                  jax.random.key(2), 1, 1e-8)[0]
    )  # fmt: skip
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
            S.sampled_pair_predictions(prior, pairs, post, test, jax.random.key(0),
                                       n_samples=64, cg_tol=1e-6)
        )
    )  # fmt: skip
    exact_s, (_, _, exact) = harness.timed(
        lambda: jax.block_until_ready(S.pair_predictions(prior, pairs, post, test[:200]))
    )
    evidence_s, ev = harness.timed(
        lambda: jax.block_until_ready(S.log_evidence(prior, pairs, post, jax.random.key(3)))
    )
    z = (np.asarray(var[:200]) - np.asarray(exact)) / np.asarray(se[:200])
    row = {
        "n": n,
        "m": m,
        "prior": kind,
        "latent_size": prior.size,
        "first_call_s": first,
        "second_call_s": second,
        "newton_iterations": int(post.n_iter),
        "most_cg_iterations": int(post.cg_iterations),
        "converged": bool(post.converged),
        "predict_100000_pairs_sampled_s": sampled_s,
        "held_out_error": float(np.mean(np.asarray(prob) < 0.5)),
        "predict_200_pairs_exact_s": exact_s,
        "sampled_variance_max_abs_z": float(np.max(np.abs(z))),
        "sampled_variance_relative_se": float(np.median(np.asarray(se / var))),
        "evidence_s": evidence_s,
        "log_evidence": float(ev.log_z),
        "log_evidence_se": float(ev.se),
    }
    if n <= dense_up_to:
        P = [b.dense() for b in blocks]
        K = np.linalg.inv(P[0])
        if features is not None:
            K += np.asarray(features) @ np.asarray(features).T + np.linalg.inv(P[1])
        dense_first, ref = harness.timed(lambda: jax.block_until_ready(laplace.fit(K, pairs)))
        dense_second, ref = harness.timed(lambda: jax.block_until_ready(laplace.fit(K, pairs)))
        row["dense_first_call_s"] = dense_first
        row["dense_second_call_s"] = dense_second
        row["max_mode_difference"] = float(np.max(np.abs(np.asarray(ref.mean - post.mean))))
        row["dense_log_evidence"] = float(ref.log_evidence)
    row["peak_rss_mb"] = harness.peak_rss_mb()
    return row


def slopes(rows: list[dict]) -> dict:
    """Least-squares slopes of log(time or memory) on log n."""
    import numpy as np

    n = np.log([r["n"] for r in rows])
    out = {}
    for key in ("second_call_s", "predict_100000_pairs_sampled_s", "evidence_s", "peak_rss_mb"):
        if len(rows) > 1:
            out[key] = float(np.polyfit(n, np.log([r[key] for r in rows]), 1)[0])
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1000,3000,10000,30000,100000")
    parser.add_argument("--prior", choices=("graph", "xpgp"), default="xpgp")
    parser.add_argument("--dense-up-to", type=int, default=2000)
    parser.add_argument("--one", type=int, default=None, help=argparse.SUPPRESS)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    if args.one is not None:
        harness.emit(one(args.one, args.dense_up_to, args.prior))
        return
    out = args.out or Path(__file__).parent / "out" / f"sparse_laplace_{args.prior}.json"
    report = {"machine": harness.machine_info(), "versions": harness.versions("jax"), "rows": []}
    for (n,) in harness.parse_sizes(args.sizes):
        row = harness.spawn(
            sys.argv[0], "--one", str(n), "--dense-up-to", str(args.dense_up_to),
            "--prior", args.prior, timeout=1800,
        )  # fmt: skip
        report["rows"].append(row)
        print(json.dumps(row), flush=True)
    report["slopes"] = slopes(report["rows"])
    print("slopes (log-log):", json.dumps(report["slopes"]))
    harness.write_json(out, report)
    print(f"written: {out}")


if __name__ == "__main__":
    main()
