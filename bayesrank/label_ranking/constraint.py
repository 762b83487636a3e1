"""Constraint classification for label ranking (Har-Peled, Roth & Zimak 2002, "Constraint
classification: a new approach to multiclass classification and ranking", NIPS / ALT).

Model. One linear utility per label, ``W = (w_1, .., w_c)``, ``w_a`` in ``R^d`` (here
``R^(d+1)`` with a per-label bias when ``fit_intercept``: ``x~ = [x, 1]``); an instance is ranked
by sorting the utilities::

    h(x) = argsort_a  w_a . x~        (a before b  iff  w_a . x~ > w_b . x~)

Learning. A preference ``a > b`` for ``x`` is the constraint ``(w_a - w_b) . x~ > 0``, i.e.
``W . phi(x, a, b) > 0`` for the expanded vector in ``R^(c k)`` (``k = d`` or ``d + 1``)::

    phi(x, a, b) = [0 .. 0, x~ (block a), 0 .. 0, -x~ (block b), 0 .. 0]

so each constraint is a binary example in the expanded space, positive ``phi(x, a, b)`` (and,
in the paper, the negative ``-phi(x, a, b)``). A complete ranking gives the ``c(c-1)/2``
constraints of its label pairs. The expanded examples are learned with a linear classifier
without intercept:

* ``loss="logistic"`` (default): ``L2``-penalised logistic regression (``logistic``), i.e.
  ``min_W 1/2 ||W||^2 + C sum_i sum_{a > b in ranking i} log(1 + exp(-W . phi(x_i, a, b)))``,
  one damped-Newton solve. The paper's mirrored negative example ``(-phi, -1)`` adds the same
  term again, so including it would only double ``C``. The biases are penalised with the weights
  (they are part of ``W``). ``W`` is determined only up to a common shift of all ``w_a``; the
  penalty picks the one with ``sum_a w_a = 0``.
* ``loss="perceptron"``: the averaged perceptron on the expanded examples (the paper's
  learner): for each constraint violated, ``W <- W + phi``, i.e. ``w_a += x~``, ``w_b -= x~``;
  ``max_iter`` passes over the constraints in a random order (``random_state``); the average of
  ``W`` over all steps is returned.

Rankings are label ORDERS ``(n, c)`` (row: labels from most to least preferred).
"""

from __future__ import annotations

from functools import partial

import jax
import jax.numpy as jnp
import numpy as np

from ..compiler import jit
from ..data.batch import pad_rows
from ..data.checks import MAX_SEED, check_int
from ._checks import check_C, check_positive_int
from ._estimator import LabelRanker, padded_size, warn_unconverged
from .logistic import CONVERGED, default_tol, fit_logistic
from .rpc import label_pairs, pairwise_targets

__all__ = ["ConstraintClassification", "expand_constraints", "utility_orders"]

_LOSSES = ("logistic", "perceptron")


def _augment(X, fit_intercept: bool):
    X = jnp.asarray(X)
    if not fit_intercept:
        return X
    return jnp.concatenate([X, jnp.ones((X.shape[0], 1), X.dtype)], axis=1)


def expand_constraints(X, pairs, n_labels: int, fit_intercept: bool = True):
    """The expanded examples ``phi(x_i, a, b)`` of every instance and label pair.

    Args:
      X: ``(n, d)``; pairs: ``(P, 2)`` label pairs ``(a, b)``; n_labels: static ``c``;
      fit_intercept: static, append the constant feature (``k = d + 1``; else ``k = d``).

    Returns:
      ``(n, P, c * k)``: block ``a`` holds ``x~_i``, block ``b`` holds ``-x~_i``, the rest 0.
    """
    Xt = _augment(X, fit_intercept)
    pairs = jnp.asarray(pairs)
    sign = jax.nn.one_hot(pairs[:, 0], n_labels, dtype=Xt.dtype) - jax.nn.one_hot(
        pairs[:, 1], n_labels, dtype=Xt.dtype
    )  # (P, c)
    Z = sign[None, :, :, None] * Xt[:, None, None, :]  # (n, P, c, k)
    return Z.reshape(Xt.shape[0], pairs.shape[0], -1)


@jit
def utility_orders(scores):
    """Labels by decreasing utility, equal utilities in increasing label index:
    ``(n, c) -> (n, c)`` orders."""
    return jnp.argsort(-jnp.asarray(scores), axis=-1, stable=True)


@partial(jit, static_argnames=("n_labels", "fit_intercept", "max_iter"))
def _fit_logistic_cc(X, Y, s, pairs, C, tol, n_labels, fit_intercept, max_iter):
    Z = expand_constraints(X, pairs, n_labels, fit_intercept)
    n, P, ck = Z.shape
    fit = fit_logistic(
        Z.reshape(n * P, ck),
        Y.reshape(n * P),
        jnp.repeat(s, P),
        C,
        fit_intercept=False,
        max_iter=max_iter,
        tol=tol,
    )
    return fit.coef.reshape(n_labels, -1), fit.n_iter, fit.status == CONVERGED


