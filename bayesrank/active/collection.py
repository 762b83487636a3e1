"""The exploration loop on host arrays: one query (``explore``) or a whole collection of
queries with its random repetitions in one compiled call (``explore_queries``).

Both pad each query to bucketed shapes (``bucket_size``): padded
entities get a decoupled unit prior, padded candidates are unavailable and padded test pairs are
masked out, so a padded query asks exactly what it asks alone, and queries of similar size share
one compiled program. The rows (query, repetition) then go through
``map_queries``: ``lax.map`` on a CPU, ``vmap`` on an accelerator.
"""

from __future__ import annotations

import dataclasses
import warnings
from collections.abc import Sequence
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np

from ..compiler import jit
from ..data.batch import bucket_size
from ..data.checks import check_choice, check_index_pairs, check_int
from ..data.keys import check_key
from ..inference.engine import GaussianEngine
from ..inference.engines import resolve
from ..parallel import map_queries
from ..runtime import warn_if_float32
from .criteria import CRITERIA
from .loop import Exploration, explore_core

__all__ = ["explore", "explore_queries"]

#: Queries whose sizes round to the same ``bucket_size(n, GROUPS_PER_OCTAVE)`` share a compiled
#: call (EP's ``n^3``: padding a 40-document query to 300 would waste almost all its work).
GROUPS_PER_OCTAVE = 4


def _check_query(K, candidates, outcome, test, where: str):
    """One query's host arrays, checked; ``where`` names the query in errors."""
    K = np.asarray(K, jnp.result_type(float))
    if K.ndim != 2 or K.shape[0] != K.shape[1]:
        raise ValueError(f"{where}K must be (n, n), got shape {K.shape}")
    candidates = check_index_pairs(candidates, K.shape[0], name=f"{where}candidates")
    outcome = np.asarray(outcome)
    if outcome.shape != (len(candidates),) or outcome.dtype != bool:
        raise ValueError(
            f"{where}outcome must be ({len(candidates)},) bool, one answer per candidate; got "
            f"{outcome.dtype} of shape {outcome.shape}"
        )
    if test is not None:
        test = check_index_pairs(test, K.shape[0], name=f"{where}test")
    return K, candidates, outcome, test


def _pad_rows(queries, with_test: bool):
    """The queries stacked at bucketed sizes: ``K (Q, n, n)`` (a unit prior on padded entities),
    ``candidates (Q, c, 2)`` with ``outcome`` and ``available (Q, c)``, ``test (Q, p, 2)`` with
    ``test_mask`` (or None)."""
    n = bucket_size(max(len(K) for K, *_ in queries))
    c = bucket_size(max(len(cand) for _, cand, *_ in queries))
    Ks = np.tile(np.eye(n, dtype=queries[0][0].dtype), (len(queries), 1, 1))
    cands = np.zeros((len(queries), c, 2), np.int32)
    cands[:, :, 1] = 1  # a harmless pair in the unavailable padding
    outcome = np.zeros((len(queries), c), bool)
    available = np.zeros((len(queries), c), bool)
    for q, (K, cand, out, _) in enumerate(queries):
        Ks[q, : len(K), : len(K)] = K
        cands[q, : len(cand)] = cand
        outcome[q, : len(cand)] = out
        available[q, : len(cand)] = True
    if not with_test:
        return Ks, cands, outcome, available, None, None
    p = bucket_size(max(len(t) for *_, t in queries))
    test = np.zeros((len(queries), p, 2), np.int32)
    test[:, :, 1] = 1
    test_mask = np.zeros((len(queries), p), bool)
    for q, (*_, t) in enumerate(queries):
        test[q, : len(t)] = t
        test_mask[q, : len(t)] = True
    return Ks, cands, outcome, available, test, test_mask


@partial(jit, static_argnames=("k", "criterion", "batch", "method"))
def _explore_rows(data, rows, keys, engine, *, k, criterion, batch, method):
    """Every row ``(query index, key)``: its query's loop, mapped over the rows."""
    Ks, cands, outcome, available, test, test_mask = data

    def one(q, key):
        return explore_core(
            Ks[q],
            cands[q],
            outcome[q],
            key,
            k=k,
            criterion=criterion,
            batch=batch,
            engine=engine,
            available=available[q],
            test=None if test is None else test[q],
            test_mask=None if test_mask is None else test_mask[q],
        )

    return map_queries(one, rows, keys, method=method)


