"""The greedy exploration loop (paper Sec. 5): ask the best-scoring pair not yet asked, add the
answer, update the EP posterior (warm-started from the previous sites), repeat ``k`` times.

One query's loop is one compiled ``lax.scan`` over the selections (:func:`explore_core`, pure:
it can be ``vmap``-ped over repetitions or mapped over queries); :func:`explore` is the façade
on host arrays. The answers come from ``outcome``, the oracle's answer to every candidate
(held-out labels in an experiment); a person answers through :mod:`bayesrank.active.oracle`.
"""

from __future__ import annotations

from functools import partial
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from ..data.checks import check_choice, check_index_pairs, check_int
from ..data.keys import check_key
from ..inference import ep
from ..inference.ep.sites import zero_sites
from ..predict import predict_pairs
from .criteria import CRITERIA, score

__all__ = ["Exploration", "explore", "explore_core", "next_pair"]


class Exploration(NamedTuple):
    """Result of a loop: ``chosen: (k,)`` indices into the candidates, in the order asked;
    ``pairs: (k, 2)`` the answers as pairs (winner first); the final EP posterior's ``mean: (n,)``
    and ``cov: (n, n)``; ``sites`` (``(k,)`` each, for a warm start); ``n_iter: (k,)`` EP sweeps
    after each answer."""

    chosen: jax.Array
    pairs: jax.Array
    mean: jax.Array
    cov: jax.Array
    sites: ep.Sites
    n_iter: jax.Array


def next_pair(mean, cov, candidates, asked, criterion: str, key=None):
    """The index of the best-scoring candidate not yet ``asked`` (``(c,)`` bool), from the
    posterior ``mean: (n,)``, ``cov: (n, n)``; ties go to the first."""
    pred = predict_pairs(mean, cov, candidates)
    s = score(criterion, pred.delta_mean, pred.delta_var, key)
    return jnp.argmax(jnp.where(asked, -jnp.inf, s))


def explore_core(K, candidates, outcome, key, *, k: int, criterion: str, max_iter=100, tol=None):
    """:func:`explore` as a pure function: ``K: (n, n)``, ``candidates: (c, 2)``, ``outcome:
    (c,)`` bool (True: the first of the pair wins), ``k`` static."""
    K = jnp.asarray(K)
    dtype = K.dtype
    n = K.shape[0]

    def step(state, t):
        pairs, mask, sites, mean, cov, asked, key = state
        key, sub = jax.random.split(key)
        s = next_pair(mean, cov, candidates, asked, criterion, sub)
        i, j = candidates[s, 0], candidates[s, 1]
        pair = jnp.where(outcome[s], jnp.stack([i, j]), jnp.stack([j, i]))
        pairs = pairs.at[t].set(pair)
        mask = mask.at[t].set(True)
        post = ep.fit_core(K, pairs, sites=sites, pair_mask=mask, max_iter=max_iter, tol=tol)
        state = (pairs, mask, post.sites, post.mean, post.cov, asked.at[s].set(True), key)
        return state, (s, post.n_iter)

    start = (
        jnp.tile(jnp.array([0, 1], candidates.dtype), (k, 1)),
        jnp.zeros(k, bool),
        zero_sites(k, dtype),
        jnp.zeros(n, dtype),
        K,
        jnp.zeros(candidates.shape[0], bool),
        key,
    )
    (pairs, _, sites, mean, cov, _, _), (chosen, n_iter) = jax.lax.scan(step, start, jnp.arange(k))
    return Exploration(chosen, pairs, mean, cov, sites, n_iter)


@partial(jax.jit, static_argnames=("k", "criterion"))
def _explore_jit(K, candidates, outcome, key, max_iter, tol, *, k, criterion):
    return explore_core(
        K, candidates, outcome, key, k=k, criterion=criterion, max_iter=max_iter, tol=tol
    )


def explore(
    K,
    candidates,
    outcome,
    k: int,
    criterion: str = "variance_ratio",
    key=None,
    *,
    max_iter: int = 100,
    tol: float | None = None,
) -> Exploration:
    """Ask ``k`` of the ``candidates`` one at a time, greedily by ``criterion``, starting from no
    known pair.

    Args:
        K: ``(n, n)`` prior covariance of the entities' preference degrees.
        candidates: ``(c, 2)`` pairs that may be asked (``c >= k``); their order breaks ties.
        outcome: ``(c,)`` bool, the oracle's answer to each: True if ``candidates[s, 0]`` wins.
        k: how many pairs to ask.
        criterion: ``"variance_ratio"`` (the paper's), ``"mutual_information"`` or ``"random"``
            (:mod:`bayesrank.active.criteria`).
        key: a JAX PRNG key (``"random"`` needs it; default ``PRNGKey(0)``).
        max_iter, tol: each EP update's (:func:`bayesrank.inference.ep.fit`).

    Returns:
        :class:`Exploration`. No candidate is asked twice.
    """
    K = np.asarray(K, jnp.result_type(float))
    if K.ndim != 2 or K.shape[0] != K.shape[1]:
        raise ValueError(f"K must be (n, n), got shape {K.shape}")
    candidates = check_index_pairs(candidates, K.shape[0], name="candidates")
    outcome = np.asarray(outcome)
    if outcome.shape != (len(candidates),) or outcome.dtype != bool:
        raise ValueError(
            f"outcome must be ({len(candidates)},) bool, one answer per candidate; got "
            f"{outcome.dtype} of shape {outcome.shape}"
        )
    k = check_int(k, "k", low=1, high=len(candidates))
    criterion = check_choice(criterion, "criterion", CRITERIA)
    key = jax.random.PRNGKey(0) if key is None else check_key(key)
    tol = ep.default_tol(K.dtype) if tol is None else tol
    return _explore_jit(
        K,
        candidates.astype(np.int32),
        outcome,
        key,
        np.asarray(max_iter, np.int32),
        np.asarray(tol, K.dtype),
        k=k,
        criterion=criterion,
    )
