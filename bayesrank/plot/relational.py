"""The relational study's figure (Kersting & Xu 2009, Fig. 2): metrics against known pairs."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from os import PathLike
from pathlib import Path

import numpy as np

from ..data.checks import check_choice
from .base import draw_curve, pyplot

__all__ = ["METRIC_LABELS", "paired", "study"]

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


def _collection_name(results) -> str | None:
    """The collection's name for a title: a study folder (``"dir"``) by its folder's name."""
    name = results.get("collection")
    data_dir = (results.get("config") or {}).get("data_dir")
    if name == "dir" and data_dir not in (None, "None"):
        return f"{Path(str(data_dir)).name} (dir)"
    return name


def _x_label(results) -> str:
    """The settings' axis: known pairs, or (``"split": "entities"``) the judgements each
    held-out entity keeps."""
    if results.get("split") == "entities":
        return "judgements kept per held-out entity"
    return "known pairs"


def _known_pairs_axis(panel, ks) -> None:
    """Ticks at the numbers of known pairs; one setting gets a margin, not a 96-104 range."""
    if len(ks) == 1:
        panel.set_xlim(ks[0] * 0.5 - 0.5, ks[0] * 1.5 + 0.5)
    panel.set_xticks(ks, labels=[str(k) for k in ks])


def paired(
    results,
    *,
    reference: str = "PGP+I",
    metric: str = "error",
    models: Sequence[str] | None = None,
    title: str | None = None,
    ax=None,
):
    """Each model's paired difference to ``reference`` against the number of known pairs: the
    mean over query-repetitions of ``metric(model) - metric(reference)`` on the same query and
    repetition, with its 95% confidence interval (``mean +- t_{0.975, N-1} sd / sqrt(N)``).

    The sd bands of ``study`` mix the queries' spread into every model's band; the paired
    differences remove it, and show which model beats the reference where. Needs ``"rows"`` in
    the results (as the study writes). Returns the Figure; ``ValueError`` naming a missing
    reference or metric.
    """
    plt = pyplot()
    if isinstance(results, str | PathLike):
        results = json.loads(Path(results).read_text())
    metric = _ALIASES.get(metric, metric)
    settings = _settings(results)
    ks = sorted({k for k, _, _ in settings})
    found = []
    for _, _, block in settings:
        for m in block.get("rows", {}):
            if m not in found:
                found.append(m)
    if reference not in found:
        raise ValueError(f"reference {reference!r} has no rows in the results (models: {found})")
    models = [m for m in (models or found) if m != reference]
    if missing := [m for m in models if m not in found]:
        raise ValueError(f"models {missing!r} have no rows in the results (models: {found})")
    if ax is None:
        fig, ax = plt.subplots(figsize=(5.2, 3.8))
    fig = ax.figure
    width = 0.6 / max(len(models), 1)
    for index, model in enumerate(models):
        xs, means, halves = [], [], []
        for k, where, block in settings:
            rows = block.get("rows", {})
            ref = {(r["qid"], r["rep"]): r.get(metric) for r in rows.get(reference, [])}
            d = [
                _number(r[metric], f"{where}.rows.{model}") - ref[(r["qid"], r["rep"])]
                for r in rows.get(model, [])
                if r.get(metric) is not None and ref.get((r["qid"], r["rep"])) is not None
            ]
            if not d:
                continue
            d = np.asarray(d, float)
            sd = float(d.std(ddof=1)) if len(d) > 1 else 0.0
            xs.append(ks.index(k) + (index - (len(models) - 1) / 2) * width)
            means.append(float(d.mean()))
            halves.append(_t975(len(d) - 1) * sd / math.sqrt(len(d)))
        if xs:
            ax.errorbar(
                xs,
                means,
                yerr=halves,
                fmt="o",
                ms=4,
                capsize=3,
                color=f"C{found.index(model) % 10}",  # the model's colour in study()'s panels
                label=str(model),
            )
    if not ax.has_data():
        raise ValueError(f"no model has {metric!r} rows paired with {reference!r}")
    ax.axhline(0.0, color="0.5", lw=0.8)
    ax.set_xticks(range(len(ks)), labels=[str(k) for k in ks])
    label = METRIC_LABELS.get(metric, metric)
    ax.set(xlabel=_x_label(results), ylabel=f"{label} - {reference} (95% CI)")
    title = _collection_name(results) if title is None else title
    ax.set_title(f"paired difference to {reference}" + ("" if title is None else f": {title}"))
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))  # beside, not over
    return fig


def _t975(dof: int) -> float:
    """The t distribution's 97.5% quantile (scipy's where installed, else the normal 1.96)."""
    if dof < 1:
        return 0.0
    try:
        from scipy import stats
    except ImportError:
        return 1.959964
    return float(stats.t.ppf(0.975, dof))


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

    ``results`` is what the relational study (``experiments/relational.py``,
    ``bayesrank.experiments.relational``) writes to ``results.json`` (the dict, or the file's
    path); only these keys are read::

        {"collection": "OHSUMED",                  # optional: the panels' title
         "split": "pairs",                         # optional: "entities" labels the x axis
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
            ``"loglik"``, ``"brier"``, ``"ece"``, ... see ``METRIC_LABELS``; ``"error"``
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
        title = _collection_name(results)
    known = sorted({k for k, _, _ in settings})

    handles = {}  # model -> its first line: the legend lists every model drawn in any panel
    for metric, panel in zip(metrics, axs, strict=True):
        for index, model, ks, mean, lo, hi in series[metric]:
            # one style a model in every panel: colours C0-C9, then again dashed, dotted, ...
            color, ls = f"C{index % 10}", ("-", "--", ":", "-.")[index // 10 % 4]
            line = draw_curve(
                panel, ks, mean, lo, hi, label=str(model), color=color, ls=ls, alpha=0.1
            )
            handles.setdefault(model, line)
        label = METRIC_LABELS.get(metric, metric)
        panel.set(xlabel=_x_label(results), ylabel=label)
        _known_pairs_axis(panel, known)
        panel.set_title(label if title is None else f"{title}: {label}")
    drawn = [m for m in models if m in handles]
    axs[-1].legend(
        [handles[m] for m in drawn], [str(m) for m in drawn], fontsize=7, loc="best", handlelength=3
    )
    if ax is None:
        fig.tight_layout()
    return fig
