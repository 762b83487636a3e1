"""The NumPyro models of the probit pair model: whitened at fixed hyperparameters, or with priors
on the hyperparameters (fully Bayesian). See ``bayesrank.inference.nuts``."""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax.scipy.special import log_ndtr

from ...kernels.params import constrain, unconstrain
from ...likelihoods import outcome_log_likelihood


def pair_log_likelihood(xi, pairs, pair_mask=None, outcomes=None) -> jax.Array:
    """``sum_s mask_s log Phi(xi_i - xi_j)`` over ``pairs: (m, 2)``; ``xi: (n,)``; a scalar.

    ``outcomes`` (``bayesrank.likelihoods.Outcomes``): each row's weighted win or tie
    log-likelihood ``c_s log P(outcome_s | xi_i - xi_j)`` instead."""
    pairs = jnp.asarray(pairs)
    d = xi[pairs[:, 0]] - xi[pairs[:, 1]]
    terms = log_ndtr(d) if outcomes is None else outcome_log_likelihood(d, outcomes)
    if pair_mask is not None:
        terms = jnp.where(pair_mask, terms, 0.0)
    return jnp.sum(terms)


def whitened_model(L, pairs, pair_mask=None, outcomes=None):
    """NumPyro model at fixed hyperparameters: ``z ~ N(0, I)``, ``xi_hat = L z``, probit pairs.

    Args:
        L: ``(n, n)`` with ``K = L L^T`` (e.g. ``psd_root(K)``).
        pairs: ``(m, 2)`` int, row ``(i, j)`` = *i preferred to j*.
        pair_mask: ``(m,)`` bool, False for padded pairs (zero log-likelihood), or None.
        outcomes: ties, weights and the tie margin (``pair_log_likelihood``), or None.

    Sample site ``"z": (n,)``; deterministic site ``"xi": (n,)``.
    """
    import numpyro
    import numpyro.distributions as dist

    L = jnp.asarray(L)
    z = numpyro.sample("z", dist.Normal(jnp.zeros(L.shape[0], L.dtype), 1.0).to_event(1))
    xi = numpyro.deterministic("xi", L @ z)
    numpyro.factor("pairs", pair_log_likelihood(xi, pairs, pair_mask, outcomes))


class HyperSpec(NamedTuple):
    """How the fully Bayesian model rebuilds an XPGP prior from its sampled sites (static)."""

    treedef: Any
    names: tuple  # one per leaf: the site name, or None for a fixed leaf


def hyper_spec(prior, trainable) -> tuple[HyperSpec, list]:
    """Flatten ``unconstrain(prior)``: the leaves (centres of the hyperprior) and their names."""
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
    return HyperSpec(treedef, names), [jnp.asarray(leaf) for _, leaf in leaves_with_path]


def build_prior(spec: HyperSpec, centres, values: dict):
    """The (constrained) prior with each named leaf taken from ``values`` (unconstrained)."""
    leaves = [
        c if name is None else values[name] for name, c in zip(spec.names, centres, strict=True)
    ]
    return constrain(jax.tree_util.tree_unflatten(spec.treedef, leaves))


def nugget(dtype) -> float:
    return 1e-6 if jnp.finfo(dtype).bits == 64 else 1e-4


def kernel_root(prior, X, graphs, mask, n, dtype):
    K = prior.covariance(X, graphs, mask)
    return jnp.linalg.cholesky(K + nugget(dtype) * jnp.eye(n, dtype=dtype))


def xpgp_model(spec: HyperSpec, centres, scale, X, graphs, mask, pairs, pair_mask, n, dtype):
    """NumPyro model with priors on the hyperparameters (use ``sample_hyperparameters``).

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
    prior = build_prior(spec, centres, values)
    L = kernel_root(prior, X, graphs, mask, n, dtype)
    z = numpyro.sample("z", dist.Normal(jnp.zeros(n, dtype), 1.0).to_event(1))
    xi = numpyro.deterministic("xi", L @ z)
    numpyro.factor("pairs", pair_log_likelihood(xi, pairs, pair_mask))
