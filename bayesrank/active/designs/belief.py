"""The posterior over a utility on a continuous design space, as prediction at new designs
needs it, and its hyperparameters: the library's own prior, engine, hyperprior and prediction.

The designs shown so far are the entities: ``X: (n, d)`` in the unit cube, ``mask: (n,)`` the
real ones among a padded capacity (padded designs are decoupled, as in ``XPGP.covariance``).
The prior is the XPGP prior with an ARD attribute kernel and no relations (``prior_of``):
``K = kappa^2 exp(-1/2 sum_k ((x_k - x'_k) / ell_k)^2) / (2 sigma^2)`` at ``XPGP``'s default
``sigma = 1/sqrt 2``; the compiled loop carries it as the vector ``theta = (log kappa^2, log
ell_1..d)``.

**Prediction at new designs** (``latent``). With a Gaussian posterior from any
``GaussianEngine`` (EP, Laplace, a user's), whose sites give ``S: (n, n)`` and ``eta: (n,)``
(``inference.gaussian.site_precision``), the utility at new designs ``X_*: (q, d)`` has
``bayesrank.predict.predict_new``'s moments

    mean_* = K_*^T (eta - S mu),    cov_* = K_** - K_*^T (S - S Sigma S) K_*,

and ``Belief`` keeps ``predict.conditioning``'s ``shift = eta - S mu`` and ``middle = S - S
Sigma S`` so that each new pair costs ``O(n^2 q)`` (``predict.predict_conditioned``),
differentiable in ``X_*``.

With NUTS's draws ``f^(s)`` at the shown designs (``DrawBelief``), each draw is extended to the
new designs by the prior's conditional, ``f_*^(s) = K_*^T K^-1 f^(s) + C eps^(s)``, ``C C^T =
K_** - K_*^T K^-1 K_*``, with fixed normals ``eps: (S, q)`` (``latent_draws``): draws of the
exact (skew) posterior at the new designs, differentiable in ``X_*``. ``K`` gets a jitter of
``1e-8`` of its mean diagonal (repeated designs make it singular).

**Hyperparameters** (``learn``): Adam steps on the engine's log evidence plus the log
hyperprior, from the previous ``theta``. The lengthscales' prior is the library's one copy of
BoTorch ``PairwiseGP``'s, ``learning.hyperpriors.botorch_priors()["ARD.lengthscales"]``:
``ell_k / r_k ~ Gamma(2.4, 2.7)`` relative to the data's range, ``r_k`` the spread (max minus
min) of the shown designs' ``k``-th coordinate, as BoTorch's tutorial scales inputs by the
shown designs' bounds (``Normalize(d)``): with few designs shown, the spread is small and so
are the lengthscales the prior favours, and the acquisition explores wider. (On the unit
cube's own scale instead, the prior cost 3 to 10 units of final utility on Ackley,
``docs/results/pbo.md``.) ``log kappa^2 ~ N(0, 2^2)`` and ``theta`` is clipped to ``kappa^2``
in ``[0.01, 10^4]`` and ``ell_k`` in ``[10^-3, 100]``. (BoTorch's flat prior on ``kappa^2``
let noiseless answers drive ``kappa^2`` to its bound, and EUBO then chased the boundary of the
cube on a 1-D quadratic; this one did not, in the same test.)

Why this learner and not ``learning.fit_hyperparameters``: that one is host-driven (BFGS with
line searches, checks and padding between compiled steps), while the designs loop re-learns
``theta`` inside one compiled ``lax.scan`` over the answers, ``vmap``ped over seeds; so it
takes a fixed number of Adam steps on the same objective, the engine's evidence and the
hyperprior, in the loop's program.
"""

from __future__ import annotations

import math
import warnings
from typing import NamedTuple

import jax
import jax.numpy as jnp
import optax

from ...inference.engine import GaussianEngine
from ...inference.engines import Laplace, resolve
from ...inference.gaussian import site_precision
from ...kernels import ARD
from ...kernels.xpgp import XPGP
from ...learning.hyperpriors import botorch_priors
from ...posterior import prior_weight_scale
from ...predict import conditioning, predict_conditioned
from ...runtime import after

__all__ = [
    "FIT_ENGINE",
    "LENGTHSCALE_PRIOR",
    "Belief",
    "DrawBelief",
    "from_draws",
    "from_posterior",
    "kernel_of",
    "latent",
    "latent_draws",
    "learn",
    "log_prior",
    "prior_covariance",
    "prior_of",
    "spread",
]

#: The engine of ``fit`` and ``learn`` where none is given (the loop passes its own).
FIT_ENGINE = Laplace()

