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

import time
from functools import partial
from typing import NamedTuple

import jax
import jax.numpy as jnp
from jax.scipy.special import ndtr

from ...compiler import jit
from ...data.checks import check_int
from ...executables import stored
from ...inference.engine import GaussianEngine
from ...inference.nuts.sampler import NUTSSettings, sample_fixed
from ...runtime import after
from . import acquisition as acq
from . import search
from .belief import (
    DrawBelief,
    clip,
    fit,
    from_draws,
    from_posterior,
    latent,
    latent_draws,
    learn,
    prior_covariance,
)
from .search import best_in_pool
from .settings import Settings, check_mode, check_settings, gaussian_engine

#: ``fold_in`` index of NUTS's key within a step's key (the rest of the step uses the key itself).
NUTS_STREAM = 7

__all__ = [
    "DesignTrace",
    "Proposed",
    "Settings",
    "Trace",
    "answer",
    "check_settings",
    "fitted",
    "initial_theta",
    "propose",
    "propose_within",
    "run_batch",
    "run_core",
]


class DesignTrace(NamedTuple):
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


#: The old name (learning has its own ``Trace``, of a fit's steps).
Trace = DesignTrace


def initial_theta(dim: int, dtype=None):
    """``theta`` at the hyperprior's mode: ``kappa^2 = 1``, ``ell_k = 1.4 / 2.7``."""
    dtype = dtype or jnp.result_type(float)
    return jnp.concatenate([jnp.zeros(1), jnp.full(dim, jnp.log(1.4 / 2.7))]).astype(dtype)


def answer(utility, a, b, u, noise):
    """Whether ``a`` wins against ``b``: ``u < Phi((f(a) - f(b)) / noise)``."""
    return u < ndtr((utility(a) - utility(b)) / noise)


def acquisition_of(name: str, belief, base):
    """``X: (q, d) -> value`` for the acquisition ``name`` under ``belief`` (a ``Belief``, or a
    ``DrawBelief`` whose draws are extended with the fixed normals ``base: (S, q)``). ``q`` is
    2, or ``acquisition.DESIGNS[name]`` (the knowledge gradient's look-ahead designs follow
    the pair)."""
    if name not in acq.ACQUISITIONS:
        raise ValueError(f"acquisition must be one of {acq.ACQUISITIONS}, got {name!r}")
    if isinstance(belief, DrawBelief):

        def moments(X):
            f = latent_draws(belief, X, base)
            return jnp.mean(f, axis=0), jnp.cov(f.T, ddof=0)

        if name in ("eubo", "qeubo"):
            return lambda X: acq.eubo_from_draws(latent_draws(belief, X, base))[0]
        if name == "kg":
            return lambda X: acq.knowledge_gradient_from_draws(latent_draws(belief, X, base))[0]
    else:

        def moments(X):
            return latent(belief, X)

        if name == "qeubo":
            return lambda X: acq.qeubo(*latent(belief, X), base)[0]
    rule = {"eubo": acq.eubo, "variance": acq.variance_criterion, "bald": acq.bald,
            "kg": acq.knowledge_gradient}[name]  # fmt: skip
    return lambda X: rule(*moments(X))


def posterior(theta, X, mask, pairs, pair_mask, sites, key, settings: Settings):
    """``(belief, mean: (n,), sites)`` at ``theta``: a ``GaussianEngine``'s fit (warm-started
    from ``sites``), or for ``NUTS`` its draws (``key``) beside its Gaussian engine's sites
    (``settings.gaussian_engine``). ``settings``: checked (its engine an object)."""
    engine = settings.engine
    post = fit(theta, X, mask, pairs, pair_mask, sites, gaussian_engine(engine))
    if isinstance(engine, GaussianEngine):
        return from_posterior(theta, X, mask, pairs, pair_mask, post), post.mean, post.sites
    nuts = NUTSSettings(**engine.options())
    # NUTS's factorisation of K after EP's loop, the belief's after NUTS (runtime.after)
    K = after(prior_covariance(theta, X, mask), post.sites)
    draws, _ = sample_fixed(key, K, pairs, pair_mask, nuts, nuts.tuning(X.dtype))
    draws = draws.reshape(-1, X.shape[0])
    belief = from_draws(after(theta, draws), X, mask, draws)
    return belief, belief.mean, post.sites


def _learn(theta, X, mask, pairs, pair_mask, sites, settings: Settings):
    return learn(theta, X, mask, pairs, pair_mask, sites, steps=settings.learn_steps,
                 engine=gaussian_engine(settings.engine))  # fmt: skip


