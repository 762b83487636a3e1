"""``bayesrank experiment label-ranking``: the label rankers on the semi-synthetic benchmarks of
Cheng, Hühn & Hüllermeier (ICML 2009), Kendall's tau by cross-validation, beside the published
figures.

Protocol: each data set (``bayesrank.label_ranking.load_label_ranking``: iris, wine; naive
Bayes label rankings, probabilities to 3 decimals, features scaled to ``[-1, 1]``) is split
into ``--folds`` folds (shuffled, seeded by ``--seed``); each method is trained on the other
folds and scored on the fold by the mean Kendall tau over its instances
(``mean_label_kendall_tau``); reported: the mean and standard deviation over the folds.

Methods: ``RPC`` (ranking by pairwise comparison, logistic regression, ``C = 1``), ``CC``
(constraint classification, logistic loss, ``C = 1``), ``GP`` (the GP label ranker,
hyperparameters by the EP evidence).

Presets (``--protocol``): ``reduced`` (the default; seconds): iris, 3 folds; ``full``: iris and
wine, 10 folds (the paper's). The published figures (RPC, CC; complete rankings) are the ones
recalled in ``PUBLISHED``: the paper itself was not at hand to check them (docs/results).
"""

from __future__ import annotations

import argparse
import dataclasses
import time

import numpy as np

from ._common import Progress, write_outputs
from .protocol import Protocol, add_protocol_argument, from_args, preset_of

__all__ = ["HELP", "NAME", "PRESETS", "PUBLISHED", "LabelRankingProtocol", "add_arguments", "run"]

NAME = "label-ranking"
HELP = "label rankers (RPC, constraint classification, the GP) on iris and wine: Kendall tau"
#: No ``--data-dir``: iris and wine are scikit-learn's own data.
DATA_DIR = None

METHODS = ("RPC", "CC", "GP")


@dataclasses.dataclass(frozen=True)
class LabelRankingProtocol(Protocol):
    """The settings ``--protocol`` presets (module docstring)."""

    datasets: tuple[str, ...] = ("iris",)
    folds: int = 3


#: The presets (``experiments.protocol``); an option given overrides its value.
PRESETS = {
    "reduced": LabelRankingProtocol(),
    "full": LabelRankingProtocol(datasets=("iris", "wine"), folds=10),
}
#: Cheng, Hühn & Hüllermeier (2009), complete rankings: (mean, sd) of Kendall tau, as recalled
#: (not checked against the paper here; see docs/results/label-ranking.md).
PUBLISHED = {
    "iris": {"RPC": (0.885, 0.068), "CC": (0.836, 0.089)},
    "wine": {"RPC": (0.921, 0.053), "CC": (0.933, 0.043)},
}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_protocol_argument(
        parser,
        PRESETS,
        help="reduced (default: iris, 3 folds) or full (iris and wine, 10 folds)",
    )
    parser.add_argument(
        "--datasets",
        nargs="+",
        choices=("iris", "wine"),
        default=None,
        help="iris, wine or both (reduced: iris; full: both)",
    )
    parser.add_argument("--folds", type=int, default=None, help="folds (reduced 3, full 10)")


def _model(method: str):
    from ..label_ranking import RPC, ConstraintClassification, GPLabelRanker

    return {"RPC": RPC, "CC": ConstraintClassification, "GP": GPLabelRanker}[method]()


def run(args: argparse.Namespace) -> dict:
    """The cross-validation of every method on every data set (module docstring)."""
    from ..label_ranking import load_label_ranking

    protocol, _ = preset_of(args, PRESETS)
    p = from_args(args, PRESETS)
    datasets, folds = list(p.datasets), p.folds
    if isinstance(folds, bool) or not isinstance(folds, int) or folds < 2:
        raise ValueError(f"--folds must be an integer >= 2, got {folds!r}")
    start = time.perf_counter()
    progress = Progress(len(datasets) * len(METHODS))
    rows = []
    for name in datasets:
        X, orders = load_label_ranking(name)
        rng = np.random.default_rng(args.seed)
        parts = np.array_split(rng.permutation(len(X)), folds)
        for method in METHODS:
            taus, seconds = [], []
            for test in parts:
                train = np.setdiff1d(np.arange(len(X)), test)
                t = time.perf_counter()
                model = _model(method).fit(X[train], orders[train])
                taus.append(float(model.score(X[test], orders[test])))
                seconds.append(time.perf_counter() - t)
            rows.append({"dataset": name, "method": method, "tau": taus, "seconds": seconds})
            progress(f"{name} {method}")
    results = {
        "settings": {"protocol": protocol, "datasets": datasets, "folds": folds,
                     "seed": int(args.seed)},
        "rows": rows,
        "published": PUBLISHED,
        "seconds": time.perf_counter() - start,
    }  # fmt: skip
    text = table(results)
    print(text)
    if args.out is not None:
        write_outputs(results, args.out, text, lambda: figure(results), NAME)
    return results


def figure(results):
    """Kendall tau of each method per data set (bars: the mean over folds, whiskers: the sd),
    the published figures as ticks."""
    from ..plot.base import pyplot

    plt = pyplot()
    datasets = results["settings"]["datasets"]
    fig, ax = plt.subplots(figsize=(1.8 + 2.2 * len(datasets), 3.4))
    width = 0.8 / len(METHODS)
    for m, method in enumerate(METHODS):
        taus = [
            np.asarray(next(r["tau"] for r in results["rows"] if r["dataset"] == d
                            and r["method"] == method))
            for d in datasets
        ]  # fmt: skip
        x = np.arange(len(datasets)) + (m - (len(METHODS) - 1) / 2) * width
        ax.bar(x, [t.mean() for t in taus], width, yerr=[t.std() for t in taus], label=method,
               capsize=3)  # fmt: skip
        for xi, d in zip(x, datasets, strict=True):
            if method in PUBLISHED.get(d, {}):
                ax.plot([xi - width / 2, xi + width / 2], [PUBLISHED[d][method][0]] * 2, "k-")
    ax.set_xticks(np.arange(len(datasets)), datasets)
    ax.set_ylim(0.6, 1.02)
    ax.set_ylabel(
        "Kendall tau (10-fold CV)" if results["settings"]["folds"] == 10 else "Kendall tau"
    )
    ax.legend(frameon=False, loc="upper left", bbox_to_anchor=(1.0, 1.0), title="black: published")
    return fig


def _published(dataset: str, method: str) -> str:
    value = PUBLISHED.get(dataset, {}).get(method)
    return "" if value is None else f"{value[0]:.3f} ± {value[1]:.3f}"


def table(results) -> str:
    """Mean ± sd of Kendall tau over the folds, per data set and method, beside the
    published."""
    s = results["settings"]
    lines = [f"{s['folds']}-fold CV, Kendall tau (mean ± sd over folds)"]
    lines.append(f"{'data':6}  {'method':6}  {'tau':>15}  {'published':>15}  {'fit s':>6}")
    for r in results["rows"]:
        tau = np.asarray(r["tau"])
        lines.append(
            f"{r['dataset']:6}  {r['method']:6}  {tau.mean():7.3f} ± {tau.std():5.3f}  "
            f"{_published(r['dataset'], r['method']):>15}  {np.mean(r['seconds']):6.2f}"
        )
    return "\n".join(lines)
