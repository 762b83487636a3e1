"""``bayesrank experiment baselines``: bayesrank's RankSVM (linear) and RankBoost on held-out
queries, scored the LETOR way (MAP, NDCG@1..k, P@1..k: ``bayesrank.evaluation.evaluate_queries``,
the official conventions; every query counts, one without a relevant document as 0).

Protocol, by the data:

* **the bundled sample, or a LETOR file** (``--data-dir FILE``): ``--folds`` query folds
  (default 5: on the five-query sample, leave one query out), query ``i`` in fold
  ``i mod folds`` in file order; each fold's queries are scored by models trained on the other
  folds' queries (all pairs within a query), so every query is scored once, by a model that
  never saw it. There is no validation set: the hyperparameters are the estimators' defaults
  (``--C 1``, ``--rounds 300``), and several values (``--C 0.01 1``) are each reported, none
  chosen;
* **a LETOR fold folder** (``--data-dir Fold1``: ``train``, ``test`` and optionally ``vali``,
  ``.txt.gz`` or ``.txt``; a folder holding none of them is one collection, as a file): trained
  on ``train``, scored on ``test``; with ``vali`` and several values, the value with the best
  ``vali`` MAP is chosen (the first on ties), as ``experiments/letor_baselines.py`` does.

Methods: ``bayesrank.RankSVM`` (linear, squared hinge, ``C`` multiplying the *sum* of the
pair losses) and ``bayesrank.RankBoost`` (threshold weak rankers and their complements,
``--n-thresholds`` evenly spaced candidates per feature, ``T = --rounds``; a grid of ``T`` is
the prefixes of one run).

Reported (``results.json``): per method and value the mean metrics, each query's, and each
test query's scores (so that anything can be recomputed); the table: MAP, NDCG and P at 1, 3,
5, 10; the figure (``baselines.png``): NDCG@k against k, mean over the test queries, band +- one
standard error (``bayesrank.plot.learning_curves``).

Reduced from ``experiments/letor_baselines.py`` (five folds of OHSUMED and MQ2008, the C and T
grids chosen on vali, the hinge RankSVM, RankLib's RankBoost, XGBoost and LightGBM, published
figures beside): bayesrank's two estimators only, nothing optional.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

from ._common import (
    Progress,
    check_positive,
    fold_files,
    load_fold,
    load_queries,
    recorded_warnings,
    warning_lines,
    write_outputs,
)

NAME = "baselines"
HELP = "RankSVM and RankBoost: MAP, NDCG@k, P@k on held-out queries (LETOR conventions)"

METHODS = ("RankSVM", "RankBoost")
#: The cut-offs in the table.
SHOWN = (1, 3, 5, 10)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The protocol's options (the common ``--data-dir``, ``--out``, ``--seed`` are the CLI's)."""
    parser.add_argument(
        "--methods", nargs="+", choices=METHODS, default=list(METHODS), help="default both"
    )
    parser.add_argument(
        "--C", nargs="+", type=float, default=[1.0], help="RankSVM's C, one or more (default 1)"
    )
    parser.add_argument(
        "--rounds",
        nargs="+",
        type=int,
        default=[300],
        help="RankBoost's rounds T, one or more (default 300)",
    )
    parser.add_argument(
        "--n-thresholds", type=int, default=10, help="RankBoost's thresholds per feature (10)"
    )
    parser.add_argument(
        "--folds",
        type=int,
        default=5,
        help="query folds on the sample or a file (default 5; at most the number of queries)",
    )
    parser.add_argument("--max-k", type=int, default=10, help="largest cut-off (default 10)")


def _check(args) -> dict:
    methods = list(dict.fromkeys(args.methods))
    for m in methods:
        if m not in METHODS:
            raise ValueError(f"--methods: {m!r} is not one of {', '.join(METHODS)}")
    if not methods:
        raise ValueError("--methods: name at least one method")
    C = [float(c) for c in args.C]
    if not C or not all(np.isfinite(c) and c > 0 for c in C):
        raise ValueError(f"--C must be one or more positive finite numbers, got {args.C!r}")
    rounds = [check_positive(t, "--rounds") for t in args.rounds]
    if not rounds:
        raise ValueError("--rounds: give at least one number of rounds")
    return {
        "methods": methods,
        "C": list(dict.fromkeys(C)),
        "rounds": list(dict.fromkeys(rounds)),
        "n_thresholds": check_positive(args.n_thresholds, "--n-thresholds"),
        "folds": check_positive(args.folds, "--folds", low=2),
        "max_k": check_positive(args.max_k, "--max-k"),
        "seed": int(args.seed),
    }


