"""The query map: a single-query function over a leading query axis, ``vmap`` on accelerators and
``lax.map`` on the CPU (the jaxlib CPU LAPACK workaround lives here). A low layer, so that the
inference engines (NUTS's batches), the baselines and ``parallel`` share the one switch."""

from __future__ import annotations

from collections.abc import Callable

import jax
import jax.numpy as jnp


def query_map_method(method: str | None = None, platform: str | None = None) -> str:
    """``"vmap"`` or ``"map"``: how ``map_queries`` runs on ``platform`` (default: the
    default backend's).

    ``None`` chooses: ``"map"`` (``lax.map``) on the CPU, ``"vmap"`` elsewhere. On a CPU the
    queries' ``n^3`` factorisations gain nothing from batching (each LAPACK call already uses
    the cores) and batched LAPACK calls can deadlock jaxlib 0.10's CPU runtime; on a GPU the
    batch is what fills the device.
    """
    if method is None:
        return "map" if (platform or jax.default_backend()) == "cpu" else "vmap"
    if method not in ("vmap", "map"):
        raise ValueError(f"method must be 'vmap', 'map' or None, got {method!r}")
    return method


def map_queries(fn: Callable, *args, method: str | None = None, valid=None):
    """``fn`` applied to each query's slice of ``args`` (pytrees with a leading query axis ``B``;
    ``None`` leaves are passed as ``None``), stacked along ``B``: ``vmap`` or ``lax.map`` by
    ``query_map_method``. Pure: call it inside a jitted program.

    ``valid: (B,)`` bool marks the real queries: under ``lax.map`` the others are skipped (their
    results are zeros); ``vmap`` computes every row, so padded rows must hold harmless data.
    """
    if query_map_method(method) == "vmap":
        return jax.vmap(fn)(*args)
    if valid is None:
        return jax.lax.map(lambda a: fn(*a), args)

    def one(a):
        real, rest = a
        shapes = jax.eval_shape(fn, *rest)
        return jax.lax.cond(
            real,
            lambda r: fn(*r),
            lambda r: jax.tree_util.tree_map(lambda s: jnp.zeros(s.shape, s.dtype), shapes),
            rest,
        )

    return jax.lax.map(one, (valid, args))
