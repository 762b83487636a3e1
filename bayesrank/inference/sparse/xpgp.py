"""An ``XPGP`` prior and a problem's data as a ``LatentPrior``, and the posterior face of the
precision-form engine.

``XPGP``'s covariance (paper Eq. 5) is ``K = (w_1^2 K_a + sum_r w_r^2 K_r + s^2 I) / (2
sigma^2)``. With ``c = 1 / (2 sigma^2)``:

- the attribute term's root is ``w_1 sqrt(c) Phi`` with ``K_a ~ Phi Phi^T`` (pivoted Cholesky at
  ``rank``), and its residual variances ``w_1^2 c diag(K_a - Phi Phi^T)`` join the entity effect
  ``s^2 c`` in one diagonal block (the FITC-style correction: every prior variance exact);
- a ``RegularizedLaplacian`` relation ``K_r = [beta (L + I / iota^2)]^-1`` of weight ``w_r`` is
  the precision ``laplacian_precision(W, beta, iota, w_r^2 c)``.

Other relation kernels (diffusion, normalized Laplacians, fixed covariances) have no sparse
precision here: ``ValueError``. At ``rank = n`` and no residual the latent prior's covariance is
``K`` itself (``tests/test_sparse_laplace.py``).
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from ...compiler import jit
from ...data.checks import check_float, check_index_pairs
from ...kernels.graph import RegularizedLaplacian
from ...kernels.lowrank import pivoted_cholesky
from ...kernels.xpgp import check_graph_count, check_prior
from ...likelihoods import pair_probability
from ...predict import OutcomePrediction, PairPrediction
from .evidence import log_evidence
from .laplace import (
    SAMPLED_CG_TOL,
    SparseMode,
    mode,
    pair_predictions,
    posterior_draws_core,
    sampled_pair_predictions,
)
from .precision import laplacian_precision, residual_precision
from .prior import LatentPrior, latent_prior

__all__ = ["SparsePosterior", "fit_problem", "from_xpgp"]


def from_xpgp(prior, X, relations, n: int, rank: int) -> tuple[LatentPrior, float]:
    """``(LatentPrior, residual)`` of the ``XPGP`` ``prior`` over ``n`` entities with attributes
    ``X: (n, d)`` (or None) and adjacencies ``relations`` (one per relation kernel, dense or
    ``scipy.sparse``); ``residual`` is the attribute term's dropped variance ``trace(K - K~)``
    (its spectral error's bound; module docstring)."""
    check_prior(prior, None if X is None else np.shape(X)[-1])  # sigma_range included
    check_graph_count(prior, relations)  # the dense face's check and message
    c = float(1.0 / (2.0 * np.float64(prior.sigma) ** 2))  # NumPy: no Python ZeroDivisionError
    weights = np.ones(1 + len(prior.relations)) if prior.weights is None else prior.weights
    weights = np.asarray(weights, float)
    blocks, diagonal, residual = [], np.zeros(n), 0.0
    features = None
    if prior.attribute is not None:
        if X is None:
            raise ValueError("the prior has an attribute kernel but the problem has no X")
        low = pivoted_cholesky(prior.attribute, jnp.asarray(X), min(int(rank), n))
        scale = weights[0] ** 2 * c
        features = np.sqrt(scale) * np.asarray(low.features)
        diagonal = diagonal + scale * np.asarray(low.residual)
        residual = float(scale * np.sum(low.residual))
    for r, (kernel, W) in enumerate(zip(prior.relations, relations, strict=True)):
        if not isinstance(kernel, RegularizedLaplacian) or kernel.normalized:
            raise ValueError(
                f"relations[{r}]: approximation='sparse' needs RegularizedLaplacian kernels "
                f"(not normalized), got {type(kernel).__name__}"
            )
        blocks.append(laplacian_precision(W, float(kernel.beta), float(kernel.iota),
                                          weights[1 + r] ** 2 * c))  # fmt: skip
    if prior.entity is not None:
        diagonal = diagonal + c * float(prior.entity(jnp.arange(1))[0, 0])
    if np.any(diagonal > 0):
        blocks.append(residual_precision(diagonal))
    return latent_prior(features, blocks), residual


class SparsePosterior(NamedTuple):
    """The precision-form Laplace posterior of one problem: its ``latent`` prior, the training
    ``pairs: (m, 2)`` and the engine's ``fit`` (``SparseMode``). ``key`` (raw key data,
    ``jax.random.key_data``: a plain array that a model file can hold) seeds the sampled
    variances and the evidence's probes; ``residual`` is the prior variance the attribute
    kernel's rank left out, ``trace(K_a - K~_a)`` (kept on the diagonal; a bound on the dropped
    part's spectral norm)."""

    latent: LatentPrior
    pairs: jax.Array
    fit: SparseMode
    key: jax.Array
    residual: float = 0.0
    exact_up_to: int = 100
    n_samples: int = 200

    @property
    def mean(self):
        return self.fit.mean

    @property
    def converged(self):
        return self.fit.converged

    def predict_pairs(self, pairs, draws=None) -> PairPrediction:
        """Eq. 13-14 for ``pairs: (p, 2)``: each variance by one CG solve up to
        ``exact_up_to`` pairs, beyond by ``n_samples`` posterior draws (relative error about
        ``sqrt(2 / n_samples)``; ``predict_pairs_with_error`` returns it). ``draws``: this
        posterior's ``draws()``, to reuse over many calls (the variances then come from them,
        however few the pairs: a stream of blocks is one estimate)."""
        pairs = check_index_pairs(pairs, self.latent.n)
        if draws is None and len(pairs) <= self.exact_up_to:
            return PairPrediction(*pair_predictions(self.latent, self.pairs, self.fit, pairs))
        if draws is None:
            return PairPrediction(*self.predict_pairs_with_error(pairs)[:3])
        return PairPrediction(*_from_draws(self.fit.mean, draws, jnp.asarray(pairs)))

    def draws(self) -> jax.Array:
        """``(n_samples, n)``: the posterior draws of ``xi - xi_hat`` that the sampled pair
        variances use (the same as ``predict_pairs``' for many pairs: same key)."""
        return posterior_draws_core(self.latent, self.pairs, self.fit, self._key(),
                                    self.n_samples, SAMPLED_CG_TOL)  # fmt: skip

    def predict_pairs_with_error(self, pairs):
        """``(prob, delta_mean, delta_var, var_se)`` by ``n_samples`` draws."""
        pairs = check_index_pairs(pairs, self.latent.n)
        return sampled_pair_predictions(self.latent, self.pairs, self.fit, pairs,
                                        self._key(), n_samples=self.n_samples)  # fmt: skip

    def predict_outcomes(self, pairs, margin, draws=None) -> OutcomePrediction:
        """``predict_pairs`` as the three outcomes of the probit pair model: no tie (the sparse
        engine fits strict pairs only; a nonzero ``margin`` is refused)."""
        if check_float(margin, "margin", low=0.0) != 0.0:
            raise ValueError("approximation='sparse' has no tie model (margin must be 0)")
        p = self.predict_pairs(pairs, draws)
        return OutcomePrediction(p.prob, jnp.zeros_like(p.prob), 1 - p.prob, p.delta_mean,
                                 p.delta_var)  # fmt: skip

    def rank(self) -> np.ndarray:
        """Entity indices by decreasing posterior mean (ties by index)."""
        return np.lexsort((np.arange(self.latent.n), -np.asarray(self.fit.mean)))

    @property
    def log_evidence(self):
        """The Laplace evidence, estimated (``evidence`` gives its standard error)."""
        return self.evidence().log_z

    def evidence(self):
        """``Evidence`` (``log_z``, ``se``, parts) by stochastic Lanczos quadrature."""
        return log_evidence(self.latent, self.pairs, self.fit, self._key())

    def _key(self):
        return jax.random.wrap_key_data(self.key)


@jit
def _from_draws(mean, draws, pairs):
    """``(prob, delta_mean, delta_var)`` of ``pairs: (p, 2)`` with each variance the mean over
    ``draws: (S, n)`` of the squared difference (``sampled_pair_predictions``' estimate)."""
    delta_mean = mean[pairs[:, 0]] - mean[pairs[:, 1]]
    delta_var = jnp.mean((draws[:, pairs[:, 0]] - draws[:, pairs[:, 1]]) ** 2, axis=0)
    return pair_probability(delta_mean, delta_var), delta_mean, delta_var


def fit_problem(prior, problem, rank: int, max_iter: int, tol: float, key=None, *,
                exact_up_to: int = 100, n_samples: int = 200):  # fmt: skip
    """``SparsePosterior`` of a ``PreferenceProblem`` under the ``XPGP`` ``prior``
    (the engine ``SparseLaplace``): strict pairs only (``ValueError`` otherwise); ``key`` seeds
    the sampled predictions and the evidence (default ``key(0)``); ``exact_up_to`` and
    ``n_samples``: the posterior's pair predictions (``SparsePosterior``)."""
    if problem.has_outcomes:
        raise ValueError("SparseLaplace takes strict pairs only (no ties or grades)")
    latent, residual = from_xpgp(prior, problem.X, problem.relations, problem.n, rank)
    fit = mode(latent, problem.pairs, max_iter=max_iter, tol=tol)
    key = jax.random.key_data(jax.random.key(0) if key is None else key)
    return SparsePosterior(latent, jnp.asarray(problem.pairs), fit, key, residual=residual,
                           exact_up_to=exact_up_to, n_samples=n_samples)  # fmt: skip
