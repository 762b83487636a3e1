"""One prediction face for every posterior: ``predict_pairs``, ``probability_matrix``, ``scores``,
``rank``, whichever engine produced it.

- ``GaussianPosterior``, for posteriors ``N(mean, cov)`` (EP, Laplace, the model's
  ``Posterior``): Eq. 13-14, ``P(i > j) = Phi(dmu / sqrt(1 + dvar))``;
- ``SamplePosterior``, for posterior draws (NUTS): the Monte Carlo average of
  ``Phi(xi_i - xi_j)`` over the draws, the same quantity.

What a posterior offers is declared by type (protocols, checked with ``isinstance``):
``PosteriorFace``, every posterior's; ``DensePosterior``, those that keep the ``(n, n)``
moments; ``WithEvidence``, those with an evidence.

Both are mixins over a class that holds the arrays (a ``NamedTuple`` or a frozen dataclass); their
methods are final. Arrays may carry a leading query axis (a batch fitted through
``bayesrank.parallel`` or ``fit_hyperparameters``): ``mean: (B, n)``,
then ``pairs`` is ``(B, p, 2)`` (or ``(p, 2)`` for every query).

Called on concrete arrays, the methods validate ``pairs`` (a ``ValueError`` names the row and
value at fault), pad their number to a size bucket (``bayesrank.data.batch.bucket_size``)
and call a module-level jitted program, so test sets of different sizes share a bounded number
of compiled programs. Under a user's ``jit`` / ``vmap`` (traced arrays) they are the plain
functions of ``bayesrank.predict``.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

import jax
import jax.numpy as jnp
import numpy as np

from ..compiler import jit
from ..data.batch import bucket_size, pad_covariance, pad_rows
from ..data.checks import check_float, check_index_pairs
from ..predict import (
    OutcomePrediction,
    PairPrediction,
    draw_entity_scores,
    draw_outcome_predictions,
    draw_pair_predictions,
    draw_probability_matrix,
    predict_outcomes,
    predict_pairs,
    probability_matrix,
)
from ..runtime import is_traced

__all__ = [
    "DensePosterior",
    "GaussianPosterior",
    "PosteriorFace",
    "SamplePosterior",
    "WithEvidence",
]


@runtime_checkable
class PosteriorFace(Protocol):
    """What every engine's posterior offers (EP, Laplace, NUTS, the sparse Laplace, your
    engine's ``GaussianFit``): ``mean: (n,)``, ``converged``, and prediction of pairs."""

    @property
    def mean(self) -> jax.Array: ...

    @property
    def converged(self): ...

    def predict_pairs(self, pairs) -> PairPrediction:
        """``P(i > j | data)`` and the moments of ``xi_i - xi_j`` for ``pairs: (p, 2)``."""

    def predict_outcomes(self, pairs, margin) -> OutcomePrediction:
        """``P(i > j)``, ``P(tie)``, ``P(j > i)`` under the tie margin, for ``pairs: (p, 2)``."""

    def rank(self) -> np.ndarray:
        """Entity indices by decreasing posterior mean."""


@runtime_checkable
class DensePosterior(PosteriorFace, Protocol):
    """A posterior that keeps every entity's joint moments (EP, Laplace, NUTS; not the sparse
    Laplace): ``cov: (n, n)``, ``scores()`` (mean and variance) and the ``(n, n)``
    ``probability_matrix()``."""

    @property
    def cov(self) -> jax.Array: ...

    def scores(self) -> tuple[jax.Array, jax.Array]: ...

    def probability_matrix(self) -> jax.Array: ...


@runtime_checkable
class WithEvidence(Protocol):
    """A posterior with its engine's ``log_evidence`` (EP, Laplace, the sparse Laplace's
    estimate; not NUTS)."""

    @property
    def log_evidence(self) -> jax.Array: ...


def _check_pairs(pairs, n: int, batch: int | None) -> np.ndarray:
    """Prediction pairs as int64 ``(p, 2)`` (or ``(B, p, 2)``), every index in ``[0, n)``;
    self-pairs and repeats are fine (``P(i > i) = 1/2``)."""
    if batch is None or np.ndim(pairs) != 3:
        return check_index_pairs(pairs, n)
    pairs = np.asarray(pairs)
    if pairs.shape[0] != batch:
        raise ValueError(f"pairs must be (p, 2) or ({batch}, p, 2), got shape {pairs.shape}")
    return np.stack([check_index_pairs(p, n, name=f"pairs[{b}]") for b, p in enumerate(pairs)])


