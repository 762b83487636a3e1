"""The likelihood's own parameters at each design point, matched to the data's outcome rates.

A tie margin and a grade's thresholds are on the scale of the judged differences, which the
kernel's hyperparameters set: a design point that multiplies the prior variance by 20 needs a
margin about 4.5 times as wide to explain the same share of ties. Drawn independently of the
kernel's values (a design coordinate of their own), most design points pair a kernel with a
margin far from any that fits it, and score low however good the kernel; the global start then
misses the best basin (on MovieLens ties, 32 nats below it with 16 or 64 points).

So at every design point but the start, the margin and the thresholds are set from the prior
predictive. Under the point's prior a row's difference ``d = a^T xi_hat`` is ``N(0, v_s)``
(``v_s = K_ii + K_jj - 2 K_ij`` for a pair or tie ``(i, j)``, ``K_ii`` for a grade of ``i``),
and the judge's ``d + e ~ N(0, 1 + v)`` with ``v`` the rows' mean ``v_s`` (weighted). The
margin ``eps`` and thresholds ``b_k`` that give the observed rates:

    P(tie) = 2 Phi(eps / sqrt(1 + v)) - 1 = r     ->  eps = sqrt(1 + v) Phi^-1((1 + r) / 2),
    P(y <= k) = Phi(b_k / sqrt(1 + v)) = F_k      ->  b_k = sqrt(1 + v) Phi^-1(F_k),

``r`` the (weighted) share of ties among pairs and ties, ``F_k`` the cumulative share of grades
up to ``k``; rates of 0 or 1 are moved half a row inside. One compiled program gives every
point's ``v`` (the prior covariances of the data, mapped over the points).
"""

from __future__ import annotations

from functools import partial

import jax
import jax.numpy as jnp
import numpy as np
from scipy.special import ndtri

from ..compiler import jit
from ..data.batch import ProblemBatch
from ..kernels.params import map_params
from ..kernels.xpgp import XPGP, with_anchor
from ..parallel import prepare_batch

__all__ = ["match_design", "matched_values", "outcome_rates"]

#: the likelihood's fields that the design matches (XPGP's)
MATCHED = ("margin", "threshold", "threshold_gaps")


def outcome_rates(batch: ProblemBatch, n_grades: int):
    """Per query ``(tie rate r: (B,), cumulative grade shares F: (B, K - 1))``, weighted by the
    rows' weights, each moved half a row inside ``(0, 1)``; NaN where a query has no such
    rows."""
    valid = np.asarray(batch.pair_mask)
    weight = np.where(valid, 1.0 if batch.weight is None else np.asarray(batch.weight), 0.0)
    grade = np.full(valid.shape, -1) if batch.grade is None else np.asarray(batch.grade)
    tie = np.zeros(valid.shape, bool) if batch.tie is None else np.asarray(batch.tie)
    paired = weight * (grade < 0)
    total = paired.sum(1)
    half = 0.5 * weight.max(1, initial=1.0)
    with np.errstate(invalid="ignore", divide="ignore"):
        r = np.clip((paired * tie).sum(1), half, total - half) / total
        graded = weight * (grade >= 0)
        counts = np.stack([(graded * (grade == k)).sum(1) for k in range(n_grades)], 1)
        cumulative = np.cumsum(counts, 1)[:, :-1]
        g_total = graded.sum(1, keepdims=True)
        F = np.clip(cumulative, half[:, None], g_total - half[:, None]) / g_total
    return np.where(total > 0, r, np.nan), np.where(g_total > 0, F, np.nan)


def matched_values(v_pairs, v_grades, r, F):
    """``(margin, thresholds)`` from the rows' mean prior variances (pairs and ties, grades)
    and their rates (module docstring); shapes follow the inputs (``F``'s last axis: the
    ``K - 1`` thresholds). Thresholds keep a gap of at least ``1e-3`` of the scale."""
    margin = np.sqrt(1.0 + v_pairs) * ndtri((1.0 + r) / 2.0)
    scale = np.sqrt(1.0 + v_grades)[..., None]
    b = scale * ndtri(F)
    floor = 1e-3 * scale
    for k in range(1, b.shape[-1]):
        b[..., k] = np.maximum(b[..., k], b[..., k - 1] + floor[..., 0])
    return margin, b