def fit_grid(method: str, train, opt: dict) -> dict:
    """``{value: (score function X -> (n,), fit info)}`` of ``method`` trained on ``train``
    at each value of its grid."""
    from ..baselines import RankBoost, RankSVM
    from ..data.userdata import queries_to_arrays

    X, y, qid = queries_to_arrays(train, by_position=True)  # files may reuse a qid
    if method == "RankSVM":
        out = {}
        for C in opt["C"]:
            model = RankSVM(C=C).fit(X, y, qid)
            info = {"n_iter": int(model.n_iter_), "converged": bool(model.converged_)}
            out[C] = (model.predict, info)
        return out
    model = RankBoost(n_rounds=max(opt["rounds"]), n_thresholds=opt["n_thresholds"])
    model.fit(X, y, qid)
    loss = np.asarray(model.info_.loss)
    return {
        T: (
            lambda Z, T=T: model.predict(Z, n_rounds=T),
            {"train_exp_loss": float(loss[min(T, len(loss)) - 1])},
        )
        for T in opt["rounds"]
    }


def _param(method: str) -> str:
    return "C" if method == "RankSVM" else "T"


def _scores(fn, queries) -> list[np.ndarray]:
    return [np.asarray(fn(q.X), dtype=np.float64) for q in queries]


def _query_folds(queries, opt, progress) -> tuple[list, dict, list]:
    """Cross-validation over queries: ``(test queries, {(method, value): (scores per query,
    [fit info per fold], None)}, folds)``."""
    n_folds = opt["folds"]
    if n_folds > len(queries):
        raise ValueError(
            f"--folds {n_folds} is more than the {len(queries)} queries of the data: at most "
            f"{len(queries)} (one query per fold)"
        )
    fold_of = np.arange(len(queries)) % n_folds
    scores = {}
    folds = []
    for f in range(n_folds):
        train = [q for q, g in zip(queries, fold_of, strict=True) if g != f]
        test = [b for b, g in enumerate(fold_of) if g == f]
        folds.append({"train": [q.qid for q in train], "test": [queries[b].qid for b in test]})
        for method in opt["methods"]:
            for value, (fn, info) in fit_grid(method, train, opt).items():
                per_query, infos, _ = scores.setdefault(
                    (method, value), ([None] * len(queries), [], None)
                )
                for b, s in zip(test, _scores(fn, [queries[b] for b in test]), strict=True):
                    per_query[b] = s
                infos.append(info)
            progress(f"fold {f + 1}/{n_folds} {method}")
    return queries, scores, folds


def _fold_folder(parts: dict, opt, progress) -> tuple[list, dict, list]:
    """Train on ``train``, score ``test`` (choose on ``vali`` where it exists and a grid has
    several values): ``(test queries, {(method, value): (scores, [fit info], vali)}, folds)``,
    ``vali`` the vali MAP of every value (or None) and only the chosen value kept."""
    from ..evaluation import evaluate_queries

    train, test, vali = parts["train"], parts["test"], parts.get("vali")
    scores = {}
    for method in opt["methods"]:
        grid = fit_grid(method, train, opt)
        if vali and len(grid) > 1:
            vali_map = {
                v: evaluate_queries(vali, _scores(fn, vali), 1)["MAP"]
                for v, (fn, _) in grid.items()
            }
            best = max(grid, key=lambda v: vali_map[v])  # the first on ties
            fn, info = grid[best]
            scores[(method, best)] = (_scores(fn, test), [info], vali_map)
        else:
            for value, (fn, info) in grid.items():
                scores[(method, value)] = (_scores(fn, test), [info], None)
        progress(f"train/test {method}")
    folds = [
        {
            "train": [q.qid for q in train],
            "test": [q.qid for q in test],
            "vali": [q.qid for q in vali or []],
        }
    ]
    return test, scores, folds


