"""The NUTS sampler: NumPyro's functional NUTS on a model's potential, chains ``vmap``-ped,
warm-up and sampling as ``lax`` loops; the posterior it returns and its diagnostics."""

from __future__ import annotations

import collections
import dataclasses
import warnings
from functools import partial
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from ...compiler import jit
from ...data.checks import check_bool, check_float, check_int
from ...diagnostics import ConvergenceWarning
from ...linalg import psd_root
from ..engines import NUTS
from ..posterior import SamplePosterior
from .models import whitened_model

#: The settings' fields and defaults: the engine ``NUTS``'s (``inference.engines``), one
#: declaration.
_FIELDS = dataclasses.fields(NUTS)


class NUTSSettings(
    collections.namedtuple(
        "_NUTSSettingsFields", [f.name for f in _FIELDS], defaults=[f.default for f in _FIELDS]
    )
):
    """The sampler's settings as its compiled programs key them: the fields of the engine
    ``NUTS`` (every entry point takes them as keywords).

    Static (part of the compiled program): ``num_warmup`` (warm-up iterations per chain,
    discarded, >= 0), ``num_samples`` (kept draws per chain, >= 1), ``num_chains`` (>= 1, run as a
    ``vmap``), ``max_tree_depth``, ``dense_mass`` (NumPyro's NUTS settings). Traced (changing them
    compiles nothing): ``target_accept_prob`` in (0, 1) and ``init_radius`` > 0 (chains start at
    ``z ~ Uniform(-r, r)^n``, NumPyro's ``init_to_uniform``).
    """

    __slots__ = ()

    def static(self) -> NUTSSettings:
        """These settings with the floats replaced by their defaults: the compiled program's key."""
        return self._replace(target_accept_prob=0.8, init_radius=2.0)

    def tuning(self, dtype) -> jax.Array:
        """``[target_accept_prob, init_radius]``, the traced settings, as an array."""
        return np.asarray([self.target_accept_prob, self.init_radius], dtype)


#: The most draws (warm-up or kept) per chain: the sampler's counters are int32, and a larger
#: run could not be held in memory anyway. ``max_tree_depth`` is at most 30 (2^30 leapfrog
#: steps a draw), ``num_chains`` at most 4096.
MAX_DRAWS = 10**8


def settings_from(options: dict) -> NUTSSettings:
    """Validated ``NUTSSettings`` from an entry point's keywords (``ValueError`` naming an
    unknown keyword or a bad value)."""
    unknown = sorted(set(options) - set(NUTSSettings._fields))
    if unknown:
        raise ValueError(
            f"unknown NUTS option(s) {unknown}; the options are {NUTSSettings._fields}"
        )
    s = NUTSSettings(**options)
    return NUTSSettings(
        num_warmup=check_int(s.num_warmup, "num_warmup", low=0, high=MAX_DRAWS),
        num_samples=check_int(s.num_samples, "num_samples", low=1, high=MAX_DRAWS),
        num_chains=check_int(s.num_chains, "num_chains", low=1, high=4096),
        target_accept_prob=check_float(
            s.target_accept_prob, "target_accept_prob", 0.0, 1.0, low_open=True, high_open=True
        ),
        max_tree_depth=check_int(s.max_tree_depth, "max_tree_depth", low=1, high=30),
        dense_mass=check_bool(s.dense_mass, "dense_mass"),
        init_radius=check_float(s.init_radius, "init_radius", 0.0, low_open=True),
    )


class _Trace(NamedTuple):
    z: Any  # (C, S, ...) per sample site
    diverging: jax.Array  # (C, S)
    accept_prob: jax.Array  # (C, S)
    num_steps: jax.Array  # (C, S) leapfrog steps per draw
    step_size: jax.Array  # (C,) adapted step size


