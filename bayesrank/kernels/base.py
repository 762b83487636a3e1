"""The kernel interface: a kernel evaluates one pair of points; the base class vmaps it.

Kernels are frozen dataclass pytrees (see ``bayesrank.kernels.params``), so they pass through
``jit``, ``vmap`` and ``grad`` like arrays. A subclass defines ``evaluate(x, y)`` for one pair and
inherits ``__call__(X1, X2=None) -> (n1, n2)`` (tinygp's pattern).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

__all__ = ["Kernel"]


class Kernel:
    """Abstract kernel. Subclasses implement ``evaluate`` and nothing else."""

    def evaluate(self, x: jax.Array, y: jax.Array) -> jax.Array:
        """``k(x, y)`` for one pair of points ``x: (d,)``, ``y: (d,)``; returns a scalar."""
        raise NotImplementedError

    def __call__(self, X1: jax.Array, X2: jax.Array | None = None) -> jax.Array:
        """The matrix ``K[a, b] = k(X1[a], X2[b])``: ``(n1, n2)``; ``X2`` defaults to ``X1``."""
        X1 = jnp.asarray(X1)
        X2 = X1 if X2 is None else jnp.asarray(X2)
        row = jax.vmap(self.evaluate, in_axes=(None, 0))
        return jax.vmap(row, in_axes=(0, None))(X1, X2)
