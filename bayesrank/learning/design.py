"""The global start of evidence maximisation: a space-filling design over the free
hyperparameters, scored by the (MAP) evidence, and BFGS from its best few points.

The evidence of a preference GP is often multimodal: a smooth mode (long lengthscales, the
attributes explain the preferences) and the per-entity limit (lengthscales below the distance
between any two entities, a large weight: the RBF kernel becomes an entity effect) can lie
several nats apart, and BFGS from the median heuristic stops at whichever basin it starts in.
So a fit first scores ``points`` points of a Halton design laid over the free hyperparameters,
in unconstrained (log) coordinates over ranges set from the data:

- an RBF's inverse lengthscale ``rho``: lengthscales from half the smallest non-zero distance
  between two entities to ten times the largest, ``rho in [1 / (10 d_max), 2 / d_min]``;
- ARD lengthscales: all multiplied by one common factor (one design coordinate, so the design
  stays low-dimensional with many features), over the same range of distances measured in the
  start's ARD metric;
- mixing weights and the entity effect's scale: ``[10^-1.5, 10^1.5]`` (prior variances from
  ``1e-3`` to ``1e3`` times the likelihood's unit noise);
- any other free value: its start plus or minus ``SPAN`` (a factor ``e^3 = 20`` on a scale);
- but a tie margin and grade thresholds: set at each point from the data's tie and grade
  rates under that point's prior (``matching``), so they follow its kernel's scale.

The start itself (the median heuristic) is the design's first point and always starts BFGS;
so do the best other points, up to ``starts`` in all, each more than ``APART`` from those
chosen in some coordinate (distinct basins, chosen greedily), unless its design value lies
more than ``SKIP`` nats below the best end so far. The fit keeps the best end.
Each design point is one evaluation of the same compiled evidence program that BFGS's line
search and the final posteriors use (no new program), from the prior's sites (cold EP), at
the steps' tolerance; a point where EP does not converge scores ``-inf``.

Host-side NumPy: the design compiles nothing but the small program that turns its points into
priors (``Design``).
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import numpy as np

from ..kernels.attributes import ARD, RBF, Independent
from ..kernels.params import map_params, unconstrain_host
from ..kernels.xpgp import XPGP
from .diagnostics import flat_values
from .drive import design_priors, design_values
from .matching import match_design
from .results import Design

__all__ = [
    "APART",
    "SCALES",
    "SKIP",
    "SPAN",
    "GlobalStart",
    "check_design",
    "design_form",
    "design_points",
    "global_starts",
    "pick_starts",
    "worth_running",
]

#: log10 range of mixing weights and the entity effect's scale in the design.
SCALES = (-1.5, 1.5)
#: half-width, in unconstrained units, of the design's range for any other free value.
SPAN = 3.0
#: distinct starts differ by more than this in some unconstrained (log) coordinate (a factor e).
APART = 1.0
#: a design start whose objective lies more than this many nats below the best end so far is
#: not run (on 54 problems, no start that improved the fit lay more than 1.4 nats below)
SKIP = 3.0


class GlobalStart(NamedTuple):
    """The design of a fit's global start: ``points`` design points (the start included),
    BFGS from the ``starts`` best distinct ones."""

    points: int = 16
    starts: int = 2


def design_form(design) -> GlobalStart | str | None:
    """``design`` as ``"auto"``, ``None`` (off) or a checked ``GlobalStart`` (``True``: the
    default design; an integer: that many points); ``ValueError`` naming a bad value."""
    if isinstance(design, str) and design == "auto":
        return design
    if design is None or design is False:
        return None
    if isinstance(design, bool) or isinstance(design, int | np.integer):
        design = GlobalStart() if design is True else GlobalStart(int(design))
    if not isinstance(design, GlobalStart):
        raise ValueError(
            f"design must be 'auto', None, a number of points or a GlobalStart, got {design!r}"
        )
    points, starts = design
    for name, value in (("points", points), ("starts", starts)):
        if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < 1:
            raise ValueError(f"design {name} must be a positive integer, got {value!r}")
    if starts > points:
        raise ValueError(f"design starts ({starts}) must not exceed its points ({points})")
    return GlobalStart(int(points), int(starts))


def check_design(design, method: str, optimizer) -> GlobalStart | None:
    """``design`` as a ``GlobalStart``, or ``None`` (off); ``"auto"`` is the default design
    for BFGS evidence maximisation and off otherwise. ``ValueError`` naming a bad value."""
    bfgs = method == "evidence" and optimizer in (None, "bfgs")
    design = design_form(design)
    if isinstance(design, str):
        return GlobalStart() if bfgs else None
    if design is not None and not bfgs:
        raise ValueError(
            "a design (global start) needs method='evidence' with the BFGS optimizer; pass "
            "start=Start(design=None) for EM or the optax optimizers"
        )
    return design


def halton(count: int, dim: int) -> np.ndarray:
    """The first ``count`` points of the ``dim``-dimensional Halton sequence after the origin,
    ``(count, dim)`` in ``(0, 1)``: radical inverses in the first ``dim`` primes."""
    primes = []
    k = 2
    while len(primes) < dim:
        if all(k % p for p in primes):
            primes.append(k)
        k += 1
    out = np.empty((count, dim))
    for d, base in enumerate(primes):
        for i in range(count):
            f, r, j = 1.0, 0.0, i + 1
            while j:
                f /= base
                r += f * (j % base)
                j //= base
            out[i, d] = r
    return out


def _distances(X: np.ndarray, w: np.ndarray | None = None) -> tuple[float, float]:
    """Smallest non-zero and largest distance between rows of ``X: (n, d)`` (features scaled by
    ``w: (d,)`` where given), over at most 2,000 rows (seeded)."""
    X = np.asarray(X, np.float64)
    if w is not None:
        X = X * w
    if len(X) > 2000:
        X = X[np.random.default_rng(0).choice(len(X), 2000, replace=False)]
    lo, hi = np.inf, 0.0
    for a in range(0, len(X), 128):  # blocks of rows: no (n, n, d) array
        sq = ((X[a : a + 128, None, :] - X[None, :, :]) ** 2).sum(-1)
        d = np.sqrt(sq[sq > 0])
        if d.size:
            lo, hi = min(lo, float(d.min())), max(hi, float(d.max()))
    return (lo, hi) if np.isfinite(lo) else (1.0, 1.0)


def _ranges(prior: XPGP, X: np.ndarray | None):
    """Per hyperparameter of ``prior`` (a tree like it): ``(low, high, tied)`` in unconstrained
    coordinates, ``low, high`` of the value's shape; ``tied``: one design coordinate moves every
    element (ARD lengthscales)."""

    def one(owner, name, constraint, value):
        u = np.asarray(unconstrain_value(constraint, value), np.float64)
        lower = getattr(constraint, "lower", None)
        if isinstance(owner, RBF) and name == "rho" and X is not None:
            d_min, d_max = _distances(X)
            rho = np.array([1.0 / (10.0 * d_max), 2.0 / d_min])
            lo, hi = np.log(np.maximum(rho - lower, 1e-300))
            return (np.full(u.shape, lo), np.full(u.shape, hi), False)
        if isinstance(owner, ARD) and name == "lengthscales" and X is not None:
            ell = np.broadcast_to(np.asarray(value, np.float64), X.shape[-1:])
            d_min, d_max = _distances(X, 1.0 / ell)
            # every lengthscale times c, c from d_min / 2 to 10 d_max in the start's metric
            lo = np.log(np.maximum(np.asarray(value) * 0.5 * d_min - lower, 1e-300))
            hi = np.log(np.maximum(np.asarray(value) * 10.0 * d_max - lower, 1e-300))
            return (np.broadcast_to(lo, u.shape), np.broadcast_to(hi, u.shape), True)
        scale_like = (isinstance(owner, XPGP) and name == "weights") or (
            isinstance(owner, Independent) and name == "scale"
        )
        if scale_like and lower == 0.0:
            lo, hi = (np.log(10.0**s) for s in SCALES)
            return (np.full(u.shape, lo), np.full(u.shape, hi), False)
        return (u - SPAN, u + SPAN, False)

    return map_params(prior, one)


def unconstrain_value(constraint, value):
    return constraint.inverse(np.asarray(value, np.float64), xp=np)


def design_points(prior: XPGP, X, flags, count: int) -> np.ndarray:
    """``(count, P)``: ``count - 1`` Halton points over the free hyperparameters of ``prior``
    (flattened unconstrained values, ``flags`` per leaf of ``unconstrain(prior)``: trainable),
    after ``prior``'s own values (row 0). ``X: (n, d)``: the real entities' attributes (or
    ``None``), which set the lengthscales' range."""
    start = [np.asarray(x) for x in jax.tree_util.tree_leaves(unconstrain_host(prior))]
    ranges = jax.tree_util.tree_leaves(
        _ranges(prior, X), is_leaf=lambda x: isinstance(x, tuple) and len(x) == 3
    )
    free = [(s, r) for s, r, f in zip(start, ranges, flags, strict=True) if f]
    dims = sum(1 if r[2] else s.size for s, r in free)
    z = halton(max(count - 1, 0), max(dims, 1))
    columns, k = [], 0
    for s, (lo, hi, tied) in free:
        lo, hi = np.reshape(lo, -1), np.reshape(hi, -1)
        if tied:
            t = z[:, k : k + 1]
            k += 1
        else:
            t = z[:, k : k + s.size]
            k += s.size
        columns.append(lo + t * (hi - lo))
    body = np.concatenate(columns, axis=1) if columns else np.zeros((len(z), 0))
    first = np.concatenate([s.reshape(-1) for s, _ in free])[None] if free else np.zeros((1, 0))
    return np.concatenate([first, body])[:count]