class Proposed(NamedTuple):
    """``propose``'s result: ``X: (2, d)`` the next pair, ``value`` its acquisition, ``theta``
    the hyperparameters used, ``sites`` the fit's (a warm start for the next), ``mean: (n,)``
    the posterior mean at the shown designs (its argmax is the best guess)."""

    X: jax.Array
    value: jax.Array
    theta: jax.Array
    sites: object
    mean: jax.Array


@stored  # kept whole: a resumed session's first proposal neither traces nor lowers
@partial(jit, static_argnames=("settings", "learn_now", "mode"))
def propose(X, mask, pairs, pair_mask, sites, theta, key, pool=None, candidates=None,
            avoid=None, *, settings: Settings, learn_now: bool,
            mode: str = "cube") -> Proposed:  # fmt: skip
    """One step of the loop on host data, for a session: re-learn ``theta`` if ``learn_now``,
    fit (warm started from ``sites``), and maximise the acquisition. ``X: (n, d)``, ``mask:
    (n,)``, ``pairs: (m, 2)`` winner first, ``pair_mask: (m,)``, ``sites``: ``(m,)`` each
    (zeros for a cold start); shapes are the caller's capacity, so a session that grows in
    buckets compiles once per bucket. ``pool: (p, d)`` and ``candidates: (c, 2)`` rows of it,
    for ``mode`` ``"pool"`` (the best candidate pair) or ``"mixed"`` (that or the cube's best,
    whichever scores higher). ``avoid``: ``(skipped: (s, 2, d), skipped_mask: (s,))``, pairs
    a person skipped, none of which (in either order, within ``SKIP_RADIUS``) is proposed
    again (``avoiding``), or None. ``settings.engine`` may be a name (``check_settings``)."""
    settings = check_settings(settings)
    check_mode(mode, settings)
    prepared = _prepare(X, mask, pairs, pair_mask, sites, theta, key, avoid, settings=settings,
                        learn_now=learn_now, start=mode != "pool")  # fmt: skip
    if mode != "pool":
        prepared = _ascend(prepared, settings=settings, steps=settings.steps)
    return _conclude(prepared, pool, candidates, settings=settings, mode=mode)


@stored
@partial(jit, static_argnames=("settings",))
def fitted(X, mask, pairs, pair_mask, sites, theta, key, *, settings: Settings) -> Proposed:
    """``propose(..., learn_now=False)``'s ``theta``, ``sites`` and ``mean`` without the
    proposal (``X``: NaN, ``value``: -inf): the posterior fit alone, for a session's initial
    random pairs, whose proposal is not the model's. Its own program is a fraction of
    ``propose``'s: no acquisition, no starts, no ascent. Arguments as ``propose``'s."""
    settings = check_settings(settings)
    theta = clip(theta)
    nuts_key = jax.random.fold_in(key, NUTS_STREAM)
    _, mean, sites = posterior(theta, X, mask, pairs, pair_mask, sites, nuts_key, settings)
    nothing = jnp.full((2, X.shape[1]), jnp.nan, X.dtype)
    return Proposed(nothing, jnp.asarray(-jnp.inf, X.dtype), theta, sites,
                    jnp.where(mask, mean, -jnp.inf))  # fmt: skip


class _Prepared(NamedTuple):
    belief: object
    base: jax.Array
    ascent: search.Ascent
    theta: jax.Array
    sites: object
    mean: jax.Array
    avoid: tuple | None = None


#: A proposal whose two designs lie within this distance of a skipped pair's, in either order,
#: is not made: the root-mean-square difference over both designs' coordinates, so 0.1 is a
#: tenth of the cube's side (a skip asks for something else, and a swap is nothing else).
SKIP_RADIUS = 0.1


def avoiding(acquisition, avoid, radius: float = SKIP_RADIUS):
    """``acquisition`` where ``X[:2]`` is not near a skipped pair, ``-inf`` where it is:
    ``avoid = (skipped: (s, 2, d), skipped_mask: (s,))``; near means ``sqrt(mean((X[:2] -
    S)^2)) < radius`` for a masked-in ``S`` or its swap ``S[::-1]``. The ascent's gradient is
    the acquisition's outside (zero inside, where no start begins and no end point wins)."""
    skipped, skipped_mask = avoid

    def value(X):
        pair = X[:2]
        rms = [jnp.sqrt(jnp.mean((p - skipped) ** 2, axis=(1, 2))) for p in (pair, pair[::-1])]
        near = jnp.any(skipped_mask & (jnp.minimum(*rms) < radius))
        return jnp.where(near, -jnp.inf, acquisition(X))

    return value


