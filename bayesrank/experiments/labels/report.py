"""The labels study's summary (per budget and way, paired tests against ``pairs``) and its
tables."""

from __future__ import annotations

import numpy as np

from .protocol import WAYS

__all__ = ["MEASURES", "error_bands", "markdown_table", "plot", "summarize", "table"]

#: The measures compared, and whether higher is better.
MEASURES = {"pair_error": False, "log_lik": True, "ndcg10": True, "ap": True}


def _per_query(rows, budget, way, key):
    """``{query: mean over repetitions}`` of ``key``."""
    values: dict = {}
    for row in rows:
        if row["budget"] == budget and row["way"] == way:
            values.setdefault(row["query"], []).append(row[key])
    return {q: float(np.mean(v)) for q, v in values.items()}


def _p(test, a, b) -> float | None:
    d = np.asarray(a) - np.asarray(b)
    if len(d) < 2 or not np.any(d != 0):
        return None
    return float(test(a, b).pvalue)


def summarize(rows, budgets) -> dict:
    """Per budget and way: each measure's mean over queries; against ``pairs``, the mean
    per-query difference and the Wilcoxon and paired-t p-values; for ``ties`` the mean
    predicted ``P(tie)`` and the observed tie rate."""
    from scipy.stats import ttest_rel, wilcoxon

    out = {}
    for budget in budgets:
        for way in WAYS:
            entry = {}
            for key in MEASURES:
                mine = _per_query(rows, budget, way, key)
                base = _per_query(rows, budget, "pairs", key)
                entry[key] = float(np.mean(list(mine.values())))
                if way != "pairs":
                    common = sorted(set(mine) & set(base))
                    a, b = [mine[q] for q in common], [base[q] for q in common]
                    entry[f"{key}_vs_pairs"] = float(np.mean(np.subtract(a, b)))
                    entry[f"{key}_wilcoxon_p"] = _p(wilcoxon, a, b)
                    entry[f"{key}_ttest_p"] = _p(ttest_rel, a, b)
            if way == "ties":
                for key in ("p_tie", "tie_rate"):
                    entry[key] = float(np.mean(list(_per_query(rows, budget, way, key).values())))
            out[f"{way}@{budget}"] = entry
    return out


def _fmt_p(p) -> str:
    return "-" if p is None else f"{p:.2g}"


def _lines(results) -> list[tuple]:
    rows = []
    for budget in results["settings"]["budget"]:
        for way in WAYS:
            e = results["summary"][f"{way}@{budget}"]
            versus = (
                ""
                if way == "pairs"
                else (
                    f"{e['pair_error_vs_pairs']:+.3f} (W p={_fmt_p(e['pair_error_wilcoxon_p'])}, "
                    f"t p={_fmt_p(e['pair_error_ttest_p'])})"
                )
            )
            tie = f"{e['p_tie']:.3f} / {e['tie_rate']:.3f}" if way == "ties" else ""
            rows.append(
                (budget, way, e["pair_error"], e["log_lik"], e["ndcg10"], e["ap"], versus, tie)
            )
    return rows


def table(results) -> str:
    """The summary as text: one line per budget and way."""
    s = results["settings"]
    head = (
        f"{s['collection']}: {len(results['queries'])} queries x {s['repeats']} draws; "
        f"{results['seconds']:.0f} s\n"
        f"{'J':>4}  {'way':6}  {'error':>6}  {'loglik':>7}  {'NDCG10':>6}  {'AP':>6}  "
        "error vs pairs (paired over queries)       P(tie) / tie rate"
    )
    lines = [
        f"{b:>4}  {w:6}  {err:6.3f}  {ll:7.3f}  {nd:6.3f}  {ap:6.3f}  {vs:42s} {tie}"
        for b, w, err, ll, nd, ap, vs, tie in _lines(results)
    ]
    return "\n".join([head, *lines])


def markdown_table(results) -> str:
    """The table of ``docs/results/labels.md``."""
    out = [
        "| judgements | way | pair error | log-lik | NDCG@10 | MAP | error vs pairs (p) | "
        "P(tie) / tie rate |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for b, w, err, ll, nd, ap, vs, tie in _lines(results):
        out.append(f"| {b} | {w} | {err:.3f} | {ll:.3f} | {nd:.3f} | {ap:.3f} | {vs} | {tie} |")
    return "\n".join(out)


def error_bands(results) -> dict:
    """Per way: ``(budgets, mean, lo, hi)`` of the held-out pair error, the mean over queries of
    each query's mean over draws, with its 95% t interval over queries."""
    from scipy import stats

    out = {}
    for way in WAYS:
        budgets, mean, lo, hi = [], [], [], []
        for budget in results["settings"]["budget"]:
            values = np.array(list(_per_query(results["rows"], budget, way, "pair_error").values()))
            half = stats.t.ppf(0.975, len(values) - 1) * values.std(ddof=1) / np.sqrt(len(values))
            budgets.append(budget)
            mean.append(values.mean())
            lo.append(values.mean() - half)
            hi.append(values.mean() + half)
        out[way] = tuple(np.array(a) for a in (budgets, mean, lo, hi))
    return out


def plot(runs, path):
    """``figure(runs)`` saved to ``path`` (returned). Needs matplotlib."""
    from ...plot import save

    return save(figure(runs), path, close=True)


def figure(runs):
    """The held-out pair error of each way against the number of judgements, one panel per
    collection, from the results of one or more runs (``runs``: result dicts; runs of the same
    collection are joined by budget). Bands: 95% intervals over queries. Returns the Figure.
    Needs matplotlib."""
    import matplotlib

    matplotlib.use("Agg")
    from ...plot.base import draw_curve, pyplot

    by_collection: dict = {}
    for results in runs:
        name = results["settings"]["collection"]
        by_collection.setdefault(name, []).append(results)
    plt = pyplot()
    fig, axes = plt.subplots(1, len(by_collection), figsize=(4.2 * len(by_collection), 3.6))
    axes = np.atleast_1d(axes)
    colors = {"pairs": "0.35", "ties": "tab:blue", "grades": "tab:orange"}
    for ax, (name, parts) in zip(axes, by_collection.items(), strict=True):
        bands = [error_bands(results) for results in parts]
        for way in WAYS:
            joined = np.concatenate([np.stack(b[way]) for b in bands], axis=1)
            joined = joined[:, np.argsort(joined[0])]
            draw_curve(ax, *joined, label=way, color=colors[way])
        queries = {len(results["queries"]) for results in parts}
        ax.set_title(f"{name} ({'/'.join(map(str, sorted(queries)))} queries)")
        ax.set_xlabel("judgements per query")
        ax.set_xscale("log", base=2)
        budgets = sorted({b for results in parts for b in results["settings"]["budget"]})
        ax.set_xticks(budgets, [str(b) for b in budgets])
        ax.minorticks_off()
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("held-out pair error")
    axes[0].legend(frameon=False)
    return fig
