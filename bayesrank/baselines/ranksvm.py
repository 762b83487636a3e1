"""RankSVM (Joachims 2002) on within-query pairs, solved in the primal by Newton's method.

For preference pairs ``(i, j)`` (``i`` preferred to ``j``) with difference vectors
``dx_p = x_i - x_j`` the linear RankSVM solves (the seed notes' primal, with the pairwise
transform of the seed tutorial; ``C`` multiplies the *sum* over pairs, as in SVMlight and
scikit-learn's ``LinearSVC``, not the mean)::

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

Both are two small parameterisations (:func:`_linear_parts`, :func:`_kernel_parts`) of the one
solver in :mod:`bayesrank.baselines.newton`: damped Newton with Armijo backtracking, the Huber
continuation, and implicit differentiation (gradients in ``X`` / ``K``, ``C`` and the pair
weights). The residual whose norm stops the solve is ``grad J(w)`` (linear) or ``beta + g``
(kernel), relative to its value at 0. :func:`fit_linear` and :func:`fit_kernel` are pure (never
jitted here: ``jit``, ``vmap`` and ``grad`` them freely; padded pairs get ``pair_mask = False``).

The estimator :class:`RankSVM` builds the within-query pairs from ``fit(X, y, qid)``, pads
documents and pairs to bucketed sizes (:mod:`bayesrank.baselines._arrays`) and calls
module-level jitted cores whose static arguments are ``loss`` and ``max_iter`` only, so a refit
on data of similar size compiles nothing.

Length: a little over 400 lines, because the two parameterisations, their public cores and the
estimator that calls them are one concept; the solver, the padding and the estimator face each
live in their own module.
"""

from __future__ import annotations

import functools
import warnings
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from . import newton
from ._arrays import as_float, cast_checked, float_dtype, pad_pairs, pad_rows, pair_weights
from ._data import check_ranking_data, check_X, pairs_within_queries
from ._estimator import Ranker, check_choice, check_int, check_real
from .newton import SolverInfo

