"""Reliability (calibration) diagram of predicted pair probabilities."""

from __future__ import annotations

import numpy as np

from ..data.checks import check_bool
from ..metrics.calibration import expected_calibration_error, reliability_curve
from .base import axes, pyplot

__all__ = ["reliability"]

#: Marks the diagonal, so a second model drawn into the same Axes does not draw it again.
_DIAGONAL = "bayesrank-reliability-diagonal"


def reliability(
    probs, outcomes, *, n_bins: int = 10, mask=None, label: str | None = None, counts=True, ax=None
):
    """Reliability diagram: observed frequency against predicted probability, per bin.

    The predictions are binned exactly as ``bayesrank.metrics.reliability_curve`` bins them
    (``n_bins`` = B equal-width bins, bin b = ``[b/B, (b+1)/B)``, the last bin closed). Drawn:

    - the points ``(mean_b(p), mean_b(outcome))`` of the non-empty bins, joined by a line, its
      legend entry ``"<label> (ECE = ...)"`` with the library's
      ``ECE = sum_b (n_b / N) |mean_b(outcome) - mean_b(p)|``
      (``bayesrank.metrics.expected_calibration_error``, same bins);
    - with ``counts``, bars of height ``n_b / N`` (the share of the N predictions in bin b) over
      each bin, in the points' colour, lighter;
    - the diagonal ``y = x`` (perfect calibration), once per Axes.

    Call it again with the same ``ax`` and another ``label`` to compare models.

    Args:
        probs: ``(m,)`` predicted probabilities P(i > j) in [0, 1].
        outcomes: ``(m,)`` 1 where i was preferred, 0 where j was (bool accepted).
        n_bins: number of bins B, an integer in [1, 10**4].
        mask: ``(m,)`` bool, True for predictions to include; None = all.
        label: the model's name in the legend (default ``"predictions"``).
        counts: draw the bars of the bins' shares.
        ax: the Axes to draw into; None = a new figure.

    Returns:
        The Axes.

    Raises:
        ValueError: naming the argument, for shapes that differ, a probability not finite in
            [0, 1], an outcome other than 0 and 1, a bad ``n_bins``, or no prediction to show.
    """
    pyplot()  # ImportError first; then the checks; a new figure only for valid input
    counts = check_bool(counts, "counts")
    curve = reliability_curve(probs, outcomes, mask, n_bins)  # checks probs, outcomes, mask
    ece = float(expected_calibration_error(probs, outcomes, mask, n_bins))
    n = np.asarray(curve.counts)
    if n.sum() == 0:
        raise ValueError("probs has no prediction to show (empty, or every entry masked out)")
    full = n > 0
    x, y = np.asarray(curve.mean_prob)[full], np.asarray(curve.mean_outcome)[full]
    name = "predictions" if label is None else str(label)
    ax = axes(ax)
    if not any(line.get_gid() == _DIAGONAL for line in ax.get_lines()):
        (diagonal,) = ax.plot([0, 1], [0, 1], "--", color="0.55", lw=1, label="perfect calibration")
        diagonal.set_gid(_DIAGONAL)
    line = ax.plot(x, y, marker="o", markersize=4, label=f"{name} (ECE = {ece:.3f})")[0]
    if counts:
        B = len(n)
        ax.bar(
            (np.arange(B) + 0.5) / B,
            n / n.sum(),
            width=1.0 / B,
            color=line.get_color(),
            alpha=0.2,
            edgecolor="none",
            label=f"{name}: share of predictions per bin",
        )
    ax.set(
        xlim=(0, 1),
        ylim=(0, 1),
        xlabel="predicted probability (bin mean)",
        ylabel="observed frequency (bin mean)",
    )
    ax.legend(loc="upper left", fontsize=8)
    return ax
