"""The query map: a single-query function over a leading query axis, ``vmap`` on accelerators and
``lax.map`` on the CPU (the jaxlib CPU LAPACK workaround lives here)."""

from __future__ import annotations

from collections.abc import Callable

import jax


def query_map_method(method: str | None = None) -> str:
    """``"vmap"`` or ``"map"``: how :func:`map_queries` runs on the default backend.

    ``None`` chooses: ``"map"`` (``lax.map``) on the CPU, ``"vmap"`` elsewhere. On a CPU the
    queries' ``n^3`` factorisations gain nothing from batching (each LAPACK call already uses
    the cores) and batched LAPACK calls can deadlock jaxlib 0.10's CPU runtime; on a GPU the
    batch is what fills the device.
    """
    if method is None:
        return "map" if jax.default_backend() == "cpu" else "vmap"
    if method not in ("vmap", "map"):
        raise ValueError(f"method must be 'vmap', 'map' or None, got {method!r}")
    return method


def map_queries(fn: Callable, *args, method: str | None = None):
    """``fn`` applied to each query's slice of ``args`` (pytrees with a leading query axis ``B``;
    ``None`` leaves are passed as ``None``), stacked along ``B``: ``vmap`` or ``lax.map`` by
    :func:`query_map_method`. Pure: call it inside a jitted program."""
    if query_map_method(method) == "vmap":
        return jax.vmap(fn)(*args)
    return jax.lax.map(lambda a: fn(*a), args)
