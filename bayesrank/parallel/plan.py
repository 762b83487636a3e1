"""Where each query of a collection runs: size groups, their padded shapes, and a slot on a
device for every query.

A collection of ``Q`` queries, spread over ``P`` processes with ``D`` devices each, runs as one
compiled program (``program``) holding one block of rows per **size group**: the queries
whose sizes fall in the same buckets (``bucket_size``): the entities
EP runs on ``t`` and the known pairs ``m`` at ``per_octave`` sizes per power of two (padding adds
at most ``1 / per_octave`` to them), the entities ``n`` at a quarter of that. A group's rows
are split evenly over the ``P * D`` devices of the mesh: device ``g`` holds
rows ``[g * r, (g + 1) * r)``, ``r`` the group's rows per device. Each process places only the
queries it read, on its own devices, dealt round-robin in order of decreasing size, so that
every device gets a like share of each group's work; empty slots are padding (skipped by the
CPU's query map, computed on filler data by ``vmap``).

The plan is plain host data computed the same way on every process from the sizes of all
queries (``make_plan``), so the processes agree on every shape without further talk.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from ..data.batch import bucket_size

__all__ = ["PADDING_SLACK", "CollectionPlan", "Group", "make_plan", "merge_groups"]

#: How much more EP work a collection's padding may cost so that it compiles fewer size groups
#: (``merge_groups``). Each group is its own block of EP in the collection's program, compiled on
#: its own (2-3 s each on a 2-core CPU): OHSUMED's 106 queries fell in 28 buckets, whose
#: compilation took 25 times the program's run; merged within this slack, 7 groups.
PADDING_SLACK = 1.25


class Group(NamedTuple):
    """One size group: padded sizes ``n`` (entities), ``m`` (known pairs), ``p`` (pairs to
    predict), ``t`` (the entities EP runs on: those the pairs touch, or all ``n``);
    ``rows_per_device``; ``queries: (k,)`` the global indices of its queries and
    ``rows: (k,)`` the row of each among the group's ``rows_per_device * n_devices`` rows."""

    n: int
    m: int
    p: int
    t: int
    rows_per_device: int
    queries: np.ndarray
    rows: np.ndarray


class CollectionPlan(NamedTuple):
    """How a collection runs: its groups, the mesh's size and the query map's method.

    ``sizes: (Q, 4)`` the real ``(n, m, p, t)`` of every query (global order: process 0's queries
    first), ``owner: (Q,)`` the process that read each.
    """

    groups: tuple[Group, ...]
    n_processes: int
    devices_per_process: int
    method: str
    sizes: np.ndarray
    owner: np.ndarray

    @property
    def n_devices(self) -> int:
        return self.n_processes * self.devices_per_process

    def padding_waste(self) -> float:
        """The share of EP's ``t^3`` work spent on padding: ``1 - sum_q t_q^3 / sum t_pad^3``
        over the rows that run (every row under ``vmap``, the real ones under ``lax.map``)."""
        real = float(np.sum(self.sizes[:, 3].astype(float) ** 3))
        padded = 0.0
        for g in self.groups:
            rows = g.rows_per_device * self.n_devices if self.method == "vmap" else len(g.queries)
            padded += rows * float(g.t) ** 3
        return 1.0 - real / padded if padded else 0.0

    def describe(self) -> str:
        """One line: queries, groups, devices, processes, method and padding waste."""

        def count(k: int, noun: str, plural: str | None = None) -> str:
            return f"{k} {noun if k == 1 else plural or noun + 's'}"

        return (
            f"{count(len(self.sizes), 'query', 'queries')} in "
            f"{count(len(self.groups), 'size group')} on {count(self.n_devices, 'device')} of "
            f"{count(self.n_processes, 'process', 'processes')}, each device's queries by "
            f"{'vmap' if self.method == 'vmap' else 'lax.map'}; padding "
            f"{100 * self.padding_waste():.0f}% of EP's t^3 work"
        )


def _work(t: int, n: int, m: int) -> float:
    """A query's EP work at padded sizes ``(t, n, m)``, up to a constant: the sweeps'
    factorisations ``t^3``, their pair terms ``m t^2`` and the expansion to ``n`` entities
    ``n^2 t``."""
    return float(t) ** 3 + float(m) * t**2 + float(n) ** 2 * t


