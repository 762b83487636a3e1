"""The one batching path: many queries, padded to bucketed shapes, mapped with the single-query
functions.

Every function of bayesrank computes for ONE query; this module runs them over a collection:

1. **pad and bucket** (:mod:`bayesrank.data.batch`): problems are stacked to common shapes with
   masks (padded entities get a decoupled unit prior, padded pairs a zero site, so a padded
   problem gives exactly the unpadded answer), at sizes from
   :func:`~bayesrank.data.batch.bucket_size` so that collections of similar sizes reuse
   compiled programs; collections of very different sizes are split into size buckets (EP
   costs ``n^3``: padding every query to the largest wastes most of the work);
2. **map over the query axis** (:func:`map_queries`): the single-query function, ``vmap``-ped on
   accelerators and ``lax.map``-ped (one query after another, inside the same compiled program)
   on the CPU, where batched LAPACK calls are slow and, run concurrently, can deadlock jaxlib
   0.10's CPU thread pool (``docs/model.md``). :func:`query_map_method` says which is used.

Learning (:mod:`bayesrank.learning`) builds its shared and per-query objectives on these pieces;
the collection façades below (:func:`fit_ep`, :func:`letor_metrics`) are the ones users call.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import partial
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from .baselines import rankboost, ranksvm
from .data.batch import ProblemBatch, bucket_size, pad_stack, stack_problems, touched_entities
from .data.checks import check_choice, check_features, check_float, check_int, check_pair_array
from .data.problem import PreferenceProblem
from .inference import ep
from .kernels.xpgp import XPGP, mask_covariance
from .metrics import LetorMetrics, pairwise_error_from_scores
from .metrics import letor_metrics as _letor_metrics_one
from .runtime import one_blas_thread

__all__ = [
    "PreparedBatch",
    "covariances",
    "fit_ep",
    "fit_rankboost",
    "fit_ranksvm",
    "letor_metrics",
    "map_queries",
    "pairwise_errors",
    "predict_pairs",
    "prepare_batch",
    "query_map_method",
    "sample_nuts",
    "size_groups",
]


def query_map_method(method: str | None = None) -> str:
    """``"vmap"`` or ``"map"``: how :func:`map_queries` runs on the default backend.

    ``None`` chooses: ``"map"`` (``lax.map``) on the CPU, ``"vmap"`` elsewhere. On a CPU the
    queries' ``n^3`` factorisations gain nothing from batching (each LAPACK call already uses
    the cores) and batched LAPACK calls can deadlock jaxlib 0.10's CPU runtime; on a GPU the
    batch is what fills the device.
    """
    if method is None:
        return "map" if jax.default_backend() == "cpu" else "vmap"
    if method not in ("vmap", "map"):
        raise ValueError(f"method must be 'vmap', 'map' or None, got {method!r}")
    return method


def map_queries(fn: Callable, *args, method: str | None = None):
    """``fn`` applied to each query's slice of ``args`` (pytrees with a leading query axis ``B``;
    ``None`` leaves are passed as ``None``), stacked along ``B``: ``vmap`` or ``lax.map`` by
    :func:`query_map_method`. Pure: call it inside a jitted program."""
    if query_map_method(method) == "vmap":
        return jax.vmap(fn)(*args)
    return jax.lax.map(lambda a: fn(*a), args)


class PreparedBatch(NamedTuple):
    """A :class:`~bayesrank.data.batch.ProblemBatch` with each relation's graph data prepared
    for its kernel.

    ``X: (B, n, d)`` or ``None``; ``graphs``: per relation, a pytree with leading axis ``B``.

    Restricted to the entities that pairs touch (:func:`prepare_batch`), ``entities: (B, t)``
    holds their indices among the ``n``, ``entity_mask: (B, t)`` marks the real ones, and
    ``pairs`` index into ``entities``; :func:`covariances` then gives ``K[entities, entities]``.
    """

    X: jax.Array | None
    graphs: tuple
    pairs: jax.Array
    mask: jax.Array
    pair_mask: jax.Array
    entities: jax.Array | None = None
    entity_mask: jax.Array | None = None


def prepare_batch(prior: XPGP, batch: ProblemBatch, restrict: int | bool = False) -> PreparedBatch:
    """Host-side, once: each relation kernel's graph data for every query, stacked.

    ``restrict`` (True, or a size ``t``: :func:`~bayesrank.data.batch.touched_entities`): keep
    only the entities that pairs touch. EP and its evidence depend on ``K`` only through those
    rows and columns (the others' posterior is their prior given the touched ones), so inference
    on them gives the same evidence and gradient at ``t^3`` instead of ``n^3`` cost: on OHSUMED,
    100-200 pairs touch a median 113 of 147 documents. Without relations, ``X`` is restricted
    directly; graph kernels need the whole graph, so ``K`` is computed whole and then restricted.
    Arrays go to the device with ``jax.device_put`` (``jnp.asarray`` of a host array compiles a
    program per shape).
    """
    graphs = []
    for r, kernel in enumerate(prior.relations):
        per_query = [kernel.prepare(W) for W in batch.relations[r]]
        graphs.append(jax.tree_util.tree_map(lambda *a: np.stack(a), *per_query))
    X, mask, pairs = batch.X, batch.mask, batch.pairs
    entities = entity_mask = None
    if restrict is not False:
        size = None if restrict is True else int(restrict)
        entities, entity_mask, pairs = touched_entities(batch, size)
        if not prior.relations:  # restrict X itself: K is computed at the smaller size
            X = None if X is None else np.take_along_axis(X, entities[..., None], axis=1)
            mask, entities, entity_mask = entity_mask, None, None
    return jax.device_put(
        PreparedBatch(
            None if X is None else np.asarray(X, jnp.result_type(float)),
            tuple(graphs),
            np.asarray(pairs),
            np.asarray(mask),
            np.asarray(batch.pair_mask),
            entities,
            entity_mask,
        )
    )


def covariances(prior: XPGP, data: PreparedBatch) -> jax.Array:
    """``K: (B, n, n)`` of every query (padded entities decoupled); ``(B, t, t)`` restricted."""

    def one(X, graphs, mask):
        return prior.covariance(X, graphs, mask)

    in_x = None if data.X is None else 0
    K = jax.vmap(one, in_axes=(in_x, 0, 0))(data.X, data.graphs, data.mask)
    if data.entities is None:
        return K

    def restrict(K, entities, entity_mask):
        return mask_covariance(K[entities[:, None], entities[None, :]], entity_mask)

    return jax.vmap(restrict)(K, data.entities, data.entity_mask)


# --- collection façades ---------------------------------------------------------------------------


def _check_problems(problems) -> list[PreferenceProblem]:
    problems = list(problems)
    if not problems:
        raise ValueError("problems is empty: give at least one PreferenceProblem")
    for k, p in enumerate(problems):
        if not isinstance(p, PreferenceProblem):
            raise ValueError(f"problems[{k}] must be a PreferenceProblem, got {type(p).__name__}")
    return problems


def size_groups(problems) -> list[tuple[np.ndarray, ProblemBatch]]:
    """The problems grouped by their size bucket (entities and pairs), each group stacked at its
    bucketed shape: ``[(indices, batch)]``. Problems of similar sizes share a group (and a
    compiled program); EP's ``n^3`` never pays for a much larger query's padding."""
    keys = [(bucket_size(p.n), bucket_size(len(p.pairs))) for p in problems]
    groups: dict[tuple[int, int], list[int]] = {}
    for k, key in enumerate(keys):
        groups.setdefault(key, []).append(k)
    out = []
    for (n, m), idx in sorted(groups.items()):
        rows = bucket_size(len(idx), per_octave=4)  # the number of queries is bucketed too
        members = [problems[k] for k in idx]
        batch = stack_problems(members + [members[-1]] * (rows - len(idx)), n_pad=n, m_pad=m)
        out.append((np.asarray(idx), batch))
    return out


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
    problems = _check_problems(problems)
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

    problems = _check_problems(problems)
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


# --- baselines and metrics per query -----------------------------------------------------------


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
    pairs_list = [check_pair_array(p, name=f"pairs[{q}]") for q, p in enumerate(pairs_list)]
    for q, (X, p) in enumerate(zip(Xs, pairs_list, strict=True)):
        bad = np.argwhere((p < 0) | (p >= len(X)))
        if bad.size:
            r, c = bad[0]
            raise ValueError(
                f"pairs[{q}][{r}, {c}] = {p[r, c]} is not a row of X[{q}] (n = {len(X)})"
            )
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


@partial(jax.jit, static_argnames=("loss", "max_iter"))
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
    """A linear RankSVM per query (:func:`bayesrank.baselines.ranksvm.fit_linear`), mapped over
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


@partial(jax.jit, static_argnames=("n_rounds",))
def _rankboost_jit(X, pairs, mask, thresholds, n_rounds):
    def one(X, pairs, mask, thresholds):
        return rankboost.fit(X, pairs, thresholds, n_rounds, mask)

    return map_queries(one, X, pairs, mask, thresholds)


def fit_rankboost(Xs, pairs_list, n_rounds: int = 100, n_thresholds: int = 10):
    """RankBoost per query (:func:`bayesrank.baselines.rankboost.fit`, ``n_thresholds`` uniform
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


@jax.jit
def _pairwise_errors_jit(scores, pairs, mask):
    return jax.vmap(pairwise_error_from_scores)(scores, pairs, mask)


def pairwise_errors(scores_list, pairs_list) -> np.ndarray:
    """Each query's pairwise error of its scores on its pairs (``p < 0.5`` an error, a tie half
    one; :func:`bayesrank.metrics.pairwise_error_from_scores`), one compiled call: ``(Q,)``."""
    scores = [np.asarray(s, np.float64).reshape(-1, 1) for s in scores_list]
    X, pairs, mask, Q = _stack_queries(scores, pairs_list)
    return np.asarray(_pairwise_errors_jit(X[..., 0], pairs, mask))[:Q]