def _run(queries, keys, k, criterion, batch, engine, method):
    """The loops of ``queries`` (checked host tuples ``(K, candidates, outcome, test)``), query
    ``q`` once per key of ``keys[q]: (R, 2)``; returns one ``Exploration`` per query with
    a leading repetition axis, unpadded. Queries run in groups of similar size (``n`` within
    a quarter octave), one compiled call each."""
    for q, (_, cand, _, _) in enumerate(queries):
        if len(cand) < k:
            raise ValueError(f"query {q} has {len(cand)} candidates, fewer than k={k}")
    engine = engine.with_defaults(queries[0][0].dtype)
    groups: dict[int, list[int]] = {}
    for q, (K, *_) in enumerate(queries):
        groups.setdefault(bucket_size(len(K), per_octave=GROUPS_PER_OCTAVE), []).append(q)
    results = [None] * len(queries)
    for members in groups.values():
        data = _pad_rows([queries[q] for q in members], queries[0][3] is not None)
        rows = np.concatenate([np.full(len(keys[q]), r, np.int32) for r, q in enumerate(members)])
        out = _explore_rows(
            data,
            rows,
            jnp.concatenate([keys[q] for q in members]),
            engine,
            k=k,
            criterion=criterion,
            batch=batch,
            method=method,
        )
        out = jax.device_get(out)
        start = 0
        for q in members:
            n, stop = len(queries[q][0]), start + len(keys[q])
            part = jax.tree_util.tree_map(lambda x, a=start, b=stop: x[a:b], out)
            results[q] = part._replace(mean=part.mean[:, :n], cov=part.cov[:, :n, :n])
            start = stop
    return results


def _check_options(k, criterion, batch, engine, repeats, smallest: int, old: dict, where: str):
    """The checked options; ``engine`` resolved, or spelled by the old ``max_iter``/``tol``
    keywords (a ``DeprecationWarning``)."""
    if unknown := sorted(set(old) - {"max_iter", "tol"}):
        raise TypeError(f"{where}() got an unexpected keyword argument {unknown[0]!r}")
    engine = resolve(engine, gaussian=True)
    if old := {name: value for name, value in old.items() if value is not None}:
        engine = dataclasses.replace(engine, **old)
        warnings.warn(
            f"{where}({', '.join(f'{k}={v!r}' for k, v in old.items())}) is deprecated: pass "
            f"engine={engine!r}",
            DeprecationWarning,
            stacklevel=3,
        )
    k = check_int(k, "k", low=1, high=smallest)
    batch = check_int(batch, "batch", low=1, high=k)
    if k % batch:
        raise ValueError(f"k={k} must be a multiple of batch={batch}")
    criterion = check_choice(criterion, "criterion", CRITERIA)
    if repeats is not None:
        repeats = check_int(repeats, "repeats", low=1)
    return k, criterion, batch, engine, repeats


def _keys(key, repeats):
    return key[None] if repeats is None else jax.random.split(key, repeats)


