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

Both are two small parameterisations (``_linear_parts``, ``_kernel_parts``) of the one
solver in ``bayesrank.baselines.newton``: damped Newton with Armijo backtracking, the Huber
continuation, and implicit differentiation (gradients in ``X`` / ``K``, ``C`` and the pair
weights). The residual whose norm stops the solve is ``grad J(w)`` (linear) or ``beta + g``
(kernel), relative to its value at 0. ``fit_linear`` and ``fit_kernel`` are pure (never
jitted here: ``jit``, ``vmap`` and ``grad`` them freely; padded pairs get ``pair_mask = False``).

The estimator ``RankSVM`` builds the within-query pairs from ``fit(X, y, qid)``, pads
documents and pairs to bucketed sizes (``bayesrank.baselines._arrays``) and calls
module-level jitted cores whose static arguments are ``loss`` and ``max_iter`` only, so a refit
on data of similar size compiles nothing.

The estimator also rescales the features by a power of two (exact) and maps the solution back,
so that features at any scale float64 holds give the problem's own answer, or ``converged_ =
False`` with a warning where that answer is out of reach (see ``RankSVM``).

Length: about 600 lines, because the two parameterisations, their public cores and the
estimator that calls them (with that rescaling, the one place that knows both the objective and
the estimator's data) are one concept; the solver, the padding and the estimator face each live
in their own module.
"""

from __future__ import annotations

import functools
import warnings
from functools import partial
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from ..data.checks import options
from ..diagnostics import ConvergenceWarning
from . import newton
from ._arrays import as_float, check_columns, float_dtype, pad_pairs, pad_rows, pair_weights
from ._data import pairs_within_queries
from ._estimator import Ranker, check_inputs
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


def _fit_rbf(X, doc_mask, pairs, C, pair_mask, gamma, **settings):
    """The kernel estimator's core: padded documents (``doc_mask`` False) get zero rows and
    columns of ``K``. Returns the solution and the training scores ``K beta``."""
    K = jnp.where(doc_mask[:, None] & doc_mask[None, :], rbf_kernel(X, X, gamma), 0.0)
    sol = fit_kernel(K, pairs, C, pair_mask, **settings)
    return sol, K @ sol.beta


def _predict_rbf(X, X_fit, beta, gamma):
    return rbf_kernel(X, X_fit, gamma) @ beta


# The estimator's compiled cores: static are the loss (a string) and max_iter (a loop bound).
@partial(jax.jit, static_argnames=("loss", "max_iter"))
def _fit_linear_jit(X, pairs, C, pair_mask, lam, **settings):
    return _fit_linear_regularised(X, pairs, C, pair_mask, lam, **settings)


@partial(jax.jit, static_argnames=("loss", "max_iter"))
def _fit_rbf_jit(X, doc_mask, pairs, C, pair_mask, gamma, **settings):
    return _fit_rbf(X, doc_mask, pairs, C, pair_mask, gamma, **settings)


@jax.jit
def _predict_rbf_jit(X, X_fit, beta, gamma):
    return _predict_rbf(X, X_fit, beta, gamma)


def _scaled_features(X: np.ndarray, dtype, e: int | None = None) -> tuple[np.ndarray, int]:
    """``X: (n, d)`` float64 as ``Z = X / 2^e`` in ``dtype``, ``e`` from ``max |X|`` unless given
    (exact: a power of two); ``ValueError`` naming the first entry that overflows ``dtype`` or
    underflows to 0 there (the model would see other data than the user gave)."""
    if e is None:
        e = int(_scale_exponent(np.max(np.abs(X), initial=0.0), np))
    with np.errstate(over="ignore", under="ignore"):  # reported below, naming the entry
        Z = np.ldexp(X, -e).astype(dtype)
    info = np.finfo(dtype)
    bad = ~np.isfinite(Z) | ((Z == 0) & (X != 0))
    if bad.any():
        idx = tuple(int(i) for i in np.argwhere(bad)[0])
        where = ", ".join(map(str, idx))
        raise ValueError(
            f"X[{where}] = {X[idx]:.3g} is out of {info.dtype.name}'s range once X is scaled by "
            f"2^{-e} (max |X| = {np.max(np.abs(X)):.3g}): its features span more than "
            f"{info.dtype.name} holds; standardise them or enable float64 "
            "(jax.config.update('jax_enable_x64', True))"
        )
    return Z, e


class _Fit(NamedTuple):
    """A fit's result on the host: the solution ``x`` (``coef_`` or ``dual_coef_``), training
    scores, the solver's report, and a cause that makes it not converged (None: none)."""

    x: np.ndarray
    scores: np.ndarray
    objective: float
    n_iter: int
    status: int
    grad_norm: float
    cause: str | None = None


class RankSVM(Ranker):
    """RankSVM estimator (scikit-learn style) on the pairs within each query.

    Args (hyperparameters only; nothing is computed here):
        C: weight of the summed pair losses (> 0, finite in the working dtype).
        kernel: ``"linear"`` (``w`` in feature space) or ``"rbf"`` (representer on the training
            documents; ``O(n^3)`` in their number, so for single queries or small collections).
        gamma: RBF width ``exp(-gamma ||x - x'||^2)`` (> 0); None = ``1 / n_features``.
        loss: ``"squared_hinge"`` (default) or ``"hinge"``.
        tol: relative tolerance in ``(0, 1)``; None = the default of the float dtype (float64
            under ``jax_enable_x64``, else float32; see ``default_tol``).
        max_iter: Newton iterations per stage (an integer >= 1).
        smoothing: the hinge's final Huber width, in ``(0, 1]`` (see ``fit_linear``).

    The features are divided by a power of two near ``max |X|`` before the solve (exact), and
    the solution is mapped back: ``coef_`` and the scores are those of the problem on ``X`` as
    given (the objective of ``fit_linear`` with ``X``), at any feature scale the float64
    range holds (``1e200`` or ``1e-200`` included). On ``Z = X / s`` the linear problem is
    ``1/2 ||v||^2 + C s^2 sum_p l(1 - v . dz_p)`` with ``w = v / s``; where ``C s^2`` would be too
    large it is solved as ``1/2 (1 / (C s^2)) ||v||^2 + sum_p l(...)``, and where it underflows
    ``coef_`` is its limit ``C sum_p l'(1) dx_p`` (the margins are below rounding).

    Learned attributes: ``coef_: (d,)`` float64 (linear), ``dual_coef_: (n_train,)``, ``X_fit_``
    and ``gamma_`` (rbf), ``pairs_: (m, 2)`` training pairs, ``n_features_in_``, ``objective_``
    (of the problem on ``X`` as given; for the hinge the unsmoothed one), ``n_iter_``,
    ``converged_``. ``converged_`` is False, with a ``ConvergenceWarning``
    (``bayesrank.diagnostics``, a ``RuntimeWarning``) naming the cause, when the solver
    stopped short of ``tol``, its Newton system was not finite (singular or overflowed), the
    regulariser ``1/2 ||w||^2`` is below the dtype's range at this feature scale (``C max|x|^2``
    overflows: ``coef_`` then minimises the loss alone, the hard-margin limit), or the fitted
    scores tie (or differ by less than the smallest normal float64) on every training pair
    although the solution is not zero (features too small for the scores to be representable).

    ``score`` is the pairwise accuracy (see
    ``pairwise_accuracy``).
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

    def _check_params(self, dtype):
        """Every hyperparameter, ``ValueError`` naming the first one at fault and its value."""
        C = options.check_float(self.C, "C", 0.0, low_open=True)
        options.check_representable(C, "C", dtype)
        options.check_choice(self.kernel, "kernel", KERNELS)
        gamma = options.check_float(self.gamma, "gamma", 0.0, low_open=True, allow_none=True)
        if gamma is not None:
            options.check_representable(gamma, "gamma", dtype)
        _check_settings(C, self.loss, self.tol, self.max_iter, self.smoothing, dtype)

    def fit(self, X, y, qid=None) -> RankSVM:
        """Fit on documents ``X: (n, d)`` with grades ``y: (n,)`` and query ids ``qid: (n,)``
        (any hashable ids; ints and strings may be mixed; None = one query, as scikit-learn's
        ``fit(X, y)`` calls it)."""
        dtype = float_dtype()
        self._check_params(dtype)
        X, y, qid = check_inputs(X, y, qid, type(self).__name__)
        pairs = pairs_within_queries(y, qid)
        Z, e = _scaled_features(X, dtype)
        settings = dict(
            loss=self.loss,
            max_iter=int(self.max_iter),
            tol=np.asarray(default_tol(dtype) if self.tol is None else self.tol, dtype),
            smoothing=np.asarray(self.smoothing, dtype),
        )
        if self.kernel == "linear":
            fit = self._fit_linear(X, Z, e, pairs, dtype, settings)
            self.coef_ = fit.x
        else:
            fit = self._fit_rbf(X, Z, e, pairs, dtype, settings)
            self.dual_coef_ = fit.x
            self.X_fit_ = X
        self.pairs_ = pairs
        self.n_features_in_ = X.shape[1]
        self.objective_ = fit.objective
        self.n_iter_ = fit.n_iter
        self.converged_ = self._honest(fit, X, dtype)
        return self

    def _fit_linear(self, X, Z, e, pairs, dtype, settings) -> _Fit:
        """The linear problem on ``Z = X / 2^e`` (see the class docstring), mapped back to ``X``."""
        C, info = float(self.C), np.finfo(dtype)
        with np.errstate(over="ignore", under="ignore"):  # inf and 0 pick the regime below
            k = np.ldexp(C, 2 * e)  # C s^2, the loss weight of the problem in v = s w
        if k < info.tiny:  # the margins C s^2 v . dz are below rounding: the solution's limit
            Z64 = np.ldexp(X, -e)
            dz = (Z64[pairs[:, 0]] - Z64[pairs[:, 1]]).sum(0)
            slope = 2.0 if self.loss == "squared_hinge" else 1.0  # l'(1): smoothing <= 1
            with np.errstate(under="ignore"):  # subnormal scores are reported by _honest
                w = C * np.ldexp(dz * slope, e)
            objective = C * len(pairs) + 0.5 * float(w @ w)  # l(1) = 1 for both losses
            return _Fit(w, X @ w, objective, 0, newton.CONVERGED, 0.0)
        if k <= float(info.max) / (64 * max(len(pairs), 1)):  # C s^2 A' D A cannot overflow
            lam, c = 1.0, k
        else:  # the same problem divided by C s^2; lam may underflow (the hard-margin limit)
            lam, c = 1.0 / k, 1.0
        P, pair_mask = pad_pairs(pairs)
        sol = _fit_linear_jit(
            pad_rows(Z, dtype),
            P,
            np.asarray(c, dtype),
            pair_mask,
            np.asarray(lam, dtype),
            **settings,
        )
        w = np.ldexp(np.asarray(sol.w, np.float64), -e)
        J = float(sol.info.objective)
        objective = float(np.ldexp(J, -2 * e)) if lam == 1.0 else C * J
        cause = None
        if lam < info.tiny:
            cause = (
                f"C * max|x|^2 = {k:.3g} overflowed in {info.dtype.name}: the regulariser "
                "1/2 ||w||^2 is below its range at this feature scale, so coef_ minimises the "
                "loss alone (the hard-margin limit), which need not be the requested solution"
            )
        status, grad_norm = int(sol.info.status), float(sol.info.grad_norm)
        return _Fit(w, X @ w, objective, int(sol.info.n_iter), status, grad_norm, cause)

    def _fit_rbf(self, X, Z, e, pairs, dtype, settings) -> _Fit:
        """The kernel problem; ``gamma ||x - x'||^2 = (gamma 4^e) ||z - z'||^2`` on ``Z``."""
        self.gamma_ = 1.0 / X.shape[1] if self.gamma is None else float(self.gamma)
        P, pair_mask = pad_pairs(pairs)
        Zp = pad_rows(Z, dtype)
        doc_mask = np.arange(len(Zp)) < len(X)
        sol, f = _fit_rbf_jit(
            Zp,
            doc_mask,
            P,
            np.asarray(self.C, dtype),
            pair_mask,
            self._rbf_gamma(e, dtype),
            **settings,
        )
        self._scale_exp = e
        info = sol.info
        beta = np.asarray(sol.beta)[: len(X)]
        scores = np.asarray(f, np.float64)[: len(X)]
        return _Fit(
            beta,
            scores,
            float(info.objective),
            int(info.n_iter),
            int(info.status),
            float(info.grad_norm),
        )

    def _rbf_gamma(self, e: int, dtype) -> np.ndarray:
        with np.errstate(over="ignore", under="ignore"):  # inf: K = 0 apart; 0: K = 1
            return np.asarray(np.ldexp(self.gamma_, 2 * e), dtype)

    def _honest(self, fit: _Fit, X, dtype) -> bool:
        """``converged_``: the solver's flag, False (with a warning naming every cause) when it
        stopped short, when ``fit.cause`` says why the answer is not the requested one, or when
        the scores tie (or differ subnormally) on every pair although ``x != 0``."""
        pairs, scores = self.pairs_, fit.scores
        gaps = np.abs(scores[pairs[:, 0]] - scores[pairs[:, 1]])
        flat = len(pairs) > 0 and np.any(fit.x != 0) and np.all(gaps < np.finfo(np.float64).tiny)
        causes = [] if fit.cause is None else [fit.cause]
        if fit.status != newton.CONVERGED:
            causes.append(newton.explain(fit.status, fit.grad_norm, self.max_iter, dtype))
        if flat:
            causes.append(
                (
                    "the fitted scores tie on every training pair"
                    if np.all(gaps == 0)
                    else "the fitted scores differ by less than the smallest normal float64 on "
                    "every training pair"
                )
                + " although the solution is not zero (they underflow, or the kernel cannot "
                "tell the documents apart)"
            )
        if not causes:
            return True
        if len(pairs) and (fit.status == newton.NONFINITE or fit.cause or flat):
            with np.errstate(over="ignore"):  # a spread beyond float64 shows as inf
                spread = np.max(np.abs(X[pairs[:, 0]] - X[pairs[:, 1]]))
            causes[-1] += f"; max |x_i - x_j| over the training pairs = {spread:.3g}: standardise X"
        warnings.warn(
            f"RankSVM did not converge: {'; '.join(causes)}", ConvergenceWarning, stacklevel=3
        )
        return False

    def predict(self, X) -> np.ndarray:
        """Scores ``(n,)`` of documents ``X: (n, d)``; higher = ranked earlier."""
        self._check_fitted()
        X = self._check_X(X)
        if self.kernel == "linear":
            return X @ self.coef_
        dtype = float_dtype()
        Z, e = _scaled_features(X, dtype, self._scale_exp)
        Z_fit, _ = _scaled_features(self.X_fit_, dtype, e)
        scores = _predict_rbf_jit(
            pad_rows(Z, dtype),
            pad_rows(Z_fit, dtype),
            pad_rows(self.dual_coef_, dtype),
            self._rbf_gamma(e, dtype),
        )
        return np.asarray(scores)[: len(X)]