#: The lengthscales' hyperprior: BoTorch's ``Gamma(2.4, 2.7)``, relative to the data's range.
LENGTHSCALE_PRIOR = botorch_priors()["ARD.lengthscales"]

#: The hyperprior's sd of ``log kappa^2``.
SCALE_SD = 2.0

#: The least spread a coordinate's lengthscale prior is measured in (a coordinate that all
#: shown designs share would otherwise make the prior's lengthscale vanish).
MIN_SPREAD = 0.01

#: Bounds of ``log kappa^2`` (BoTorch's outputscale box) and of ``log ell``.
LOG_SCALE_BOUNDS = (math.log(0.01), math.log(1e4))
LOG_LENGTH_BOUNDS = (math.log(1e-3), math.log(100.0))


class Belief(NamedTuple):
    """``X: (n, d)``, ``mask: (n,)``, ``theta: (1 + d,)``, ``shift: (n,)``, ``middle: (n, n)``,
    and the posterior ``mean: (n,)`` at the shown designs (module docstring)."""

    X: jax.Array
    mask: jax.Array
    theta: jax.Array
    shift: jax.Array
    middle: jax.Array
    mean: jax.Array


class DrawBelief(NamedTuple):
    """``X: (n, d)``, ``mask: (n,)``, ``theta``, the Cholesky factor ``root: (n, n)`` of the
    jittered ``K``, ``alpha = K^-1 f: (S, n)`` of the draws, and their ``mean: (n,)``."""

    X: jax.Array
    mask: jax.Array
    theta: jax.Array
    root: jax.Array
    alpha: jax.Array
    mean: jax.Array


def kernel_of(theta) -> ARD:
    """The ARD kernel of ``theta = (log kappa^2, log ell_1..d)``."""
    return ARD(jnp.exp(0.5 * theta[0]), jnp.exp(theta[1:]))


def prior_of(theta) -> XPGP:
    """The XPGP prior of ``theta``: ``kernel_of(theta)`` on the attributes, no relations."""
    return XPGP(attribute=kernel_of(theta))


def prior_covariance(theta, X, mask):
    """``K: (n, n)`` of the shown designs, padded ones decoupled (``XPGP.covariance``)."""
    return prior_of(theta).covariance(X, mask=mask)


def _cross(theta, X, mask, X_new):
    """``K_cross: (n, q)`` (rows of padded designs zero) and ``K_new: (q, q)``."""
    prior = prior_of(theta)
    scale = prior_weight_scale(prior)
    K_cross = jnp.where(mask[:, None], scale * prior.attribute(X, X_new), 0.0)
    return K_cross, scale * prior.attribute(X_new)


def spread(X, mask):
    """``r: (d,)``, each coordinate's max minus min over the shown designs, at least
    ``MIN_SPREAD``."""
    high = jnp.max(jnp.where(mask[:, None], X, -jnp.inf), axis=0)
    low = jnp.min(jnp.where(mask[:, None], X, jnp.inf), axis=0)
    return jnp.maximum(high - low, MIN_SPREAD)


def log_prior(theta, r=None):
    """The log hyperprior at ``theta``, up to a constant: each ``ell_k / r_k`` from
    ``LENGTHSCALE_PRIOR`` (``Gamma(a, b)``) as a density on ``ell_k / r_k`` (BoTorch's MAP: no
    Jacobian of the log, so its mode is ``(a - 1) / b = 1.4 / 2.7``), and ``log kappa^2 ~ N(0,
    SCALE_SD^2)``. ``r: (d,)`` the designs' ``spread`` (default 1)."""
    a, b = LENGTHSCALE_PRIOR.concentration, LENGTHSCALE_PRIOR.rate
    relative = r is not None and LENGTHSCALE_PRIOR.relative
    log_ell = theta[1:] - jnp.log(r) if relative else theta[1:]
    return jnp.sum((a - 1.0) * log_ell - b * jnp.exp(log_ell)) - 0.5 * (theta[0] / SCALE_SD) ** 2


def clip(theta):
    """``theta`` clipped to its bounds (module docstring)."""
    first = jnp.arange(theta.shape[0]) == 0
    low = jnp.where(first, LOG_SCALE_BOUNDS[0], LOG_LENGTH_BOUNDS[0]).astype(theta.dtype)
    high = jnp.where(first, LOG_SCALE_BOUNDS[1], LOG_LENGTH_BOUNDS[1]).astype(theta.dtype)
    return jnp.clip(theta, low, high)


