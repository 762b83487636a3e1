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
from ..parallel import map_queries
from ..predict import predict_pairs
from .criteria import CRITERIA, score

__all__ = ["Exploration", "explore", "explore_core", "next_pair"]


class Exploration(NamedTuple):
    """Result of a loop: ``chosen: (k,)`` indices into the candidates, in the order asked;
    ``pairs: (k, 2)`` the answers as pairs (winner first); the final EP posterior's ``mean: (n,)``
    and ``cov: (n, n)``; ``sites`` (``(k,)`` each, for a warm start); ``n_iter: (k / batch,)`` EP
    sweeps after each round's answers; ``curve: (k / batch,)`` (with ``test`` pairs) the pairwise
    error on them after each round (a pair an error where ``P(winner beats loser) < 1/2``, half
    one at ``1/2``)."""

    chosen: jax.Array
    pairs: jax.Array
    mean: jax.Array
    cov: jax.Array
    sites: ep.Sites
    n_iter: jax.Array
    curve: jax.Array | None = None


def next_pair(mean, cov, candidates, asked, criterion: str, key=None):
    """The index of the best-scoring candidate not yet ``asked`` (``(c,)`` bool), from the
    posterior ``mean: (n,)``, ``cov: (n, n)``; ties go to the first."""
    pred = predict_pairs(mean, cov, candidates)
    s = score(criterion, pred.delta_mean, pred.delta_var, key)
    return jnp.argmax(jnp.where(asked, -jnp.inf, s))


def _ask(K, candidates, outcome, key, pairs, mask, sites, mean, cov, asked, t, criterion, fit):
    """One greedy pick at position ``t`` (answered by ``outcome``, or where ``outcome`` is None
    by the more probable orientation: a fantasy) and the EP update."""
    key, sub = jax.random.split(key)
    s = next_pair(mean, cov, candidates, asked, criterion, sub)
    i, j = candidates[s, 0], candidates[s, 1]
    if outcome is None:
        first = predict_pairs(mean, cov, candidates[s][None]).delta_mean[0] >= 0
    else:
        first = outcome[s]
    pairs = pairs.at[t].set(jnp.where(first, jnp.stack([i, j]), jnp.stack([j, i])))
    mask = mask.at[t].set(True)
    post = fit(K, pairs, sites=sites, pair_mask=mask)
    return s, key, pairs, mask, post, asked.at[s].set(True)


def _error(mean, cov, test):
    if test is None:
        return jnp.zeros((), mean.dtype)
    prob = predict_pairs(mean, cov, test).prob
    return jnp.mean(jnp.where(prob < 0.5, 1.0, jnp.where(prob == 0.5, 0.5, 0.0)))


