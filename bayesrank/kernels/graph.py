"""Graph kernels on a weighted undirected relation graph ``W: (n, n)``.

*What* is computed:

=============================  =======================================  =========================
kernel                         ``K_r``                                  parameters
=============================  =======================================  =========================
``RegularizedLaplacian``       ``[beta (L + I / iota^2)]^-1``  (Eq. 2)  beta, iota
``Diffusion``                  ``exp(-beta L)``                         beta
hidden common cause, edges     ``I_E + D^-1/2 W D^-1/2`` (see below)    none (scale in ``xpgp``)
hidden common cause, cliques   ``C_ij / sqrt(C_ii C_jj)`` (see below)   none (scale in ``xpgp``)
=============================  =======================================  =========================

``L`` is the combinatorial Laplacian ``Delta = D - W`` (``D = diag(sum_j W_ij)``) or, for the
normalized variants, Chung's normalized Laplacian ``I - D^-1/2 W D^-1/2`` (an isolated node gets
a zero row, so both Laplacians leave it decoupled with ``K_ii = iota^2 / beta`` or ``1``).

*How*: the Laplacian does not depend on any hyperparameter, so its eigendecomposition
``L = V diag(lam) V^T`` is computed once (``laplacian_spectrum``), and a spectral kernel is
``V diag(r(lam)) V^T`` with ``r(lam) = 1 / (beta (lam + iota^-2))`` or ``exp(-beta lam)`` (Smola &
Kondor, COLT 2003). Gradients with respect to ``beta`` and ``iota`` flow through ``r`` only, never
through ``eigh``, so repeated eigenvalues (isolated nodes, several components) do no harm.

Note that in Eq. 2 ``beta`` is a pure scale (``K_r = (L + I/iota^2)^-1 / beta``): together with the
mixing weight ``w_r`` of ``xpgp`` only ``w_r^2 / beta`` is identifiable.

**Hidden common causes** (Silva, Chu & Ghahramani, "Hidden common cause relations in relational
learning", NIPS 2007; the second graph kernel of Kersting & Xu, Sec. 6). A relation between two
entities is modelled as a latent Gaussian cause shared by both, ``g_i = sum_{causes c of i} a_ic
z_c`` with independent ``z_c ~ N(0, 1)``, so ``K_r = A A^T`` is positive semi-definite by
construction and, with one cause per edge, zero for unrelated pairs (marginal independence, the
bi-directed graph reading of a relation). Two constructions, normalised to unit variance on every
related entity:

- ``"edge"``, one cause per edge, ``a_ic = sqrt(W_ij / d_i)`` for edge ``c = {i, j}``:
  ``K_ij = W_ij / sqrt(d_i d_j)`` off the diagonal, ``K_ii = 1`` (``0`` for isolated entities). For
  unweighted graphs this is ``1 / sqrt(#neigh(i) #neigh(j))``. It is singular wherever a
  connected component is bipartite (a path, a star, an even cycle: smallest eigenvalue exactly
  0); a valid covariance, made positive definite by the other parts of the prior.
- ``"clique"``, one cause per maximal clique of the graph made chordal (triangulated):
  ``K_ij = c_ij / sqrt(c_i c_j)`` with ``c_ij`` the number of cliques holding both ``i`` and ``j``.
  The triangulation adds edges, and an added edge gets a non-zero covariance: on the 4-cycle
  0-1-2-3 the chord 1-3 gives ``K_13 = 1``, two unrelated entities perfectly correlated.

Provenance, stated honestly. The paper itself could not be checked, so no section or equation
number of it is cited here. Stored copies of its full text exist,

http://users.umiacs.umd.edu/~hal/WhatToSee/tmp/books.nips.cc___nips20.html/251.txt
https://proceedings.neurips.cc/paper/2007/file/912d2b1c7b2826caf99687388d2e8f7c-Metadata.json

(the latter's ``full_text`` field), but the search tool returns only the opening ~2,000
characters of a stored page: title, abstract and the start of Sec. 1 ("Contribution").
A third search (2026-11-25, about fifteen queries on the relational / mixed-graph Gaussian
process, the covariance of the hidden causes, cliques and triangulation, positive definiteness
and the experiments, in the pages, docs and code corpora) reached no other passage. Both formulas
are therefore those recorded from Silva's talk on the paper (public notes, July 2008): the model
is a dependent probit whose error is ``eps_i* + zeta_i``, ``eps*`` independent and ``zeta``
correlated along the relations; "approach 1", cliques of the triangulated graph,
``Cov(zeta_i, zeta_j) = #cliques(i, j) / sqrt(#cliques(i) #cliques(j))`` (with a "blow up" caveat
for the triangulation); "approach 2", a hidden parent for each pair of (related) nodes,
``1 / sqrt(#neigh(i) #neigh(j))`` (with a "pulverization" caveat). What follows compares the code
with those formulas; what the paper adds (a scale or diagonal term on ``Sigma_zeta``, which
construction its experiments used) is unverified.

Departures from the recorded formulas, and whether they change results:

1. Weights. The formulas count neighbours and cliques; the ``"edge"`` version here uses the edge
   weights (``W_ij / sqrt(d_i d_j)``, our generalisation, invariant to rescaling ``W``). On a 0/1
   graph the two agree exactly. On a weighted graph they differ, and the difference is decisive
   on the graph Kersting & Xu feed this kernel in their OHSUMED experiment (Sec. 6): a weighted
   *complete* graph of cosine similarities. There the unweighted formula gives
   ``(1 - 1/(n-1)) I + 11^T / (n-1)``, and the clique construction (one clique) gives ``11^T``;
   since the preference likelihood sees only differences ``xi_i - xi_j``, the ``11^T`` part
   cancels, so both carry no relational information (an independent per-entity effect, resp.
   nothing). Only a weighted version uses the similarities; Kersting & Xu do not say which
   construction they used or how weights entered. ``"clique"`` ignores weights, as the formula
   does.
2. Triangulation. The talk says "triangulate and extract cliques" without naming a
   triangulation; here it is networkx's ``complete_to_chordal_graph`` (MCS-M, a minimal, not
   necessarily minimum, fill-in). On a chordal graph there is nothing to choose and the result
   is exact; on a non-chordal one another triangulation gives another matrix, and so can merely
   relabelling the nodes (on a 6-cycle most relabellings give a different matrix once mapped
   back).
3. Unrelated entities. The formulas are undefined for an entity with no neighbour (0/0); here
   it gets a zero row and column (no relational cause: ``g_i = 0``, in both constructions;
   singleton cliques are not counted). Its prior variance then comes from the other parts of
   the prior only.
4. Positive definiteness and scale. ``A A^T`` is only semi-definite (singular cases above). In
   the talk's model ``Sigma_zeta`` is added to the attribute GP's covariance and to the
   independent probit noise ``eps*``, which makes the sum definite; here likewise the matrix is
   scaled by the relation's mixing weight ``w_r^2`` and added to the attribute kernel and the
   optional per-entity effect ``s^2 I`` (``xpgp``, Eq. 5). No
   regularisation is added to ``K_r`` itself, and it has no hyperparameter of its own: its unit
   diagonal makes ``w_r^2`` the relational variance of a related entity.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from ..data.checks import check_adjacency, check_covariance
from . import spectra
from .params import Positive, param, pytree_dataclass, static

__all__ = [
    "Diffusion",
    "Fixed",
    "HiddenCommonCause",
    "LaplacianSpectrum",
    "RegularizedLaplacian",
    "hidden_common_cause",
    "laplacian",
    "laplacian_spectrum",
]


def laplacian(W: jax.Array, normalized: bool = False) -> jax.Array:
    """Combinatorial ``D - W`` or (Chung) normalized ``I - D^-1/2 W D^-1/2`` Laplacian, ``(n, n)``.

    Isolated nodes (degree 0) get a zero row and column in both.
    """
    W = jnp.asarray(W)
    degree = W.sum(axis=1)
    if not normalized:
        return jnp.diag(degree) - W
    inv_sqrt = jnp.where(degree > 0, 1.0 / jnp.sqrt(jnp.where(degree > 0, degree, 1.0)), 0.0)
    eye = jnp.diag((degree > 0).astype(W.dtype))
    return eye - inv_sqrt[:, None] * W * inv_sqrt[None, :]


class LaplacianSpectrum(NamedTuple):
    """Eigendecomposition ``L = evecs @ diag(evals) @ evecs.T`` of a graph Laplacian.

    ``evals: (n,)`` (clipped at 0: a Laplacian is PSD), ``evecs: (n, n)``.
    """

    evals: jax.Array
    evecs: jax.Array


def laplacian_spectrum(W, normalized: bool = False, *, validate: bool = True) -> LaplacianSpectrum:
    """Validate ``W`` (square, symmetric, finite, non-negative) and diagonalise its Laplacian.

    Call it once per graph, outside any optimisation loop (a validated graph's spectrum is kept:
    a later call on an equal ``W`` returns the same read-only arrays, ``kernels.spectra``).
    With ``validate=False`` it can be traced (under ``jit`` / ``vmap``) and is not kept; bad ``W``
    then is the caller's responsibility.
    """
    # eigh of W / max(W), eigenvalues scaled back: eigh squares its input's entries, so weights
    # beyond ~1e154 overflowed inside it (a zero kernel, no error), and a float64 weight beyond
    # float32's range became inf in float32; the normalized Laplacian does not depend on scale
    if validate:  # on the host, kept for the next call on an equal graph (``spectra``)
        dtype = np.dtype(jnp.result_type(float))
        if isinstance(W, np.ndarray) and W.dtype.kind in "biuf":
            # keyed by the input itself: an equal input passed the same check before
            raw = W
            return spectra.spectrum(
                raw, normalized, dtype, lambda: _host_spectrum(check_adjacency(raw), normalized)
            )
        W = check_adjacency(W)
        return spectra.spectrum(W, normalized, dtype, lambda: _host_spectrum(W, normalized))
    W = jnp.asarray(W)
    top = jnp.max(W, initial=0.0)
    scale = jnp.where(top > 0, top, 1.0)
    evals, evecs = jnp.linalg.eigh(laplacian(W / scale, normalized))
    # eigenvalues within round-off of 0 are 0 (a component's constant vector): scaled back by
    # a large weight, their noise would otherwise turn into a large eigenvalue
    noise = W.shape[0] * jnp.finfo(evals.dtype).eps * jnp.max(jnp.abs(evals), initial=0.0)
    evals = jnp.where(evals <= noise, 0.0, evals)
    if not normalized:  # beyond the dtype's range (float32): its largest number, not inf
        big = jnp.finfo(evals.dtype).max
        positive = evals > 0
        over = positive & (jnp.log(jnp.where(positive, evals, 1.0)) + jnp.log(scale) > jnp.log(big))
        evals = jnp.where(over, big, evals * jnp.minimum(scale, big))
    return LaplacianSpectrum(evals, evecs)


def _host_spectrum(W: np.ndarray, normalized: bool) -> LaplacianSpectrum:
    """``laplacian_spectrum`` of a checked ``W`` on the host, in float64 (NumPy's ``eigh``:
    no program compiled per graph size), cast to the working dtype at the end."""
    top = float(W.max()) if W.size else 0.0
    scale = top if top > 0 else 1.0
    W = W / scale
    degree = W.sum(axis=1)
    if normalized:
        inv_sqrt = np.where(degree > 0, 1.0 / np.sqrt(np.where(degree > 0, degree, 1.0)), 0.0)
        L = np.diag((degree > 0).astype(W.dtype)) - inv_sqrt[:, None] * W * inv_sqrt[None, :]
    else:
        L = np.diag(degree) - W
    evals, evecs = np.linalg.eigh(L)
    noise = W.shape[0] * np.finfo(np.float64).eps * np.max(np.abs(evals), initial=0.0)
    evals = np.where(evals <= noise, 0.0, evals)
    dtype = np.dtype(jnp.result_type(float))
    if not normalized:  # beyond the working dtype's range (float32): its largest number, not inf
        big = float(np.finfo(dtype).max)
        positive = evals > 0
        over = positive & (np.log(np.where(positive, evals, 1.0)) + math.log(scale) > math.log(big))
        evals = np.where(over, big, evals * min(scale, big))
    return LaplacianSpectrum(evals.astype(dtype), evecs.astype(dtype))


def _from_spectrum(spectrum: LaplacianSpectrum, r: jax.Array) -> jax.Array:
    V = spectrum.evecs
    K = (V * r[None, :]) @ V.T
    return 0.5 * (K + K.T)


class _SpectralKernel:
    """A kernel ``V diag(r(lam)) V^T`` of a Laplacian spectrum; ``prepare(W)`` diagonalises once."""

    def prepare(self, W) -> LaplacianSpectrum:
        """The graph data this kernel is called on: the spectrum of ``W``'s Laplacian."""
        return laplacian_spectrum(W, normalized=self.normalized)