def _row_variances(prior: XPGP, X, graphs, mask, anchor, pairs, pair_mask, weight, grade):
    """One query's weighted mean prior variance of its pair and tie rows, and of its graded
    rows: ``(v_pairs, v_grades)`` (NaN-free: 0 where it has none)."""
    K = with_anchor(prior.covariance(X, graphs, mask), anchor)
    i, j = pairs[:, 0], pairs[:, 1]
    v = K[i, i] + K[j, j] - 2 * K[i, j]
    w = jnp.where(pair_mask, weight, 0.0)
    is_pair = grade < 0

    def mean(select):
        total = jnp.sum(w * select)
        return jnp.sum(w * select * v) / jnp.where(total > 0, total, 1.0)

    return mean(is_pair), mean(~is_pair)


@partial(jit, static_argnames=("per_query",))
def _point_variances(priors, data, per_query: bool):
    """``(S, B)`` each: every design point's rows' mean variances per query."""
    axis = 0 if per_query else None
    one = jax.vmap(_row_variances, in_axes=(axis, 0, 0, 0, 0, 0, 0, 0, 0))
    return jax.lax.map(lambda prior: one(prior, *data), priors)


def _mean_of_some(x):
    """The mean over queries (axis 0) of those with a value (not NaN); NaN where none has."""
    x = np.asarray(x, np.float64)
    count = np.sum(~np.isnan(x), axis=0)
    return np.where(count > 0, np.nansum(x, axis=0) / np.maximum(count, 1), np.nan)


def match_design(grid: np.ndarray, priors, batch: ProblemBatch, prior: XPGP, flags, per_query):
    """``grid: (S, B, P)`` (flat free unconstrained values, ``B = 1`` for a shared ``theta``)
    with every point's free margin and threshold columns (but the start's, row 0) set from the
    data's outcome rates under its own prior (module docstring), where some kernel
    hyperparameter is free too (else the design keeps its own values for them). ``priors``:
    the points as priors (``design_priors``: leaves ``(B, S, ...)`` per query, ``(S, ...)``
    shared);
    ``prior``: the fit's starting prior (the structure); ``flags``: per leaf, trainable."""
    labels = jax.tree_util.tree_leaves(
        map_params(prior, lambda owner, name, _c, _v: (type(owner).__name__, name)),
        is_leaf=lambda x: isinstance(x, tuple) and len(x) == 2,
    )
    sizes = [int(np.size(x)) for x in jax.tree_util.tree_leaves(prior)]
    columns, start = {}, 0
    for label, size, free in zip(labels, sizes, flags, strict=True):
        if free:
            if label[0] == "XPGP" and label[1] in MATCHED:
                columns[label[1]] = slice(start, start + size)
            start += size
    matched = sum(c.stop - c.start for c in columns.values())
    if not columns or batch.tie is None or matched == grid.shape[-1]:
        return grid  # nothing to match, or nothing else free to match them to
    data = prepare_batch(prior, batch)
    dtype = jnp.result_type(float)
    weight = np.ones(data.pair_mask.shape) if data.weight is None else data.weight
    grade = np.full(data.pair_mask.shape, -1) if data.grade is None else data.grade
    anchor = np.zeros(data.mask.shape, bool) if data.anchor is None else data.anchor
    stacked = (data.X, data.graphs, data.mask, anchor, data.pairs, data.pair_mask)
    stacked = (*stacked, np.asarray(weight, dtype), grade)
    if per_query:  # (B, S, ...) -> (S, B, ...): points outside, queries inside
        priors = jax.tree_util.tree_map(lambda a: np.swapaxes(a, 0, 1), priors)
    priors = jax.tree_util.tree_map(lambda a: np.asarray(a, dtype), priors)
    v_pairs, v_grades = (
        np.asarray(a, np.float64) for a in _point_variances(priors, stacked, per_query)
    )
    r, F = outcome_rates(batch, prior.n_grades or 1)
    if not per_query:  # one theta: the rows' rates and variances over every query
        counts = np.asarray(batch.pair_mask).sum(1)
        r, F = _mean_of_some(r)[None], _mean_of_some(F)[None]
        v_pairs = np.average(v_pairs, axis=1, weights=counts)[:, None]
        v_grades = np.average(v_grades, axis=1, weights=counts)[:, None]
    margin, b = matched_values(v_pairs, v_grades, r[None], F[None])
    out = grid.copy()
    for name, cols in columns.items():
        if name == "margin":
            value = np.log(margin)[..., None]
        elif name == "threshold":
            value = b[..., :1]
        else:
            value = np.log(np.diff(b, axis=-1))
        value = value[1:]  # the start keeps its values
        ok = np.all(np.isfinite(value), axis=-1, keepdims=True)
        out[1:, :, cols] = np.where(ok, value, grid[1:, :, cols])
    return out
