"""The LETOR baseline protocol for bayesrank's RankSVM and RankBoost (and today's GBDT rankers).

For every fold of OHSUMED (LETOR 3.0, QueryLevelNorm) and MQ2008 (LETOR 4.0): train on
``train``, choose the hyperparameter on ``vali`` by MAP, report MAP, NDCG@1..10 and P@1..10 on
``test`` (``bayesrank.evaluation.evaluate_queries``: the official LETOR conventions), then average
over the folds. One model per collection (all training queries, pairs within queries).

Methods and what is chosen on ``vali``:

* ``RankSVM``: linear, squared hinge, ``C`` on a log grid (``--C-grid``; ``C`` multiplies the
  *sum* of the pair losses), warm-started along the grid.
* ``RankSVM-hinge``: the same with the hinge loss (the SVMlight objective), same grid.
* ``RankBoost``: threshold weak rankers and their complements (``--n-thresholds`` per feature,
  RankLib's evenly spaced candidates), ``T`` from ``--T-grid`` (prefixes of one ``max(T)`` run).
* ``RankBoost-RankLib``: only ``[x > theta]`` weak rankers (RankLib's class), same ``T`` grid.
* ``XGBoost``: ``rank:pairwise``, number of trees from ``--trees-grid``.
* ``LightGBM``: ``lambdarank``, number of trees from ``--trees-grid``.

The last two need their peer package (the ``bench`` extra; CPU builds: ``benchmarks/README.md``).
A method whose package does not import is skipped at the start, with a one-line message naming
the package, and the other methods' results are written as usual (the skipped ones are listed in
``results.json`` under ``"skipped"``).

Published figures (OHSUMED only; from the LETOR 3.0 baseline tables reproduced in
``../shared/seeds/002_*.txt``, Tables VII and VIII) are printed beside ours. JSON (per fold, the
chosen hyperparameter, the vali MAP of every candidate, versions) goes to ``<out>/results.json``
and the Markdown tables to ``<out>/table.md``.

Usage::

    python experiments/letor_baselines.py [--data-dir ../shared/data]
        [--datasets OHSUMED MQ2008] [--folds 1 2 3 4 5] [--methods ...]
        [--C-grid 1e-7 1e-6 ... 1e-1] [--T-grid 10 25 50 100 200 300 500]
        [--trees-grid 25 50 100 200] [--n-thresholds 10] [--out experiments/out/letor_baselines]
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import platform
import sys
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bayesrank.baselines import rankboost, ranksvm
from bayesrank.baselines._data import pairs_within_queries
from bayesrank.data.batch import pad_stack
from bayesrank.data.letor import load_letor
from bayesrank.data.userdata import queries_to_arrays
from bayesrank.metrics import letor_metrics
from bayesrank.runtime import enable_compilation_cache

METRICS = ["MAP"] + [f"NDCG@{k}" for k in range(1, 11)] + [f"P@{k}" for k in range(1, 11)]
METHODS = ["RankSVM", "RankSVM-hinge", "RankBoost", "RankBoost-RankLib", "XGBoost", "LightGBM"]

#: The methods that need a peer package: method -> (module to import, what pip installs).
PEERS = {"XGBoost": ("xgboost", "xgboost-cpu (or xgboost)"), "LightGBM": ("lightgbm", "lightgbm")}


def available_methods(methods, import_module=importlib.import_module):
    """``(methods to run, {skipped method: one-line reason})``: a method whose peer package
    does not import (not installed, or a broken install: any ``ImportError`` or ``OSError``,
    e.g. a missing shared library) is skipped. Imports the peers now, before any slow work."""
    keep, skipped = [], {}
    for method in methods:
        if method in PEERS:
            module, pip_name = PEERS[method]
            try:
                import_module(module)
            except (ImportError, OSError) as err:
                why = (str(err).splitlines() or [""])[0]
                skipped[method] = (
                    f"skipping {method}: cannot import {module} ({type(err).__name__}: {why}); "
                    f"pip install {pip_name}, or the bench extra (benchmarks/README.md)"
                )
                continue
        keep.append(method)
    return keep, skipped


# LETOR 3.0 OHSUMED baselines (QueryLevelNorm, 5-fold means), seed 002, Tables VII and VIII.
PUBLISHED = {
    "OHSUMED": {
        "RankSVM": {
            "MAP": 0.447,
            "NDCG": [0.50, 0.48, 0.46, 0.46, 0.46, 0.45, 0.45, 0.44, 0.44, 0.44],
            "P": [0.63, 0.62, 0.59, 0.58, 0.58, 0.56, 0.54, 0.52, 0.52, 0.51],
        },
        "RankBoost": {
            "MAP": 0.440,
            "NDCG": [0.50, 0.48, 0.47, 0.46, 0.45, 0.44, 0.44, 0.44, 0.43, 0.44],
            "P": [0.60, 0.60, 0.59, 0.56, 0.54, 0.52, 0.52, 0.50, 0.49, 0.50],
        },
    }
}

SVM_FIT = jax.jit(ranksvm.fit_linear, static_argnames=("loss", "tol", "max_iter", "smoothing"))
BOOST_FIT = jax.jit(rankboost.fit, static_argnames=("n_rounds", "complements"))
BOOST_PREDICT = jax.jit(rankboost.predict)


def stack(queries):
    return queries_to_arrays(queries, by_position=True)  # folds' files may reuse a qid


_LETOR = jax.jit(jax.vmap(letor_metrics, in_axes=(0, 0, 0, None)), static_argnums=3)
_PADDED = {}


def evaluate(queries, score_fn):
    """Mean MAP, NDCG@1..10, P@1..10 over ``queries``: what ``evaluation.evaluate_queries``
    computes (the same ``metrics.letor_metrics``, vmapped over padded queries), with the padding
    and the compiled function kept across calls."""
    key = id(queries)
    if key not in _PADDED:
        labels, mask = pad_stack([q.grades for q in queries])
        bounds = np.cumsum([0] + [q.n_docs for q in queries])
        _PADDED[key] = (queries, stack(queries)[0], labels, mask, bounds)
    _, X, labels, mask, bounds = _PADDED[key]
    scores, _ = pad_stack(np.split(np.asarray(score_fn(X), dtype=np.float64), bounds[1:-1]))
    m = jax.device_get(_LETOR(scores, labels, mask, 10))
    out = {"MAP": float(np.mean(m.map))}
    out.update({f"NDCG@{k}": float(np.mean(m.ndcg[:, k - 1])) for k in range(1, 11)})
    out.update({f"P@{k}": float(np.mean(m.precision[:, k - 1])) for k in range(1, 11)})
    return out


def strip(result):
    return {k: result[k] for k in METRICS}


def select(candidates, vali, test, score_fns):
    """Vali MAP of every candidate; test metrics of the best (first best on ties)."""
    vali_map = {}
    for c in candidates:
        vali_map[c] = evaluate(vali, score_fns[c])["MAP"]
    best = max(candidates, key=lambda c: vali_map[c])
    return best, {str(c): v for c, v in vali_map.items()}, strip(evaluate(test, score_fns[best]))


def run_ranksvm(train, vali, test, C_grid, loss):
    X, y, qid = stack(train)
    pairs = jnp.asarray(pairs_within_queries(y, qid))
    Xj = jnp.asarray(X)
    w = jnp.zeros(X.shape[1])
    weights, info = {}, {}
    t0 = time.perf_counter()
    for C in C_grid:  # warm start along the grid
        sol = SVM_FIT(Xj, pairs, C, loss=loss, w0=w)
        w = sol.w
        weights[C] = np.asarray(w)
        info[str(C)] = {"n_iter": int(sol.info.n_iter), "converged": bool(sol.info.converged)}
    fit_s = time.perf_counter() - t0
    fns = {C: (lambda Z, w=weights[C]: Z @ w) for C in C_grid}
    best, vali_map, test_metrics = select(C_grid, vali, test, fns)
    return {
        "chosen": {"C": best},
        "vali_MAP": vali_map,
        "test": test_metrics,
        "solver": info,
        "fit_s": fit_s,
        "n_pairs": int(pairs.shape[0]),
    }


def run_rankboost(train, vali, test, T_grid, n_thresholds, complements):
    X, y, qid = stack(train)
    pairs = jnp.asarray(pairs_within_queries(y, qid))
    th = jnp.asarray(rankboost.candidate_thresholds(X, n_thresholds))
    t0 = time.perf_counter()
    model, info = BOOST_FIT(
        jnp.asarray(X), pairs, th, n_rounds=max(T_grid), complements=complements
    )
    jax.block_until_ready(model)
    fit_s = time.perf_counter() - t0
    fns = {T: (lambda Z, T=T: BOOST_PREDICT(model, jnp.asarray(Z), None, T)) for T in T_grid}
    best, vali_map, test_metrics = select(T_grid, vali, test, fns)
    loss = np.asarray(info.loss)
    return {
        "chosen": {"T": best},
        "vali_MAP": vali_map,
        "test": test_metrics,
        "train_exp_loss": {str(T): float(loss[T - 1]) for T in T_grid},
        "fit_s": fit_s,
    }


def group_sizes(queries):
    return [q.n_docs for q in queries]


def run_xgboost(train, vali, test, trees_grid):
    import xgboost as xgb

    X, y, _ = stack(train)
    model = xgb.XGBRanker(
        objective="rank:pairwise",
        n_estimators=max(trees_grid),
        learning_rate=0.1,
        max_depth=6,
        n_jobs=2,
        tree_method="hist",
        random_state=0,
    )
    t0 = time.perf_counter()
    model.fit(X, y, group=group_sizes(train))
    fit_s = time.perf_counter() - t0
    fns = {n: (lambda Z, n=n: model.predict(Z, iteration_range=(0, n))) for n in trees_grid}
    best, vali_map, test_metrics = select(trees_grid, vali, test, fns)
    return {"chosen": {"n_trees": best}, "vali_MAP": vali_map, "test": test_metrics, "fit_s": fit_s}


def run_lightgbm(train, vali, test, trees_grid):
    import lightgbm as lgb

    X, y, _ = stack(train)
    model = lgb.LGBMRanker(
        objective="lambdarank",
        n_estimators=max(trees_grid),
        learning_rate=0.05,
        num_leaves=31,
        min_child_samples=20,
        n_jobs=2,
        random_state=0,
        verbose=-1,
    )
    t0 = time.perf_counter()
    model.fit(X, y, group=group_sizes(train))
    fit_s = time.perf_counter() - t0
    fns = {n: (lambda Z, n=n: model.predict(Z, num_iteration=n)) for n in trees_grid}
    best, vali_map, test_metrics = select(trees_grid, vali, test, fns)
    return {"chosen": {"n_trees": best}, "vali_MAP": vali_map, "test": test_metrics, "fit_s": fit_s}


def versions():
    out = {"python": platform.python_version(), "jax": jax.__version__, "numpy": np.__version__}
    for name in ("xgboost", "lightgbm"):
        try:
            out[name] = __import__(name).__version__
        except ImportError:
            out[name] = None
    return out


def fmt_row(name, values):
    return "| " + name + " | " + " | ".join(values) + " |"


def tables(results, published):
    """Markdown: per dataset, MAP + NDCG@1..10, and P@1..10, means over folds."""
    lines = []
    for dataset, methods in results.items():
        heads = [
            ("MAP, NDCG@k", ["MAP"] + [f"NDCG@{k}" for k in range(1, 11)]),
            ("P@k", [f"P@{k}" for k in range(1, 11)]),
        ]
        for title, cols in heads:
            lines.append(
                f"\n**{dataset}, test, mean of {len(next(iter(methods.values())))} folds:"
                f" {title}**\n"
            )
            lines.append(fmt_row("method", cols))
            lines.append("|" + " --- |" * (len(cols) + 1))
            for method, folds in methods.items():
                means = {c: np.mean([f["test"][c] for f in folds]) for c in cols}
                lines.append(fmt_row(method, [f"{means[c]:.4f}" for c in cols]))
            for method, pub in published.get(dataset, {}).items():
                vals = []
                for c in cols:
                    if c == "MAP":
                        vals.append(f"{pub['MAP']:.3f}")
                    else:
                        kind, k = c.split("@")
                        vals.append(f"{pub[kind][int(k) - 1]:.2f}")
                lines.append(fmt_row(f"{method} (published, LETOR 3.0)", vals))
        lines.append("\nChosen on vali, per fold:\n")
        for method, folds in methods.items():
            lines.append(f"- {method}: " + ", ".join(json.dumps(f["chosen"]) for f in folds))
    return "\n".join(lines) + "\n"


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--data-dir", default=os.environ.get("BAYESRANK_SHARED_DATA", "../shared/data"))
    p.add_argument("--datasets", nargs="+", default=["OHSUMED", "MQ2008"])
    p.add_argument("--folds", nargs="+", type=int, default=[1, 2, 3, 4, 5])
    p.add_argument("--methods", nargs="+", choices=METHODS, default=METHODS)
    p.add_argument(
        "--C-grid", nargs="+", type=float, default=[1e-7, 1e-6, 1e-5, 1e-4, 1e-3, 1e-2, 1e-1]
    )
    p.add_argument("--T-grid", nargs="+", type=int, default=[10, 25, 50, 100, 200, 300, 500])
    p.add_argument("--trees-grid", nargs="+", type=int, default=[25, 50, 100, 200])
    p.add_argument("--n-thresholds", type=int, default=10)
    p.add_argument("--out", default="experiments/out/letor_baselines")
    args = p.parse_args(argv)
    methods, skipped = available_methods(args.methods)
    for message in skipped.values():
        print(message, flush=True)
    if not methods:
        sys.exit("nothing to run: every method asked for was skipped")
    jax.config.update("jax_enable_x64", True)
    enable_compilation_cache()  # compiled programs kept on disk between runs

    data = Path(args.data_dir)
    paths = {"OHSUMED": data / "OHSUMED" / "QueryLevelNorm", "MQ2008": data / "MQ2008"}
    results = {}
    t_start = time.perf_counter()
    for dataset in args.datasets:
        results[dataset] = {m: [] for m in methods}
        for fold in args.folds:
            d = paths[dataset] / f"Fold{fold}"
            train, vali, test = (load_letor(d / f"{s}.txt.gz") for s in ("train", "vali", "test"))
            for method in methods:
                t0 = time.perf_counter()
                if method == "RankSVM":
                    r = run_ranksvm(train, vali, test, args.C_grid, "squared_hinge")
                elif method == "RankSVM-hinge":
                    r = run_ranksvm(train, vali, test, args.C_grid, "hinge")
                elif method == "RankBoost":
                    r = run_rankboost(train, vali, test, args.T_grid, args.n_thresholds, True)
                elif method == "RankBoost-RankLib":
                    r = run_rankboost(train, vali, test, args.T_grid, args.n_thresholds, False)
                elif method == "XGBoost":
                    r = run_xgboost(train, vali, test, args.trees_grid)
                elif method == "LightGBM":
                    r = run_lightgbm(train, vali, test, args.trees_grid)
                else:
                    raise ValueError(f"unknown method {method!r}")
                r["fold"] = fold
                r["wall_s"] = time.perf_counter() - t0
                results[dataset][method].append(r)
                print(
                    f"{dataset} Fold{fold} {method:18s} chosen {r['chosen']} "
                    f"test MAP {r['test']['MAP']:.4f} NDCG@10 {r['test']['NDCG@10']:.4f} "
                    f"({r['wall_s']:.1f} s)",
                    flush=True,
                )
    table = tables(results, PUBLISHED)
    print(table)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    settings = {k: v for k, v in vars(args).items()}
    payload = {
        "settings": settings,
        "versions": versions(),
        "machine": {"cpus": os.cpu_count(), "platform": platform.platform()},
        "total_s": time.perf_counter() - t_start,
        "published": PUBLISHED,
        "skipped": skipped,
        "results": results,
    }
    (out / "results.json").write_text(json.dumps(payload, indent=1))
    (out / "table.md").write_text(table)
    print(f"wrote {out / 'results.json'} and {out / 'table.md'}")


if __name__ == "__main__":
    main()