@pytree_dataclass
class RegularizedLaplacian(_SpectralKernel):
    """Paper Eq. 2: ``K_r = [beta (L + I / iota^2)]^-1``, from a ``LaplacianSpectrum``.

    ``normalized=True`` uses Chung's normalized Laplacian in ``prepare``.
    """

    beta: jnp.ndarray = param(Positive(), default=1.0)
    iota: jnp.ndarray = param(Positive(1e-6), default=1.0)
    normalized: bool = static(default=False)

    def __call__(self, spectrum: LaplacianSpectrum) -> jax.Array:
        return _from_spectrum(spectrum, 1.0 / (self.beta * (spectrum.evals + self.iota**-2)))


@pytree_dataclass
class Diffusion(_SpectralKernel):
    """Diffusion kernel ``K_r = exp(-beta L)`` (Kondor & Lafferty 2002)."""

    beta: jnp.ndarray = param(Positive(), default=1.0)
    normalized: bool = static(default=False)

    def __call__(self, spectrum: LaplacianSpectrum) -> jax.Array:
        return _from_spectrum(spectrum, jnp.exp(-self.beta * spectrum.evals))


@pytree_dataclass
class Fixed:
    """A relation covariance given as a PSD matrix ``M`` (``prepare`` takes ``M`` itself)."""

    def prepare(self, matrix) -> np.ndarray:
        """``matrix`` checked as a covariance (``check_covariance``:
        square, finite, symmetric, non-negative diagonal, PSD 2x2 minors), as float64."""
        matrix = np.asarray(matrix)
        if matrix.ndim != 2:
            raise ValueError(f"the Fixed kernel's matrix must be (n, n), got shape {matrix.shape}")
        if matrix.dtype.kind in "iub":
            matrix = matrix.astype(np.float64)
        try:
            return np.asarray(check_covariance(matrix, name="M"), np.float64)
        except ValueError as error:
            raise ValueError(f"the Fixed kernel's matrix M: {error}") from None

    def __call__(self, matrix: jax.Array) -> jax.Array:
        return jnp.asarray(matrix)


