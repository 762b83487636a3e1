"""NUTS (NumPyro) for the XPGP preference model: the gold standard that EP is measured against.

Model (the same as :mod:`bayesrank.inference.ep`; DESIGN notation): ``xi_hat ~ N(0, K)`` and,
for every observed pair ``(i, j)``, the likelihood ``Phi(xi_hat_i - xi_hat_j)``. NUTS samples it
in the whitened parameterisation

    z ~ N(0, I_n),   xi_hat = L z,   K = L L^T,
    log p(pairs | z) = sum_s log Phi((L z)_i - (L z)_j),

whose prior is isotropic, so one step size fits every direction and the chains mix.

Two models:

- :func:`whitened_model` (fixed hyperparameters): ``L`` is a PSD root of ``K`` from ``eigh`` with
  negative round-off eigenvalues clipped to zero (:func:`bayesrank.inference.ep.psd_root`). It
  needs no jitter, so a singular ``K`` (OHSUMED holds duplicate documents) is fine: the ``z``
  directions in ``K``'s null space do not move ``xi_hat`` and are sampled from their prior.
- :func:`xpgp_model` (fully Bayesian): a normal prior on each trainable hyperparameter's
  *unconstrained* value (``bayesrank.kernels.params``), i.e. a log-normal prior on a positive
  scale, centred on the given prior's values; ``K`` is rebuilt inside the model by the XPGP prior
  code (:meth:`~bayesrank.kernels.xpgp.XPGP.covariance`) and factored by a Cholesky of
  ``K + eps I`` with ``eps`` = 1e-6 (float64) or 1e-4 (float32), the nugget of
  :func:`bayesrank.learning.expected_log_prior`. That nugget is the one difference from the EP
  model at the same hyperparameters.

Sampling uses NumPyro's functional NUTS (``numpyro.infer.hmc.hmc``) on the potential energy of
the NumPyro model (``numpyro.infer.util.potential_energy``): the sampler runs exactly the model
above. Warm-up (step size by dual averaging, diagonal or dense mass matrix by Welford, NumPyro's
windowed schedule) and sampling are ``lax`` loops of NumPyro's ``sample_kernel``; chains are
``vmap``-ped. :func:`sample_batch` ``vmap``s the whole single-query sampler over a padded batch
of queries, so many queries run in one compiled call and query ``b`` gets exactly the draws of
``sample(keys[b], ...)`` with ``keys = jax.random.split(key, B)``.

Padding (as in :mod:`bayesrank.data.batch`): padded entities have a decoupled unit prior row
(:func:`~bayesrank.kernels.xpgp.mask_covariance`) and padded pairs (``pair_mask = False``) add
zero log-likelihood, so a padded problem has the same posterior on its real entities.

Results (:class:`NUTSPosterior`) carry the draws of ``xi_hat`` (chains kept apart), their mean and
covariance, and NumPyro's own diagnostics: split R-hat and effective sample size per entity (and
per hyperparameter), divergences and acceptance per chain. Prediction from draws (module
functions :func:`predict_pairs`, :func:`probability_matrix`, :func:`entity_scores`, and the same
methods on :class:`NUTSPosterior`) mirrors :mod:`bayesrank.predict`:

    prob       = (1/S) sum_t Phi(xi_i^(t) - xi_j^(t))            (the posterior predictive),
    delta_mean = sample mean of xi_i - xi_j,   delta_var = its sample variance (ddof 0).

Under a Gaussian posterior ``E[Phi(d)] = Phi(delta_mu / sqrt(1 + delta_var))`` (Eq. 13-14), which
is what EP reports: the two ``prob`` are the same quantity and are compared directly.
"""

from __future__ import annotations

from functools import partial
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax.scipy.special import log_ndtr

from ..kernels.xpgp import default_trainable
from ..linalg import psd_root
from ..predict import draw_entity_scores as entity_scores
from ..predict import draw_pair_predictions as predict_pairs
from ..predict import draw_probability_matrix as probability_matrix
from .posterior import SamplePosterior

