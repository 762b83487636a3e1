"""Array plumbing shared by the baselines: float inputs and pair weights for the cores, and the
host-side (NumPy) padding that gives the estimators' compiled cores bucketed shapes.

Padding convention (what makes a padded problem give the unpadded answer): padded documents are
zero rows touched by no pair; padded pairs are ``(0, 0)`` with weight 0. Sizes come from
``bayesrank.data.batch.bucket_size``, so a new subset of similar size reuses the program.
"""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np

from ..data.batch import bucket_size

__all__ = [
    "as_float",
    "cast_checked",
    "check_columns",
    "float_dtype",
    "pad_pairs",
    "pad_rows",
    "pair_weights",
]


def as_float(x):
    """``x`` as a JAX array of a floating dtype (integers become the default float)."""
    x = jnp.asarray(x)
    if not jnp.issubdtype(x.dtype, jnp.floating):
        x = x.astype(jnp.result_type(float))
    return x


def check_columns(X, name: str = "X"):
    """``ValueError`` naming the shape unless ``X`` is ``(n, d)`` with ``d >= 1`` (shapes are
    static, so this holds under ``jit`` too); returns ``X``."""
    if len(X.shape) != 2 or X.shape[1] == 0:
        raise ValueError(f"{name} has shape {tuple(X.shape)}: it must be (n, d) with d >= 1")
    return X


def pair_weights(pairs, pair_mask, dtype):
    """``(m,)`` weights of ``pairs: (m, 2)``: ones for ``pair_mask = None``, else the mask as
    ``dtype`` (bool padding masks or nonnegative weights)."""
    if pair_mask is None:
        return jnp.ones(pairs.shape[0], dtype)
    return jnp.asarray(pair_mask).astype(dtype)


def float_dtype() -> np.dtype:
    """JAX's default float (float64 under ``jax_enable_x64``, else float32), as a NumPy dtype."""
    return np.dtype(jnp.result_type(float))


def pad_rows(X: np.ndarray, dtype, size: int | None = None) -> np.ndarray:
    """``X: (n, d)`` with zero rows appended up to ``size`` (default ``bucket_size(n)``)."""
    n = X.shape[0]
    size = bucket_size(n) if size is None else size
    out = np.zeros((size, *X.shape[1:]), dtype)
    out[:n] = X
    return out


def pad_pairs(pairs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``pairs: (m, 2)`` padded with ``(0, 0)`` to ``bucket_size(m)`` rows, and the ``(m_b,)``
    bool mask that is True on the real pairs."""
    m = len(pairs)
    size = bucket_size(m)
    out = np.zeros((size, 2), np.int32)
    out[:m] = pairs
    mask = np.zeros(size, bool)
    mask[:m] = True
    return out, mask


def cast_checked(X: np.ndarray, dtype, name: str = "X") -> np.ndarray:
    """``X`` in ``dtype``; ``ValueError`` naming the first entry that overflows to ``inf`` or
    underflows to 0 there (the model would see other data than the user gave)."""
    with np.errstate(over="ignore", under="ignore"):  # reported below, naming the entry
        out = np.asarray(X).astype(dtype)
    for bad, what in ((~np.isfinite(out), "overflows"), ((out == 0) & (X != 0), "underflows to 0")):
        if bad.any():
            idx = tuple(int(i) for i in np.argwhere(bad)[0])
            where = ", ".join(map(str, idx))
            raise ValueError(
                f"{name}[{where}] = {X[idx]:.3g} {what} in {np.dtype(dtype).name}: rescale the "
                "features (e.g. standardise them) or enable float64 "
                "(jax.config.update('jax_enable_x64', True))"
            )
    return out
