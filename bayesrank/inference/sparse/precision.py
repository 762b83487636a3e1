"""Sparse prior precisions of graph kernels: the regularized Laplacian in group form.

The regularized Laplacian kernel (paper Eq. 2) has the precision ``Q = (beta / w) (L + I /
iota^2)``, with ``L`` the Laplacian of the relation graph. ``LaplacianPrecision`` keeps ``Q`` as a
sum over *groups* of entities,

    Q = sum_g omega_g (s_g diag(1_g) - 1_g 1_g^T) + diag(d),

with ``1_g`` the indicator of group ``g`` and ``s_g`` its size. One form serves both kinds of
relation data:

- a **graph** ``W``: every edge ``(i, j)`` is a group of two with ``omega = (beta / w) W_ij``
  (``s diag(1_g) - 1_g 1_g^T`` is then ``(e_i - e_j)(e_i - e_j)^T``): ``laplacian_precision``;
- a **membership relation** (movie-director, movie-genre): every director or genre is one group,
  and the sum is exactly the Laplacian of the bipartite projection ``W_ij = #groups shared`` —
  in ``O(memberships)`` numbers where the projection has ``O(s_g^2)`` edges per group (a genre of
  5,000 movies is 12.5 million edges, and one group here): ``membership_precision``.

Each group's term is ``omega_g s_g P_g`` with ``P_g`` the centring projection on its members, so
``Q`` has the sparse root ``Q = B B^T``, ``B = [sqrt(omega_g s_g) P_g ..., diag(sqrt(d))]``:
``root_draw`` returns ``B z``, a draw of ``N(0, Q)``, from one normal per membership and entity.
Matrix-vector products, the diagonal and the root draw are ``segment_sum`` s over the memberships:
``O(memberships + n)`` each.
"""

from __future__ import annotations

import dataclasses
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np

from ...data.checks import (
    check_bool,
    check_entity_indices,
    check_float,
    check_group_ids,
    check_int,
    check_matrix,
    check_variances,
)

__all__ = [
    "LaplacianPrecision",
    "diagonal_precision",
    "laplacian_precision",
    "membership_precision",
    "residual_precision",
]


@partial(
    jax.tree_util.register_dataclass,
    data_fields=["members", "omega", "diag"],
    meta_fields=["n"],
)
@dataclasses.dataclass(frozen=True)
class LaplacianPrecision:
    """``Q = sum_g omega_g (s_g diag(1_g) - 1_g 1_g^T) + diag(diag)`` (module docstring):
    ``members: (k, 2)`` rows ``(entity, group)`` (each at most once), ``omega: (G,)`` the groups'
    weights, ``diag: (n,)``; ``n`` static under ``jit``."""

    members: jax.Array
    omega: jax.Array
    diag: jax.Array
    n: int

    def _sizes(self):
        ones = jnp.ones(self.members.shape[0], self.diag.dtype)
        return jax.ops.segment_sum(ones, self.members[:, 1], self.omega.shape[0])

    def matvec(self, v):
        """``Q v: (n,)``."""
        entity, group = self.members[:, 0], self.members[:, 1]
        sums = jax.ops.segment_sum(v[entity], group, self.omega.shape[0])
        per = self.omega[group] * (self._sizes()[group] * v[entity] - sums[group])
        return jax.ops.segment_sum(per, entity, self.n) + self.diag * v

    def diagonal(self):
        """``diag(Q): (n,)``."""
        entity, group = self.members[:, 0], self.members[:, 1]
        per = self.omega[group] * (self._sizes()[group] - 1.0)
        return jax.ops.segment_sum(per, entity, self.n) + self.diag

    def root_draw(self, key):
        """``B z: (n,)``, ``z ~ N(0, I)``: a draw of ``N(0, Q)``."""
        entity, group = self.members[:, 0], self.members[:, 1]
        k_members, k_diag = jax.random.split(key)
        dtype = self.diag.dtype
        z = jax.random.normal(k_members, (self.members.shape[0],), dtype)
        sizes = self._sizes()
        mean = jax.ops.segment_sum(z, group, self.omega.shape[0]) / jnp.maximum(sizes, 1.0)
        per = jnp.sqrt(self.omega[group] * sizes[group]) * (z - mean[group])
        out = jax.ops.segment_sum(per, entity, self.n)
        return out + jnp.sqrt(self.diag) * jax.random.normal(k_diag, (self.n,), dtype)

    def scaled(self, factor) -> LaplacianPrecision:
        """``factor Q`` (a covariance scaled by ``1 / factor``)."""
        return LaplacianPrecision(self.members, self.omega * factor, self.diag * factor, self.n)

    def dense(self) -> np.ndarray:
        """``Q: (n, n)`` as a NumPy array (for tests and small problems)."""
        out = np.diag(np.asarray(self.diag, float))
        members = np.asarray(self.members)
        omega = np.asarray(self.omega, float)
        for g in np.unique(members[:, 1]):
            idx = members[members[:, 1] == g, 0]
            out[np.ix_(idx, idx)] -= omega[g]
            out[idx, idx] += omega[g] * len(idx)
        return out


def _dtype():
    return jnp.result_type(float)


