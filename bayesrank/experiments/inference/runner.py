"""The inference study's loop: for each problem, every method (part 2) and, with NUTS, the three
engines at the default fit's prior (part 1); the rows, the held-out probabilities and the summary.

With ``--theta per-query`` the rows so far are kept in ``<out>/rows.json`` after each problem and
a rerun with the same settings (methods, ``--queries`` and ``--nuts`` aside) takes them from there
instead of fitting again; a method that failed is fitted again.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from .._common import Progress, recorded_warnings
from .methods import (
    METHODS,
    calibration_error,
    engine_rows,
    fit_method,
    fit_shared,
    gaussian_probs,
    hyperparameters,
    orient,
    pair_metrics,
    ranking_metrics,
)
from .protocol import InferenceProtocol, load_problems

__all__ = ["run_protocol", "summary"]

#: The settings a rerun may change and still take the saved rows.
FREE = ("methods", "queries", "nuts")


def _saved(path: Path | None, settings: dict) -> dict:
    """``{problem: record}`` of ``rows.json`` where its settings are these (up to ``FREE``)."""
    if path is None or not path.is_file():
        return {}
    saved = json.loads(path.read_text())
    same = {k: v for k, v in saved["settings"].items() if k not in FREE}
    if same != {k: v for k, v in settings.items() if k not in FREE}:
        return {}
    return saved["problems"]


def _row(name, fitted, p, shown, y) -> tuple[dict, np.ndarray]:
    prob = gaussian_probs(fitted["mean"], fitted["cov"], shown, fitted["noise_var"])
    row = {"problem": p["name"], "method": name, "seconds": fitted["seconds"]}
    row.update(pair_metrics(prob, y))
    row.update(ranking_metrics(fitted["mean"], p["grades"]))
    for key in ("converged", "steps", "alpha", "warnings", "design_gap"):
        if key in fitted:
            row[key] = fitted[key]
    if isinstance(row.get("design_gap"), np.ndarray | np.generic):
        row["design_gap"] = float(row["design_gap"])
    if "prior" in fitted:
        row["hyperparameters"] = hyperparameters(fitted["prior"])
    return row, prob


def run_protocol(p: InferenceProtocol, data_dir, out=None, peers=None) -> dict:
    """Run ``p`` on the problems of ``data_dir``; ``peers``: ``{name: fit(problem, seed)}`` for
    the peer methods of ``p.methods`` (a front end's). Returns the results (without the
    summary's table; ``out``: the folder of ``rows.json``, None for none)."""
    import jax

    from ...runtime import clear_compiled

    peers = peers or {}
    problems, source = load_problems(p, data_dir)
    settings = {**p.settings(), "data": source}
    path = None if out is None else Path(out) / "rows.json"
    saved = _saved(path, settings) if p.theta == "per-query" else {}
    ours = [m for m in p.methods if m in METHODS]
    progress = Progress(len(problems))
    records, views = dict(saved), []  # the saved problems outside this run are kept
    nuts_options = dict(num_warmup=p.warmup, num_samples=p.samples, num_chains=p.chains)
    with recorded_warnings() as caught:
        shared = {}
        if p.theta == "shared":
            for name in [*ours, *(["bayesrank"] if p.nuts and "bayesrank" not in ours else [])]:
                shared[name] = fit_shared(name, problems)
        for k, prob in enumerate(problems):
            record = saved.get(prob["name"], {"fits": {}, "engines": None})
            record["fits"] = {m: r for m, r in record["fits"].items() if "error" not in r["row"]}
            shown, y = orient(np.random.default_rng(p.seed + k), prob["held_out"])
            views.append((shown, y))
            default_prior = None
            for name in p.methods:
                if name in record["fits"]:
                    continue
                try:
                    if name in shared:
                        fitted = shared[name][k]
                    elif name in METHODS:
                        fitted = fit_method(name, prob)
                    else:
                        fitted = peers[name](prob, p.seed + k)
                except Exception as err:  # a fit failing is a result, not a crash
                    row = {"problem": prob["name"], "method": name, "error": repr(err)[:300]}
                    record["fits"][name] = {"row": row, "prob": None}
                    continue
                row, probs = _row(name, fitted, prob, shown, y)
                record["fits"][name] = {"row": row, "prob": probs.tolist()}
                if name == "bayesrank":
                    default_prior = fitted["prior"]
            if p.nuts and record["engines"] is None:
                if default_prior is None:
                    fitted = shared["bayesrank"][k] if shared else fit_method("bayesrank", prob)
                    default_prior = fitted["prior"]
                rows, probs = engine_rows(
                    prob, default_prior, shown, y, jax.random.key(p.seed + k), nuts_options
                )
                record["engines"] = {
                    "rows": rows,
                    "prob": {e: v.tolist() for e, v in probs.items()},
                }
            records[prob["name"]] = record
            if path is not None and p.theta == "per-query":
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text(json.dumps({"settings": settings, "problems": records}))
            if p.theta == "per-query":
                clear_compiled()  # one process compiles ~100 programs: keep its memory bounded
            progress(f"{prob['name']}: {len(record['fits'])} fits{', engines' if p.nuts else ''}")
    return results(p, problems, views, source, records, caught.messages, progress.seconds)


def results(p: InferenceProtocol, problems, views, source, records, messages, seconds) -> dict:
    """The results of a run: settings, problems, every row, the held-out pairs (``views``:
    each problem's ``(shown, outcome)``) with each method's probabilities, the summary."""
    # this run's methods (a resumed record may hold others), in their order
    fits = [{m: records[prob["name"]]["fits"][m] for m in p.methods} for prob in problems]
    rows = [f["row"] for by in fits for f in by.values()]
    part1 = [(records[prob["name"]]["engines"] if p.nuts else None) or {} for prob in problems]
    engines = [r for e in part1 for r in e.get("rows", [])]
    pairs = []
    for prob, (shown, y), by, e in zip(problems, views, fits, part1, strict=True):
        pairs.append(
            {
                "known": prob["known"].tolist(),
                "shown": shown.tolist(),
                "outcome": y.tolist(),
                "prob": {m: f["prob"] for m, f in by.items() if f["prob"] is not None},
                "prob_engines": e.get("prob", {}),
            }
        )
    return {
        "experiment": "inference",
        "data": source,
        "settings": p.settings(),
        "problems": [
            {
                "name": q["name"],
                "n": len(q["X"]),
                "known": len(q["known"]),
                "test": len(q["held_out"]),
            }
            for q in problems
        ],
        "summary": summary(p.methods, rows, pairs),
        "fits": rows,
        "engines": engines,
        "pairs": pairs,
        "warnings": messages,
        "seconds": seconds,
    }


def summary(methods, rows, pairs) -> dict:
    """Per method: the mean of every measure over the problems it fitted, and the ECE of all
    their held-out pairs pooled (per-problem bins hold few pairs)."""
    out = {}
    for m in methods:
        ok = [r for r in rows if r["method"] == m and "error" not in r]
        if not ok:
            continue
        entry = {"problems": len(ok)}
        for key in ("pair_error", "loglik", "ece", "brier", "ndcg10", "kendall", "seconds"):
            entry[key] = float(np.mean([r[key] for r in ok]))
        prob = np.concatenate([q["prob"][m] for q in pairs if m in q["prob"]])
        y = np.concatenate([q["outcome"] for q in pairs if m in q["prob"]])
        entry["ece_pooled"] = calibration_error(prob, y)
        entry["converged"] = all(r.get("converged", True) for r in ok)
        out[m] = entry
    return out
