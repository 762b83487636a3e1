"""The posterior a model's fit returns, whichever engine computed it, with prediction:
``Posterior`` (pairs, outcomes, grades, scores, ranks, components, new entities).

    posterior = XPGPModel(prior).fit(problem)
    posterior.predict_pairs(held_out).prob        # P(i > j | data), Eq. 13-14
    posterior.predict_new(X_new)                  # the latent at new entities
    posterior.rank()                              # entity indices, best first

What the engine's result offers is stated by its type (``bayesrank.inference.posterior``:
``PosteriorFace``, ``DensePosterior``, ``WithEvidence``); a method it cannot serve is a
``ValueError`` naming the engine.
"""

from __future__ import annotations

import dataclasses
from functools import cached_property, partial

import jax
import jax.numpy as jnp
import numpy as np

from .compiler import jit
from .data.checks import check_features, check_index_pairs
from .data.problem import PreferenceProblem
from .inference import ep
from .inference.engine import Engine, GaussianEngine
from .inference.engines import EP, resolve
from .inference.posterior import DensePosterior, SamplePosterior, WithEvidence
from .kernels.xpgp import XPGP, ComponentPosterior, component_posterior
from .predict import grade_probabilities

__all__ = ["Posterior", "prior_weight_scale"]


@dataclasses.dataclass(frozen=True, eq=False)
class Posterior:
    """A posterior over one problem's entities, whichever engine computed it, with prediction.

    Attributes:
        prior: the prior it was computed under (the fitted one, after hyperparameter learning).
        problem: the ``PreferenceProblem``.
        result: the engine's posterior: ``EPPosterior``,
            ``LaplacePosterior`` or
            ``NUTSPosterior`` (``mean: (n,)``, ``cov: (n, n)``,
            diagnostics). Prediction goes through its face
            (``bayesrank.inference.posterior``): Eq. 13-14 for the Gaussian engines, the
            Monte Carlo average over draws for NUTS.
        learning: the ``FitResult`` of hyperparameter learning (its
            ``trace`` and ``converged`` flag), or ``None`` when the prior was kept as given.
        engine: the engine that computed it (``bayesrank.inference.engine``: ``EP(...)``,
            ``Laplace(...)``, ``NUTS(...)``, ``SparseLaplace(...)`` or your own).
    """

    prior: XPGP
    problem: PreferenceProblem
    result: object
    learning: object | None = None
    engine: Engine = dataclasses.field(default_factory=EP)

    def __post_init__(self):
        if not isinstance(self.engine, Engine):  # a name: the engine at its defaults
            object.__setattr__(self, "engine", resolve(self.engine))

    @property
    def inference(self) -> str:
        """The engine's name (``"ep"``, ``"laplace"``, ``"nuts"``, ``"sparse"``; a class name
        for an engine without one)."""
        return self.engine.describe()

    def predict_pairs(self, pairs):
        """``P(i > j | data)`` and the moments of ``xi_i - xi_j`` for ``pairs: (p, 2)``."""
        return self.result.predict_pairs(pairs)

    def predict_outcomes(self, pairs):
        """``P(i > j)``, ``P(tie)``, ``P(j > i)`` under the prior's tie margin (``XPGP.margin``;
        none: no tie, ``P(i > j)`` as ``predict_pairs``), and the moments of ``xi_i - xi_j``,
        for ``pairs: (p, 2)`` (``bayesrank.predict.OutcomePrediction``)."""
        margin = 0.0 if self.prior.margin is None else float(self.prior.margin)
        return self.result.predict_outcomes(pairs, margin)

    def outcome_blocks(self, blocks, n_pairs: int):
        """``predict_outcomes`` over a stream of pair blocks: ``(block, OutcomePrediction)``
        for each ``block: (b, 2)`` of ``blocks`` (an iterable), in order, so that predicting
        many pairs holds one block at a time. ``n_pairs``: the stream's total; where it is
        beyond a sparse posterior's ``exact_up_to``, its posterior draws are made once and
        shared by every block (one estimate, as a single call on all the pairs would give)."""
        from .inference.sparse import SparsePosterior

        margin = 0.0 if self.prior.margin is None else float(self.prior.margin)
        reuse = {}
        if isinstance(self.result, SparsePosterior) and n_pairs > self.result.exact_up_to:
            reuse = {"draws": self.result.draws()}
        for block in blocks:
            yield block, self.result.predict_outcomes(block, margin, **reuse)

    def predict_grades(self, entities=None) -> np.ndarray:
        """``(p, K)``: each entity's probability of each grade ``0..K-1`` under the prior's
        thresholds (the ordinal model): ``P(y = k) = Phi((b_k - mu) / s) - Phi((b_{k-1} - mu)
        / s)``, ``s = sqrt(1 + var)`` for a Gaussian posterior; for NUTS the average over the
        draws. ``entities``: ``(p,)`` indices (None: all ``n``)."""
        if self.prior.n_grades == 0:
            raise ValueError("predict_grades needs a prior with thresholds (the ordinal model)")
        n = self.problem.n
        idx = np.arange(n)
        if entities is not None:  # as pairs (i, i), which check_index_pairs names
            idx = check_index_pairs(np.column_stack([entities, entities]), n, "entities")[:, 0]
        if isinstance(self.result, SamplePosterior):
            draws = np.asarray(self.result.draws)[:, idx]  # (S, p): no variance beyond the draws
            return grade_probabilities(draws, 0.0, self.prior.thresholds).mean(axis=0)
        mean, var = (np.asarray(a)[idx] for a in self.scores())
        return grade_probabilities(mean, var, self.prior.thresholds)

    def probability_matrix(self) -> jax.Array:
        """``(n, n)`` matrix of ``P(i > j | data)`` (a ``DensePosterior``'s)."""
        return self._dense("an (n, n) matrix").probability_matrix()

    def scores(self) -> tuple[jax.Array, jax.Array]:
        """Posterior mean and variance of every entity's preference degree (a
        ``DensePosterior``'s)."""
        return self._dense("no variances").scores()

    def _dense(self, what: str) -> DensePosterior:
        """The result, where it keeps the ``(n, n)`` moments; ``ValueError`` naming the engine
        otherwise (the sparse Laplace keeps none)."""
        if not isinstance(self.result, DensePosterior):
            raise ValueError(
                f"{self.engine!r}'s posterior keeps no (n, n) covariance ({what}): use mean and "
                "predict_pairs"
            )
        return self.result

    def rank(self) -> np.ndarray:
        """Entity indices by decreasing posterior mean (ties by index)."""
        return self.result.rank()

    @property
    def mean(self) -> jax.Array:
        return self.result.mean

    @property
    def cov(self) -> jax.Array:
        """``(n, n)``: the posterior covariance (a ``DensePosterior``'s)."""
        return self._dense("no cov").cov

    @property
    def log_evidence(self) -> jax.Array:
        """The engine's evidence (EP, Laplace, the sparse Laplace's estimate); NUTS has none
        (``ValueError``)."""
        if not isinstance(self.result, WithEvidence):
            raise ValueError(f"{self.engine!r} gives no evidence (use EP() or Laplace())")
        return self.result.log_evidence

    @property
    def converged(self) -> bool:
        """The engine converged (NUTS: ``diagnostics.converged``, no divergence and split R-hat
        at most 1.01) and, with hyperparameter learning, so did the learning."""
        learned = True if self.learning is None else bool(np.all(self.learning.converged))
        return bool(self.result.converged) and learned

    @cached_property
    def graphs(self) -> tuple:
        """Each relation kernel's graph data for this problem (``prior.prepare``)."""
        return self.prior.prepare(self.problem.relations)

    def components(self) -> ComponentPosterior:
        """Posterior of the attribute part, each relation part (and the entity effect)."""
        parts = self.prior.components(self.problem.X, self.graphs, np.ones(self.problem.n, bool))
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
        if not isinstance(self.engine, GaussianEngine):
            raise ValueError(
                f"predict_new needs a Gaussian posterior (EP(), Laplace()), not {self.engine!r}'s:"
                " add the new entities to the problem (without pairs) and predict transductively"
            )
        X_new = check_features(X_new, n_features=self.problem.X.shape[1], name="X_new")
        mean, cov, X = self.mean, self.cov, self.problem.X
        if self.problem.anchored:  # the grades' sites touch the anchor, whose value is 0
            mean, cov = np.pad(np.asarray(mean), (0, 1)), np.pad(np.asarray(cov), (0, 1))
            X = np.pad(X, ((0, 1), (0, 0)))
        return _predict_new(
            prior,
            X,
            X_new,
            mean,
            cov,
            self.problem.rows,
            self.result.sites,
            self.problem.anchored,
        )


def prior_weight_scale(prior: XPGP) -> jax.Array:
    """``w_1^2 / (2 sigma^2)``: the factor of the attribute kernel in ``K`` (Eq. 5)."""
    w1 = 1.0 if prior.weights is None else jnp.asarray(prior.weights)[0]
    return w1**2 / (2 * prior.sigma**2)


@partial(jit, static_argnames=("anchored",))
def _predict_new(prior: XPGP, X, X_new, mean, cov, pairs, sites, anchored=False):
    scale = prior_weight_scale(prior)
    K_cross = scale * prior.attribute(X, X_new)
    if anchored:  # the anchor (last row) is independent of every entity
        K_cross = K_cross.at[-1].set(0.0)
    K_new = scale * prior.attribute(X_new)
    if prior.entity is not None:
        K_new = K_new + prior.entity.scale**2 / (2 * prior.sigma**2) * jnp.eye(len(X_new))
    return ep.predict_new(mean, cov, pairs, sites, K_cross, K_new)
