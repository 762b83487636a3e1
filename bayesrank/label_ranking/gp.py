"""The Gaussian-process label ranker (Chu & Ghahramani, "Preference learning with Gaussian
processes", ICML 2005, label preferences): XPGP's probit pair model on (instance, label)
entities, which gives calibrated label-order probabilities where the other label rankers give a
point ranking.

Each instance ``x_i`` and label ``a`` is an entity with a latent utility ``f(x_i, a)``; a
training ranking of ``x_i`` contributes its label pairs as preferences, ``a`` before ``b`` when
``f(x_i, a) + e > f(x_i, b) + e'`` (the probit likelihood, judge noise as in XPGP). The prior
is a product kernel over instances and labels,

    k((x, a), (x', b)) = k_X(x, x') k_L(a, b),

written as an ARD kernel on the entity's features ``[x, onehot(a)]``: its lengthscales on
``x`` give ``k_X``, those on the label indicators ``k_L(a, b) = exp(-(1/l_a^2 + 1/l_b^2)/2)``
for ``a != b`` (1 for ``a = b``): how much the labels' utilities move together. The
hyperparameters are learned by the EP evidence (``fit_hyperparameters``; ``learn=False`` keeps
the start). A new instance's utilities ``f(x, .)`` are the posterior's inductive prediction
(``Posterior.predict_new``), jointly Gaussian over its ``c`` labels, so

    P(a before b | x) = Phi((mu_a - mu_b) / sqrt(1 + v_a + v_b - 2 c_ab))

(Eq. 13-14 of the XPGP paper), and the predicted order sorts the labels by ``mu`` (it agrees
with every pairwise probability's majority, so it maximises the sum of the probabilities of
the pairs an order respects).

The training problem has ``n c`` entities and ``n c (c - 1) / 2`` pairs (every pair of each
ranking): EP's cost is cubic in ``n c``.
"""

from __future__ import annotations

import numpy as np

from ._checks import check_positive_int
from ._estimator import LabelRanker

__all__ = ["GPLabelRanker", "entity_features", "ranking_pairs"]


def entity_features(X: np.ndarray, n_labels: int) -> np.ndarray:
    """``(n c, d + c)``: row ``i c + a`` is ``[x_i, onehot(a)]``."""
    eye = np.eye(n_labels)
    return np.concatenate([np.repeat(X, n_labels, axis=0), np.tile(eye, (len(X), 1))], axis=1)


def ranking_pairs(orders: np.ndarray) -> np.ndarray:
    """``(n c (c-1) / 2, 2)`` entity pairs ``(i c + a, i c + b)``, ``a`` before ``b`` in
    instance ``i``'s order (``orders: (n, c)``)."""
    n, c = orders.shape
    s, t = np.triu_indices(c, 1)
    base = (np.arange(n) * c)[:, None]
    return np.stack([base + orders[:, s], base + orders[:, t]], -1).reshape(-1, 2)


class GPLabelRanker(LabelRanker):
    """The GP label ranker (module docstring).

    Args:
        learn: learn the kernel's lengthscales by the EP evidence (else the start: every
            lengthscale 1 on features scaled to about unit range).
        max_iter: EP's sweeps.

    Learned: ``posterior_`` (the ``Posterior`` of the training entities), ``prior_`` (the
    learned ``XPGP``), ``n_labels_``, ``n_features_in_``. ``predict_proba_pairs(X)``: ``(n,
    c, c)`` ``P(a before b | x)``; ``predict(X)``: label orders ``(n, c)``.
    """

    def __init__(self, learn: bool = True, max_iter: int = 200):
        self.learn = learn
        self.max_iter = max_iter

    def fit(self, X, rankings):
        """``X: (n, d)`` instances, ``rankings: (n, c)`` label orders. Returns ``self``."""
        from ..data.problem import PreferenceProblem
        from ..inference.engines import EP
        from ..kernels import ARD, XPGP
        from ..learning import fit_hyperparameters
        from ..model import XPGPModel

        if not isinstance(self.learn, bool):
            raise ValueError(f"learn must be True or False, got {self.learn!r}")
        check_positive_int(self.max_iter, "max_iter")
        X, rankings = self._check_fit_inputs(X, rankings)
        n, c = rankings.shape
        problem = PreferenceProblem.create(
            ranking_pairs(rankings), X=entity_features(X, c), n=n * c
        )
        prior = XPGP(ARD(1.0, np.ones(X.shape[1] + c)))
        if self.learn:
            prior = fit_hyperparameters(prior, [problem]).prior
        self.prior_ = prior
        self.posterior_ = XPGPModel(prior, EP(max_iter=self.max_iter)).fit(problem)
        self.n_labels_ = c
        self.n_features_in_ = X.shape[1]
        return self

    def _utilities(self, X):
        """Each instance's label utilities: means ``(n, c)`` and covariances ``(n, c, c)``."""
        X = self._check_X(X)
        c = self.n_labels_
        means, covs = [], []
        for start in range(0, len(X), 256):  # blocks: predict_new's covariance is (p, p)
            mean, cov = self.posterior_.predict_new(entity_features(X[start : start + 256], c))
            mean, cov = np.asarray(mean), np.asarray(cov)
            k = len(mean) // c
            means.append(mean.reshape(k, c))
            blocks = cov.reshape(k, c, k, c)[np.arange(k), :, np.arange(k), :]
            covs.append(blocks)
        return np.concatenate(means), np.concatenate(covs)

    def predict_proba_pairs(self, X) -> np.ndarray:
        """``(n, c, c)``: ``P(a before b | x)`` (module docstring); ``R + R^T = 1`` off the
        diagonal, the diagonal 0."""
        from scipy.special import ndtr

        mean, cov = self._utilities(X)
        var = np.diagonal(cov, axis1=1, axis2=2)
        delta_var = var[:, :, None] + var[:, None, :] - 2 * cov
        P = ndtr((mean[:, :, None] - mean[:, None, :]) / np.sqrt(1.0 + delta_var))
        c = self.n_labels_
        P[:, np.arange(c), np.arange(c)] = 0.0
        return P

    def predict(self, X) -> np.ndarray:
        """Label orders ``(n, c)``: the labels by decreasing posterior mean utility (equal
        means: the lower label first)."""
        mean, _ = self._utilities(X)
        return np.argsort(-mean, axis=1, kind="stable")
