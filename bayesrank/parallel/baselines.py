"""The baselines and metrics per query: RankSVM, RankBoost and pairwise errors, one compiled call
over the queries (padded to bucketed shapes)."""

from __future__ import annotations

from functools import partial

import jax
import jax.numpy as jnp
import numpy as np

from ..baselines import rankboost, ranksvm
from ..compiler import jit
from ..data.batch import bucket_size
from ..data.checks import check_choice, check_features, check_float, check_index_pairs, check_int
from ..metrics import pairwise_error_from_scores
from ..querymap import map_queries
from ..runtime import one_blas_thread


def _stack_queries(Xs, pairs_list):
    """Each query's documents ``(n_q, d)`` and pairs ``(m_q, 2)`` padded to bucketed common
    shapes: ``X: (Q', n, d)``, ``pairs: (Q', m, 2)`` (padded pairs ``(0, 0)``), ``pair_mask``;
    the number of queries padded too (repeats of the last query, dropped afterwards)."""
    if len(Xs) != len(pairs_list) or not Xs:
        raise ValueError(f"{len(Xs)} document arrays but {len(pairs_list)} pair arrays")
    Xs = [check_features(X, name=f"X[{q}]") for q, X in enumerate(Xs)]
    d = Xs[0].shape[1]
    for q, X in enumerate(Xs):
        if X.shape[1] != d:
            raise ValueError(f"X[{q}] has {X.shape[1]} features, X[0] has {d}")
    pairs_list = [
        check_index_pairs(p, len(X), name=f"pairs[{q}]")
        for q, (X, p) in enumerate(zip(Xs, pairs_list, strict=True))
    ]
    Q = len(Xs)
    rows = bucket_size(Q, per_octave=4)
    n = bucket_size(max(len(X) for X in Xs))
    m = bucket_size(max(len(p) for p in pairs_list))
    dtype = jnp.result_type(float)
    X = np.zeros((rows, n, d), dtype)
    pairs = np.zeros((rows, m, 2), np.int64)
    mask = np.zeros((rows, m), bool)
    for q in range(rows):
        src = min(q, Q - 1)
        X[q, : len(Xs[src])] = Xs[src]
        pairs[q, : len(pairs_list[src])] = pairs_list[src]
        mask[q, : len(pairs_list[src])] = True
    return X, pairs, mask, Q


@partial(jit, static_argnames=("loss", "max_iter"))
def _ranksvm_jit(X, pairs, mask, C, tol, smoothing, loss, max_iter):
    def one(X, pairs, mask):
        return ranksvm.fit_linear(
            X, pairs, C, mask, loss=loss, tol=tol, max_iter=max_iter, smoothing=smoothing
        )

    return map_queries(one, X, pairs, mask)


def fit_ranksvm(
    Xs,
    pairs_list,
    C: float = 1.0,
    *,
    loss: str = "squared_hinge",
    tol: float | None = None,
    max_iter: int = 100,
    smoothing: float = 1e-3,
) -> ranksvm.LinearSolution:
    """A linear RankSVM per query (``bayesrank.baselines.ranksvm.fit_linear``), mapped over
    the queries in one compiled call: ``Xs[q]: (n_q, d)``, ``pairs_list[q]: (m_q, 2)``. Returns
    the solutions stacked: ``w: (Q, d)``, ``info`` fields ``(Q,)``."""
    X, pairs, mask, Q = _stack_queries(Xs, pairs_list)
    C = check_float(C, "C", 0.0, low_open=True)
    loss = check_choice(loss, "loss", ranksvm.LOSSES)
    max_iter = check_int(max_iter, "max_iter", low=1)
    tol = (
        ranksvm.default_tol(X.dtype) if tol is None else check_float(tol, "tol", 0.0, low_open=True)
    )
    smoothing = check_float(smoothing, "smoothing", 0.0, low_open=True)
    with one_blas_thread():
        out = jax.device_get(
            _ranksvm_jit(
                X,
                pairs,
                mask,
                np.asarray(C, X.dtype),
                np.asarray(tol, X.dtype),
                np.asarray(smoothing, X.dtype),
                loss,
                max_iter,
            )
        )
    return jax.tree_util.tree_map(lambda a: a[:Q], out)


@partial(jit, static_argnames=("n_rounds",))
def _rankboost_jit(X, pairs, mask, thresholds, n_rounds):
    def one(X, pairs, mask, thresholds):
        return rankboost.fit(X, pairs, thresholds, n_rounds, mask)

    return map_queries(one, X, pairs, mask, thresholds)


def fit_rankboost(Xs, pairs_list, n_rounds: int = 100, n_thresholds: int = 10):
    """RankBoost per query (``bayesrank.baselines.rankboost.fit``, ``n_thresholds`` uniform
    candidates per feature from each query's own documents), mapped over the queries in one
    compiled call. Returns ``(RankBoostModel, RankBoostInfo)`` stacked: arrays ``(Q, T)``."""
    X, pairs, mask, Q = _stack_queries(Xs, pairs_list)
    n_rounds = check_int(n_rounds, "n_rounds", low=1)
    n_thresholds = check_int(n_thresholds, "n_thresholds", low=1)
    rows = X.shape[0]
    thresholds = np.stack(
        [rankboost.candidate_thresholds(Xs[min(q, Q - 1)], n_thresholds) for q in range(rows)]
    )
    with one_blas_thread():
        out = jax.device_get(_rankboost_jit(X, pairs, mask, thresholds, n_rounds))
    return jax.tree_util.tree_map(lambda a: a[:Q], out)


@jit
def _pairwise_errors_jit(scores, pairs, mask):
    return jax.vmap(pairwise_error_from_scores)(scores, pairs, mask)


def pairwise_errors(scores_list, pairs_list) -> np.ndarray:
    """Each query's pairwise error of its scores on its pairs (``p < 0.5`` an error, a tie half
    one; ``bayesrank.metrics.pairwise_error_from_scores``), one compiled call: ``(Q,)``."""
    scores = [np.asarray(s, np.float64).reshape(-1, 1) for s in scores_list]
    X, pairs, mask, Q = _stack_queries(scores, pairs_list)
    return np.asarray(_pairwise_errors_jit(X[..., 0], pairs, mask))[:Q]
