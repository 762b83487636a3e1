"""How a fit lays out its problems: bucketed padding, the restriction of EP to touched
entities, size buckets of a shared fit, and EP's sites carried across buckets.

Shapes depend on the problems' sizes only (``bayesrank.data.batch.bucket_size``), never on
which entities a split's pairs touch, so a new random split of the same query reuses every
compiled program.
"""

from __future__ import annotations

import jax
import numpy as np

from ..data.batch import ProblemBatch, bucket_size, size_buckets, stack_problems
from ..inference import ep


def one_query(batch: ProblemBatch, b: int) -> ProblemBatch:
    return jax.tree_util.tree_map(lambda x: x[b : b + 1], batch)


def stack(problems, min_pairs: int = 1) -> ProblemBatch:
    """Problems padded to bucketed sizes (entities and pairs, at least ``min_pairs``)."""
    n = bucket_size(max(p.n + p.anchored for p in problems))
    m = max(min_pairs, bucket_size(max(len(p.rows) for p in problems)))
    return stack_problems(problems, n_pad=n, m_pad=m)


def restriction(batch: ProblemBatch, method: str) -> int | bool:
    """The size EP is restricted to (evidence maximisation), from the sizes alone: a query's
    pairs touch at most ``min(n, 2 m)`` entities, so ``bucket_size`` of the largest such bound
    holds every split's touched entities; ``False`` where that saves nothing."""
    if method != "evidence":
        return False
    n = batch.mask.sum(axis=1)
    if batch.anchor is not None:  # a graded problem's anchor is touched too
        n = n + batch.anchor.sum(axis=1)
    m = batch.pair_mask.sum(axis=1)
    size = bucket_size(int(np.max(np.minimum(n, 2 * m))))
    return size if size < batch.mask.shape[1] else False


def layout(problems, method, optimizer, per_query, bucket):
    """``(batch, groups, restrict, per_query)``: the padded batch; size buckets of a shared fit
    driven from the host (``None`` otherwise); EP's restriction; and whether each query gets its
    own ``theta`` (``per_query``, or a single query)."""
    given = isinstance(problems, ProblemBatch)
    per_query = per_query or (problems.pairs.shape[0] if given else len(problems)) == 1
    host_driven = optimizer in (None, "adam", "bfgs")
    grouped = not (per_query or given or bucket is None) and method == "evidence" and host_driven
    # with size buckets, the whole batch has their pair padding (size_buckets)
    batch = problems if given else stack(problems, min_pairs=bucket if grouped else 1)
    groups = size_buckets(problems, bucket, touched=True) if grouped else None
    restrict = False if grouped else restriction(batch, method)
    return batch, groups, restrict, per_query


def bucket_sites(sites, data, groups, dtype) -> tuple:
    """Starting sites per bucket, from ``sites = (tau, nu): (2, B, m)`` in the batch's order
    (a warm start), or zero (the prior) when ``None``."""
    if sites is None:
        return tuple(
            ep.Sites(np.zeros(d.pairs.shape[:2], dtype), np.zeros(d.pairs.shape[:2], dtype))
            for d in data
        )
    rows = [slice(None)] if groups is None else [idx for idx, *_ in groups]
    return tuple(
        ep.Sites(*(_width(np.asarray(s[r], dtype), d.pairs.shape[1]) for s in sites))
        for r, d in zip(rows, data, strict=True)
    )


def _width(a: np.ndarray, m: int) -> np.ndarray:
    """``a: (B, m')`` cut or zero-padded to ``(B, m)`` (a bucket's pairs may be padded wider
    than the batch's, ``data.batch.size_buckets``: the extra rows are padding)."""
    return a[:, :m] if a.shape[1] >= m else np.pad(a, ((0, 0), (0, m - a.shape[1])))


def gather_sites(sites, groups, shape) -> tuple[np.ndarray, np.ndarray]:
    """Per-bucket sites back into host arrays ``(tau, nu)`` of ``shape = (B, m)`` in the
    batch's order (zero-padded)."""
    if groups is None:
        return np.asarray(sites[0].tau), np.asarray(sites[0].nu)
    dtype = sites[0].tau.dtype
    tau, nu = np.zeros(shape, dtype), np.zeros(shape, dtype)
    for (idx, *_), s in zip(groups, sites, strict=True):
        tau[idx], nu[idx] = _width(np.asarray(s.tau), shape[1]), _width(np.asarray(s.nu), shape[1])
    return tau, nu


def merge(posts, groups, m: int) -> ep.EPPosterior:
    """Per-bucket posteriors' sites and diagnostics back into one batch in the problems' order,
    sites padded to ``m``; ``mean`` and ``cov`` are left ``None`` (every entity's moments come
    from the merged sites)."""
    B = sum(len(idx) for idx, *_ in groups)
    tau, nu = gather_sites(tuple(p.sites for p in posts), groups, (B, m))
    cls = type(posts[0])  # EP's or Laplace's posterior
    names = [f for f in cls._fields if f not in ("mean", "cov", "sites")]
    rest = {f: np.zeros(B, getattr(posts[0], f).dtype) for f in names}
    for (idx, *_), p in zip(groups, posts, strict=True):
        for f in names:
            rest[f][idx] = np.asarray(getattr(p, f))
    return cls(mean=None, cov=None, sites=ep.Sites(tau, nu), **rest)


def per_query_groups(problems, per_query: bool, bucket) -> list[list[int]] | None:
    """Per-query fits of a list of problems by size: the indices of each group of problems whose
    entity counts share ``bucket_size(n, per_octave=2)`` (at most ~41% padding within a group),
    or ``None`` where one call does (a shared fit, a batch, ``bucket=None``, one group).

    One padded call runs every query at the largest size and in lockstep until the slowest has
    converged; on the 105 OHSUMED queries (35 to 320 documents) the size groups took a Laplace
    ARD fit of every query from 70.5 s to 49.7 s, compilation included
    (``docs/results/inference.md``)."""
    if not per_query or bucket is None or isinstance(problems, ProblemBatch) or len(problems) < 2:
        return None
    keys = [bucket_size(p.n, per_octave=2) for p in problems]
    groups = [[k for k, key in enumerate(keys) if key == size] for size in sorted(set(keys))]
    return groups if len(groups) > 1 else None