def _pad_pairs(pairs: np.ndarray) -> np.ndarray:
    """Pairs padded along their ``p`` axis to ``bucket_size(p, 1)`` (a power of two, at least 32)
    with ``(0, 0)`` rows: prediction costs O(p), so coarse buckets waste little and keep the
    number of compiled programs to one per octave of test-set size."""
    return pad_rows(pairs, bucket_size(pairs.shape[-2], per_octave=1), axis=-2)


def _pad_entities(mean, cov):
    """``mean: (..., n)`` and ``cov: (..., n, n)`` padded to ``bucket_size(n)`` entities on the
    host (zero mean, unit variance, uncorrelated), so posteriors of similar sizes share the
    compiled prediction program; unchanged where ``n`` is a bucket already."""
    n = np.shape(mean)[-1]
    N = bucket_size(n)
    if N == n:
        return mean, cov
    return pad_rows(mean, N, axis=-1), pad_covariance(cov, N)


def _unpad(prediction, p: int):
    """The first ``p`` rows of each padded output, sliced on the host and put back on the device
    (``jax.device_put``: ``jnp.asarray`` of a host array compiles a program per shape)."""
    return jax.device_put(type(prediction)(*(np.asarray(x)[..., :p] for x in prediction)))


def _margin(margin, dtype) -> np.ndarray:
    """The tie margin, checked (a finite real >= 0), as a host array of ``dtype``."""
    return np.asarray(check_float(margin, "margin", low=0.0), dtype)


@jit
def _gaussian_pairs(mean, cov, pairs):
    if mean.ndim == 1:
        return predict_pairs(mean, cov, pairs)
    in_pairs = 0 if pairs.ndim == 3 else None
    return jax.vmap(predict_pairs, in_axes=(0, 0, in_pairs))(mean, cov, pairs)


@jit
def _gaussian_outcomes(mean, cov, pairs, margin):
    if mean.ndim == 1:
        return predict_outcomes(mean, cov, pairs, margin)
    in_pairs = 0 if pairs.ndim == 3 else None
    return jax.vmap(predict_outcomes, in_axes=(0, 0, in_pairs, None))(mean, cov, pairs, margin)


@jit
def _gaussian_matrix(mean, cov):
    if mean.ndim == 1:
        return probability_matrix(mean, cov)
    return jax.vmap(probability_matrix)(mean, cov)


@jit
def _draw_pairs(draws, pairs):
    return draw_pair_predictions(draws, pairs)


@jit
def _draw_outcomes(draws, pairs, margin):
    return draw_outcome_predictions(draws, pairs, margin)


@jit
def _draw_matrix(draws):
    return draw_probability_matrix(draws)


