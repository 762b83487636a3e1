"""Padding many queries to one shape, with masks, so one compiled function can ``vmap`` over them.

Padded entries carry ``mask = False``; every function in bayesrank that takes a mask gives the
unpadded answer on padded input.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

__all__ = ["pad_stack"]


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