__all__ = [
    "NUTSDiagnostics",
    "NUTSPosterior",
    "NUTSSettings",
    "entity_scores",
    "pair_log_likelihood",
    "predict_pairs",
    "probability_matrix",
    "sample",
    "sample_batch",
    "sample_hyperparameters",
    "sample_problem",
    "whitened_model",
    "xpgp_model",
]


# --- the NumPyro models ---------------------------------------------------------------------------


def pair_log_likelihood(xi, pairs, pair_mask=None) -> jax.Array:
    """``sum_s mask_s log Phi(xi_i - xi_j)`` over ``pairs: (m, 2)``; ``xi: (n,)``; a scalar."""
    pairs = jnp.asarray(pairs)
    terms = log_ndtr(xi[pairs[:, 0]] - xi[pairs[:, 1]])
    if pair_mask is not None:
        terms = jnp.where(pair_mask, terms, 0.0)
    return jnp.sum(terms)


def whitened_model(L, pairs, pair_mask=None):
    """NumPyro model at fixed hyperparameters: ``z ~ N(0, I)``, ``xi_hat = L z``, probit pairs.

    Args:
        L: ``(n, n)`` with ``K = L L^T`` (e.g. ``ep.psd_root(K)``).
        pairs: ``(m, 2)`` int, row ``(i, j)`` = *i preferred to j*.
        pair_mask: ``(m,)`` bool, False for padded pairs (zero log-likelihood), or None.

    Sample site ``"z": (n,)``; deterministic site ``"xi": (n,)``.
    """
    import numpyro
    import numpyro.distributions as dist

    L = jnp.asarray(L)
    z = numpyro.sample("z", dist.Normal(jnp.zeros(L.shape[0], L.dtype), 1.0).to_event(1))
    xi = numpyro.deterministic("xi", L @ z)
    numpyro.factor("pairs", pair_log_likelihood(xi, pairs, pair_mask))


class _HyperSpec(NamedTuple):
    """How the fully Bayesian model rebuilds an XPGP prior from its sampled sites (static)."""

    treedef: Any
    names: tuple  # one per leaf: the site name, or None for a fixed leaf


def _hyper_spec(prior, trainable) -> tuple[_HyperSpec, list]:
    """Flatten ``unconstrain(prior)``: the leaves (centres of the hyperprior) and their names."""
    from ..kernels.params import unconstrain

    leaves_with_path, treedef = jax.tree_util.tree_flatten_with_path(unconstrain(prior))
    flags = jax.tree_util.tree_leaves(trainable)
    if len(flags) != len(leaves_with_path):
        raise ValueError(
            f"trainable has {len(flags)} leaves but the prior has {len(leaves_with_path)}"
        )
    names = tuple(
        jax.tree_util.keystr(path).lstrip(".")
        if np.ndim(flag) == 0 and np.asarray(flag).dtype == bool and bool(flag)
        else None
        for (path, _), flag in zip(leaves_with_path, flags, strict=True)
    )
    return _HyperSpec(treedef, names), [jnp.asarray(leaf) for _, leaf in leaves_with_path]


def _build_prior(spec: _HyperSpec, centres, values: dict):
    """The (constrained) prior with each named leaf taken from ``values`` (unconstrained)."""
    from ..kernels.params import constrain

    leaves = [
        c if name is None else values[name] for name, c in zip(spec.names, centres, strict=True)
    ]
    return constrain(jax.tree_util.tree_unflatten(spec.treedef, leaves))


def _nugget(dtype) -> float:
    return 1e-6 if jnp.finfo(dtype).bits == 64 else 1e-4


def _kernel_root(prior, X, graphs, mask, n, dtype):
    K = prior.covariance(X, graphs, mask)
    return jnp.linalg.cholesky(K + _nugget(dtype) * jnp.eye(n, dtype=dtype))


