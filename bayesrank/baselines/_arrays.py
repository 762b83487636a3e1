"""Array plumbing shared by the baselines' cores: float inputs and pair weights from masks."""

from __future__ import annotations

import jax.numpy as jnp

__all__ = ["as_float", "pair_weights"]


def as_float(x):
    """``x`` as a JAX array of a floating dtype (integers become the default float)."""
    x = jnp.asarray(x)
    if not jnp.issubdtype(x.dtype, jnp.floating):
        x = x.astype(jnp.result_type(float))
    return x


def pair_weights(pairs, pair_mask, dtype):
    """``(m,)`` weights of ``pairs: (m, 2)``: ones for ``pair_mask = None``, else the mask as
    ``dtype`` (bool padding masks or nonnegative weights)."""
    if pair_mask is None:
        return jnp.ones(pairs.shape[0], dtype)
    return jnp.asarray(pair_mask).astype(dtype)
