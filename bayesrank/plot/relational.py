"""The relational study's figure (Kersting & Xu 2009, Fig. 2): metrics against known pairs."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from os import PathLike
from pathlib import Path

import numpy as np

from ..data.checks import check_choice
from ._base import draw_curve, pyplot

__all__ = ["METRIC_LABELS", "study"]

#: The axis label of each metric that the relational study records; ``"error"`` is
#: accepted for ``"err"``. Other keys of the results may be plotted too (labelled by the key).
METRIC_LABELS = {
    "err": "pairwise error",
    "err_untied": "pairwise error (no tie rule)",
    "auc": "AUC",
    "loglik": "mean log P(truth)",
    "brier": "Brier score",
    "ece": "ECE",
    "ties": "share of tied predictions",
    "err_both": "error, both entities seen",
    "err_one": "error, one entity seen",
    "err_neither": "error, neither entity seen",
}
_ALIASES = {"error": "err"}


def _number(value, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float | np.integer | np.floating):
        raise ValueError(f"{where} must be a number, got {value!r}")
    if not math.isfinite(value):
        raise ValueError(f"{where} = {value!r} is not finite")
    return float(value)


def _settings(results) -> list[tuple[int, str, Mapping]]:
    """``(k, key, block)`` of every setting, by increasing ``k``."""
    if not isinstance(results, Mapping) or not isinstance(results.get("settings"), Mapping):
        raise ValueError("results must be a mapping with a 'settings' mapping (see study)")
    if not results["settings"]:
        raise ValueError("results['settings'] is empty: no number of known pairs to plot")
    out = []
    for key, block in results["settings"].items():
        try:
            k = int(str(key))
        except ValueError:
            raise ValueError(
                f"results['settings'] key {key!r} is not a number of known pairs"
            ) from None
        if not isinstance(block, Mapping) or not ("summary" in block or "rows" in block):
            raise ValueError(
                f"results['settings'][{key!r}] must be a mapping with 'summary' or 'rows'"
            )
        out.append((k, key, block))
    return sorted(out, key=lambda t: t[0])


def _stat(block, key, model: str, metric: str):
    """``(mean, sd, count)`` of one model's metric in one setting (count None without rows), or
    None where it has none."""
    where = f"results['settings'][{key!r}]"
    values = None
    rows = block.get("rows", {}).get(model)
    if rows is not None:
        if isinstance(rows, Mapping | str) or not all(isinstance(r, Mapping) for r in rows):
            raise ValueError(f"{where}['rows'][{model!r}] must be a list of mappings (one a row)")
        values = [r.get(metric) for r in rows]
        values = [
            _number(v, f"{where}['rows'][{model!r}][{i}][{metric!r}]")
            for i, v in enumerate(values)
            if v is not None
        ]
    stat = block.get("summary", {}).get(model, {}).get(metric)
    if stat is not None:
        at = f"{where}['summary'][{model!r}][{metric!r}]"
        if not isinstance(stat, Mapping) or "mean" not in stat:
            raise ValueError(f"{at} must be a mapping with 'mean' and 'sd', got {stat!r}")
        sd = _number(stat.get("sd", 0.0), f"{at}['sd']")
        if sd < 0:
            raise ValueError(f"{at}['sd'] = {sd!r} is negative: a std must be >= 0")
        return _number(stat["mean"], f"{at}['mean']"), sd, len(values) if values else None
    if not values:
        return None
    v = np.asarray(values)
    return float(v.mean()), float(v.std(ddof=1)) if len(v) > 1 else 0.0, len(v)


def _series(settings, models, metric: str, band) -> list[tuple]:
    """``(index, model, ks, mean, lo, hi)`` of every model that reports ``metric`` somewhere
    (``lo``, ``hi`` None without a band)."""
    out = []
    for index, model in enumerate(models):
        points = [(k, _stat(block, key, model, metric)) for k, key, block in settings]
        points = [(k, s) for k, s in points if s is not None]
        if not points:
            continue
        ks = np.array([k for k, _ in points], float)
        mean = np.array([s[0] for _, s in points])
        lo = hi = None
        if band is not None:
            if band == "sem" and any(s[2] is None for _, s in points):
                raise ValueError(f"band='sem' needs results' 'rows' for {model!r}")
            half = np.array([s[1] for _, s in points])
            if band == "sem":
                half /= np.sqrt([s[2] for _, s in points])
            lo, hi = mean - half, mean + half
        out.append((index, model, ks, mean, lo, hi))
    if not out:
        raise ValueError(f"metrics: no model in the results reports {metric!r}")
    return out


def study(
    results,
    *,
    metrics: str | Sequence[str] = ("error", "auc"),
    models: Sequence[str] | None = None,
    band: str | None = "std",
    title: str | None = None,
    ax=None,
):
    """The relational study's figure: one panel per metric, each model's mean against the number
    of known pairs with a band, in the style of the XPGP paper's Fig. 2. One collection a call.

    ``results`` is what the relational study (``experiments/relational.py``, :mod:`bayesrank.study`)
    writes to ``results.json`` (the dict, or the file's path); only these keys are read::

        {"collection": "OHSUMED",                  # optional: the panels' title
         "settings": {                             # one entry per number of known pairs k
             "100": {                              # k (a string in JSON; an int is fine)
                 "summary": {                      # per model, per metric: mean and sd over
                     "XPGP": {"err": {"mean": 0.31, "sd": 0.05},   # the query-repetitions,
                              "auc": {"mean": 0.72, "sd": 0.06}},  # or None where missing
                     "RankSVM": {...}},
                 "rows": {                         # optional: one dict per query-repetition
                     "XPGP": [{"err": 0.30, "auc": 0.73, ...}, ...],
                     ...}},
             "150": {...}}}

    A setting needs ``"summary"`` or ``"rows"``: a statistic missing from the summary is computed
    from the rows (mean, and sd with ddof 1, as the study does). Points that a model lacks (a
    model not run at some k, a metric it does not report, such as RankSVM's log-probability) are
    left out of its line.

    Args:
        results: the results dict, or a path to its JSON file.
        metrics: the metrics, one panel each: keys of the summaries (``"err"``, ``"auc"``,
            ``"loglik"``, ``"brier"``, ``"ece"``, ... see :data:`METRIC_LABELS`; ``"error"``
            means ``"err"``).
        models: the models to draw, in legend order; None = every model, in the results' order.
        band: ``"std"``: mean +- sd over the query-repetitions; ``"sem"``: mean +- sd / sqrt(N),
            N the number of rows (needs ``"rows"``); None: no band.
        title: the panels' title; None = ``results["collection"]`` (if any).
        ax: the Axes to draw into, one per metric (a single Axes for one metric); None = a new
            figure with the panels side by side.

    Returns:
        The Figure. Each model keeps one style in every panel (colours ``C0`` to ``C9`` in
        ``models`` order, then the same dashed, then dotted); the legend, in the last panel,
        lists every model drawn in any panel.

    Raises:
        ValueError: naming the entry of ``results`` that is malformed or not finite, a metric
            that no model reports, a model that is in no setting, ``"sem"`` without rows, or
            ``ax`` of the wrong length.
    """
    plt = pyplot()
    if isinstance(results, str | PathLike):
        results = json.loads(Path(results).read_text())
    band = check_choice(band, "band", ("std", "sem", None))
    settings = _settings(results)
    metrics = [metrics] if isinstance(metrics, str) else list(metrics)
    if not metrics:
        raise ValueError("metrics is empty: give at least one metric to plot")
    metrics = [_ALIASES.get(m, m) for m in metrics]
    found = []
    for _, _, block in settings:
        for m in [*block.get("summary", {}), *block.get("rows", {})]:
            if m not in found:
                found.append(m)
    if models is None:
        models = found
    else:
        models = [models] if isinstance(models, str) else list(models)
        missing = [m for m in models if m not in found]
        if missing or not models:
            raise ValueError(f"models {missing or models!r} not in the results (models: {found})")

    series = {metric: _series(settings, models, metric, band) for metric in metrics}
    if ax is None:
        fig, axs = plt.subplots(1, len(metrics), figsize=(4.6 * len(metrics), 3.8), squeeze=False)
        axs = list(axs[0])
    else:
        axs = [ax] if hasattr(ax, "plot") else list(ax)
        if len(axs) != len(metrics):
            raise ValueError(f"ax has {len(axs)} Axes but there are {len(metrics)} metrics")
        fig = axs[0].figure
    if title is None:
        title = results.get("collection")

    handles = {}  # model -> its first line: the legend lists every model drawn in any panel
    for metric, panel in zip(metrics, axs, strict=True):
        for index, model, ks, mean, lo, hi in series[metric]:
            # one style a model in every panel: colours C0-C9, then again dashed, dotted, ...
            color, ls = f"C{index % 10}", ("-", "--", ":", "-.")[index // 10 % 4]
            line = draw_curve(
                panel, ks, mean, lo, hi, label=str(model), color=color, ls=ls, alpha=0.1
            )
            handles.setdefault(model, line)
        panel.set(xlabel="known pairs", ylabel=METRIC_LABELS.get(metric, metric))
        if title is not None:
            panel.set_title(str(title))
    drawn = [m for m in models if m in handles]
    axs[-1].legend(
        [handles[m] for m in drawn], [str(m) for m in drawn], fontsize=7, loc="best", handlelength=3
    )
    if ax is None:
        fig.tight_layout()
    return fig
