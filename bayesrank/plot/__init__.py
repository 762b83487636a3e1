"""Figures of preference models, drawn with matplotlib (the ``plot`` extra).

=========================  ========================================================================
``reliability``        calibration: observed frequency against predicted pair probability per
                           bin, the library's bins and ECE (``bayesrank.metrics.calibration``)
``ranked_pairs``       P(rank r beats rank r + 1) along the ranking by posterior mean, with the
                           central interval of the latent probability Phi(delta)
``learning_curves``    lines with bands against a budget (active learning: pairs asked)
``paired``             each model's paired difference to a reference, with 95% intervals;
``study``              the relational study's panels (its ``results.json``, see the function):
                           each metric against the number of known pairs, one line per model
``save``               write a Figure (or an Axes' figure) to a file
=========================  ========================================================================

matplotlib is imported when a function is called, not here: ``import bayesrank.plot`` works
without it, and a call without it raises ``ImportError`` saying ``pip install "bayesrank[plot]"``.
Everything is drawn through the object API (``fig, ax = plt.subplots()``; no ``plt.show()``), so it
works under the Agg backend. Every function takes ``ax=None`` (draw into that Axes, or a new
figure) and returns the Axes, or the Figure for several panels; bad input raises ``ValueError``
naming the argument.
"""

from __future__ import annotations

from .base import save
from .calibration import reliability
from .curves import learning_curves
from .pairs import ranked_pairs
from .relational import paired, study

__all__ = ["learning_curves", "paired", "ranked_pairs", "reliability", "save", "study"]
