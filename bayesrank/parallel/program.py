"""The one compiled program of a collection: every size group's block of rows, placed on the
mesh, each device mapping the single-query computation (covariance, the engine's fit, e.g. EP,
and the prediction of
test pairs or the whole posterior) over its rows.

For prediction, EP runs on the entities that the known pairs touch (the others' posterior is
their prior given those: on OHSUMED with 200 known pairs, about half of the ``n^3`` work), and
the posterior of every entity follows in closed form (``predict_new``).

On CPUs the groups run one after another (``runtime.after`` chains them: concurrent batched
LAPACK calls can stall jaxlib's CPU thread pool, with ``method="vmap"`` too); on accelerators
with ``"vmap"`` they are independent.
"""

from __future__ import annotations

from functools import partial
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from ..compiler import jit
from ..data.checks import check_float, check_int
from ..inference.gaussian import predict_new
from ..kernels.xpgp import check_prior, mask_covariance, with_anchor
from ..likelihoods import outcome_probabilities
from ..predict import predict_pairs
from ..querymap import map_queries, query_map_method
from ..runtime import after, one_blas_thread
from .batching import check_problems, outcomes
from .distributed import all_sizes
from .plan import Group, make_plan
from .sharding import check_mesh, gather, place, query_mesh, shard_queries


class _Block(NamedTuple):
    """One size group's rows (this process's block, then sharded): ``X: (r, n, d)`` or None,
    ``graphs`` (per relation, leading axis ``r``), ``mask: (r, n)``, ``pairs: (r, m, 2)``,
    ``pair_mask: (r, m)``, ``valid: (r,)`` (False: an empty slot); for prediction ``test: (r, p,
    2)`` and the touched entities ``entities: (r, t)``, ``entity_mask: (r, t)``, ``pairs`` then
    indexing into ``entities`` (None where the whole posterior is asked for). ``pairs`` holds
    each problem's ``rows`` (pairs, ties, grades); where the collection has ties, grades,
    weights or a tie margin, ``tie``, ``grade``, ``weight: (r, m)`` are their outcomes
    (``PreferenceProblem.outcomes``), and where it has grades ``anchor: (r, n)`` marks each
    graded problem's anchor entity (``with_anchor``); else None."""

    X: np.ndarray | None
    graphs: tuple
    mask: np.ndarray
    pairs: np.ndarray
    pair_mask: np.ndarray
    valid: np.ndarray
    test: np.ndarray | None = None
    entities: np.ndarray | None = None
    entity_mask: np.ndarray | None = None
    tie: np.ndarray | None = None
    grade: np.ndarray | None = None
    weight: np.ndarray | None = None
    anchor: np.ndarray | None = None


class QueryResult(NamedTuple):
    """One query's outputs of the prediction program (padded shapes): the test pairs'
    ``prob``, ``delta_mean``, ``delta_var`` ``(p,)``; the entities' ``mean``, ``var`` ``(n,)``;
    EP's ``log_evidence``, ``n_iter``, ``converged``, ``max_change``; the test pairs' ``win``,
    ``tie``, ``loss`` ``(p,)`` under the prior's tie margin (0 where it has none)."""

    prob: jax.Array
    delta_mean: jax.Array
    delta_var: jax.Array
    mean: jax.Array
    var: jax.Array
    log_evidence: jax.Array
    n_iter: jax.Array
    converged: jax.Array
    max_change: jax.Array
    win: jax.Array
    tie: jax.Array
    loss: jax.Array


