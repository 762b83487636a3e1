"""The inference study's problems: real preference problems with known and held-out pairs.

Each problem is a dict with ``name``, ``X: (n, d)`` (features scaled to ``[0, 1]`` per column
within the problem, as BoTorch's ``PairwiseGP`` expects), ``grades: (n,)`` (relevance grades, or
twice a user's star ratings: whole numbers, as the ranking metrics require), ``known: (m, 2)``
and ``held_out: (h, 2)`` pairs (winner first, disjoint: a seeded random split of the pairs the
grades imply).

- ``queries``: the first ``queries`` LETOR queries (the bundled sample, or a file or folder) with
  more than ``known`` grade-implied pairs; ``known`` of them known, up to ``test`` of the others
  held out;
- ``accuracy`` (:func:`accuracy_problems`, the full protocol's 32): **OHSUMED** (LETOR 3.0,
  QueryLevelNorm, 45 features) and **MQ2008** (LETOR 4.0, 46 features) queries drawn at random
  (seeded) among those with ``min_n <= n <= max_n`` documents and at least ``2 * known``
  grade-implied pairs (12 OHSUMED queries with 150 known pairs, 10 MQ2008 queries with 60), and
  10 **HetRec MovieLens** users (of the 38 with ratings; 300 known pairs): a user's rated movies
  (at most ``max_n``, drawn at random), 27 attributes per movie, the same for every user: the 20
  genre indicators, the year, and six Rotten Tomatoes figures (critics' rating and score, top
  critics' rating, audience rating and score, log number of audience ratings; a missing value is
  the column's median). A pair is two movies the user rated differently (higher rating wins);
- ``hetrec21`` (:func:`hetrec_genre_problems`): 16 HetRec splits of a researcher's own
  ratings data with 21 standardised attributes.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ...data.letor import load_letor
from ...data.movielens import movie_attributes, scale01, user_ratings
from ...data.pairs import pairs_from_grades

__all__ = [
    "accuracy_problems",
    "hetrec_genre_problems",
    "hetrec_problems",
    "letor_problems",
    "query_problems",
    "split",
]


def split(rng, pairs, known, max_held_out):
    """``known`` random rows of ``pairs`` and up to ``max_held_out`` of the others."""
    order = rng.permutation(len(pairs))
    held = order[known:][:max_held_out]
    return pairs[np.sort(order[:known])], pairs[np.sort(held)]


def query_problems(queries, source: str, count: int | None, known: int, test: int, seed: int):
    """The first ``count`` (None: all) of ``queries`` (``bayesrank.data.letor.Query``) with more
    than ``known`` labelled pairs, as problems named ``query:<qid>``; ``ValueError`` naming
    ``--known`` where none has that many (at least one pair must be held out)."""
    usable = [q for q in queries if len(pairs_from_grades(q.grades)) > known]
    if not usable:
        most = max((len(pairs_from_grades(q.grades)) for q in queries), default=0)
        raise ValueError(
            f"--known {known} is too large: no query of {source} has more labelled pairs "
            f"(the most is {most}; at least one pair must be held out)"
        )
    rng = np.random.default_rng(seed)
    out = []
    for q in usable[:count]:
        out.append(
            _problem(f"query:{q.qid}", q, *split(rng, pairs_from_grades(q.grades), known, test))
        )
    return out


def _problem(name, q, known, held_out) -> dict:
    """One problem: the query's features scaled to ``[0, 1]``, its grades, its two pair sets."""
    return dict(
        name=name,
        X=scale01(q.X),
        grades=np.asarray(q.grades, float),
        known=known,
        held_out=held_out,
    )


def _need(path: Path, what: str) -> Path:
    if not path.exists():
        raise ValueError(f"--data-dir: {path} does not exist (the folder that holds {what})")
    return path


def letor_problems(data_dir, collection, count, rng, *, known, min_n, max_n, max_held_out):
    """``count`` random eligible queries of Fold1 (train, vali, test) of ``collection``
    (``OHSUMED`` or ``MQ2008`` under ``data_dir``), drawn with ``rng``."""
    folder = Path(data_dir) / collection / ("QueryLevelNorm" if collection == "OHSUMED" else "")
    folder = _need(folder / "Fold1", f"{collection}/")
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
        kn, ho = split(rng, pairs_from_grades(q.grades), known, max_held_out)
        out.append(_problem(f"{collection}:{q.qid}", q, kn, ho))
    return out


def hetrec_problems(data_dir, count, rng, *, known, min_n, max_n, max_held_out):
    """``count`` random HetRec users with at least ``min_n`` rated movies, drawn with ``rng``."""
    _need(Path(data_dir) / "hetrec2011-movielens-2k", "hetrec2011-movielens-2k/")
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


def accuracy_problems(
    data_dir, seed=0, *, per_collection=(12, 10, 10), max_n=150, max_held_out=1000
):
    """The seeded problem set: OHSUMED, MQ2008 and HetRec counts from ``per_collection``."""
    rng = np.random.default_rng(seed)
    n_oh, n_mq, n_het = per_collection
    common = dict(max_n=max_n, max_held_out=max_held_out)
    out = letor_problems(data_dir, "OHSUMED", n_oh, rng, known=150, min_n=60, **common)
    out += letor_problems(data_dir, "MQ2008", n_mq, rng, known=60, min_n=30, **common)
    out += hetrec_problems(data_dir, n_het, rng, known=300, min_n=60, **common)
    return out


def hetrec_genre_problems(
    data_dir, seed=0, *, users=8, splits=2, known=150, max_n=216, max_held_out=1000
):
    """A researcher's own ratings data, as a user meets it: the ``users`` HetRec users with the
    fewest rated movies among those with at least 98 (98 to 216 movies each; larger users drawn
    down to ``max_n`` at random), each with ``splits`` seeded splits of ``known`` pairs (up to
    ``max_held_out`` of the rest held out); 21 attributes standardised per user (the 20 genre
    indicators and the year), many weakly informative. Dicts as :func:`accuracy_problems`'
    (``grades``: twice the star rating, whole numbers for the ranking metrics)."""
    _need(Path(data_dir) / "hetrec2011-movielens-2k", "hetrec2011-movielens-2k/")
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
            kn, ho = split(rng, pairs, known, max_held_out)
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
