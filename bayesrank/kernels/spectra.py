"""Graph Laplacian spectra kept in this process, so that one graph is diagonalised once.

A spectral graph kernel diagonalises its graph's Laplacian on the host when it prepares the
graph (``graph.laplacian_spectrum``, NumPy's ``eigh``). That was done again at every call:
every ``parallel.fit_predict`` on the same collection, every model of a study that shares the
graph, every fit of the same problem. On OHSUMED's 106 keyword graphs it took 0.28 s of a
1.6 s ``fit_predict`` (``benchmarks/bench_collection.py --parts ohsumed``).

``spectrum(W, normalized, compute)`` returns the spectrum of an equal graph computed before, or
computes it with ``compute()`` and keeps it:

- keyed by content: a SHA-256 digest of ``W``'s bytes, its shape and dtype, ``normalized`` and
  the working dtype. ``W`` is the caller's NumPy array where it is one (an equal array passed
  ``data.checks.check_adjacency`` before, so a hit skips the check too), else the checked
  float64 copy. A graph changed in place is a new key;
- the arrays are returned read-only, because every caller shares them;
- at most ``MAX_BYTES`` (256 MiB) are kept. The least recently used spectra go first, and a
  spectrum larger than the budget is not kept.

``clear()`` forgets them all.
"""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from collections.abc import Callable

import numpy as np

__all__ = ["MAX_BYTES", "clear", "spectrum"]

#: The most bytes of eigenvalues and eigenvectors kept.
MAX_BYTES = 256 * 2**20

_kept: OrderedDict = OrderedDict()
_lock = threading.Lock()
_size = 0


def _key(W: np.ndarray, normalized: bool, dtype) -> tuple:
    digest = hashlib.sha256(np.ascontiguousarray(W).data).digest()
    return digest, W.shape, W.dtype.str, bool(normalized), np.dtype(dtype).str


def spectrum(W: np.ndarray, normalized: bool, dtype, compute: Callable):
    """``compute()``'s ``(evals, evecs)`` for this ``W``, kept: a later call on an equal ``W``
    (same bytes, shape, ``normalized`` and working ``dtype``) returns the same read-only arrays."""
    global _size
    key = _key(W, normalized, dtype)
    with _lock:
        found = _kept.get(key)
        if found is not None:
            _kept.move_to_end(key)
            return found
    found = compute()
    for array in found:
        array.setflags(write=False)
    nbytes = sum(array.nbytes for array in found)
    if nbytes > MAX_BYTES:
        return found
    with _lock:
        if key not in _kept:
            _kept[key] = found
            _size += nbytes
        while _size > MAX_BYTES:
            _, dropped = _kept.popitem(last=False)
            _size -= sum(array.nbytes for array in dropped)
    return found


def clear() -> None:
    """Forget every kept spectrum."""
    global _size
    with _lock:
        _kept.clear()
        _size = 0
