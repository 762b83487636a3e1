"""Pair probabilities with their uncertainty along a ranked list."""

from __future__ import annotations

import math
from statistics import NormalDist

import jax.numpy as jnp
import numpy as np

from ..data.checks import check_covariance, check_float, check_int
from ..predict import PairPrediction
from .base import axes, pyplot, vector

__all__ = ["ranked_pairs"]

_phi = np.vectorize(lambda t: 0.5 * math.erfc(-t / math.sqrt(2.0)), otypes=[np.float64])


def ranked_pairs(posterior, cov=None, *, k=None, labels=None, level: float = 0.9, ax=None):
    """P(rank r beats rank r + 1) with its uncertainty, for consecutive pairs of the ranking.

    The entities are ranked by posterior mean, highest first (ties by index, as
    ``Posterior.rank``). For each of the first ``k`` consecutive pairs ``(i, j)`` = (rank r, rank
    r + 1), with ``delta ~ N(delta_mean, delta_var)`` the posterior of ``xi_i - xi_j``
    (``delta_mean = mu_i - mu_j``, ``delta_var = Sigma_ii + Sigma_jj - 2 Sigma_ij``), drawn at
    x = r:

    - a marker at the predictive probability ``P(i > j | data) = Phi(delta_mean / sqrt(1 +
      delta_var))`` (paper Eq. 13-14, as ``bayesrank.predict.predict_pairs``, computed in
      float64 from ``mean`` and ``cov``; from a Posterior, its ``predict_pairs``: for NUTS, the
      Monte Carlo average over draws, with the draws' moments of ``delta``);
    - a vertical bar from ``Phi(delta_mean - z sqrt(delta_var))`` to ``Phi(delta_mean + z
      sqrt(delta_var))``, ``z = Phi^-1((1 + level) / 2)`` (1.645 for ``level=0.9``): the central
      ``level`` interval of the latent probability ``Phi(delta)``, i.e. how sure the posterior is
      of that probability (the marker may lie outside it: averaging over ``delta`` pulls the
      predictive probability towards 1/2);
    - a dotted line at 1/2.

    Args:
        posterior: a ``bayesrank.model.Posterior`` (anything with ``.mean: (n,)``,
            ``.cov: (n, n)`` and ``.predict_pairs(pairs: (p, 2))`` returning ``(prob,
            delta_mean, delta_var)``), or the posterior means ``mean: (n,)`` with ``cov``.
        cov: ``(n, n)`` posterior covariance when ``posterior`` is the means (a ``(n,)``
            vector is taken as the variances of independent entities); None with a Posterior.
        k: number of consecutive pairs shown, from the top: an integer in [1, n - 1]; None = all.
        labels: ``(n,)`` entity names (in entity order); the x ticks then name each pair
            ``"a > b"``. None = the ticks are the ranks r.
        level: mass of the interval, in (0, 1).
        ax: the Axes to draw into; None = a new figure.

    Returns:
        The Axes.

    Raises:
        ValueError: naming the argument, for a mean or covariance that is not finite or of the
            wrong shape, fewer than 2 entities, a bad ``k`` or ``level``, ``labels`` of the wrong
            length, or ``cov`` given with a Posterior (or missing without one).
    """
    pyplot()  # ImportError first; then the checks; a new figure only for valid input
    level = check_float(level, "level", 0.0, 1.0, low_open=True, high_open=True)
    is_posterior = all(hasattr(posterior, a) for a in ("mean", "cov", "predict_pairs"))
    if is_posterior and cov is not None:
        raise ValueError("cov must be None when posterior is a Posterior (it has its own .cov)")
    if not is_posterior and cov is None:
        raise ValueError("cov is required when posterior is the posterior means (n,)")
    mean_name = "posterior.mean" if is_posterior else "posterior"
    mean = vector(posterior.mean if is_posterior else posterior, mean_name)
    n = mean.shape[0]
    if n < 2:
        raise ValueError(f"{mean_name} has {n} entities: a ranked pair needs at least 2")
    k = check_int(k, "k", 1, n - 1, allow_none=True) or n - 1
    if labels is not None:
        labels = [str(s) for s in labels]
        if len(labels) != n:
            raise ValueError(f"labels has {len(labels)} names but there are n = {n} entities")
    order = np.argsort(-mean, kind="stable")
    pairs = np.stack([order[:k], order[1 : k + 1]], axis=1)
    if is_posterior:
        pred = posterior.predict_pairs(jnp.asarray(pairs))
    else:
        c = check_covariance(cov, "cov")
        if c.shape[0] != n:
            raise ValueError(f"cov has shape {c.shape} but posterior (the means) has n = {n}")
        c = np.asarray(c, np.float64)
        c = np.diag(c) if c.ndim == 1 else c
        i, j = pairs[:, 0], pairs[:, 1]  # bayesrank.predict.predict_pairs, in float64 NumPy
        delta_mean, delta_var = mean[i] - mean[j], np.maximum(c[i, i] + c[j, j] - 2 * c[i, j], 0)
        pred = PairPrediction(_phi(delta_mean / np.sqrt(1 + delta_var)), delta_mean, delta_var)
    prob = vector(pred.prob, "posterior.predict_pairs(...).prob", length=k)
    d_mean = vector(pred.delta_mean, "posterior.predict_pairs(...).delta_mean", length=k)
    d_var = vector(pred.delta_var, "posterior.predict_pairs(...).delta_var", length=k)
    d_sd = np.sqrt(np.maximum(d_var, 0.0))
    z = NormalDist().inv_cdf(0.5 + level / 2)
    lo, hi = _phi(d_mean - z * d_sd), _phi(d_mean + z * d_sd)

    r = np.arange(1, k + 1)
    ax = axes(ax)
    ax.axhline(0.5, color="0.6", lw=1, ls=":", label="1/2")
    ax.vlines(r, lo, hi, color="C0", lw=2, alpha=0.45, label=f"{level:.0%} interval of Phi(delta)")
    ax.plot(r, prob, "o", color="C0", markersize=4, label="P(rank r beats rank r + 1)")
    ax.set(xlim=(0.5, k + 0.5), ylim=(0, 1.02), ylabel="probability that rank r beats rank r + 1")
    if labels is None:
        from matplotlib.ticker import MaxNLocator

        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.set_xlabel("rank r (pair: rank r against rank r + 1)")
    else:
        ax.set_xticks(r, [f"{labels[i]} > {labels[j]}" for i, j in pairs], rotation=60, ha="right")
        ax.set_xlabel("consecutive pair of the ranking")
    ax.legend(loc="best", fontsize=8)
    return ax
