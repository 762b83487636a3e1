"""HetRec 2011 MovieLens-2k: movie attributes and the 38 users' ratings (the relations between
movies are in ``bayesrank.data.graphs.hetrec``).

- ``movie_attributes``: 27 attributes per movie, the same for every user: the 20 genre
  indicators, the year, and six Rotten Tomatoes figures (critics' rating and score, top critics'
  rating, audience rating and score, log number of audience ratings; a missing value, written
  ``0`` or ``\\N``, is the column's median);
- ``user_ratings``: ``{userID: {movieID: rating}}`` of the users in
  ``ratings_subset_38users`` (its train and test files together);
- ``scale01``: each column to ``[0, 1]`` (within one user's movies, as the experiments do);
- ``pooled_pairs``: every user's ratings as preference pairs over one global list of movies.

``data_dir`` holds the folder ``hetrec2011-movielens-2k`` (files gzipped, tab-separated, a
header line, Latin-1).
"""

from __future__ import annotations

import gzip
from pathlib import Path

import numpy as np

__all__ = ["MOVIE_COLUMNS", "movie_attributes", "pooled_pairs", "scale01", "user_ratings"]

#: The numeric columns of ``movies.dat`` used as attributes (after the genre indicators).
MOVIE_COLUMNS = (
    "year",
    "rtAllCriticsRating",
    "rtAllCriticsScore",
    "rtTopCriticsRating",
    "rtAudienceRating",
    "rtAudienceScore",
    "rtAudienceNumRatings",
)


def scale01(X) -> np.ndarray:
    """``X: (n, d)`` with each column mapped to ``[0, 1]`` (a constant column to 0)."""
    X = np.asarray(X, float)
    lo, hi = X.min(0), X.max(0)
    span = np.where(hi > lo, hi - lo, 1.0)
    return (X - lo) / span


def _table(path: Path) -> tuple[list[str], list[list[str]]]:
    if not path.exists():
        raise ValueError(
            f"{path}: no such file (is data_dir the folder that holds hetrec2011-movielens-2k?)"
        )
    with gzip.open(path, "rt", encoding="latin-1") as f:
        header = f.readline().rstrip("\n").split("\t")
        rows = [line.rstrip("\n").split("\t") for line in f if line.strip()]
    return header, rows


def movie_attributes(data_dir) -> dict[int, np.ndarray]:
    """``{movieID: (27,) attributes}`` (unscaled) of every HetRec movie."""
    base = Path(data_dir) / "hetrec2011-movielens-2k"
    header, rows = _table(base / "movies.dat.gz")
    cols = [header.index(c) for c in MOVIE_COLUMNS]
    ids = [int(r[0]) for r in rows]
    values = np.full((len(rows), len(cols)), np.nan)
    for a, r in enumerate(rows):
        for b, c in enumerate(cols):
            try:
                v = float(r[c])
            except (ValueError, IndexError):
                continue
            values[a, b] = v if v > 0 else np.nan  # 0 and \N mark a missing figure
    values[:, -1] = np.log1p(values[:, -1])
    med = np.nanmedian(values, axis=0)
    values = np.where(np.isnan(values), med, values)
    _, grows = _table(base / "movie_genres.dat.gz")
    genres = sorted({g for _, g in grows})
    index = {m: a for a, m in enumerate(ids)}
    onehot = np.zeros((len(ids), len(genres)))
    for m, g in grows:
        if int(m) in index:
            onehot[index[int(m)], genres.index(g)] = 1.0
    attrs = np.concatenate([onehot, values], axis=1)
    return {m: attrs[a] for a, m in enumerate(ids)}


def user_ratings(data_dir) -> dict[int, dict[int, float]]:
    """``{userID: {movieID: rating}}`` of the 38 HetRec users (train and test files together)."""
    base = Path(data_dir) / "hetrec2011-movielens-2k" / "ratings_subset_38users"
    ratings: dict[int, dict[int, float]] = {}
    for part in ("train", "test"):
        _, rows = _table(base / f"{part}_user_ratings.dat.gz")
        for r in rows:
            ratings.setdefault(int(r[0]), {})[int(r[1])] = float(r[2])
    return ratings


def pooled_pairs(ratings: dict[int, dict[int, float]], movie_ids) -> tuple[np.ndarray, np.ndarray]:
    """Each user's ratings as pairs over the movies ``movie_ids`` (entity order): for every user
    and every two movies they rated differently, ``(better, worse)``. Returns ``pairs: (m, 2)``
    entity indices (winner first) and ``users: (m,)``; users in ascending id order, each user's
    pairs in the order of their movies' ids. Equal ratings give no pair.

    Raises:
        ValueError: naming the user and the movie rated that is not in ``movie_ids``.
    """
    index = {int(m): a for a, m in enumerate(movie_ids)}
    pairs, users = [], []
    for user in sorted(ratings):
        rated = sorted(ratings[user])
        missing = [m for m in rated if m not in index]
        if missing:
            raise ValueError(f"user {user} rated movie {missing[0]}, which is not in movie_ids")
        idx = np.array([index[m] for m in rated], dtype=np.int64)
        r = np.array([ratings[user][m] for m in rated])
        a, b = np.triu_indices(len(idx), 1)
        keep = r[a] != r[b]
        a, b = a[keep], b[keep]
        win = r[a] > r[b]
        pairs.append(np.stack([np.where(win, idx[a], idx[b]), np.where(win, idx[b], idx[a])], 1))
        users.append(np.full(len(a), user))
    if not pairs:
        return np.zeros((0, 2), np.int64), np.zeros(0, np.int64)
    return np.concatenate(pairs), np.concatenate(users)
