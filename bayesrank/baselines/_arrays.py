"""Array plumbing shared by the baselines: float inputs and pair weights for the cores.

The estimators pad on the host with ``bayesrank.data.batch``'s ``pad_rows`` and ``pad_pairs``,
so their compiled cores see bucketed shapes and a new subset of similar size reuses the program.
Padding convention (what makes a padded problem give the unpadded answer): padded documents are
zero rows touched by no pair; padded pairs are ``(0, 0)`` with weight 0 (``PAIR_FILLER``).
"""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np

#: The baselines' padded pair (``data.batch.pad_pairs``' ``filler``), int32 like their pairs.
PAIR_FILLER = (0, 0)

__all__ = [
    "as_float",
    "cast_checked",
    "check_columns",
    "float_dtype",
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
