"""Helpers shared by the metrics: masks, safe division, stable rankings of one padded query."""

from __future__ import annotations

import jax.numpy as jnp
from jax import lax

from .checks import MAX_CUTOFF, static_int


def _static_int(name, value, minimum=1, maximum=MAX_CUTOFF):
    """A static int option in ``[minimum, maximum]`` (``ValueError`` naming it otherwise; a traced
    value raises ``StaticArgumentError``, both a ``TypeError`` and a ``ValueError``)."""
    return static_int(name, value, minimum, maximum)


def _ftype(*xs):
    return jnp.result_type(*xs, float)


def _valid(x, mask):
    if mask is None:
        return jnp.ones(x.shape[:1], dtype=bool)
    return jnp.asarray(mask, dtype=bool)


def _safe_div(num, den, empty):
    """``num / den`` where ``den > 0``, else ``empty`` (no inf or NaN, not even in gradients)."""
    ok = den > 0
    return jnp.where(ok, num / jnp.where(ok, den, 1), empty)


def _masked_mean(values, valid, empty=0.0):
    return _safe_div(jnp.sum(jnp.where(valid, values, 0)), jnp.sum(valid), empty)


def _sort_valid_first(key, valid):
    """Sort ascending by (padded?, key, index); returns (order, key sorted, padded? sorted)."""
    idx = jnp.arange(key.shape[0])
    padded, skey, order = lax.sort((jnp.logical_not(valid).astype(jnp.int32), key, idx), num_keys=3)
    return order, skey, padded


def _positions(scores, valid):
    """The ranking of one query: ``order[r]`` is the item at 0-based position r (score descending,
    ties by index, padded items last) and ``pos[i]`` the 0-based position of item i."""
    scores = jnp.asarray(scores)
    if scores.dtype == bool or jnp.issubdtype(scores.dtype, jnp.unsignedinteger):
        scores = scores.astype(_ftype(scores))  # so that negation reverses the order
    order, _, _ = _sort_valid_first(-scores, valid)
    pos = jnp.zeros_like(order).at[order].set(jnp.arange(order.shape[0], dtype=order.dtype))
    return order, pos


def _average_ranks(x, valid):
    """1-based ranks of ``x`` ascending among valid items, tied values sharing their mean rank."""
    order, skey, padded = _sort_valid_first(x, valid)
    n = x.shape[0]
    idx = jnp.arange(n)
    change = (skey[1:] != skey[:-1]) | (padded[1:] != padded[:-1])
    first = jnp.concatenate([jnp.ones((1,), bool), change])  # starts a run of equal values
    last = jnp.concatenate([change, jnp.ones((1,), bool)])  # ends one
    start = lax.cummax(jnp.where(first, idx, 0))
    stop = lax.cummin(jnp.where(last, idx, n), reverse=True)
    mean_rank = (start + stop).astype(_ftype(x)) / 2 + 1
    return jnp.zeros(n, mean_rank.dtype).at[order].set(mean_rank)
