"""Where a fit starts: data-driven initial values, random restarts, coarse subsets.

- ``initialize``: the median heuristic for RBF / ARD lengthscales and unit mixing weights;
- ``restart_points``: extra starts, the unconstrained values perturbed by ``N(0, 1)`` with
  an explicit key (the start with the highest final objective wins);
- ``subsample``: each problem on a random subset of its entities, for the coarse start of
  evidence maximisation (``fit_hyperparameters``, ``Start.coarse``), and
  ``auto_coarse``, the rule for when that start pays.

Host-side NumPy throughout: a fit's preparation compiles nothing.
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np

from ..data.batch import ProblemBatch
from ..data.problem import PreferenceProblem
from ..kernels.attributes import ARD, RBF
from ..kernels.params import check_hyperparameters
from ..kernels.xpgp import XPGP, check_prior
from .layout import one_query

__all__ = [
    "COARSE_FROM",
    "auto_coarse",
    "initialize",
    "median_distance",
    "restart_points",
    "starting_priors",
]


def median_distance(X, mask=None) -> float:
    """The median heuristic's length: the median Euclidean distance between distinct rows of
    ``X: (n, d)`` (``mask: (n,)`` the real ones; None: all), over at most 2,000 rows drawn with a
    fixed seed; 1.0 where every row coincides. Its inverse is an RBF's ``rho``."""
    X = np.asarray(X, float)
    X = X if mask is None else X[np.asarray(mask)]
    rng = np.random.default_rng(0)
    X = X[rng.choice(len(X), size=min(len(X), 2000), replace=False)]
    # exact differences (duplicates at distance 0), by blocks of rows: an (n, n, d) array of
    # 2000 points with OHSUMED's 25 features is 0.8 GB and took 3 s
    parts = []
    for a in range(0, len(X), 64):
        block = np.sqrt(((X[a : a + 64, None, :] - X[None, a + 1 :, :]) ** 2).sum(-1))
        parts.append(block[np.triu_indices(block.shape[0], 0, block.shape[1])])  # a + r < a + 1 + c
    d = np.concatenate(parts)
    d = d[d > 0]
    return float(np.median(d)) if d.size else 1.0


def initialize(prior: XPGP, batch: ProblemBatch) -> XPGP:
    """Data-driven start: the median heuristic for the attribute kernel; unit mixing weights.

    RBF: ``rho = 1 / median ||x - x'||`` over the batch's real entities (so ``k = kappa^2 e^-1/2``
    at the median distance). ARD: each lengthscale is the median ``|x_k - x'_k|`` of its feature
    (1 where that median is 0, e.g. a feature constant within queries).
    """
    n_weights = 1 + len(prior.relations)
    dtype = jnp.result_type(float)
    weights = np.ones(n_weights, dtype) if prior.weights is None else prior.weights
    attribute = prior.attribute
    if batch.X is not None and isinstance(attribute, RBF):
        attribute = dataclasses.replace(
            attribute,
            rho=np.asarray(
                1.0 / median_distance(batch.X.reshape(-1, batch.X.shape[-1]), batch.mask.ravel()),
                dtype,
            ),
        )
    elif batch.X is not None and isinstance(attribute, ARD):
        X = batch.X.reshape(-1, batch.X.shape[-1])[batch.mask.ravel()]
        rng = np.random.default_rng(0)
        a, b = rng.integers(0, len(X), (2, 20000))
        med = np.median(np.abs(X[a] - X[b]), axis=0)
        attribute = dataclasses.replace(
            attribute, lengthscales=np.asarray(np.where(med > 0, med, 1.0), dtype)
        )
    return dataclasses.replace(prior, attribute=attribute, weights=weights)


def with_weights(prior: XPGP) -> XPGP:
    """``prior`` with unit mixing weights where it has none."""
    if prior.weights is not None:
        return prior
    dtype = jnp.result_type(float)
    return dataclasses.replace(prior, weights=np.ones(1 + len(prior.relations), dtype))