def _acquisition(prepared: _Prepared, settings: Settings):
    f = acquisition_of(settings.acquisition, prepared.belief, prepared.base)
    return f if prepared.avoid is None else avoiding(f, prepared.avoid)


@partial(jit, static_argnames=("settings", "learn_now", "start"))
def _prepare(X, mask, pairs, pair_mask, sites, theta, key, avoid=None, *, settings: Settings,
             learn_now: bool, start: bool = True) -> _Prepared:  # fmt: skip
    """``theta`` (re-learned if ``learn_now``), the posterior at it, the acquisition's base
    samples and, if ``start``, the ascent's starts (away from ``avoid``'s pairs: ``propose``).
    ``key`` gives the NUTS stream, the raw candidates and the base samples."""
    theta = clip(theta)
    if learn_now:
        theta = _learn(theta, X, mask, pairs, pair_mask, sites, settings)
    nuts_key = jax.random.fold_in(key, NUTS_STREAM)
    belief, mean, sites = posterior(theta, X, mask, pairs, pair_mask, sites, nuts_key, settings)
    raw_key, mc_key = jax.random.split(key)
    n_base = belief.alpha.shape[0] if isinstance(belief, DrawBelief) else settings.n_mc
    q = acq.DESIGNS.get(settings.acquisition, 2)
    base = jax.random.normal(mc_key, (n_base, q), X.dtype)
    prepared = _Prepared(belief, base, None, theta, sites, jnp.where(mask, mean, -jnp.inf),
                         avoid)  # fmt: skip
    if start:
        ascent = search.begin(_acquisition(prepared, settings), raw_key, q, X.shape[1],
                              n_raw=settings.n_raw, n_starts=settings.n_starts,
                              dtype=X.dtype)  # fmt: skip
        prepared = prepared._replace(ascent=ascent)
    return prepared


@partial(jit, static_argnames=("settings", "steps"))
def _ascend(prepared: _Prepared, *, settings: Settings, steps: int) -> _Prepared:
    ascent = search.ascend(_acquisition(prepared, settings), prepared.ascent, steps)
    return prepared._replace(ascent=ascent)


@partial(jit, static_argnames=("settings", "mode"))
def _conclude(prepared: _Prepared, pool, candidates, *, settings: Settings,
              mode: str) -> Proposed:  # fmt: skip
    """The proposal: the pool's best pair (``mode="pool"``), or the ascent's best point, or
    for ``"mixed"`` the better of the two; its first two designs are the pair."""
    f = _acquisition(prepared, settings)
    if mode == "pool":
        proposal = best_in_pool(f, pool, candidates)
    else:
        proposal = search.finish(f, prepared.ascent)
    if mode == "mixed":
        proposal = search.better(best_in_pool(f, pool, candidates), proposal)
    return Proposed(proposal.X[:2], proposal.value, prepared.theta, prepared.sites, prepared.mean)


def propose_within(X, mask, pairs, pair_mask, sites, theta, key, pool=None, candidates=None,
                   avoid=None, *, settings: Settings, learn_now: bool, mode: str = "cube",
                   time_budget_s: float, chunk: int = 10) -> tuple[Proposed, int]:  # fmt: skip
    """``propose`` with a time budget: the ascent runs in chunks of ``chunk`` steps until
    ``settings.steps`` are done or ``time_budget_s`` seconds have passed since the call
    (the fit and the starts always run; a chunk once begun is finished). Returns the proposal
    and the ascent steps taken; with every step taken it is ``propose``'s proposal, exactly.
    ``mode="pool"`` has no ascent: ``propose``'s. Host-side; three compiled programs (prepare,
    a chunk, conclude) reused across calls of the same shapes."""
    settings = check_settings(settings)
    check_mode(mode, settings)
    if mode == "pool":
        out = propose(X, mask, pairs, pair_mask, sites, theta, key, pool, candidates, avoid,
                      settings=settings, learn_now=learn_now, mode=mode)  # fmt: skip
        return out, 0
    start = time.perf_counter()
    prepared = _prepare(X, mask, pairs, pair_mask, sites, theta, key, avoid, settings=settings,
                        learn_now=learn_now)  # fmt: skip
    done = 0
    while done < settings.steps:
        jax.block_until_ready(prepared.ascent.X)
        if time.perf_counter() - start >= time_budget_s:
            break
        steps = min(chunk, settings.steps - done)
        prepared = _ascend(prepared, settings=settings, steps=steps)
        done += steps
    return _conclude(prepared, pool, candidates, settings=settings, mode=mode), done


