"""The active study's run: every (prior, criterion) as one ``explore_queries`` call over the
queries and their repetitions, then the measures of the final posteriors."""

from __future__ import annotations

import argparse

import numpy as np

from .._common import Progress, recorded_warnings, write_outputs
from .protocol import check, covariance, load, split_query
from .report import figure, table

__all__ = ["run"]

NAME = "active"


def _error_auc(mean, cov, test) -> tuple[np.ndarray, np.ndarray]:
    """``error_auc`` of the posteriors ``mean: (R, n)``, ``cov: (R, n, n)`` on ``test: (t, 2)``,
    padded to bucketed sizes (padded documents: zero mean, unit variance, in no pair) so that
    queries of similar size share the compiled program."""
    from ...data.batch import bucket_size
    from ._programs import error_auc

    R, n = mean.shape
    N, T = bucket_size(n), bucket_size(len(test))
    M = np.zeros((R, N))
    M[:, :n] = mean
    C = np.tile(np.eye(N), (R, 1, 1))
    C[:, :n, :n] = cov
    pairs = np.tile(np.array([[0, 1]]), (T, 1))
    pairs[: len(test)] = test
    err, auc = error_auc(M, C, pairs, np.arange(T) < len(test))
    return np.asarray(err), np.asarray(auc)


def _summary(per_run: list[np.ndarray], repeats: bool) -> dict:
    """Per query ``(R, ...)`` values: their mean per query, the mean over queries and (random)
    every repetition."""
    per_query = np.stack([r.mean(axis=0) for r in per_run])
    entry = {"mean": per_query.mean(axis=0).tolist(), "per_query": per_query.tolist()}
    if repeats:
        entry["repetitions"] = [r.tolist() for r in per_run]
    return entry


def _one_model(model, queries, setups, opt, key, progress) -> tuple[dict, list[float]]:
    """The curves, AUC at ``k`` and asked pairs of every criterion under one prior."""
    from ...active import explore_queries

    k = opt["k"]
    Ks, rhos = zip(*(covariance(model, q) for q in queries), strict=True)
    tests = [t for t, _, _ in setups]
    # k = 0: the prior alone (zero mean: every test pair at 1/2)
    start = [_error_auc(np.zeros((1, len(K))), K[None], t) for K, t in zip(Ks, tests, strict=True)]
    entry = {"curves": {}, "auc": {}, "asked": {}}
    for criterion in opt["criteria"]:
        repeats = opt["repeats"] if criterion == "random" else None
        out = explore_queries(
            list(Ks),
            [c for _, c, _ in setups],
            [o for _, _, o in setups],
            k,
            criterion,
            key,
            repeats=repeats,
            tests=tests,
            engine=opt["engine"],
        )
        runs = [np.asarray(o.curve).reshape(-1, k) for o in out]
        curves = [
            np.concatenate([np.full((len(r), 1), s[0][0]), r], axis=1)
            for r, s in zip(runs, start, strict=True)
        ]
        auc = [
            _error_auc(
                np.asarray(o.mean).reshape(len(r), -1),
                np.asarray(o.cov).reshape(len(r), *K.shape),
                t,
            )[1]
            for o, r, K, t in zip(out, runs, Ks, tests, strict=True)
        ]
        pairs = [np.asarray(o.pairs).reshape(-1, k, 2) for o in out]
        entry["curves"][criterion] = _summary(curves, repeats is not None)
        entry["auc"][criterion] = _summary(auc, repeats is not None)
        entry["asked"][criterion] = [(p[0] if repeats is None else p).tolist() for p in pairs]
        progress(f"{model} {criterion} k={k}" + (f" x {repeats} runs" if repeats else ""))
    return entry, list(rhos)


def run(args: argparse.Namespace) -> dict:
    """Run the protocol (the package's docstring) with ``args``; print the table, write the
    outputs to ``args.out`` (if set) and return the results."""
    import jax

    opt = check(args)
    k = opt["k"]
    queries, source = load(opt, args.data_dir)
    setups = [
        split_query(q.grades, b, opt["seed"], opt["test_fraction"]) for b, q in enumerate(queries)
    ]
    for q, (_, cand, _) in zip(queries, setups, strict=True):
        if len(cand) < k:
            raise ValueError(
                f"--k {k} is larger than the {len(cand)} candidate pairs of query {q.qid} "
                f"(its labelled pairs less the test pairs): lower --k or --test-fraction, or "
                f"raise --min-pairs"
            )
    progress = Progress(len(opt["models"]) * len(opt["criteria"]))
    key = jax.random.PRNGKey(opt["seed"])
    models, rhos = {}, []
    with recorded_warnings() as caught:
        for model in opt["models"]:
            models[model], rhos = _one_model(model, queries, setups, opt, key, progress)
    results = {
        "experiment": NAME,
        "data": source,
        "settings": {
            **opt,
            "priors": "RBF(kappa=1, rho=median heuristic), unit weights, fixed; XPGP: + "
            "RegularizedLaplacian per relation + Independent(0.1); GP+entity: + "
            "Independent(0.1); GP: + 1e-6 jitter",
        },
        "queries": [
            {
                "qid": q.qid,
                "n": len(q.X),
                "pairs": len(t) + len(c),
                "candidates": len(c),
                "test": len(t),
                "rho": rho,
                "relations": list(q.relations),
            }
            for q, (t, c, _), rho in zip(queries, setups, rhos, strict=True)
        ],
        "ks": list(range(k + 1)),
        "models": models,
        "test_pairs": [t.tolist() for t, _, _ in setups],
    }
    results["warnings"] = caught.messages
    results["seconds"] = progress.seconds
    text = table(results)
    print(text)
    if args.out is not None:
        write_outputs(results, args.out, text, lambda: figure(results), NAME)
    return results
