"""PRNG keys given by a user: checked before JAX sees them, so a wrong one is a ``ValueError``
naming the argument (JAX itself raises a ``TypeError`` deep in a trace)."""

from __future__ import annotations

import jax
import numpy as np

__all__ = ["check_key"]


def check_key(key, name: str = "key") -> jax.Array:
    """``key`` if it is a JAX PRNG key: a typed key (``jax.random.key(0)``, one or a batch) or
    a raw ``uint32`` one (``jax.random.PRNGKey(0)``, last axis 2). ``ValueError`` otherwise."""
    if isinstance(key, jax.Array) and jax.dtypes.issubdtype(key.dtype, jax.dtypes.prng_key):
        return key
    if (
        isinstance(key, np.ndarray | jax.Array)
        and key.dtype == np.uint32
        and key.shape[-1:] == (2,)
    ):
        return key
    raise ValueError(
        f"{name} must be a JAX PRNG key (jax.random.key(0) or jax.random.PRNGKey(0)), got "
        f"{type(key).__name__}"
        + (f" of dtype {key.dtype} and shape {key.shape}" if hasattr(key, "dtype") else "")
    )