def merge_groups(keys, slack: float = PADDING_SLACK) -> list[tuple[int, int, int]]:
    """Each query's size key ``(t, n, m)``, merged into as few distinct keys as ``slack`` allows.

    The distinct keys, in increasing order, are cut into runs of consecutive keys, each run
    padded to its largest ``t``, ``n`` and ``m``. For every number of runs ``g``, dynamic
    programming over the cut points finds the cut with the least padded work (``_work``,
    summed over the queries); the result is the smallest ``g`` whose work is at most ``slack``
    times the work of one run per key (no merging). ``slack = 1`` merges only where it costs
    nothing.
    """
    if not slack >= 1.0:
        raise ValueError(f"slack must be >= 1, got {slack}")
    distinct = sorted(set(keys))
    K = len(distinct)
    count = dict.fromkeys(distinct, 0)
    for key in keys:
        count[key] += 1
    # padded[a][b], work[a][b]: keys a..b (inclusive) as one group, built up along b
    padded = [[None] * K for _ in range(K)]
    work = [[0.0] * K for _ in range(K)]
    for a in range(K):
        top, queries = distinct[a], 0
        for b in range(a, K):
            top = tuple(max(x, y) for x, y in zip(top, distinct[b], strict=True))
            queries += count[distinct[b]]
            padded[a][b], work[a][b] = top, queries * _work(*top)
    finest = sum(work[a][a] for a in range(K))
    best, cuts = [work[0][b] for b in range(K)], []  # best[b]: keys 0..b in g runs
    while best[K - 1] > slack * finest:  # one run more: g + 1 runs
        new, cut = [float("inf")] * K, [0] * K
        for b in range(len(cuts) + 1, K):
            for a in range(len(cuts) + 1, b + 1):
                value = best[a - 1] + work[a][b]
                if value < new[b]:
                    new[b], cut[b] = value, a
        best = new
        cuts.append(cut)
    merged, b = {}, K - 1
    for cut in reversed(cuts):
        a = cut[b]
        merged.update(dict.fromkeys(distinct[a : b + 1], padded[a][b]))
        b = a - 1
    merged.update(dict.fromkeys(distinct[: b + 1], padded[0][b]))
    return [merged[key] for key in keys]


def make_plan(
    sizes,
    owner,
    n_processes: int,
    devices_per_process: int,
    method: str,
    per_octave: int = 8,
    slack: float | None = PADDING_SLACK,
) -> CollectionPlan:
    """The plan of a collection from every query's real sizes.

    Args:
        sizes: ``(Q, 4)`` int, each query's ``(n, m, p, t)``: entities, known pairs, pairs to
            predict, entities EP runs on (``t <= n``).
        owner: ``(Q,)`` the process holding each query; a process's queries are contiguous, in
            process order (global index = position in the concatenation of the processes' lists).
        n_processes, devices_per_process: the mesh's shape.
        method: ``"map"`` or ``"vmap"`` (``query_map_method``).
        per_octave: size buckets per power of two (``bucket_size``):
            more buckets, less padding and more programs to compile.
        slack: merge the buckets into fewer groups while the padded work stays within this
            factor of one group per bucket (``merge_groups``); None: one group per bucket.
    """
    sizes = np.asarray(sizes, np.int64).reshape(-1, 4)
    owner = np.asarray(owner, np.int64)
    # EP's t^3 dominates; n sets the covariance's n^3 and the expansion's n^2 t: coarser
    coarse = max(1, per_octave // 4)
    keys = [
        (bucket_size(t, per_octave), bucket_size(n, coarse), bucket_size(max(m, 1), per_octave))
        for n, m, _, t in sizes
    ]
    if slack is not None:
        keys = merge_groups(keys, slack)
    members: dict[tuple[int, int, int], list[int]] = {}
    for q, key in enumerate(keys):
        members.setdefault(key, []).append(q)
    groups = []
    for (t, n, m), queries in sorted(members.items()):
        queries = np.asarray(queries)
        per_device: list[list[int]] = [[] for _ in range(n_processes * devices_per_process)]
        for proc in range(n_processes):
            mine = queries[owner[queries] == proc]
            mine = mine[np.argsort(-sizes[mine, 0], kind="stable")]  # largest first
            for k, q in enumerate(mine):
                per_device[proc * devices_per_process + k % devices_per_process].append(int(q))
        most = max(len(d) for d in per_device)
        rows_per_device = bucket_size(most, per_octave=4)
        order, rows = [], []
        for device, qs in enumerate(per_device):
            order += qs
            rows += [device * rows_per_device + k for k in range(len(qs))]
        order, rows = np.asarray(order, np.int64), np.asarray(rows, np.int64)
        sort = np.argsort(order)
        p = bucket_size(max(1, int(sizes[queries, 2].max())))
        t = min(n, t)
        groups.append(Group(n, m, p, t, rows_per_device, order[sort], rows[sort]))
    return CollectionPlan(tuple(groups), n_processes, devices_per_process, method, sizes, owner)