__all__ = [
    "KernelSolution",
    "LinearSolution",
    "RankSVM",
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
    """``w: (d,)`` and :class:`~bayesrank.baselines.newton.SolverInfo`."""

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
    check_choice("loss", loss, LOSSES)


def _unless_overflow(M, delta):
    """``delta``, or NaN where the Newton matrix overflowed (a factorisation of ``inf`` entries
    can return a finite, meaningless step); the solver reports NaN steps as non-finite."""
    return jnp.where(jnp.all(jnp.isfinite(M)), delta, jnp.nan)


def _linear_parts(operands, h, *, loss):
    """``x = w: (d,)``; ``F = grad J = w - C A' (mask l')``, ``M = I + C A' diag(mask l'') A``
    (Cholesky), with ``A: (m, d)`` the rows ``x_i - x_j``."""
    X, pairs, C, mask = operands
    A = X[pairs[:, 0]] - X[pairs[:, 1]]

    def value(w):
        loss_value, _, _ = newton.loss_terms(1.0 - A @ w, loss, h)
        return 0.5 * w @ w + C * jnp.sum(mask * loss_value)

    def residual(w):
        _, d1, _ = newton.loss_terms(1.0 - A @ w, loss, h)
        return w - C * (A.T @ (mask * d1))

    def step(w):
        _, d1, d2 = newton.loss_terms(1.0 - A @ w, loss, h)
        g = w - C * (A.T @ (mask * d1))
        H = jnp.eye(w.shape[0], dtype=w.dtype) + C * (A.T @ (A * (mask * d2)[:, None]))
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


def _solve(parts, M, pairs, C, pair_mask, x0, size, loss, tol, max_iter, smoothing):
    _check_loss(loss)
    if isinstance(smoothing, (int, float)) and not smoothing > 0:
        raise ValueError(f"smoothing must be > 0, got {smoothing}")
    operands = _operands(M, pairs, C, pair_mask)
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
        tol: relative tolerance, ``||grad J|| <= tol ||grad J(0)||`` (default :func:`default_tol`
            of ``X``'s dtype; may be traced).
        max_iter: Newton iterations per stage (static under ``jit``).
        smoothing: final Huber width for the hinge (may be traced); ignored for the squared hinge.
        w0: ``(d,)`` warm start (default zeros).

    Returns:
        :class:`LinearSolution` ``(w: (d,), info)``; scores of new entities are ``X_new @ w``.
    """
    settings = (loss, tol, max_iter, smoothing)
    w, info = _solve(_linear_parts, X, pairs, C, pair_mask, w0, 1, *settings)
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
        K: ``(n, n)`` PSD Gram matrix of the entities (e.g. :func:`rbf_kernel`; differentiable).
            Rows and columns of zeros are padding: entities touched by no pair keep ``beta = 0``.
        pairs, C, pair_mask, loss, tol, max_iter, smoothing: as in :func:`fit_linear` (the
            residual is ``beta + dLoss/df``).
        beta0: ``(n,)`` warm start (default zeros).

    Returns:
        :class:`KernelSolution` ``(beta: (n,), info)``: training scores ``K @ beta``.
    """
    settings = (loss, tol, max_iter, smoothing)
    beta, info = _solve(_kernel_parts, K, pairs, C, pair_mask, beta0, 0, *settings)
    return KernelSolution(beta, info)


def rbf_kernel(X1, X2, gamma):
    """``exp(-gamma ||x - x'||^2)``: ``X1: (n1, d)``, ``X2: (n2, d)`` -> ``(n1, n2)``.

    (scikit-learn's parametrisation; bayesrank's :class:`~bayesrank.kernels.RBF` with ``kappa = 1``
    and ``rho = sqrt(2 gamma)`` is the same kernel.)
    """
    X1, X2 = jnp.asarray(X1), jnp.asarray(X2)
    sq = jnp.sum(X1**2, 1)[:, None] + jnp.sum(X2**2, 1)[None, :] - 2.0 * X1 @ X2.T
    return jnp.exp(-gamma * jnp.maximum(sq, 0.0))


def _fit_rbf(X, doc_mask, pairs, C, pair_mask, gamma, **settings):
    """The kernel estimator's core: padded documents (``doc_mask`` False) get zero rows and
    columns of ``K``. Returns the solution and the training scores ``K beta``."""
    K = jnp.where(doc_mask[:, None] & doc_mask[None, :], rbf_kernel(X, X, gamma), 0.0)
    sol = fit_kernel(K, pairs, C, pair_mask, **settings)
    return sol, K @ sol.beta


def _predict_rbf(X, X_fit, beta, gamma):
    return rbf_kernel(X, X_fit, gamma) @ beta


# The estimator's compiled cores: static are the loss (a string) and max_iter (a loop bound).
_fit_linear_jit = jax.jit(fit_linear, static_argnames=("loss", "max_iter"))
_fit_rbf_jit = jax.jit(_fit_rbf, static_argnames=("loss", "max_iter"))
_predict_rbf_jit = jax.jit(_predict_rbf)


class RankSVM(Ranker):
    """RankSVM estimator (scikit-learn style) on the pairs within each query.

    Args (hyperparameters only; nothing is computed here):
        C: weight of the summed pair losses (> 0).
        kernel: ``"linear"`` (``w`` in feature space) or ``"rbf"`` (representer on the training
            documents; ``O(n^3)`` in their number, so for single queries or small collections).
        gamma: RBF width ``exp(-gamma ||x - x'||^2)`` (> 0); None = ``1 / n_features``.
        loss: ``"squared_hinge"`` (default) or ``"hinge"``.
        tol, max_iter, smoothing: solver settings (see :func:`fit_linear`); ``tol`` None = the
            default of the float dtype (float64 under ``jax_enable_x64``, else float32).

    Learned attributes: ``coef_: (d,)`` (linear), ``dual_coef_: (n_train,)``, ``X_fit_`` and
    ``gamma_`` (rbf), ``pairs_: (m, 2)`` training pairs, ``n_features_in_``, ``objective_``,
    ``n_iter_``, ``converged_``. ``converged_`` is False, with a ``RuntimeWarning`` naming the
    cause, when the solver stopped short of ``tol``, overflowed, or returned scores that tie on
    every training pair although the solution is not zero (features too small for the dtype).

    :meth:`score` is the pairwise accuracy (see
    :func:`~bayesrank.baselines._estimator.pairwise_accuracy`).
    """

    def __init__(
        self,
        C: float = 1.0,
        kernel: str = "linear",
        gamma: float | None = None,
        loss: str = "squared_hinge",
        tol: float | None = None,
        max_iter: int = 100,
        smoothing: float = 1e-3,
    ):
        self.C = C
        self.kernel = kernel
        self.gamma = gamma
        self.loss = loss
        self.tol = tol
        self.max_iter = max_iter
        self.smoothing = smoothing

    def _check_params(self):
        check_real("C", self.C)
        check_choice("kernel", self.kernel, KERNELS)
        check_real("gamma", self.gamma, none_ok=True)
        _check_loss(self.loss)
        check_real("tol", self.tol, none_ok=True)
        check_int("max_iter", self.max_iter, low=1)
        check_real("smoothing", self.smoothing)

    def fit(self, X, y, qid) -> RankSVM:
        """Fit on documents ``X: (n, d)`` with grades ``y: (n,)`` and query ids ``qid: (n,)``."""
        self._check_params()
        X, y, qid = check_ranking_data(X, y, qid)
        pairs = pairs_within_queries(y, qid)
        dtype = float_dtype()
        Xd = cast_checked(X, dtype)
        P, pair_mask = pad_pairs(pairs)
        Xp = pad_rows(Xd, dtype)
        C = np.asarray(self.C, dtype)
        settings = dict(
            loss=self.loss,
            max_iter=int(self.max_iter),
            tol=np.asarray(default_tol(dtype) if self.tol is None else self.tol, dtype),
            smoothing=np.asarray(self.smoothing, dtype),
        )
        if self.kernel == "linear":
            sol = _fit_linear_jit(Xp, P, C, pair_mask, **settings)
            self.coef_ = np.asarray(sol.w)
            x, scores = self.coef_, Xd @ self.coef_
        else:
            self.gamma_ = 1.0 / X.shape[1] if self.gamma is None else float(self.gamma)
            doc_mask = np.arange(len(Xp)) < len(X)
            gamma = np.asarray(self.gamma_, dtype)
            sol, f = _fit_rbf_jit(Xp, doc_mask, P, C, pair_mask, gamma, **settings)
            self.dual_coef_ = np.asarray(sol.beta)[: len(X)]
            self.X_fit_ = X
            x, scores = self.dual_coef_, np.asarray(f)[: len(X)]
        self.pairs_ = pairs
        self.n_features_in_ = X.shape[1]
        self.objective_ = float(sol.info.objective)
        self.n_iter_ = int(sol.info.n_iter)
        self.converged_ = self._honest(sol.info, x, scores, X, dtype)
        return self

    def _honest(self, info, x, scores, X, dtype) -> bool:
        """``converged_``: the solver's flag, False (with a warning naming the cause) when it
        stopped short, or when the scores tie on every pair although ``x != 0``."""
        status, pairs = int(info.status), self.pairs_
        ties = len(pairs) > 0 and np.all(scores[pairs[:, 0]] == scores[pairs[:, 1]])
        if status == newton.CONVERGED and not (ties and np.any(x != 0)):
            return True
        cause = newton.explain(status, float(info.grad_norm), self.max_iter, dtype)
        if status in (newton.CONVERGED, newton.NONFINITE):  # the scale of X is the cause
            if status == newton.CONVERGED:
                cause = (
                    "the fitted scores tie on every training pair although the solution is not "
                    "zero (they underflow, or the kernel cannot tell the documents apart)"
                )
            spread = np.max(np.abs(X[pairs[:, 0]] - X[pairs[:, 1]]))
            cause += f"; max |x_i - x_j| over the training pairs = {spread:.3g}: standardise X"
        warnings.warn(f"RankSVM did not converge: {cause}", RuntimeWarning, stacklevel=3)
        return False

    def predict(self, X) -> np.ndarray:
        """Scores ``(n,)`` of documents ``X: (n, d)``; higher = ranked earlier."""
        self._check_fitted()
        X = check_X(X, self.n_features_in_)
        if self.kernel == "linear":
            return X @ self.coef_
        dtype = float_dtype()
        scores = _predict_rbf_jit(
            pad_rows(cast_checked(X, dtype), dtype),
            pad_rows(self.X_fit_, dtype),
            pad_rows(self.dual_coef_, dtype),
            np.asarray(self.gamma_, dtype),
        )
        return np.asarray(scores)[: len(X)]
