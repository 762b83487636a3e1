"""EP as ``init`` / ``step`` on a state, and the loop that iterates ``step`` to convergence.

``init`` decides the active pairs, factorises ``K`` once and (``accelerate=True``) starts the
Anderson history; ``step`` is one sweep (plain, or Anderson-mixed where the state carries a
history); ``iterate`` repeats ``step`` in a ``lax.while_loop`` until no marginal mean or
standard deviation moves by ``tol`` or more. A user's own loop over ``step`` (``lax.scan``,
``fori_loop``) therefore runs exactly the sweeps that ``run`` runs:

    state = ep.init(K, pairs, accelerate=True)
    state = jax.lax.fori_loop(0, 30, lambda _, s: ep.step(s, pairs), state)
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from ..gaussian.sites import Sites
from .acceleration import accelerated_step, empty_history
from .state import SCHEDULES, EPState, active_pairs, init_plain, plain_step

__all__ = ["convergence_tol", "default_tol", "init", "iterate", "step"]


def default_tol(dtype) -> float:
    """Convergence tolerance on marginal means and sds: 1e-6 (float64) or 1e-3 (float32).

    In float32, round-off in ``S`` and ``B`` puts the fixed point's noise floor near 1e-3 on
    problems with ~1e4 pairs.
    """
    return 1e-6 if jnp.finfo(dtype).bits == 64 else 1e-3


def convergence_tol(K, tol=None, rtol=None) -> jax.Array:
    """The threshold on a sweep's largest change: ``max(tol, rtol * sqrt(max_i K_ii))``.

    ``tol`` defaults to ``default_tol``, ``rtol`` to ``tol`` (so the default threshold is
    ``tol * max(1, largest prior sd)``). The relative part matters only where the
    prior sd exceeds 1: at a kernel scale ``s`` the marginals are ``O(sqrt s)`` and round-off
    moves them by ``O(eps sqrt s cond)``, so an absolute 1e-6 is out of reach at ``s = 1e8``
    (float64 EP stalled near 1e-4 there, sequential schedule included), while the predicted
    probabilities, functions of ``dmu / sqrt(1 + dvar)``, are settled long before. ``rtol=0``
    is the purely absolute test.
    """
    K = jax.lax.stop_gradient(jnp.asarray(K))
    tol = default_tol(K.dtype) if tol is None else tol
    rtol = tol if rtol is None else rtol
    variance = K if K.ndim == 1 else jnp.diagonal(K)
    scale = jnp.sqrt(jnp.max(jnp.clip(variance, 0.0, None), initial=0.0))
    return jnp.maximum(jnp.asarray(tol, K.dtype), jnp.asarray(rtol, K.dtype) * scale)


def check_schedule(schedule: str, accelerate: bool = False) -> None:
    if schedule not in SCHEDULES:
        raise ValueError(f"schedule must be 'sequential' or 'parallel', got {schedule!r}")
    if accelerate and schedule != "parallel":
        raise ValueError("accelerate=True needs schedule='parallel'")


def init(
    K,
    pairs,
    sites: Sites | None = None,
    pair_mask=None,
    *,
    damping=1.0,
    accelerate=False,
    outcomes=None,
) -> EPState:
    """Start EP from ``sites`` (a warm start) or from zero sites (the prior).

    Args:
        K: ``(n, n)`` prior covariance of ``xi_hat`` (padded entities already decoupled, e.g. by
            ``mask_covariance``), or its diagonal ``(n,)`` for a
            diagonal prior. Factorised here, once (``bayesrank.linalg.prior_root``).
        pairs: ``(m, 2)`` int, row ``(i, j)`` = *i preferred to j*.
        sites: optional warm start; ``pair_mask: (m,)`` bool, False for padded pairs (zero site).
        damping: the first sweep's step fraction in ``(0, 1]``.
        accelerate: carry the Anderson history (``acceleration``), so that ``step``
            mixes each parallel sweep's sites with the two before.
        outcomes: ``bayesrank.likelihoods.Outcomes`` (each pair a win or a tie, its weight,
            the tie margin), kept in the state; None: every pair a win of weight 1.
    """
    state = init_plain(K, pairs, sites, pair_mask, damping=damping, outcomes=outcomes)
    return with_history(state, accelerate)


def with_history(state: EPState, accelerate: bool) -> EPState:
    """``state`` with an empty Anderson history (``accelerate``) or none."""
    if not accelerate:
        return state._replace(history=None)
    return state._replace(history=empty_history(state.sites.tau.shape[0], state.mean.dtype))


def step(
    state: EPState,
    pairs,
    *,
    schedule: str = "parallel",
    pair_mask=None,
    adapt_damping: bool = True,
    residual_tol=None,
) -> EPState:
    """One EP sweep over the state's active pairs, then a fresh factorisation of the posterior.

    With ``adapt_damping`` the next sweep's damping is halved (down to ``MIN_DAMPING``, or the
    current damping if that is lower) when this sweep's largest marginal change is not below
    ``CONTRACTION`` (0.9) times the previous sweep's. A state that carries an Anderson history
    (``init(..., accelerate=True)``) is stepped by an accelerated parallel sweep;
    ``residual_tol`` (accelerated states only) keeps it unchanged, without refactorising, once
    the sweep's moment-matching residual is below it.
    ``pair_mask`` restricts the sweep further (the state's own ``active`` pairs always apply).
    """
    pairs = jnp.asarray(pairs)
    check_schedule(schedule, accelerate=state.history is not None)
    mask = active_pairs(state, pairs, pair_mask)
    if state.history is not None:
        return accelerated_step(state, pairs, mask, adapt_damping, residual_tol)
    if residual_tol is not None:
        raise ValueError("residual_tol needs an accelerated state (init(..., accelerate=True))")
    return plain_step(state, pairs, schedule, mask, adapt_damping)


def iterate(
    state: EPState,
    pairs,
    *,
    tol,
    max_iter,
    schedule: str = "parallel",
    adapt_damping: bool = True,
    residual_tol=None,
    cond=None,
) -> EPState:
    """``step`` in a ``lax.while_loop`` until the largest change of a marginal mean or sd
    is below ``tol`` (both may be traced) or ``max_iter`` sweeps have been done in all.

    ``cond(state) -> bool`` (optional) must also hold for the loop to go on.
    """

    def going(st):
        on = (st.n_iter < max_iter) & ~(st.max_change < tol)
        return on if cond is None else on & cond(st)

    def body(st):
        return step(
            st, pairs, schedule=schedule, adapt_damping=adapt_damping, residual_tol=residual_tol
        )

    return jax.lax.while_loop(going, body, state)
