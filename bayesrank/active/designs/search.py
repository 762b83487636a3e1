"""Maximising an acquisition over pairs of designs in the unit cube, or over a pool.

``maximize``: BoTorch's recipe in one compiled program. ``n_raw`` random candidates ``(q, d)``
are scored; the ``n_starts`` best start projected Adam (``optax.adam``, each step clipped back
into ``[0, 1]^d``) for ``steps`` steps, all starts at once (``vmap``); the best end point wins.
The evaluation budget is ``n_raw + n_starts * steps`` acquisition values (and as many
gradients).

``begin``, ``ascend`` and ``finish`` are ``maximize`` in parts, so that a host loop can run the
ascent in chunks until a time budget is spent (``loop.propose_within``).

``best_in_pool``: the best of given candidate pairs of a pool of designs ``P: (p, d)``.
``mixed``: both, the better one kept: the user's pool stays in reach, and the continuous search
may beat it.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import optax

from ...data.checks import check_int

__all__ = ["Ascent", "Proposal", "ascend", "begin", "best_in_pool", "better", "finish",
           "maximize", "mixed"]  # fmt: skip


class Proposal(NamedTuple):
    """``X: (q, d)`` the proposed designs, ``value`` their acquisition, ``index: (q,)`` their
    rows in the pool (``-1`` where a design came from the continuous search)."""

    X: jax.Array
    value: jax.Array
    index: jax.Array


class Ascent(NamedTuple):
    """A multi-start ascent under way: ``starts: (n_starts, q, d)`` and their ``values``, the
    current points ``X`` (same shape) and Adam's ``state`` for each."""

    starts: jax.Array
    values: jax.Array
    X: jax.Array
    state: optax.OptState


def begin(acquisition, key, q: int, dim: int, *, n_raw: int, n_starts: int,
          learning_rate: float = 0.02, dtype=None) -> Ascent:  # fmt: skip
    """Score ``n_raw`` uniform candidates and start from the ``n_starts`` best. ``q``, ``dim``,
    ``n_raw`` and ``n_starts`` are positive integers, ``n_starts <= n_raw`` (``ValueError``
    naming the one at fault)."""
    check_int(q, "q", 1)
    check_int(dim, "dim", 1)
    check_int(n_raw, "n_raw", 1)
    check_int(n_starts, "n_starts", 1, n_raw)
    dtype = dtype or jnp.result_type(float)
    raw = jax.random.uniform(key, (n_raw, q, dim), dtype)
    values = _finite(jax.vmap(acquisition)(raw))
    order = jnp.argsort(-values)[:n_starts]
    starts = raw[order]
    return Ascent(starts, values[order], starts, jax.vmap(optax.adam(learning_rate).init)(starts))


def ascend(acquisition, ascent: Ascent, steps: int, learning_rate: float = 0.02) -> Ascent:
    """``steps`` more steps of projected Adam from every start (``vmap``); running ``a`` then
    ``b`` steps gives exactly the points of ``a + b`` steps at once. ``steps``: a
    non-negative integer."""
    check_int(steps, "steps", 0)
    opt = optax.adam(learning_rate)
    gradient = jax.grad(lambda X: -acquisition(X))

    def one(X, state):
        def step(carry, _):
            X, state = carry
            g = gradient(X)
            updates, state = opt.update(jnp.where(jnp.isfinite(g), g, 0.0), state)
            return (jnp.clip(optax.apply_updates(X, updates), 0.0, 1.0), state), None

        (X, state), _ = jax.lax.scan(step, (X, state), None, length=steps)
        return X, state

    X, state = jax.vmap(one)(ascent.X, ascent.state)
    return ascent._replace(X=X, state=state)


def finish(acquisition, ascent: Ascent) -> Proposal:
    """The best of the starts and the current points (an ascent that stepped across a ridge
    to a worse point does not lose its start)."""
    points = jnp.concatenate([ascent.starts, ascent.X])
    scores = _finite(jax.vmap(acquisition)(points))
    best = jnp.argmax(scores)
    return Proposal(points[best], scores[best], jnp.full((points.shape[1],), -1))


def _finite(values):
    return jnp.where(jnp.isfinite(values), values, -jnp.inf)


def maximize(acquisition, key, q: int, dim: int, *, n_raw: int = 256, n_starts: int = 16,
             steps: int = 100, learning_rate: float = 0.02, dtype=None) -> Proposal:  # fmt: skip
    """The best ``X: (q, dim)`` in the unit cube found for ``acquisition: (q, dim) -> ()``
    (module docstring): ``begin``, ``ascend`` ``steps``, ``finish``. Pure; sizes static and
    checked (``begin``, ``ascend``)."""
    check_int(steps, "steps", 0)  # before the starts are scored
    ascent = begin(acquisition, key, q, dim, n_raw=n_raw, n_starts=n_starts,
                   learning_rate=learning_rate, dtype=dtype)  # fmt: skip
    return finish(acquisition, ascend(acquisition, ascent, steps, learning_rate))


def best_in_pool(acquisition, pool, candidates) -> Proposal:
    """The best of ``candidates: (c, q)`` rows of ``pool: (p, d)`` under ``acquisition``
    (``c >= 1``)."""
    if len(jnp.shape(candidates)) != 2 or jnp.shape(candidates)[0] < 1:
        raise ValueError(f"candidates must have shape (c, q), c >= 1, got {jnp.shape(candidates)}")
    values = _finite(jax.vmap(lambda rows: acquisition(pool[rows]))(candidates))
    best = jnp.argmax(values)
    return Proposal(pool[candidates[best]], values[best], candidates[best])


def mixed(acquisition, key, pool, candidates, **options) -> Proposal:
    """The better of ``best_in_pool`` and ``maximize`` (``options``)."""
    q = candidates.shape[1]
    free = maximize(acquisition, key, q, pool.shape[1], dtype=pool.dtype, **options)
    return better(best_in_pool(acquisition, pool, candidates), free)


def better(first: Proposal, second: Proposal) -> Proposal:
    """Whichever proposal scores higher (``first`` on a tie)."""
    return jax.tree.map(lambda a, b: jnp.where(first.value >= second.value, a, b), first, second)