def fit(theta, X, mask, pairs, pair_mask, sites=None, engine: GaussianEngine | str = FIT_ENGINE):
    """``engine.fit`` at ``theta`` (a ``GaussianEngine``, or its name; ``sites``: a warm
    start): a ``GaussianFit``."""
    engine = resolve(engine, "engine", gaussian=True)
    K = prior_covariance(theta, X, mask)
    return engine.fit(K, pairs, sites=sites, pair_mask=pair_mask)


def from_posterior(theta, X, mask, pairs, pair_mask, post) -> Belief:
    """The ``Belief`` of a Gaussian fit ``post`` (with ``mean``, ``cov``, ``sites``)."""
    S, eta = site_precision(X.shape[0], pairs, post.sites, pair_mask)
    shift, middle = conditioning(post.mean, post.cov, S, eta)
    # symmetric in exact arithmetic; rounding in S Sigma S is not (the acquisition's ascent
    # reads it at every step), so keep the symmetric part, as before the engine refactor
    return Belief(X, mask, theta, shift, 0.5 * (middle + middle.T), post.mean)


def latent(belief: Belief, X_new):
    """The posterior ``(mean: (q,), cov: (q, q))`` of the utility at ``X_new: (q, d)``."""
    K_cross, K_new = _cross(belief.theta, belief.X, belief.mask, X_new)
    return predict_conditioned(belief.shift, belief.middle, K_cross, K_new)


def from_draws(theta, X, mask, draws) -> DrawBelief:
    """The ``DrawBelief`` of posterior draws ``(S, n)`` at the shown designs."""
    K = prior_covariance(theta, X, mask)
    jitter = 1e-8 * jnp.mean(jnp.diag(K))
    root = jnp.linalg.cholesky(K + jitter * jnp.eye(K.shape[0], dtype=K.dtype))
    alpha = jax.scipy.linalg.cho_solve((root, True), draws.T).T
    return DrawBelief(X, mask, theta, root, alpha, jnp.mean(draws, axis=0))


def latent_draws(belief: DrawBelief, X_new, base):
    """Draws ``(S, q)`` of the utility at ``X_new: (q, d)`` (module docstring); ``base: (S, q)``
    standard normals, fixed across calls so the draws are smooth in ``X_new``."""
    K_cross, K_new = _cross(belief.theta, belief.X, belief.mask, X_new)
    # after the draws' solve with the same root, which may be in the same program (runtime.after)
    V = jax.scipy.linalg.solve_triangular(belief.root, after(K_cross, belief.alpha), lower=True)
    cov = K_new - V.T @ V
    q = cov.shape[0]
    jitter = 1e-10 * jnp.maximum(jnp.trace(cov) / q, jnp.finfo(cov.dtype).tiny)
    C = jnp.linalg.cholesky(0.5 * (cov + cov.T) + jitter * jnp.eye(q, dtype=cov.dtype))
    return belief.alpha @ K_cross + base @ C.T


def learn(theta, X, mask, pairs, pair_mask, sites=None, *, steps: int, learning_rate=0.1,
          engine: GaussianEngine | str = FIT_ENGINE):  # fmt: skip
    """``steps`` Adam steps on ``-(log Z(theta) + log_prior(theta, spread(X, mask)))`` from
    ``theta``, ``log Z`` the ``engine``'s evidence (module docstring: why Adam here); returns
    the last ``theta`` (clipped to its bounds). Pure; ``steps`` and ``engine`` static."""
    engine = resolve(engine, "engine", gaussian=True)
    opt = optax.adam(learning_rate)
    r = spread(X, mask)

    def loss(t):
        post = fit(t, X, mask, pairs, pair_mask, sites, engine)
        return -(post.log_evidence + log_prior(t, r))

    def step(carry, _):
        t, state = carry
        value, grad = jax.value_and_grad(loss)(t)
        grad = jnp.where(jnp.isfinite(grad), grad, 0.0)
        updates, state = opt.update(grad, state)
        return (clip(optax.apply_updates(t, updates)), state), value

    (theta, _), _ = jax.lax.scan(step, (theta, opt.init(theta)), None, length=steps)
    return theta


def __getattr__(name: str):
    if name == "GAUSSIAN_ENGINES":  # the old table of pure fits by name
        warnings.warn(
            f"{__name__}.GAUSSIAN_ENGINES is deprecated: an engine is an object, "
            "bayesrank.inference.engines.resolve(name) (EP(), Laplace()), whose .fit is the "
            "pure fit (the old path will be removed)",
            DeprecationWarning,
            stacklevel=2,
        )
        from ...inference import ep, laplace

        return {"laplace": laplace.fit, "ep": ep.fit_core}
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
