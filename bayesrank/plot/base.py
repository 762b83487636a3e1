"""Shared pieces of the figures: matplotlib imported lazily, axes, input checks, bands, saving
(public: the studies draw their own figures with ``pyplot`` and ``draw_curve``).

matplotlib is imported inside the functions only (``pyplot``), so ``import bayesrank.plot``
works without it; drawing without it raises ``ImportError`` naming the ``plot`` extra.
"""

from __future__ import annotations

from os import PathLike
from pathlib import Path

import numpy as np

__all__ = ["INSTALL", "axes", "draw_curve", "pyplot", "save", "vector"]

#: How to get matplotlib, as the ``ImportError`` says.
INSTALL = 'pip install "bayesrank[plot]"'


def pyplot():
    """``matplotlib.pyplot``, or ``ImportError`` saying how to install it."""
    try:
        import matplotlib.pyplot as plt
    except ImportError as err:
        raise ImportError(f"bayesrank.plot needs matplotlib: {INSTALL}") from err
    return plt


def axes(ax, figsize=(5.0, 4.0)):
    """``ax`` itself, or the Axes of a new figure (``plt.subplots``) when ``ax`` is None."""
    plt = pyplot()
    if ax is None:
        _, ax = plt.subplots(figsize=figsize)
        return ax
    if not (hasattr(ax, "plot") and hasattr(ax, "figure")):
        raise ValueError(f"ax must be a matplotlib Axes or None, got {type(ax).__name__}")
    return ax


def vector(x, name: str, *, length: int | None = None, ndim: int = 1) -> np.ndarray:
    """``x`` as a finite float64 array of ``ndim`` dimensions (the last of ``length``, if given).

    Raises:
        ValueError: naming ``name`` for a dtype that is not real, a wrong shape, or the first entry
            that is not finite (``curves['EP'][3] = nan is not finite``).
    """
    try:
        arr = np.asarray(x)
    except (TypeError, ValueError) as err:  # ragged nested sequences
        raise ValueError(f"{name} must be a real array: {err}") from None
    if arr.dtype.kind not in "biuf":
        raise ValueError(f"{name} must be a real array, got dtype {arr.dtype}")
    arr = arr.astype(np.float64)
    if arr.ndim != ndim:
        raise ValueError(f"{name} must be {ndim}-D, got shape {arr.shape}")
    if length is not None and arr.shape[-1] != length:
        raise ValueError(f"{name} has shape {arr.shape}: its last axis must have length {length}")
    bad = ~np.isfinite(arr)
    if bad.any():
        at = tuple(int(i) for i in np.argwhere(bad)[0])
        index = "[" + ", ".join(map(str, at)) + "]"
        raise ValueError(f"{name}{index} = {arr[at]!r} is not finite")
    return arr


def draw_curve(ax, x, mean, lo=None, hi=None, *, label=None, color=None, ls="-", alpha=0.18):
    """A line ``mean`` against ``x`` (``color`` None: the Axes' next colour) and, with ``lo`` and
    ``hi``, a band between them in its colour, ``alpha`` opaque. Returns the line."""
    (line,) = ax.plot(x, mean, marker="o", markersize=3.5, color=color, ls=ls, label=label)
    if lo is not None:
        ax.fill_between(x, lo, hi, color=line.get_color(), alpha=alpha, linewidth=0)
    return line


def save(fig_or_ax, path: str | PathLike, *, dpi: int = 110, close: bool = False) -> Path:
    """Write the figure of ``fig_or_ax`` (a Figure, or an Axes of it) to ``path`` (the format
    from its suffix: ``.png``, ``.pdf``, ``.svg``), trimmed to its content. With ``close``, the
    figure is closed afterwards (pyplot keeps every figure it made until then). Returns the path.
    """
    fig = fig_or_ax if hasattr(fig_or_ax, "savefig") else getattr(fig_or_ax, "figure", None)
    if fig is None or not hasattr(fig, "savefig"):
        raise ValueError(f"fig_or_ax must be a matplotlib Figure or Axes, got {fig_or_ax!r}")
    path = Path(path)
    fig.savefig(path, dpi=dpi, bbox_inches="tight")
    if close:
        pyplot().close(fig)
    return path
