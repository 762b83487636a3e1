"""The greedy exploration loop (paper Sec. 5): ask the best-scoring pair not yet asked, add the
answer, update the posterior (EP or Laplace, warm-started from the previous sites), repeat ``k``
times.

One query's loop is one compiled ``lax.scan`` over the selections (``explore_core``, pure:
it can be ``vmap``-ped over repetitions or mapped over queries); ``collection`` holds the
façades on host arrays. The answers come from ``outcome``, the oracle's answer to every
candidate (held-out labels in an experiment); a person answers through ``session``.
"""

from __future__ import annotations

from functools import partial
from typing import NamedTuple

import jax
import jax.numpy as jnp

from .._moved import moved
from ..inference.engine import GaussianEngine
from ..inference.engines import resolve
from ..inference.gaussian.sites import Sites, zero_sites
from ..predict import predict_pairs
from .criteria import score

__all__ = ["Exploration", "explore_core", "next_pair"]


class Exploration(NamedTuple):
    """Result of a loop: ``chosen: (k,)`` indices into the candidates, in the order asked;
    ``pairs: (k, 2)`` the answers as pairs (winner first); the final posterior's ``mean: (n,)``
    and ``cov: (n, n)``; ``sites`` (``(k,)`` each, for a warm start); ``n_iter: (k / batch,)``
    EP sweeps (Newton steps) after each round's answers; ``curve: (k / batch,)`` (with ``test``
    pairs) the pairwise error on them after each round (a pair an error where ``P(winner beats
    loser) < 1/2``, half one at ``1/2``)."""

    chosen: jax.Array
    pairs: jax.Array
    mean: jax.Array
    cov: jax.Array
    sites: Sites
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


def _error(mean, cov, test, test_mask):
    """The pairwise error on the ``test`` pairs (winner first) where ``test_mask``."""
    if test is None:
        return jnp.zeros((), mean.dtype)
    prob = predict_pairs(mean, cov, test).prob
    wrong = jnp.where(prob < 0.5, 1.0, jnp.where(prob == 0.5, 0.5, 0.0))
    if test_mask is None:
        return jnp.mean(wrong)
    return jnp.sum(jnp.where(test_mask, wrong, 0.0)) / jnp.maximum(jnp.sum(test_mask), 1)


def explore_core(
    K,
    candidates,
    outcome,
    key,
    *,
    k: int,
    criterion: str,
    batch: int = 1,
    engine: GaussianEngine | str = "ep",
    available=None,
    test=None,
    test_mask=None,
):
    """``explore`` as a pure function: ``K: (n, n)``, ``candidates: (c,
    2)``, ``outcome: (c,)`` bool (True: the first of the pair wins); ``k`` and ``batch``
    static; ``engine`` a ``GaussianEngine`` (its numbers may be traced) or its name, the
    posterior update after each answer. ``available: (c,)`` bool, the candidates that
    may be asked (default all: padded candidates are unavailable); ``test: (p, 2)`` held-out
    pairs, winner first, or None, and ``test_mask: (p,)`` the real ones among them."""
    K = jnp.asarray(K)
    dtype = K.dtype
    n = K.shape[0]
    fit = resolve(engine, gaussian=True).fit
    error = partial(_error, test=test, test_mask=test_mask)

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
            return state, (s[None], post.n_iter, error(post.mean, post.cov))

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
        return state, (chosen, post.n_iter, error(post.mean, post.cov))

    start = (
        jnp.tile(jnp.array([0, 1], candidates.dtype), (k, 1)),
        jnp.zeros(k, bool),
        zero_sites(k, dtype),
        jnp.zeros(n, dtype),
        K,
        jnp.zeros(candidates.shape[0], bool) if available is None else ~available,
        key,
    )
    (pairs, _, sites, mean, cov, _, _), (chosen, n_iter, curve) = jax.lax.scan(
        one_round, start, jnp.arange(k // batch)
    )
    curve = None if test is None else curve
    return Exploration(chosen.reshape(-1), pairs, mean, cov, sites, n_iter, curve)


# explore (a collection's exploration) moved to active.collection.
# ENGINES (the loop's engines by name) is the one registry of engines now.
__getattr__ = moved(
    __name__,
    {"explore": "bayesrank.active.collection", "ENGINES": "bayesrank.inference.engines"},
)
