"""The study's one protocol: train, choose on vali where there is one, score the test queries
the LETOR way; per fold (a LETOR fold folder) or by query folds (the sample, a file), then the
mean over a collection's folds."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

from .._common import (
    Progress,
    load_fold,
    load_queries,
    recorded_warnings,
    strict_json,
    write_outputs,
)
from .methods import check_peers, fit_grid, param_name, versions
from .protocol import plan, settings
from .report import figure, markdown, summarize, table

__all__ = ["run"]


def _scores(fn, queries) -> list[np.ndarray]:
    """Each query's scores from one call of ``fn`` on the queries' documents stacked (and
    their sizes)."""
    X = np.concatenate([q.X for q in queries])
    s = np.asarray(fn(X, [q.n_docs for q in queries]), dtype=np.float64)
    return np.split(s, np.cumsum([q.n_docs for q in queries])[:-1])


def _query_folds(queries, opt, progress) -> tuple[list, dict, list]:
    """Cross-validation over queries: ``(test queries, {(method, value): (scores per query,
    [fit info per fold], None, fit seconds)}, splits)``; query ``i`` in fold ``i mod folds``."""
    n_folds = opt["folds"]
    if n_folds > len(queries):
        raise ValueError(
            f"--folds {n_folds} is more than the {len(queries)} queries of the data: at most "
            f"{len(queries)} (one query per fold)"
        )
    fold_of = np.arange(len(queries)) % n_folds
    scores, splits = {}, []
    for f in range(n_folds):
        train = [q for q, g in zip(queries, fold_of, strict=True) if g != f]
        test = [b for b, g in enumerate(fold_of) if g == f]
        splits.append({"train": [q.qid for q in train], "test": [queries[b].qid for b in test]})
        for method in opt["methods"]:
            grid, seconds = fit_grid(method, train, opt)
            for value, (fn, info) in grid.items():
                per_query, infos, _, _ = scores.setdefault(
                    (method, value), ([None] * len(queries), [], None, [])
                )
                for b, s in zip(test, _scores(fn, [queries[b] for b in test]), strict=True):
                    per_query[b] = s
                infos.append(info)
                scores[(method, value)][3].append(seconds)
            progress(f"fold {f + 1}/{n_folds} {method}")
    return queries, scores, splits


def _fold(parts: dict, opt, progress, where: str) -> tuple[list, dict, list]:
    """Train on ``train``, score ``test``; with ``vali`` and several values, only the value
    with the best vali MAP (the first on ties) is kept: ``(test queries, {(method, value):
    (scores, [fit info], {value: vali MAP} or None, [fit seconds])}, splits)``."""
    from ...evaluation import evaluate_queries

    train, test, vali = parts["train"], parts["test"], parts.get("vali")
    scores = {}
    for method in opt["methods"]:
        grid, seconds = fit_grid(method, train, opt, vali)
        if vali and len(grid) > 1:
            vali_map = {
                v: evaluate_queries(vali, _scores(fn, vali), 1)["MAP"]
                for v, (fn, _) in grid.items()
            }
            best = max(grid, key=lambda v: vali_map[v])  # the first on ties
            fn, info = grid[best]
            scores[(method, best)] = (_scores(fn, test), [info], vali_map, [seconds])
        else:
            for value, (fn, info) in grid.items():
                scores[(method, value)] = (_scores(fn, test), [info], None, [seconds])
        progress(f"{where} {method}")
    splits = [
        {
            "train": [q.qid for q in train],
            "test": [q.qid for q in test],
            "vali": [q.qid for q in vali or []],
        }
    ]
    return test, scores, splits


def _rows(queries, scores, max_k) -> list[dict]:
    from ...evaluation import evaluate_queries

    rows = []
    for (method, value), (per_query, infos, vali_map, seconds) in scores.items():
        result = evaluate_queries(queries, per_query, max_k)
        per_query_metrics = result.pop("per_query")
        result.pop("n_queries")
        rows.append(
            {
                "method": method,
                "params": {param_name(method): value},
                "chosen_on_vali": vali_map is not None,
                "vali_MAP": None if vali_map is None else {str(v): m for v, m in vali_map.items()},
                "metrics": result,
                "per_query": per_query_metrics,
                "fit": infos,
                "fit_seconds": seconds,
                "scores": [s.tolist() for s in per_query],
            }
        )
    return rows


def run(args) -> dict:
    """Run the study (the package docstring) with ``args``; print the table, write the outputs
    to ``args.out`` (if set) and return the results."""
    opt = settings(args)
    mode, units = plan(args.data_dir, opt)
    methods, skipped = check_peers(opt["methods"], opt.pop("methods_explicit"))
    if not methods:
        raise ValueError("--methods: nothing to run, every method asked for was skipped")
    opt["methods"] = methods
    for message in skipped.values():
        print(message, file=sys.stderr, flush=True)
    if mode == "query folds":
        queries, source = load_queries(units[0][2])
        progress = Progress(opt["folds"] * len(methods))
    else:
        progress = Progress(len(units) * len(methods))
    runs = []
    with recorded_warnings() as caught:
        for collection, fold, folder in units:
            if mode == "query folds":
                test, scores, splits = _query_folds(queries, opt, progress)
            else:
                parts = load_fold(folder)
                source = f"LETOR fold {folder} ({', '.join(parts)})"
                where = f"{collection} {fold}" if fold else "train/test"
                test, scores, splits = _fold(parts, opt, progress, where)
            runs.append(
                {
                    "collection": collection,
                    "fold": fold,
                    "data": source,
                    "test_queries": [{"qid": q.qid, "n_docs": q.n_docs} for q in test],
                    "splits": splits,
                    "rows": _rows(test, scores, opt["max_k"]),
                }
            )
    results = {
        "experiment": "baselines",
        "mode": mode,
        "settings": opt,
        "skipped": skipped,
        "runs": runs,
        "summary": summarize(runs),
        "warnings": caught.messages,
        "versions": versions(),
        "seconds": progress.seconds,
    }
    text = table(results)
    print(text)
    if args.out is not None:
        write_outputs(results, args.out, text, lambda: figure(results), "baselines")
        (Path(args.out) / "table.md").write_text(markdown(results))
        results["files"].append("table.md")
        (Path(args.out) / "results.json").write_text(strict_json(results))
    return results
