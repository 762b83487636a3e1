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

Both solvers are damped Newton methods (Armijo backtracking) inside ``lax.while_loop``, stopping
when ``||grad|| <= tol * max(1, ||grad at 0||)`` (linear) or ``||beta + g|| <= tol * max(1,
||g at 0||)`` (kernel). They are pure functions (the caller jits; static: ``loss``, ``max_iter``,
``smoothing``), ``vmap`` over queries with padded pairs masked out, and differentiable in ``X`` /
``K``, ``C`` and the mask by the implicit function theorem: the loop runs on stopped gradients
and one Newton step at the solution, taken on the live inputs, carries the derivative
``dw/dtheta = -H^{-1} d(grad)/dtheta``.

The estimator :class:`RankSVM` (scikit-learn style) builds the within-query pairs from
``fit(X, y, qid)`` and calls the jitted core.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from ._data import check_ranking_data, check_X, pairs_within_queries

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


class SolverInfo(NamedTuple):
    """Diagnostics of a Newton solve (scalars; batched under ``vmap``).

    Attributes:
        objective: ``J`` at the returned solution (for the hinge: the *hinge* objective).
        grad_norm: the final stopping quantity (see the module docstring).
        n_iter: Newton iterations, summed over the continuation stages of the hinge.
        converged: whether the last stage met its tolerance within ``max_iter``.
    """

    objective: jax.Array
    grad_norm: jax.Array
    n_iter: jax.Array
    converged: jax.Array


class LinearSolution(NamedTuple):
    """``w: (d,)`` and :class:`SolverInfo`."""

    w: jax.Array
    info: SolverInfo


class KernelSolution(NamedTuple):
    """``beta: (n,)`` (scores ``f = K beta``, new points ``k(x, X) beta``), :class:`SolverInfo`."""

    beta: jax.Array
    info: SolverInfo


def default_tol(dtype) -> float:
    """Relative gradient tolerance: ``1e-9`` in float64, ``1e-4`` in float32."""
    return 1e-9 if jnp.dtype(dtype) == jnp.float64 else 1e-4


def _check_loss(loss):
    if loss not in LOSSES:
        raise ValueError(f"loss must be one of {LOSSES}, got {loss!r}")


def _loss_terms(r, loss, h):
    """``l(r), l'(r), l''(r)`` for the squared hinge, or the Huber-smoothed hinge of width ``h``."""
    if loss == "squared_hinge":
        rp = jnp.maximum(r, 0.0)
        return rp**2, 2.0 * rp, 2.0 * (r > 0).astype(r.dtype)
    if h is None:  # the plain hinge (objective reporting only)
        return jnp.maximum(r, 0.0), (r > 0).astype(r.dtype), jnp.zeros_like(r)
    band = jnp.abs(r) <= h
    value = jnp.where(r > h, r, jnp.where(band, (r + h) ** 2 / (4 * h), 0.0))
    d1 = jnp.where(r > h, 1.0, jnp.where(band, (r + h) / (2 * h), 0.0))
    d2 = jnp.where(band, 1.0 / (2 * h), 0.0)
    return value, d1, d2


def _hinge_schedule(smoothing: float) -> tuple[float, ...]:
    """Huber widths ``1, 0.1, ...`` down to ``smoothing`` (continuation for the hinge)."""
    if not smoothing > 0:
        raise ValueError(f"smoothing must be > 0, got {smoothing}")
    hs = []
    h = 1.0
    while h > smoothing * (1 + 1e-12):
        hs.append(h)
        h /= 10.0
    hs.append(float(smoothing))
    return tuple(hs)


def _pair_mask(pairs, pair_mask, dtype):
    if pair_mask is None:
        return jnp.ones(pairs.shape[0], dtype)
    return jnp.asarray(pair_mask).astype(dtype)


def _differences(X, pairs):
    return X[pairs[:, 0]] - X[pairs[:, 1]]


