"""RankSVM (Joachims 2002) on within-query pairs, solved in the primal by Newton's method.

For preference pairs ``(i, j)`` (``i`` preferred to ``j``) with difference vectors
``dx_p = x_i - x_j`` the linear RankSVM solves (the primal of J. Rousu's lecture notes on
preference learning, with F. Pedregosa's pairwise transform; ``C`` multiplies the *sum* over
pairs, as in SVMlight and scikit-learn's ``LinearSVC``, not the mean)::

    J(w) = 1/2 ||w||^2 + C sum_p mask_p l(1 - w . dx_p)

with the squared hinge ``l(r) = max(0, r)^2`` (default, Chapelle & Keerthi's primal Newton
RankSVM) or the hinge ``l(r) = max(0, r)``, which is made Newton-friendly by Chapelle's (2007)
Huber smoothing ``l_h`` with a decreasing ``h`` (continuation down to ``smoothing``; the
objective is then within ``C * m * smoothing / 4`` of the hinge optimum).

The kernel RankSVM uses the representer theorem on *entities*: ``f = K beta`` with
``||f||^2_H = beta' K beta``::

    J(beta) = 1/2 beta' K beta + C sum_p mask_p l(1 - (f_i - f_j)),   f = K beta

and Chapelle's Newton step ``delta = -(I + L K)^{-1} (beta + g)``, where ``g = dLoss/df`` and
``L = C D' diag(mask l'') D`` is the weighted Laplacian of the active pairs; at the solution
``beta = -g``, i.e. ``beta = sum_p alpha_p (e_i - e_j)`` with dual variables ``alpha_p =
C l'(r_p)``. With ``K = X X'`` it gives the linear solution (``w = X' beta``).

Both are two small parameterisations (``_linear_parts``, ``_kernel_parts``) of the one
solver in ``bayesrank.baselines.newton``: damped Newton with Armijo backtracking, the Huber
continuation, and implicit differentiation (gradients in ``X`` / ``K``, ``C`` and the pair
weights). The residual whose norm stops the solve is ``grad J(w)`` (linear) or ``beta + g``
(kernel), relative to its value at 0. ``fit_linear`` and ``fit_kernel`` are pure (never
jitted here: ``jit``, ``vmap`` and ``grad`` them freely; padded pairs get ``pair_mask = False``).

The estimator ``RankSVM`` (``bayesrank.baselines.svm_estimator``) calls these cores on
within-query pairs, padded to bucketed sizes, with the features rescaled by a power of two.
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp

from .._moved import moved
from ..data.checks import options
from . import newton
from ._arrays import as_float, check_columns, pair_weights
from .newton import SolverInfo

__all__ = [
    "KernelSolution",
    "LinearSolution",
    "SolverInfo",
    "default_tol",
    "dual_variables",
    "fit_kernel",
    "fit_linear",
    "kernel_objective",
    "linear_objective",
    "rbf_kernel",
]

LOSSES = ("squared_hinge", "hinge")
KERNELS = ("linear", "rbf")


class LinearSolution(NamedTuple):
    """``w: (d,)`` and ``SolverInfo``."""

    w: jax.Array
    info: SolverInfo


class KernelSolution(NamedTuple):
    """``beta: (n,)`` (scores ``f = K beta``, new points ``k(x, X) beta``) and ``info``."""

    beta: jax.Array
    info: SolverInfo


def default_tol(dtype) -> float:
    """Relative tolerance on the residual: ``1e-9`` in float64, ``1e-4`` in float32."""
    return 1e-9 if jnp.dtype(dtype) == jnp.float64 else 1e-4


def _check_loss(loss):
    options.check_choice(loss, "loss", LOSSES)


def _check_settings(C, loss, tol, max_iter, smoothing, dtype):
    """The solver's options where they are concrete (traced ones cannot be checked): ``C > 0``,
    ``tol`` in ``(0, 1)`` (a relative tolerance of 1 accepts the start), ``max_iter >= 1`` and
    ``smoothing`` in ``(0, 1]`` (the continuation starts at width 1) and a normal number of
    ``dtype`` (``1 / (2 smoothing)`` is the Huber curvature); ``ValueError`` naming the option."""
    _check_loss(loss)
    options.check_int(max_iter, "max_iter", low=1)
    for name, value, high in (("C", C, None), ("tol", tol, 1.0), ("smoothing", smoothing, 1.0)):
        if value is None or isinstance(value, jax.core.Tracer):
            continue
        value = options.check_float(value, name, 0.0, high, low_open=True, high_open=name == "tol")
        if name == "smoothing":
            options.check_representable(value, name, dtype)


def _unless_overflow(M, delta):
    """``delta``, or NaN where the Newton matrix overflowed (a factorisation of ``inf`` entries
    can return a finite, meaningless step); the solver reports NaN steps as non-finite."""
    return jnp.where(jnp.all(jnp.isfinite(M)), delta, jnp.nan)


def _linear_parts(operands, h, *, loss):
    """``x = w: (d,)``; ``F = grad J = lam w - C A' (mask l')``, ``M = lam I + C A' diag(mask l'')
    A`` (Cholesky), with ``A: (m, d)`` the rows ``x_i - x_j``.

    ``operands = (X, pairs, C, mask)`` (``lam = 1``: ``fit_linear``) or ``(X, pairs, C, mask,
    lam)``: the estimator's rescaled problem, whose regulariser weight may be tiny or 0.
    """
    X, pairs, C, mask, *reg = operands
    lam = reg[0] if reg else 1.0  # times 1.0 is exact: fit_linear's arithmetic is unchanged
    A = X[pairs[:, 0]] - X[pairs[:, 1]]

    def value(w):
        loss_value, _, _ = newton.loss_terms(1.0 - A @ w, loss, h)
        return 0.5 * lam * (w @ w) + C * jnp.sum(mask * loss_value)

    def residual(w):
        _, d1, _ = newton.loss_terms(1.0 - A @ w, loss, h)
        return lam * w - C * (A.T @ (mask * d1))

    def step(w):
        _, d1, d2 = newton.loss_terms(1.0 - A @ w, loss, h)
        g = lam * w - C * (A.T @ (mask * d1))
        eye = lam * jnp.eye(w.shape[0], dtype=w.dtype)
        H = eye + C * (A.T @ (A * (mask * d2)[:, None]))
        delta = _unless_overflow(H, -jax.scipy.linalg.cho_solve(jax.scipy.linalg.cho_factor(H), g))
        return delta, g @ delta

    return newton.Parts(value, residual, step)


def _kernel_parts(operands, h, *, loss):
    """``x = beta: (n,)``; ``F = beta + g`` with ``g = dLoss/df = -C D' (mask l')``,
    ``M = I + L K`` (LU); the slope is ``(K F) . delta`` since ``grad J = K F``."""
    K, pairs, C, mask = operands
    n = K.shape[0]
    i, j = pairs[:, 0], pairs[:, 1]

    def residual_r(beta):
        f = K @ beta
        return f, 1.0 - (f[i] - f[j])

    def grad_f(d1):
        v = C * mask * d1
        return jnp.zeros(n, K.dtype).at[j].add(v).at[i].add(-v)

    def value(beta):
        f, r = residual_r(beta)
        loss_value, _, _ = newton.loss_terms(r, loss, h)
        return 0.5 * beta @ f + C * jnp.sum(mask * loss_value)

    def residual(beta):
        _, d1, _ = newton.loss_terms(residual_r(beta)[1], loss, h)
        return beta + grad_f(d1)

    def step(beta):
        _, d1, d2 = newton.loss_terms(residual_r(beta)[1], loss, h)
        F = beta + grad_f(d1)
        c = C * mask * d2
        L = jnp.zeros((n, n), K.dtype).at[i, i].add(c).at[j, j].add(c)
        L = L.at[i, j].add(-c).at[j, i].add(-c)
        M = jnp.eye(n, dtype=K.dtype) + L @ K
        delta = _unless_overflow(M, -jnp.linalg.solve(M, F))
        return delta, (K @ F) @ delta

    return newton.Parts(value, residual, step)


def _operands(M, pairs, C, pair_mask):
    M = as_float(M)
    pairs = jnp.asarray(pairs)
    return (M, pairs, jnp.asarray(C, M.dtype), pair_weights(pairs, pair_mask, M.dtype))


def linear_objective(w, X, pairs, C, pair_mask=None, loss="squared_hinge"):
    """``1/2 ||w||^2 + C sum_p mask_p l(1 - w . (x_i - x_j))`` (the hinge unsmoothed).

    Args:
        w: ``(d,)``; X: ``(n, d)``; pairs: ``(m, 2)`` int, winner first; C: scalar > 0;
        pair_mask: ``(m,)`` bool or weights, None = all pairs; loss: ``"squared_hinge"`` or
        ``"hinge"``.
    """
    _check_loss(loss)
    return _linear_parts(_operands(X, pairs, C, pair_mask), None, loss=loss).value(w)


def kernel_objective(beta, K, pairs, C, pair_mask=None, loss="squared_hinge"):
    """``1/2 beta' K beta + C sum_p mask_p l(1 - (f_i - f_j))`` with ``f = K beta``."""
    _check_loss(loss)
    return _kernel_parts(_operands(K, pairs, C, pair_mask), None, loss=loss).value(beta)