def explore_core(
    K,
    candidates,
    outcome,
    key,
    *,
    k: int,
    criterion: str,
    batch: int = 1,
    max_iter=100,
    tol=None,
    test=None,
):
    """:func:`explore` as a pure function: ``K: (n, n)``, ``candidates: (c, 2)``, ``outcome:
    (c,)`` bool (True: the first of the pair wins), ``k`` and ``batch`` static; ``test: (p, 2)``
    held-out pairs, winner first, or None."""
    K = jnp.asarray(K)
    dtype = K.dtype
    n = K.shape[0]
    fit = partial(ep.fit_core, max_iter=max_iter, tol=tol)

    def one_round(state, r):
        pairs, mask, sites, mean, cov, asked, key = state
        if batch == 1:
            s, key, pairs, mask, post, asked = _ask(
                K,
                candidates,
                outcome,
                key,
                pairs,
                mask,
                sites,
                mean,
                cov,
                asked,
                r,
                criterion,
                fit,
            )
            state = (pairs, mask, post.sites, post.mean, post.cov, asked, key)
            return state, (s[None], post.n_iter, _error(post.mean, post.cov, test))

        def fantasy(inner, b):  # the batch's picks, each answered by its more probable side
            f_pairs, f_mask, f_sites, f_mean, f_cov, f_asked, key = inner
            s, key, f_pairs, f_mask, post, f_asked = _ask(
                K,
                candidates,
                None,
                key,
                f_pairs,
                f_mask,
                f_sites,
                f_mean,
                f_cov,
                f_asked,
                r * batch + b,
                criterion,
                fit,
            )
            return (f_pairs, f_mask, post.sites, post.mean, post.cov, f_asked, key), s

        inner, chosen = jax.lax.scan(fantasy, state, jnp.arange(batch))
        _, mask, f_sites, _, _, asked, key = inner
        first = outcome[chosen]
        i, j = candidates[chosen, 0], candidates[chosen, 1]
        real = jnp.stack([jnp.where(first, i, j), jnp.where(first, j, i)], axis=1)
        pairs = jax.lax.dynamic_update_slice(pairs, real.astype(pairs.dtype), (r * batch, 0))
        post = fit(K, pairs, sites=f_sites, pair_mask=mask)
        state = (pairs, mask, post.sites, post.mean, post.cov, asked, key)
        return state, (chosen, post.n_iter, _error(post.mean, post.cov, test))

    start = (
        jnp.tile(jnp.array([0, 1], candidates.dtype), (k, 1)),
        jnp.zeros(k, bool),
        zero_sites(k, dtype),
        jnp.zeros(n, dtype),
        K,
        jnp.zeros(candidates.shape[0], bool),
        key,
    )
    (pairs, _, sites, mean, cov, _, _), (chosen, n_iter, curve) = jax.lax.scan(
        one_round, start, jnp.arange(k // batch)
    )
    curve = None if test is None else curve
    return Exploration(chosen.reshape(-1), pairs, mean, cov, sites, n_iter, curve)


@partial(jax.jit, static_argnames=("k", "criterion", "batch"))
def _explore_jit(K, candidates, outcome, keys, max_iter, tol, test, *, k, criterion, batch):
    def one(key):
        return explore_core(
            K,
            candidates,
            outcome,
            key,
            k=k,
            criterion=criterion,
            batch=batch,
            max_iter=max_iter,
            tol=tol,
            test=test,
        )

    return map_queries(one, keys)  # repetitions: lax.map on a CPU, vmap on accelerators


def explore(
    K,
    candidates,
    outcome,
    k: int,
    criterion: str = "variance_ratio",
    key=None,
    *,
    batch: int = 1,
    repeats: int | None = None,
    test=None,
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
        batch: pairs chosen per round (``k`` a multiple of it). Within a round each pick is
            answered by a **fantasy**, the more probable side under the current posterior (the
            "believer" approximation), and the posterior updated before the next pick; the real
            answers then replace the fantasies. ``batch = 1``: the paper's one-at-a-time rule.
        repeats: run the loop this many times, with keys ``jax.random.split(key, repeats)``, in
            one compiled call (``"random"`` repetitions); every field then has a leading axis.
        test: ``(p, 2)`` held-out pairs, winner first: the result's ``curve`` is the pairwise
            error on them after each round.
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
    batch = check_int(batch, "batch", low=1, high=k)
    if k % batch:
        raise ValueError(f"k={k} must be a multiple of batch={batch}")
    criterion = check_choice(criterion, "criterion", CRITERIA)
    key = jax.random.PRNGKey(0) if key is None else check_key(key)
    tol = ep.default_tol(K.dtype) if tol is None else tol
    if test is not None:
        test = check_index_pairs(test, K.shape[0], name="test").astype(np.int32)
    if repeats is not None:
        repeats = check_int(repeats, "repeats", low=1)
    keys = key[None] if repeats is None else jax.random.split(key, repeats)
    out = _explore_jit(
        K,
        candidates.astype(np.int32),
        outcome,
        keys,
        np.asarray(max_iter, np.int32),
        np.asarray(tol, K.dtype),
        test,
        k=k,
        criterion=criterion,
        batch=batch,
    )
    return out if repeats is not None else jax.tree_util.tree_map(lambda x: x[0], out)
