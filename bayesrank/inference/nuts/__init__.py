"""NUTS (NumPyro) for the XPGP preference model: the gold standard that EP is measured against.

Model (the same as ``bayesrank.inference.ep``; DESIGN notation): ``xi_hat ~ N(0, K)`` and,
for every observed pair ``(i, j)``, the likelihood ``Phi(xi_hat_i - xi_hat_j)``. NUTS samples it
in the whitened parameterisation

    z ~ N(0, I_n),   xi_hat = L z,   K = L L^T,
    log p(pairs | z) = sum_s log Phi((L z)_i - (L z)_j),

whose prior is isotropic, so one step size fits every direction and the chains mix.

Two models:

- ``whitened_model`` (fixed hyperparameters): ``L`` is a PSD root of ``K`` from ``eigh`` with
  negative round-off eigenvalues clipped to zero (``bayesrank.linalg.psd_root``). It
  needs no jitter, so a singular ``K`` (OHSUMED holds duplicate documents) is fine: the ``z``
  directions in ``K``'s null space do not move ``xi_hat`` and are sampled from their prior.
- ``xpgp_model`` (fully Bayesian): a normal prior on each trainable hyperparameter's
  *unconstrained* value (``bayesrank.kernels.params``), i.e. a log-normal prior on a positive
  scale, centred on the given prior's values; ``K`` is rebuilt inside the model by the XPGP prior
  code (``covariance``) and factored by a Cholesky of
  ``K + eps I`` with ``eps`` = 1e-6 (float64) or 1e-4 (float32), the nugget of
  ``bayesrank.learning.expected_log_prior``. That nugget is the one difference from the EP
  model at the same hyperparameters.

Sampling uses NumPyro's functional NUTS (``numpyro.infer.hmc.hmc``) on the potential energy of
the NumPyro model (``numpyro.infer.util.potential_energy``): the sampler runs exactly the model
above. Warm-up (step size by dual averaging, diagonal or dense mass matrix by Welford, NumPyro's
windowed schedule) and sampling are ``lax`` loops of NumPyro's ``sample_kernel``; chains are
``vmap``-ped. ``sample_batch`` ``vmap``s the whole single-query sampler over a padded batch
of queries, so many queries run in one compiled call and query ``b`` gets exactly the draws of
``sample(keys[b], ...)`` with ``keys = jax.random.split(key, B)``.

Padding (as in ``bayesrank.data.batch``): padded entities have a decoupled unit prior row
(``mask_covariance``) and padded pairs (``pair_mask = False``) add
zero log-likelihood, so a padded problem has the same posterior on its real entities.

Results (``NUTSPosterior``) carry the draws of ``xi_hat`` (chains kept apart), their mean and
covariance, and NumPyro's own diagnostics: split R-hat and effective sample size per entity (and
per hyperparameter), divergences and acceptance per chain. Prediction from draws (module
functions ``predict_pairs``, ``probability_matrix``, ``entity_scores`` from
``bayesrank.predict``, and the same methods on ``NUTSPosterior``, the shared face of
``bayesrank.inference.posterior``):

    prob       = (1/S) sum_t Phi(xi_i^(t) - xi_j^(t))            (the posterior predictive),
    delta_mean = sample mean of xi_i - xi_j,   delta_var = its sample variance (ddof 0).

Under a Gaussian posterior ``E[Phi(d)] = Phi(delta_mu / sqrt(1 + delta_var))`` (Eq. 13-14), which
is what EP reports: the two ``prob`` are the same quantity and are compared directly.

The package: ``models`` (the NumPyro models), ``sampler`` (chains, settings,
diagnostics, ``NUTSPosterior``), and here the entry points. Every entry point takes the
sampler's settings as keywords (``NUTSSettings``: only counts and flags are static) and
checks its inputs (``bayesrank.data.checks``).
"""

from __future__ import annotations

from functools import partial

import jax
import jax.numpy as jnp
import numpy as np