def dual_variables(margins, C, loss="squared_hinge"):
    """The dual variables ``alpha_p = C l'(1 - margin_p)`` implied by primal margins.

    At the optimum ``w = sum_p alpha_p dx_p`` (KKT stationarity); for the hinge ``alpha_p`` is the
    subgradient choice ``C [margin_p < 1]`` (margins exactly at 1 are ambiguous).
    """
    _check_loss(loss)
    _, d1, _ = newton.loss_terms(1.0 - jnp.asarray(margins), loss, None)
    return C * d1


def _solve(parts, operands, x0, size, loss, tol, max_iter, smoothing):
    dtype = operands[0].dtype
    x0 = jnp.zeros(operands[0].shape[size], dtype) if x0 is None else jnp.asarray(x0, dtype)
    tol = default_tol(dtype) if tol is None else tol
    return newton.minimize(
        functools.partial(parts, loss=loss),
        operands,
        x0,
        loss=loss,
        tol=tol,
        max_iter=max_iter,
        smoothing=smoothing,
    )


def fit_linear(
    X,
    pairs,
    C,
    pair_mask=None,
    *,
    loss: str = "squared_hinge",
    tol=None,
    max_iter: int = 100,
    smoothing=1e-3,
    w0=None,
) -> LinearSolution:
    """Linear RankSVM by primal Newton; see the module docstring for the objective.

    Args:
        X: ``(n, d)`` entity features (all queries of a collection stacked, or one query).
        pairs: ``(m, 2)`` int indices into ``X``, winner first; pairs should be within one query.
        C: scalar > 0, the weight of the summed pair losses (differentiable).
        pair_mask: ``(m,)`` bool (padding) or nonnegative weights; None = all pairs.
        loss: ``"squared_hinge"`` (default) or ``"hinge"`` (Huber continuation to ``smoothing``).
        tol: relative tolerance, ``||grad J|| <= tol ||grad J(0)||`` (default ``default_tol``
            of ``X``'s dtype; may be traced).
        max_iter: Newton iterations per stage (static under ``jit``).
        smoothing: final Huber width for the hinge (may be traced); ignored for the squared hinge.
        w0: ``(d,)`` warm start (default zeros).

    Returns:
        ``LinearSolution`` ``(w: (d,), info)``; scores of new entities are ``X_new @ w``.
    """
    settings = (loss, tol, max_iter, smoothing)
    X = check_columns(as_float(X))
    _check_settings(C, *settings, X.dtype)
    operands = _operands(X, pairs, C, pair_mask)
    w, info = _solve(_linear_parts, operands, w0, 1, *settings)
    return LinearSolution(w, info)


