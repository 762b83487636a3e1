"""Total orders from pairwise preference scores: the greedy algorithm of Cohen, Schapire & Singer.

Given a preference function ``f(x, x')`` in ``[0, 1]`` over a finite set ``S`` of entities (here a
matrix ``F: (n, n)`` with ``F[i, j] = f(i, j)``, the preference of ``i`` over ``j``; the diagonal is
ignored), the quality of a total order ``sigma`` is

    AGREE(sigma, f) = sum_{(x, x'): sigma places x before x'} f(x, x').

Maximising AGREE is NP-complete; Cohen, Schapire & Singer ("Learning to order things", JAIR 10,
1999, Fig. 2 and Theorem 3) give a greedy algorithm whose order has at least half the optimal AGREE:

    pi(x) = sum_{x' in S} f(x, x') - sum_{x' in S} f(x', x)          (net preference)
    t = 1
    while S is not empty:
        x* = argmax_{x in S} pi(x);  sigma(x*) = t;  S = S - {x*}
        pi(x) += f(x*, x) - f(x, x*)   for x in S                     (drop x*'s terms)
        t += 1

Ties in the argmax go to the lowest entity index. The functions are pure JAX, jitted (one compile
per shape and dtype) and vmap-able, with an optional boolean ``mask: (n,)`` so that batches can be
padded to a common ``n``. Padded entities (``mask[i] = False``) do not influence the others (their
rows and columns of ``F`` are treated as zero) and are placed after every real entity, in
increasing index order.

Shapes are always checked. Values are checked where the arrays are concrete (a traced array has
none, e.g. under the caller's own ``jit``): every entry of ``F`` that counts (off the diagonal,
between real entities) must be finite, the mask boolean, and the ``order`` given to
``agreement`` a permutation of ``0..n-1``; each failure is a ``ValueError`` naming the index
and value (``F[0, 1] = nan is not finite``).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from .compiler import jit
from .data.checks.formatting import show_value
from .metrics.checks import mask_values
from .runtime import is_traced

__all__ = [
    "agreement",
    "greedy_order",
    "greedy_ranks",
    "net_preference",
    "order_from_probabilities",
]


def _prepare(F, mask) -> tuple[jax.Array, jax.Array]:
    """Check shapes; return ``F`` as floats with the diagonal and padded rows/columns zeroed."""
    F = jnp.asarray(F)
    if F.ndim != 2 or F.shape[0] != F.shape[1]:
        raise ValueError(f"F must be a square (n, n) matrix, got shape {F.shape}")
    if not jnp.issubdtype(F.dtype, jnp.floating):
        F = F.astype(jnp.result_type(float))
    n = F.shape[0]
    if mask is None:
        mask = jnp.ones(n, dtype=bool)
    else:
        mask = jnp.asarray(mask)
        if mask.shape != (n,):
            raise ValueError(f"mask must have shape ({n},) to match F, got {mask.shape}")
        mask = mask.astype(bool)
    keep = mask[:, None] & mask[None, :] & ~jnp.eye(n, dtype=bool)
    return jnp.where(keep, F, 0), mask


def _check_values(F, mask) -> None:
    """Where concrete: the entries of ``F`` that count finite, the mask boolean (shapes are
    checked again, statically, by ``_prepare``)."""
    _prepare_shapes(F, mask)
    if is_traced(F, mask):
        return
    try:
        arr = np.asarray(F)
    except (TypeError, ValueError) as err:
        raise ValueError(f"F must be a real numeric (n, n) matrix: {err}") from None
    if arr.dtype.kind not in "biuf":
        if not jnp.issubdtype(arr.dtype, jnp.floating):
            raise ValueError(f"F must be a real numeric matrix, got dtype {arr.dtype}")
        arr = arr.astype(np.float32)
    n = arr.shape[0]
    valid = mask_values(mask, n, "F")
    keep = valid[:, None] & valid[None, :] & ~np.eye(n, dtype=bool)
    with np.errstate(invalid="ignore"):
        bad = keep & ~np.isfinite(arr.astype(np.float64))
    if bad.any():
        i, j = (int(x) for x in np.argwhere(bad)[0])
        raise ValueError(f"F[{i}, {j}] = {show_value(arr[i, j])} is not finite")


def _prepare_shapes(F, mask) -> None:
    shape = np.shape(F)
    if len(shape) != 2 or shape[0] != shape[1]:
        raise ValueError(f"F must be a square (n, n) matrix, got shape {shape}")
    if mask is not None and np.shape(mask) != (shape[0],):
        raise ValueError(f"mask must have shape ({shape[0]},) to match F, got {np.shape(mask)}")


def _net_preference(F: jax.Array) -> jax.Array:
    return F.sum(axis=1) - F.sum(axis=0)


@jit
def _net_preference_jit(F, mask=None) -> jax.Array:
    """The compiled body of ``net_preference`` (no value checks)."""
    F, _ = _prepare(F, mask)
    return _net_preference(F)


@jit
def _greedy_order_jit(F, mask=None) -> jax.Array:
    """The compiled body of ``greedy_order`` (no value checks)."""
    F, mask = _prepare(F, mask)
    n = F.shape[0]

    def step(t, state):
        pi, remaining, order = state
        real_left = jnp.any(remaining & mask)
        candidate = remaining & (mask | ~real_left)
        best = jnp.argmax(jnp.where(candidate, pi, -jnp.inf)).astype(jnp.int32)
        pi = pi + F[best, :] - F[:, best]
        return pi, remaining.at[best].set(False), order.at[t].set(best)

    init = (_net_preference(F), jnp.ones(n, dtype=bool), jnp.zeros(n, dtype=jnp.int32))
    return jax.lax.fori_loop(0, n, step, init)[2]


def _ranks_from_order(order: jax.Array) -> jax.Array:
    n = order.shape[0]
    return jnp.zeros(n, dtype=jnp.int32).at[order].set(jnp.arange(1, n + 1, dtype=jnp.int32))


@jit
def _greedy_ranks_jit(F, mask=None) -> jax.Array:
    """The compiled body of ``greedy_ranks`` (no value checks)."""
    return _ranks_from_order(_greedy_order_jit(F, mask))


@jit
def _agreement_jit(F, order, mask=None) -> jax.Array:
    """The compiled body of ``agreement`` (no value checks)."""
    F, _ = _prepare(F, mask)
    order = jnp.asarray(order)
    if order.shape != (F.shape[0],):
        raise ValueError(f"order must have shape ({F.shape[0]},) to match F, got {order.shape}")
    ranks = _ranks_from_order(order)
    return jnp.sum(jnp.where(ranks[:, None] < ranks[None, :], F, 0))


def order_from_probabilities(P, mask=None) -> jax.Array:
    """Total order from pairwise win probabilities; exactly ``greedy_order`` applied to ``P``.

    With ``P[i, j] = P(i > j)`` as the preference function, ``pi(x) = sum_x' P(x > x') -
    P(x' > x)``; when ``P[i, j] + P[j, i] = 1`` this is ``2 * (expected wins of x) - (n - 1)``.

    Args:
        P: ``(n, n)`` probabilities ``P[i, j] = P(entity i preferred to entity j)``; the diagonal
            is ignored.
        mask: optional ``(n,)`` bool, ``False`` for padded entities, which are placed last.

    Returns:
        ``order: (n,)`` int32 entity indices, most preferred first.
    """
    return greedy_order(P, mask)


def net_preference(F, mask=None) -> jax.Array:
    """Net preference ``pi(x) = sum_x' f(x, x') - sum_x' f(x', x)`` of every entity.

    Args:
        F: ``(n, n)`` preference scores, ``F[i, j]`` = preference of ``i`` over ``j``; the diagonal
            is ignored.
        mask: optional ``(n,)`` bool, ``False`` for padded entities (they contribute nothing and
            get ``pi = 0``).

    Returns:
        ``(n,)`` float array ``pi``, the greedy algorithm's scores before its first step.

    Raises:
        ValueError: for a shape that is not ``(n, n)`` (and ``(n,)`` for ``mask``), or naming the
            first entry of ``F`` that counts and is not finite (``F[0, 1] = nan is not finite``).
    """
    _check_values(F, mask)
    return _net_preference_jit(F, mask)


def greedy_order(F, mask=None) -> jax.Array:
    """Greedy total order of Cohen, Schapire & Singer (1999), most preferred first.

    Runs the ``n`` steps of the algorithm in the module docstring in a ``lax.fori_loop`` (one
    compiled program per shape and dtype). At each step the candidates are the remaining real
    entities, or, once none is left, the remaining padded ones; the candidate with the largest
    current ``pi`` is placed next (ties: lowest index). ``O(n^2)`` work.

    Args:
        F: ``(n, n)`` preference scores, ``F[i, j]`` = preference of ``i`` over ``j``; the diagonal
            is ignored.
        mask: optional ``(n,)`` bool, ``False`` for padded entities, which are placed last.

    Returns:
        ``order: (n,)`` int32 entity indices, ``order[0]`` the most preferred.

    Raises:
        ValueError: as ``net_preference``.
    """
    _check_values(F, mask)
    return _greedy_order_jit(F, mask)


def greedy_ranks(F, mask=None) -> jax.Array:
    """1-based rank of every entity in ``greedy_order`` (``ranks[order[k]] = k + 1``).

    Args:
        F: ``(n, n)`` preference scores, as in ``greedy_order``.
        mask: optional ``(n,)`` bool, ``False`` for padded entities (ranked after the real ones).

    Returns:
        ``ranks: (n,)`` int32, ``1`` for the most preferred entity.

    Raises:
        ValueError: as ``net_preference``.
    """
    _check_values(F, mask)
    return _greedy_ranks_jit(F, mask)


def agreement(F, order, mask=None) -> jax.Array:
    """``AGREE(sigma, f) = sum of F[i, j] over the pairs with i placed before j`` by ``order``.

    Args:
        F: ``(n, n)`` preference scores; the diagonal is ignored.
        order: ``(n,)`` permutation of ``0..n-1``, most preferred first (as from
            ``greedy_order``).
        mask: optional ``(n,)`` bool; pairs involving a padded entity count zero.

    Returns:
        Scalar float, the total preference the order agrees with.

    Raises:
        ValueError: as ``net_preference``, or for an ``order`` that is not a permutation of
            ``0..n-1`` (naming the first index out of range or repeated).
    """
    _check_values(F, mask)
    n = np.shape(F)[0]
    if np.shape(order) != (n,):
        raise ValueError(f"order must have shape ({n},) to match F, got {np.shape(order)}")
    if not is_traced(order):
        arr = np.asarray(order)
        if arr.dtype.kind not in "iu":
            raise ValueError(f"order must hold integer entity indices, got dtype {arr.dtype}")
        if ((arr < 0) | (arr >= n)).any():
            i = int(np.argmax((arr < 0) | (arr >= n)))
            raise ValueError(f"order[{i}] = {show_value(arr[i])} is out of range [0, {n})")
        seen = np.zeros(n, dtype=bool)
        for i, x in enumerate(arr.tolist()):
            if seen[x]:
                raise ValueError(f"order[{i}] = {x} repeats an earlier entry: not a permutation")
            seen[x] = True
    return _agreement_jit(F, order, mask)