def pick_starts(values: np.ndarray, points: np.ndarray, starts: int) -> np.ndarray:
    """Indices of at most ``starts`` design points, greedily distinct: the start (point 0:
    the fit never ends below where BFGS from the start alone would), then each next the best
    finite one more than ``APART`` from every one chosen in some coordinate.
    ``values: (S,)``, ``points: (S, P)``."""
    score = np.where(np.isfinite(values), values, -np.inf)
    order = np.argsort(-score, kind="stable")
    chosen = [0]
    for i in order:
        if len(chosen) == starts:
            break
        if np.isfinite(score[i]) and all(
            np.max(np.abs(points[i] - points[c]), initial=0.0) > APART for c in chosen
        ):
            chosen.append(int(i))
    return np.array(chosen)


def global_starts(
    design: GlobalStart, priors, batch, free, fixed, data, sites, cfg, settings, log_prior
):
    """The starts of a fit from its design (``design``): ``(starts, design)``, a list of
    free-leaf lists (the start and the best distinct design points of each query, the same
    number for all, a query with fewer distinct ones repeating its start) and the
    ``Design``. ``priors``: each query's starting prior (one for a shared ``theta``)."""
    per_query = cfg.single
    shapes = [np.shape(x)[1:] if per_query else np.shape(x) for x in free]
    if per_query:
        X = [None if batch.X is None else batch.X[b][batch.mask[b]] for b in range(len(priors))]
    else:
        X = [None if batch.X is None else batch.X[batch.mask]]
    grid = np.stack(
        [design_points(p, x, cfg.flags, design.points) for p, x in zip(priors, X, strict=True)],
        axis=1,
    )  # (S, B, P)
    # row 0 is each query's start, as given (float rounding aside)
    grid[0] = flat_values(free, per_query)
    dtype = free[0].dtype
    # a tie margin and thresholds follow each point's kernel (``matching``)
    grid = match_design(
        grid, design_priors(grid, shapes, fixed, cfg, dtype), batch, priors[0], cfg.flags, per_query
    )

    def leaves(rows):  # (B, P) -> free leaves
        parts = np.split(rows, np.cumsum([int(np.prod(s)) for s in shapes])[:-1], axis=1)
        dtype = free[0].dtype
        if per_query:
            return [p.reshape(-1, *s).astype(dtype) for p, s in zip(parts, shapes, strict=True)]
        return [p[0].reshape(s).astype(dtype) for p, s in zip(parts, shapes, strict=True)]

    values = design_values(
        [leaves(rows) for rows in grid], fixed, data, sites, cfg, settings, log_prior
    )
    chosen = [pick_starts(values[:, b], grid[:, b], design.starts) for b in range(grid.shape[1])]
    count = max(len(c) for c in chosen)
    chosen = np.stack([np.concatenate([c, np.repeat(c[:1], count - len(c))]) for c in chosen])
    B = grid.shape[1]
    starts = [leaves(grid[chosen[:, j], np.arange(B)]) for j in range(count)]
    grid_priors = design_priors(grid, shapes, fixed, cfg, dtype)
    if per_query:
        return starts, Design(grid_priors, values.T, chosen)
    return starts, Design(grid_priors, values[:, 0], chosen[0])


def worth_running(design: Design, k: int, best) -> np.ndarray:
    """Per query (``(B,)``, or ``()`` for a shared ``theta``), whether the design's ``k``-th
    start is worth running: its design value lies within ``SKIP`` nats of the best end so far
    (a start that far below has not, in the measurements of ``docs/guide/fitting.md``, led to a
    higher end). A per-query fit runs it where any query needs it; the others keep their best,
    as each would alone."""
    values = np.asarray(design.objective)
    starts = np.asarray(design.starts)
    if values.ndim == 1:
        return np.asarray(values[starts[k]] >= np.reshape(best, -1)[0] - SKIP)
    value = values[np.arange(len(values)), starts[:, k]]
    return value >= np.asarray(best) - SKIP