def _fit_linear_regularised(X, pairs, C, pair_mask, lam, **settings) -> LinearSolution:
    """``fit_linear`` for ``1/2 lam ||w||^2 + C sum_p mask_p l(...)``: the estimator's problem
    on rescaled features, where ``lam`` (traced) may be 0 (the hard-margin limit)."""
    operands = _operands(X, pairs, C, pair_mask)
    operands = (*operands, jnp.asarray(lam, operands[0].dtype))
    w, info = _solve(_linear_parts, operands, None, 1, **settings)
    return LinearSolution(w, info)


def fit_kernel(
    K,
    pairs,
    C,
    pair_mask=None,
    *,
    loss: str = "squared_hinge",
    tol=None,
    max_iter: int = 100,
    smoothing=1e-3,
    beta0=None,
) -> KernelSolution:
    """Kernel RankSVM on entities by Chapelle's primal Newton method (``O(n^3)`` per step).

    Args:
        K: ``(n, n)`` PSD Gram matrix of the entities (e.g. ``rbf_kernel``; differentiable).
            Rows and columns of zeros are padding: entities touched by no pair keep ``beta = 0``.
        pairs, C, pair_mask, loss, tol, max_iter, smoothing: as in ``fit_linear`` (the
            residual is ``beta + dLoss/df``).
        beta0: ``(n,)`` warm start (default zeros).

    Returns:
        ``KernelSolution`` ``(beta: (n,), info)``: training scores ``K @ beta``.
    """
    settings = (loss, tol, max_iter, smoothing)
    _check_settings(C, *settings, as_float(K).dtype)
    operands = _operands(K, pairs, C, pair_mask)
    beta, info = _solve(_kernel_parts, operands, beta0, 0, *settings)
    return KernelSolution(beta, info)