from ...compiler import jit
from ...data.checks import (
    check_choice,
    check_float,
    check_intervals,
    check_outcomes,
    check_problem,
)
from ...data.keys import check_key
from ...data.problem import PreferenceProblem
from ...diagnostics import warn_if_unconverged
from ...kernels.xpgp import check_prior, default_trainable
from ...likelihoods import Outcomes, row_outcomes, tie_outcomes
from ...predict import draw_entity_scores as entity_scores
from ...predict import draw_pair_predictions as predict_pairs
from ...predict import draw_probability_matrix as probability_matrix
from ...querymap import map_queries
from ...runtime import one_blas_thread, warn_if_float32
from ..problem import problem_covariance, problem_outcomes
from .models import (
    build_prior,
    hyper_spec,
    kernel_root,
    pair_log_likelihood,
    whitened_model,
    xpgp_model,
)
from .sampler import (
    NUTSDiagnostics,
    NUTSPosterior,
    NUTSSettings,
    _sample_fixed,
    first_entities,
    init_uniform,
    run_chains,
    sample_fixed,
    settings_from,
    summarise,
    warn_unmixed,
)

__all__ = [
    "NUTSDiagnostics",
    "NUTSPosterior",
    "NUTSSettings",
    "entity_scores",
    "first_entities",
    "pair_log_likelihood",
    "predict_pairs",
    "probability_matrix",
    "sample",
    "sample_batch",
    "sample_each",
    "sample_hyperparameters",
    "sample_problem",
    "whitened_model",
    "xpgp_model",
]


def _float_problem(K, pairs, pair_mask, batched):
    """Checked host arrays; an integer ``K`` is computed in floating point."""
    K = np.asarray(K)
    if K.dtype.kind in "iub":
        K = K.astype(jnp.result_type(float))
    if K.ndim != 2 + batched:
        what = "(B, n, n)" if batched else "(n, n)"
        raise ValueError(f"K must be {what}, got shape {K.shape}")
    return check_problem(K, pairs, pair_mask, batched=batched)


def sample(
    key,
    K,
    pairs,
    *,
    pair_mask=None,
    ties=None,
    weights=None,
    margin=None,
    outcomes: Outcomes | None = None,
    **options,
) -> NUTSPosterior:
    """NUTS for one problem at fixed hyperparameters (the prior covariance ``K``).

    Args:
        key: a JAX PRNG key (chains use ``jax.random.split(key, num_chains)``).
        K: ``(n, n)`` prior covariance of ``xi_hat`` (Eq. 5; may be singular: factored by
            ``linalg.psd_root``, ``eigh`` with clipped eigenvalues, no jitter).
        pairs: ``(m, 2)`` int, row ``(i, j)`` = *i preferred to j*.
        pair_mask: ``(m,)`` bool, False for padded pairs.
        ties, weights, margin: each row a tie or a win, its weight and the tie margin, as in
            ``bayesrank.inference.ep.fit`` (None: probit pairs of weight 1).
        outcomes: or each row's interval and weight as one ``Outcomes`` (e.g. grades).
        options: the sampler's settings (``NUTSSettings``: ``num_warmup``,
            ``num_samples``, ``num_chains``, ``target_accept_prob``, ``max_tree_depth``,
            ``dense_mass``, ``init_radius``).

    Returns:
        ``NUTSPosterior`` with draws ``(num_chains, num_samples, n)`` and diagnostics.
    """
    settings = settings_from(options)
    check_key(key)
    K, pairs, pair_mask = _float_problem(K, pairs, pair_mask, batched=False)
    if ties is not None or weights is not None or margin is not None:
        if outcomes is not None:
            raise ValueError("give ties, weights and margin, or outcomes, not both")
        eps = 0.0 if margin is None else margin
        tie, weight, eps = check_outcomes(ties, weights, eps, len(pairs))
        outcomes = tie_outcomes(tie, weight.astype(K.dtype), np.asarray(eps, K.dtype))
    elif outcomes is not None:
        lower, upper, weight = check_intervals(*outcomes, m=len(pairs))
        outcomes = Outcomes(*(np.asarray(a, K.dtype) for a in (lower, upper, weight)))
    with one_blas_thread():
        samples, trace = _sample_fixed(
            key, K, pairs, pair_mask, settings.static(), settings.tuning(K.dtype), outcomes
        )
        post = summarise(samples, trace)
    warn_unmixed(post)
    return post