def linear_objective(w, X, pairs, C, pair_mask=None, loss="squared_hinge"):
    """``1/2 ||w||^2 + C sum_p mask_p l(1 - w . (x_i - x_j))`` (the hinge unsmoothed).

    Args:
        w: ``(d,)``; X: ``(n, d)``; pairs: ``(m, 2)`` int, winner first; C: scalar > 0;
        pair_mask: ``(m,)`` bool or weights, None = all pairs; loss: ``"squared_hinge"`` or
        ``"hinge"``.
    """
    _check_loss(loss)
    X = jnp.asarray(X)
    mask = _pair_mask(pairs, pair_mask, X.dtype)
    r = 1.0 - _differences(X, pairs) @ w
    value, _, _ = _loss_terms(r, loss, None)
    return 0.5 * w @ w + C * jnp.sum(mask * value)


def kernel_objective(beta, K, pairs, C, pair_mask=None, loss="squared_hinge"):
    """``1/2 beta' K beta + C sum_p mask_p l(1 - (f_i - f_j))`` with ``f = K beta``."""
    _check_loss(loss)
    K = jnp.asarray(K)
    mask = _pair_mask(pairs, pair_mask, K.dtype)
    f = K @ beta
    r = 1.0 - (f[pairs[:, 0]] - f[pairs[:, 1]])
    value, _, _ = _loss_terms(r, loss, None)
    return 0.5 * beta @ f + C * jnp.sum(mask * value)


def dual_variables(margins, C, loss="squared_hinge"):
    """The dual variables ``alpha_p = C l'(1 - margin_p)`` implied by primal margins.

    At the optimum ``w = sum_p alpha_p dx_p`` (KKT stationarity); for the hinge ``alpha_p`` is the
    subgradient choice ``C [margin_p < 1]`` (margins exactly at 1 are ambiguous).
    """
    _check_loss(loss)
    _, d1, _ = _loss_terms(1.0 - jnp.asarray(margins), loss, None)
    return C * d1


class _State(NamedTuple):
    x: jax.Array
    value: jax.Array
    grad_norm: jax.Array
    it: jax.Array
    done: jax.Array
    converged: jax.Array


def _newton(x0, value_fn, direction_fn, stop_fn, threshold, max_iter, dtype):
    """Damped Newton: ``direction_fn(x) -> (delta, slope)``, Armijo backtracking on ``value_fn``.

    Stops when ``stop_fn(x) <= threshold`` (converged), after ``max_iter`` steps, or when no step
    length in ``1, 1/2, ..., 2^-30`` decreases the objective (stalled at machine precision).
    """
    eps = jnp.finfo(dtype).eps

    def line_search(x, value, delta, slope):
        def cond(c):
            t, v_new, k = c
            ok = v_new <= value + 1e-4 * t * slope + 10 * eps * jnp.abs(value)
            return (~ok) & (k < 30)

        def body(c):
            t, _, k = c
            t = 0.5 * t
            return t, value_fn(x + t * delta), k + 1

        t, v_new, k = jax.lax.while_loop(cond, body, (jnp.ones((), dtype), value_fn(x + delta), 0))
        ok = (k < 30) | (v_new <= value)
        return t, v_new, ok

    def cond(s):
        return ~s.done

    def body(s):
        delta, slope = direction_fn(s.x)
        t, v_new, ok = line_search(s.x, s.value, delta, slope)
        x = jnp.where(ok, s.x + t * delta, s.x)
        value = jnp.where(ok, v_new, s.value)
        gn = stop_fn(x)
        converged = gn <= threshold
        it = s.it + 1
        return _State(x, value, gn, it, converged | (it >= max_iter) | ~ok, converged)

    g0 = stop_fn(x0)
    conv0 = g0 <= threshold
    init = _State(x0, value_fn(x0), g0, jnp.zeros((), jnp.int32), conv0 | (max_iter <= 0), conv0)
    return jax.lax.while_loop(cond, body, init)


def _linear_parts(X, pairs, C, mask, loss, h):
    A = _differences(X, pairs)

    def value_fn(w):
        value, _, _ = _loss_terms(1.0 - A @ w, loss, h)
        return 0.5 * w @ w + C * jnp.sum(mask * value)

    def grad_hess(w):
        _, d1, d2 = _loss_terms(1.0 - A @ w, loss, h)
        grad = w - C * (A.T @ (mask * d1))
        hess = jnp.eye(w.shape[0], dtype=w.dtype) + C * (A.T @ (A * (mask * d2)[:, None]))
        return grad, hess

    return A, value_fn, grad_hess