def run_chains(key, potential_fn, init_fn, settings: NUTSSettings, tuning) -> _Trace:
    """``num_chains`` NUTS chains (vmapped): warm-up then sampling, both ``lax`` loops."""
    from numpyro.infer.hmc import hmc

    init_kernel, sample_kernel = hmc(potential_fn=potential_fn, algo="NUTS")

    def one_chain(chain_key):
        k_init, k_run = jax.random.split(chain_key)
        state = init_kernel(
            init_fn(k_init),
            settings.num_warmup,
            target_accept_prob=tuning[0],
            max_tree_depth=settings.max_tree_depth,
            dense_mass=settings.dense_mass,
            rng_key=k_run,
        )
        state = jax.lax.fori_loop(0, settings.num_warmup, lambda _, s: sample_kernel(s), state)

        def body(s, _):
            s = sample_kernel(s)
            return s, (s.z, s.diverging, s.accept_prob, s.num_steps)

        state, (z, div, acc, steps) = jax.lax.scan(body, state, None, length=settings.num_samples)
        return _Trace(z, div, acc, steps, state.adapt_state.step_size)

    return jax.vmap(one_chain)(jax.random.split(key, settings.num_chains))


def init_uniform(n, dtype, radius):
    return lambda k: {"z": jax.random.uniform(k, (n,), dtype, -radius, radius)}


def sample_fixed(key, K, pairs, pair_mask, settings: NUTSSettings, tuning, outcomes=None):
    """One query at fixed ``K``: ``(xi draws (C, S, n), trace)``. Pure: jit, vmap and map it.
    ``outcomes``: ties, weights and the tie margin (``models.pair_log_likelihood``)."""
    from numpyro.infer.util import potential_energy

    L = psd_root(K)
    model_args = (L, pairs, pair_mask, outcomes)

    def potential_fn(params):
        return potential_energy(whitened_model, model_args, {}, params)

    trace = run_chains(
        key, potential_fn, init_uniform(K.shape[0], K.dtype, tuning[1]), settings, tuning
    )
    return trace.z["z"] @ L.T, trace


@partial(jit, static_argnames=("settings",))
def _sample_fixed(key, K, pairs, pair_mask, settings: NUTSSettings, tuning, outcomes=None):
    return sample_fixed(key, K, pairs, pair_mask, settings, tuning, outcomes)


#: The largest split R-hat a run counts as converged (Vehtari et al. 2021: 1.01).
R_HAT_MAX = 1.01


class NUTSDiagnostics(NamedTuple):
    """NumPyro's diagnostics of a run (host arrays).

    ``r_hat``, ``ess``: split R-hat and effective sample size (all chains) of each entity's
    ``xi_hat``: ``(n,)``; ``divergences``: ``(C,)`` divergent transitions after warm-up;
    ``accept_prob``: ``(C,)`` mean acceptance probability; ``num_steps``: ``(C,)`` mean leapfrog
    steps per draw; ``step_size``: ``(C,)`` adapted step sizes; ``hyper_r_hat``, ``hyper_ess``:
    per sampled hyperparameter (empty at fixed hyperparameters).
    """

    r_hat: np.ndarray
    ess: np.ndarray
    divergences: np.ndarray
    accept_prob: np.ndarray
    num_steps: np.ndarray
    step_size: np.ndarray
    hyper_r_hat: dict
    hyper_ess: dict

    @property
    def converged(self) -> bool:
        """No divergent transition, and every split R-hat (entities and hyperparameters) at
        most ``R_HAT_MAX``. (Not evaluable with one draw per chain: False.)"""
        r_hats = [np.ravel(self.r_hat)] + [np.ravel(v) for v in self.hyper_r_hat.values()]
        r_hat = np.concatenate(r_hats) if r_hats else np.zeros(0)
        mixed = np.all(np.isfinite(r_hat)) and np.all(r_hat <= R_HAT_MAX)
        return bool(np.sum(self.divergences) == 0 and mixed)

    def problems(self) -> str:
        """What keeps ``converged`` False, in words (empty when it holds)."""
        out = []
        if (d := int(np.sum(self.divergences))) > 0:
            out.append(f"{d} divergent transitions")
        r_hats = [np.ravel(self.r_hat)] + [np.ravel(v) for v in self.hyper_r_hat.values()]
        r_hat = np.concatenate(r_hats)
        if r_hat.size and not np.all(np.isfinite(r_hat)):
            out.append("split R-hat not available (fewer than 2 draws per chain)")
        elif r_hat.size and np.max(r_hat) > R_HAT_MAX:
            out.append(f"max split R-hat {np.max(r_hat):.3f} > {R_HAT_MAX}")
        return ", ".join(out)


