"""Several processes, one collection: JAX's own distributed runtime.

Each process (one per host, or one per GPU) calls ``initialize`` first; then every device of
every process is on the mesh of ``query_mesh``, each process reads only
its share of the data (``process_share``), and the collection façades
(``predict_collection``, ``fit_ep``), called by
every process with its own queries, run one program over all of them and return every query's
result to every process (process 0 writes them). ``docs/guide/devices.md`` shows how to launch it.
"""

from __future__ import annotations

from collections.abc import Sequence

import jax
import numpy as np

__all__ = ["all_sizes", "initialize", "process_share"]


def initialize(
    coordinator_address: str | None = None,
    num_processes: int | None = None,
    process_id: int | None = None,
    **options,
) -> None:
    """``jax.distributed.initialize`` with CPU collectives (gloo) switched on, so that results
    can be gathered across processes on CPU devices too. Arguments as JAX's (detected from the
    cluster's environment where omitted: SLURM, Open MPI, Cloud TPU). Call it once per process,
    before any other JAX call."""
    jax.config.update("jax_cpu_collectives_implementation", "gloo")
    jax.distributed.initialize(coordinator_address, num_processes, process_id, **options)


def process_share(
    items: Sequence, process_index: int | None = None, process_count: int | None = None
):
    """This process's contiguous share of ``items`` (files, queries): block ``k`` of
    ``process_count`` near-equal blocks (the first ones one longer where the count does not
    divide), so that the concatenation of the shares in process order is ``items``. Defaults:
    ``jax.process_index()``, ``jax.process_count()``."""
    k = jax.process_index() if process_index is None else int(process_index)
    count = jax.process_count() if process_count is None else int(process_count)
    if count < 1 or not 0 <= k < count:
        raise ValueError(f"process_index must be in [0, {count}), got {k}")

    def bound(j):
        return -(-j * len(items) // count)

    return items[bound(k) : bound(k + 1)]


def all_sizes(local: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Every process's rows of ``local: (q_p, c)`` int, concatenated in process order, and the
    process of each row: ``(Q, c)``, ``(Q,)``. One process: ``local`` itself."""
    local = np.asarray(local, np.int64)
    if jax.process_count() == 1:
        return local, np.zeros(len(local), np.int64)
    from jax.experimental import multihost_utils

    counts = np.asarray(multihost_utils.process_allgather(np.asarray([len(local)]))).ravel()
    padded = np.zeros((int(counts.max()), local.shape[1]), np.int64)
    padded[: len(local)] = local
    every = np.asarray(multihost_utils.process_allgather(padded))  # (P, most, c)
    rows = [every[p, : counts[p]] for p in range(len(counts))]
    owner = np.repeat(np.arange(len(counts)), counts)
    return np.concatenate(rows), owner
