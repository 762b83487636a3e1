"""Collection façades: EP, prediction, NUTS and LETOR metrics over many problems, one compiled
call per size group, the single-query function mapped over each group's queries."""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np

from ..data.batch import bucket_size, pad_stack
from ..inference import ep
from ..kernels.xpgp import XPGP
from ..metrics import LetorMetrics
from ..metrics import letor_metrics as _letor_metrics_one
from ..runtime import one_blas_thread
from .batching import PreparedBatch, check_problems, covariances, prepare_batch, size_groups
from .mapping import map_queries, query_map_method


@partial(jax.jit, static_argnames=("schedule", "accelerate"))
def _fit_ep_jit(prior, data: PreparedBatch, max_iter, tol, schedule, accelerate):
    K = covariances(prior, data)

    def one(K, pairs, pair_mask):
        return ep.fit_core(
            K,
            pairs,
            pair_mask=pair_mask,
            max_iter=max_iter,
            tol=tol,
            schedule=schedule,
            accelerate=accelerate,
        )

    return map_queries(one, K, data.pairs, data.pair_mask)


def fit_ep(
    prior: XPGP,
    problems,
    *,
    max_iter: int = 200,
    tol: float | None = None,
    schedule: str = "parallel",
    accelerate: bool = False,
) -> list[ep.EPPosterior]:
    """EP on every problem under one prior: one compiled call per size group
    (:func:`size_groups`), the single-query EP mapped over its queries (:func:`map_queries`).

    Returns one :class:`~bayesrank.inference.ep.EPPosterior` per problem, in order, over its own
    entities and pairs (padding removed); each predicts (``predict_pairs``).
    """
    problems = check_problems(problems)
    ep.check_settings(schedule, "full", 1.0, accelerate)
    dtype = jnp.result_type(float)
    tol = ep.default_tol(dtype) if tol is None else tol
    out: list = [None] * len(problems)
    with one_blas_thread():
        for idx, batch in size_groups(problems):
            data = prepare_batch(prior, batch)
            posts = jax.device_get(
                _fit_ep_jit(
                    prior,
                    data,
                    np.asarray(max_iter, np.int32),
                    np.asarray(tol, dtype),
                    schedule,
                    accelerate,
                )
            )
            for row, k in enumerate(idx):
                one = jax.tree_util.tree_map(lambda x, row=row: x[row], posts)
                out[k] = ep.unpad_posterior(one, problems[k].n, len(problems[k].pairs))
    return out


def predict_pairs(posteriors, pairs) -> list:
    """Each posterior's ``predict_pairs`` on its own test pairs (``pairs[q]: (p_q, 2)``):
    the shared prediction face, whose compiled programs are bucketed by size."""
    if len(posteriors) != len(pairs):
        raise ValueError(f"{len(posteriors)} posteriors but {len(pairs)} pair arrays")
    return [post.predict_pairs(p) for post, p in zip(posteriors, pairs, strict=True)]


def sample_nuts(key, prior: XPGP, problems, *, method: str | None = None, **options) -> list:
    """NUTS at the prior's fixed hyperparameters for every problem: one compiled call per size
    group, each query sampled with its own key (``jax.random.split(key, len(problems))``);
    ``method`` as :func:`query_map_method`; ``options``: the sampler's settings
    (:class:`~bayesrank.inference.nuts.NUTSSettings`). Returns one
    :class:`~bayesrank.inference.nuts.NUTSPosterior` per problem over its own entities."""
    from .inference import nuts  # NumPyro loads only when sampling is asked for

    problems = check_problems(problems)
    keys = jax.random.split(key, len(problems))
    out: list = [None] * len(problems)
    for idx, batch in size_groups(problems):
        K = np.asarray(covariances(prior, prepare_batch(prior, batch)))
        posts = nuts.sample_each(
            keys[np.concatenate([idx, np.repeat(idx[-1:], len(K) - len(idx))])],
            K,
            batch.pairs,
            pair_mask=batch.pair_mask,
            method=query_map_method(method),
            **options,
        )
        for row, k in enumerate(idx):
            out[k] = nuts.first_entities(posts[row], problems[k].n)
    return out


@partial(jax.jit, static_argnames=("max_k",))
def _letor_metrics_jit(scores, labels, mask, max_k):
    return jax.vmap(_letor_metrics_one, in_axes=(0, 0, 0, None))(scores, labels, mask, max_k)


def letor_metrics(
    scores: Sequence[np.ndarray], labels: Sequence[np.ndarray], max_k: int = 10
) -> LetorMetrics:
    """MAP, NDCG@1..max_k and P@1..max_k of ``Q`` queries in one compiled call.

    ``scores[q]``, ``labels[q]``: ``(n_q,)``. The queries are padded to bucketed shapes (number
    of queries and of documents), so collections of similar sizes share the compiled program.
    Returns host arrays ``map: (Q,)``, ``ndcg: (Q, max_k)``, ``precision: (Q, max_k)``.
    """
    if len(scores) != len(labels):
        raise ValueError(f"{len(scores)} score arrays but {len(labels)} label arrays")
    Q = len(scores)
    n = bucket_size(max(len(s) for s in scores))
    padded_scores, mask = pad_stack([np.asarray(s, np.float64) for s in scores], n)
    padded_labels, _ = pad_stack([np.asarray(lab) for lab in labels], n)
    rows = bucket_size(Q, per_octave=4) - Q  # padded queries: every document masked
    padded_scores = np.pad(padded_scores, ((0, rows), (0, 0)))
    padded_labels = np.pad(padded_labels, ((0, rows), (0, 0)))
    mask = np.pad(mask, ((0, rows), (0, 0)))
    result = jax.device_get(_letor_metrics_jit(padded_scores, padded_labels, mask, int(max_k)))
    return LetorMetrics(*(np.asarray(x)[:Q] for x in result))
