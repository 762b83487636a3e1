"""The host side of EP's façade: checking a warm start and the outcomes, padding the pairs and
outcomes to size buckets (``bayesrank.data.batch.bucket_size``), the loop settings as arrays,
and slicing a padded result back. NumPy on the host, before and after the one jitted call."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from ...data import batch
from ...data.checks import (
    check_covariance,
    check_intervals,
    check_outcomes,
    check_pair_mask,
    check_pairs,
)
from ...likelihoods import Outcomes, tie_outcomes
from ..gaussian.sites import Sites
from .loop import default_tol

__all__ = [
    "as_outcomes",
    "check_sites",
    "loop_settings",
    "pad_outcomes",
    "pad_pairs_and_sites",
    "pad_ties",
    "unpad_posterior",
    "validate_problem",
]


def check_sites(sites, m: int) -> Sites | None:
    """A warm start's sites: ``(tau, nu)`` of ``(m,)`` finite reals each, ``tau >= 0`` (a site's
    precision; EP's own sites never go below 0), or ``None``. ``ValueError`` naming the first
    entry at fault."""
    if sites is None:
        return None
    try:
        tau, nu = sites
    except (TypeError, ValueError):
        raise ValueError(
            f"sites must be Sites(tau, nu) (a fit's .sites), got {type(sites).__name__}"
        ) from None
    out = []
    for name, values in (("sites.tau", tau), ("sites.nu", nu)):
        arr = np.asarray(values)
        if arr.dtype.kind not in "biuf" or arr.shape != (m,):
            raise ValueError(
                f"{name} must be a real array of shape ({m},), one per pair, got "
                f"{arr.dtype} {arr.shape}"
            )
        arr = arr.astype(np.float64)
        if (bad := np.flatnonzero(~np.isfinite(arr))).size:
            raise ValueError(f"{name}[{bad[0]}] = {arr[bad[0]]} is not finite")
        out.append(arr)
    if (bad := np.flatnonzero(out[0] < 0)).size:
        raise ValueError(f"sites.tau[{bad[0]}] = {out[0][bad[0]]} is negative: a precision is >= 0")
    return Sites(*out)


def pad_pairs_and_sites(pairs: np.ndarray, pair_mask, sites, dtype):
    """``(pairs, pair_mask, sites)`` padded on the host to ``bucket_size(m)`` pairs
    (``data.batch.pad_pairs``): padded pairs are ``(0, 1)``, masked out, with zero sites (which
    leaves the posterior as it is)."""
    m = len(pairs)
    pairs_pad, _ = batch.pad_pairs(pairs)
    mask_pad = batch.pad_rows(check_pair_mask(pair_mask, (m,)), len(pairs_pad))
    if sites is not None:
        sites = Sites(*(batch.pad_rows(s, len(pairs_pad), dtype=dtype) for s in sites))
    return pairs_pad, mask_pad, sites


def pad_ties(tie, weight, m: int, dtype) -> tuple[np.ndarray, np.ndarray]:
    """``(tie, weight)`` of ``m`` rows padded on the host to ``bucket_size(m)`` rows (a padded row:
    no tie, weight 1; masked out)."""
    M = batch.bucket_size(m)
    return batch.pad_rows(tie, M), batch.pad_rows(weight, M, fill=1.0, dtype=dtype)


# The old names, kept as aliases (``inference/problem.py`` imports them): the padding helpers
# named ``pad_pairs`` and ``pad_rows`` are ``bayesrank.data.batch``'s.
pad_pairs = pad_pairs_and_sites
pad_rows = pad_ties


def pad_outcomes(outcomes, m: int, dtype) -> Outcomes | None:
    """Checked ``outcomes`` of ``m`` rows padded on the host to ``bucket_size(m)`` rows, or None:
    an ``Outcomes`` (intervals, ``check_intervals``), or ``(ties, weights, margin)``
    (``check_outcomes``: the tie model). A padded row is a win, ``(0, inf)``, of weight 1."""
    if outcomes is None:
        return None
    M = batch.bucket_size(m)
    if isinstance(outcomes, Outcomes):
        lower, upper, weight = check_intervals(*outcomes, m=m, dtype=dtype)
    else:
        tie, weight, margin = check_outcomes(*outcomes, m=m, dtype=dtype)
        lower = np.where(tie, -margin, margin)
        upper = np.where(tie, margin, np.inf)
    return Outcomes(
        batch.pad_rows(lower, M, dtype=dtype),
        batch.pad_rows(upper, M, fill=np.inf, dtype=dtype),
        batch.pad_rows(weight, M, fill=1.0, dtype=dtype),
    )


def as_outcomes(ties, weights, margin, *, pairs, dtype) -> Outcomes:
    """The tie model's ``Outcomes`` of ``pairs``' rows from traced or concrete parts (no
    checks)."""
    m = jnp.shape(pairs)[0]
    tie = jnp.zeros(m, bool) if ties is None else jnp.asarray(ties)
    weight = jnp.ones(m, dtype) if weights is None else jnp.asarray(weights, dtype)
    return tie_outcomes(tie, weight, jnp.asarray(margin, dtype))


def loop_settings(max_iter, tol, damping, dtype) -> tuple[np.ndarray, ...]:
    """``(max_iter, tol, damping)`` as host arrays (traced by the jitted programs: changing them
    compiles nothing); ``tol=None`` is ``default_tol``."""
    tol = default_tol(dtype) if tol is None else tol
    return np.asarray(max_iter, np.int32), np.asarray(tol, dtype), np.asarray(damping, dtype)


def unpad_posterior(post, n: int, m: int):
    """The real entities' and pairs' part of a padded result, sliced on the host and put back on
    the device (``jax.device_put``: ``jnp.asarray`` of a host array compiles a program per
    shape, and a slice of a device array another)."""
    post = jax.device_get(post)
    return jax.device_put(
        post._replace(
            mean=post.mean[:n],
            cov=post.cov[:n, :n],
            sites=Sites(post.sites.tau[:m], post.sites.nu[:m]),
        )
    )


def validate_problem(K, pairs) -> None:
    """Host-side checks before EP (``bayesrank.data.checks``): ``K`` square ``(n, n)`` or a
    diagonal ``(n,)``, real, finite, symmetric, with a non-negative diagonal and no 2x2 minor
    that breaks positive semi-definiteness; pairs integer, in range, no self-pairs.

    Raises ``ValueError`` naming the offending entry. (Inside compiled code nothing is checked.)
    """
    K = check_covariance(K)
    check_pairs(pairs, K.shape[0])
