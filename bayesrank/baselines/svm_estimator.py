"""The ``RankSVM`` estimator: scikit-learn's face on the cores of ``bayesrank.baselines.ranksvm``.

It builds the within-query pairs from ``fit(X, y, qid)``, pads documents and pairs to bucketed
sizes (``bayesrank.baselines._arrays``) and calls module-level jitted cores whose static
arguments are ``loss`` and ``max_iter`` only, so a refit on data of similar size compiles
nothing.

It also rescales the features by a power of two (exact) and maps the solution back, so that
features at any scale float64 holds give the problem's own answer, or ``converged_ = False``
with a warning where that answer is out of reach (see ``RankSVM``).
"""

from __future__ import annotations

import warnings
from functools import partial
from typing import NamedTuple

import jax.numpy as jnp
import numpy as np

from ..compiler import jit
from ..data.batch import pad_pairs, pad_rows
from ..data.checks import options
from ..diagnostics import ConvergenceWarning
from . import newton
from ._arrays import PAIR_FILLER, float_dtype
from ._data import pairs_within_queries
from ._estimator import Ranker, check_inputs
from .ranksvm import (
    KERNELS,
    _check_settings,
    _fit_linear_regularised,
    _scale_exponent,
    default_tol,
    fit_kernel,
    rbf_kernel,
)

__all__ = ["RankSVM"]


def _fit_rbf(X, doc_mask, pairs, C, pair_mask, gamma, **settings):
    """The kernel estimator's core: padded documents (``doc_mask`` False) get zero rows and
    columns of ``K``. Returns the solution and the training scores ``K beta``."""
    K = jnp.where(doc_mask[:, None] & doc_mask[None, :], rbf_kernel(X, X, gamma), 0.0)
    sol = fit_kernel(K, pairs, C, pair_mask, **settings)
    return sol, K @ sol.beta


def _predict_rbf(X, X_fit, beta, gamma):
    return rbf_kernel(X, X_fit, gamma) @ beta


# The estimator's compiled cores: static are the loss (a string) and max_iter (a loop bound).
@partial(jit, static_argnames=("loss", "max_iter"))
def _fit_linear_jit(X, pairs, C, pair_mask, lam, **settings):
    return _fit_linear_regularised(X, pairs, C, pair_mask, lam, **settings)


@partial(jit, static_argnames=("loss", "max_iter"))
def _fit_rbf_jit(X, doc_mask, pairs, C, pair_mask, gamma, **settings):
    return _fit_rbf(X, doc_mask, pairs, C, pair_mask, gamma, **settings)


@jit
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
        P, pair_mask = pad_pairs(pairs, filler=PAIR_FILLER, dtype=np.int32)
        sol = _fit_linear_jit(
            pad_rows(Z, dtype=dtype),
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
        P, pair_mask = pad_pairs(pairs, filler=PAIR_FILLER, dtype=np.int32)
        Zp = pad_rows(Z, dtype=dtype)
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
            pad_rows(Z, dtype=dtype),
            pad_rows(Z_fit, dtype=dtype),
            pad_rows(self.dual_coef_, dtype=dtype),
            self._rbf_gamma(e, dtype),
        )
        return np.asarray(scores)[: len(X)]