def explore(
    K,
    candidates,
    outcome,
    k: int,
    criterion: str = "variance_ratio",
    key=None,
    *,
    batch: int = 1,
    engine: GaussianEngine | str = "ep",
    repeats: int | None = None,
    test=None,
    method: str | None = None,
    **old_keywords,
) -> Exploration:
    """Ask ``k`` of the ``candidates`` one at a time, greedily by ``criterion``, starting from no
    known pair.

    Args:
        K: ``(n, n)`` prior covariance of the entities' preference degrees.
        candidates: ``(c, 2)`` pairs that may be asked (``c >= k``); their order breaks ties.
        outcome: ``(c,)`` bool, the oracle's answer to each: True if ``candidates[s, 0]`` wins.
        k: how many pairs to ask.
        criterion: ``"variance_ratio"`` (the paper's), ``"mutual_information"`` or ``"random"``
            (``bayesrank.active.criteria``).
        key: a JAX PRNG key (``"random"`` needs it; default ``PRNGKey(0)``).
        batch: pairs chosen per round (``k`` a multiple of it). Within a round each pick is
            answered by a **fantasy**, the more probable side under the current posterior (the
            "believer" approximation), and the posterior updated before the next pick; the real
            answers then replace the fantasies. ``batch = 1``: the paper's one-at-a-time rule.
        engine: the posterior update after each answer, warm-started from the previous sites:
            a ``GaussianEngine`` (``bayesrank.inference.engine``): ``EP(...)`` (default),
            ``Laplace(...)`` or your own; ``"ep"`` and ``"laplace"`` name the first two.
        repeats: run the loop this many times, with keys ``jax.random.split(key, repeats)``, in
            one compiled call (``"random"`` repetitions); every field then has a leading axis.
        test: ``(p, 2)`` held-out pairs, winner first: the result's ``curve`` is the pairwise
            error on them after each round.
        method: how repetitions are mapped (``query_map_method``).
        old_keywords: ``max_iter``, ``tol``: the old spelling of the engine's settings (a
            ``DeprecationWarning``).

    Returns:
        ``Exploration``. No candidate is asked twice.
    """
    warn_if_float32("active.explore")
    query = _check_query(K, candidates, outcome, test, "")
    k, criterion, batch, engine, repeats = _check_options(
        k, criterion, batch, engine, repeats, len(query[1]), old_keywords, "explore"
    )
    key = jax.random.PRNGKey(0) if key is None else check_key(key)
    (out,) = _run([query], [_keys(key, repeats)], k, criterion, batch, engine, method)
    return out if repeats is not None else jax.tree_util.tree_map(lambda x: x[0], out)


def explore_queries(
    Ks: Sequence,
    candidates: Sequence,
    outcomes: Sequence,
    k: int,
    criterion: str = "variance_ratio",
    key=None,
    *,
    batch: int = 1,
    engine: GaussianEngine | str = "ep",
    repeats: int | None = None,
    tests: Sequence | None = None,
    method: str | None = None,
    **old_keywords,
) -> list[Exploration]:
    """``explore`` on every query of a collection, with its repetitions, in one compiled
    call: ``Ks[q]: (n_q, n_q)``, ``candidates[q]: (c_q, 2)``, ``outcomes[q]: (c_q,)`` and
    ``tests[q]: (p_q, 2)`` (or ``tests`` None) per query, the options as ``explore``'s.

    Query ``q`` runs with the key ``jax.random.fold_in(key, q)`` (split ``repeats`` times), so
    ``explore_queries(...)[q]`` equals ``explore(Ks[q], ..., key=jax.random.fold_in(key, q))``
    exactly. Queries of similar size are padded to one shape and run in one compiled call
    (``GROUPS_PER_OCTAVE``); a collection of very different sizes makes a few calls.

    Returns:
        one ``Exploration`` per query.
    """
    warn_if_float32("active.explore_queries")
    if not len(Ks) or not (len(Ks) == len(candidates) == len(outcomes)):
        raise ValueError(
            f"Ks, candidates and outcomes must be non-empty and of one length, got {len(Ks)}, "
            f"{len(candidates)} and {len(outcomes)}"
        )
    if tests is not None and len(tests) != len(Ks):
        raise ValueError(f"tests must have one entry per query ({len(Ks)}), got {len(tests)}")
    queries = [
        _check_query(K, c, o, None if tests is None else tests[q], f"query {q}: ")
        for q, (K, c, o) in enumerate(zip(Ks, candidates, outcomes, strict=True))
    ]
    k, criterion, batch, engine, repeats = _check_options(
        k,
        criterion,
        batch,
        engine,
        repeats,
        max(len(c) for _, c, _, _ in queries),
        old_keywords,
        "explore_queries",
    )
    key = jax.random.PRNGKey(0) if key is None else check_key(key)
    keys = [_keys(jax.random.fold_in(key, q), repeats) for q in range(len(queries))]
    out = _run(queries, keys, k, criterion, batch, engine, method)
    return out if repeats is not None else [jax.tree_util.tree_map(lambda x: x[0], o) for o in out]