def subsample(problems, size: int) -> tuple[list, list]:
    """Each problem on at most ``size`` random entities and the pairs among them (renumbered);
    problems left without pairs are dropped. Seeded: the same subsets every call.

    Returns ``(subsets, origins)``: ``origins[k] = (b, inside)``, subset ``k`` comes from
    ``problems[b]`` and its pairs are that problem's pairs ``inside`` (indices, in order).
    """
    if size < 2:
        raise ValueError(f"coarse must be at least 2 entities, got {size}")
    rng = np.random.default_rng(0)
    out, origins = [], []
    for b, p in enumerate(problems):
        p.require_pairs_only("Start(coarse=...), a start on subsets of the pairs,")
        if p.n <= size:
            out.append(p)
            origins.append((b, np.arange(len(p.pairs))))
            continue
        keep = np.sort(rng.choice(p.n, size, replace=False))
        position = np.full(p.n, -1)
        position[keep] = np.arange(size)
        inside = (position[p.pairs[:, 0]] >= 0) & (position[p.pairs[:, 1]] >= 0)
        if inside.any():
            out.append(
                PreferenceProblem.create(
                    position[p.pairs[inside]],
                    X=None if p.X is None else p.X[keep],
                    relations=[W[np.ix_(keep, keep)] for W in p.relations],
                    n=size,
                )
            )
            origins.append((b, np.flatnonzero(inside)))
    return out, origins


def restart_points(free: list, restarts: int, key, per_query: bool = False) -> list[list]:
    """``restarts`` random starts: each free unconstrained value plus ``N(0, 1)`` noise drawn
    from ``key`` (required: no hidden seed). With ``per_query`` (leaves ``(B, ...)``) every query
    gets the same noise, the noise a fit of that query alone would get."""
    if not restarts:
        return []
    if key is None:
        raise ValueError("restarts need an explicit key")
    starts = []
    for k in jax.random.split(key, restarts):
        keys = jax.random.split(k, len(free))
        start = []
        for x, kk in zip(free, keys, strict=True):
            shape = np.shape(x)[1:] if per_query else np.shape(x)
            start.append(x + np.asarray(jax.random.normal(kk, shape, x.dtype)))
        starts.append(start)
    return starts


#: ``coarse="auto"`` starts with half the entities from this many touched entities on.
COARSE_FROM = 500


def auto_coarse(coarse, problems, method, optimizer, per_query, laplace_start):
    """``coarse="auto"``: half the largest problem's touched entities where that pays, else
    ``None`` (the rule: ``Start.coarse``)."""
    if not (isinstance(coarse, str) and coarse == "auto"):
        if isinstance(coarse, str):
            raise ValueError(f"coarse must be 'auto', None or an integer, got {coarse!r}")
        return coarse
    bfgs = optimizer in (None, "bfgs")
    if method != "evidence" or not bfgs or per_query or laplace_start:
        return None
    if isinstance(problems, ProblemBatch):  # padded already: the coarse start takes problems
        return None
    if any(p.has_outcomes for p in problems):  # its subsets are of pairs alone
        return None
    touched = max(len(np.unique(np.asarray(p.pairs))) for p in problems)
    return touched // 2 if touched >= COARSE_FROM else None


def starting_priors(prior, batch, init, per_query):
    """The starting prior of the fit (shared) or of each query (its median heuristic), each
    checked to lie inside its constraints (learning works on ``log(value - lower)``)."""
    check_prior(prior, None if batch.X is None else batch.X.shape[-1])
    if not init:
        start = with_weights(prior)
        check_hyperparameters(start, strict=True, where="to be learned, ")
        return start
    if not per_query:
        return _inside(initialize(prior, batch), "")
    B = batch.pairs.shape[0]
    return [
        _inside(initialize(prior, one_query(batch, b)), f" of query {b}" if B > 1 else "")
        for b in range(B)
    ]


def _inside(start, query: str):
    """``start``, or a ``ValueError`` naming the initial value outside its constraint."""
    try:
        check_hyperparameters(start, strict=True, where=f"the initial value{query}: ")
    except ValueError as error:
        raise ValueError(
            f"{error}. The median heuristic sets lengthscales from the features' distances, "
            "and these are beyond the constraint's reach: rescale X (e.g. standardise each "
            "feature), or pass init=False with a prior inside its constraints"
        ) from None
    return start