def _scale(beta, iota, weight) -> tuple[float, float]:
    """``(beta / weight, beta / (weight iota^2))``, a group's weight and the diagonal, with the
    options checked: finite numbers > 0 whose two ratios are finite normal numbers of the
    working dtype (beyond, ``Q`` holds ``inf`` or a diagonal flushed to 0)."""
    beta = check_float(beta, "beta", low=0.0, low_open=True)
    iota = check_float(iota, "iota", low=0.0, low_open=True)
    weight = check_float(weight, "weight", low=0.0, low_open=True)
    with np.errstate(over="ignore", under="ignore"):  # NumPy floats: inf or 0, never an error
        scale = np.float64(beta) / weight
        diag = scale / np.float64(iota) / iota  # iota^2 alone may overflow
    info = np.finfo(_dtype())
    for label, value in (("beta / weight", scale), ("beta / (weight iota^2)", diag)):
        if not info.tiny <= value <= info.max:
            raise ValueError(
                f"{label} = {value:.3g} (beta = {beta:g}, iota = {iota:g}, weight = {weight:g}) "
                f"is not a finite normal {info.dtype.name}: the precision would hold inf or 0; "
                "rescale them"
            )
    return float(scale), float(diag)


def laplacian_precision(W, beta=1.0, iota=1.0, weight=1.0) -> LaplacianPrecision:
    """The precision ``(beta / weight) (L + I / iota^2)`` of the regularized Laplacian prior
    ``weight [beta (L + I / iota^2)]^-1``, ``L = D - W`` of the adjacency ``W: (n, n)`` (dense
    or ``scipy.sparse``; symmetric, non-negative, the diagonal ignored): each edge one group."""
    import scipy.sparse as sp

    if not sp.issparse(W):  # named: W[0, 1] = nan is not finite; None and strings refused
        W = check_matrix(W, "W", square=True, nonnegative=True)
    A = sp.coo_matrix(W, dtype=np.float64)
    n = A.shape[0]
    if A.shape != (n, n):
        raise ValueError(f"the adjacency must be square, got shape {A.shape}")
    if A.nnz and (np.any(A.data < 0) or not np.all(np.isfinite(A.data))):
        raise ValueError("the adjacency must be finite and non-negative")
    if abs(A - A.T).max() > 1e-12 * max(1.0, abs(A).max()):
        raise ValueError("the adjacency must be symmetric")
    A = sp.triu(A, k=1).tocoo()
    A.eliminate_zeros()
    scale, diag = _scale(beta, iota, weight)
    k = len(A.data)
    members = np.stack([np.r_[A.row, A.col], np.r_[np.arange(k), np.arange(k)]], 1)
    with np.errstate(over="ignore"):
        omega = scale * A.data
    if (bad := np.flatnonzero(~(omega <= np.finfo(_dtype()).max))).size:
        i, j = A.row[bad[0]], A.col[bad[0]]
        raise ValueError(
            f"W[{i}, {j}] * beta / weight = {omega[bad[0]]:.3g} overflows "
            f"{np.dtype(_dtype()).name}: rescale W or beta / weight"
        )
    return LaplacianPrecision(
        members.astype(np.int32), omega.astype(_dtype()), np.full(n, diag, _dtype()), n
    )


def membership_precision(
    entities, groups, n, beta=1.0, iota=1.0, weight=1.0, normalize: bool = False
):
    """The regularized Laplacian prior's precision for the bipartite projection of a membership
    relation: ``entities: (k,)`` in ``[0, n)`` and ``groups: (k,)`` (any integers or ids) list
    which entity belongs to which group (a repeated membership counts once); ``W_ij`` is the
    number of groups that ``i`` and ``j`` share. Groups of one member add nothing and are left
    out.

    With ``normalize``, each group's weight is divided by its size, ``omega_g = (beta / weight) /
    s_g``: the hypergraph Laplacian (Zhou, Huang & Schölkopf 2006, unnormalized form), in which
    every group smooths with the same strength whatever its size. Without it a group of ``s``
    members pulls its members together with strength ``s``, so a genre of 5,000 movies makes
    ``Q``'s condition number about ``5,000 iota^2`` (and CG as slow); with it the condition
    number is at most ``1 + iota^2 (groups per entity)``."""
    n = check_int(n, "n", low=1)
    entities = check_entity_indices(entities, n, "entities")
    groups = check_group_ids(groups, len(entities), "groups")
    normalize = check_bool(normalize, "normalize")
    scale, diag = _scale(beta, iota, weight)
    _, gid = np.unique(groups, return_inverse=True)
    pairs = np.unique(np.stack([entities, gid.ravel()], 1), axis=0)
    sizes = np.bincount(pairs[:, 1], minlength=gid.max() + 1 if len(gid) else 0)
    pairs = pairs[sizes[pairs[:, 1]] > 1]
    _, pairs[:, 1] = np.unique(pairs[:, 1], return_inverse=True)
    sizes = np.bincount(pairs[:, 1]) if len(pairs) else np.zeros(0)
    omega = scale / sizes if normalize else np.full(len(sizes), scale)
    return LaplacianPrecision(
        pairs.astype(np.int32), omega.astype(_dtype()), np.full(n, diag, _dtype()), n
    )


def diagonal_precision(variances) -> LaplacianPrecision:
    """``Q = diag(1 / variances)``: independent entity effects (or a low-rank kernel's residual
    variances); ``variances: (n,)``, reals > 0 whose reciprocals are finite normal numbers of the
    working dtype (``data.checks.check_variances``: ``[5.6e-309, 4.5e+307]`` in float64)."""
    variances = check_variances(variances, "variances", _dtype())
    n = len(variances)
    return LaplacianPrecision(
        np.zeros((0, 2), np.int32), np.zeros(0, _dtype()), (1.0 / variances).astype(_dtype()), n
    )


def residual_precision(variances) -> LaplacianPrecision:
    """``diagonal_precision`` of a low-rank kernel's residual variances (plus any diagonal term),
    each raised to ``1e-12`` of the largest (of 1, at least): a pivot's exactly zero residual
    gets a variance far below the rest, not ``1 / 0``."""
    variances = np.asarray(variances, float)
    return diagonal_precision(np.maximum(variances, 1e-12 * max(1.0, float(variances.max()))))
