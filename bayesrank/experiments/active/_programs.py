"""The active study's compiled program. Imported inside functions, never at the top of the
study's modules: the command line imports those to build its parser, and chooses JAX's
platform (``--device``) before JAX is first imported."""

from __future__ import annotations

import jax

from ...compiler import jit
from ...metrics import pairwise_auc, pairwise_error
from ...predict import predict_pairs


@jit
def error_auc(mean, cov, test, test_mask):
    """Per posterior ``r``: the pair error and the AUC (``bayesrank.metrics``) of Eq. 13-14's
    probabilities on the ``test`` pairs (winner first) where ``test_mask``.

    Args:
        mean: ``(R, n)``; cov: ``(R, n, n)``; test: ``(p, 2)``; test_mask: ``(p,)`` bool.

    Returns:
        ``(error: (R,), auc: (R,))``.
    """

    def one(m, c):
        prob = predict_pairs(m, c, test).prob
        return pairwise_error(prob, test_mask), pairwise_auc(prob, test_mask)

    return jax.vmap(one)(mean, cov)