@pytree_dataclass
class HiddenCommonCause:
    """Silva et al.'s kernel: ``prepare(W)`` builds ``hidden_common_cause`` (no parameters).

    ``construction="edge"`` is the talk's "hidden parent for each pair" formula generalised to
    weights, ``"clique"`` its clique formula; see the module docstring for provenance (the NIPS
    paper's text could not be checked) and the departures.
    """

    construction: str = static(default="edge")

    def prepare(self, W) -> np.ndarray:
        return hidden_common_cause(W, self.construction)

    def __call__(self, matrix: jax.Array) -> jax.Array:
        return jnp.asarray(matrix)


def _maximal_cliques_of_chordal_completion(W: np.ndarray) -> list[frozenset[int]]:
    import networkx as nx

    graph = nx.Graph()
    graph.add_nodes_from(range(W.shape[0]))
    graph.add_edges_from(zip(*np.nonzero(np.triu(W, 1)), strict=True))
    chordal, _ = nx.complete_to_chordal_graph(graph)
    return [frozenset(int(v) for v in c) for c in nx.chordal_graph_cliques(chordal) if len(c) > 1]


def hidden_common_cause(W, construction: str = "edge") -> np.ndarray:
    """Silva et al.'s hidden-common-cause covariance of a relation graph (module docstring:
    the formulas are those of Silva's talk on the NIPS 2007 paper; weights, the triangulation and
    isolated entities are this module's choices).

    Args:
        W: ``(n, n)`` weighted adjacency (validated: square, symmetric, finite, non-negative).
        construction: ``"edge"`` (one latent cause per edge) or ``"clique"`` (one per maximal
            clique of the chordal completion; edge weights are ignored).

    Returns:
        ``(n, n)`` float64 PSD matrix with unit diagonal on related entities and zero rows for
        isolated ones. It has no hyperparameters: its scale is the relation's mixing weight.
    """
    W = check_adjacency(W)
    n = W.shape[0]
    if construction == "edge":
        degree = W.sum(axis=1)
        inv_sqrt = np.where(degree > 0, 1.0 / np.sqrt(np.where(degree > 0, degree, 1.0)), 0.0)
        return np.diag((degree > 0).astype(float)) + inv_sqrt[:, None] * W * inv_sqrt[None, :]
    if construction == "clique":
        cliques = _maximal_cliques_of_chordal_completion(W)
        A = np.zeros((n, len(cliques)))
        for c, members in enumerate(cliques):
            A[list(members), c] = 1.0
        shared = A @ A.T
        count = np.diag(shared)
        inv_sqrt = np.where(count > 0, 1.0 / np.sqrt(np.where(count > 0, count, 1.0)), 0.0)
        return inv_sqrt[:, None] * shared * inv_sqrt[None, :]
    raise ValueError(f"construction must be 'edge' or 'clique', got {construction!r}")
