"""The study's results as text: a plain table (printed and ``table.txt``), Markdown tables
(``table.md``, for ``docs/results/relational.md``) and the figure (``curves.png``, with
matplotlib)."""

from __future__ import annotations

from pathlib import Path

__all__ = ["fmt", "markdown", "plot", "setting_title", "table"]


def _p(value) -> str:
    return "-" if value is None else f"{value:.3g}"


def fmt(stat, digits=3) -> str:
    return "-" if stat is None else f"{stat['mean']:.{digits}f}+-{stat['sd']:.{digits}f}"


def setting_title(results, k) -> str:
    """A setting's heading: ``k`` known pairs, or (the entity split) the judgements each
    held-out entity keeps."""
    if results.get("split") == "entities":
        return f"held-out entities keeping {k} judgement{'' if str(k) == '1' else 's'}"
    return f"{k} known pairs"


def table(results) -> str:
    lines = []
    for k, block in results["settings"].items():
        lines.append(f"== {results['collection']}, {setting_title(results, k)} ==")
        lines.append(
            f"{'model':<26}{'error':>14}{'AUC':>14}{'log P(truth)':>15}{'Brier':>8}{'ECE':>8}"
            f"{'err both':>10}{'err one':>9}{'err neither':>12}"
        )
        for m, s in block["summary"].items():
            short = lambda x: "-" if x is None else f"{x['mean']:.3f}"  # noqa: E731
            lines.append(
                f"{m:<26}{fmt(s['err']):>14}{fmt(s['auc']):>14}{short(s['loglik']):>15}"
                f"{short(s['brier']):>8}{short(s['ece']):>8}{short(s['err_both']):>10}"
                f"{short(s['err_one']):>9}{short(s['err_neither']):>12}"
            )
        counts = next(iter(block["summary"].values()))["counts"]
        lines.append(f"test pairs by seen entities (all repetitions): {counts}")
        for other, c in block["comparisons"].items():
            red = "-" if c["reduction"] is None else f"{100 * c['reduction']:+.1f}%"
            lines.append(
                f"XPGP vs {other:<14} error reduction {red:>7}; lower in {c['queries_lower']} of "
                f"{c['queries']} queries; Wilcoxon p={_p(c['wilcoxon_p'])}, paired t "
                f"p={_p(c['ttest_p'])}"
            )
        lines.append("")
    return "\n".join(lines)


def markdown(results) -> str:
    """The summary as Markdown tables (for ``docs/results/relational.md``)."""
    lines = []
    for k, block in results["settings"].items():
        lines += [
            f"**{results['collection']}, {setting_title(results, k)}**",
            "",
            "| model | error | AUC | log P(truth) | Brier | ECE | error: both seen | one | "
            "neither |",
            "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
        ]
        for m, s in block["summary"].items():
            short = lambda x: "-" if x is None else f"{x['mean']:.3f}"  # noqa: E731
            lines.append(
                f"| {m} | {fmt(s['err'])} | {fmt(s['auc'])} | {short(s['loglik'])} | "
                f"{short(s['brier'])} | {short(s['ece'])} | {short(s['err_both'])} | "
                f"{short(s['err_one'])} | {short(s['err_neither'])} |"
            )
        lines += [
            "",
            "| XPGP against | error reduction | queries lower | Wilcoxon p | paired t p |",
        ]
        lines.append("| --- | ---: | ---: | ---: | ---: |")
        for other, c in block["comparisons"].items():
            red = "-" if c["reduction"] is None else f"{100 * c['reduction']:+.1f}%"
            lines.append(
                f"| {other} | {red} | {c['queries_lower']} of {c['queries']} | "
                f"{_p(c['wilcoxon_p'])} | {_p(c['ttest_p'])} |"
            )
        counts = next(iter(block["summary"].values()))["counts"]
        lines += ["", f"Test pairs by seen entities (all repetitions): {counts}.", ""]
    return "\n".join(lines)


def plot(results, path: Path) -> list[Path]:
    """Error and AUC (the entity split: error and log-likelihood) against the setting
    (``bayesrank.plot.study``; bands: sd over query-repetitions) to ``path``, and each model's
    paired difference in error to
    PGP+I with its 95% interval (``bayesrank.plot.paired``) to ``paired.png`` beside it,
    where PGP+I ran with another model. Returns the files written."""
    import matplotlib

    matplotlib.use("Agg")
    from ...plot import paired, save, study

    # the entity split's question is the held-out entities' error and calibration
    metrics = ("err", "loglik") if results.get("split") == "entities" else ("err", "auc")
    written = [save(study(results, metrics=metrics), path, close=True)]
    ran = {m for block in results["settings"].values() for m in block.get("rows", {})}
    if "PGP+I" in ran and len(ran) > 1:
        written.append(save(paired(results), Path(path).with_name("paired.png"), close=True))
    return written
