"""Online learning of a weighted combination of preference functions (Cohen, Schapire & Singer).

Cohen, Schapire & Singer ("Learning to order things", JAIR 10, 1999, Sec. 3, Fig. 1 "Allocate
weights") learn the weights of ``N`` primitive preference functions ``R_i(u, v)`` in ``[0, 1]``
(``1``: ``u`` above ``v``; ``0``: ``v`` above ``u``; ``1/2``: no opinion) from rounds of feedback
with Freund & Schapire's Hedge. A ranking function ``f: X -> S ∪ {⊥}`` (``⊥``: unranked) gives

    R_f(u, v) = 1 if f(u) > f(v),  0 if f(u) < f(v),  1/2 otherwise (tie, or unranked)

(``ranking_preference``). From uniform ``w^1`` (``w_i^1 = 1/N``) and ``beta`` in ``[0, 1]``,
round ``t``:

    1. receive the items X^t and the primitives R_1^t .. R_N^t on them;
    2. PREF^t(u, v) = sum_i w_i^t R_i^t(u, v)                      (combined_preference),
       and output its greedy order (``ordering.greedy_order``, Fig. 2);
    3. receive the feedback F^t: pairs (u, v), "u should be ranked above v";
    4. Loss(R, F) = sum_{(u, v) in F} (1 - R(u, v)) / |F|          (Eq. 1, preference_loss);
    5. w_i^{t+1} = w_i^t beta^{Loss(R_i^t, F^t)} / Z_t, with Z_t making sum_i w_i^{t+1} = 1.

Eq. 1 is linear in ``R``: ``Loss(PREF^t, F^t) = sum_i w_i^t Loss(R_i^t, F^t)``. The relative
loss bound (Theorem 1; Freund & Schapire 1997, Theorem 2) is on that loss, for any sequence of
items, primitives and feedback, with uniform ``w^1``:

    sum_t Loss(PREF^t, F^t) <= (ln(1/beta) min_i sum_t Loss(R_i^t, F^t) + ln N) / (1 - beta).

It bounds the combined preference function's loss, not the greedy order's
(``HedgeInfo.order_loss``), which may disagree with ``PREF^t`` on some pairs.

Followed as written: these equations, the steps' order (the round's order uses ``w^t``, before
the update), uniform ``w^1`` (the paper allows any ``w^1`` on the simplex; ``ln N`` is for the
uniform one). Sources: ``R_f``, the combination, Eq. 1 and the update as the lecture notes
"Preference Learning: Modelli e Metodi" state them (they list ``1/2`` for unranked items; a
tie is the "otherwise" case); the greedy order and its worked example as J. Rousu's lecture notes
on preference learning (Aalto CS-E4710, 2023) have them; the bound's constants as Freund &
Schapire state them for Hedge. This module's conventions where the paper says nothing:

- no feedback (``|F^t| = 0``: a padded round): every loss ``0``, weights unchanged;
- ``beta = 0``: a primitive with positive loss gets weight 0; if all have one, ``Z_t = 0``
  and the weights are kept;
- ``F^t`` is a set in the paper; a pair given twice counts twice;
- a pair ``(u, u)``, or one naming a padded item, is an error (where concrete).

Shapes and padding are as in ``hedge_step``. ``hedge_init`` / ``hedge_step`` are a
BlackJAX-style ``init`` / ``step`` pair (``NamedTuple`` state and info); ``hedge`` scans them
over rounds. All are pure and vmap-able; the public functions check shapes always and values
where the arrays are concrete (not under the caller's ``jit`` or ``vmap``), then call a jitted
body. A failure is a ``ValueError`` naming argument, index and value
(``R[0, 1, 2] = 1.5 is outside [0, 1]``).

Length: one concept, the learner and the preference functions it combines, with the host-side
checks its five entry points share (about 100 lines), kept beside them as in ``ordering``.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from .compiler import jit
from .data.checks.formatting import first_index, index_text, show_value
from .metrics.checks import as_numpy
from .ordering import greedy_order
from .runtime import is_traced

__all__ = [
    "HedgeInfo",
    "HedgeState",
    "combined_preference",
    "hedge",
    "hedge_init",
    "hedge_step",
    "preference_loss",
    "ranking_preference",
]


class HedgeState(NamedTuple):
    """The learner's state before round ``t``."""

    weights: jax.Array  # (N,) w^t, on the simplex
    cumulative_primitive_loss: jax.Array  # (N,) sum_{s<t} Loss(R_i^s, F^s)
    cumulative_loss: jax.Array  # () sum_{s<t} Loss(PREF^s, F^s): what Theorem 1 bounds


