"""The entity split's verdict table (``docs/results/entities.md``): for each setting ``j``,
XPGP against the placebo graph, the entity effect and the entity effect alone, as paired
differences with their 95 % intervals.

For the relational study's collections (``results.json`` of ``bayesrank experiment relational
--split entities``) the differences are paired over query-repetitions: the mean of ``XPGP -
other`` in held-out pair error and in mean log P(truth), ``mean +- t_{0.975, N-1} sd /
sqrt(N)``, and the Wilcoxon signed-rank p over the per-query means (ten queries: the smallest
p it can give is 0.002). Negative error and positive log-likelihood differences favour XPGP.

HetRec's runs (``results.json`` of ``bayesrank experiment large --split entities``, one split
each) are pooled: given together, their differences are paired over the runs' seeds, ``mean
+- t_{0.975, N-1} sd / sqrt(N)`` (no Wilcoxon: three seeds cannot give a p below 0.25).

    python experiments/entities_verdict.py RESULTS.json [RESULTS.json ...]
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
from scipy.stats import t as student_t
from scipy.stats import wilcoxon

OTHERS = ("placebo", "PGP+I", "Entity")


def half_width(d) -> float:
    """The 95 % t interval's half-width of the mean of ``d: (N,)`` (NaN for one value)."""
    if len(d) < 2:
        return float("nan")
    return float(student_t.ppf(0.975, len(d) - 1) * np.std(d, ddof=1) / np.sqrt(len(d)))


def paired(rows, other: str, key: str):
    """``(mean, half-width, Wilcoxon p over queries, N)`` of ``XPGP - other`` in ``key``."""
    a = {(r["qid"], r["rep"]): r[key] for r in rows["XPGP"]}
    b = {(r["qid"], r["rep"]): r[key] for r in rows[other]}
    keys = sorted(set(a) & set(b))
    d = np.array([a[k] - b[k] for k in keys])
    half = half_width(d)
    qids = sorted({q for q, _ in keys})
    per_query = np.array([np.mean([a[k] - b[k] for k in keys if k[0] == q]) for q in qids])
    p = wilcoxon(per_query).pvalue if np.any(per_query != 0) else 1.0
    return float(d.mean()), float(half), float(p), len(d)


def verdict(results) -> str:
    name = results["collection"]
    lines = [
        f"**{name}**",
        "",
        "| j | XPGP error | against | error difference (95 % CI) | Wilcoxon p | "
        "log P(truth) difference (95 % CI) |",
        "| ---: | ---: | --- | ---: | ---: | ---: |",
    ]
    for j, block in results["settings"].items():
        rows = block["rows"]
        mine = block["summary"]["XPGP"]["err"]["mean"]
        for other in (o for o in OTHERS if rows.get(o)):
            e, eh, p, _ = paired(rows, other, "err")
            ll, lh, _, _ = paired(rows, other, "loglik")
            lines.append(
                f"| {j} | {mine:.3f} | {other} | {e:+.4f} ± {eh:.4f} | {p:.2g} | "
                f"{ll:+.4f} ± {lh:.4f} |"
            )
    return "\n".join(lines) + "\n"


LARGE_OTHERS = ("placebo", "attributes + entity")


def large_verdict(runs) -> str:
    """HetRec's splits (one ``results.json`` each): ``XPGP - other`` paired over the seeds."""
    seeds = [r["settings"]["seed"] for r in runs]
    learned = {bool(r["settings"].get("learned")) for r in runs}
    lines = [
        f"**HetRec, seeds {seeds} ({'learned' if learned == {True} else 'fixed'} priors)**",
        "",
        "| j | XPGP error | against | error difference (95 % CI) | log-likelihood difference "
        "(95 % CI) |",
        "| ---: | ---: | --- | ---: | ---: |",
    ]
    for j in runs[0]["entity_split"]:
        rows = [r["entity_split"][j] for r in runs]
        mine = np.mean([r["XPGP"]["error"] for r in rows])
        for other in LARGE_OTHERS:
            cells = []
            for key in ("error", "log_likelihood"):
                d = np.array([r["XPGP"][key] - r[other][key] for r in rows])
                cells.append(f"{d.mean():+.4f} ± {half_width(d):.4f}")
            lines.append(f"| {j} | {mine:.4f} | {other} | {cells[0]} | {cells[1]} |")
    return "\n".join(lines) + "\n"


def main(argv=None) -> None:
    every = [json.loads(Path(p).read_text()) for p in (sys.argv[1:] if argv is None else argv)]
    large = [r for r in every if "entity_split" in r]
    for results in every:
        if "entity_split" not in results:
            print(verdict(results))
    if large:
        print(large_verdict(large))


if __name__ == "__main__":
    main()
