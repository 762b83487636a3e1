"""L2-penalised logistic regression by damped Newton (IRLS), pure JAX: the base learner of
``RPC`` (one model per label pair, ``jax.vmap``-ed) and of ``ConstraintClassification``.

For rows ``x_i`` with targets ``y_i`` in ``{0, 1}`` and weights ``s_i >= 0``, the fit minimises
(the scikit-learn convention: ``C`` weighs the data, the intercept ``b`` is not penalised)::

    J(w, b) = 1/2 ||w||^2 + C sum_i s_i [ log(1 + exp(z_i)) - y_i z_i ],   z_i = x_i . w + b

a smooth, strictly convex function of ``w``. Newton's step solves ``H delta = -g`` with::

    g = [w; 0] + C X~^T (s * (p - y)),      H = diag(1, .., 1, 0) + C X~^T diag(s p (1 - p)) X~

(``X~ = [X, 1]``, ``p = sigmoid(z)``; ``H`` is positive definite, solved by Cholesky), i.e.
iteratively reweighted least squares. The step length is the longest of ``1, 1/2, 1/4, ..``
that passes Armijo's test (all evaluated at once), which makes it converge from ``w = 0``
whatever the data, quadratically near the solution. It stops when
``max |g| <= tol * (1 + C sum_i s_i max |X~|)`` (the maximum over the rows of positive weight).

With an intercept and only one class among the weighted rows, ``J`` has no minimiser (the
intercept runs to infinity); the fit then returns ``w = 0`` and ``b = +inf`` (all ``y = 1``) or
``-inf`` (all ``y = 0``), so that ``sigmoid(x . w + b)`` is exactly the observed frequency, 1 or
0, and says so in ``LogisticFit.degenerate``. Rows of weight 0 change nothing (padding).

Everything here is a pure function of arrays (``fit_logistic``'s options ``fit_intercept``,
``max_iter`` are static): ``jax.jit`` and ``jax.vmap`` it as needed. It runs in the dtype of
``X`` (float64 under ``jax_enable_x64``).
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import jax.scipy.linalg

__all__ = [
    "CONVERGED",
    "MAX_ITER",
    "STALLED",
    "LogisticFit",
    "default_tol",
    "fit_logistic",
    "logistic_objective",
]

#: ``LogisticFit.status``: met the tolerance (or degenerate: nothing to solve); ran out of
#: iterations; the line search found no decrease (round-off floor reached above ``tol``).
CONVERGED, MAX_ITER, STALLED = 0, 1, 2
_RUNNING = -1
_ARMIJO = 1e-4
_HALVINGS = 30


class LogisticFit(NamedTuple):
    """A fitted logistic regression (scalars and vectors; batched under ``vmap``).

    Attributes:
        coef: ``(d,)`` weights ``w``.
        intercept: ``()`` ``b`` (0 without intercept; +-inf for a degenerate fit).
        n_iter: ``()`` Newton iterations.
        status: ``()`` int32, ``CONVERGED``, ``MAX_ITER`` or ``STALLED``.
        grad_norm: ``()`` final ``max |g|``.
        degenerate: ``()`` bool, one class only (with an intercept): no finite minimiser.
    """

    coef: jax.Array
    intercept: jax.Array
    n_iter: jax.Array
    status: jax.Array
    grad_norm: jax.Array
    degenerate: jax.Array


def default_tol(dtype) -> float:
    """The stopping tolerance used for ``tol=None``: ``max(1e-10, 1000 eps)`` of ``dtype``
    (1e-10 in float64, about 1.2e-4 in float32)."""
    return max(1e-10, 1000.0 * float(jnp.finfo(dtype).eps))


def logistic_objective(coef, intercept, X, y, sample_weight, C):
    """``J(w, b)`` of the module docstring.

    Args:
      coef: ``(d,)``; intercept: ``()``; X: ``(n, d)``; y: ``(n,)`` in ``{0, 1}``;
      sample_weight: ``(n,)`` >= 0; C: ``()`` > 0.

    Returns:
      ``()`` the penalised negative log-likelihood.
    """
    z = X @ coef + intercept
    nll = jnp.sum(sample_weight * (jax.nn.softplus(z) - y * z))
    return 0.5 * jnp.sum(coef**2) + C * nll


def fit_logistic(X, y, sample_weight=None, C=1.0, *, fit_intercept=True, max_iter=100, tol=None):
    """Minimise ``J`` (module docstring) by damped Newton from ``w = 0, b = 0``.

    Args:
      X: ``(n, d)`` floating rows. y: ``(n,)`` targets in ``{0, 1}`` (floats allowed).
      sample_weight: ``(n,)`` weights >= 0, None for ones. C: ``()`` > 0, weight of the data term.
      fit_intercept: static bool. max_iter: static int >= 1. tol: float or None
        (``default_tol`` of ``X``'s dtype).

    Returns:
      ``LogisticFit`` with ``coef: (d,)``, ``intercept: ()``, and the solver's diagnostics.
    """
    X = jnp.asarray(X)
    dtype = X.dtype
    n, d = X.shape
    y = jnp.asarray(y, dtype)
    s = jnp.ones(n, dtype) if sample_weight is None else jnp.asarray(sample_weight, dtype)
    C = jnp.asarray(C, dtype)
    tol = default_tol(dtype) if tol is None else tol
    if fit_intercept:
        Xt = jnp.concatenate([X, jnp.ones((n, 1), dtype)], axis=1)
        pen = jnp.concatenate([jnp.ones(d, dtype), jnp.zeros(1, dtype)])
        pos, neg = jnp.sum(s * y), jnp.sum(s * (1 - y))
        degenerate = (pos <= 0) | (neg <= 0)
    else:
        Xt, pen = X, jnp.ones(d, dtype)
        pos = neg = jnp.zeros((), dtype)
        degenerate = jnp.zeros((), bool)
    k = Xt.shape[1]
    # The gradient's scale, from the weighted rows only (padding never moves the tolerance).
    gscale = 1.0 + C * jnp.sum(s) * jnp.max(jnp.where(s[:, None] > 0, jnp.abs(Xt), 0.0))
    eps = jnp.finfo(dtype).eps

    def objective(theta):
        z = Xt @ theta
        return 0.5 * jnp.sum(pen * theta**2) + C * jnp.sum(s * (jax.nn.softplus(z) - y * z))

    def gradient(theta):
        p = jax.nn.sigmoid(Xt @ theta)
        return pen * theta + C * (Xt.T @ (s * (p - y))), p

    def body(state):
        theta, f, g, p, it, _ = state
        h = s * p * (1 - p)
        H = jnp.diag(pen) + C * (Xt.T * h) @ Xt
        # A relative jitter keeps the solve finite when every p saturates; it changes the step,
        # never the fixed point (g = 0).
        H = H + (eps * (1.0 + jnp.trace(H) / k)) * jnp.eye(k, dtype=dtype)
        step = jax.scipy.linalg.cho_solve(jax.scipy.linalg.cho_factor(H), -g)
        slope = g @ step
        # Armijo's test, relaxed by the round-off of f itself, so that full Newton steps are
        # still taken where the decrease is below f's resolution (near the solution).
        slack = 8 * eps * jnp.abs(f)

        # All step lengths 1, 1/2, .., 2^-(_HALVINGS-1) at once (one matrix product), the
        # longest that passes.
        ts = 0.5 ** jnp.arange(_HALVINGS, dtype=dtype)
        cand = theta[:, None] + step[:, None] * ts  # (k, _HALVINGS)
        Z = Xt @ cand  # (n, _HALVINGS)
        fs = 0.5 * jnp.sum(pen[:, None] * cand**2, axis=0) + C * jnp.sum(
            s[:, None] * (jax.nn.softplus(Z) - y[:, None] * Z), axis=0
        )
        passes = fs <= f + _ARMIJO * ts * slope + slack
        j = jnp.argmax(passes)
        t, f_new = ts[j], fs[j]
        ok = jnp.all(jnp.isfinite(step)) & passes[j]
        theta = jnp.where(ok, theta + t * step, theta)
        f = jnp.where(ok, f_new, f)
        g, p = gradient(theta)
        it = it + 1
        gnorm = jnp.max(jnp.abs(g))
        status = jnp.where(
            gnorm <= tol * gscale,
            CONVERGED,
            jnp.where(~ok, STALLED, jnp.where(it >= max_iter, MAX_ITER, _RUNNING)),
        )
        return theta, f, g, p, it, status.astype(jnp.int32)

    theta0 = jnp.zeros(k, dtype)
    g0, p0 = gradient(theta0)
    done0 = degenerate | (jnp.max(jnp.abs(g0)) <= tol * gscale)
    status0 = jnp.where(done0, CONVERGED, _RUNNING).astype(jnp.int32)
    state = (theta0, objective(theta0), g0, p0, jnp.zeros((), jnp.int32), status0)
    theta, _, g, _, it, status = jax.lax.while_loop(lambda st: st[5] == _RUNNING, body, state)

    coef = theta[:d]
    if fit_intercept:
        inf = jnp.asarray(jnp.inf, dtype)
        b_degenerate = jnp.where(neg <= 0, jnp.where(pos > 0, inf, 0.0), -inf)
        intercept = jnp.where(degenerate, b_degenerate, theta[d])
        coef = jnp.where(degenerate, 0.0, coef)
    else:
        intercept = jnp.zeros((), dtype)
    gnorm = jnp.where(degenerate, 0.0, jnp.max(jnp.abs(g)))
    return LogisticFit(coef, intercept, it, status, gnorm, degenerate)