class HedgeInfo(NamedTuple):
    """What round ``t`` did (``hedge`` stacks them along a leading ``(T,)`` axis)."""

    weights: jax.Array  # (N,) w^t, used by the round's PREF^t and order
    primitive_loss: jax.Array  # (N,) Loss(R_i^t, F^t)
    loss: jax.Array  # () Loss(PREF^t, F^t) = sum_i w_i^t Loss(R_i^t, F^t)
    order: jax.Array  # (n,) int32 greedy order of PREF^t, most preferred first
    order_loss: jax.Array  # () fraction of F^t's pairs that `order` ranks the wrong way
    n_feedback: jax.Array  # () int32 |F^t| (0: a padded round)


# --- host-side checks (shapes always, values where concrete) --------------------------------


def _arrays(*xs):
    """JAX arrays (None kept): one leaf each for ``jit``, however the caller wrote them."""
    return tuple(None if x is None else jnp.asarray(x) for x in xs)


def _check_beta(beta) -> None:
    if np.ndim(beta) != 0:
        raise ValueError(f"beta must be a scalar, got shape {np.shape(beta)}")
    if is_traced(beta):
        return
    value = as_numpy(beta, "beta")
    if not 0 <= value <= 1:  # NaN fails too
        raise ValueError(f"beta = {show_value(value[()])} is outside [0, 1]")


def _bool_values(x, name: str):
    """``x`` as a NumPy bool array (None: None); bools or 0/1 only."""
    if x is None:
        return None
    arr = as_numpy(x, name)
    if arr.dtype.kind != "b":
        idx = first_index(~np.isin(arr, (0, 1)))
        if idx is not None:
            raise ValueError(f"{name}{index_text(idx)} = {show_value(arr[idx])} is not a bool")
    return arr.astype(bool)


def _check_problem(R, feedback, feedback_mask, mask, *, lead: int, names, primitives=True):
    """Check one round (``lead = 0``) or a stack of rounds (``lead = 1``); ``R`` has an axis of
    ``N`` primitives before its ``(n, n)`` unless ``primitives`` is False.

    ``names``: what the messages call ``(R, feedback, feedback_mask, mask)``.
    """
    r_name, f_name, fm_name, m_name = names
    shape = np.shape(R)
    if len(shape) != lead + 2 + primitives or shape[-1] != shape[-2]:
        want = "(" + "T, " * lead + "N, " * primitives + "n, n)"
        raise ValueError(f"{r_name} must have shape {want}, got {shape}")
    head, n = shape[:lead], shape[-1]
    f_shape = np.shape(feedback)
    if len(f_shape) != lead + 2 or f_shape[-1] != 2 or f_shape[:lead] != head:
        want = f"({head[0]}, f, 2)" if lead else "(f, 2)"
        raise ValueError(f"{f_name} must have shape {want} to match {r_name}, got {f_shape}")
    for x, name, want, ref in (
        (feedback_mask, fm_name, f_shape[:-1], f_name),
        (mask, m_name, (*head, n), r_name),
    ):
        if x is not None and np.shape(x) != want:
            raise ValueError(f"{name} must have shape {want} to match {ref}, got {np.shape(x)}")
    if is_traced(mask):
        return  # which entries count is unknown
    items = _bool_values(mask, m_name)
    if not is_traced(R):
        _check_unit_interval(R, r_name, items, lead if primitives else None)
    if is_traced(feedback, feedback_mask):
        return
    fb = as_numpy(feedback, f_name)
    if fb.dtype.kind not in "iu":
        raise ValueError(f"{f_name} must hold integer item indices, got dtype {fb.dtype}")
    pairs = _bool_values(feedback_mask, fm_name)
    valid = np.ones(f_shape[:-1], dtype=bool) if pairs is None else pairs
    idx = first_index(valid[..., None] & ((fb < 0) | (fb >= n)))
    if idx is not None:
        raise ValueError(
            f"{f_name}{index_text(idx)} = {show_value(fb[idx])} is out of range [0, {n})"
        )
    idx = first_index(valid & (fb[..., 0] == fb[..., 1]))
    if idx is not None:
        raise ValueError(
            f"{f_name}{index_text(idx)} = ({fb[idx][0]}, {fb[idx][1]}) pairs an item with itself"
        )
    if items is not None:
        safe = np.where(valid[..., None], fb, 0).reshape(*head, -1)
        real = np.take_along_axis(items, safe, -1).reshape(fb.shape)
        idx = first_index(valid[..., None] & ~real)
        if idx is not None:
            at = index_text((*idx[:lead], fb[idx]))
            raise ValueError(
                f"{f_name}{index_text(idx)} = {fb[idx]} is a padded item ({m_name}{at} = False)"
            )


