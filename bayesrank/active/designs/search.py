"""Maximising an acquisition over pairs of designs in the unit cube, or over a pool.

``maximize``: BoTorch's recipe in one compiled program. ``n_raw`` random candidates ``(q, d)``
are scored; the ``n_starts`` best start projected Adam (``optax.adam``, each step clipped back
into ``[0, 1]^d``) for ``steps`` steps, all starts at once (``vmap``); the best end point wins.
The evaluation budget is ``n_raw + n_starts * steps`` acquisition values (and as many
gradients).

``best_in_pool``: the best of given candidate pairs of a pool of designs ``P: (p, d)``.
``mixed``: both, the better one kept: the user's pool stays in reach, and the continuous search
may beat it.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import optax

__all__ = ["Proposal", "best_in_pool", "maximize", "mixed"]


class Proposal(NamedTuple):
    """``X: (q, d)`` the proposed designs, ``value`` their acquisition, ``index: (q,)`` their
    rows in the pool (``-1`` where a design came from the continuous search)."""

    X: jax.Array
    value: jax.Array
    index: jax.Array


def maximize(acquisition, key, q: int, dim: int, *, n_raw: int = 256, n_starts: int = 16,
             steps: int = 100, learning_rate: float = 0.02, dtype=None) -> Proposal:  # fmt: skip
    """The best ``X: (q, dim)`` in the unit cube found for ``acquisition: (q, dim) -> ()``
    (module docstring). Pure; the sizes are static."""
    dtype = dtype or jnp.result_type(float)
    raw = jax.random.uniform(key, (n_raw, q, dim), dtype)
    values = jax.vmap(acquisition)(raw)
    values = jnp.where(jnp.isfinite(values), values, -jnp.inf)
    order = jnp.argsort(-values)[:n_starts]
    starts = raw[order]
    opt = optax.adam(learning_rate)
    gradient = jax.grad(lambda X: -acquisition(X))

    def ascend(X):
        def step(carry, _):
            X, state = carry
            g = gradient(X)
            updates, state = opt.update(jnp.where(jnp.isfinite(g), g, 0.0), state)
            return (jnp.clip(optax.apply_updates(X, updates), 0.0, 1.0), state), None

        (X, _), _ = jax.lax.scan(step, (X, opt.init(X)), None, length=steps)
        return X

    # the starts compete with their end points: an ascent that stepped across a ridge to a
    # worse point does not lose its start
    points = jnp.concatenate([starts, jax.vmap(ascend)(starts)])
    scores = jax.vmap(acquisition)(points)
    scores = jnp.where(jnp.isfinite(scores), scores, -jnp.inf)
    best = jnp.argmax(scores)
    X, value = points[best], scores[best]
    return Proposal(X, value, jnp.full((q,), -1))


def best_in_pool(acquisition, pool, candidates) -> Proposal:
    """The best of ``candidates: (c, q)`` rows of ``pool: (p, d)`` under ``acquisition``."""
    values = jax.vmap(lambda rows: acquisition(pool[rows]))(candidates)
    values = jnp.where(jnp.isfinite(values), values, -jnp.inf)
    best = jnp.argmax(values)
    return Proposal(pool[candidates[best]], values[best], candidates[best])


def mixed(acquisition, key, pool, candidates, **options) -> Proposal:
    """The better of ``best_in_pool`` and ``maximize`` (``options``)."""
    q = candidates.shape[1]
    on_pool = best_in_pool(acquisition, pool, candidates)
    free = maximize(acquisition, key, q, pool.shape[1], dtype=pool.dtype, **options)
    return jax.tree.map(lambda a, b: jnp.where(on_pool.value >= free.value, a, b), on_pool, free)