@partial(jit, static_argnames=("n_labels", "fit_intercept", "n_epochs"))
def _fit_perceptron_cc(X, Y, s, pairs, key, n_labels, fit_intercept, n_epochs):
    Xt = _augment(X, fit_intercept)
    n, k = Xt.shape
    P = pairs.shape[0]
    rows = jnp.repeat(jnp.arange(n), P)
    cols = jnp.tile(jnp.arange(P), n)
    sign = 2 * Y - 1  # (n, P): +1 if pairs[p, 0] precedes pairs[p, 1]

    def step(carry, t):
        W, W_sum, n_live, mistakes = carry
        i, p = rows[t], cols[t]
        a, b, sg, x = pairs[p, 0], pairs[p, 1], sign[i, p], Xt[i]
        live = s[i] > 0
        wrong = live & (sg * ((W[a] - W[b]) @ x) <= 0)
        delta = jnp.where(wrong, sg, 0.0) * x
        W = W.at[a].add(delta).at[b].add(-delta)
        W_sum = W_sum + jnp.where(live, 1.0, 0.0) * W
        return (W, W_sum, n_live + live, mistakes + wrong), None

    def epoch(carry, key_e):
        W, W_sum, n_live, _ = carry
        order = jax.random.permutation(key_e, n * P)
        carry, _ = jax.lax.scan(step, (W, W_sum, n_live, jnp.zeros((), jnp.int32)), order)
        return carry, None

    W0 = jnp.zeros((n_labels, k), Xt.dtype)
    init = (W0, W0, jnp.zeros((), jnp.int32), jnp.zeros((), jnp.int32))
    (_, W_sum, n_live, last_mistakes), _ = jax.lax.scan(
        epoch, init, jax.random.split(key, n_epochs)
    )
    return W_sum / jnp.maximum(n_live, 1), last_mistakes == 0


class ConstraintClassification(LabelRanker):
    """Constraint classification: linear utilities ``w_a`` learned from the pairwise constraints
    ``(w_a - w_b) . x > 0`` in the expanded space (module docstring).

    Args:
      C: inverse regularisation strength (> 0; ``loss="logistic"`` only).
      loss: ``"logistic"`` (penalised logistic regression, Newton) or ``"perceptron"``
        (averaged perceptron, Har-Peled et al.'s learner).
      fit_intercept: a bias per label (the constant feature).
      max_iter: Newton iterations (logistic) or passes over the constraints (perceptron), >= 1.
      tol: Newton's relative gradient tolerance; None: ``logistic.default_tol``.
      random_state: int seed of the perceptron's visiting order, in ``[0, 2^63 - 1]``
        (``data.checks.MAX_SEED``: ``jax.random.PRNGKey`` holds an int64).

    Learned attributes:
      n_features_in_: d. n_labels_: c. coef_: ``(c, d)`` the ``w_a``. intercept_: ``(c,)``
      biases (zeros without intercept). n_iter_: Newton iterations or passes. converged_: bool,
      Newton met its tolerance (logistic; where it did not, a ``ConvergenceWarning`` names the
      feature scale and ``C``), or the last pass violated no constraint (perceptron).
    """

    def __init__(
        self, C=1.0, loss="logistic", fit_intercept=True, max_iter=100, tol=None, random_state=0
    ):
        self.C = C
        self.loss = loss
        self.fit_intercept = fit_intercept
        self.max_iter = max_iter
        self.tol = tol
        self.random_state = random_state

    def _check_params(self):
        if self.loss not in _LOSSES:
            raise ValueError(f"loss must be one of {_LOSSES}, got {self.loss!r}")
        if not isinstance(self.fit_intercept, bool):
            raise ValueError(f"fit_intercept must be a bool, got {self.fit_intercept!r}")
        check_int(self.random_state, "random_state", 0, MAX_SEED)
        return check_C(self.C), check_positive_int(self.max_iter, "max_iter")

    def fit(self, X, rankings):
        """Learn ``W`` from the pairwise constraints of the rankings.

        Args:
          X: ``(n, d)`` finite features. rankings: ``(n, c)`` label orders.

        Returns:
          self.

        Raises:
          ValueError: for bad options, or naming the culprit among the inputs.
        """
        C, max_iter = self._check_params()
        X, orders = self._check_fit_inputs(X, rankings)
        dtype = jnp.result_type(float)
        n, c = orders.shape
        pairs = label_pairs(c)
        m = padded_size(n)
        Xp = jnp.asarray(pad_rows(X, m), dtype)
        Yp = jnp.asarray(pad_rows(np.asarray(pairwise_targets(orders, pairs)), m), dtype)
        s = jnp.asarray(np.arange(m) < n, dtype)
        jpairs = jnp.asarray(pairs)
        if self.loss == "logistic":
            tol = default_tol(dtype) if self.tol is None else check_C(self.tol, "tol")
            W, n_iter, converged = _fit_logistic_cc(
                Xp,
                Yp,
                s,
                jpairs,
                jnp.asarray(C, dtype),
                jnp.asarray(tol, dtype),
                n_labels=c,
                fit_intercept=self.fit_intercept,
                max_iter=max_iter,
            )
        else:
            key = jax.random.PRNGKey(int(self.random_state))
            W, converged = _fit_perceptron_cc(
                Xp,
                Yp,
                s,
                jpairs,
                key,
                n_labels=c,
                fit_intercept=self.fit_intercept,
                n_epochs=max_iter,
            )
            n_iter = max_iter
        W = np.asarray(W)
        d = X.shape[1]
        self.n_features_in_ = d
        self.n_labels_ = c
        self.coef_ = W[:, :d]
        self.intercept_ = W[:, d] if self.fit_intercept else np.zeros(c, W.dtype)
        self.n_iter_ = int(n_iter)
        self.converged_ = bool(converged)
        if self.loss == "logistic":  # a perceptron that does not separate is no fault
            warn_unconverged("ConstraintClassification", converged, X, C, "Newton solves")
        return self

    def decision_function(self, X):
        """The utilities ``w_a . x + bias_a``: ``(n, d) -> (n, c)``."""
        X = self._check_X(X)
        return X @ self.coef_.T + self.intercept_

    def predict(self, X):
        """Label orders by decreasing utility: ``(n, d) -> (n, c)`` int64 (equal utilities in
        increasing label index)."""
        return np.asarray(utility_orders(self.decision_function(X))).astype(np.int64)