def run(args: argparse.Namespace) -> dict:
    """Run the protocol (module docstring) with ``args``; print the table, write the outputs to
    ``args.out`` (if set) and return the results."""
    from ..evaluation import evaluate_queries

    opt = _check(args)
    folder = args.data_dir is not None and Path(args.data_dir).is_dir()
    if folder and fold_files(Path(args.data_dir), required=()):  # train, vali or test there
        parts = load_fold(Path(args.data_dir))
        source = f"LETOR fold {args.data_dir} ({', '.join(parts)})"
        queries = parts["test"]
        mode = "train/test"
        n_stages = len(opt["methods"])
    else:
        queries, source = load_queries(args.data_dir)
        mode = "query folds"
        n_stages = opt["folds"] * len(opt["methods"])
    progress = Progress(n_stages)
    with recorded_warnings() as caught:
        if mode == "train/test":
            queries, scores, folds = _fold_folder(parts, opt, progress)
        else:
            queries, scores, folds = _query_folds(queries, opt, progress)
    rows = []
    for (method, value), (per_query, infos, vali_map) in scores.items():
        result = evaluate_queries(queries, per_query, opt["max_k"])
        per_query_metrics = result.pop("per_query")
        result.pop("n_queries")
        rows.append(
            {
                "method": method,
                "params": {_param(method): value},
                "chosen_on_vali": vali_map is not None,
                "vali_MAP": None if vali_map is None else {str(v): m for v, m in vali_map.items()},
                "metrics": result,
                "per_query": per_query_metrics,
                "fit": infos,
                "scores": [s.tolist() for s in per_query],
            }
        )
    results = {
        "experiment": NAME,
        "data": source,
        "mode": mode,
        "settings": opt,
        "test_queries": [{"qid": q.qid, "n_docs": q.n_docs} for q in queries],
        "folds": folds,
        "rows": rows,
        "warnings": caught.messages,
        "seconds": progress.seconds,
    }
    text = table(results)
    print(text)
    if args.out is not None:
        write_outputs(results, args.out, text, lambda: figure(results), NAME)
    return results


def _label(row: dict) -> str:
    ((name, value),) = row["params"].items()
    return f"{row['method']} {name}={value:g}"


def table(results: dict) -> str:
    """The summary: MAP, NDCG and P at a few cut-offs, mean over the test queries; MAP per
    query."""
    k_max = results["settings"]["max_k"]
    shown = [k for k in SHOWN if k < k_max] + [k_max]
    cols = ["MAP"] + [f"NDCG@{k}" for k in shown] + [f"P@{k}" for k in shown]
    qids = [q["qid"] for q in results["test_queries"]]
    if results["mode"] == "query folds":
        how = (
            f"{len(results['folds'])} query folds: each query scored by a model trained on the "
            "other folds; no validation set, nothing chosen"
        )
    else:
        how = "trained on train, scored on test" + (
            "; grids chosen on vali by MAP"
            if any(r["chosen_on_vali"] for r in results["rows"])
            else ""
        )
    lines = [
        f"LETOR baselines on {results['data']}",
        f"{how}; mean over {len(qids)} test queries (LETOR conventions)",
        "",
        f"{'method':<18}" + "".join(f"{c:>9}" for c in cols),
    ]
    for row in results["rows"]:
        lines.append(f"{_label(row):<18}" + "".join(f"{row['metrics'][c]:9.4f}" for c in cols))
    if len(qids) <= 12:
        lines += ["", "MAP per test query", f"{'method':<18}" + "".join(f"{q:>8}" for q in qids)]
        for row in results["rows"]:
            lines.append(
                f"{_label(row):<18}" + "".join(f"{p['MAP']:8.3f}" for p in row["per_query"])
            )
    lines += warning_lines(results["warnings"])
    lines.append(f"run time {results['seconds']:.0f} s")
    return "\n".join(lines)


def figure(results: dict):
    """NDCG@k against k per method, mean over the test queries, band +- one s.e."""
    from ..plot import learning_curves

    k_max = results["settings"]["max_k"]
    ks = np.arange(1, k_max + 1)
    curves = {
        _label(row): np.array([[p[f"NDCG@{k}"] for k in ks] for p in row["per_query"]])
        for row in results["rows"]
    }
    return learning_curves(
        ks,
        curves,
        band="sem",
        xlabel="cut-off k",
        ylabel="NDCG@k",
        title=f"mean over {len(results['test_queries'])} test queries (band: +- 1 s.e.)",
    )
