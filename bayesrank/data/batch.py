"""Padding to size buckets, with masks, so one compiled function serves many sizes and can
``vmap`` over many queries: the one home of padding.

Padded entries carry ``mask = False``; every function in bayesrank that takes a mask gives the
unpadded answer on padded input. One helper per purpose: ``bucket_size`` (the padded size),
``pad_rows`` (an array's axis, filled with a constant), ``pad_pairs`` (pairs with a harmless
filler pair and a mask), ``pad_covariance`` (a covariance with a decoupled unit prior on padded
entities), ``pad_stack`` and ``stack_problems`` (many queries to one shape).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import numpy as np

__all__ = [
    "ProblemBatch",
    "bucket_size",
    "pad_covariance",
    "pad_pairs",
    "pad_rows",
    "pad_stack",
    "size_buckets",
    "stack_problems",
    "touched_entities",
]

#: The smallest step between buckets.
MIN_BUCKET = 8
#: Sizes up to this share one bucket: below it a program's run time hardly depends on its size,
#: and padding costs less than compiling another program.
SMALLEST = 32


def bucket_size(size: int, per_octave: int = 16) -> int:
    """The padded size that a dimension of ``size`` (entities, pairs) compiles at.

    ``size`` rounded up to a multiple of ``max(MIN_BUCKET, 2^k / per_octave)`` with
    ``2^k <= size < 2^(k+1)``: ``per_octave`` sizes between consecutive powers of two, so the
    padding adds at most ``1 / per_octave`` of the size (6.25% by default: at most 20% more
    ``n^3`` work) while a new random split of the same query, or a query of similar size,
    lands in the same bucket and reuses the compiled program. Every size up to ``SMALLEST``
    is ``SMALLEST``: there a program's run time hardly depends on its size (the test suite
    compiled 10 % fewer programs than with buckets of 8, 16, 24 and 32).

    Examples: 5 -> 32, 30 -> 32, 147 -> 152, 300 -> 304, 600 -> 608, 1000 -> 1024.
    """
    size = int(size)
    if size < 0:
        raise ValueError(f"size must be >= 0, got {size}")
    if size <= SMALLEST:
        return SMALLEST
    step = max(MIN_BUCKET, (1 << (size.bit_length() - 1)) // per_octave)
    return -(-size // step) * step


def pad_rows(a, size: int | None = None, *, fill=0, dtype=None, axis: int = 0) -> np.ndarray:
    """``a`` with entries of ``fill`` appended along ``axis`` up to ``size``, on the host.

    ``a: (..., n, ...)`` (``n`` along ``axis``) becomes ``(..., size, ...)``; ``size`` defaults to
    ``bucket_size(n)``; ``dtype`` (default ``a``'s) is the result's, so the real entries are cast
    to it.
    """
    a = np.asarray(a)
    axis = axis % a.ndim
    n = a.shape[axis]
    size = bucket_size(n) if size is None else int(size)
    if size < n:
        raise ValueError(f"size {size} is shorter than the {n} entries to pad")
    out = np.full(
        (*a.shape[:axis], size, *a.shape[axis + 1 :]), fill, a.dtype if dtype is None else dtype
    )
    out[(slice(None),) * axis + (slice(0, n),)] = a
    return out


def pad_pairs(
    pairs, size: int | None = None, *, filler=(0, 1), dtype=np.int64
) -> tuple[np.ndarray, np.ndarray]:
    """``pairs: (m, 2)`` padded with rows ``filler`` to ``(size, 2)`` of ``dtype``, and the
    ``(size,)`` bool mask that is True on the real pairs. ``size`` defaults to ``bucket_size(m)``.

    The default filler ``(0, 1)`` is a valid pair of distinct entities (as ``stack_problems``'
    padded pairs), which keeps a pair's difference variance away from zero; a masked-out pair
    carries no weight or a zero site.
    """
    pairs = np.asarray(pairs)
    m = pairs.shape[0]
    size = bucket_size(m) if size is None else int(size)
    if size < m:
        raise ValueError(f"size {size} is shorter than the {m} pairs to pad")
    out = np.tile(np.asarray(filler, dtype), (size, 1))
    out[:m] = pairs
    mask = np.zeros(size, bool)
    mask[:m] = True
    return out, mask


def pad_covariance(cov, size: int) -> np.ndarray:
    """``cov: (..., n, n)`` padded to ``(..., size, size)`` with a unit variance on each padded
    entity, uncorrelated with the others (the decoupled prior row of a padded entity)."""
    cov = np.asarray(cov)
    n = cov.shape[-1]
    if size < n:
        raise ValueError(f"size {size} is smaller than the {n} entities to pad")
    out = np.zeros((*cov.shape[:-2], size, size), cov.dtype)
    out[..., :n, :n] = cov
    out[..., np.arange(n, size), np.arange(n, size)] = 1.0
    return out


def pad_stack(
    arrays: Sequence[np.ndarray], length: int | None = None, fill: float = 0
) -> tuple[np.ndarray, np.ndarray]:
    """Stack arrays of different leading length into one padded array.

    Args:
        arrays: ``B`` arrays of shapes ``(n_b, *rest)`` with a common ``rest``.
        length: the padded length ``L`` (default: the largest ``n_b``); must be >= every ``n_b``.
        fill: value written into padded slots.

    Returns:
        ``(stacked, mask)`` with ``stacked: (B, L, *rest)`` and ``mask: (B, L)`` bool, True on real
        entries.
    """
    if not arrays:
        raise ValueError("pad_stack needs at least one array")
    arrays = [np.asarray(a) for a in arrays]
    rest = arrays[0].shape[1:]
    for b, a in enumerate(arrays):
        if a.ndim == 0 or a.shape[1:] != rest:
            raise ValueError(f"array {b} has shape {a.shape}; expected (n, *{rest})")
    longest = max(a.shape[0] for a in arrays)
    length = longest if length is None else length
    if length < longest:
        raise ValueError(f"length {length} is shorter than the longest array ({longest})")
    dtype = np.result_type(*arrays)
    stacked = np.full((len(arrays), length, *rest), fill, dtype=dtype)
    mask = np.zeros((len(arrays), length), dtype=bool)
    for b, a in enumerate(arrays):
        stacked[b, : a.shape[0]] = a
        mask[b, : a.shape[0]] = True
    return stacked, mask


class ProblemBatch(NamedTuple):
    """Many ``PreferenceProblem`` padded to common shapes.

    ``X: (B, n, d)`` (or ``None``), ``relations``: one ``(B, n, n)`` array per relation type
    (padded entities isolated), ``pairs: (B, m, 2)`` (padded pairs are ``(0, 1)``: valid, distinct
    indices, masked out), ``mask: (B, n)``, ``pair_mask: (B, m)``. ``pairs`` holds each
    problem's ``rows`` (its pairs, then its ties); ``tie: (B, m)`` bool and ``weight: (B, m)``
    their outcomes where a problem has ties or weights (padded rows: no tie, weight 1), else
    ``None``; ``grade: (B, m)`` each row's grade (-1: a pair or tie) and ``anchor: (B, n)``
    bool the anchor entity of a graded problem (``PreferenceProblem.rows``), where a problem
    has grades, else ``None``.
    """

    X: np.ndarray | None
    relations: tuple
    pairs: np.ndarray
    mask: np.ndarray
    pair_mask: np.ndarray
    tie: np.ndarray | None = None
    weight: np.ndarray | None = None
    grade: np.ndarray | None = None
    anchor: np.ndarray | None = None


def stack_problems(problems, n_pad: int | None = None, m_pad: int | None = None) -> ProblemBatch:
    """Pad and stack problems (all with or all without attributes, same number of relations)."""
    if not problems:
        raise ValueError("stack_problems needs at least one problem")
    n_rel = {len(p.relations) for p in problems}
    if len(n_rel) != 1 or len({p.X is None for p in problems}) != 1:
        raise ValueError("problems differ in their attributes or number of relations")
    sizes = [p.n + p.anchored for p in problems]  # a graded problem's anchor takes a slot
    n_pad = max(max(sizes), 2) if n_pad is None else n_pad
    m_pad = max(max(len(p.rows) for p in problems), 1) if m_pad is None else m_pad
    if n_pad < max(sizes) or m_pad < max(len(p.rows) for p in problems):
        raise ValueError(f"n_pad={n_pad}, m_pad={m_pad} are smaller than the largest problem")
    X = None
    if problems[0].X is not None:
        X, _ = pad_stack([p.X for p in problems], n_pad)
    relations = []
    for r in range(n_rel.pop()):
        W = np.zeros((len(problems), n_pad, n_pad))
        for b, p in enumerate(problems):
            W[b, : p.n, : p.n] = p.relations[r]
        relations.append(W)
    pairs = np.tile(np.array([0, 1], dtype=np.int64), (len(problems), m_pad, 1))
    pair_mask = np.zeros((len(problems), m_pad), dtype=bool)
    mask = np.zeros((len(problems), n_pad), dtype=bool)
    tie = weight = grade = anchor = None
    if any(p.has_outcomes for p in problems):
        tie = np.zeros((len(problems), m_pad), bool)
        weight = np.ones((len(problems), m_pad))
    if any(p.anchored for p in problems):
        grade = np.full((len(problems), m_pad), -1, np.int64)
        anchor = np.zeros((len(problems), n_pad), bool)
    for b, p in enumerate(problems):
        rows = p.rows
        pairs[b, : len(rows)] = rows
        pair_mask[b, : len(rows)] = True
        mask[b, : p.n] = True
        if tie is not None:
            tie[b, : len(rows)], g, weight[b, : len(rows)] = p.outcomes()
        if grade is not None:
            grade[b, : len(rows)] = g
            anchor[b, p.n] = p.anchored
    return ProblemBatch(X, tuple(relations), pairs, mask, pair_mask, tie, weight, grade, anchor)


def touched_entities(batch: ProblemBatch, size: int | None = None):
    """The entities each query's real pairs touch, and the pairs renumbered among them.

    Returns ``(entities: (B, t), entity_mask: (B, t), pairs: (B, m, 2))``: ``entities[b, k]``
    is the ``k``-th touched entity of query ``b`` (ascending; padded slots 0, masked), and
    ``pairs[b, s]`` the positions of pair ``s``'s entities in that list (padded pairs ``(0, 1)``).
    ``t`` is ``size``, or the largest touched count (at least 2).
    """
    pairs, valid = np.asarray(batch.pairs), np.asarray(batch.pair_mask)
    touched = [np.unique(p[v]) for p, v in zip(pairs, valid, strict=True)]
    largest = max(2, max(len(t) for t in touched))
    size = largest if size is None else size
    if size < largest:
        raise ValueError(f"size={size} is smaller than the most entities touched ({largest})")
    entities = np.zeros((len(touched), size), np.int64)
    entity_mask = np.zeros((len(touched), size), bool)
    renumbered = np.tile(np.array([0, 1], np.int64), (*pairs.shape[:2], 1))
    for b, t in enumerate(touched):
        entities[b, : len(t)], entity_mask[b, : len(t)] = t, True
        renumbered[b, valid[b]] = np.searchsorted(t, pairs[b, valid[b]])
    return entities, entity_mask, renumbered


def size_buckets(
    problems, multiple: int = 64, touched: bool = False
) -> list[tuple[np.ndarray, ProblemBatch, int]]:
    """Group problems by size rounded up to ``multiple``: ``[(indices, padded batch, size)]``.

    The size is the number of entities, or with ``touched`` the number that pairs touch (the
    size EP runs at when restricted to them; the batch is then padded to ``bucket_size`` of its
    largest problem's entities). Sizes are multiples of ``multiple`` up to ``bucket_size`` of
    the largest problem's entities, and a group's pairs are padded to ``bucket_size``, at least
    ``multiple``: the shapes, and so the compiled programs, depend on the problems' sizes and
    barely on the split, so the next repetition of a study, or its next number of known pairs
    while the pairs touch fewer than ``multiple`` entities, reuses them. (Padding small
    problems to ``multiple`` costs less than compiling their programs again.)
    """
    if multiple < 1:
        raise ValueError(f"bucket must be a positive integer, got {multiple}")
    counts = [len(np.unique(p.rows)) if touched else p.n + p.anchored for p in problems]
    groups: dict[int, list[int]] = {}
    largest = bucket_size(max(2, max(p.n + p.anchored for p in problems)))
    for k, c in enumerate(counts):
        groups.setdefault(min(largest, max(2, multiple * -(-c // multiple))), []).append(k)
    out = []
    for size, idx in sorted(groups.items()):
        members = [problems[k] for k in idx]
        n_pad = max(size, bucket_size(max(p.n + p.anchored for p in members))) if touched else size
        m_pad = max(multiple, bucket_size(max(len(p.rows) for p in members)))
        out.append((np.asarray(idx), stack_problems(members, n_pad=n_pad, m_pad=m_pad), size))
    return out
