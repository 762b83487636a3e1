"""Collection façades: EP with the prediction of held-out pairs (``fit_predict``), EP
posteriors (``fit_ep``), NUTS and LETOR metrics over many problems.

EP runs as **one compiled call over the whole collection** (``program``), on every device
of the mesh (``sharding``): the queries are grouped by size (``plan``), each group is one
block of rows split over the devices, and each device maps the single-query computation
(covariance, EP, prediction) over its rows: ``lax.map`` on CPUs, whose LAPACK calls gain nothing
from batching and whose padded rows are then skipped, ``vmap`` on accelerators
(``query_map_method``).
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from functools import partial
from typing import NamedTuple

import jax
import numpy as np

from ..compiler import jit
from ..data.batch import bucket_size, pad_stack
from ..data.checks import check_index_pairs
from ..diagnostics import warn_if_unconverged
from ..inference.engine import GaussianEngine
from ..inference.engines import EP, NUTS, resolve
from ..inference.ep.fit import unpad_posterior
from ..kernels.xpgp import XPGP
from ..metrics import LetorMetrics
from ..metrics import letor_metrics as _letor_metrics_one
from ..predict import OutcomePrediction, PairPrediction
from ..querymap import query_map_method
from ..runtime import warn_if_float32
from .batching import check_problems, covariances, prepare_batch, size_groups
from .plan import PADDING_SLACK, CollectionPlan
from .program import QueryResult, run_collection


class CollectionPrediction(NamedTuple):
    """``fit_predict``'s result, one entry per query in order.

    ``predictions[q]``: ``PairPrediction`` of the query's test pairs
    (``(p_q,)`` host arrays: ``prob`` = P(i > j), ``delta_mean``, ``delta_var``); ``mean[q]``,
    ``var[q]``: ``(n_q,)`` posterior mean and variance of each entity's preference degree (its
    scores); ``log_evidence``, ``n_iter``, ``converged``, ``max_change``: ``(Q,)``; ``plan``: how
    it ran (``CollectionPlan``, ``plan.describe()``); ``outcomes[q]``, where the prior has a tie
    margin: the test pairs' ``OutcomePrediction`` (``P(i > j)``, ``P(tie)``, ``P(j > i)``), else
    None.
    """

    predictions: list
    mean: list
    var: list
    log_evidence: np.ndarray
    n_iter: np.ndarray
    converged: np.ndarray
    max_change: np.ndarray
    plan: CollectionPlan
    outcomes: list | None = None


def fit_predict(
    prior: XPGP,
    problems,
    test_pairs,
    *,
    mesh=None,
    method: str | None = None,
    per_octave: int = 8,
    slack: float | None = PADDING_SLACK,
    engine: GaussianEngine | str | None = None,
    **old_keywords,
) -> CollectionPrediction:
    """EP on every problem under one prior and the prediction of its test pairs (paper Eq.
    13-14), in one compiled call over the whole collection, on every device of ``mesh``.

    Args:
        prior: the XPGP prior shared by the queries (fixed hyperparameters).
        problems: ``Q`` ``PreferenceProblem`` (this process's
            queries, where several processes run: ``bayesrank.parallel.distributed``), with
            pairs, and ties, grades or weights where the prior defines them (a tie margin,
            thresholds).
        test_pairs: ``Q`` arrays ``(p_q, 2)`` of pairs to predict, indices into each problem's
            entities.
        mesh: a one-axis mesh (``query_mesh``); default: every device.
        method: how each device maps its queries, ``"map"`` or ``"vmap"``; default by the
            devices' platform (``query_map_method``). ``plan.describe()`` says which ran.
        per_octave: size buckets per power of two (``make_plan``).
        slack: the size buckets are merged into fewer groups (each a block of the program,
            compiled on its own) while EP's padded work stays within this factor of one group
            per bucket (``plan.merge_groups``; default 1.25); None: one group per bucket.
        engine: the inference engine (``bayesrank.inference.engine``; a ``GaussianEngine``,
            by default ``EP()``), e.g. ``EP(max_iter=300, accelerate=True)`` or ``Laplace()``.
        old_keywords: ``max_iter``, ``tol``, ``schedule``, ``accelerate``, the old spelling of
            ``engine=EP(...)`` (a ``DeprecationWarning``).

    Returns:
        ``CollectionPrediction``, every query's, on every process. A
        ``ConvergenceWarning`` names the queries whose EP did not
        converge.
    """
    warn_if_float32("parallel.fit_predict")
    problems = check_problems(problems, prior)
    if len(test_pairs) != len(problems):
        raise ValueError(f"{len(problems)} problems but {len(test_pairs)} test pair arrays")
    tests = [
        check_index_pairs(t, p.n, name=f"test_pairs[{k}]")
        for k, (p, t) in enumerate(zip(problems, test_pairs, strict=True))
    ]
    engine = _engine(engine, old_keywords, "fit_predict")
    plan, anchored, out = run_collection(
        prior,
        problems,
        tests,
        mesh=mesh,
        method=method,
        per_octave=per_octave,
        engine=engine,
        slack=slack,
    )
    Q = len(plan.sizes)
    fields = {k: [None] * Q for k in QueryResult._fields}
    for g, res in zip(plan.groups, out, strict=True):
        for q, row in zip(g.queries, g.rows, strict=True):
            n, _, p, _ = plan.sizes[q]
            n = n - anchored[q]  # a graded query's anchor is not one of its entities
            for k in QueryResult._fields:
                value = np.asarray(getattr(res, k)[row])
                fields[k][q] = (
                    value[:p]
                    if k in ("prob", "delta_mean", "delta_var", "win", "tie", "loss")
                    else (value[:n] if k in ("mean", "var") else value)
                )
    result = CollectionPrediction(
        [
            PairPrediction(*v)
            for v in zip(fields["prob"], fields["delta_mean"], fields["delta_var"], strict=True)
        ],
        fields["mean"],
        fields["var"],
        np.asarray(fields["log_evidence"]),
        np.asarray(fields["n_iter"]),
        np.asarray(fields["converged"]),
        np.asarray(fields["max_change"]),
        plan,
        None
        if prior.margin is None
        else [
            OutcomePrediction(*v)
            for v in zip(
                *(fields[k] for k in ("win", "tie", "loss", "delta_mean", "delta_var")),
                strict=True,
            )
        ],
    )
    if getattr(engine, "max_iter", 1):  # 0 sweeps: the posterior at the sites, no cap hit
        warn_if_unconverged(result.converged, f"{engine.describe().upper()} fit", engine.advice)
    return result


#: The old keywords of the collection façades, each a field of ``EP`` now.
_OLD_KEYWORDS = ("max_iter", "tol", "schedule", "accelerate")


def _engine(engine, old: dict, where: str) -> GaussianEngine:
    """The façade's engine: ``engine`` resolved, or the old keywords' ``EP`` (with a
    ``DeprecationWarning``); ``ValueError``/``TypeError`` naming what is at fault."""
    if unknown := sorted(set(old) - set(_OLD_KEYWORDS)):
        raise TypeError(f"{where}() got an unexpected keyword argument {unknown[0]!r}")
    if old:
        if engine is not None:
            raise ValueError(
                f"{sorted(old)} and engine={engine!r} both set the engine: give its settings in "
                "the engine alone"
            )
        engine = EP(**old)
        warnings.warn(
            f"{where}({', '.join(f'{k}={v!r}' for k, v in old.items())}) is deprecated: pass "
            f"engine={engine!r}",
            DeprecationWarning,
            stacklevel=3,
        )
    return resolve(engine, gaussian=True)


def fit_ep(
    prior: XPGP,
    problems,
    *,
    mesh=None,
    method: str | None = None,
    per_octave: int = 8,
    slack: float | None = PADDING_SLACK,
    engine: GaussianEngine | str | None = None,
    **old_keywords,
) -> list:
    """The engine (default ``EP()``) on every problem under one prior, in one compiled call over
    the whole collection on every device of ``mesh`` (arguments as ``fit_predict``).

    Returns one posterior (``EPPosterior`` for EP) per problem, in order, over its own
    entities and pairs (padding removed); each predicts (``predict_pairs``). For a large
    collection prefer ``fit_predict``, which returns predictions rather than every
    ``(n, n)`` covariance.
    """
    engine = _engine(engine, old_keywords, "fit_ep")
    plan, anchored, out = run_collection(
        prior,
        problems,
        None,
        mesh=mesh,
        method=method,
        per_octave=per_octave,
        engine=engine,
        slack=slack,
    )
    posts: list = [None] * len(plan.sizes)
    for g, res in zip(plan.groups, out, strict=True):
        for q, row in zip(g.queries, g.rows, strict=True):
            n, m, _, _ = plan.sizes[q]
            one = jax.tree_util.tree_map(lambda x, row=row: x[row], res)
            posts[q] = unpad_posterior(one, int(n - anchored[q]), int(m))
    if getattr(engine, "max_iter", 1):
        converged = np.array([bool(p.converged) for p in posts])
        warn_if_unconverged(converged, f"{engine.describe().upper()} fit", engine.advice)
    return posts


def predict_pairs(posteriors, pairs) -> list:
    """Each posterior's ``predict_pairs`` on its own test pairs (``pairs[q]: (p_q, 2)``):
    the shared prediction face, whose compiled programs are bucketed by size."""
    if len(posteriors) != len(pairs):
        raise ValueError(f"{len(posteriors)} posteriors but {len(pairs)} pair arrays")
    return [post.predict_pairs(p) for post, p in zip(posteriors, pairs, strict=True)]


def sample_nuts(
    key, prior: XPGP, problems, *, method: str | None = None, engine: NUTS | None = None, **options
) -> list:
    """NUTS at the prior's fixed hyperparameters for every problem: one compiled call per size
    group, each query sampled with its own key (``jax.random.split(key, len(problems))``);
    ``method`` as ``query_map_method``; ``engine``: the sampler's settings, ``NUTS(...)``
    (default ``NUTS()``; ``options``, its fields as keywords, are the old spelling, with a
    ``DeprecationWarning``). Returns one ``NUTSPosterior`` per problem over its own entities."""
    from ..inference import nuts  # NumPyro loads only when sampling is asked for

    if options:
        if engine is not None:
            raise ValueError(f"{sorted(options)} and engine={engine!r} both set the sampler")
        engine = NUTS(**options)
        warnings.warn(
            f"sample_nuts({', '.join(f'{k}={v!r}' for k, v in options.items())}) is "
            f"deprecated: pass engine={engine!r}",
            DeprecationWarning,
            stacklevel=2,
        )
    engine = resolve(NUTS() if engine is None else engine)
    if not isinstance(engine, NUTS):
        raise ValueError(f"sample_nuts samples: engine must be NUTS(...), got {engine!r}")

    problems = check_problems(problems, prior, pairs_only="bayesrank.parallel.sample_nuts")
    keys = jax.random.split(key, len(problems))
    out: list = [None] * len(problems)
    for idx, batch in size_groups(problems):
        K = np.asarray(covariances(prior, prepare_batch(prior, batch)))
        posts = nuts.sample_each(
            keys[np.concatenate([idx, np.repeat(idx[-1:], len(K) - len(idx))])],
            K,
            batch.pairs,
            pair_mask=batch.pair_mask,
            method=query_map_method(method),
            **engine.options(),
        )
        for row, k in enumerate(idx):
            out[k] = nuts.first_entities(posts[row], problems[k].n)
    return out


@partial(jit, static_argnames=("max_k",))
def _letor_metrics_jit(scores, labels, mask, max_k):
    return jax.vmap(_letor_metrics_one, in_axes=(0, 0, 0, None))(scores, labels, mask, max_k)


def letor_metrics(
    scores: Sequence[np.ndarray], labels: Sequence[np.ndarray], max_k: int = 10
) -> LetorMetrics:
    """MAP, NDCG@1..max_k and P@1..max_k of ``Q`` queries in one compiled call.

    ``scores[q]``, ``labels[q]``: ``(n_q,)``. The queries are padded to bucketed shapes (number
    of queries and of documents), so collections of similar sizes share the compiled program.
    Returns host arrays ``map: (Q,)``, ``ndcg: (Q, max_k)``, ``precision: (Q, max_k)``.
    """
    if len(scores) != len(labels):
        raise ValueError(f"{len(scores)} score arrays but {len(labels)} label arrays")
    Q = len(scores)
    n = bucket_size(max(len(s) for s in scores))
    padded_scores, mask = pad_stack([np.asarray(s, np.float64) for s in scores], n)
    padded_labels, _ = pad_stack([np.asarray(lab) for lab in labels], n)
    rows = bucket_size(Q, per_octave=4) - Q  # padded queries: every document masked
    padded_scores = np.pad(padded_scores, ((0, rows), (0, 0)))
    padded_labels = np.pad(padded_labels, ((0, rows), (0, 0)))
    mask = np.pad(mask, ((0, rows), (0, 0)))
    result = jax.device_get(_letor_metrics_jit(padded_scores, padded_labels, mask, int(max_k)))
    return LetorMetrics(*(np.asarray(x)[:Q] for x in result))