def _check_unit_interval(R, name: str, items, axis, diagonal=True) -> None:
    """Every entry of ``R: (*head, N, n, n)`` that counts (off the diagonal unless ``diagonal``
    is False, between real items) in ``[0, 1]``; ``items: (*head, n)`` is expanded at ``axis``
    (the primitives'; None for an ``R`` without one)."""
    arr = as_numpy(R, name)
    keep = ~np.eye(arr.shape[-1], dtype=bool) if diagonal else np.ones(arr.shape, bool)
    if items is not None:
        pair = items[..., :, None] & items[..., None, :]  # (*head, n, n)
        keep = keep & (pair if axis is None else np.expand_dims(pair, axis))
    with np.errstate(invalid="ignore"):
        values = arr.astype(np.float64)
        idx = first_index(np.broadcast_to(keep, arr.shape) & ~((values >= 0) & (values <= 1)))
    if idx is not None:
        raise ValueError(f"{name}{index_text(idx)} = {show_value(arr[idx])} is outside [0, 1]")


# --- the computation -------------------------------------------------------------------------


def _float_dtype(dtype):
    return jnp.promote_types(dtype, jnp.result_type(float))


def _loss(P: jax.Array, feedback: jax.Array, valid: jax.Array) -> jax.Array:
    """Eq. 1 for one ``(n, n)`` preference matrix; ``0`` where no pair is valid. The double
    ``where`` keeps the value and its gradient finite on an empty round."""
    u = jnp.where(valid, feedback[:, 0], 0)
    v = jnp.where(valid, feedback[:, 1], 0)
    count = jnp.sum(valid)
    wrong = jnp.sum(jnp.where(valid, 1 - P[u, v], 0))
    return jnp.where(count > 0, wrong / jnp.maximum(count, 1), 0).astype(P.dtype)


def _valid_pairs(feedback, feedback_mask) -> jax.Array:
    return jnp.ones(len(feedback), bool) if feedback_mask is None else feedback_mask.astype(bool)


def _combined(w: jax.Array, R: jax.Array) -> jax.Array:
    return jnp.tensordot(w, R, axes=1)


def _step(state: HedgeState, R, feedback, feedback_mask, beta, mask):
    """One round of Fig. 1 (no checks); the state keeps its dtypes."""
    w = state.weights
    dtype = w.dtype
    R, beta = R.astype(dtype), jnp.asarray(beta).astype(dtype)
    valid = _valid_pairs(feedback, feedback_mask)

    pref = _combined(w, R)
    primitive_loss = jax.vmap(_loss, in_axes=(0, None, None))(R, feedback, valid)
    loss = _loss(pref, feedback, valid)

    order = greedy_order(pref, mask)
    n = R.shape[-1]
    ranks = jnp.zeros(n, dtype=jnp.int32).at[order].set(jnp.arange(n, dtype=jnp.int32))
    order_loss = _loss((ranks[:, None] < ranks[None, :]).astype(dtype), feedback, valid)

    scaled = w * beta**primitive_loss
    Z = jnp.sum(scaled)
    update = jnp.any(valid) & (Z > 0)
    new_w = jnp.where(update, scaled / jnp.where(update, Z, 1), w)

    new_state = HedgeState(
        new_w, state.cumulative_primitive_loss + primitive_loss, state.cumulative_loss + loss
    )
    n_feedback = jnp.sum(valid).astype(jnp.int32)
    info = HedgeInfo(w, primitive_loss, loss, order, order_loss, n_feedback)
    return new_state, info


@jit
def _step_jit(state, R, feedback, feedback_mask, beta, mask):
    """The compiled body of ``hedge_step`` (no value checks)."""
    return _step(state, R, feedback, feedback_mask, beta, mask)


@jit
def _hedge_jit(state, R_rounds, feedback_rounds, masks, beta, item_masks):
    def body(carry, xs):
        R, feedback, feedback_mask, mask = xs
        return _step(carry, R, feedback, feedback_mask, beta, mask)

    return jax.lax.scan(body, state, (R_rounds, feedback_rounds, masks, item_masks))


