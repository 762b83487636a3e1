"""One problem's posterior under an XPGP prior, by a Gaussian engine, in one compiled call.

``fit_problem`` pads the problem to size buckets (``bayesrank.data.batch.bucket_size``;
padded entities are decoupled and touched by no pair, so the real entities' posterior is
unchanged), builds ``K`` from the prior in one module-level jitted program and fits it in
another, which every prior, a new split of the same query and a query of similar size reuse,
and unpads the result.
``fit_covariance`` does the same for a caller that holds ``K`` itself (an interactive session).
``why_not_finite`` says what to tell a user whose posterior is not finite.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from ..compiler import jit
from ..data.batch import bucket_size
from ..data.checks import check_covariance, check_fits_dtype, check_outcomes, check_pairs
from ..data.problem import PreferenceProblem
from ..executables import stored
from ..kernels.xpgp import XPGP, with_anchor
from ..likelihoods import row_outcomes
from .ep.fit import check_sites, pad_pairs, unpad_posterior
from .ep.host import pad_rows

__all__ = [
    "fit_covariance",
    "fit_problem",
    "problem_covariance",
    "problem_outcomes",
    "why_not_finite",
]


def problem_outcomes(prior: XPGP, problem: PreferenceProblem):
    """``(tie, grade, weight)`` of the problem's rows (host arrays), or None for probit pairs (no
    ties, grades or weights, no margin). ``ValueError`` for ties without a tie margin, or
    grades the prior's thresholds do not define."""
    if len(problem.ties) and prior.margin is None:
        raise ValueError(
            f"the problem has {len(problem.ties)} ties, but the prior has no tie margin: give "
            "it one, e.g. XPGP(..., margin=0.5) (learned with the other hyperparameters)"
        )
    if problem.anchored:
        top = int(problem.graded[:, 1].max())
        if prior.n_grades == 0:
            raise ValueError(
                f"the problem has grades 0..{top}, but the prior has no thresholds: give it "
                f"{top}, e.g. XPGP(..., threshold=-1.0, threshold_gaps=jnp.ones({top - 1})) "
                "(learned with the other hyperparameters)"
            )
        if top >= prior.n_grades:
            row = int(np.argmax(problem.graded[:, 1]))
            raise ValueError(
                f"graded row {row}: grade {top} is beyond the prior's {prior.n_grades} grades "
                f"(0..{prior.n_grades - 1}): give the prior {top} thresholds"
            )
    if not problem.has_outcomes and prior.margin is None:
        return None
    return problem.outcomes()


def problem_covariance(prior: XPGP, problem: PreferenceProblem, dtype):
    """The prior covariance of the problem's entities, and of its anchor where it has grades
    (``with_anchor``): ``(n, n)`` or ``(n + 1, n + 1)``."""
    X = None if problem.X is None else jnp.asarray(problem.X, dtype)
    graphs = prior.prepare(problem.relations)
    N = problem.n + problem.anchored
    if not problem.anchored:
        return prior.covariance(X, graphs, np.ones(N, bool))
    mask = np.arange(N) < problem.n
    X = None if X is None else jnp.concatenate([X, jnp.zeros((1, X.shape[1]), dtype)])
    graphs = prior.prepare([np.pad(W, (0, 1)) for W in problem.relations])
    return with_anchor(prior.covariance(X, graphs, mask), jnp.asarray(~mask))


def why_not_finite(prior: XPGP, problem: PreferenceProblem) -> str:
    """What to say of a posterior that is not finite: the first entry of the prior covariance
    that is not (a hyperparameter scaling ``K`` beyond the working dtype), else the dtype."""
    dtype = jnp.result_type(float)
    X = None if problem.X is None else jnp.asarray(problem.X, dtype)
    graphs = prior.prepare(problem.relations)
    K = np.asarray(prior.covariance(X, graphs, np.ones(problem.n, bool)))
    where = f"the posterior is not finite in {np.dtype(dtype).name}"
    bad = np.argwhere(~np.isfinite(K))
    if bad.size:
        i, j = bad[0]
        return (
            f"{where}: the prior covariance K[{i}, {j}] = {K[i, j]} is not (the prior's scales, "
            f"e.g. kappa, weights or 1 / (2 sigma^2), put K beyond {np.dtype(dtype).name}'s "
            "range): rescale them, or enable float64 (jax_enable_x64)"
        )
    return (
        f"{where} although the prior covariance is (max |K| = {np.max(np.abs(K)):.3g}): the "
        "problem is beyond this dtype's precision; enable float64 (jax_enable_x64)"
    )


