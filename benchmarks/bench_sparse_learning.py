"""The sparse engine's hyperparameter learning as a user calls it,
``XPGPModel(prior, SparseLaplace(rank)).fit(problem, learn_hyperparameters=True)``, on ``--n``
entities with three attributes and a clustering (the relation): wall time (compilation
included), the search's evaluations, the evidence estimate (and its se) at the median heuristic
and at the answer, and the held-out pair error and log-likelihood of the fit at each.

    python benchmarks/bench_sparse_learning.py [--n 2000] [--pairs 20000] [--rank 256]

Writes ``benchmarks/out/sparse_learning.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

import numpy as np


def problem(n: int, m: int, seed: int = 0):
    """Entities in 40 clusters; the latent value is a function of the attributes plus a cluster
    effect; ``m`` probit training pairs and ``m // 4`` held-out ones (winner first)."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 3))
    groups = rng.integers(0, 40, n)
    W = (groups[:, None] == groups[None, :]).astype(float)
    np.fill_diagonal(W, 0)
    xi = np.sin(2 * X[:, 0]) + X[:, 1] + rng.normal(size=40)[groups] + 0.3 * rng.normal(size=n)
    index = rng.integers(0, n, (m + m // 4, 2))
    index = index[index[:, 0] != index[:, 1]]
    won = xi[index[:, 0]] - xi[index[:, 1]] + 0.7 * rng.normal(size=len(index)) > 0
    pairs = np.where(won[:, None], index, index[:, ::-1])
    return X, W, pairs[:m], pairs[m:]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=2000)
    parser.add_argument("--pairs", type=int, default=20000)
    parser.add_argument("--rank", type=int, default=256)
    args = parser.parse_args()
    import jax

    jax.config.update("jax_enable_x64", True)
    from bayesrank import PreferenceProblem, XPGPModel
    from bayesrank.inference.engines import SparseLaplace
    from bayesrank.kernels import RBF, XPGP, Independent, RegularizedLaplacian
    from bayesrank.learning import initialize
    from bayesrank.learning.layout import stack

    X, W, train, test = problem(args.n, args.pairs)
    data = PreferenceProblem.create(train, X, relations=[W])
    prior = XPGP(RBF(), (RegularizedLaplacian(),), entity=Independent())
    engine = SparseLaplace(rank=args.rank)
    key = jax.random.key(0)

    def scores(post):
        p = np.clip(np.asarray(post.predict_pairs(test).prob), 1e-12, 1)
        return {"error": float(np.mean(p < 0.5)), "loglik": float(np.mean(np.log(p)))}

    t = time.perf_counter()
    learned = XPGPModel(prior, engine).fit(data, key=key, learn_hyperparameters=True)
    seconds = time.perf_counter() - t
    start = XPGPModel(initialize(prior, stack([data])), engine).fit(data, key=key)
    lr = learned.learning
    row = {
        "n": args.n,
        "train_pairs": len(train),
        "test_pairs": len(test),
        "rank": args.rank,
        "cpus": os.cpu_count(),
        "load": os.getloadavg()[0],
        "learn_and_fit_s": seconds,
        "evaluations": len(lr.factors),
        "converged": lr.converged,
        "at_bound": lr.at_bound,
        "start_log_evidence": lr.start_log_evidence,
        "start_se": lr.start_se,
        "log_evidence": lr.log_evidence,
        "se": lr.se,
        "learned_prior": repr(learned.prior),
        "start": scores(start),
        "learned": scores(learned),
    }
    print(json.dumps(row, indent=1))
    out = Path(__file__).parent / "out"
    out.mkdir(exist_ok=True)
    (out / "sparse_learning.json").write_text(json.dumps(row, indent=1))


if __name__ == "__main__":
    main()