def _one_query(prior, engine, row: _Block):
    """The engine's posterior of one query, or (``row.test`` given) its posterior of the touched
    entities and the prediction of its test pairs from every entity's posterior."""
    K = with_anchor(prior.covariance(row.X, row.graphs, row.mask), row.anchor)
    rows = None if row.tie is None else (row.tie, row.grade, row.weight)
    fit = partial(engine.fit, pair_mask=row.pair_mask, outcomes=outcomes(prior, rows))
    if row.test is None:
        return fit(K, row.pairs)
    K_touched = mask_covariance(K[row.entities[:, None], row.entities[None, :]], row.entity_mask)
    post = fit(K_touched, row.pairs)
    mean, cov = predict_new(
        post.mean, post.cov, row.pairs, post.sites, K[row.entities], K, row.pair_mask
    )
    pred = predict_pairs(mean, cov, row.test)
    margin = jnp.zeros((), K.dtype) if prior.margin is None else prior.margin
    return QueryResult(
        *pred,
        mean,
        jnp.diag(cov),
        post.log_evidence,
        post.n_iter,
        post.converged,
        post.max_change,
        *outcome_probabilities(pred.delta_mean, pred.delta_var, margin),
    )


@partial(jit, static_argnames=("mesh", "method"))
def _collection_jit(prior, blocks, engine, *, mesh, method):
    def per_device(shared, rows: _Block):
        prior, engine = shared
        return map_queries(
            lambda row: _one_query(prior, engine, row), rows, method=method, valid=rows.valid
        )

    # one group after another where a group's LAPACK calls run on a CPU (or one at a time)
    chain = method == "map" or mesh.devices.flat[0].platform == "cpu"
    results, previous = [], None
    for block in blocks:
        if previous is not None and chain:
            block = after(block, previous)
        out = shard_queries(per_device, mesh, (prior, engine), block)
        results.append(out)
        previous = out.log_evidence
    return tuple(results)


def _block(prior, problems, tests, rows, local_rows: int, g: Group, kinds) -> _Block:
    """Host arrays of one group's block: ``problems[k]`` (with ``tests[k]``, or no test pairs
    where ``tests`` is None) at row ``rows[k]`` of ``local_rows``; the other rows empty.
    ``kinds = (outcomes, anchored)``: whether the collection (every process's) needs the rows'
    outcomes, and anchors, so that every block has the same structure."""
    n, m = g.n, g.m
    dtype = np.dtype(jnp.result_type(float))
    has_X = prior.attribute is not None
    d = next((q.X.shape[1] for q in problems if q.X is not None), 1)
    X = np.zeros((local_rows, n, d), dtype) if has_X else None
    mask = np.zeros((local_rows, n), bool)
    pairs = np.tile(np.array([0, 1], np.int32), (local_rows, m, 1))
    pair_mask = np.zeros((local_rows, m), bool)
    valid = np.zeros(local_rows, bool)
    with_outcomes, anchored = kinds
    tie = np.zeros((local_rows, m), bool) if with_outcomes else None
    grade = np.full((local_rows, m), -1, np.int64) if with_outcomes else None
    weight = np.ones((local_rows, m), dtype) if with_outcomes else None
    anchor = np.zeros((local_rows, n), bool) if anchored else None
    for q, row in zip(problems, rows, strict=True):
        if has_X:
            X[row, : q.n] = q.X
        mask[row, : q.n] = True
        count = len(q.rows)
        pairs[row, :count] = q.rows
        pair_mask[row, :count] = True
        valid[row] = True
        if with_outcomes:
            tie[row, :count], grade[row, :count], weight[row, :count] = q.outcomes()
        if anchored:
            anchor[row, q.n] = q.anchored
    graphs = []
    for r, kernel in enumerate(prior.relations):
        empty = kernel.prepare(np.zeros((n, n)))
        per_row = [empty] * local_rows
        for q, row in zip(problems, rows, strict=True):
            W = np.zeros((n, n))
            W[: q.n, : q.n] = q.relations[r]
            per_row[row] = kernel.prepare(W)
        graphs.append(jax.tree_util.tree_map(lambda *a: np.stack(a), *per_row))
    block = _Block(
        X,
        tuple(graphs),
        mask,
        pairs,
        pair_mask,
        valid,
        tie=tie,
        grade=grade,
        weight=weight,
        anchor=anchor,
    )
    if tests is None:
        return block
    test = np.tile(np.array([0, 1], np.int32), (local_rows, g.p, 1))
    entities = np.zeros((local_rows, g.t), np.int32)
    entity_mask = np.zeros((local_rows, g.t), bool)
    for q, t, row in zip(problems, tests, rows, strict=True):
        test[row, : len(t)] = t
        touched = np.unique(q.rows)
        entities[row, : len(touched)], entity_mask[row, : len(touched)] = touched, True
        pairs[row, : len(q.rows)] = np.searchsorted(touched, q.rows)
    return block._replace(test=test, entities=entities, entity_mask=entity_mask)