def fit_linear(
    X,
    pairs,
    C,
    pair_mask=None,
    *,
    loss: str = "squared_hinge",
    tol: float | None = None,
    max_iter: int = 100,
    smoothing: float = 1e-3,
    w0=None,
) -> LinearSolution:
    """Linear RankSVM by primal Newton; see the module docstring for the objective.

    Args:
        X: ``(n, d)`` entity features (all queries of a collection stacked, or one query).
        pairs: ``(m, 2)`` int indices into ``X``, winner first; pairs should be within one query.
        C: scalar > 0, the weight of the summed pair losses (differentiable).
        pair_mask: ``(m,)`` bool (padding) or nonnegative weights; None = all pairs.
        loss: ``"squared_hinge"`` (default) or ``"hinge"`` (Huber continuation to ``smoothing``).
        tol: relative gradient tolerance (default :func:`default_tol` of ``X``'s dtype).
        max_iter: Newton iterations per stage (static).
        smoothing: final Huber width for the hinge (static); ignored for the squared hinge.
        w0: ``(d,)`` warm start (default zeros).

    Returns:
        :class:`LinearSolution` ``(w: (d,), info)``; scores of new entities are ``X_new @ w``.
    """
    _check_loss(loss)
    X = jnp.asarray(X)
    if not jnp.issubdtype(X.dtype, jnp.floating):
        X = X.astype(jnp.result_type(float))
    dtype = X.dtype
    pairs = jnp.asarray(pairs)
    C = jnp.asarray(C, dtype)
    mask = _pair_mask(pairs, pair_mask, dtype)
    tol = default_tol(dtype) if tol is None else tol
    hs = _hinge_schedule(smoothing) if loss == "hinge" else (1.0,)  # h unused: squared hinge
    w = jnp.zeros(X.shape[1], dtype) if w0 is None else jnp.asarray(w0, dtype)

    Xs, Cs, ms = jax.lax.stop_gradient((X, C, mask))

    def stage(carry, h):  # one Newton solve per Huber width (a single one for the squared hinge)
        w, n_iter = carry
        A, value_fn, grad_hess = _linear_parts(Xs, pairs, Cs, ms, loss, h)
        _, d1_0, _ = _loss_terms(jnp.ones(A.shape[0], dtype), loss, h)
        threshold = tol * jnp.maximum(1.0, jnp.linalg.norm(Cs * (A.T @ (ms * d1_0))))

        def direction(w, grad_hess=grad_hess):
            g, H = grad_hess(w)
            delta = -jax.scipy.linalg.cho_solve(jax.scipy.linalg.cho_factor(H), g)
            return delta, g @ delta

        def stop(w, grad_hess=grad_hess):
            return jnp.linalg.norm(grad_hess(w)[0])

        state = _newton(w, value_fn, direction, stop, threshold, max_iter, dtype)
        return (state.x, n_iter + state.it), (state.grad_norm, state.converged)

    (w, n_iter), (grad_norm, converged) = jax.lax.scan(
        stage, (w, jnp.zeros((), jnp.int32)), jnp.asarray(hs, dtype)
    )

    # Implicit differentiation: one Newton step on the live inputs at the (stopped) solution.
    w = jax.lax.stop_gradient(w)
    _, _, grad_hess = _linear_parts(X, pairs, C, mask, loss, hs[-1])
    g, H = grad_hess(w)
    w = w - jax.scipy.linalg.cho_solve(jax.scipy.linalg.cho_factor(H), g)
    info = SolverInfo(
        objective=jax.lax.stop_gradient(linear_objective(w, Xs, pairs, Cs, ms, loss)),
        grad_norm=grad_norm[-1],
        n_iter=n_iter,
        converged=converged[-1],
    )
    return LinearSolution(w, info)