def sample_problem(key, prior, problem, **options) -> NUTSPosterior:
    """``sample`` on a ``PreferenceProblem`` under an XPGP prior.

    ``K = prior.covariance(problem.X, prior.prepare(problem.relations))`` at the prior's fixed
    hyperparameters (the ``K`` that ``bayesrank.model.XPGPModel.fit`` gives EP);
    ``options`` as in ``sample``.
    """
    warn_if_float32("nuts.sample_problem")
    if not isinstance(problem, PreferenceProblem):
        raise ValueError(
            f"problem must be a PreferenceProblem (PreferenceProblem.create), got "
            f"{type(problem).__name__}"
        )
    check_prior(prior, None if problem.X is None else problem.X.shape[1])
    K = problem_covariance(prior, problem, jnp.result_type(float))
    outcomes = problem_outcomes(prior, problem)
    if outcomes is None:
        return sample(key, K, problem.pairs, **options)
    tie, grade, weight = outcomes
    margin = 0.0 if prior.margin is None else prior.margin
    rows = row_outcomes(tie, grade, weight, margin, prior.thresholds)
    post = sample(key, K, problem.rows, outcomes=rows, **options)
    return first_entities(post, problem.n) if problem.anchored else post


@partial(jit, static_argnames=("settings", "method"))
def _sample_batch(keys, K, pairs, pair_mask, tuning, settings, method):
    def one(key, K, pairs, pair_mask):
        return sample_fixed(key, K, pairs, pair_mask, settings, tuning)

    return map_queries(one, keys, K, pairs, pair_mask, method=method)


def sample_batch(key, K, pairs, *, pair_mask=None, method: str = "vmap", **options):
    """NUTS for ``B`` padded queries in one compiled call (``vmap`` of ``sample``'s core).

    Args:
        K: ``(B, n, n)`` prior covariances with padded entities decoupled
            (``bayesrank.parallel.covariances`` of a padded batch does that).
        pairs: ``(B, m, 2)``; pair_mask: ``(B, m)`` bool (``ProblemBatch.pair_mask``).
        method: ``"vmap"`` (all queries' chains advance in lock step: the form for accelerators;
            each NUTS iteration waits for the longest trajectory in the batch) or ``"map"``
            (``lax.map``: queries one after another inside the same compiled call; on a CPU this
            wastes no work, see ``benchmarks/README.md``).
        options: as in ``sample``.

    Query ``b`` uses the key ``jax.random.split(key, B)[b]`` and gets the same draws as
    ``sample(that key, K[b], pairs[b], pair_mask=pair_mask[b], ...)``. Returns one
    ``NUTSPosterior`` per query, over all ``n`` (padded) entities: slice the real ones
    (padded entities' draws are their N(0, 1) prior).
    """
    K = np.asarray(K)
    return sample_each(
        jax.random.split(check_key(key), K.shape[0]),
        K,
        pairs,
        pair_mask=pair_mask,
        method=method,
        **options,
    )


