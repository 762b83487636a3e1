"""Ranking by pairwise comparison (RPC; Fürnkranz & Hüllermeier 2003, "Pairwise preference
learning and ranking", ECML; Hüllermeier, Fürnkranz, Cheng & Brinker 2008, "Label ranking by
learning pairwise preferences", Artificial Intelligence 172).

Training. For every pair of labels ``a < b`` (``c(c-1)/2`` pairs), a binary model ``M_ab`` is
learned from the instances whose ranking orders the pair: target 1 when ``a`` precedes ``b``,
0 otherwise. With complete rankings every instance is used by every model. The base learner is
L2-penalised logistic regression (``logistic.fit_logistic``, one damped-Newton solve per pair,
``jax.vmap``-ed over the pairs), so ``M_ab(x)`` estimates ``P(a before b | x)``.

Prediction. The models induce a valued preference relation (the slides' ``R_x``)::

    R_x(a, b) = M_ab(x)          if a < b
    R_x(a, b) = 1 - M_ba(x)      if a > b

and each label is scored by weighted voting, ``S(a) = sum_{b != a} R_x(a, b)``; labels are
ranked by decreasing score, ``a`` before ``b`` iff ``S(a) > S(b)`` (equal scores: lower label
index first). Hüllermeier et al. (2008, Sec. 5) show that if ``R_x`` holds the true pairwise
marginals ``P(a before b | x)``, this ranking minimises the expected sum of squared position
differences (the Spearman loss): ``S(a) = c - 1 - E[position of a]``, and sorting by expected
position minimises ``E sum_a (pos(a) - pos_hat(a))^2`` (rearrangement inequality). It does not
in general maximise ``sum_{a before b} R_x(a, b)`` (the expected Kendall agreement), even for
three labels; the tests enumerate both statements.

Rankings are label ORDERS ``(n, c)`` (row: labels from most to least preferred).
"""

from __future__ import annotations

from functools import partial

import jax
import jax.numpy as jnp
import numpy as np

from ..compiler import jit
from ..data.batch import pad_rows
from ._checks import check_C, check_positive_int
from ._estimator import LabelRanker, padded_size, warn_unconverged
from .logistic import CONVERGED, default_tol, fit_logistic
from .metrics import orders_to_positions

__all__ = [
    "RPC",
    "label_pairs",
    "pairwise_targets",
    "preference_matrix",
    "voting_orders",
    "voting_scores",
]


def label_pairs(n_labels: int) -> np.ndarray:
    """The pairs ``(a, b)``, ``a < b``, in lexicographic order: ``(c(c-1)/2, 2)`` int64."""
    a, b = np.triu_indices(n_labels, k=1)
    return np.stack([a, b], axis=1).astype(np.int64)


def pairwise_targets(orders, pairs):
    """Whether ``a`` precedes ``b`` in each ranking, for each pair.

    Args:
      orders: ``(n, c)`` label orders; pairs: ``(P, 2)`` label pairs ``(a, b)``.

    Returns:
      ``(n, P)`` floats, 1 where ``a`` is before ``b`` in ``orders[i]``, else 0.
    """
    pos = orders_to_positions(orders)
    pairs = jnp.asarray(pairs)
    return (pos[:, pairs[:, 0]] < pos[:, pairs[:, 1]]).astype(jnp.result_type(float))


def preference_matrix(p_pairs, pairs, n_labels: int):
    """The relation ``R[i, a, b] = P(a before b | x_i)`` from the pair models' outputs.

    Args:
      p_pairs: ``(n, P)`` probabilities that ``pairs[k, 0]`` precedes ``pairs[k, 1]``;
      pairs: ``(P, 2)``; n_labels: static ``c``.

    Returns:
      ``(n, c, c)`` with ``R[i, b, a] = 1 - R[i, a, b]`` and a zero diagonal.
    """
    p_pairs = jnp.asarray(p_pairs)
    pairs = jnp.asarray(pairs)
    a, b = pairs[:, 0], pairs[:, 1]
    R = jnp.zeros((p_pairs.shape[0], n_labels, n_labels), p_pairs.dtype)
    return R.at[:, a, b].set(p_pairs).at[:, b, a].set(1 - p_pairs)


@jit
def voting_scores(R):
    """``S[i, a] = sum_{b != a} R[i, a, b]``: ``(n, c, c) -> (n, c)`` (the diagonal is ignored)."""
    R = jnp.asarray(R)
    return jnp.sum(R, axis=-1) - jnp.diagonal(R, axis1=-2, axis2=-1)


@jit
def voting_orders(R):
    """Labels by decreasing weighted vote ``S`` (``voting_scores``), equal votes in increasing
    label index: ``(n, c, c) -> (n, c)`` orders."""
    return jnp.argsort(-voting_scores(R), axis=-1, stable=True)