def fit_problem(prior: XPGP, problem: PreferenceProblem, sites, engine):
    """A ``GaussianEngine`` (``engine``) on ``problem`` under ``prior``, padded to size buckets,
    in one jitted call (the engine a pytree argument: its numbers traced, the rest static)."""
    outcomes = problem_outcomes(prior, problem)
    rows = problem.rows
    n, m = problem.n, len(rows)
    N = bucket_size(n + problem.anchored)  # a slot for the anchor of graded problems
    dtype = jnp.result_type(float)
    relations = []
    for W in problem.relations:
        padded = np.zeros((N, N))
        padded[:n, :n] = W
        relations.append(padded)
    graphs = prior.prepare(relations)
    X = None
    if problem.X is not None:
        check_fits_dtype(problem.X, "X", dtype)
        X = np.zeros((N, problem.X.shape[1]), dtype)
        X[:n] = problem.X
    mask = np.arange(N) < n
    anchor = (np.arange(N) == n) if problem.anchored else None
    sites = check_sites(sites, m)
    pairs, pair_mask, sites = pad_pairs(rows, None, sites, dtype)
    if outcomes is not None:  # the margin and thresholds are the prior's (traced with it)
        tie, grade, weight = outcomes
        _, weight, _ = check_outcomes(None, weight, 0.0, m)
        tie, weight = pad_rows(tie, weight, m, dtype)
        outcomes = (tie, np.pad(grade, (0, len(tie) - m), constant_values=-1), weight)
    K, outcomes = _prior_jit(_as_arrays(prior, dtype), X, graphs, mask, anchor, outcomes)
    result = _fit_covariance_jit(K, pairs, pair_mask, sites, outcomes, engine.with_defaults(dtype))
    return unpad_posterior(result, n, m)


def _as_arrays(tree, dtype):
    """Python-number leaves as arrays of ``dtype``, so every call traces the same types."""
    return jax.tree_util.tree_map(
        lambda x: np.asarray(x, dtype) if isinstance(x, float | int) else x, tree
    )


@stored  # kept whole: a fresh process neither traces nor lowers a prior it built before
@jit
def _prior_jit(prior, X, graphs, mask, anchor, outcomes):
    """The padded prior covariance ``K: (N, N)`` (with the anchor slot of graded problems) and
    the rows' outcomes at the prior's margin and thresholds. A program of its own, apart from
    the engine's: the costly fit (``_fit_covariance_jit``) depends on the bucket and the engine
    only, so every prior on problems of one size shares it."""
    K = with_anchor(prior.covariance(X, graphs, mask), anchor)
    if outcomes is not None:
        margin = jnp.zeros((), K.dtype) if prior.margin is None else prior.margin
        outcomes = row_outcomes(*outcomes, margin, prior.thresholds)
    return K, outcomes


def fit_covariance(engine, K, rows, sites=None):
    """A ``GaussianEngine`` (``engine``) on the prior covariance ``K: (n, n)`` and ``rows: (m,
    2)`` (row ``(i, j)``: i beat j; ``sites``: a warm start), padded to size buckets (padded
    entities decoupled, padded rows masked) in one jitted call, and unpadded: the engine's
    ``GaussianFit`` on the ``n`` entities and ``m`` rows."""
    dtype = jnp.result_type(float)
    K = check_fits_dtype(check_covariance(np.asarray(K, dtype)), "K", dtype)
    if K.ndim != 2:
        raise ValueError(f"K must be a full (n, n) covariance, got shape {K.shape}")
    rows = check_pairs(rows, K.shape[0], name="rows").pairs
    n, m = K.shape[0], len(rows)
    K_pad = np.eye(bucket_size(n), dtype=dtype)
    K_pad[:n, :n] = K
    pairs, pair_mask, sites = pad_pairs(rows, None, check_sites(sites, m), dtype)
    result = _fit_covariance_jit(K_pad, pairs, pair_mask, sites, None, engine.with_defaults(dtype))
    return unpad_posterior(result, n, m)


@stored
@jit
def _fit_covariance_jit(K, pairs, pair_mask, sites, outcomes, engine):
    """``engine.fit`` on a padded covariance: one program per bucket, engine and outcome kind."""
    return engine.fit(K, pairs, pair_mask=pair_mask, sites=sites, outcomes=outcomes)