class GaussianPosterior:
    """Prediction from a Gaussian posterior ``N(mean, cov)`` of the preference degrees.

    The class it is mixed into holds ``mean: (n,)`` and ``cov: (n, n)`` (or a leading query
    axis ``B``).
    """

    __slots__ = ()

    def predict_pairs(self, pairs) -> PairPrediction:
        """``P(i > j | data)`` and the moments of ``xi_i - xi_j`` for each row of ``pairs``.

        Eq. 13-14: ``prob = Phi(delta_mean / sqrt(1 + delta_var))``, ``delta_var = Sigma_ii +
        Sigma_jj - 2 Sigma_ij`` (its square root is the uncertainty of the difference).
        ``pairs: (p, 2)`` (or ``(B, p, 2)`` for a batch); outputs ``(p,)`` (or ``(B, p)``).
        """
        mean, cov = self.mean, self.cov
        if is_traced(mean, cov, pairs):
            return _gaussian_pairs.__wrapped__(mean, cov, jnp.asarray(pairs))
        batch = mean.shape[0] if jnp.ndim(mean) == 2 else None
        checked = _check_pairs(pairs, jnp.shape(mean)[-1], batch)
        mean, cov = _pad_entities(mean, cov)
        padded = _gaussian_pairs(mean, cov, _pad_pairs(checked))
        return _unpad(padded, checked.shape[-2])

    def predict_outcomes(self, pairs, margin) -> OutcomePrediction:
        """``P(i > j)``, ``P(tie)`` and ``P(j > i)`` under the tie model with margin ``margin``
        (``bayesrank.predict.predict_outcomes``), and the moments of ``xi_i - xi_j``; shapes as
        ``predict_pairs``."""
        mean, cov = self.mean, self.cov
        if is_traced(mean, cov, pairs, margin):
            return _gaussian_outcomes.__wrapped__(mean, cov, jnp.asarray(pairs), margin)
        batch = mean.shape[0] if jnp.ndim(mean) == 2 else None
        checked = _check_pairs(pairs, jnp.shape(mean)[-1], batch)
        margin = _margin(margin, np.asarray(mean).dtype)
        mean, cov = _pad_entities(mean, cov)
        padded = _gaussian_outcomes(mean, cov, _pad_pairs(checked), margin)
        return _unpad(padded, checked.shape[-2])

    def probability_matrix(self) -> jax.Array:
        """``(n, n)`` matrix of ``P(i > j | data)`` (diagonal 1/2); ``(B, n, n)`` for a batch."""
        if is_traced(self.mean, self.cov):
            return _gaussian_matrix.__wrapped__(self.mean, self.cov)
        return _gaussian_matrix(self.mean, self.cov)

    def scores(self) -> tuple[jax.Array, jax.Array]:
        """Posterior mean and variance of every entity's preference degree."""
        return self.mean, jnp.diagonal(self.cov, axis1=-2, axis2=-1)

    def rank(self) -> np.ndarray:
        """Entity indices by decreasing posterior mean (ties by index), per query for a batch."""
        return np.argsort(-np.asarray(self.mean), axis=-1, kind="stable")


class SamplePosterior:
    """Prediction from posterior draws of the preference degrees (Monte Carlo).

    The class it is mixed into holds ``samples: (C, S, n)`` (chains, draws, entities) and
    ``mean: (n,)``.
    """

    __slots__ = ()

    @property
    def draws(self) -> jax.Array:
        """All draws, chains concatenated: ``(C * S, n)``."""
        return self.samples.reshape(-1, self.samples.shape[-1])

    def predict_pairs(self, pairs) -> PairPrediction:
        """Monte Carlo ``P(i > j | data) = mean_t Phi(xi_i^(t) - xi_j^(t))`` and the sample moments
        of ``xi_i - xi_j`` (ddof 0) for ``pairs: (p, 2)``; outputs ``(p,)``."""
        draws = self.draws
        if is_traced(draws, pairs):
            return draw_pair_predictions(draws, jnp.asarray(pairs))
        checked = _check_pairs(pairs, draws.shape[-1], None)
        return _unpad(_draw_pairs(draws, _pad_pairs(checked)), checked.shape[0])

    def predict_outcomes(self, pairs, margin) -> OutcomePrediction:
        """Monte Carlo ``P(i > j)``, ``P(tie)``, ``P(j > i)`` (each outcome's likelihood averaged
        over the draws) and the sample moments of ``xi_i - xi_j``, for ``pairs: (p, 2)``."""
        draws = self.draws
        if is_traced(draws, pairs, margin):
            return draw_outcome_predictions(draws, jnp.asarray(pairs), margin)
        checked = _check_pairs(pairs, draws.shape[-1], None)
        margin = _margin(margin, np.asarray(draws).dtype)
        return _unpad(_draw_outcomes(draws, _pad_pairs(checked), margin), checked.shape[0])

    def probability_matrix(self) -> jax.Array:
        """``(n, n)`` matrix of Monte Carlo ``P(i > j | data)`` (diagonal 1/2)."""
        draws = self.draws
        return draw_probability_matrix(draws) if is_traced(draws) else _draw_matrix(draws)

    def scores(self) -> tuple[jax.Array, jax.Array]:
        """Posterior mean and variance (ddof 0) of every entity's preference degree."""
        return draw_entity_scores(self.draws)

    def rank(self) -> np.ndarray:
        """Entity indices by decreasing posterior mean (ties by index)."""
        return np.argsort(-np.asarray(self.mean), kind="stable")
