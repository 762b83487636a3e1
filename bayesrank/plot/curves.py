"""Learning curves: a quantity against a budget (pairs asked, pairs known), with bands."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from ..data.checks import check_float
from .base import axes, draw_curve, pyplot, vector

__all__ = ["BANDS", "learning_curves"]

#: The named bands; a pair ``(lo, hi)`` of percentiles is accepted too.
BANDS = ("std", "sem")


def check_band(band):
    """``"std"``, ``"sem"``, None, or a pair of percentiles ``0 <= lo < hi <= 100``."""
    if band is None or (isinstance(band, str) and band in BANDS):
        return band
    if isinstance(band, tuple | list) and len(band) == 2:
        lo = check_float(band[0], "band[0]", 0.0, 100.0)
        hi = check_float(band[1], "band[1]", 0.0, 100.0)
        if lo < hi:
            return lo, hi
    raise ValueError(
        f"band must be 'std', 'sem', None or a pair (lo, hi) of percentiles with "
        f"0 <= lo < hi <= 100, got {band!r}"
    )


def curve_band(value, name: str, k: int, band):
    """``(mean, lo, hi)``: ``(k,)`` arrays (``lo``, ``hi`` None without a band) of one curve.

    ``value`` is a tuple ``(mean, sd)``, a ``(k,)`` run or ``(r, k)`` repetitions (see
    ``learning_curves``)."""
    if isinstance(value, tuple):
        if len(value) != 2:
            raise ValueError(f"{name} must be a pair (mean, std) when a tuple, got {len(value)}")
        mean = vector(value[0], f"{name}[0]", length=k)
        sd = vector(value[1], f"{name}[1]", length=k)
        if (sd < 0).any():
            i = int(np.argmax(sd < 0))
            raise ValueError(f"{name}[1][{i}] = {sd[i]!r} is negative: a std must be >= 0")
        if band is None:
            return mean, None, None
        if band != "std":
            raise ValueError(
                f"band={band!r} needs the repetitions (r, k); {name} gives (mean, std) only: "
                "use band='std' or None"
            )
        return mean, mean - sd, mean + sd
    try:
        arr = np.asarray(value)
    except (TypeError, ValueError) as err:  # ragged nested sequences
        raise ValueError(f"{name} must be a real array (k,) or (r, k): {err}") from None
    if arr.ndim == 1:
        return vector(arr, name, length=k), None, None
    runs = vector(arr, name, length=k, ndim=2)
    if runs.shape[0] == 0:
        raise ValueError(f"{name} has shape {runs.shape}: no repetition")
    mean = runs.mean(axis=0)
    if band is None:
        return mean, None, None
    if isinstance(band, tuple):
        lo, hi = np.percentile(runs, band, axis=0)
        return mean, lo, hi
    r = runs.shape[0]
    sd = runs.std(axis=0, ddof=1) if r > 1 else np.zeros(k)
    half = sd if band == "std" else sd / np.sqrt(r)
    return mean, mean - half, mean + half


def learning_curves(
    x,
    curves,
    *,
    band="std",
    xlabel: str = "pairs asked",
    ylabel: str = "pairwise error",
    title: str | None = None,
    ax=None,
):
    """One line per named curve against ``x``, each with a shaded band in its colour.

    For active learning (the error against the number of questions asked), the relational study
    (against the number of known pairs, see ``study``) and the like.

    Args:
        x: ``(k,)`` the budget at each point.
        curves: a mapping ``name -> value``, the names in the legend, where ``value`` is one of
            - a tuple ``(mean: (k,), std: (k,))``: the line ``mean``, the band ``mean +- std``;
            - an array ``(r, k)`` of ``r`` repetitions (a nested list too): the line their mean
              ``m``, the band per ``band``;
            - an array ``(k,)``: one run, a line without a band.
        band: with repetitions, ``"std"``: ``m +- s``, ``s`` the sample standard deviation
            (ddof 1; 0 for one repetition); ``"sem"``: ``m +- s / sqrt(r)``; a pair ``(lo, hi)``
            of percentiles, e.g. ``(10, 90)``: from the ``lo``-th to the ``hi``-th percentile of
            the repetitions at each point; None: no band. A ``(mean, std)`` tuple takes
            ``"std"`` or None.
        xlabel, ylabel: the axis labels; title: the Axes' title (None = none).
        ax: the Axes to draw into; None = a new figure.

    Returns:
        The Axes.

    Raises:
        ValueError: naming the curve (``curves['EP']``) whose shape disagrees with ``x`` or that
            holds NaN or infinity, for a negative std, an empty ``curves`` or a bad ``band``.
    """
    pyplot()  # ImportError first; then the checks; a new figure only for valid input
    band = check_band(band)
    x = vector(x, "x")
    if x.shape[0] == 0:
        raise ValueError("x is empty: a curve needs at least one point")
    if not isinstance(curves, Mapping) or not curves:
        raise ValueError("curves must be a non-empty mapping name -> values")
    drawn = [curve_band(v, f"curves[{name!r}]", len(x), band) for name, v in curves.items()]
    ax = axes(ax)
    for name, (mean, lo, hi) in zip(curves, drawn, strict=True):
        draw_curve(ax, x, mean, lo, hi, label=str(name))
    ax.set(xlabel=str(xlabel), ylabel=str(ylabel))
    if title is not None:
        ax.set_title(str(title))
    ax.legend(fontsize=8)
    return ax
