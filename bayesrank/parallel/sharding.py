"""The query axis over devices: a one-axis mesh of every device of every process, and the
single-query map run on each device's share of the queries (``shard_map``).

Queries are independent, so the program needs no communication between devices: each device
runs ``map_queries`` on its rows and keeps its results, and the host
gathers them at the end (``gather``). The same program runs on one CPU, on the forced host
devices of a test (``--xla_force_host_platform_device_count``), on several GPUs, or on the
devices of many processes joined by ``jax.distributed.initialize``
(``bayesrank.parallel.distributed``).
"""

from __future__ import annotations

from collections.abc import Callable

import jax
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec

__all__ = ["QUERY_AXIS", "gather", "place", "query_mesh", "shard_queries"]

#: The mesh axis that queries are split over.
QUERY_AXIS = "queries"


def query_mesh(devices=None) -> Mesh:
    """A one-axis mesh (``QUERY_AXIS``) over ``devices``: by default every device of every
    process (``jax.devices()``), each process's devices contiguous, in process order."""
    devices = jax.devices() if devices is None else list(devices)
    if not devices:
        raise ValueError("devices is empty: give at least one device")
    devices = sorted(devices, key=lambda d: (d.process_index, d.id))
    return Mesh(np.asarray(devices), (QUERY_AXIS,))


def check_mesh(mesh: Mesh) -> tuple[int, int]:
    """``(processes, devices per process)`` of a one-axis query mesh; ``ValueError`` for a
    mesh of another shape or with processes holding different numbers of its devices."""
    if not isinstance(mesh, Mesh):
        raise ValueError(f"mesh must be a jax.sharding.Mesh, got {type(mesh).__name__}")
    if mesh.axis_names != (QUERY_AXIS,):
        raise ValueError(f"mesh must have the one axis {QUERY_AXIS!r}, got {mesh.axis_names}")
    devices = list(mesh.devices.flat)
    processes = sorted({d.process_index for d in devices})
    counts = {sum(d.process_index == p for d in devices) for p in processes}
    if len(counts) != 1:
        raise ValueError(f"every process must hold as many of the mesh's devices: {counts}")
    owners = [d.process_index for d in devices]
    if owners != sorted(owners):
        raise ValueError("each process's devices must be contiguous on the mesh (query_mesh)")
    return len(processes), counts.pop()


def place(tree, mesh: Mesh, rows: int):
    """This process's block of rows of each leaf (``(rows_local, ...)`` host arrays) as a
    global array of ``rows`` rows sharded over the query axis."""
    sharding = NamedSharding(mesh, PartitionSpec(QUERY_AXIS))

    def one(x):
        x = np.asarray(x)
        return jax.make_array_from_process_local_data(sharding, x, (rows, *x.shape[1:]))

    return jax.tree_util.tree_map(one, tree)


def shard_queries(fn: Callable, mesh: Mesh, shared, rows) -> object:
    """``fn(shared, rows)`` on each device's block of ``rows`` (pytrees with the query axis
    first, sharded over the mesh), ``shared`` replicated; the results stay sharded. Pure: call
    it inside a jitted program."""
    spec = PartitionSpec(QUERY_AXIS)
    # check_vma=False: the single-query loops start from replicated constants and carry
    # per-device values; with no collective in the body there is nothing for the check to guard
    return jax.shard_map(
        fn, mesh=mesh, in_specs=(PartitionSpec(), spec), out_specs=spec, check_vma=False
    )(shared, rows)


def gather(tree):
    """Every leaf of sharded results as one host array on every process (across processes
    through the distributed runtime's collectives)."""
    if jax.process_count() == 1:
        return jax.device_get(tree)
    from jax.experimental import multihost_utils

    return multihost_utils.process_allgather(tree, tiled=True)
