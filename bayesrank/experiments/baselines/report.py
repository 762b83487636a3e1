"""The study's summaries: the mean over a collection's folds, the text table, the Markdown
tables beside the published LETOR 3.0 figures, and the figure."""

from __future__ import annotations

import json

import numpy as np

from .._common import warning_lines

__all__ = ["PUBLISHED", "figure", "markdown", "summarize", "table"]

#: The cut-offs in the text table.
SHOWN = (1, 3, 5, 10)

#: LETOR OHSUMED baselines (QueryLevelNorm, 5-fold means), as reproduced in Rigutini et al.
#: (2011), Tables VII and VIII; it has none for MQ2008.
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
        # Rigutini et al. (2011), Tables VII and VIII: SortNet with the hidden units chosen
        # by MAP (on LETOR's OHSUMED, the version the paper calls 2.0)
        "SortNet": {
            "MAP": 0.442,
            "NDCG": [0.52, 0.48, 0.47, 0.46, 0.45, 0.45, 0.44, 0.44, 0.44, 0.44],
            "P": [0.63, 0.58, 0.57, 0.56, 0.55, 0.55, 0.53, 0.52, 0.51, 0.50],
        },
    }
}


def summarize(runs: list[dict]) -> dict:
    """``{collection: [row]}``: per method (and value, where it was not chosen on vali) the
    mean over the collection's runs (folds) of each run's mean metrics, as LETOR reports them;
    ``chosen``: the value of each fold."""
    out: dict[str, dict] = {}
    for run in runs:
        rows = out.setdefault(run["collection"] or "data", {})
        for row in run["rows"]:
            key = (row["method"], None if row["chosen_on_vali"] else json.dumps(row["params"]))
            entry = rows.setdefault(key, {"method": row["method"], "metrics": [], "chosen": []})
            entry["params"] = None if row["chosen_on_vali"] else row["params"]
            entry["metrics"].append(row["metrics"])
            entry["chosen"].append(row["params"])
    for rows in out.values():
        for entry in rows.values():
            folds = entry["metrics"]
            entry["metrics"] = {k: float(np.mean([m[k] for m in folds])) for k in folds[0]}
            entry["n_folds"] = len(folds)
    return {name: list(rows.values()) for name, rows in out.items()}


def _label(method: str, params: dict | None) -> str:
    if params is None:
        return method
    ((name, value),) = params.items()
    return f"{method} {name}={value:g}"


def _published(collection: str, method: str, col: str) -> str:
    pub = PUBLISHED[collection][method]
    if col == "MAP":
        return f"{pub['MAP']:.3f}"
    kind, k = col.split("@")
    return f"{pub[kind][int(k) - 1]:.2f}" if int(k) <= len(pub[kind]) else "-"


def _cols(k_max: int, shown=SHOWN) -> list[str]:
    ks = [k for k in shown if k < k_max] + [k_max]
    return ["MAP"] + [f"NDCG@{k}" for k in ks] + [f"P@{k}" for k in ks]


def _single(results: dict, cols: list[str]) -> list[str]:
    """One run: its rows, and MAP per test query where there are few."""
    (run,) = results["runs"]
    qids = [q["qid"] for q in run["test_queries"]]
    if results["mode"] == "query folds":
        how = (
            f"{len(run['splits'])} query folds: each query scored by a model trained on the "
            "other folds; no validation set, nothing chosen"
        )
    else:
        chosen = any(r["chosen_on_vali"] for r in run["rows"])
        how = "trained on train, scored on test" + ("; grids chosen on vali by MAP" * chosen)
    lines = [
        f"LETOR baselines on {run['data']}",
        f"{how}; mean over {len(qids)} test queries (LETOR conventions)",
        "",
        f"{'method':<22}" + "".join(f"{c:>9}" for c in cols),
    ]
    for row in run["rows"]:
        label = _label(row["method"], row["params"])
        lines.append(f"{label:<22}" + "".join(f"{row['metrics'][c]:9.4f}" for c in cols))
    if len(qids) <= 12:
        lines += ["", "MAP per test query", f"{'method':<22}" + "".join(f"{q:>8}" for q in qids)]
        for row in run["rows"]:
            label = _label(row["method"], row["params"])
            lines.append(f"{label:<22}" + "".join(f"{p['MAP']:8.3f}" for p in row["per_query"]))
    return lines


