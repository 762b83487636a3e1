"""The experiments' compiled programs. Imported inside the experiments' functions, never at
the top of their modules: the command line imports those to build its parser, and chooses JAX's
platform (``--device``) before JAX is first imported."""

from __future__ import annotations

from functools import partial

import jax
import jax.numpy as jnp

from ..metrics import brier_score, expected_calibration_error, log_loss, pairwise_error
from ..predict import predict_pairs

#: The per-query measures, in ``measures``' order.
MEASURES = ("pair_error", "loglik", "brier", "ece")


@jax.jit
def measures(p, y, mask):
    """``(pair error, log-likelihood, Brier, ECE)`` of ``bayesrank.metrics`` for
    ``p = P(first wins)``, ``y`` 1 where it did; ``(m,)`` arrays, ``mask`` the real pairs."""
    right = jnp.where(y == 1, p, 1 - p)  # P(the winner wins)
    return (
        pairwise_error(right, mask),
        -log_loss(p, y, mask),
        brier_score(p, y, mask),
        expected_calibration_error(p, y, mask),
    )


@jax.jit
def prior_alone(prior, X, mask, test, test_mask):
    """``(K, error of the zero mean on test)``: the prior's covariance of the real entities of
    ``X`` and the error of predicting from the prior alone (the zero mean)."""
    K = prior.covariance(X, (), mask)
    prob = predict_pairs(jnp.zeros(X.shape[0], K.dtype), K, test).prob
    return K, pairwise_error(prob, test_mask)


@partial(jax.jit, static_argnames=("per_query",))
def covariances(prior, X, mask, per_query):
    """``K: (B, n, n)`` of a stacked batch ``X: (B, n, d)`` under one shared ``prior``, or
    (``per_query``) under a prior whose leaves are batched per query ``(B, ...)``."""

    def one(p, x, m):
        return p.covariance(x, (), m)

    return jax.vmap(one, in_axes=(0 if per_query else None, 0, 0))(prior, X, mask)