@jit
def _combined_jit(w, R):
    dtype = _float_dtype(jnp.result_type(w, R))
    return _combined(jnp.asarray(w, dtype), jnp.asarray(R, dtype))


@jit
def _loss_jit(R, feedback, feedback_mask):
    R = R.astype(_float_dtype(R.dtype))
    return _loss(R, jnp.asarray(feedback), _valid_pairs(feedback, feedback_mask))


@jit
def _ranking_jit(scores, mask):
    scores = scores.astype(_float_dtype(scores.dtype))
    if mask is not None:
        scores = jnp.where(mask, scores, jnp.nan)
    above = scores[..., :, None] > scores[..., None, :]
    below = scores[..., :, None] < scores[..., None, :]  # False for NaN: unranked
    return jnp.where(above, 1.0, jnp.where(below, 0.0, 0.5)).astype(scores.dtype)


# --- public API ------------------------------------------------------------------------------


def ranking_preference(scores, mask=None) -> jax.Array:
    """``R_f`` of ranking functions given by their scores (a higher score ranks higher).

    Args:
        scores: ``(..., n)`` real scores ``f(u)``, ``NaN`` for an unranked item; leading axes
            are kept (``(N, n)`` scores give ``R: (N, n, n)``).
        mask: optional bool of the shape of ``scores``; ``False`` makes the item unranked.

    Returns:
        ``R: (..., n, n)`` in the scores' float dtype: ``1`` where ``f(u) > f(v)``, ``0``
        where ``f(u) < f(v)``, ``1/2`` for a tie or an unranked ``u`` or ``v`` (diagonal ``1/2``).
    """
    if np.ndim(scores) < 1:
        raise ValueError(f"scores must have shape (..., n), got {np.shape(scores)}")
    if mask is not None and np.shape(mask) != np.shape(scores):
        raise ValueError(f"mask must have shape {np.shape(scores)}, got {np.shape(mask)}")
    if not is_traced(scores):
        as_numpy(scores, "scores")
    if not is_traced(mask):
        _bool_values(mask, "mask")
    return _ranking_jit(*_arrays(scores, mask))


def combined_preference(w, R) -> jax.Array:
    """``PREF(u, v) = sum_i w_i R_i(u, v)``: ``w: (N,)`` in ``[0, 1]`` (the learner's sum to 1;
    not required here), ``R: (N, n, n)`` in ``[0, 1]`` off the diagonal -> ``PREF: (n, n)``,
    a matrix for ``ordering.greedy_order``. ``ValueError`` for mismatched shapes, or naming the
    first weight or entry of ``R`` outside ``[0, 1]``."""
    shape = np.shape(R)
    if len(shape) != 3 or shape[1] != shape[2]:
        raise ValueError(f"R must have shape (N, n, n), got {shape}")
    if np.shape(w) != shape[:1]:
        raise ValueError(
            f"w must have shape {shape[:1]}, one weight per primitive, got {np.shape(w)}"
        )
    if not is_traced(w):
        _check_unit_interval(w, "w", None, None, diagonal=False)
    if not is_traced(R):
        _check_unit_interval(R, "R", None, 0)
    return _combined_jit(*_arrays(w, R))


def preference_loss(R, feedback, feedback_mask=None) -> jax.Array:
    """``Loss(R, F) = sum_{(u, v) in F} (1 - R(u, v)) / |F|`` (Eq. 1; ``0`` for an empty ``F``)
    of one ``R: (n, n)`` in ``[0, 1]``; ``feedback``, ``feedback_mask`` and the checks as in
    ``hedge_step``. Returns a scalar float in ``[0, 1]``."""
    names = ("R", "feedback", "feedback_mask", "mask")
    _check_problem(R, feedback, feedback_mask, None, lead=0, names=names, primitives=False)
    return _loss_jit(*_arrays(R, feedback, feedback_mask))


def hedge_init(n_primitives: int, dtype=None) -> HedgeState:
    """The state before round 1: ``w_i^1 = 1/N`` for ``N = n_primitives`` (a Python int), no loss
    yet; ``dtype``: the state's float dtype (default: JAX's default float)."""
    if isinstance(n_primitives, bool) or not isinstance(n_primitives, int | np.integer):
        raise ValueError(f"n_primitives must be a Python int, got {n_primitives!r}")
    if n_primitives < 1:
        raise ValueError(f"n_primitives = {int(n_primitives)} must be at least 1")
    dtype = jnp.result_type(float) if dtype is None else dtype
    if not jnp.issubdtype(dtype, jnp.floating):
        raise ValueError(f"dtype must be a float dtype, got {np.dtype(dtype)}")
    N = int(n_primitives)
    zero = jnp.zeros((), dtype=dtype)
    return HedgeState(jnp.full((N,), 1 / N, dtype=dtype), jnp.zeros((N,), dtype=dtype), zero)


