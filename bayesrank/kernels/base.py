"""The kernel interface: a kernel evaluates one pair of points; the base class vmaps it.

Kernels are frozen dataclass pytrees (see ``bayesrank.kernels.params``), so they pass through
``jit``, ``vmap`` and ``grad`` like arrays. A subclass defines ``evaluate(x, y)`` for one pair and
inherits ``__call__(X1, X2=None) -> (n1, n2)`` (tinygp's pattern); it may also define ``matrix``,
the same matrix computed in one vectorised pass.

``__call__`` follows the library's jit policy: on traced inputs (inside a caller's ``jit``,
``vmap`` or ``grad``) it is the plain function ``matrix``; on concrete inputs (a user's
``RBF()(X)`` on host arrays) it runs one module-level compiled program per kernel type and
shapes, not a stream of single-operation programs (an RBF matrix was nine of them).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from ..compiler import jit
from ..runtime import is_traced

__all__ = ["Kernel"]


class Kernel:
    """Abstract kernel. Subclasses implement ``evaluate`` (and, optionally, ``matrix``)."""

    def evaluate(self, x: jax.Array, y: jax.Array) -> jax.Array:
        """``k(x, y)`` for one pair of points ``x: (d,)``, ``y: (d,)``; returns a scalar."""
        raise NotImplementedError

    def matrix(self, X1: jax.Array, X2: jax.Array) -> jax.Array:
        """``K[a, b] = k(X1[a], X2[b])``: ``(n1, n2)``, as a pure function (``evaluate``
        vmapped over both sets of points)."""
        X1, X2 = jnp.asarray(X1), jnp.asarray(X2)
        row = jax.vmap(self.evaluate, in_axes=(None, 0))
        return jax.vmap(row, in_axes=(0, None))(X1, X2)

    def __call__(self, X1: jax.Array, X2: jax.Array | None = None) -> jax.Array:
        """The matrix ``K[a, b] = k(X1[a], X2[b])``: ``(n1, n2)``; ``X2`` defaults to ``X1``."""
        if is_traced(self, X1, X2):
            return self.matrix(X1, X1 if X2 is None else X2)
        X1 = _host(X1)
        return _matrix_jit(self, X1, X1 if X2 is None else _host(X2))


def _host(X):
    """A device array as it is, anything else (lists, NumPy) as a NumPy array: one argument
    to the compiled program, never a pytree of Python numbers."""
    return X if isinstance(X, jax.Array) else np.asarray(X)


@jit
def _matrix_jit(kernel: Kernel, X1, X2) -> jax.Array:
    return kernel.matrix(X1, X2)
