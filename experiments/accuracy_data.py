"""Real preference problems for ``inference_accuracy.py``: OHSUMED and MQ2008 queries, HetRec users.

Each problem is a dict with ``name``, ``X`` ``(n, d)`` (features scaled to ``[0, 1]`` per column
within the problem, as BoTorch's ``PairwiseGP`` expects), ``grades`` ``(n,)`` (relevance grades,
or twice a user's star ratings: whole numbers, as the ranking metrics require), ``known``
``(m, 2)`` and ``held_out`` ``(h, 2)`` pairs (winner first, disjoint: a seeded random split of
the pairs the grades imply).

- **OHSUMED** (LETOR 3.0, QueryLevelNorm, 45 features) and **MQ2008** (LETOR 4.0, 46 features):
  queries drawn at random (seeded) among those with ``min_n <= n <= max_n`` documents and at least
  ``2 * known`` grade-implied pairs; ``known`` pairs known, up to ``max_held_out`` of the rest
  held out.
- **HetRec MovieLens** (the 38 users with ratings): a user's rated movies (at most ``max_n``,
  drawn at random), 27 attributes per movie, the same for every user: the 20 genre indicators,
  the year, and six Rotten Tomatoes figures (critics' rating and score, top critics' rating,
  audience rating and score, log number of audience ratings; a missing value is the column's
  median). A pair is two movies the user rated differently (higher rating wins).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from bayesrank.data.letor import load_letor
from bayesrank.data.movielens import movie_attributes, scale01, user_ratings
from bayesrank.data.pairs import pairs_from_grades


def split(rng, pairs, known, max_held_out):
    """``known`` random rows of ``pairs`` and up to ``max_held_out`` of the others."""
    order = rng.permutation(len(pairs))
    held = order[known:][:max_held_out]
    return pairs[np.sort(order[:known])], pairs[np.sort(held)]


def letor_problems(data_dir, collection, count, rng, *, known, min_n, max_n, max_held_out):
    folder = Path(data_dir) / collection / ("QueryLevelNorm" if collection == "OHSUMED" else "")
    folder = folder / "Fold1"
    queries = [
        q for part in ("train", "vali", "test") for q in load_letor(folder / f"{part}.txt.gz")
    ]
    eligible = []
    for q in queries:
        n = len(q.grades)
        if min_n <= n <= max_n and len(pairs_from_grades(q.grades)) >= 2 * known:
            eligible.append(q)
    chosen = rng.choice(len(eligible), size=min(count, len(eligible)), replace=False)
    out = []
    for k in sorted(chosen):
        q = eligible[k]
        pairs = pairs_from_grades(q.grades)
        kn, ho = split(rng, pairs, known, max_held_out)
        out.append(
            dict(
                name=f"{collection}:{q.qid}",
                X=scale01(q.X),
                grades=np.asarray(q.grades, float),
                known=kn,
                held_out=ho,
            )
        )
    return out


def hetrec_problems(data_dir, count, rng, *, known, min_n, max_n, max_held_out):
    ratings = user_ratings(data_dir)
    attrs = movie_attributes(data_dir)
    users = []
    for u in sorted(ratings):
        movies = [m for m in sorted(ratings[u]) if m in attrs]
        if len(movies) >= min_n:
            users.append((u, movies))
    chosen = rng.choice(len(users), size=min(count, len(users)), replace=False)
    out = []
    for k in sorted(chosen):
        u, movies = users[k]
        if len(movies) > max_n:
            movies = sorted(rng.choice(movies, size=max_n, replace=False).tolist())
        grades = np.array([ratings[u][m] for m in movies])
        pairs = pairs_from_grades(grades)
        n_known = min(known, len(pairs) // 2)
        kn, ho = split(rng, pairs, n_known, max_held_out)
        X = scale01(np.stack([attrs[m] for m in movies]))
        out.append(
            dict(name=f"HetRec:user{u}", X=X, grades=np.round(2 * grades), known=kn, held_out=ho)
        )
    return out


def problems(data_dir, seed=0, *, per_collection=(12, 10, 10), max_n=150, max_held_out=1000):
    """The seeded problem set: OHSUMED, MQ2008 and HetRec counts from ``per_collection``."""
    rng = np.random.default_rng(seed)
    n_oh, n_mq, n_het = per_collection
    out = letor_problems(
        data_dir,
        "OHSUMED",
        n_oh,
        rng,
        known=150,
        min_n=60,
        max_n=max_n,
        max_held_out=max_held_out,
    )
    out += letor_problems(
        data_dir,
        "MQ2008",
        n_mq,
        rng,
        known=60,
        min_n=30,
        max_n=max_n,
        max_held_out=max_held_out,
    )
    out += hetrec_problems(
        data_dir, n_het, rng, known=300, min_n=60, max_n=max_n, max_held_out=max_held_out
    )
    return out


def hetrec_genre_problems(data_dir, seed=0, *, users=8, splits=2, known=150, max_n=216):
    """A researcher's own ratings data, as issue 31 met it: the ``users`` HetRec users with the
    fewest rated movies among those with at least 98 (98 to 216 movies each; larger users drawn
    down to ``max_n`` at random), each with ``splits`` seeded splits of ``known`` pairs (up to
    1,000 of the rest held out); 21 attributes standardised per user (the 20 genre indicators
    and the year), many weakly informative. Dicts as :func:`problems`' (``grades``: twice the
    star rating, whole numbers for the ranking metrics; pairs from the ratings)."""
    ratings, attrs = user_ratings(data_dir), movie_attributes(data_dir)
    sizes = sorted((len([m for m in ratings[u] if m in attrs]), u) for u in ratings)
    rng = np.random.default_rng(seed)
    out = []
    for _, u in [s for s in sizes if s[0] >= 98][:users]:
        movies = sorted(m for m in ratings[u] if m in attrs)
        if len(movies) > max_n:
            movies = sorted(rng.choice(movies, size=max_n, replace=False).tolist())
        X = np.stack([attrs[m][:21] for m in movies])
        X = (X - X.mean(0)) / np.where(X.std(0) > 0, X.std(0), 1.0)
        grades = np.array([ratings[u][m] for m in movies])
        pairs = pairs_from_grades(grades)
        for s in range(splits):
            kn, ho = split(rng, pairs, known, 1000)
            out.append(
                dict(
                    name=f"HetRec21:user{u}/{s}",
                    X=X,
                    grades=np.round(2 * grades),
                    known=kn,
                    held_out=ho,
                )
            )
    return out
