"""The active study's table and figure, from its results."""

from __future__ import annotations

import numpy as np

from .._common import warning_lines

__all__ = ["MARKS", "below_random", "figure", "table"]

#: The ``k`` of the table's columns (those up to ``--k``, and ``--k`` itself).
MARKS = (0, 1, 2, 5, 10, 20, 30, 50, 100)
#: The paper's Fig. 4 reports the error after ten questions.
FIG4_K = 10


def below_random(entry: dict, criterion: str, k: int) -> int | None:
    """In how many queries ``criterion``'s error at ``k`` is below random's mean there (None
    without random)."""
    curves = entry["curves"]
    if "random" not in curves or criterion == "random":
        return None
    mine = np.asarray(curves[criterion]["per_query"])[:, k]
    return int(np.sum(mine < np.asarray(curves["random"]["per_query"])[:, k]))


def table(results: dict) -> str:
    """The summary: per prior and criterion the mean error at a few ``k``, the AUC at the last
    ``k``, in how many queries the criterion beats random's mean (at ``k = 10`` and the last
    ``k``); then each query's error at the last ``k``."""
    s = results["settings"]
    K = results["ks"][-1]
    qids = [q["qid"] for q in results["queries"]]
    marks = [m for m in MARKS if m < K] + [K]
    at = [m for m in dict.fromkeys((min(FIG4_K, K), K))]
    lines = [
        f"active exploration on {len(qids)} queries ({', '.join(qids)}) of {results['data']}",
        f"protocol {s['protocol']}: {s['engine'].upper()} posterior, {K} answers, test pairs: "
        f"{s['test_fraction']:.0%} of each query's labelled pairs (never asked); random: "
        f"{s['repeats']} runs",
        "",
        "pair error on the test pairs, mean over queries; AUC at the last k; below random: "
        "queries where the criterion's error is below random's mean",
        f"{'model':<10} {'criterion':<19}"
        + "".join(f"{'k=' + str(m):>7}" for m in marks)
        + f"{'AUC':>7}"
        + "".join(f"{'<rand@' + str(m):>10}" for m in at),
    ]
    for model, entry in results["models"].items():
        for c, curve in entry["curves"].items():
            below = [below_random(entry, c, m) for m in at]
            lines.append(
                f"{model:<10} {c:<19}"
                + "".join(f"{curve['mean'][m]:7.3f}" for m in marks)
                + f"{entry['auc'][c]['mean']:7.3f}"
                + "".join(f"{'' if b is None else f'{b}/{len(qids)}':>10}" for b in below)
            )
    lines += ["", f"pair error at k={K}, per query", f"{'model':<10} {'criterion':<19}"]
    w = max(9, *(len(q) + 3 for q in qids))
    lines[-1] += "".join(f"{'q' + q:>{w}}" for q in qids)
    for model, entry in results["models"].items():
        for c, curve in entry["curves"].items():
            lines.append(
                f"{model:<10} {c:<19}" + "".join(f"{row[K]:{w}.3f}" for row in curve["per_query"])
            )
    lines += warning_lines(results["warnings"])
    lines.append(f"run time {results['seconds']:.0f} s")
    return "\n".join(lines)


def figure(results: dict):
    """One panel per prior: ``bayesrank.plot.learning_curves`` of the per-query curves (band:
    +- one standard error over queries)."""
    import matplotlib.pyplot as plt

    from ...plot import learning_curves

    models = results["models"]
    fig, axes = plt.subplots(1, len(models), figsize=(4.6 * len(models), 3.8), squeeze=False)
    for ax, (model, entry) in zip(axes[0], models.items(), strict=True):
        learning_curves(
            np.asarray(results["ks"]),
            {c: np.asarray(e["per_query"]) for c, e in entry["curves"].items()},
            band="sem",
            xlabel="pairs asked k",
            ylabel="pair error (held-out test pairs)",
            title=f"{model}: mean over {len(results['queries'])} queries (+- 1 s.e.)",
            ax=ax,
        )
    return fig
