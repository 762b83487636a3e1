"""The XPGP prior (Kersting & Xu 2009, Eq. 4-5 and Sec. 7): attributes plus relations.

The latent preference degree of entity ``i`` is a weighted sum of an attribute part and one part
per relation type (and, optionally, an independent per-entity effect),

    xi_i = w_1 f_i + sum_r w_r g_i^r (+ e_i),   f ~ GP(0, K_a),  g^r ~ GP(0, K_r),  e ~ N(0, s^2 I),

and the pair likelihood ``Phi((xi_i - xi_j) / (sqrt(2) sigma))`` is absorbed by the rescaling
``xi_hat = xi / (sqrt(2) sigma)`` (Eq. 4), whose prior is

    xi_hat ~ N(0, K),   K = (w_1^2 K_a + sum_r w_r^2 K_r + s^2 I) / (2 sigma^2)          (Eq. 5)

with likelihood ``Phi(xi_hat_i - xi_hat_j)``. Every downstream module works with ``K``.

Identifiability: only the products of scales enter ``K``. ``w_1``, ``kappa`` (the RBF amplitude)
and ``sigma`` are confounded (only ``w_1 kappa / sigma`` is identified), as are ``w_r``, ``sigma``
and the regularized Laplacian's ``beta`` (only ``w_r^2 / (beta sigma^2)``). The lengthscale
(``rho`` or ARD lengthscales), ``iota`` and the diffusion rate are identified. Fitting should hold
the confounded ones fixed (the defaults ``sigma = 1/sqrt(2)``, ``kappa = 1``, ``beta = 1`` make
``2 sigma^2 = 1``) and learn the weights.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import jax.scipy.linalg as jsl
import numpy as np

from ..data.checks import check_margin
from .attributes import Independent
from .base import Kernel
from .params import (
    Positive,
    Real,
    check_hyperparameters,
    map_params,
    param,
    pytree_dataclass,
)

__all__ = [
    "FROZEN_BY_DEFAULT",
    "XPGP",
    "ComponentPosterior",
    "check_sigma",
    "component_posterior",
    "default_trainable",
    "mask_covariance",
    "sigma_range",
    "start_thresholds",
    "with_anchor",
]

#: (class name, field) of the hyperparameters held fixed by default when fitting: the confounded
#: scales (module docstring, identifiability).
FROZEN_BY_DEFAULT = frozenset(
    {("XPGP", "sigma"), ("RBF", "kappa"), ("ARD", "kappa"), ("RegularizedLaplacian", "beta")}
)


def default_trainable(prior):
    """A pytree of bools like ``prior``: False for the confounded scales (``FROZEN_BY_DEFAULT``),
    True for every other hyperparameter (mixing weights, lengthscales, ``iota``, diffusion
    rates, the entity effect's scale)."""
    return map_params(
        prior, lambda owner, name, _c, _v: (type(owner).__name__, name) not in FROZEN_BY_DEFAULT
    )


def mask_covariance(K: jax.Array, mask: jax.Array | None) -> jax.Array:
    """Decouple padded entities: zero their rows and columns and put 1 on their diagonal.

    ``K: (n, n)``, ``mask: (n,)`` bool (True = real entity). A padded entity then has an
    independent standard-normal prior and, touched by no pair, does not change any real entity's
    posterior.
    """
    if mask is None:
        return K
    keep = mask[:, None] & mask[None, :]
    return jnp.where(keep, K, 0.0) + jnp.diag(jnp.where(mask, 0.0, 1.0))


def sigma_range(dtype=None) -> tuple[float, float]:
    """``(low, high)``, the ``XPGP.sigma`` that ``dtype`` (default: the working dtype) holds:
    ``sigma^2`` and ``K``'s scale ``1 / (2 sigma^2)`` both finite normal numbers, so ``low =
    sqrt(tiny)``, ``high = sqrt(1 / (2 tiny))``: ``[1.5e-154, 4.7e+153]`` in float64, ``[1.1e-19,
    6.5e+18]`` in float32. Beyond, ``K`` is ``inf`` or 0 whatever the other scales."""
    info = np.finfo(jnp.result_type(float) if dtype is None else dtype)
    return float(np.sqrt(info.tiny)), float(np.sqrt(1.0 / (2.0 * info.tiny)))


def check_sigma(sigma, name: str = "XPGP.sigma", dtype=None) -> None:
    """``ValueError`` unless every entry of a concrete ``sigma`` (scalar, or ``(B,)`` for a
    prior per query) is a real number (not a bool) in ``sigma_range(dtype)``: ``sigma^2`` and
    ``1 / (2 sigma^2)`` computed in NumPy floats (Python's would raise ``ZeroDivisionError`` or
    ``OverflowError``) and compared with ``dtype``'s normal range. Traced values are not
    checked."""
    if isinstance(sigma, jax.core.Tracer):
        return
    if sigma is None:
        raise ValueError(f"{name} is None: give it a value")
    info = np.finfo(jnp.result_type(float) if dtype is None else dtype)
    try:
        raw = np.asarray(sigma)
        arr = raw.astype(np.float64) if raw.dtype.kind in "iuf" else None
    except (TypeError, ValueError, OverflowError):  # ragged, or an int beyond float64
        arr = None
    if arr is None:  # bool (True is not a scale), str, None, objects
        raise ValueError(f"{name} must be a real number > 0, got {sigma!r}")
    with np.errstate(over="ignore", under="ignore", divide="ignore"):
        square = arr**2
        scale = 1.0 / (2.0 * square)
    ok = (arr > 0) & (square >= info.tiny) & (square <= info.max)
    ok &= (scale >= info.tiny) & (scale <= info.max)
    if not np.all(ok):
        index = tuple(int(i) for i in np.argwhere(~ok)[0]) if arr.ndim else ()
        label = f"{name}[{', '.join(map(str, index))}]" if index else name
        low, high = sigma_range(info.dtype)
        raise ValueError(
            f"{label} = {arr[index]:g} is outside [{low:.2g}, {high:.2g}], where sigma^2 and "
            f"1 / (2 sigma^2) are finite normal {info.dtype.name} numbers: rescale the prior "
            "(only the weights over sigma are identified)"
        )


def start_thresholds(n_grades: int) -> dict:
    """``XPGP``'s threshold fields for ``n_grades`` grades (K >= 2), evenly from -1 to 1: a
    start for learning (``XPGP(..., **start_thresholds(3))``)."""
    if n_grades < 2:
        raise ValueError(f"the ordinal model needs at least 2 grades, got {n_grades}")
    if n_grades == 2:
        return {"threshold": 0.0}
    return {"threshold": -1.0, "threshold_gaps": np.full(n_grades - 2, 2.0 / (n_grades - 2))}


def with_anchor(K: jax.Array, anchor: jax.Array | None) -> jax.Array:
    """``K`` with the anchor entity's variance set to ``eps^2 max(1, max_i K_ii)`` (``anchor:
    (n,)`` bool, one True, an entity already decoupled by ``mask_covariance``), or ``K``.

    The anchor's value is 0 (the ordinal model's grades are pairs ``(i, anchor)``); a variance
    of ``eps^2`` of the prior's scale keeps ``K``'s Cholesky factorisation defined and moves
    every other entity's posterior by ``O(eps^2)`` relative, below round-off.
    """
    if anchor is None:
        return K
    eps = jnp.finfo(K.dtype).eps
    tiny = eps**2 * jnp.maximum(1.0, jnp.max(jnp.diagonal(K)))
    eye = jnp.eye(K.shape[-1], dtype=bool)
    return jnp.where(eye & anchor[:, None], tiny, K)


@pytree_dataclass
class XPGP:
    """The combined prior of Eq. 5.

    Attributes:
        attribute: kernel on attributes ``X`` (e.g. ``RBF``),
            or ``None`` for a relations-only model.
        relations: one graph kernel per relation type, each called on its own graph data (a
            ``LaplacianSpectrum`` for spectral kernels; an ``(n, n)``
            matrix for ``Fixed``, e.g. a hidden-common-cause one).
        weights: ``(1 + R,)`` mixing weights ``[w_1, w_2, ...]`` (attribute first; ignored for a
            missing attribute kernel); ``None`` means all ones.
        sigma: the pair noise scale of Eq. 4.
        entity: optional per-entity random effect ``s^2 I`` (its own scale, no weight).
        margin: the tie margin ``eps`` of the likelihood, in units of ``xi_hat`` (a judge
            calls a tie when ``|xi_hat_i - xi_hat_j + noise| <= eps``:
            ``bayesrank.likelihoods``), learned with the other hyperparameters; ``None``: no
            ties (the probit pair model). Needed for problems with ties; not part of ``K``.
        threshold, threshold_gaps: the ordinal model's thresholds on ``xi_hat`` for graded
            entities (Chu & Ghahramani 2005; ``bayesrank.likelihoods.grade_outcomes``): the
            lowest, ``b_0`` (any real), and the ``K - 2`` positive gaps to the next
            ones (``None``: two grades), so ``b_0 < b_1 < ... < b_{K-2}`` for ``K`` grades
            (``thresholds``). ``None``: no grades. Learned with the other hyperparameters.
    """

    attribute: Kernel | None = None
    relations: tuple = ()
    weights: jnp.ndarray = param(Positive(), default=None)
    sigma: jnp.ndarray = param(Positive(), default=0.5**0.5)
    entity: Independent | None = None
    margin: jnp.ndarray = param(Positive(), default=None)
    threshold: jnp.ndarray = param(Real(), default=None)
    threshold_gaps: jnp.ndarray = param(Positive(), default=None)

    @property
    def thresholds(self):
        """``(K - 1,)`` increasing: ``b_0`` and ``b_0`` plus the gaps' running sums (``(B, K - 1)``
        for a prior per query); ``None`` without a ``threshold``."""
        if self.threshold is None:
            return None
        first = jnp.asarray(self.threshold)[..., None]  # (..., 1): a fit per query has (B,)
        if self.threshold_gaps is None:
            return first
        gaps = jnp.asarray(self.threshold_gaps)
        return jnp.concatenate([first, first + jnp.cumsum(gaps, axis=-1)], axis=-1)

    @property
    def n_grades(self) -> int:
        """``K``, the number of grades the thresholds define (0 without thresholds)."""
        if self.threshold is None:
            return 0
        return 2 + (0 if self.threshold_gaps is None else int(jnp.shape(self.threshold_gaps)[-1]))

    def prepare(self, relations: Sequence[Any]) -> tuple:
        """Host-side, once per problem: each relation kernel's graph data from its adjacency.

        ``relations``: one ``W: (n, n)`` per relation kernel (validated). Returns the ``graphs``
        argument of ``components`` and ``covariance``.
        """
        check_graph_count(self, relations)
        return tuple(k.prepare(W) for k, W in zip(self.relations, relations, strict=True))

    def components(
        self, X: jax.Array | None, graphs: Sequence[Any] = (), mask: jax.Array | None = None
    ) -> jax.Array:
        """The scaled parts of ``K``: ``(T, n, n)``, summing to ``K`` on real entities.

        Order: attribute (if any), then relations in order, then the entity effect (if any).
        Rows and columns of padded entities (``mask = False``) are zero.
        """
        check_graph_count(self, graphs)
        n_weights = 1 + len(self.relations)
        weights = jnp.ones(n_weights) if self.weights is None else jnp.asarray(self.weights)
        if weights.shape != (1 + len(self.relations),):
            raise ValueError(
                f"weights must have shape ({1 + len(self.relations)},) = 1 + number of relations, "
                f"got {weights.shape}"
            )
        check_sigma(self.sigma)  # within its range, 1 / (2 sigma^2) neither overflows nor raises
        scale = 1.0 / (2.0 * self.sigma**2)
        parts = []
        if self.attribute is not None:
            if X is None:
                raise ValueError("an attribute kernel needs attributes X")
            parts.append(weights[0] ** 2 * self.attribute(X))
        for w, kernel, graph in zip(weights[1:], self.relations, graphs, strict=True):
            parts.append(w**2 * kernel(graph))
        if self.entity is not None:
            if parts:
                n = parts[0].shape[0]
            elif X is not None or mask is not None:
                n = (X if X is not None else mask).shape[0]
            else:
                raise ValueError(
                    "an entity-only prior needs the number of entities: pass X or mask "
                    "(XPGPModel and the fitting functions take it from the problem)"
                )
            parts.append(self.entity(jnp.arange(n)))
        if not parts:
            raise ValueError("the prior has no component (no attribute, relation or entity kernel)")
        stacked = scale * jnp.stack(parts)
        if mask is not None:
            stacked = jnp.where(mask[None, :, None] & mask[None, None, :], stacked, 0.0)
        return stacked

    def covariance(
        self, X: jax.Array | None, graphs: Sequence[Any] = (), mask: jax.Array | None = None
    ) -> jax.Array:
        """``K: (n, n)`` of Eq. 5, with padded entities decoupled (``mask_covariance``)."""
        return mask_covariance(self.components(X, graphs, mask).sum(axis=0), mask)


class ComponentPosterior(NamedTuple):
    """Posterior of each additive part ``c`` of ``xi_hat``: ``mean: (T, n)``, ``cov: (T, n, n)``."""

    mean: jax.Array
    cov: jax.Array


def component_posterior(
    components: jax.Array, mean: jax.Array, cov: jax.Array, jitter: float = 1e-10
) -> ComponentPosterior:
    """Split a Gaussian posterior of ``xi_hat = sum_c h_c`` into its parts.

    With independent priors ``h_c ~ N(0, K_c)`` and ``K = sum_c K_c``, ``h_c`` and ``xi_hat`` are
    jointly Gaussian with ``Cov(h_c, xi_hat) = K_c``, so given ``q(xi_hat) = N(mu, Sigma)`` (and
    the data acting on ``xi_hat`` only)

        E[h_c] = K_c K^-1 mu,
        Cov[h_c] = K_c - K_c K^-1 K_c + K_c K^-1 Sigma K^-1 K_c.

    The means add up to ``mu``. With ``mu = 0``, ``Sigma = K`` this is the prior split.

    Args:
        components: ``(T, n, n)`` the ``K_c`` (e.g. ``XPGP.components``).
        mean: ``(n,)`` posterior mean ``mu``; ``cov``: ``(n, n)`` posterior covariance ``Sigma``.
        jitter: added to ``K``'s diagonal, relative to its mean diagonal, before the Cholesky.
    """
    K = components.sum(axis=0)
    n = K.shape[0]
    K = K + jitter * jnp.mean(jnp.diag(K)) * jnp.eye(n, dtype=K.dtype)
    chol = jsl.cho_factor(K, lower=True)
    A = jax.vmap(lambda Kc: jsl.cho_solve(chol, Kc).T)(components)  # A_c = K_c K^-1
    means = A @ mean
    covs = components - A @ components + A @ cov @ jnp.swapaxes(A, -1, -2)
    return ComponentPosterior(means, 0.5 * (covs + jnp.swapaxes(covs, -1, -2)))


def check_graph_count(prior: XPGP, graphs: Sequence[Any]) -> None:
    """``ValueError`` unless there is one graph (adjacency, or its prepared data) per relation
    kernel of ``prior``: ``1 relation kernels but 0 graphs``."""
    if len(graphs) != len(prior.relations):
        raise ValueError(f"{len(prior.relations)} relation kernels but {len(graphs)} graphs")


def check_prior(prior, n_features: int | None = None, where: str = "prior") -> XPGP:
    """``ValueError`` naming what is wrong with an XPGP prior's structure or values: not an
    ``XPGP``; an attribute that is not a kernel; relations not a tuple of relation kernels
    (objects with ``prepare``); an entity effect other than ``Independent``; a hyperparameter
    left ``None``, of the wrong shape (``weights: (1 + R,)``; ARD lengthscales one per feature,
    ``n_features``) or outside its domain (``check_hyperparameters``); a ``sigma`` outside
    ``sigma_range()``, which every engine needs (``check_sigma``)."""
    if not isinstance(prior, XPGP):
        raise ValueError(f"{where} must be an XPGP prior, got {type(prior).__name__}")
    if prior.attribute is not None and not isinstance(prior.attribute, Kernel):
        raise ValueError(
            f"{where}.attribute must be a kernel (e.g. RBF()) or None, got {prior.attribute!r}"
        )
    if not isinstance(prior.relations, tuple | list):
        raise ValueError(
            f"{where}.relations must be a tuple of relation kernels, e.g. "
            f"(RegularizedLaplacian(),), got {type(prior.relations).__name__}"
        )
    for r, kernel in enumerate(prior.relations):
        if not hasattr(kernel, "prepare"):
            raise ValueError(
                f"{where}.relations[{r}] must be a relation kernel (with prepare), got {kernel!r}"
            )
    if prior.entity is not None and not isinstance(prior.entity, Independent):
        raise ValueError(
            f"{where}.entity must be Independent() or None, got {type(prior.entity).__name__}"
        )

    for owner in (prior.attribute, *prior.relations, prior.entity):
        if dataclasses.is_dataclass(owner):
            for f in dataclasses.fields(owner):
                if f.metadata.get("constraint") is not None and getattr(owner, f.name) is None:
                    raise ValueError(f"{type(owner).__name__}.{f.name} is None: give it a value")
    check_hyperparameters(prior)
    check_sigma(prior.sigma)
    R = len(prior.relations)
    if prior.weights is not None and jnp.shape(prior.weights) != (1 + R,):
        raise ValueError(
            f"XPGP.weights must have shape ({1 + R},) = 1 + number of relations, got "
            f"{jnp.shape(prior.weights)}"
        )
    if prior.margin is not None and jnp.ndim(prior.margin) != 0:
        raise ValueError(f"XPGP.margin must be a scalar, got shape {jnp.shape(prior.margin)}")
    if prior.margin is not None and not isinstance(prior.margin, jax.core.Tracer):
        check_margin(prior.margin, "XPGP.margin", jnp.result_type(float))
    if prior.threshold is not None and jnp.ndim(prior.threshold) != 0:
        raise ValueError(
            f"XPGP.threshold must be a scalar (the lowest threshold), got shape "
            f"{jnp.shape(prior.threshold)}"
        )
    if prior.threshold_gaps is not None:
        if prior.threshold is None:
            raise ValueError("XPGP.threshold_gaps without a threshold: give threshold (b_0) too")
        if jnp.ndim(prior.threshold_gaps) != 1:
            raise ValueError(
                "XPGP.threshold_gaps must be (K - 2,): the gaps between successive thresholds, "
                f"got shape {jnp.shape(prior.threshold_gaps)}"
            )
    ls = getattr(prior.attribute, "lengthscales", None)
    if ls is not None and jnp.ndim(ls) > 1:
        raise ValueError(f"ARD.lengthscales must be a scalar or (d,), got shape {jnp.shape(ls)}")
    if ls is not None and n_features is not None and jnp.size(ls) not in (1, n_features):
        raise ValueError(
            f"ARD.lengthscales has {jnp.size(ls)} entries but X has {n_features} features"
        )
    for name in ("kappa", "rho", "scale", "offset"):
        value = getattr(prior.attribute, name, None)
        if value is not None and jnp.ndim(value) != 0:
            raise ValueError(
                f"{type(prior.attribute).__name__}.{name} must be a scalar, got shape "
                f"{jnp.shape(value)}"
            )
    return prior
