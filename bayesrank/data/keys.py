"""PRNG keys given by a user: checked before JAX sees them, so a wrong one is a ``ValueError``
naming the argument (JAX itself raises a ``TypeError`` deep in a trace)."""

from __future__ import annotations

import jax
import numpy as np

__all__ = ["check_key", "permutation"]


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


def permutation(key, m: int) -> np.ndarray:
    """``jax.random.permutation(key, m)``, the same values, without compiling for each ``m``.

    JAX shuffles by sorting ``arange(m)`` on random 32-bit keys, ``ceil(3 log m / log(2^32 - 1))``
    rounds, each with ``random.bits`` of a fresh subkey. With the partitionable Threefry (JAX's
    default) the first ``m`` bits of a longer draw are the bits of a draw of ``m``, so the bits
    are drawn at a power-of-two size (one program per size class, not per query) and the stable
    sort done here: eager ``jax.random.permutation`` compiles a program for every new ``m``,
    and a collection's queries each have their own number of pairs.
    """
    if not jax.config.jax_threefry_partitionable:
        return np.asarray(jax.random.permutation(key, m))
    size = max(64, 1 << max(m - 1, 0).bit_length())
    rounds = int(np.ceil(3 * np.log(max(1, m)) / np.log(np.iinfo(np.uint32).max)))
    x = np.arange(m)
    for _ in range(rounds):
        key, subkey = jax.random.split(key)
        bits = np.asarray(jax.random.bits(subkey, (size,), np.uint32))[:m]
        x = x[np.argsort(bits, kind="stable")]
    return x