def rbf_kernel(X1, X2, gamma):
    """``exp(-gamma ||x - x'||^2)``: ``X1: (n1, d)``, ``X2: (n2, d)`` -> ``(n1, n2)``.

    (scikit-learn's parametrisation; bayesrank's ``RBF`` with ``kappa = 1``
    and ``rho = sqrt(2 gamma)`` is the same kernel.)

    The distances are computed on the features divided by a power of two ``2^e`` near their
    largest magnitude (exact), and ``gamma 4^e`` multiplies them, so ``||x||^2`` neither
    overflows (``inf - inf = NaN`` at ``|x| ~ 1e200``) nor underflows: a ``gamma 4^e ||z - z'||^2``
    that overflows gives ``K = 0`` (documents apart), never NaN; ``K = 1`` on equal documents
    (distances below the rounding error of ``|z|^2 + |z'|^2 - 2 z . z'`` count as 0).
    """
    dtype = jnp.result_type(jnp.asarray(X1), jnp.asarray(X2), float)
    X1, X2 = jnp.asarray(X1, dtype), jnp.asarray(X2, dtype)
    e = _scale_exponent(
        jnp.maximum(jnp.max(jnp.abs(X1), initial=0), jnp.max(jnp.abs(X2), initial=0))
    )
    Z1, Z2 = jnp.ldexp(X1, -e), jnp.ldexp(X2, -e)
    norms = jnp.sum(Z1**2, 1)[:, None] + jnp.sum(Z2**2, 1)[None, :]
    sq = norms - 2.0 * Z1 @ Z2.T
    # Below this bound on the rounding error of the expansion a distance is noise (equal rows
    # leave ~eps |z|^2): 0, or a huge gamma 4^e would turn it into K = 0 on the diagonal.
    noise = (X1.shape[1] + 2) * jnp.finfo(dtype).eps * norms
    scale = jnp.ldexp(jnp.ones((), dtype), e)
    g = gamma * scale * scale
    return jnp.exp(-jnp.where(sq > noise, g * sq, 0.0))


def _scale_exponent(top, xp=jnp):
    """``e`` with ``top ~ 2^e`` (``frexp``), clipped so that ``2^e`` and ``2^-e`` are normal
    numbers of ``top``'s dtype (``0`` for ``top = 0``); dividing by ``2^e`` is then exact."""
    info = xp.finfo(top.dtype)
    _, e = xp.frexp(top)
    return xp.clip(e, info.minexp + 1, info.maxexp - 2)


# The estimator moved to svm_estimator (which imports this module: served lazily, no cycle).
__getattr__ = moved(__name__, {"RankSVM": "bayesrank.baselines.svm_estimator"})