@partial(jit, static_argnames=("max_iter",))
def _fit_pairs(X, Y, s, C, tol, max_iter):
    """One logistic regression per row of ``Y: (P, n)`` on the shared ``X: (n, d)``."""
    fit = partial(fit_logistic, fit_intercept=True, max_iter=max_iter, tol=tol)
    return jax.vmap(lambda y: fit(X, y, s, C))(Y)


@partial(jit, static_argnames=("n_labels",))
def _predict_pairs(X, coef, intercept, pairs, n_labels):
    z = X @ coef.T + intercept  # (n, P); intercept +-inf for a pair with one outcome
    return preference_matrix(jax.nn.sigmoid(z), pairs, n_labels)


class RPC(LabelRanker):
    """Ranking by pairwise comparison with L2-penalised logistic regression per label pair.

    Each pair model minimises ``1/2 ||w||^2 + C sum_i log-loss_i`` (intercept unpenalised;
    ``logistic`` module). Scale the features first (the penalty is not scale-invariant), e.g.
    in a ``sklearn.pipeline.Pipeline`` with a ``StandardScaler``.

    Args:
      C: inverse regularisation strength (> 0).
      max_iter: Newton iterations per pair model (>= 1).
      tol: Newton's relative gradient tolerance; None: ``logistic.default_tol`` of the float dtype.

    Learned attributes:
      n_features_in_: d. n_labels_: c. pairs_: ``(P, 2)`` the label pairs ``(a, b)``, ``a < b``.
      coef_: ``(P, d)`` and intercept_: ``(P,)`` of the models of ``P(a before b | x)``
        (intercept ``+-inf`` with ``coef = 0`` for a pair ordered the same way in all training
        rankings: its model predicts that order with probability 1).
      n_iter_: ``(P,)`` Newton iterations. converged_: ``(P,)`` bool, met the tolerance (where
        one did not, a ``ConvergenceWarning`` names the feature scale and ``C``).
    """

    def __init__(self, C=1.0, max_iter=100, tol=None):
        self.C = C
        self.max_iter = max_iter
        self.tol = tol

    def fit(self, X, rankings):
        """Fit the ``c(c-1)/2`` pair models.

        Args:
          X: ``(n, d)`` finite features. rankings: ``(n, c)`` label orders (each row a
            permutation of ``0..c-1``, most preferred first).

        Returns:
          self.

        Raises:
          ValueError: for bad options, or naming the culprit among the inputs (a row that is not
            a permutation, a NaN in ``X``, different numbers of rows).
        """
        C = check_C(self.C)
        max_iter = check_positive_int(self.max_iter, "max_iter")
        X, orders = self._check_fit_inputs(X, rankings)
        dtype = jnp.result_type(float)
        tol = default_tol(dtype) if self.tol is None else check_C(self.tol, "tol")
        n, c = orders.shape
        pairs = label_pairs(c)
        Y = np.asarray(pairwise_targets(orders, pairs))  # (n, P)
        m = padded_size(n)
        Xp = jnp.asarray(pad_rows(X, m), dtype)
        Yp = jnp.asarray(pad_rows(Y, m).T, dtype)  # (P, m)
        s = jnp.asarray(np.arange(m) < n, dtype)
        fits = _fit_pairs(Xp, Yp, s, jnp.asarray(C, dtype), jnp.asarray(tol, dtype), max_iter)
        self.n_features_in_ = X.shape[1]
        self.n_labels_ = c
        self.pairs_ = pairs
        self.coef_ = np.asarray(fits.coef)
        self.intercept_ = np.asarray(fits.intercept)
        self.n_iter_ = np.asarray(fits.n_iter)
        self.converged_ = np.asarray(fits.status) == CONVERGED
        warn_unconverged("RPC", self.converged_, X, C, "label-pair models")
        return self

    def predict_proba_pairs(self, X):
        """The valued preference relation ``R[i, a, b] = P(a before b | x_i)``.

        Args:
          X: ``(n, d)``.

        Returns:
          ``(n, c, c)`` NumPy array, ``R[i, b, a] = 1 - R[i, a, b]``, zero diagonal.
        """
        X = self._check_X(X)
        dtype = jnp.result_type(float)
        n = X.shape[0]
        Xp = jnp.asarray(pad_rows(X, padded_size(n)), dtype)
        R = _predict_pairs(
            Xp,
            jnp.asarray(self.coef_, dtype),
            jnp.asarray(self.intercept_, dtype),
            jnp.asarray(self.pairs_),
            self.n_labels_,
        )
        return np.asarray(R[:n])

    def decision_function(self, X):
        """The weighted votes ``S[i, a] = sum_{b != a} P(a before b | x_i)``:
        ``(n, d) -> (n, c)``."""
        return np.asarray(voting_scores(self.predict_proba_pairs(X)))

    def predict(self, X):
        """Label orders by weighted voting: ``(n, d) -> (n, c)`` int64 (row: labels from most
        to least preferred; equal votes in increasing label index)."""
        return np.asarray(voting_orders(self.predict_proba_pairs(X))).astype(np.int64)
