"""What a fit carries between iterations and what it returns."""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from ..inference import ep
from ..kernels.xpgp import XPGP
from .config import Config, combine

__all__ = ["FitResult", "Trace"]


class Trace(NamedTuple):
    """Per iteration (leading axis ``T``, plus a query axis for per-query fits)."""

    log_evidence: jax.Array  # EP evidence (summed over shared queries) at the iteration's start
    objective: jax.Array  # EM: Q after the M-step; evidence method: the (MAP) evidence
    objective_before: jax.Array  # EM: Q before the M-step (same q); evidence method: = objective
    params: Any  # the prior (constrained) after the iteration
    ep_iterations: jax.Array  # largest EP sweep count over the queries
    ep_converged: jax.Array  # every query's EP converged


class FitResult(NamedTuple):
    """The fitted prior, the EP posteriors at it (batched: they predict per query), the trace,
    and whether the fit converged (per query for per-query fits).

    ``converged``: BFGS stopped by its own rule before ``n_iter``; EM and the optax optimisers
    (which run ``n_iter`` iterations) changed the objective by less than ``tol`` nats in the
    last one.
    """

    prior: XPGP
    posteriors: ep.EPPosterior
    trace: Trace
    converged: Any = None


class Carry(NamedTuple):
    """The state between iterations: the free unconstrained values, EP's sites (a tuple over
    size buckets, each ``(B, m)``) and the optimiser's state (``None`` for EM and BFGS)."""

    free: list
    sites: tuple
    opt_state: Any


def info(post: tuple, carry: Carry, fixed, before, after, cfg: Config) -> Trace:
    """One iteration's trace entry from the buckets' posteriors."""
    return Trace(
        log_evidence=sum(jnp.sum(p.log_evidence) for p in post),
        objective=after,
        objective_before=before,
        params=combine(carry.free, fixed, cfg),
        ep_iterations=jnp.max(jnp.stack([jnp.max(p.n_iter) for p in post])),
        ep_converged=jnp.all(jnp.stack([jnp.all(p.converged) for p in post])),
    )
