"""The XPGP prior without a dense covariance: low-rank attributes plus sparse relations, as one
latent vector with a block-diagonal precision.

The XPGP prior (paper Eq. 5) is a sum of independent Gaussian processes, ``xi = f + g_1 + ... +
g_K``, ``f ~ N(0, K_a)`` on the attributes and ``g_k ~ N(0, Q_k^-1)`` on the relations. With the
attribute kernel's low-rank root ``K_a ~ Phi Phi^T`` (``kernels.lowrank``), ``f = Phi w``, ``w ~
N(0, I_r)``, and the latent vector

    z = (w, g_1, ..., g_K): (r + K n,),   z ~ N(0, P^-1),   P = blockdiag(I_r, Q_1, ..., Q_K),

has a sparse precision even though ``xi = J z = Phi w + sum_k g_k`` has the dense covariance
``Phi Phi^T + sum_k Q_k^-1``. Every engine step then needs only ``P``'s products and ``J``'s
(``O(n r + sum nnz(Q_k))``). Independent entity effects, or the low-rank kernel's residual
variances (the FITC-style diagonal correction, GPstuff's FIC), are a block with a diagonal
``Q``. A prior with ``Phi`` the full Cholesky root of ``K_a`` is exact.
"""

from __future__ import annotations

import dataclasses
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np

from ...data.checks import check_fits_dtype, check_matrix
from ...runtime import is_traced
from .precision import LaplacianPrecision

__all__ = ["LatentPrior", "latent_prior", "scale_prior"]


@partial(jax.tree_util.register_dataclass, data_fields=["features", "blocks"], meta_fields=[])
@dataclasses.dataclass(frozen=True)
class LatentPrior:
    """``xi = features @ w + sum_k g_k``, ``w ~ N(0, I_r)``, ``g_k ~ N(0, blocks[k]^-1)``
    (module docstring): ``features: (n, r)`` (``r`` may be 0), ``blocks``: a tuple of
    ``LaplacianPrecision`` over the same ``n`` entities. The latent vector ``z`` is ``(r + K
    n,)``, ``w`` first."""

    features: jax.Array
    blocks: tuple[LaplacianPrecision, ...]

    @property
    def n(self) -> int:
        return self.features.shape[0]

    @property
    def rank(self) -> int:
        return self.features.shape[1]

    @property
    def size(self) -> int:
        """The latent dimension ``r + K n``."""
        return self.rank + len(self.blocks) * self.n

    def _split(self, z):
        r, n = self.rank, self.n
        return z[:r], [z[r + k * n : r + (k + 1) * n] for k in range(len(self.blocks))]

    def entities(self, z):
        """``xi = J z: (n,)``."""
        w, gs = self._split(z)
        xi = self.features @ w
        for g in gs:
            xi = xi + g
        return xi

    def latent(self, u):
        """``J^T u: (r + K n,)`` of an entity vector ``u: (n,)``."""
        return jnp.concatenate([self.features.T @ u] + [u] * len(self.blocks))

    def precision_matvec(self, z):
        """``P z``."""
        w, gs = self._split(z)
        return jnp.concatenate([w] + [b.matvec(g) for b, g in zip(self.blocks, gs, strict=True)])

    def precision_diagonal(self):
        """``diag(P): (r + K n,)``."""
        ones = jnp.ones(self.rank, self.features.dtype)
        return jnp.concatenate([ones] + [b.diagonal() for b in self.blocks])

    def block_quadratics(self, z, y=None):
        """``(z_b^T P_b y_b for each block b): (1 + K,)`` (``y`` defaults to ``z``), the
        attribute block first (``w . w'``)."""
        w, gs = self._split(z)
        w2, hs = (w, gs) if y is None else self._split(y)
        rest = [g @ b.matvec(h) for b, g, h in zip(self.blocks, gs, hs, strict=True)]
        return jnp.stack([w @ w2, *rest])

    def block_sizes(self):
        """``(r, n, ..., n): (1 + K,)``, each block's dimension."""
        return jnp.asarray([self.rank] + [self.n] * len(self.blocks))

    def precision_root_draw(self, key):
        """A draw of ``N(0, P)``: ``(r + K n,)``."""
        keys = jax.random.split(key, len(self.blocks) + 1)
        w = jax.random.normal(keys[0], (self.rank,), self.features.dtype)
        return jnp.concatenate(
            [w] + [b.root_draw(k) for b, k in zip(self.blocks, keys[1:], strict=True)]
        )


