"""The one compiled program of a collection: every size group's block of rows, placed on the
mesh, each device mapping the single-query computation (covariance, EP, and the prediction of
test pairs or the whole posterior) over its rows.

On CPUs the groups run one after another (an ``optimization_barrier`` chains them: concurrent
LAPACK calls can stall jaxlib's CPU thread pool); on accelerators they are independent.
"""

from __future__ import annotations

from functools import partial
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from ..data.checks import check_int
from ..inference import ep
from ..kernels.xpgp import check_prior
from ..predict import predict_pairs
from ..runtime import one_blas_thread
from .batching import check_problems
from .distributed import all_sizes
from .mapping import map_queries, query_map_method
from .plan import make_plan
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


class QueryResult(NamedTuple):
    """One query's outputs of the prediction program (padded shapes): the test pairs'
    ``prob``, ``delta_mean``, ``delta_var`` ``(p,)``; the entities' ``mean``, ``var`` ``(n,)``;
    EP's ``log_evidence``, ``n_iter``, ``converged``, ``max_change``."""

    prob: jax.Array
    delta_mean: jax.Array
    delta_var: jax.Array
    mean: jax.Array
    var: jax.Array
    log_evidence: jax.Array
    n_iter: jax.Array
    converged: jax.Array
    max_change: jax.Array


def _one_query(prior, settings, X, graphs, mask, pairs, pair_mask, test, *, posterior, options):
    max_iter, tol = settings
    K = prior.covariance(X, graphs, mask)
    post = ep.fit_core(K, pairs, pair_mask=pair_mask, max_iter=max_iter, tol=tol, **options)
    if posterior:
        return post
    pred = predict_pairs(post.mean, post.cov, test)
    return QueryResult(
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


def run_collection(prior, problems, tests, *, mesh, method, per_octave, posterior, **options):
    """Plan, place, run and gather: ``(plan, per group outputs)``, the outputs (padded, on the
    host, every process's) a :class:`QueryResult` or, with ``posterior``, an ``EPPosterior`` per
    row, stacked. ``tests``: each problem's test pairs, or None."""
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
