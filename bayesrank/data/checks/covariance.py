"""Checks of prior covariances ``K`` and of whole problems ``(K, pairs, pair_mask)``."""

from __future__ import annotations

import numpy as np

from .formatting import as_array, first_index, index_text, show_value
from .pairs import _entity_indices, _integer_array, check_pair_mask

#: Covariance symmetry: ``|K[i, j] - K[j, i]| <= 1e-8 * max(1, max|K|)`` (a kernel matrix is the
#: result of arithmetic, possibly in float32).
COVARIANCE_SYMMETRY_RTOL = 1e-8

#: Covariance 2x2 minors: ``K[i, j]^2 <= K[i, i] K[j, j] (1 + 1e-6) + eps max(1, max|K|)^2``, with
#: ``eps`` the machine epsilon of K's dtype. The relative slack covers float32 rounding of a
#: perfectly correlated pair (about 4 eps = 5e-7); the absolute one lets an entity of zero variance
#: keep rounding-level covariances.
COVARIANCE_PSD_RTOL = 1e-6


def check_covariance(K, name: str = "K", *, batched: bool = False) -> np.ndarray:
    """A prior covariance: full ``(n, n)`` or diagonal ``(n,)``; ``(B, n, n)`` / ``(B, n)`` batched.

    Checked: a real floating dtype (integer, bool, complex and object are rejected); ``n >= 1``
    (and ``B >= 1``); finite entries; a non-negative diagonal; and, for a full matrix, symmetry
    up to ``|K[i, j] - K[j, i]| <= 1e-8 * max(1, max|K|)`` (per problem) and the 2x2 principal
    minors ``K[i, j]^2 <= K[i, i] K[j, j] (1 + 1e-6) + eps * max(1, max|K|)^2``, a necessary
    condition for positive semi-definiteness that costs ``O(n^2)`` (no eigendecomposition: a
    matrix that passes may still be indefinite).

    Args:
        K: the covariance (NumPy or JAX array).
        name: what to call ``K`` in error messages.
        batched: a leading problem axis ``B``.

    Returns:
        ``K`` as a NumPy array of its own dtype (float32 stays float32).

    Raises:
        ValueError: naming the shape or dtype, or the first offending entry: ``K[1, 1] = nan is
            not finite``, ``K[2] = -1.0 is negative: a variance must be >= 0``, ``K is not
            symmetric: K[0, 2] = 1.5 but K[2, 0] = 0.5``, ``K is not positive semi-definite:
            K[0, 1] = 2.0 but K[0, 0] * K[1, 1] = 1.0 * 1.0 < K[0, 1]^2``.
    """
    arr = as_array(K, name, "f", "a real floating array")
    lead = 1 if batched else 0
    full = arr.ndim == 2 + lead and arr.shape[-1] == arr.shape[-2]
    if not (full or arr.ndim == 1 + lead):
        square, diagonal = ("(B, n, n)", "(B, n)") if batched else ("(n, n)", "(n,)")
        raise ValueError(
            f"{name} must be square {square} or a diagonal {diagonal}, got shape {arr.shape}"
        )
    if arr.size == 0:
        need = "at least one problem and one entity" if batched else "at least one entity"
        raise ValueError(f"{name} has shape {arr.shape}: a covariance needs {need}")
    if (bad := first_index(~np.isfinite(arr))) is not None:
        raise ValueError(f"{name}{index_text(bad)} = {show_value(arr[bad])} is not finite")
    diag = np.diagonal(arr, axis1=-2, axis2=-1) if full else arr
    if (bad := first_index(diag < 0)) is not None:
        where = (*bad, bad[-1]) if full else bad
        raise ValueError(
            f"{name}{index_text(where)} = {show_value(diag[bad])} is negative: "
            "a variance must be >= 0"
        )
    if not full:
        return arr
    x = arr.astype(np.float64)
    scale = np.maximum(1.0, np.abs(x).max(axis=(-2, -1), keepdims=True))
    xt = np.swapaxes(x, -1, -2)
    if (bad := first_index(np.abs(x - xt) > COVARIANCE_SYMMETRY_RTOL * scale)) is not None:
        ij, ji = bad, (*bad[:-2], bad[-1], bad[-2])
        raise ValueError(
            f"{name} is not symmetric: {name}{index_text(ij)} = {show_value(arr[ij])} but "
            f"{name}{index_text(ji)} = {show_value(arr[ji])}"
        )
    d = np.diagonal(x, axis1=-2, axis2=-1)
    bound = d[..., :, None] * d[..., None, :] * (1 + COVARIANCE_PSD_RTOL)
    bound += np.finfo(arr.dtype).eps * scale**2
    upper = np.triu(np.ones(x.shape[-2:], dtype=bool), k=1)
    if (bad := first_index((x * xt > bound) & upper)) is not None:  # x * xt: K_ij^2, symmetrised
        *b, i, j = bad
        ii, jj, ij = (*b, i, i), (*b, j, j), (*b, i, j)
        raise ValueError(
            f"{name} is not positive semi-definite: "
            f"{name}{index_text(ij)} = {show_value(arr[ij])} but "
            f"{name}{index_text(ii)} * {name}{index_text(jj)} = "
            f"{show_value(arr[ii])} * {show_value(arr[jj])} < "
            f"{name}{index_text(ij)}^2 (a correlation above 1)"
        )
    return arr


def check_problem(
    K, pairs, pair_mask=None, *, batched: bool = False
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The inputs of an inference engine (EP, NUTS): prior covariance, training pairs, pair mask.

    ``K`` as in ``check_covariance``. Every pair, padded ones included, must hold entity
    indices in ``[0, n)`` (padded pairs are still gathered inside compiled code); real pairs
    (``pair_mask`` True) must not be self-pairs. Duplicates and contradictions are allowed. With
    ``batched``, the pairs' leading axis must equal ``K``'s.

    Args:
        K: ``(n, n)`` or ``(n,)``; batched ``(B, n, n)`` or ``(B, n)``.
        pairs: ``(m, 2)``, batched ``(B, m, 2)``, integer-valued; ``[]`` is ``(0, 2)``.
        pair_mask: ``(m,)`` / ``(B, m)`` bool, True for real pairs; None for all.

    Returns:
        ``(K, pairs, pair_mask)``: ``K`` as a NumPy array of its dtype, ``pairs`` int64,
        ``pair_mask`` bool.

    Raises:
        ValueError: as the checks above, or ``pairs[0, 1] = 3 is not an entity index (n = 3):
            out of range [0, 3)``, ``pairs[1] = (3, 3) is a self-pair``.
    """
    K = check_covariance(K, "K", batched=batched)
    n = K.shape[-1]
    what = "(B, m, 2) with B = K.shape[0]" if batched else "(m, 2)"
    raw = _integer_array(pairs, "pairs")
    if batched and (raw.ndim != 3 or raw.shape[0] != K.shape[0]):
        raise ValueError(f"pairs must be {what}, got shape {raw.shape}")
    pairs = _entity_indices(raw, n, "pairs", 1 if batched else 0, what)
    pair_mask = check_pair_mask(pair_mask, pairs.shape[:-1])
    if (bad := first_index((pairs[..., 0] == pairs[..., 1]) & pair_mask)) is not None:
        i = int(pairs[bad][0])
        raise ValueError(f"pairs{index_text(bad)} = ({i}, {i}) is a self-pair")
    return K, pairs, pair_mask
