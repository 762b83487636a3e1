"""Ranking, pairwise and probability metrics of one query, in pure JAX.

Modules: ``ranking`` (LETOR: NDCG@k, P@k, AP), ``pairwise`` (error, AUC), ``correlation``
(Kendall, Spearman, position error), ``calibration`` (Brier, log loss, reliability, ECE); every
name is importable from ``bayesrank.metrics`` itself. ``checks`` holds the host-side checks of their
inputs, which ``ordering`` and ``order_learning`` use too.

Every function scores ONE query (one set of pairs, one set of predictions) given fixed-shape arrays
and an optional boolean ``mask`` of the same leading length (True = real item; None = all real).
Padded entries never change a result, whatever they hold (huge, infinite or NaN values included),
so the functions can be ``jax.vmap``-ed over padded queries. Cut-offs and options (``k``,
``max_k``, ``n_bins``, ``short_query``, ``normalize``) are static Python values: mark them static
under ``jax.jit`` (the library never jits for you). Nothing returns NaN; degenerate inputs get the
value given in the table.

Conventions
-----------

=========================  =======================================================================
ranking                    by score, highest first; equal scores keep index order (the official
                           LETOR scripts stably sort file order); padded items last; NaN scores
                           rank after all real scores
positions                  1-based (position 1 = top)
gain (NDCG)                ``2**label - 1`` (labels 0, 1, 2 -> 0, 1, 3); labels integers >= 0;
                           concrete labels with a gain not finite in float64 (>= 1024) raise
                           ``ValueError`` (``check_gain_labels``); traced ones are not checked
                           and large gains are taken relative to the largest, so stay finite
discount (NDCG)            1 at positions 1 and 2, ``1 / log2(p)`` at position p >= 3 (LETOR's;
                           NOT the ``1 / log2(p + 1)`` of trec_eval or scikit-learn)
no relevant document       NDCG@k = P@k = AP = 0
NDCG@k, k > n documents    0 with ``short_query="letor"`` (official, see ``ndcg_at``);
                           NDCG@n with ``short_query="truncate"``
P@k, k > n documents       holes are irrelevant: (#relevant among the n) / k (LETOR 4.0 script)
relevant (P@k, AP)         ``label >= relevant_threshold`` (default 1)
mean over queries          plain mean over all queries, those without relevant documents included
pairwise error             pair (i, j) means "i preferred to j"; p < 0.5 is an error, p == 0.5 half
                           an error; no valid pair -> 0
pairwise AUC               Mann-Whitney over m positives p and m negatives 1 - p, ties 1/2;
                           no valid pair -> 0.5
Kendall tau                tau-b (``scipy.stats.kendalltau``); 0 where scipy gives NaN (a constant
                           vector, fewer than 2 items)
Kendall distance           discordant pair 1, pair tied in exactly one vector 1/2, tied in both 0;
                           divided by n(n-1)/2 when ``normalize``; fewer than 2 items -> 0
Spearman rho               Pearson correlation of average ranks (``scipy.stats.spearmanr``);
                           0 for a constant vector or fewer than 2 items
footrule, position error   positions as in "ranking"; no valid item -> 0
Brier, log loss            mean over valid items; log loss clips p to [eps, 1 - eps],
                           eps = ``finfo(dtype).eps``; no valid item -> 0
ECE, reliability curve     B equal-width bins, bin b = [b/B, (b+1)/B), the last bin closed (p
                           outside [0, 1] goes to the nearest end bin); empty bins count 0
dtype                      results are floating, of the inputs' dtype promoted with Python float
                           (integer inputs give float64 under jax_enable_x64, else float32)
=========================  =======================================================================
"""

from __future__ import annotations

# The helpers that STYLE.md points to as examples stay reachable as bayesrank.metrics._safe_div etc.
from ._common import _masked_mean, _safe_div  # noqa: F401
from .calibration import (
    ReliabilityCurve,
    brier_score,
    expected_calibration_error,
    log_loss,
    reliability_curve,
)
from .correlation import (
    kendall_distance,
    kendall_tau,
    position_error,
    spearman_footrule,
    spearman_rho,
)
from .pairwise import pairwise_auc, pairwise_error, pairwise_error_from_scores
from .ranking import (
    LetorMetrics,
    average_precision,
    check_gain_labels,
    letor_metrics,
    ndcg_at,
    precision_at,
)

__all__ = [
    "LetorMetrics",
    "ReliabilityCurve",
    "average_precision",
    "brier_score",
    "check_gain_labels",
    "expected_calibration_error",
    "kendall_distance",
    "kendall_tau",
    "letor_metrics",
    "log_loss",
    "ndcg_at",
    "pairwise_auc",
    "pairwise_error",
    "pairwise_error_from_scores",
    "position_error",
    "precision_at",
    "reliability_curve",
    "spearman_footrule",
    "spearman_rho",
]
