"""Calibration of predicted probabilities: Brier score, log loss, reliability curve, ECE."""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from . import checks
from ._common import _ftype, _masked_mean, _safe_div, _static_int, _valid

__all__ = [
    "ReliabilityCurve",
    "brier_score",
    "expected_calibration_error",
    "log_loss",
    "reliability_curve",
]


def _check_probs(probs, outcomes, mask) -> None:
    """Shapes always; where concrete, valid ``probs`` finite in [0, 1] and ``outcomes`` 0 or 1."""
    pv, ov, valid = checks.paired(probs, outcomes, mask, "probs", "outcomes")
    checks.probabilities(pv, valid, "probs")
    checks.outcomes01(ov, valid, "outcomes")


class ReliabilityCurve(NamedTuple):
    """Per-bin statistics of predicted probabilities (see ``reliability_curve``)."""

    counts: jax.Array  #: ``(n_bins,)`` integer number of valid predictions in each bin
    mean_prob: jax.Array  #: ``(n_bins,)`` mean predicted probability (0 in an empty bin)
    mean_outcome: jax.Array  #: ``(n_bins,)`` mean outcome, the observed frequency (0 if empty)


def brier_score(probs, outcomes, mask=None):
    """Brier score: the mean of ``(p - outcome)**2`` over valid predictions.

    Args:
      probs: ``(m,)`` predicted probabilities of the event; outcomes: ``(m,)`` 1 if it happened,
      else 0; mask: ``(m,)`` bool, True for real predictions; None = all.

    Returns:
      ``()`` score in [0, 1] (lower is better); 0 with no valid prediction.

    Raises:
      ValueError: for shapes that differ, or naming the first valid probability not finite in
        [0, 1] or outcome not 0 or 1 (checked where the arrays are concrete).
    """
    _check_probs(probs, outcomes, mask)
    probs, outcomes = jnp.asarray(probs), jnp.asarray(outcomes)
    dt = _ftype(probs, outcomes)
    return _masked_mean((probs.astype(dt) - outcomes) ** 2, _valid(probs, mask))


def log_loss(probs, outcomes, mask=None):
    """Mean negative log-likelihood ``-[o log p + (1 - o) log(1 - p)]`` over valid predictions.

    ``p`` is clipped to ``[eps, 1 - eps]`` with ``eps = jnp.finfo(dtype).eps`` of the computation
    dtype (2.2e-16 in float64, 1.2e-7 in float32; scikit-learn's ``eps="auto"``), so a confident
    wrong prediction costs at most ``-log(eps)`` (36.0 in float64, 15.9 in float32).

    Args:
      probs: ``(m,)`` predicted probabilities; outcomes: ``(m,)`` 1 if the event happened, else 0;
      mask: ``(m,)`` bool, True for real predictions; None = all.

    Returns:
      ``()`` log loss >= 0; 0 with no valid prediction.

    Raises:
      ValueError: as ``brier_score``.
    """
    _check_probs(probs, outcomes, mask)
    probs, outcomes = jnp.asarray(probs), jnp.asarray(outcomes)
    dt = _ftype(probs, outcomes)
    valid = _valid(probs, mask)
    eps = jnp.finfo(dt).eps
    p = jnp.clip(jnp.where(valid, probs, 0.5).astype(dt), eps, 1 - eps)
    o = jnp.where(valid, outcomes, 0).astype(dt)
    return _masked_mean(-(o * jnp.log(p) + (1 - o) * jnp.log1p(-p)), valid)


def reliability_curve(probs, outcomes, mask=None, n_bins=10):
    """Reliability diagram data: per equal-width bin, the count, mean prediction and mean outcome.

    Bin b (0-based) of B = ``n_bins`` holds the p in ``[b/B, (b+1)/B)``; the last bin is closed,
    ``[(B-1)/B, 1]``. Concrete probabilities outside [0, 1] (or not finite) and outcomes other
    than 0 and 1 raise ``ValueError`` (as ``brier_score``); traced ones are not checked, and
    p < 0 or p > 1 then fall into the first or the last bin.

    Args:
      probs: ``(m,)`` predicted probabilities; outcomes: ``(m,)`` 1 if the event happened, else 0;
      mask: ``(m,)`` bool, True for real predictions; None = all; n_bins: static int in
      [1, 10**4].

    Returns:
      ``ReliabilityCurve`` of ``(n_bins,)`` arrays; the means are 0 in empty bins (``counts``
      tells which bins are empty).
    """
    n_bins = _static_int("n_bins", n_bins, maximum=checks.MAX_BINS)
    _check_probs(probs, outcomes, mask)
    probs, outcomes = jnp.asarray(probs), jnp.asarray(outcomes)
    dt = _ftype(probs, outcomes)
    valid = _valid(probs, mask)
    p = probs.astype(dt)
    # b / B computed (correctly rounded) by numpy: XLA may turn a division into a multiplication
    inner_edges = np.arange(1, n_bins, dtype=dt) / np.asarray(n_bins, dt)
    bins = jnp.sum(p[:, None] >= inner_edges, axis=1)  # number of inner edges <= p
    member = (bins[:, None] == jnp.arange(n_bins)) & valid[:, None]  # (m, n_bins)
    counts = jnp.sum(member, axis=0)
    sum_p = jnp.sum(jnp.where(member, p[:, None], 0), axis=0)
    sum_o = jnp.sum(jnp.where(member, outcomes[:, None].astype(dt), 0), axis=0)
    return ReliabilityCurve(counts, _safe_div(sum_p, counts, 0.0), _safe_div(sum_o, counts, 0.0))


def expected_calibration_error(probs, outcomes, mask=None, n_bins=10):
    """Expected calibration error ``ECE = sum_b (n_b / N) |mean(outcome_b) - mean(p_b)|``.

    Bins as in ``reliability_curve`` (B equal-width bins on [0, 1], last bin closed); N is the
    number of valid predictions and empty bins contribute 0.

    Args:
      probs: ``(m,)`` predicted probabilities; outcomes: ``(m,)`` 1 if the event happened, else 0;
      mask: ``(m,)`` bool, True for real predictions; None = all; n_bins: static int >= 1.

    Returns:
      ``()`` ECE in [0, 1]; 0 with no valid prediction.
    """
    curve = reliability_curve(probs, outcomes, mask, n_bins)
    weight = _safe_div(curve.counts.astype(curve.mean_prob.dtype), jnp.sum(curve.counts), 0.0)
    return jnp.sum(weight * jnp.abs(curve.mean_outcome - curve.mean_prob))
