"""The results as a text table, a Markdown table and a figure."""

from __future__ import annotations

import numpy as np

from .._common import warning_lines

COLUMNS = (  # (header, aggregate key, format)
    ("n", "n", ".0f"),
    ("mean|dp|", "dp_mean", ".4f"),
    ("max|dp|", "dp_max", ".3f"),
    ("MCSE med", "mcse_median", ".4f"),
    ("z>2", "beyond_2_mcse", ".1%"),
    ("mean|dmu|", "dmu_mean", ".3f"),
    ("max|dmu|", "dmu_max", ".3f"),
    ("mean|dsd|", "dsd_mean", ".3f"),
    ("max|dsd|", "dsd_max", ".3f"),
    ("NUTS sd", "sd_nuts", ".2f"),
    ("acc EP", "acc_ep", ".3f"),
    ("acc NUTS", "acc_nuts", ".3f"),
    ("R-hat", "r_hat_max", ".3f"),
    ("ESS", "ess_min", ".0f"),
    ("div", "divergences", "d"),
)


def table(results: dict) -> str:
    """The summary: a row per setting (its aggregate), then a row per query of each query
    setting."""
    p = results["protocol"]
    head = f"{'setting / problem':<28}" + "".join(f" {h:>9}" for h, _, _ in COLUMNS)
    lines = [
        f"EP against NUTS ({p['protocol']} protocol) on {results['data']}"
        + (f", queries {' '.join(results['queries'])}" if results["queries"] else ""),
        f"prior {p['prior_description']}, fixed; NUTS {p['chains']} chains x {p['samples']} draws "
        f"after {p['warmup']} warm-up; EP {p['ep']}",
        "dp = P_EP(i > j) - P_NUTS(i > j) per test pair; MCSE: NUTS's Monte Carlo standard error "
        "of its P; z = |dp| / MCSE; dmu, dsd: posterior means and sds per entity",
        "",
        head,
    ]
    for s in results["settings"]:
        lines.append(f"{s['name']:<28}" + _cells(s["aggregate"]))
    for s in results["settings"]:
        if not s["name"].startswith("synthetic"):
            for r in s["problems"]:
                label = f"  query {r['problem']}, {r['known']} known"
                lines.append(f"{label:<28}" + _cells(r))
    o = results["overall"]
    lines += [
        "",
        f"all {o['pairs']} test pairs: max |dp| {o['dp_max']:.4f}, mean |dp| {o['dp_mean']:.4f}; "
        f"median MCSE {o['mcse_median']:.4f}; z > 2 for {o['beyond_2_mcse']:.1%} of the pairs "
        f"({o['beyond_2_if_exact']:.1%} expected were EP exact)",
    ]
    lines += warning_lines(results["warnings"])
    lines.append(f"run time {results['seconds']:.0f} s")
    return "\n".join(lines)


def _cells(row: dict) -> str:
    return "".join(f" {format(row[k], f):>9}" for _, k, f in COLUMNS)


def _plain(header: str) -> str:
    """A header without ``|`` (a Markdown cell separator): ``mean|dp|`` is ``mean abs dp``."""
    return header.replace("mean|", "mean abs ").replace("max|", "max abs ").rstrip("|")


def markdown(results: dict) -> str:
    """The per-setting table in Markdown (``docs/results/ep-vs-nuts.md``)."""
    head = ["setting", "problems", *(_plain(h) for h, _, _ in COLUMNS)]
    lines = ["| " + " | ".join(head) + " |", "|---" * len(head) + "|"]
    for s in results["settings"]:
        a = s["aggregate"]
        cells = [s["name"], str(len(s["problems"]))] + [format(a[k], f) for _, k, f in COLUMNS]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def figure(results: dict):
    """``p_EP - p_NUTS`` against ``p_NUTS`` with +- 2 MCSE bars, one panel per setting, one colour
    per problem (at most 2000 pairs of each)."""
    import matplotlib.pyplot as plt

    settings = results["settings"]
    cols = min(4, len(settings))
    rows = -(-len(settings) // cols)
    fig, axes = plt.subplots(rows, cols, figsize=(3.4 * cols, 3.2 * rows), squeeze=False)
    for ax, s in zip(axes.ravel(), settings, strict=False):
        for pairs in s["pairs"]:
            p_nuts = np.asarray(pairs["p_nuts"][:2000])
            dp = np.asarray(pairs["p_ep"][:2000]) - p_nuts
            mcse = np.asarray(pairs["mcse"][:2000])
            ax.errorbar(p_nuts, dp, yerr=2 * mcse, fmt="o", ms=1.5, lw=0.4, alpha=0.5)
        ax.axhline(0.0, color="0.4", lw=0.8)
        ax.set_title(f"{s['name']}\nmax |dp| {s['aggregate']['dp_max']:.3f}", fontsize=8)
        ax.set_xlabel("NUTS P(i > j)", fontsize=8)
        ax.set_ylabel("EP - NUTS P(i > j)", fontsize=8)
    for ax in axes.ravel()[len(settings) :]:
        ax.axis("off")
    fig.suptitle("EP against NUTS per test pair (bars: +- 2 MCSE)", fontsize=9)
    fig.tight_layout()
    return fig