def _check_state(state, N: int, r_name: str) -> None:
    if np.shape(state.weights) != (N,):
        raise ValueError(
            f"state.weights has shape {np.shape(state.weights)} but {r_name} has {N} primitives"
        )


def hedge_step(state: HedgeState, R, feedback, feedback_mask, beta, mask=None):
    """One round of "Allocate weights" (Fig. 1): ``PREF^t``, its greedy order, Eq. 1, and

        w_i^{t+1} = w_i^t beta^{Loss(R_i^t, F^t)} / Z_t,   Z_t = sum_i w_i^t beta^{Loss(R_i^t, F^t)}

    (weights kept where ``F^t`` is empty or ``Z_t = 0``). The new state keeps ``state``'s dtypes.

    Args:
        state: ``HedgeState`` from ``hedge_init`` or an earlier step (``weights: (N,)``).
        R: ``(N, n, n)`` the primitives on this round's items, in ``[0, 1]`` (the diagonal and
            padded items' entries are ignored).
        feedback: ``(f, 2)`` integer pairs ``(u, v)``: ``u`` should be above ``v``.
        feedback_mask: ``(f,)`` bool, ``False`` for padding pairs; None: all count.
        beta: scalar in ``[0, 1]`` (``1``: no learning).
        mask: optional ``(n,)`` bool, ``False`` for padded items (placed last in the order).

    Returns:
        ``(HedgeState, HedgeInfo)``: the state for round ``t + 1``, and what this round did.

    Raises:
        ValueError: for shapes that do not match, or where concrete naming the first value at
            fault: ``beta`` outside ``[0, 1]``, an entry of ``R`` that counts outside ``[0, 1]``
            (NaN included), a non-integer ``feedback``, a valid pair with an index outside
            ``[0, n)``, a pair ``(u, u)``, a pair naming a padded item.
    """
    _check_beta(beta)
    names = ("R", "feedback", "feedback_mask", "mask")
    _check_problem(R, feedback, feedback_mask, mask, lead=0, names=names)
    _check_state(state, np.shape(R)[0], "R")
    return _step_jit(state, *_arrays(R, feedback, feedback_mask, beta, mask))


def hedge(R_rounds, feedback_rounds, masks, beta, item_masks=None, state=None):
    """``T`` rounds of ``hedge_step`` in one ``lax.scan``, padded to common shapes.

    A round whose pairs are all masked is a padded round (zero loss, weights kept), so problems
    with different numbers of rounds, items and pairs stack, and ``vmap`` over them.

    Args:
        R_rounds: ``(T, N, n, n)``; feedback_rounds: ``(T, f, 2)``; masks: ``(T, f)`` bool or
            None; item_masks: ``(T, n)`` bool or None: each round's arguments of ``hedge_step``.
        beta: scalar in ``[0, 1]``.
        state: ``HedgeState`` to continue from; default ``hedge_init(N)`` in ``R_rounds``'s
            float dtype.

    Returns:
        ``(HedgeState, HedgeInfo)``: the state after round ``T`` (``cumulative_loss`` is the
        left side of Theorem 1, ``cumulative_primitive_loss`` the ``L_i`` on its right) and the
        rounds' ``HedgeInfo`` stacked: ``weights: (T, N)``, ``primitive_loss: (T, N)``,
        ``loss: (T,)``, ``order: (T, n)``, ``order_loss: (T,)``, ``n_feedback: (T,)``.

    Raises:
        ValueError: as ``hedge_step``, the index naming the round first
            (``R_rounds[3, 0, 1, 2] = 1.5 is outside [0, 1]``).
    """
    _check_beta(beta)
    names = ("R_rounds", "feedback_rounds", "masks", "item_masks")
    _check_problem(R_rounds, feedback_rounds, masks, item_masks, lead=1, names=names)
    args = _arrays(R_rounds, feedback_rounds, masks, beta, item_masks)
    N = np.shape(R_rounds)[1]
    if state is None:
        state = hedge_init(N, dtype=_float_dtype(args[0].dtype))
    _check_state(state, N, "R_rounds")
    return _hedge_jit(state, *args)
