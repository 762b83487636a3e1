"""Preferential Bayesian optimisation with a function for the answers, as one compiled program.

The protocol (shared with the peers in ``benchmarks/bench_pbo.py``): ``n_init`` pairs of
uniform designs are answered first; then each of ``k`` iterations fits the posterior (warm
started from the previous sites), proposes a pair of new designs by maximising the acquisition,
and adds the answer. An answer to "is ``a`` better than ``b``?" is yes when ``u <
Phi((f(a) - f(b)) / noise)``, ``u`` the next of the given uniforms, so a seed's answers are the
same for every method. The model's best guess after each answer is the shown design of highest
posterior mean; its true utility is recorded.

Every array has its final size from the start (``2 (n_init + k)`` designs, ``n_init + k``
pairs, masked), so the whole run is one ``lax.scan`` and compiles once; ``vmap`` over its
inputs runs many seeds in one program (``run_batch``).
"""

from __future__ import annotations

from functools import partial
from typing import NamedTuple

import jax
import jax.numpy as jnp
from jax.scipy.special import ndtr

from . import acquisition as acq
from .belief import ENGINES, clip, fit, from_posterior, latent, learn
from .optimize import maximize

__all__ = [
    "Proposed",
    "Settings",
    "Trace",
    "answer",
    "initial_theta",
    "propose",
    "run_batch",
    "run_core",
]


class Settings(NamedTuple):
    """The loop's static settings: ``engine`` (``"laplace"`` or ``"ep"``); ``acquisition``
    (one of ``acquisition.ACQUISITIONS``); ``learn_every``: re-learn ``theta`` before every
    ``learn_every``-th proposal (0: never), with ``learn_steps`` Adam steps; the optimiser's
    ``n_raw``, ``n_starts``, ``steps``; ``n_mc`` base samples for ``"qeubo"``."""

    engine: str = "laplace"
    acquisition: str = "eubo"
    learn_every: int = 1
    learn_steps: int = 20
    n_raw: int = 256
    n_starts: int = 8
    steps: int = 50
    n_mc: int = 256


class Trace(NamedTuple):
    """A run's record: ``best_guess: (k + 1,)`` the true utility of the best guess after the
    initial pairs and after each answer; ``best_shown: (k + 1,)`` the best true utility among
    the shown designs; ``X: (2 (n_init + k), d)`` the designs in the order shown; ``pairs:
    (n_init + k, 2)`` winner first; ``theta`` the last hyperparameters; ``value: (k,)`` each
    proposal's acquisition."""

    best_guess: jax.Array
    best_shown: jax.Array
    X: jax.Array
    pairs: jax.Array
    theta: jax.Array
    value: jax.Array


def initial_theta(dim: int, dtype=None):
    """``theta`` at the hyperprior's mode: ``kappa^2 = 1``, ``ell_k = 1.4 / 2.7``."""
    dtype = dtype or jnp.result_type(float)
    return jnp.concatenate([jnp.zeros(1), jnp.full(dim, jnp.log(1.4 / 2.7))]).astype(dtype)


def answer(utility, a, b, u, noise):
    """Whether ``a`` wins against ``b``: ``u < Phi((f(a) - f(b)) / noise)``."""
    return u < ndtr((utility(a) - utility(b)) / noise)


def acquisition_of(name: str, belief, base):
    """``X: (q, d) -> value`` for the acquisition ``name`` under ``belief``."""
    if name == "eubo":
        return lambda X: acq.eubo(*latent(belief, X))
    if name == "qeubo":
        return lambda X: acq.qeubo(*latent(belief, X), base)[0]
    if name == "variance":
        return lambda X: acq.variance_criterion(*latent(belief, X))
    if name == "bald":
        return lambda X: acq.bald(*latent(belief, X))
    raise ValueError(f"acquisition must be one of {acq.ACQUISITIONS}, got {name!r}")


class Proposed(NamedTuple):
    """``propose``'s result: ``X: (2, d)`` the next pair, ``value`` its acquisition, ``theta``
    the hyperparameters used, ``sites`` the fit's (a warm start for the next), ``mean: (n,)``
    the posterior mean at the shown designs (its argmax is the best guess)."""

    X: jax.Array
    value: jax.Array
    theta: jax.Array
    sites: object
    mean: jax.Array


@partial(jax.jit, static_argnames=("settings", "learn_now"))
def propose(X, mask, pairs, pair_mask, sites, theta, key, *, settings: Settings,
            learn_now: bool) -> Proposed:  # fmt: skip
    """One step of the loop on host data, for a session: re-learn ``theta`` if ``learn_now``,
    fit (warm started from ``sites``), and maximise the acquisition. ``X: (n, d)``, ``mask:
    (n,)``, ``pairs: (m, 2)`` winner first, ``pair_mask: (m,)``, ``sites``: ``(m,)`` each
    (zeros for a cold start); shapes are the caller's capacity, so a session that grows in
    buckets compiles once per bucket."""
    if learn_now:
        theta = learn(theta, X, mask, pairs, pair_mask, sites, steps=settings.learn_steps,
                      engine=settings.engine)  # fmt: skip
    post = fit(theta, X, mask, pairs, pair_mask, sites, settings.engine)
    belief = from_posterior(theta, X, mask, pairs, pair_mask, post)
    raw_key, mc_key = jax.random.split(key)
    base = jax.random.normal(mc_key, (settings.n_mc, 2), X.dtype)
    proposal = maximize(acquisition_of(settings.acquisition, belief, base), raw_key, 2,
                        X.shape[1], n_raw=settings.n_raw, n_starts=settings.n_starts,
                        steps=settings.steps, dtype=X.dtype)  # fmt: skip
    return Proposed(
        proposal.X, proposal.value, theta, post.sites, jnp.where(mask, post.mean, -jnp.inf)
    )


