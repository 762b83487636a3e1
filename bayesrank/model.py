"""The user-facing model: an XPGP prior plus EP, and the posterior it returns.

    model = XPGPModel(XPGP(RBF(), (RegularizedLaplacian(),), jnp.array([1.0, 1.0])))
    posterior = model.fit(PreferenceProblem.create(pairs, X=X, relations=[W]))
    posterior.predict_pairs(held_out).prob        # P(i > j | data), Eq. 13-14
    posterior.rank()                              # entity indices, best first

The functional core (:mod:`bayesrank.inference.ep`, :mod:`bayesrank.predict`) is what to
``jit`` / ``vmap``; this layer is host-side convenience for one problem.
"""

from __future__ import annotations

from dataclasses import dataclass

import jax
import jax.numpy as jnp
import numpy as np

from .data.problem import PreferenceProblem
from .inference import ep
from .kernels.xpgp import XPGP, ComponentPosterior, component_posterior
from .predict import PairPrediction, predict_new, predict_pairs, probability_matrix
from .threads import one_blas_thread

__all__ = ["Posterior", "XPGPModel"]


@dataclass(frozen=True, eq=False)
class Posterior:
    """An EP posterior over one problem's entities, with prediction methods."""

    prior: XPGP
    problem: PreferenceProblem
    graphs: tuple
    result: ep.EPPosterior

    @property
    def mean(self) -> jax.Array:
        return self.result.mean

    @property
    def cov(self) -> jax.Array:
        return self.result.cov

    @property
    def log_evidence(self) -> jax.Array:
        return self.result.log_evidence

    def predict_pairs(self, pairs) -> PairPrediction:
        """P(i > j | data) and the moments of ``xi_hat_i - xi_hat_j`` for ``pairs: (p, 2)``."""
        pairs = np.asarray(pairs)
        if pairs.ndim != 2 or pairs.shape[1] != 2:
            raise ValueError(f"pairs must be (p, 2), got shape {pairs.shape}")
        bad = np.argwhere((pairs < 0) | (pairs >= self.problem.n))
        if bad.size:
            r, c = bad[0]
            raise ValueError(
                f"pairs[{r}, {c}] = {pairs[r, c]} is not an entity index (n = {self.problem.n})"
            )
        return predict_pairs(self.mean, self.cov, jnp.asarray(pairs))

    def probability_matrix(self) -> jax.Array:
        """``(n, n)`` matrix of P(i > j | data)."""
        return probability_matrix(self.mean, self.cov)

    def scores(self) -> tuple[jax.Array, jax.Array]:
        """Posterior mean and variance of every entity's preference degree."""
        return self.mean, jnp.diag(self.cov)

    def rank(self) -> np.ndarray:
        """Entity indices by decreasing posterior mean (ties by index)."""
        return np.argsort(-np.asarray(self.mean), kind="stable")

    def components(self) -> ComponentPosterior:
        """Posterior of the attribute part, each relation part (and the entity effect)."""
        parts = self.prior.components(self.problem.X, self.graphs)
        return component_posterior(parts, self.mean, self.cov)

    def predict_new(self, X_new) -> tuple[jax.Array, jax.Array]:
        """Inductive posterior ``(mean, cov)`` of ``xi_hat`` at new entities ``X_new: (p, d)``.

        Needs an attribute-only prior (relations tie entities through a graph that a new entity
        is not in: add it to the problem instead, without pairs, for transductive prediction).
        """
        prior = self.prior
        if prior.relations or prior.attribute is None:
            raise ValueError(
                "predict_new needs an attribute-only prior; add new entities to "
                "the problem (without pairs) to predict them transductively"
            )
        X_new = np.asarray(X_new, dtype=np.float64)
        scale = prior_weight_scale(prior)
        K_cross = scale * prior.attribute(self.problem.X, X_new)
        K_new = scale * prior.attribute(X_new)
        if prior.entity is not None:
            K_new = K_new + prior.entity.scale**2 / (2 * prior.sigma**2) * jnp.eye(len(X_new))
        return predict_new(
            self.mean, self.cov, jnp.asarray(self.problem.pairs), self.result.sites, K_cross, K_new
        )


def prior_weight_scale(prior: XPGP) -> jax.Array:
    """``w_1^2 / (2 sigma^2)``: the factor of the attribute kernel in ``K`` (Eq. 5)."""
    w1 = 1.0 if prior.weights is None else jnp.asarray(prior.weights)[0]
    return w1**2 / (2 * prior.sigma**2)


class XPGPModel:
    """XPGP prior + EP, optionally with hyperparameter learning (``bayesrank.learning``).

    Args:
        prior: the :class:`~bayesrank.kernels.xpgp.XPGP` prior.
        schedule, max_iter, tol, damping, precision: EP settings (see
            :func:`bayesrank.inference.ep.fit`; ``precision="mixed"`` is faster on a CPU from a
            cold start).
    """

    def __init__(
        self,
        prior: XPGP,
        *,
        schedule: str = "parallel",
        max_iter: int = 200,
        tol: float | None = None,
        damping: float = 1.0,
        precision: str = "full",
    ):
        self.prior = prior
        self.precision = precision
        self.schedule = schedule
        self.max_iter = max_iter
        self.tol = tol
        self.damping = damping

    def covariance(self, problem: PreferenceProblem) -> tuple[jax.Array, tuple]:
        """The prior covariance ``K: (n, n)`` of the problem and the prepared graph data."""
        graphs = self.prior.prepare(problem.relations)
        X = None if problem.X is None else jnp.asarray(problem.X)
        return self.prior.covariance(X, graphs), graphs

    def fit(
        self,
        problem: PreferenceProblem,
        sites: ep.Sites | None = None,
        *,
        learn_hyperparameters: bool | str = False,
        **learning_options,
    ) -> Posterior:
        """EP posterior of the problem's entities (``sites``: optional warm start).

        ``learn_hyperparameters``: ``True`` or ``"em"`` (EM-EP), ``"evidence"`` (evidence
        maximisation), or ``False`` (keep the prior as given). ``learning_options`` go to
        :func:`bayesrank.learning.fit_hyperparameters`. The fitted prior becomes ``self.prior``
        and is the posterior's ``prior``.
        """
        if learn_hyperparameters:
            from .learning import fit_hyperparameters

            method = "em" if learn_hyperparameters is True else learn_hyperparameters
            fitted = fit_hyperparameters(self.prior, [problem], method=method, **learning_options)
            self.prior = fitted.prior
        K, graphs = self.covariance(problem)
        with one_blas_thread():  # bayesrank.threads: XLA's and BLAS's thread pools contend
            result = ep.fit(
                K,
                jnp.asarray(problem.pairs),
                max_iter=self.max_iter,
                tol=self.tol,
                damping=self.damping,
                schedule=self.schedule,
                sites=sites,
                precision=self.precision,
            )
            jax.block_until_ready(result)
        return Posterior(self.prior, problem, graphs, result)