class _NUTSPosteriorFields(NamedTuple):
    samples: jax.Array
    mean: jax.Array
    cov: jax.Array
    hyper: dict
    diagnostics: NUTSDiagnostics


class NUTSPosterior(_NUTSPosteriorFields, SamplePosterior):
    """Posterior draws of ``xi_hat`` for one problem, with the EP posterior's interface.

    ``samples: (C, S, n)`` (chains, draws, entities); ``mean: (n,)`` and ``cov: (n, n)`` are the
    sample moments over all ``C * S`` draws (``cov`` with ddof 0); ``hyper``: sampled
    hyperparameters by name, constrained values ``(C, S, ...)`` (empty at fixed hyperparameters);
    ``diagnostics``: ``NUTSDiagnostics``. ``mean`` and ``cov`` drop into the Gaussian
    functions of ``bayesrank.predict``; ``predict_pairs``, ``probability_matrix``, ``scores``
    and ``rank`` (``SamplePosterior``) use the draws
    themselves: ``prob = (1/S) sum_t Phi(xi_i^(t) - xi_j^(t))``.
    """

    __slots__ = ()

    @property
    def converged(self) -> bool:
        """``diagnostics.converged``: no divergence and split R-hat at most 1.01."""
        return self.diagnostics.converged


def diagnostics(samples, trace: _Trace, hyper: dict | None = None) -> NUTSDiagnostics:
    """NumPyro's split R-hat and ESS (host side) plus the per-chain sampler statistics."""
    from numpyro.diagnostics import effective_sample_size, split_gelman_rubin

    x = np.asarray(samples)
    one_draw = x.shape[1] < 2
    r_hat = np.full(x.shape[2:], np.nan) if one_draw else split_gelman_rubin(x)
    ess = np.full(x.shape[2:], np.nan) if one_draw else effective_sample_size(x)
    hyper = hyper or {}
    return NUTSDiagnostics(
        r_hat=r_hat,
        ess=ess,
        divergences=np.asarray(trace.diverging).sum(axis=-1),
        accept_prob=np.asarray(trace.accept_prob).mean(axis=-1),
        num_steps=np.asarray(trace.num_steps).mean(axis=-1),
        step_size=np.asarray(trace.step_size),
        hyper_r_hat={
            k: (np.nan if one_draw else split_gelman_rubin(np.asarray(v))) for k, v in hyper.items()
        },
        hyper_ess={
            k: (np.nan if one_draw else effective_sample_size(np.asarray(v)))
            for k, v in hyper.items()
        },
    )


def warn_unmixed(post: NUTSPosterior, what: str = "NUTS run") -> None:
    """A ``ConvergenceWarning`` where ``post``'s diagnostics do
    not say converged, naming why."""
    if not post.diagnostics.converged:
        warnings.warn(
            f"the {what} did not converge: {post.diagnostics.problems()}; raise num_warmup and "
            "num_samples (or target_accept_prob for divergences); diagnostics.converged is False",
            ConvergenceWarning,
            stacklevel=4,
        )


def summarise(samples, trace, hyper=None) -> NUTSPosterior:
    flat = samples.reshape(-1, samples.shape[-1])
    mean = jnp.mean(flat, axis=0)
    centred = flat - mean
    cov = centred.T @ centred / flat.shape[0]
    return NUTSPosterior(samples, mean, cov, hyper or {}, diagnostics(samples, trace, hyper))


def first_entities(post: NUTSPosterior, n: int) -> NUTSPosterior:
    """``post`` restricted to its first ``n`` entities (a padded query's real ones)."""
    d = post.diagnostics
    return post._replace(  # sliced on the host: an eager slice compiles a program per shape
        samples=jax.device_put(np.asarray(post.samples)[..., :n]),
        mean=jax.device_put(np.asarray(post.mean)[:n]),
        cov=jax.device_put(np.asarray(post.cov)[:n, :n]),
        diagnostics=d._replace(r_hat=np.asarray(d.r_hat)[:n], ess=np.asarray(d.ess)[:n]),
    )