def _best(utility, X, mask, mean):
    guess = jnp.argmax(jnp.where(mask, mean, -jnp.inf))
    shown = jnp.where(mask, utility(X), -jnp.inf)
    return utility(X[guess]), jnp.max(shown)


def run_core(utility, X_init, uniforms, key, noise, theta, *, k: int, settings: Settings):
    """One run (module docstring). ``utility: (..., d) -> (...)`` a JAX function;
    ``X_init: (n_init, 2, d)``; ``uniforms: (n_init + k,)``; ``key`` for the optimiser's
    raw candidates and the Monte Carlo base samples; ``noise > 0``; ``theta: (1 + d,)`` the
    start. Pure; ``utility``, ``k`` and ``settings`` static."""
    if settings.engine not in ENGINES:
        raise ValueError(f"engine must be one of {tuple(ENGINES)}, got {settings.engine!r}")
    n_init, _, d = X_init.shape
    dtype = X_init.dtype
    m = n_init + k
    X = jnp.zeros((2 * m, d), dtype).at[: 2 * n_init].set(X_init.reshape(-1, d))
    mask = jnp.arange(2 * m) < 2 * n_init
    first = jnp.arange(0, 2 * m, 2)
    wins = answer(utility, X[first[:n_init]], X[first[:n_init] + 1], uniforms[:n_init], noise)
    start = jnp.where(wins[:, None], jnp.stack([first, first + 1], 1)[:n_init],
                      jnp.stack([first + 1, first], 1)[:n_init])  # fmt: skip
    pairs = jnp.zeros((m, 2), jnp.int32).at[:n_init].set(start.astype(jnp.int32))
    pair_mask = jnp.arange(m) < n_init
    do_fit = partial(fit, engine=settings.engine)

    def iteration(carry, t):
        X, mask, pairs, pair_mask, sites, theta = carry
        if settings.learn_every:
            theta = jax.lax.cond(
                t % settings.learn_every == 0,
                lambda th: learn(th, X, mask, pairs, pair_mask, sites,
                                 steps=settings.learn_steps, engine=settings.engine),
                lambda th: th,
                theta,
            )  # fmt: skip
        post = do_fit(theta, X, mask, pairs, pair_mask, sites)
        guess, shown = _best(utility, X, mask, post.mean)
        belief = from_posterior(theta, X, mask, pairs, pair_mask, post)
        raw_key, mc_key = jax.random.split(jax.random.fold_in(key, t))
        base = jax.random.normal(mc_key, (settings.n_mc, 2), dtype)
        proposal = maximize(acquisition_of(settings.acquisition, belief, base), raw_key, 2, d,
                            n_raw=settings.n_raw, n_starts=settings.n_starts,
                            steps=settings.steps, dtype=dtype)  # fmt: skip
        a, b = proposal.X[0], proposal.X[1]
        p = n_init + t
        win = answer(utility, a, b, uniforms[p], noise)
        i, j = 2 * p, 2 * p + 1
        X = X.at[i].set(a).at[j].set(b)
        mask = mask.at[i].set(True).at[j].set(True)
        answered = jnp.where(win, jnp.stack([i, j]), jnp.stack([j, i]))
        pairs = pairs.at[p].set(answered.astype(jnp.int32))
        pair_mask = pair_mask.at[p].set(True)
        carry = (X, mask, pairs, pair_mask, post.sites, theta)
        return carry, (guess, shown, proposal.value)

    post = do_fit(theta, X, mask, pairs, pair_mask)
    carry = (X, mask, pairs, pair_mask, post.sites, clip(theta))
    carry, (guess, shown, value) = jax.lax.scan(iteration, carry, jnp.arange(k))
    X, mask, pairs, pair_mask, sites, theta = carry
    post = do_fit(theta, X, mask, pairs, pair_mask, sites)
    last_guess, last_shown = _best(utility, X, mask, post.mean)
    return Trace(
        jnp.append(guess, last_guess),
        jnp.append(shown, last_shown),
        X,
        pairs,
        theta,
        value,
    )


@partial(jax.jit, static_argnames=("utility", "k", "settings"))
def run_batch(utility, X_init, uniforms, keys, noise, theta, *, k: int, settings: Settings):
    """``run_core`` for many seeds in one compiled program: ``X_init: (s, n_init, 2, d)``,
    ``uniforms: (s, n_init + k)``, ``keys: (s,)``; ``noise`` and ``theta`` shared."""
    one = partial(run_core, utility, k=k, settings=settings)
    return jax.vmap(one, in_axes=(0, 0, 0, None, None))(X_init, uniforms, keys, noise, theta)