def _check_variances(features: np.ndarray, dtype) -> None:
    """``ValueError`` naming the first entity whose attribute variance ``sum_k features[i, k]^2``
    overflows ``dtype`` (beyond it Newton's curvature is ``inf`` and the mode came back 0,
    reported converged)."""
    with np.errstate(over="ignore"):
        variances = np.sum(features**2, axis=1)
    if (bad := np.flatnonzero(~(variances <= np.finfo(dtype).max))).size:
        i = bad[0]
        raise ValueError(
            f"features row {i}: the attribute variance sum_k features[{i}, k]^2 = "
            f"{variances[i]:.3g} overflows {np.dtype(dtype).name}: rescale the features"
        )


def _check_block(block: LaplacianPrecision, name: str) -> None:
    """``ValueError`` naming the first entry of a block that would make ``Q`` wrong without a
    word: a weight ``omega`` or diagonal entry that is not finite or is negative (``Q`` is then
    ``inf`` or not positive semi-definite: a ``1 / variance`` that overflowed gave a mode of
    zeros, reported converged), or a membership outside ``[0, n)`` x ``[0, G)`` (JAX's indexing
    would clamp it)."""
    for field in ("omega", "diag"):
        values = np.asarray(getattr(block, field))
        if (bad := np.flatnonzero(~np.isfinite(values))).size:
            raise ValueError(
                f"{name}.{field}[{bad[0]}] = {values[bad[0]]} is not finite: the precision "
                "needs finite entries (diagonal_precision refuses variances whose reciprocal "
                "overflows)"
            )
        if (bad := np.flatnonzero(values < 0)).size:
            raise ValueError(f"{name}.{field}[{bad[0]}] = {values[bad[0]]} is negative")
    if np.shape(block.diag) != (block.n,):
        raise ValueError(f"{name}.diag has shape {np.shape(block.diag)}, expected ({block.n},)")
    members = np.asarray(block.members)
    if members.ndim != 2 or members.shape[1:] != (2,) or members.dtype.kind not in "iu":
        raise ValueError(f"{name}.members must be (k, 2) integers, got {members.dtype} "
                         f"{members.shape}")  # fmt: skip
    for column, size, what in ((0, block.n, "an entity"), (1, np.size(block.omega), "a group")):
        if (bad := np.flatnonzero((members[:, column] < 0) | (members[:, column] >= size))).size:
            raise ValueError(
                f"{name}.members[{bad[0]}, {column}] = {members[bad[0], column]} is not "
                f"{what} index in [0, {size})"
            )


def latent_prior(features=None, blocks=()) -> LatentPrior:
    """A ``LatentPrior`` with its pieces checked: ``features: (n, r)`` finite reals (that the
    working dtype holds) or ``None`` (no attribute term), ``blocks``: ``LaplacianPrecision`` s
    over the same ``n`` entities, with finite, non-negative weights and diagonals and
    memberships in range (``_check_block``)."""
    blocks = tuple(blocks)
    if features is None:
        if not blocks:
            raise ValueError("a prior needs features or at least one precision block")
        features = jnp.zeros((blocks[0].n, 0), blocks[0].diag.dtype)
    if not is_traced(features):  # (n, r), real, finite, and finite in the working dtype
        checked = check_matrix(features, "features")
        features = jnp.asarray(features)
        if jnp.issubdtype(features.dtype, jnp.floating):
            check_fits_dtype(checked, "features", features.dtype)
            _check_variances(checked, features.dtype)
    features = jnp.asarray(features)
    if features.ndim != 2:
        raise ValueError(f"features must be (n, r), got shape {features.shape}")
    n = features.shape[0]
    for k, b in enumerate(blocks):
        if not isinstance(b, LaplacianPrecision):
            raise ValueError(f"blocks[{k}] is a {type(b).__name__}, not a LaplacianPrecision")
        if b.n != n:
            raise ValueError(f"blocks[{k}] has {b.n} entities, the features {n}")
        if not is_traced(b.members, b.omega, b.diag):
            _check_block(b, f"blocks[{k}]")
    if not blocks and features.shape[1] == 0:
        raise ValueError("a prior needs features or at least one precision block")
    return LatentPrior(features, blocks)


def scale_prior(prior: LatentPrior, variances) -> LatentPrior:
    """The prior with each term's covariance multiplied by ``variances: (1 + K,)``: the attribute
    term's (``features * sqrt(variances[0])``; ignored without features) and each block's
    (``Q_k / variances[1 + k]``)."""
    v = jnp.asarray(variances)
    blocks = tuple(b.scaled(1.0 / v[1 + k]) for k, b in enumerate(prior.blocks))
    return LatentPrior(prior.features * jnp.sqrt(v[0]), blocks)