def run_collection(prior, problems, tests, *, mesh, method, per_octave, engine, slack):
    """Plan, place, run and gather: ``(plan, anchored, per group outputs)``, the outputs
    (padded, on the host, every process's) a ``QueryResult`` per row, stacked, or (``tests``
    None) the engine's posterior (e.g. an ``EPPosterior``) per row; ``anchored: (Q,)`` bool,
    whether a query's last entity (``plan.sizes[q, 0] - 1``) is its grades' anchor.
    ``tests``: each problem's test pairs, or None."""
    problems = check_problems(problems, prior)
    check_prior(prior, next((p.X.shape[1] for p in problems if p.X is not None), None))
    if len({p.X is None for p in problems}) != 1 or len({len(p.relations) for p in problems}) != 1:
        raise ValueError("problems differ in whether they have attributes or in their relations")
    if (problems[0].X is None) != (prior.attribute is None):
        which = "has no" if prior.attribute is None else "has an"
        raise ValueError(f"the prior {which} attribute kernel; the problems do not match")
    if len(problems[0].relations) != len(prior.relations):
        raise ValueError(
            f"the prior has {len(prior.relations)} relation kernel(s), the problems "
            f"{len(problems[0].relations)} relation(s)"
        )
    per_octave = check_int(per_octave, "per_octave", low=1)
    slack = check_float(slack, "slack", low=1.0, allow_none=True)
    mesh = query_mesh() if mesh is None else mesh
    n_processes, per_process = check_mesh(mesh)
    if n_processes != jax.process_count():
        raise ValueError(f"the mesh spans {n_processes} of {jax.process_count()} processes")
    method = query_map_method(method, next(iter(mesh.devices.flat)).platform)
    sizes = [
        (p.n + p.anchored, len(p.rows), 0, p.n + p.anchored)
        if tests is None
        else (p.n + p.anchored, len(p.rows), len(t), max(2, len(np.unique(p.rows))))
        for p, t in zip(problems, tests or [None] * len(problems), strict=True)
    ]
    sizes, owner = all_sizes(np.array(sizes, np.int64).reshape(-1, 4))
    flags, _ = all_sizes(np.array([(p.has_outcomes, p.anchored) for p in problems]).reshape(-1, 2))
    kinds = (bool(flags[:, 0].any()) or prior.margin is not None, bool(flags[:, 1].any()))
    plan = make_plan(sizes, owner, n_processes, per_process, method, per_octave, slack)
    me = jax.process_index()
    offset = int(np.sum(owner < me))
    blocks = []
    for g in plan.groups:
        local_rows = per_process * g.rows_per_device
        mine = owner[g.queries] == me
        qs = g.queries[mine] - offset
        block = _block(
            prior,
            [problems[k] for k in qs],
            None if tests is None else [tests[k] for k in qs],
            g.rows[mine] - me * local_rows,
            local_rows,
            g,
            kinds,
        )
        blocks.append(place(block, mesh, local_rows * n_processes))
    engine = engine.with_defaults(jnp.result_type(float))
    shared_prior = jax.tree_util.tree_map(np.asarray, prior)
    with one_blas_thread():
        out = gather(_collection_jit(shared_prior, tuple(blocks), engine, mesh=mesh, method=method))
    return plan, flags[:, 1].astype(bool), out
