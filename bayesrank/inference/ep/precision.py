"""Mixed precision: float64 EP whose first sweeps run in float32.

``precision="mixed"`` (float64 input): the sweeps run in float32, at about half the cost on a
CPU, until the marginals move by less than ``MIXED_SWITCH`` times their scale (or the damping is
halved: float32's noise floor, or an oscillation), and at most ``max_iter - 1`` sweeps; then in
float64, at least one sweep (the float32 sweeps leave it room) and until ``tol``. The result is
the float64 fixed point (the float32 sweeps only bring the sites near it); the float64 sweeps
start from the float32 sweeps' state, or from the prior if float32 overflowed (a prior variance
beyond 3e38). Near the fixed point already (a warm start in EM) it gains nothing.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from ...linalg import prior_root
from ...runtime import after
from ..gaussian.sites import informative_pairs
from .loop import iterate, with_history
from .state import EPState, start

#: The float32 sweeps go on until the marginals move by less than this times their scale
#: (float32's noise floor is near 1e-6 of the scale).
MIXED_SWITCH = 1e-4

PRECISIONS = ("full", "mixed")


def check_precision(precision: str) -> None:
    if precision not in PRECISIONS:
        raise ValueError(f"precision must be 'full' or 'mixed', got {precision!r}")


def cast(tree, dtype):
    """``tree`` with its floating-point leaves cast to ``dtype``."""
    return jax.tree_util.tree_map(
        lambda x: x.astype(dtype) if jnp.issubdtype(x.dtype, jnp.floating) else x, tree
    )


def run_mixed(
    K, pairs, sites, pair_mask, *, tol, max_iter, damping, accelerate, outcomes=None, **settings
):
    """``run`` with ``precision="mixed"`` (module docstring).

    ``settings``: ``schedule``, ``adapt_damping``, ``residual_tol`` (the float64 sweeps only).
    """
    residual_tol = settings.pop("residual_tol", None)
    active = informative_pairs(K, pairs, pair_mask)  # decided once, in float64
    # The float64 root first: under vmap, batched LAPACK calls that could run concurrently
    # (this one beside the float32 loop's) can deadlock jaxlib 0.10's CPU runtime, so the
    # float32 loop's input waits for it (runtime.after)
    root = prior_root(K)
    K = after(K, root)
    low = jnp.float32
    sites_low = None if sites is None else cast(sites, low)

    def low_cond(st: EPState):  # float32 until near the fixed point, or at its noise floor
        scale = jnp.maximum(1.0, jnp.maximum(jnp.max(st.sd), jnp.max(jnp.abs(st.mean))))
        return ~(st.max_change < MIXED_SWITCH * scale) & (st.damping >= damping)

    with jax.default_matmul_precision("float32"):  # not TF32 (a GPU's default for float32)
        K_low = K.astype(low)
        active_low = informative_pairs(K_low, pairs, active)  # float32's own test as well
        outcomes_low = None if outcomes is None else cast(outcomes, low)
        state = start(prior_root(K_low), pairs, sites_low, active_low, damping, outcomes_low)
        state = with_history(state, accelerate)
        # one sweep is kept for float64 whatever happens in float32: the result is float64's
        low_iter = jnp.maximum(jnp.asarray(max_iter) - 1, 0)
        state = iterate(state, pairs, tol=0.0, max_iter=low_iter, cond=low_cond, **settings)
    finite = jnp.all(jnp.isfinite(state.mean)) & jnp.all(jnp.isfinite(state.factor))
    state = jax.lax.cond(  # float32 overflowed (a huge kernel scale): start over in float64
        finite,
        lambda: cast(state, K.dtype)._replace(
            root=root, max_change=jnp.asarray(jnp.inf, K.dtype), active=active, outcomes=outcomes
        ),
        lambda: with_history(start(root, pairs, None, active, damping, outcomes), accelerate),
    )
    return iterate(state, pairs, tol=tol, max_iter=max_iter, residual_tol=residual_tol, **settings)