def _best(utility, X, mask, mean):
    guess = jnp.argmax(jnp.where(mask, mean, -jnp.inf))
    shown = jnp.where(mask, utility(X), -jnp.inf)
    return utility(X[guess]), jnp.max(shown)


def run_core(utility, X_init, uniforms, key, noise, theta, *, k: int, settings: Settings):
    """One run (module docstring). ``utility: (..., d) -> (...)`` a JAX function;
    ``X_init: (n_init, 2, d)``; ``uniforms: (n_init + k,)``; ``key`` for the optimiser's
    raw candidates and the Monte Carlo base samples; ``noise > 0``; ``theta: (1 + d,)`` the
    start. Pure; ``utility``, ``k`` and ``settings`` static (checked as the program is traced:
    ``ValueError`` naming them, and a shape of ``X_init``, ``uniforms`` or ``theta`` that does
    not fit)."""
    k = check_int(k, "k", 0)
    settings = check_settings(settings)
    shape = jnp.shape(X_init)
    if len(shape) != 3 or shape[1] != 2 or shape[0] < 1 or shape[2] < 1:
        raise ValueError(f"X_init must have shape (n_init, 2, d), n_init >= 1, d >= 1; got "
                         f"{shape}")  # fmt: skip
    n_init, _, d = shape
    if jnp.shape(uniforms) != (n_init + k,):
        raise ValueError(f"uniforms must have shape (n_init + k,) = ({n_init + k},), got "
                         f"{jnp.shape(uniforms)}")  # fmt: skip
    if jnp.shape(theta) != (1 + d,):
        raise ValueError(f"theta must have shape (1 + d,) = ({1 + d},), got {jnp.shape(theta)}")
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

    def iteration(carry, t):
        X, mask, pairs, pair_mask, sites, theta = carry
        if settings.learn_every:
            theta = jax.lax.cond(
                t % settings.learn_every == 0,
                lambda th: _learn(th, X, mask, pairs, pair_mask, sites, settings),
                lambda th: th,
                theta,
            )
        step_key = jax.random.fold_in(key, t)
        prepared = _prepare(X, mask, pairs, pair_mask, sites, theta, step_key,
                            settings=settings, learn_now=False)  # fmt: skip
        prepared = _ascend(prepared, settings=settings, steps=settings.steps)
        proposal = _conclude(prepared, None, None, settings=settings, mode="cube")
        sites = prepared.sites
        guess, shown = _best(utility, X, mask, prepared.mean)
        a, b = proposal.X[0], proposal.X[1]
        p = n_init + t
        win = answer(utility, a, b, uniforms[p], noise)
        i, j = 2 * p, 2 * p + 1
        X = X.at[i].set(a).at[j].set(b)
        mask = mask.at[i].set(True).at[j].set(True)
        answered = jnp.where(win, jnp.stack([i, j]), jnp.stack([j, i]))
        pairs = pairs.at[p].set(answered.astype(jnp.int32))
        pair_mask = pair_mask.at[p].set(True)
        carry = (X, mask, pairs, pair_mask, sites, theta)
        return carry, (guess, shown, proposal.value)

    post = fit(theta, X, mask, pairs, pair_mask, None, gaussian_engine(settings.engine))
    carry = (X, mask, pairs, pair_mask, post.sites, clip(theta))
    carry, (guess, shown, value) = jax.lax.scan(iteration, carry, jnp.arange(k))
    X, mask, pairs, pair_mask, sites, theta = carry
    last_key = jax.random.fold_in(jax.random.fold_in(key, k), NUTS_STREAM)
    _, mean, _ = posterior(theta, X, mask, pairs, pair_mask, sites, last_key, settings)
    last_guess, last_shown = _best(utility, X, mask, mean)
    return DesignTrace(
        jnp.append(guess, last_guess),
        jnp.append(shown, last_shown),
        X,
        pairs,
        theta,
        value,
    )


@partial(jit, static_argnames=("utility", "k", "settings"))
def run_batch(utility, X_init, uniforms, keys, noise, theta, *, k: int, settings: Settings):
    """``run_core`` for many seeds in one compiled program: ``X_init: (s, n_init, 2, d)``,
    ``uniforms: (s, n_init + k)``, ``keys: (s,)``; ``noise`` and ``theta`` shared."""
    one = partial(run_core, utility, k=k, settings=settings)
    return jax.vmap(one, in_axes=(0, 0, 0, None, None))(X_init, uniforms, keys, noise, theta)