def table(results: dict) -> str:
    """The text summary: MAP, NDCG and P at a few cut-offs; one run's mean over its test
    queries, or per collection the mean over its folds, the published figures beside."""
    cols = _cols(results["settings"]["max_k"])
    if len(results["runs"]) == 1:
        lines = _single(results, cols)
    else:
        lines = [f"LETOR baselines, {results['settings']['protocol']} protocol"]
        for name, rows in results["summary"].items():
            folds = [r["fold"] for r in results["runs"] if r["collection"] == name]
            lines += [
                "",
                f"{name}: mean over {len(folds)} folds ({' '.join(folds)}) of the test MAP, "
                "NDCG, P; trained on train, grids chosen on vali by MAP",
                f"{'method':<22}" + "".join(f"{c:>9}" for c in cols),
            ]
            for row in rows:
                label = _label(row["method"], row["params"])
                lines.append(f"{label:<22}" + "".join(f"{row['metrics'][c]:9.4f}" for c in cols))
            for method in PUBLISHED.get(name, {}):
                vals = "".join(f"{_published(name, method, c):>9}" for c in cols)
                lines.append(f"{method + ' (published)':<22}" + vals)
            for row in rows:
                if row["params"] is None:
                    chosen = " ".join(f"{v:g}" for p in row["chosen"] for v in p.values())
                    lines.append(f"  {row['method']} chosen per fold: {chosen}")
    lines += [f"note: {m}" for m in results["skipped"].values()]
    lines += warning_lines(results["warnings"])
    lines.append(f"run time {results['seconds']:.0f} s")
    return "\n".join(lines)


def _md_row(name, values) -> str:
    return "| " + name + " | " + " | ".join(values) + " |"


def markdown(results: dict) -> str:
    """Markdown tables per collection (the form of ``docs/results/baselines.md``): the mean
    over its folds of MAP and NDCG@1..max_k, of P@1..max_k, the published rows, and the value
    chosen on vali in each fold."""
    k_max = results["settings"]["max_k"]
    lines = []
    for name, rows in results["summary"].items():
        n = max(r["n_folds"] for r in rows)
        heads = [
            ("MAP, NDCG@k", ["MAP"] + [f"NDCG@{k}" for k in range(1, k_max + 1)]),
            ("P@k", [f"P@{k}" for k in range(1, k_max + 1)]),
        ]
        for title, cols in heads:
            lines += [f"\n**{name}, test, mean of {n} folds: {title}**\n", _md_row("method", cols)]
            lines.append("|" + " --- |" * (len(cols) + 1))
            for row in rows:
                label = _label(row["method"], row["params"])
                lines.append(_md_row(label, [f"{row['metrics'][c]:.4f}" for c in cols]))
            for method in PUBLISHED.get(name, {}):
                vals = [_published(name, method, c) for c in cols]
                lines.append(_md_row(f"{method} (published)", vals))
        if any(r["params"] is None for r in rows):
            lines.append("\nChosen on vali, per fold:\n")
            for row in rows:
                if row["params"] is None:
                    chosen = ", ".join(json.dumps(p) for p in row["chosen"])
                    lines.append(f"- {row['method']}: {chosen}")
    return "\n".join(lines) + "\n"


def figure(results: dict):
    """NDCG@k against k per collection and method, mean over the test queries of every fold,
    band +- one standard error (``bayesrank.plot.learning_curves``)."""
    from ...plot import learning_curves

    k_max = results["settings"]["max_k"]
    ks = np.arange(1, k_max + 1)
    several = len(results["summary"]) > 1
    curves: dict[str, list] = {}
    for run in results["runs"]:
        for row in run["rows"]:
            params = None if row["chosen_on_vali"] else row["params"]
            label = _label(row["method"], params)
            if several:
                label = f"{run['collection']}: {label}"
            per_query = [[p[f"NDCG@{k}"] for k in ks] for p in row["per_query"]]
            curves.setdefault(label, []).extend(per_query)
    n = sum(len(r["test_queries"]) for r in results["runs"])
    return learning_curves(
        ks,
        {label: np.array(c) for label, c in curves.items()},
        band="sem",
        xlabel="cut-off k",
        ylabel="NDCG@k",
        title=f"mean over {n} test queries (band: +- 1 s.e.)",
    )
