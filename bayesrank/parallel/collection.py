"""Collection façades: EP with the prediction of held-out pairs (:func:`fit_predict`), EP
posteriors (:func:`fit_ep`), NUTS and LETOR metrics over many problems.

EP runs as **one compiled call over the whole collection**, on every device of the mesh
(:mod:`.sharding`): the queries are grouped by size (:mod:`.plan`), each group is one block of
rows split over the devices, and each device maps the single-query computation (covariance, EP,
prediction) over its rows: ``lax.map`` on CPUs, whose LAPACK calls gain nothing from batching
and whose padded rows are then skipped, ``vmap`` on accelerators (:func:`query_map_method`). On
CPUs the groups run one after another (an ``optimization_barrier`` chains them: concurrent
LAPACK calls can stall jaxlib's CPU thread pool).
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from ..data.batch import bucket_size, pad_stack
from ..data.checks import check_index_pairs, check_int
from ..diagnostics import warn_if_unconverged
from ..inference import ep
from ..kernels.xpgp import XPGP, check_prior
from ..metrics import LetorMetrics
from ..metrics import letor_metrics as _letor_metrics_one
from ..predict import PairPrediction
from ..predict import predict_pairs as _predict_pairs
from ..runtime import one_blas_thread
from .batching import check_problems, covariances, prepare_batch, size_groups
from .distributed import all_sizes
from .mapping import map_queries, query_map_method
from .plan import CollectionPlan, make_plan
from .sharding import check_mesh, gather, place, query_mesh, shard_queries


class _Block(NamedTuple):
    """One size group's rows (this process's block, then sharded): ``X: (r, n, d)`` or None,
    ``graphs`` (per relation, leading axis ``r``), ``mask: (r, n)``, ``pairs: (r, m, 2)``,
    ``pair_mask: (r, m)``, ``test: (r, p, 2)`` or None, ``valid: (r,)`` (False: an empty slot)."""

    X: np.ndarray | None
    graphs: tuple
    mask: np.ndarray
    pairs: np.ndarray
    pair_mask: np.ndarray
    test: np.ndarray | None
    valid: np.ndarray


class _QueryResult(NamedTuple):
    prob: jax.Array
    delta_mean: jax.Array
    delta_var: jax.Array
    mean: jax.Array
    var: jax.Array
    log_evidence: jax.Array
    n_iter: jax.Array
    converged: jax.Array
    max_change: jax.Array


class CollectionPrediction(NamedTuple):
    """:func:`fit_predict`'s result, one entry per query in order.

    ``predictions[q]``: :class:`~bayesrank.predict.PairPrediction` of the query's test pairs
    (``(p_q,)`` host arrays: ``prob`` = P(i > j), ``delta_mean``, ``delta_var``); ``mean[q]``,
    ``var[q]``: ``(n_q,)`` posterior mean and variance of each entity's preference degree (its
    scores); ``log_evidence``, ``n_iter``, ``converged``, ``max_change``: ``(Q,)``; ``plan``: how
    it ran (:class:`~bayesrank.parallel.plan.CollectionPlan`, ``plan.describe()``).
    """

    predictions: list
    mean: list
    var: list
    log_evidence: np.ndarray
    n_iter: np.ndarray
    converged: np.ndarray
    max_change: np.ndarray
    plan: CollectionPlan


def _one_query(prior, settings, X, graphs, mask, pairs, pair_mask, test, *, posterior, options):
    max_iter, tol = settings
    K = prior.covariance(X, graphs, mask)
    post = ep.fit_core(K, pairs, pair_mask=pair_mask, max_iter=max_iter, tol=tol, **options)
    if posterior:
        return post
    pred = _predict_pairs(post.mean, post.cov, test)
    return _QueryResult(
        *pred,
        post.mean,
        jnp.diag(post.cov),
        post.log_evidence,
        post.n_iter,
        post.converged,
        post.max_change,
    )


@partial(jax.jit, static_argnames=("mesh", "method", "posterior", "schedule", "accelerate"))
def _collection_jit(prior, blocks, settings, *, mesh, method, posterior, schedule, accelerate):
    options = dict(schedule=schedule, accelerate=accelerate)
    one = partial(_one_query, posterior=posterior, options=options)

    def per_device(shared, rows: _Block):
        prior, settings = shared
        return map_queries(
            partial(one, prior, settings),
            rows.X,
            rows.graphs,
            rows.mask,
            rows.pairs,
            rows.pair_mask,
            rows.test,
            method=method,
            valid=rows.valid,
        )

    results, previous = [], None
    for block in blocks:
        if previous is not None and method == "map":  # one group after another on a CPU
            previous, block = jax.lax.optimization_barrier((previous, block))
        out = shard_queries(per_device, mesh, (prior, settings), block)
        results.append(out)
        previous = out.log_evidence
    return tuple(results)


def _block(prior, problems, tests, rows, local_rows: int, n: int, m: int, p: int) -> _Block:
    """Host arrays of one group's block: ``problems[k]`` (with ``tests[k]``, or no test pairs
    where ``tests`` is None) at row ``rows[k]`` of ``local_rows``; the other rows empty."""
    dtype = np.dtype(jnp.result_type(float))
    has_X = problems[0].X is not None if problems else prior.attribute is not None
    d = next((q.X.shape[1] for q in problems if q.X is not None), 1)
    X = np.zeros((local_rows, n, d), dtype) if has_X else None
    mask = np.zeros((local_rows, n), bool)
    pairs = np.tile(np.array([0, 1], np.int32), (local_rows, m, 1))
    pair_mask = np.zeros((local_rows, m), bool)
    test = None if tests is None else np.tile(np.array([0, 1], np.int32), (local_rows, p, 1))
    valid = np.zeros(local_rows, bool)
    for q, row in zip(problems, rows, strict=True):
        if has_X:
            X[row, : q.n] = q.X
        mask[row, : q.n] = True
        pairs[row, : len(q.pairs)] = q.pairs
        pair_mask[row, : len(q.pairs)] = True
        valid[row] = True
    if tests is not None:
        for t, row in zip(tests, rows, strict=True):
            test[row, : len(t)] = t
    graphs = []
    for r, kernel in enumerate(prior.relations):
        empty = kernel.prepare(np.zeros((n, n)))
        per_row = [empty] * local_rows
        for q, row in zip(problems, rows, strict=True):
            W = np.zeros((n, n))
            W[: q.n, : q.n] = q.relations[r]
            per_row[row] = kernel.prepare(W)
        graphs.append(jax.tree_util.tree_map(lambda *a: np.stack(a), *per_row))
    return _Block(X, tuple(graphs), mask, pairs, pair_mask, test, valid)


def _run_collection(prior, problems, tests, *, mesh, method, per_octave, posterior, **options):
    """Plan, place, run and gather (:func:`fit_predict`, :func:`fit_ep`)."""
    problems = check_problems(problems)
    check_prior(prior, next((p.X.shape[1] for p in problems if p.X is not None), None))
    if len({p.X is None for p in problems}) != 1 or len({len(p.relations) for p in problems}) != 1:
        raise ValueError("problems differ in whether they have attributes or in their relations")
    if len(problems[0].relations) != len(prior.relations):
        raise ValueError(
            f"the prior has {len(prior.relations)} relation kernel(s), the problems "
            f"{len(problems[0].relations)} relation(s)"
        )
    per_octave = check_int(per_octave, "per_octave", low=1)
    mesh = query_mesh() if mesh is None else mesh
    n_processes, per_process = check_mesh(mesh)
    if n_processes != jax.process_count():
        raise ValueError(f"the mesh spans {n_processes} of {jax.process_count()} processes")
    platform = next(iter(mesh.devices.flat)).platform
    method = query_map_method(method, platform)
    local = np.array(
        [
            (p.n, len(p.pairs), 0 if tests is None else len(t))
            for p, t in zip(problems, tests or [None] * len(problems), strict=True)
        ],
        np.int64,
    )
    sizes, owner = all_sizes(local)
    plan = make_plan(sizes, owner, n_processes, per_process, method, per_octave)
    me = jax.process_index()
    offset = int(np.sum(owner < me))
    blocks = []
    for g in plan.groups:
        local_rows = per_process * g.rows_per_device
        low = me * local_rows
        mine = owner[g.queries] == me
        qs = g.queries[mine] - offset
        blocks.append(
            place(
                _block(
                    prior,
                    [problems[k] for k in qs],
                    None if tests is None else [tests[k] for k in qs],
                    g.rows[mine] - low,
                    local_rows,
                    g.n,
                    g.m,
                    g.p,
                ),
                mesh,
                local_rows * n_processes,
            )
        )
    dtype = jnp.result_type(float)
    max_iter = options.pop("max_iter")
    tol = options.pop("tol")
    settings = (np.asarray(max_iter, np.int32), np.asarray(tol, dtype))
    shared_prior = jax.tree_util.tree_map(np.asarray, prior)
    with one_blas_thread():
        out = gather(
            _collection_jit(
                shared_prior,
                tuple(blocks),
                settings,
                mesh=mesh,
                method=method,
                posterior=posterior,
                **options,
            )
        )
    return plan, out


def fit_predict(
    prior: XPGP,
    problems,
    test_pairs,
    *,
    mesh=None,
    method: str | None = None,
    per_octave: int = 8,
    max_iter: int = 200,
    tol: float | None = None,
    schedule: str = "parallel",
    accelerate: bool = False,
) -> CollectionPrediction:
    """EP on every problem under one prior and the prediction of its test pairs (paper Eq.
    13-14), in one compiled call over the whole collection, on every device of ``mesh``.

    Args:
        prior: the XPGP prior shared by the queries (fixed hyperparameters).
        problems: ``Q`` :class:`~bayesrank.data.problem.PreferenceProblem` (this process's
            queries, where several processes run: :mod:`bayesrank.parallel.distributed`).
        test_pairs: ``Q`` arrays ``(p_q, 2)`` of pairs to predict, indices into each problem's
            entities.
        mesh: a one-axis mesh (:func:`~bayesrank.parallel.query_mesh`); default: every device.
        method: how each device maps its queries, ``"map"`` or ``"vmap"``; default by the
            devices' platform (:func:`query_map_method`). ``plan.describe()`` says which ran.
        per_octave: size buckets per power of two (:func:`~bayesrank.parallel.plan.make_plan`).
        max_iter, tol, schedule, accelerate: EP's (:func:`bayesrank.inference.ep.fit`).

    Returns:
        :class:`CollectionPrediction`, every query's, on every process. A
        :class:`~bayesrank.diagnostics.ConvergenceWarning` names the queries whose EP did not
        converge.
    """
    problems = check_problems(problems)
    if len(test_pairs) != len(problems):
        raise ValueError(f"{len(problems)} problems but {len(test_pairs)} test pair arrays")
    tests = [
        check_index_pairs(t, p.n, name=f"test_pairs[{k}]")
        for k, (p, t) in enumerate(zip(problems, test_pairs, strict=True))
    ]
    options = _ep_options(max_iter, tol, schedule, accelerate)
    plan, out = _run_collection(
        prior,
        problems,
        tests,
        mesh=mesh,
        method=method,
        per_octave=per_octave,
        posterior=False,
        **options,
    )
    Q = len(plan.sizes)
    fields = {k: [None] * Q for k in _QueryResult._fields}
    for g, res in zip(plan.groups, out, strict=True):
        for q, row in zip(g.queries, g.rows, strict=True):
            n, _, p = plan.sizes[q]
            for k in _QueryResult._fields:
                value = np.asarray(getattr(res, k)[row])
                fields[k][q] = (
                    value[:p]
                    if k in ("prob", "delta_mean", "delta_var")
                    else (value[:n] if k in ("mean", "var") else value)
                )
    result = CollectionPrediction(
        [
            PairPrediction(*v)
            for v in zip(fields["prob"], fields["delta_mean"], fields["delta_var"], strict=True)
        ],
        fields["mean"],
        fields["var"],
        np.asarray(fields["log_evidence"]),
        np.asarray(fields["n_iter"]),
        np.asarray(fields["converged"]),
        np.asarray(fields["max_change"]),
        plan,
    )
    if max_iter:
        warn_if_unconverged(result.converged, "EP fit", ep.EP_ADVICE)
    return result


def _ep_options(max_iter, tol, schedule, accelerate) -> dict:
    max_iter = check_int(max_iter, "max_iter", low=0, high=ep.MAX_ITER_LIMIT)
    ep.check_settings(schedule, "full", 1.0, accelerate)
    tol = ep.default_tol(jnp.result_type(float)) if tol is None else tol
    return dict(max_iter=max_iter, tol=tol, schedule=schedule, accelerate=accelerate)


def fit_ep(
    prior: XPGP,
    problems,
    *,
    mesh=None,
    method: str | None = None,
    per_octave: int = 8,
    max_iter: int = 200,
    tol: float | None = None,
    schedule: str = "parallel",
    accelerate: bool = False,
) -> list[ep.EPPosterior]:
    """EP on every problem under one prior, in one compiled call over the whole collection on
    every device of ``mesh`` (arguments as :func:`fit_predict`).

    Returns one :class:`~bayesrank.inference.ep.EPPosterior` per problem, in order, over its own
    entities and pairs (padding removed); each predicts (``predict_pairs``). For a large
    collection prefer :func:`fit_predict`, which returns predictions rather than every
    ``(n, n)`` covariance.
    """
    options = _ep_options(max_iter, tol, schedule, accelerate)
    plan, out = _run_collection(
        prior,
        problems,
        None,
        mesh=mesh,
        method=method,
        per_octave=per_octave,
        posterior=True,
        **options,
    )
    posts: list = [None] * len(plan.sizes)
    for g, res in zip(plan.groups, out, strict=True):
        for q, row in zip(g.queries, g.rows, strict=True):
            n, m, _ = plan.sizes[q]
            one = jax.tree_util.tree_map(lambda x, row=row: x[row], res)
            posts[q] = ep.unpad_posterior(one, int(n), int(m))
    if max_iter:
        warn_if_unconverged(np.array([bool(p.converged) for p in posts]), "EP fit", ep.EP_ADVICE)
    return posts


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
