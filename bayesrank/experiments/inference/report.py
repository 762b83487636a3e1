"""The inference study's tables and figure: the summary per method, the fitted methods against
the reference (``bayesrank``, the default) with paired Wilcoxon tests, per collection, and the
engines against NUTS; the reliability diagram of each method's pooled held-out pairs. The two
Markdown tables are the ones of ``docs/results/inference.md``."""

from __future__ import annotations

import numpy as np

from ...inference.engines import EP, NUTS, Laplace
from .._common import warning_lines
from .methods import ENGINES

__all__ = ["engines_table", "figure", "fits_table", "table"]

FIT_METRICS = ("pair_error", "loglik", "ece", "brier", "ndcg10", "kendall", "seconds")
#: The problems' groups by name: the accuracy set's collections, HetRec21.
GROUPS = ("OHSUMED", "MQ2008", "HetRec:", "HetRec21")


def _wilcoxon(d) -> float:
    from scipy.stats import wilcoxon

    return wilcoxon(d).pvalue if np.any(d != 0) else 1.0


def fits_table(rows, methods, reference="bayesrank") -> str:
    """Each method's mean measures over the problems it fitted (all, then per group), and its
    mean paired difference to ``reference`` in pair error and log-likelihood with the two-sided
    Wilcoxon signed-rank p over the problems both fitted."""
    ok = [r for r in rows if "error" not in r]
    by = {(r["problem"], r["method"]): r for r in ok}
    names = sorted({r["problem"] for r in ok})
    lines = [
        "| method | problems | pair error | log-lik | ECE | Brier | NDCG@10 | Kendall | s/fit |"
        " pair err. - ref (p) | log-lik - ref (p) |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for groups in (None, *GROUPS):
        subset = [n for n in names if groups is None or n.startswith(groups)]
        if not subset:
            continue
        if groups is not None:
            lines.append(f"| *{groups.rstrip(':')}* | | | | | | | | | | |")
        for m in methods:
            both = [n for n in subset if (n, m) in by and (n, reference) in by]
            have = [n for n in subset if (n, m) in by]
            if not have:
                continue
            means = [np.mean([by[n, m][key] for n in have]) for key in FIT_METRICS]
            cells = [
                f"{v:.3f}" if key != "loglik" else f"{v:+.3f}"
                for key, v in zip(FIT_METRICS, means, strict=True)
            ]
            paired = []
            for key in ("pair_error", "loglik"):
                if m == reference or len(both) < 2:
                    paired.append("-")
                    continue
                d = np.array([by[n, m][key] - by[n, reference][key] for n in both])
                paired.append(f"{d.mean():+.3f} ({_wilcoxon(d):.2g})")
            lines.append(f"| {m} | {len(have)} | " + " | ".join(cells + paired) + " |")
    gaps = [r["design_gap"] for r in ok if r.get("design_gap") is not None]
    if gaps:
        lines.append(
            f"\nDesign gap (a fit's MAP objective minus its global start's best design point): "
            f"min {min(gaps):+.3f}, median {np.median(gaps):+.3f} nats over {len(gaps)} fits."
        )
    return "\n".join(lines)


def engines_table(rows) -> str:
    """EP and Laplace against NUTS at each problem's default-fitted prior: mean and largest
    ``|dp|``, the measures, seconds; how often EP is the closer, with the paired Wilcoxon p;
    NUTS's diagnostics."""
    lines = [
        "| engine | mean abs dp vs NUTS | max abs dp vs NUTS | pair error | log-lik | ECE | Brier |"
        " s/problem |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for groups in (None, "OHSUMED", "MQ2008", "HetRec"):
        if groups is not None:
            lines.append(f"| *{groups}* | | | | | | | |")
        for e in ENGINES:
            sel = [
                r
                for r in rows
                if r["engine"] == e and (groups is None or r["problem"].startswith(groups))
            ]
            if not sel:
                continue

            def mean(key, sel=sel):
                return np.mean([r[key] for r in sel])

            lines.append(
                f"| {e} | {mean('mean_abs_dp'):.4f} | {max(r['max_abs_dp'] for r in sel):.4f} | "
                f"{mean('pair_error'):.3f} | {mean('loglik'):+.3f} | {mean('ece'):.3f} | "
                f"{mean('brier'):.3f} | {mean('seconds'):.2f} |"
            )
    lines = [  # a group without rows loses its heading
        x
        for i, x in enumerate(lines)
        if not x.startswith("| *") or (i + 1 < len(lines) and not lines[i + 1].startswith("| *"))
    ]
    ep = {r["problem"]: r["mean_abs_dp"] for r in rows if r["engine"] == EP.name}
    la = {r["problem"]: r["mean_abs_dp"] for r in rows if r["engine"] == Laplace.name}
    wins = sum(ep[n] < la[n] for n in ep)
    d = np.array([ep[n] - la[n] for n in ep])
    pval = _wilcoxon(d) if len(d) > 1 else 1.0
    nuts = [r for r in rows if r["engine"] == NUTS.name]
    lines.append(
        f"\nEP closer to NUTS than Laplace (mean |dp|) on {wins} of {len(ep)} problems; "
        f"paired Wilcoxon p = {pval:.2g}. NUTS: smallest ESS "
        f"{min(r['min_ess'] for r in nuts):.0f}, largest split R-hat "
        f"{max(r['max_rhat'] for r in nuts):.3f}, {sum(r['divergences'] for r in nuts)} "
        f"divergences in {len(nuts)} runs."
    )
    return "\n".join(lines)


def table(results: dict) -> str:
    """The summary: per method the means over problems and the pooled ECE, the problems' pair
    error (up to 12 problems), then the two Markdown tables."""
    s, summary = results["settings"], results["summary"]
    names = [q["name"] for q in results["problems"]]
    shown = ", ".join(names[:6]) + (f", ... ({len(names)})" if len(names) > 6 else "")
    theta = "one theta for all problems" if s["theta"] == "shared" else "one theta per problem"
    lines = [
        f"inference on {len(names)} problems ({shown}) of {results['data']}",
        f"each method fits its own hyperparameters on the known pairs ({theta}); held-out pairs "
        "in a random orientation",
        "means over problems; ECE pooled: all held-out pairs of a method pooled",
        "",
        f"{'method':<22} {'pair err':>9} {'log-lik':>8} {'Brier':>7} {'ECE pooled':>10} "
        f"{'NDCG@10':>8} {'Kendall':>8}",
    ]
    for m, e in summary.items():
        lines.append(
            f"{m:<22} {e['pair_error']:9.4f} {e['loglik']:8.4f} {e['brier']:7.4f} "
            f"{e['ece_pooled']:10.4f} {e['ndcg10']:8.4f} {e['kendall']:8.4f}"
        )
    if summary and len(names) <= 12:
        lines += ["", "pair error per problem"]
        by = {(r["problem"], r["method"]): r for r in results["fits"] if "error" not in r}
        lines.append(f"{'problem':<22}" + "".join(f" {m:>{len(m)}}" for m in summary))
        for q in names:
            cells = [
                f" {by[q, m]['pair_error']:>{len(m)}.3f}" if (q, m) in by else f" {'-':>{len(m)}}"
                for m in summary
            ]
            lines.append(f"{q:<22}" + "".join(cells))
    errors = [r for r in results["fits"] if "error" in r]
    lines += [f"failed: {r['problem']} {r['method']}: {r['error'][:120]}" for r in errors]
    if results["fits"]:
        lines += ["", "Fitted methods (Markdown):", "", fits_table(results["fits"], summary)]
    if results["engines"]:
        lines += ["", "Engines at the default fit's prior (Markdown):", ""]
        lines.append(engines_table(results["engines"]))
    lines += warning_lines(results["warnings"])
    lines.append(f"run time {results['seconds']:.0f} s")
    return "\n".join(lines)


def figure(results: dict):
    """``bayesrank.plot.reliability`` of each method on its pooled held-out pairs."""
    from ...plot import reliability

    ax = None
    for m in results["summary"]:
        have = [q for q in results["pairs"] if m in q["prob"]]
        probs = np.concatenate([q["prob"][m] for q in have])
        outcomes = np.concatenate([q["outcome"] for q in have])
        ax = reliability(probs, outcomes, label=m, counts=ax is None, ax=ax)
    ax.set_title(f"held-out pairs of {len(results['pairs'])} problems, pooled")
    return ax