def _kernel_parts(K, pairs, C, mask, loss, h):
    n = K.shape[0]
    i, j = pairs[:, 0], pairs[:, 1]

    def residual(beta):
        f = K @ beta
        return f, 1.0 - (f[i] - f[j])

    def value_fn(beta):
        f, r = residual(beta)
        value, _, _ = _loss_terms(r, loss, h)
        return 0.5 * beta @ f + C * jnp.sum(mask * value)

    def grad_f(d1):  # dLoss/df = -C D' (mask l')
        v = C * mask * d1
        return jnp.zeros(n, K.dtype).at[j].add(v).at[i].add(-v)

    def system(beta):
        _, r = residual(beta)
        _, d1, d2 = _loss_terms(r, loss, h)
        F = beta + grad_f(d1)
        c = C * mask * d2
        L = (
            jnp.zeros((n, n), K.dtype)
            .at[i, i]
            .add(c)
            .at[j, j]
            .add(c)
            .at[i, j]
            .add(-c)
            .at[j, i]
            .add(-c)
        )
        return F, jnp.eye(n, dtype=K.dtype) + L @ K

    return value_fn, grad_f, system


def fit_kernel(
    K,
    pairs,
    C,
    pair_mask=None,
    *,
    loss: str = "squared_hinge",
    tol: float | None = None,
    max_iter: int = 100,
    smoothing: float = 1e-3,
    beta0=None,
) -> KernelSolution:
    """Kernel RankSVM on entities by Chapelle's primal Newton method (``O(n^3)`` per step).

    Args:
        K: ``(n, n)`` PSD Gram matrix of the entities (e.g. :func:`rbf_kernel`; differentiable).
        pairs, C, pair_mask, loss, tol, max_iter, smoothing: as in :func:`fit_linear`.
        beta0: ``(n,)`` warm start (default zeros).

    Returns:
        :class:`KernelSolution` ``(beta: (n,), info)``: training scores ``K @ beta``.
    """
    _check_loss(loss)
    K = jnp.asarray(K)
    if not jnp.issubdtype(K.dtype, jnp.floating):
        K = K.astype(jnp.result_type(float))
    dtype = K.dtype
    pairs = jnp.asarray(pairs)
    C = jnp.asarray(C, dtype)
    mask = _pair_mask(pairs, pair_mask, dtype)
    tol = default_tol(dtype) if tol is None else tol
    hs = _hinge_schedule(smoothing) if loss == "hinge" else (1.0,)  # h unused: squared hinge
    beta = jnp.zeros(K.shape[0], dtype) if beta0 is None else jnp.asarray(beta0, dtype)

    Ks, Cs, ms = jax.lax.stop_gradient((K, C, mask))

    def stage(carry, h):
        beta, n_iter = carry
        value_fn, grad_f, system = _kernel_parts(Ks, pairs, Cs, ms, loss, h)
        _, d1_0, _ = _loss_terms(jnp.ones(pairs.shape[0], dtype), loss, h)
        threshold = tol * jnp.maximum(1.0, jnp.linalg.norm(grad_f(d1_0)))

        def direction(beta, system=system, Ks=Ks):
            F, M = system(beta)
            delta = -jnp.linalg.solve(M, F)
            return delta, (Ks @ F) @ delta

        def stop(beta, system=system):
            return jnp.linalg.norm(system(beta)[0])

        state = _newton(beta, value_fn, direction, stop, threshold, max_iter, dtype)
        return (state.x, n_iter + state.it), (state.grad_norm, state.converged)

    (beta, n_iter), (grad_norm, converged) = jax.lax.scan(
        stage, (beta, jnp.zeros((), jnp.int32)), jnp.asarray(hs, dtype)
    )

    beta = jax.lax.stop_gradient(beta)
    _, _, system = _kernel_parts(K, pairs, C, mask, loss, hs[-1])
    F, M = system(beta)
    beta = beta - jnp.linalg.solve(M, F)
    info = SolverInfo(
        objective=jax.lax.stop_gradient(kernel_objective(beta, Ks, pairs, Cs, ms, loss)),
        grad_norm=grad_norm[-1],
        n_iter=n_iter,
        converged=converged[-1],
    )
    return KernelSolution(beta, info)


def rbf_kernel(X1, X2, gamma):
    """``exp(-gamma ||x - x'||^2)``: ``X1: (n1, d)``, ``X2: (n2, d)`` -> ``(n1, n2)``.

    (scikit-learn's parametrisation; bayesrank's :class:`~bayesrank.kernels.RBF` with ``kappa = 1``
    and ``rho = sqrt(2 gamma)`` is the same kernel.)
    """
    X1, X2 = jnp.asarray(X1), jnp.asarray(X2)
    sq = jnp.sum(X1**2, 1)[:, None] + jnp.sum(X2**2, 1)[None, :] - 2.0 * X1 @ X2.T
    return jnp.exp(-gamma * jnp.maximum(sq, 0.0))


