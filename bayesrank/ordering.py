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

Only shapes are checked (a traced array has no values to check): ``F`` must be finite, and the
``order`` given to :func:`agreement` must be a permutation of ``0..n-1``.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

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


def _net_preference(F: jax.Array) -> jax.Array:
    return F.sum(axis=1) - F.sum(axis=0)


@jax.jit
def net_preference(F, mask=None) -> jax.Array:
    """Net preference ``pi(x) = sum_x' f(x, x') - sum_x' f(x', x)`` of every entity.

    Args:
        F: ``(n, n)`` preference scores, ``F[i, j]`` = preference of ``i`` over ``j``; the diagonal
            is ignored.
        mask: optional ``(n,)`` bool, ``False`` for padded entities (they contribute nothing and
            get ``pi = 0``).

    Returns:
        ``(n,)`` float array ``pi``, the greedy algorithm's scores before its first step.
    """
    F, _ = _prepare(F, mask)
    return _net_preference(F)


@jax.jit
def greedy_order(F, mask=None) -> jax.Array:
    """Greedy total order of Cohen, Schapire & Singer (1999), most preferred first.

    Runs the ``n`` steps of the algorithm in the module docstring in a ``lax.fori_loop``. At each
    step the candidates are the remaining real entities, or, once none is left, the remaining
    padded ones; the candidate with the largest current ``pi`` is placed next (ties: lowest index).
    ``O(n^2)`` work.

    Args:
        F: ``(n, n)`` preference scores, ``F[i, j]`` = preference of ``i`` over ``j``; the diagonal
            is ignored.
        mask: optional ``(n,)`` bool, ``False`` for padded entities, which are placed last.

    Returns:
        ``order: (n,)`` int32 entity indices, ``order[0]`` the most preferred.
    """
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


@jax.jit
def greedy_ranks(F, mask=None) -> jax.Array:
    """1-based rank of every entity in :func:`greedy_order` (``ranks[order[k]] = k + 1``).

    Args:
        F: ``(n, n)`` preference scores, as in :func:`greedy_order`.
        mask: optional ``(n,)`` bool, ``False`` for padded entities (ranked after the real ones).

    Returns:
        ``ranks: (n,)`` int32, ``1`` for the most preferred entity.
    """
    return _ranks_from_order(greedy_order(F, mask))


@jax.jit
def agreement(F, order, mask=None) -> jax.Array:
    """``AGREE(sigma, f) = sum of F[i, j] over the pairs with i placed before j`` by ``order``.

    Args:
        F: ``(n, n)`` preference scores; the diagonal is ignored.
        order: ``(n,)`` permutation of ``0..n-1``, most preferred first (as from
            :func:`greedy_order`).
        mask: optional ``(n,)`` bool; pairs involving a padded entity count zero.

    Returns:
        Scalar float, the total preference the order agrees with.
    """
    F, _ = _prepare(F, mask)
    order = jnp.asarray(order)
    if order.shape != (F.shape[0],):
        raise ValueError(f"order must have shape ({F.shape[0]},) to match F, got {order.shape}")
    ranks = _ranks_from_order(order)
    return jnp.sum(jnp.where(ranks[:, None] < ranks[None, :], F, 0))


def order_from_probabilities(P, mask=None) -> jax.Array:
    """Total order from pairwise win probabilities; exactly :func:`greedy_order` applied to ``P``.

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
