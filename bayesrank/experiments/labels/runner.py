"""The labels study's computation: the judgements of each query, the three ways' problems, one
learned ``theta`` per way and budget, the posteriors and their measures (package docstring)."""

from __future__ import annotations

import time
from types import SimpleNamespace

import numpy as np

from .._common import Progress, rng_for
from .protocol import WAYS, LabelsProtocol

__all__ = ["grades_of", "judgements", "run_protocol"]


def grades_of(query, collection: str) -> np.ndarray:
    """The query's grades as integers ``0..K-1``: LETOR's as they are, MovieLens's stars
    ``ceil(stars) - 1`` (0..4)."""
    g = np.asarray(query.grades, np.float64)
    return (np.ceil(g) - 1).astype(np.int64) if collection == "MovieLens" else g.astype(np.int64)


def judgements(grades: np.ndarray, raw: np.ndarray, budget: int, rng) -> dict:
    """``budget`` distinct unordered pairs and ``budget`` distinct entities (at most all), drawn
    uniformly; the pairs answered by ``raw`` (the collection's own labels: a tie where equal).
    Returns the known ``pairs`` (winner first), ``ties``, ``graded`` rows and the held-out
    ``test`` pairs (different grades, unjudged, winner first) and ``unjudged`` pairs with their
    ``tied`` flags (for the tie calibration)."""
    n = len(grades)
    i, j = np.triu_indices(n, 1)
    chosen = rng.choice(len(i), min(budget, len(i)), replace=False)
    judged = np.zeros(len(i), bool)
    judged[chosen] = True
    a, b = i[chosen], j[chosen]
    wins = raw[a] != raw[b]
    first = np.where(raw[a] > raw[b], a, b)
    second = np.where(raw[a] > raw[b], b, a)
    entities = np.sort(rng.choice(n, min(budget, n), replace=False))
    rest_i, rest_j = i[~judged], j[~judged]
    strict = raw[rest_i] != raw[rest_j]
    up = raw[rest_i] > raw[rest_j]
    test = np.column_stack(
        [np.where(up, rest_i, rest_j)[strict], np.where(up, rest_j, rest_i)[strict]]
    )
    return {
        "pairs": np.column_stack([first[wins], second[wins]]),
        "ties": np.column_stack([a[~wins], b[~wins]]),
        "graded": np.column_stack([entities, grades[entities]]),
        "test": test,
        "unjudged": np.column_stack([rest_i, rest_j]),
        "tied": raw[rest_i] == raw[rest_j],
    }


def _problem(way: str, query, drawn: dict):
    from ...data.problem import PreferenceProblem

    if way == "grades":
        return PreferenceProblem.create(np.zeros((0, 2)), X=query.X, graded=drawn["graded"])
    ties = drawn["ties"] if way == "ties" and len(drawn["ties"]) else None
    return PreferenceProblem.create(drawn["pairs"], X=query.X, ties=ties)


def _prior(way: str, n_grades: int):
    from ...kernels import RBF, XPGP, Independent
    from ...kernels.xpgp import start_thresholds

    extra = {"ties": {"margin": 0.5}, "grades": start_thresholds(n_grades)}.get(way, {})
    return XPGP(RBF(), entity=Independent(0.1), **extra)


def _measures(way: str, posterior, drawn: dict, grades: np.ndarray, relevant: int) -> dict:
    """One problem's numbers (package docstring)."""
    import jax.numpy as jnp

    from ...metrics import average_precision, ndcg_at

    prob = np.asarray(posterior.predict_pairs(drawn["test"]).prob)
    log_p = np.asarray(jnp.log(jnp.clip(prob, 1e-300, 1.0)))
    mean = np.asarray(posterior.mean)
    out = {
        "pair_error": float(np.mean((prob < 0.5) + 0.5 * (prob == 0.5))),
        "log_lik": float(np.mean(log_p)),
        "ndcg10": float(ndcg_at(mean, grades, 10, short_query="truncate")),
        "ap": float(average_precision(mean, grades, relevant_threshold=relevant)),
        "test_pairs": len(prob),
    }
    if way == "ties":
        tie = np.asarray(posterior.predict_outcomes(drawn["unjudged"]).tie)
        out["p_tie"] = float(tie.mean())
        out["tie_rate"] = float(np.mean(drawn["tied"]))
    return out


def run_protocol(protocol: LabelsProtocol, data_dir) -> dict:
    """Every budget and way of ``protocol`` on its collection (package docstring)."""
    from ...experiments.relational.collections import load_collection
    from ...learning import fit_hyperparameters
    from ...model import XPGPModel

    start = time.perf_counter()
    if protocol.collection != "sample" and data_dir is None:
        folder = {"MovieLens": "hetrec2011-movielens-2k"}.get(protocol.collection)
        raise ValueError(
            f"--collection {protocol.collection} needs --data-dir: --data-dir must be the folder "
            f"that holds {folder or protocol.collection}/"
        )
    config = SimpleNamespace(
        collection=protocol.collection,
        data_dir=data_dir,
        queries=protocol.queries,
        seed=protocol.seed,
        known=(max(protocol.budget),),  # queries with 2 J pairs of different grades at least
        max_movies=100,
    )
    queries = [q for q in load_collection(config) if len(np.unique(q.grades)) > 1]
    grades = [grades_of(q, protocol.collection) for q in queries]
    n_grades = int(max(g.max() for g in grades)) + 1
    relevant = 3 if protocol.collection == "MovieLens" else 1
    progress = Progress(len(protocol.budget) * len(WAYS))
    rows, priors = [], {}
    for budget in protocol.budget:
        drawn = [
            [
                judgements(g, np.asarray(q.grades), budget, rng_for(protocol.seed, budget, k, r))
                for r in range(protocol.repeats)
            ]
            for k, (q, g) in enumerate(zip(queries, grades, strict=True))
        ]
        for way in WAYS:
            problems = [
                _problem(way, q, d) for q, ds in zip(queries, drawn, strict=True) for d in ds
            ]
            prior = fit_hyperparameters(_prior(way, n_grades), problems).prior
            priors[f"{way}@{budget}"] = repr(prior)
            model = XPGPModel(prior)
            built = iter(problems)  # in the order they were built: query, then repetition
            for k, (q, ds) in enumerate(zip(queries, drawn, strict=True)):
                for r, d in enumerate(ds):
                    post = model.fit(next(built))
                    numbers = _measures(way, post, d, grades[k], relevant)
                    rows.append(
                        {"budget": budget, "way": way, "query": q.qid, "repeat": r, **numbers}
                    )
            progress(f"{way}, {budget} judgements")
    from .report import summarize

    return {
        "settings": protocol.settings(),
        "queries": [
            {"qid": q.qid, "n": len(g), "grades": int(g.max()) + 1}
            for q, g in zip(queries, grades, strict=True)
        ],
        "rows": rows,
        "summary": summarize(rows, protocol.budget),
        "priors": priors,
        "seconds": time.perf_counter() - start,
    }