def sample_each(keys, K, pairs, *, pair_mask=None, method: str = "vmap", **options):
    """``sample_batch`` with one key per query given (``keys: (B,)``)."""
    settings = settings_from(options)
    check_key(keys, "keys")
    method = check_choice(method, "method", ("vmap", "map"))
    K, pairs, pair_mask = _float_problem(K, pairs, pair_mask, batched=True)
    if len(keys) != K.shape[0]:
        raise ValueError(f"{len(keys)} keys for {K.shape[0]} queries")
    with one_blas_thread():
        samples, trace = jax.device_get(
            _sample_batch(
                keys, K, pairs, pair_mask, settings.tuning(K.dtype), settings.static(), method
            )
        )
        posts = [
            summarise(samples[b], jax.tree_util.tree_map(lambda a, b=b: a[b], trace))
            for b in range(K.shape[0])
        ]
    flags = [p.diagnostics.converged for p in posts]
    warn_if_unconverged(
        flags, "NUTS run", "raise num_warmup and num_samples (diagnostics.problems() says why)"
    )
    return posts


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
    **options,
) -> NUTSPosterior:
    """Fully Bayesian NUTS: hyperparameters integrated out (``xpgp_model``).

    Args:
        key: PRNG key. prior: the ``XPGP`` prior whose values centre
            the hyperprior (e.g. an EM fit's prior).
        pairs: ``(m, 2)``; X: ``(n, d)`` attributes or None; graphs: ``prior.prepare(relations)``;
        mask: ``(n,)`` bool entity mask or None; pair_mask: ``(m,)`` bool or None.
        trainable: a pytree of bools like ``prior`` (default
            ``bayesrank.kernels.xpgp.default_trainable``: all but the confounded scales).
        hyperprior_scale: sd of the normal prior on each unconstrained hyperparameter (> 0).
        options: the sampler's settings, as in ``sample``.

    Returns:
        ``NUTSPosterior`` whose ``hyper`` holds constrained draws ``(C, S, ...)`` by name.
    """
    settings = settings_from(options)
    check_float(hyperprior_scale, "hyperprior_scale", 0.0, low_open=True)
    if trainable is None:
        trainable = default_trainable(prior)
    X = None if X is None else jnp.asarray(X)
    mask = None if mask is None else jnp.asarray(mask)
    K0 = np.asarray(prior.covariance(X, graphs, mask))
    _, pairs, pair_mask = _float_problem(K0, pairs, pair_mask, batched=False)
    spec, centres = hyper_spec(prior, trainable)
    if all(name is None for name in spec.names):
        raise ValueError("no trainable hyperparameter: use sample() at fixed hyperparameters")
    with one_blas_thread():
        (samples, hyper), trace = _sample_hyper(
            key,
            centres,
            np.asarray(hyperprior_scale, K0.dtype),
            X,
            tuple(graphs),
            mask,
            pairs,
            pair_mask,
            settings.tuning(K0.dtype),
            spec=spec,
            n=K0.shape[0],
            settings=settings.static(),
        )
        post = summarise(samples, trace, hyper)
    warn_unmixed(post)
    return post


@partial(jit, static_argnames=("spec", "n", "settings"))
def _sample_hyper(
    key, centres, scale, X, graphs, mask, pairs, pair_mask, tuning, *, spec, n, settings
):
    """The compiled fully Bayesian run: ``((xi (C, S, n), hyper), trace)``."""
    from numpyro.infer.util import potential_energy

    dtype = scale.dtype
    model_args = (spec, centres, scale, X, graphs, mask, pairs, pair_mask, n, dtype)

    def init_fn(k):
        k_z, k_h = jax.random.split(k)
        params = init_uniform(n, dtype, tuning[1])(k_z)
        for h, (name, c) in enumerate(zip(spec.names, centres, strict=True)):
            if name is not None:  # start near the centre: within a tenth of the prior's sd
                noise = jax.random.uniform(jax.random.fold_in(k_h, h), c.shape, c.dtype, -1, 1)
                params[name] = c + 0.1 * scale * noise
        return params

    def potential_fn(params):
        return potential_energy(xpgp_model, model_args, {}, params)

    trace = run_chains(key, potential_fn, init_fn, settings, tuning)

    def to_xi(params):
        prior_t = build_prior(spec, centres, params)
        L = kernel_root(prior_t, X, graphs, mask, n, dtype)
        leaves = jax.tree_util.tree_leaves(prior_t)
        values = {name: v for name, v in zip(spec.names, leaves, strict=True) if name is not None}
        return L @ params["z"], values

    flat = jax.tree_util.tree_map(lambda a: a.reshape(-1, *a.shape[2:]), trace.z)
    out = jax.lax.map(to_xi, flat)  # sequential: no batched LAPACK call (see experiments/README)
    C, S = settings.num_chains, settings.num_samples
    return jax.tree_util.tree_map(lambda a: a.reshape(C, S, *a.shape[1:]), out), trace