_fit_linear_jit = jax.jit(fit_linear, static_argnames=("loss", "tol", "max_iter", "smoothing"))
_fit_kernel_jit = jax.jit(fit_kernel, static_argnames=("loss", "tol", "max_iter", "smoothing"))
_rbf_jit = jax.jit(rbf_kernel)


class RankSVM:
    """RankSVM estimator (scikit-learn style) on the pairs within each query.

    Args (hyperparameters only; nothing is computed here):
        C: weight of the summed pair losses (> 0).
        kernel: ``"linear"`` (``w`` in feature space) or ``"rbf"`` (representer on the training
            documents; ``O(n^3)`` in their number, so for single queries or small collections).
        gamma: RBF width ``exp(-gamma ||x - x'||^2)``; None = ``1 / n_features``.
        loss: ``"squared_hinge"`` (default) or ``"hinge"``.
        tol, max_iter, smoothing: solver settings (see :func:`fit_linear`).

    Learned attributes: ``coef_: (d,)`` (linear), ``dual_coef_: (n_train,)`` and ``X_fit_``
    (rbf), ``pairs_: (m, 2)`` training pairs, ``n_features_in_``, ``objective_``, ``n_iter_``,
    ``converged_``.
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

    def get_params(self, deep: bool = True) -> dict:
        names = ("C", "kernel", "gamma", "loss", "tol", "max_iter", "smoothing")
        return {k: getattr(self, k) for k in names}

    def set_params(self, **params) -> RankSVM:
        for k, v in params.items():
            if k not in self.get_params():
                raise ValueError(f"unknown parameter {k!r}")
            setattr(self, k, v)
        return self

    def _check_params(self):
        if not (np.isfinite(self.C) and self.C > 0):
            raise ValueError(f"C must be a finite number > 0, got {self.C}")
        if self.kernel not in ("linear", "rbf"):
            raise ValueError(f"kernel must be 'linear' or 'rbf', got {self.kernel!r}")
        _check_loss(self.loss)
        if self.gamma is not None and not self.gamma > 0:
            raise ValueError(f"gamma must be > 0, got {self.gamma}")

    def fit(self, X, y, qid) -> RankSVM:
        """Fit on documents ``X: (n, d)`` with grades ``y: (n,)`` and query ids ``qid: (n,)``."""
        self._check_params()
        X, y, qid = check_ranking_data(X, y, qid)
        pairs = pairs_within_queries(y, qid)
        dtype = jnp.result_type(float)
        Xj = jnp.asarray(X, dtype)
        settings = dict(
            loss=self.loss, tol=self.tol, max_iter=self.max_iter, smoothing=self.smoothing
        )
        self.pairs_ = pairs
        self.n_features_in_ = X.shape[1]
        if self.kernel == "linear":
            sol = _fit_linear_jit(Xj, jnp.asarray(pairs), self.C, **settings)
            self.coef_ = np.asarray(sol.w)
        else:
            self.gamma_ = 1.0 / X.shape[1] if self.gamma is None else float(self.gamma)
            K = _rbf_jit(Xj, Xj, self.gamma_)
            sol = _fit_kernel_jit(K, jnp.asarray(pairs), self.C, **settings)
            self.dual_coef_ = np.asarray(sol.beta)
            self.X_fit_ = X
        self.objective_ = float(sol.info.objective)
        self.n_iter_ = int(sol.info.n_iter)
        self.converged_ = bool(sol.info.converged)
        return self

    def predict(self, X) -> np.ndarray:
        """Scores ``(n,)`` of documents ``X: (n, d)``; higher = ranked earlier."""
        if not hasattr(self, "n_features_in_"):
            raise ValueError("this RankSVM is not fitted yet; call fit(X, y, qid) first")
        X = check_X(X, self.n_features_in_)
        if self.kernel == "linear":
            return X @ self.coef_
        Kx = _rbf_jit(jnp.asarray(X), jnp.asarray(self.X_fit_), self.gamma_)
        return np.asarray(Kx @ self.dual_coef_)
