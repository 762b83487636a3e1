"""The entity split's figure (``docs/results/entities.md``): held-out pair error and mean
log-likelihood against the judgements each held-out entity keeps, one row of panels per
collection, one line per model.

The relational study's collections (``results.json`` of ``bayesrank experiment relational
--split entities``) are drawn by ``bayesrank.plot.study``, bands the sd over query-repetitions;
HetRec (``results.json`` of ``bayesrank experiment large --split entities``, with ``--learn``
or without: the title says which) is one split, so its lines have no band.

    python experiments/entities_figure.py OUT.png RESULTS.json [RESULTS.json ...]
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

from bayesrank.plot import save, study

MODELS = ("XPGP", "placebo", "PGP+I", "PGP", "Entity", "RankSVM")
LARGE = ("XPGP", "placebo", "attributes + entity", "attributes", "RankSVM", "choix")


def _large(results, axs) -> None:
    """HetRec's rows: error and log-likelihood against ``j`` (one split, no band)."""
    by_j = results["entity_split"]
    js = sorted(by_j, key=int)
    for index, model in enumerate(LARGE):
        for panel, key in zip(axs, ("error", "log_likelihood"), strict=True):
            points = [(int(j), by_j[j][model].get(key)) for j in js if by_j[j].get(model)]
            points = [(j, v) for j, v in points if v is not None]
            if points:
                x, y = zip(*points, strict=True)
                panel.plot(x, y, "o-", color=f"C{index}", label=model, ms=3)
    s = results["settings"]
    how = "learned" if s.get("learned") else "fixed"
    for panel, label in zip(axs, ("pairwise error", "mean log P(truth)"), strict=True):
        panel.set(xlabel="judgements kept per held-out movie", ylabel=label)
        panel.set_xticks([int(j) for j in js])
        panel.set_title(f"HetRec ({s['held_out_movies']} held out, {how} priors): {label}",
                        fontsize=9)  # fmt: skip
    axs[0].legend(fontsize=7)


def main(argv=None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    out, paths = Path(argv[0]), [Path(p) for p in argv[1:]]
    every = [json.loads(p.read_text()) for p in paths]
    fig, axs = plt.subplots(len(every), 2, figsize=(10, 3.8 * len(every)), squeeze=False)
    for results, row in zip(every, axs, strict=True):
        if "entity_split" in results:
            _large(results, row)
        else:
            blocks = results["settings"].values()
            ran = [m for m in MODELS if any(m in b["summary"] for b in blocks)]
            study(results, metrics=("err", "loglik"), models=ran, ax=list(row))
    fig.tight_layout()
    save(fig, out, close=True)
    print(f"written: {out}")


if __name__ == "__main__":
    main()
