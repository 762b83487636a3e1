"""How accurate are bayesrank's engines and fits? EP, Laplace, NUTS; against BoTorch and choix.

The full protocol of ``bayesrank.experiments.inference`` (``--protocol full``: its docstring
says what it computes) on the benchmark data in ``../shared/data``: 32 seeded real problems (12
OHSUMED queries, 10 MQ2008 queries, 10 HetRec MovieLens users), part 1 (EP and Laplace against
a long NUTS run at each problem's default-fitted prior) and part 2 (bayesrank's default fit and
six variants, each problem its own hyperparameters), with two peers this script adds as methods
(the package imports neither; they are the ``bench`` extra):

- ``botorch``: ``PairwiseGP(X, comparisons)`` (its default ARD ``ScaleKernel(RBF)`` with Gamma
  priors) fitted by ``fit_gpytorch_mll`` on ``PairwiseLaplaceMarginalLogLikelihood``, float64;
  ``P(i > j) = Phi(dmu / sqrt(2 + dvar))`` (its likelihood ``Phi((f_i - f_j) / sqrt 2)``);
- ``choix-cv``: ``choix.ep_pairwise(n, pairs, alpha, model="probit")`` (no features: an
  independent ``N(0, 1/alpha)`` prior per entity) with ``alpha`` chosen by 5-fold
  cross-validated held-out log-likelihood over a grid.

Usage::

    python experiments/inference_accuracy.py [--data-dir ../shared/data] [--seed 0]
        [--warmup 1000] [--samples 2000] [--chains 4] [--skip-nuts] [--skip-fits]
        [--methods bayesrank,bayesrank-laplace,...,botorch,choix-cv] [--limit N]
        [--problems default|hetrec21|all] [--out experiments/out/inference_accuracy] [--tables]

The same as ``bayesrank experiment inference --protocol full --data-dir ../shared/data`` plus
the peers. Writes ``results.json``, ``table.txt`` (the tables of ``docs/results/inference.md``),
``inference.png`` and ``rows.json`` (after each problem: a rerun resumes) to ``--out``;
``--tables`` prints the table of the saved results.
"""

from __future__ import annotations

import argparse
import json
import time
import warnings
from pathlib import Path

import jax

jax.config.update("jax_enable_x64", True)
import numpy as np  # noqa: E402

from bayesrank.experiments import inference  # noqa: E402
from bayesrank.experiments.inference.methods import METHODS  # noqa: E402
from bayesrank.runtime import enable_compilation_cache  # noqa: E402

REPO_ROOT = Path(__file__).resolve().parents[1]
PROBLEMS = {"default": "accuracy", "hetrec21": "hetrec21", "all": "all"}


def fit_botorch(p, seed, threads=2):
    """BoTorch's ``PairwiseGP`` with its defaults on the problem dict ``p``: ``{mean, cov,
    noise_var}`` of its latent utilities on every entity (``benchmarks/bench_study.py`` uses it
    too), torch at ``threads`` intra-op threads (2, the 2-core machine's default)."""
    import torch
    from botorch.fit import fit_gpytorch_mll
    from botorch.models.pairwise_gp import PairwiseGP, PairwiseLaplaceMarginalLogLikelihood

    start = time.perf_counter()
    torch.set_num_threads(threads)
    np.random.seed(seed)  # noqa: NPY002 (PairwiseGP perturbs its fsolve start with it)
    torch.manual_seed(seed)
    X = torch.tensor(p["X"], dtype=torch.float64)
    model = PairwiseGP(X, torch.tensor(p["known"], dtype=torch.long))
    mll = PairwiseLaplaceMarginalLogLikelihood(model.likelihood, model)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fit_gpytorch_mll(mll)
    model.eval()
    with torch.no_grad():
        post = model.posterior(X)
        mean = post.mean.squeeze(-1).numpy()
        cov = post.covariance_matrix.numpy()
    return {"mean": mean, "cov": cov, "noise_var": 2.0, "seconds": time.perf_counter() - start}


def _choix_fit(n, pairs, alpha):
    import choix

    mean, cov = choix.ep_pairwise(n, [tuple(r) for r in pairs], alpha, model="probit")
    return np.asarray(mean), np.asarray(cov)


def fit_choix_cv(p, seed, grid=(0.01, 0.03, 0.1, 0.3, 1.0, 3.0, 10.0), folds=5):
    """choix's EP with ``alpha`` (prior precision) by ``folds``-fold CV log-likelihood."""
    from scipy.special import log_ndtr

    start = time.perf_counter()
    n, pairs = p["X"].shape[0], p["known"]
    rng = np.random.default_rng(seed)
    fold = rng.permutation(len(pairs)) % folds
    scores = []
    for alpha in grid:
        ll = 0.0
        for f in range(folds):
            mean, cov = _choix_fit(n, pairs[fold != f], alpha)
            i, j = pairs[fold == f, 0], pairs[fold == f, 1]
            z = (mean[i] - mean[j]) / np.sqrt(1.0 + cov[i, i] + cov[j, j] - 2 * cov[i, j])
            ll += np.sum(log_ndtr(z))
        scores.append(ll)
    alpha = grid[int(np.argmax(scores))]
    mean, cov = _choix_fit(n, pairs, alpha)
    seconds = time.perf_counter() - start
    return {"mean": mean, "cov": cov, "noise_var": 1.0, "alpha": alpha, "seconds": seconds}


PEERS = {"botorch": fit_botorch, "choix-cv": fit_choix_cv}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--data-dir", type=Path, default=REPO_ROOT / ".." / "shared" / "data")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--warmup", type=int, default=1000)
    parser.add_argument("--samples", type=int, default=2000)
    parser.add_argument("--chains", type=int, default=4)
    parser.add_argument("--skip-nuts", action="store_true", help="skip part 1 (engines vs NUTS)")
    parser.add_argument("--skip-fits", action="store_true", help="skip part 2 (fitted models)")
    parser.add_argument(
        "--methods", default=",".join([*METHODS, *PEERS]), help="part 2's methods, by commas"
    )
    parser.add_argument("--limit", type=int, default=None, help="first N problems only")
    parser.add_argument(
        "--problems",
        default="default",
        choices=list(PROBLEMS),
        help="the 32 problems, the 16 HetRec splits with 21 standardised attributes, or both",
    )
    parser.add_argument(
        "--out", type=Path, default=REPO_ROOT / "experiments/out/inference_accuracy"
    )
    parser.add_argument(
        "--tables", action="store_true", help="only print the tables of the saved results"
    )
    args = parser.parse_args(argv)
    if args.tables:
        from bayesrank.experiments.inference.report import table

        print(table(json.loads((args.out / "results.json").read_text())))
        return
    enable_compilation_cache()  # BAYESRANK_CACHE_DIR=off turns it off
    methods = [] if args.skip_fits else [m for m in args.methods.split(",") if m]
    options = argparse.Namespace(
        protocol="full",
        problems=PROBLEMS[args.problems],
        queries=args.limit,
        methods=methods,
        nuts=not args.skip_nuts,
        warmup=args.warmup,
        samples=args.samples,
        chains=args.chains,
        data_dir=args.data_dir,
        out=args.out,
        seed=args.seed,
    )
    inference.run(options, peers={m: PEERS[m] for m in methods if m in PEERS})


if __name__ == "__main__":
    main()