def xpgp_model(spec: _HyperSpec, centres, scale, X, graphs, mask, pairs, pair_mask, n, dtype):
    """NumPyro model with priors on the hyperparameters (use :func:`sample_hyperparameters`).

    ``u_h ~ N(u0_h, scale^2)`` for every trainable hyperparameter (unconstrained value ``u``,
    centre ``u0`` = the given prior's value); ``K_theta`` = ``XPGP.covariance(X, graphs, mask)``
    at the constrained values; ``z ~ N(0, I_n)``, ``xi_hat = chol(K_theta + eps I) z``; probit
    pairs. Sample sites: one per trainable hyperparameter (named by its path in the prior, e.g.
    ``"weights"``, ``"attribute.rho"``) and ``"z"``; deterministic site ``"xi"``.
    """
    import numpyro
    import numpyro.distributions as dist

    values = {}
    for name, c in zip(spec.names, centres, strict=True):
        if name is not None:
            values[name] = numpyro.sample(name, dist.Normal(c, scale).to_event(c.ndim))
    prior = _build_prior(spec, centres, values)
    L = _kernel_root(prior, X, graphs, mask, n, dtype)
    z = numpyro.sample("z", dist.Normal(jnp.zeros(n, dtype), 1.0).to_event(1))
    xi = numpyro.deterministic("xi", L @ z)
    numpyro.factor("pairs", pair_log_likelihood(xi, pairs, pair_mask))


# --- the sampler ----------------------------------------------------------------------------------


class NUTSSettings(NamedTuple):
    """Static sampler settings (hashable; part of the compiled program)."""

    num_warmup: int = 500
    num_samples: int = 500
    num_chains: int = 4
    target_accept_prob: float = 0.8
    max_tree_depth: int = 10
    dense_mass: bool = False
    init_radius: float = 2.0  # chains start at z ~ Uniform(-r, r)^n (NumPyro's init_to_uniform)


class _Trace(NamedTuple):
    z: Any  # (C, S, ...) per sample site
    diverging: jax.Array  # (C, S)
    accept_prob: jax.Array  # (C, S)
    num_steps: jax.Array  # (C, S) leapfrog steps per draw
    step_size: jax.Array  # (C,) adapted step size


def _run_chains(key, potential_fn, init_fn, settings: NUTSSettings) -> _Trace:
    """``num_chains`` NUTS chains (vmapped): warm-up then sampling, both ``lax`` loops."""
    from numpyro.infer.hmc import hmc

    init_kernel, sample_kernel = hmc(potential_fn=potential_fn, algo="NUTS")

    def one_chain(chain_key):
        k_init, k_run = jax.random.split(chain_key)
        state = init_kernel(
            init_fn(k_init),
            settings.num_warmup,
            target_accept_prob=settings.target_accept_prob,
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


def _init_uniform(n, dtype, radius):
    return lambda k: {"z": jax.random.uniform(k, (n,), dtype, -radius, radius)}


@partial(jax.jit, static_argnames=("settings",))
def _sample_fixed(key, K, pairs, pair_mask, settings: NUTSSettings):
    """One query at fixed ``K``: ``(xi draws (C, S, n), trace)``. Pure; vmapped by the batch."""
    from numpyro.infer.util import potential_energy

    L = psd_root(K)
    model_args = (L, pairs, pair_mask)

    def potential_fn(params):
        return potential_energy(whitened_model, model_args, {}, params)

    trace = _run_chains(
        key, potential_fn, _init_uniform(K.shape[0], K.dtype, settings.init_radius), settings
    )
    return trace.z["z"] @ L.T, trace


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
    ``diagnostics``: :class:`NUTSDiagnostics`. ``mean`` and ``cov`` drop into the Gaussian
    functions of :mod:`bayesrank.predict`; ``predict_pairs``, ``probability_matrix``, ``scores``
    and ``rank`` (:class:`~bayesrank.inference.posterior.SamplePosterior`) use the draws
    themselves: ``prob = (1/S) sum_t Phi(xi_i^(t) - xi_j^(t))``.
    """

    __slots__ = ()


# --- public entry points --------------------------------------------------------------------------


def _check_counts(num_warmup, num_samples, num_chains) -> None:
    for name, value, low in (
        ("num_warmup", num_warmup, 0),
        ("num_samples", num_samples, 1),
        ("num_chains", num_chains, 1),
    ):
        if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < low:
            raise ValueError(f"{name} must be an integer >= {low}, got {value!r}")


def _check_problem(K, pairs, pair_mask, batched: bool):
    """Host-side shape, range and finiteness checks; returns numpy arrays."""
    K = np.asarray(K)
    pairs = np.asarray(pairs)
    lead = 1 if batched else 0
    what = "(B, n, n)" if batched else "(n, n)"
    if K.ndim != 2 + lead or K.shape[-1] != K.shape[-2]:
        raise ValueError(f"K must be {what}, got shape {K.shape}")
    if not np.issubdtype(K.dtype, np.floating):
        raise ValueError(f"K must be a float array, got dtype {K.dtype}")
    bad = np.argwhere(~np.isfinite(K))
    if bad.size:
        raise ValueError(f"K[{', '.join(map(str, bad[0]))}] = {K[tuple(bad[0])]} is not finite")
    n = K.shape[-1]
    if pairs.ndim != 2 + lead or pairs.shape[-1] != 2 or pairs.shape[:lead] != K.shape[:lead]:
        pwhat = "(B, m, 2) with B = K.shape[0]" if batched else "(m, 2)"
        raise ValueError(f"pairs must be {pwhat}, got shape {pairs.shape}")
    if not np.issubdtype(pairs.dtype, np.integer):
        raise ValueError(f"pairs must hold integer entity indices, got dtype {pairs.dtype}")
    if pair_mask is None:
        pair_mask = np.ones(pairs.shape[:-1], dtype=bool)
    pair_mask = np.asarray(pair_mask)
    if pair_mask.shape != pairs.shape[:-1] or pair_mask.dtype != bool:
        raise ValueError(
            f"pair_mask must be a bool array of shape {pairs.shape[:-1]}, got {pair_mask.dtype} "
            f"{pair_mask.shape}"
        )
    bad = np.argwhere((pairs < 0) | (pairs >= n))
    if bad.size:
        idx = tuple(bad[0])
        raise ValueError(
            f"pairs[{', '.join(map(str, idx))}] = {pairs[idx]} is out of range [0, {n})"
        )
    same = np.argwhere((pairs[..., 0] == pairs[..., 1]) & pair_mask)
    if same.size:
        idx = tuple(same[0])
        raise ValueError(f"pairs[{', '.join(map(str, idx))}] = {pairs[idx]} is a self-pair")
    return K, pairs, pair_mask


def _diagnostics(samples, trace: _Trace, hyper: dict | None = None) -> NUTSDiagnostics:
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


def _summarise(samples, trace, hyper=None) -> NUTSPosterior:
    flat = samples.reshape(-1, samples.shape[-1])
    mean = jnp.mean(flat, axis=0)
    centred = flat - mean
    cov = centred.T @ centred / flat.shape[0]
    return NUTSPosterior(samples, mean, cov, hyper or {}, _diagnostics(samples, trace, hyper))


def sample(
    key,
    K,
    pairs,
    *,
    pair_mask=None,
    num_warmup: int = 500,
    num_samples: int = 500,
    num_chains: int = 4,
    target_accept_prob: float = 0.8,
    max_tree_depth: int = 10,
    dense_mass: bool = False,
) -> NUTSPosterior:
    """NUTS for one problem at fixed hyperparameters (the prior covariance ``K``).

    Args:
        key: a JAX PRNG key (chains use ``jax.random.split(key, num_chains)``).
        K: ``(n, n)`` prior covariance of ``xi_hat`` (Eq. 5; may be singular: factored by
            ``ep.psd_root``, ``eigh`` with clipped eigenvalues, no jitter).
        pairs: ``(m, 2)`` int, row ``(i, j)`` = *i preferred to j*.
        pair_mask: ``(m,)`` bool, False for padded pairs.
        num_warmup: warm-up (adaptation) iterations per chain, discarded (>= 0).
        num_samples: kept draws per chain (>= 1); num_chains: chains, run as a ``vmap`` (>= 1).
        target_accept_prob, max_tree_depth, dense_mass: NumPyro's NUTS settings.

    Returns:
        :class:`NUTSPosterior` with draws ``(num_chains, num_samples, n)`` and diagnostics.
    """
    _check_counts(num_warmup, num_samples, num_chains)
    K, pairs, pair_mask = _check_problem(K, pairs, pair_mask, batched=False)
    settings = NUTSSettings(
        int(num_warmup),
        int(num_samples),
        int(num_chains),
        float(target_accept_prob),
        int(max_tree_depth),
        bool(dense_mass),
    )
    samples, trace = _sample_fixed(
        key, jnp.asarray(K), jnp.asarray(pairs), jnp.asarray(pair_mask), settings
    )
    return _summarise(samples, trace)


def sample_problem(key, prior, problem, **options) -> NUTSPosterior:
    """:func:`sample` on a :class:`~bayesrank.data.problem.PreferenceProblem` under an XPGP prior.

    ``K = prior.covariance(problem.X, prior.prepare(problem.relations))`` at the prior's fixed
    hyperparameters (the ``K`` that :meth:`bayesrank.model.XPGPModel.fit` gives EP);
    ``options`` as in :func:`sample`.
    """
    graphs = prior.prepare(problem.relations)
    X = None if problem.X is None else jnp.asarray(problem.X)
    return sample(key, prior.covariance(X, graphs), problem.pairs, **options)


@partial(jax.jit, static_argnames=("settings", "method"))
def _sample_batch(key, K, pairs, pair_mask, settings, method):
    keys = jax.random.split(key, K.shape[0])

    def one(args):
        return _sample_fixed(*args, settings)

    if method == "vmap":
        return jax.vmap(one)((keys, K, pairs, pair_mask))
    return jax.lax.map(one, (keys, K, pairs, pair_mask))


def sample_batch(
    key,
    K,
    pairs,
    *,
    pair_mask=None,
    num_warmup: int = 500,
    num_samples: int = 500,
    num_chains: int = 4,
    target_accept_prob: float = 0.8,
    max_tree_depth: int = 10,
    dense_mass: bool = False,
    method: str = "vmap",
) -> list[NUTSPosterior]:
    """NUTS for ``B`` padded queries in one compiled call (``vmap`` of :func:`sample`'s core).

    Args:
        K: ``(B, n, n)`` prior covariances with padded entities decoupled
            (:func:`bayesrank.parallel.covariances` of a padded batch does that).
        pairs: ``(B, m, 2)``; pair_mask: ``(B, m)`` bool (``ProblemBatch.pair_mask``).
        method: ``"vmap"`` (all queries' chains advance in lock step: the form for accelerators;
            each NUTS iteration waits for the longest trajectory in the batch) or ``"map"``
            (``lax.map``: queries one after another inside the same compiled call; on a CPU this
            wastes no work, see ``benchmarks/README.md``).
        Other arguments as in :func:`sample`.

    Query ``b`` uses the key ``jax.random.split(key, B)[b]`` and gets the same draws as
    ``sample(that key, K[b], pairs[b], pair_mask=pair_mask[b], ...)``. Returns one
    :class:`NUTSPosterior` per query, over all ``n`` (padded) entities: slice the real ones
    (padded entities' draws are their N(0, 1) prior).
    """
    _check_counts(num_warmup, num_samples, num_chains)
    K, pairs, pair_mask = _check_problem(K, pairs, pair_mask, batched=True)
    if method not in ("vmap", "map"):
        raise ValueError(f"method must be 'vmap' or 'map', got {method!r}")
    settings = NUTSSettings(
        int(num_warmup),
        int(num_samples),
        int(num_chains),
        float(target_accept_prob),
        int(max_tree_depth),
        bool(dense_mass),
    )
    samples, trace = _sample_batch(
        key, jnp.asarray(K), jnp.asarray(pairs), jnp.asarray(pair_mask), settings, method
    )
    return [
        _summarise(samples[b], jax.tree_util.tree_map(lambda a, b=b: a[b], trace))
        for b in range(K.shape[0])
    ]


def sample_hyperparameters(
    key,
    prior,
    pairs,
    *,
    X=None,
    graphs=(),
    mask=None,
    pair_mask=None,
    trainable=None,
    hyperprior_scale: float = 1.0,
    num_warmup: int = 500,
    num_samples: int = 500,
    num_chains: int = 4,
    target_accept_prob: float = 0.8,
    max_tree_depth: int = 10,
    dense_mass: bool = False,
) -> NUTSPosterior:
    """Fully Bayesian NUTS: hyperparameters integrated out (:func:`xpgp_model`).

    Args:
        key: PRNG key. prior: the :class:`~bayesrank.kernels.xpgp.XPGP` prior whose values centre
            the hyperprior (e.g. an EM fit's prior).
        pairs: ``(m, 2)``; X: ``(n, d)`` attributes or None; graphs: ``prior.prepare(relations)``;
        mask: ``(n,)`` bool entity mask or None; pair_mask: ``(m,)`` bool or None.
        trainable: a pytree of bools like ``prior`` (default
            :func:`bayesrank.kernels.xpgp.default_trainable`: all but the confounded scales).
        hyperprior_scale: sd of the normal prior on each unconstrained hyperparameter (> 0).
        Other arguments as in :func:`sample`.

    Returns:
        :class:`NUTSPosterior` whose ``hyper`` holds constrained draws ``(C, S, ...)`` by name.
    """
    _check_counts(num_warmup, num_samples, num_chains)
    if not hyperprior_scale > 0:
        raise ValueError(f"hyperprior_scale must be > 0, got {hyperprior_scale!r}")
    if trainable is None:
        trainable = default_trainable(prior)
    X = None if X is None else jnp.asarray(X)
    mask = None if mask is None else jnp.asarray(mask)
    K0 = np.asarray(prior.covariance(X, graphs, mask))
    _, pairs, pair_mask = _check_problem(K0, pairs, pair_mask, batched=False)
    spec, centres = _hyper_spec(prior, trainable)
    if all(name is None for name in spec.names):
        raise ValueError("no trainable hyperparameter: use sample() at fixed hyperparameters")
    settings = NUTSSettings(
        int(num_warmup),
        int(num_samples),
        int(num_chains),
        float(target_accept_prob),
        int(max_tree_depth),
        bool(dense_mass),
    )
    (samples, hyper), trace = _sample_hyper(
        key,
        centres,
        jnp.asarray(hyperprior_scale, K0.dtype),
        X,
        tuple(graphs),
        mask,
        jnp.asarray(pairs),
        jnp.asarray(pair_mask),
        spec=spec,
        n=K0.shape[0],
        settings=settings,
    )
    return _summarise(samples, trace, hyper)


@partial(jax.jit, static_argnames=("spec", "n", "settings"))
def _sample_hyper(key, centres, scale, X, graphs, mask, pairs, pair_mask, *, spec, n, settings):
    """The compiled fully Bayesian run: ``((xi (C, S, n), hyper), trace)``."""
    from numpyro.infer.util import potential_energy

    dtype = scale.dtype
    model_args = (spec, centres, scale, X, graphs, mask, pairs, pair_mask, n, dtype)

    def init_fn(k):
        k_z, k_h = jax.random.split(k)
        params = _init_uniform(n, dtype, settings.init_radius)(k_z)
        for h, (name, c) in enumerate(zip(spec.names, centres, strict=True)):
            if name is not None:  # start near the centre: within a tenth of the prior's sd
                noise = jax.random.uniform(jax.random.fold_in(k_h, h), c.shape, c.dtype, -1, 1)
                params[name] = c + 0.1 * scale * noise
        return params

    def potential_fn(params):
        return potential_energy(xpgp_model, model_args, {}, params)

    trace = _run_chains(key, potential_fn, init_fn, settings)

    def to_xi(params):
        prior_t = _build_prior(spec, centres, params)
        L = _kernel_root(prior_t, X, graphs, mask, n, dtype)
        leaves = jax.tree_util.tree_leaves(prior_t)
        values = {name: v for name, v in zip(spec.names, leaves, strict=True) if name is not None}
        return L @ params["z"], values

    flat = jax.tree_util.tree_map(lambda a: a.reshape(-1, *a.shape[2:]), trace.z)
    out = jax.lax.map(to_xi, flat)  # sequential: no batched LAPACK call (see experiments/README)
    C, S = settings.num_chains, settings.num_samples
    return jax.tree_util.tree_map(lambda a: a.reshape(C, S, *a.shape[1:]), out), trace
