"""The study's collections: queries with attributes, relation graphs and preference pairs.

Each loader takes a ``StudyConfig`` and returns
``list[StudyQuery]`` (``bayesrank.data.study.StudyQuery``):

- ``sample``: the bundled OHSUMED sample (five queries, the keyword graph of their documents),
  for a run of a few minutes; needs nothing on disk;
- ``dir``: any collection in the on-disk format of ``bayesrank.data.study`` (``data_dir``);
- ``OHSUMED`` (LETOR 3.0, QueryLevelNorm, Fold1's 106 queries; ``data_dir`` holds ``OHSUMED/``):
  ``queries`` queries chosen (seeded) among those with at least twice the largest number of
  known pairs; the relation: the keyword graph (cosine similarity of query-term frequencies, 10
  neighbours, ``ohsumed_keyword_graph``);
- ``MovieLens`` (HetRec 2011; ``data_dir`` holds ``hetrec2011-movielens-2k/``): users with at
  least 60 rated movies, ``max_movies`` of each user's movies; 27 movie attributes; relations
  co-director, co-genre, co-country, shared tag and co-actor (bipartite projections; the actor
  file covers the first 473 movies only, others are isolated in it). The paper's TREC study
  (Fig. 3) cannot be rerun, its hyperlink data is not available: co-actor and co-director are
  the nearest substitutes for its co-citation relation;
- ``MQ2008`` (LETOR 4.0, S1-S5; ``data_dir`` holds ``MQ2008/``): a feature-similarity relation
  (RBF-weighted 10 nearest neighbours), **built from the attributes themselves**.
"""

from __future__ import annotations

import gzip
import warnings
from pathlib import Path

import numpy as np

from ...data.graphs import (
    feature_similarity_graph,
    load_hetrec_relations,
    ohsumed_keyword_graph,
)
from ...data.graphs.relations import bipartite_projection_from_pairs
from ...data.letor import load_letor
from ...data.movielens import movie_attributes, scale01, user_ratings
from ...data.pairs import pairs_from_grades
from ...data.sample import load_sample, sample_meta_path
from ...data.study import StudyQuery, read_study_dir

__all__ = ["COLLECTIONS", "load_collection"]


def _choose(items, count, seed):
    """``count`` of ``items`` at random (seeded), in their order; all where there are fewer."""
    if count >= len(items):
        return list(items)
    pick = np.sort(np.random.default_rng(seed).choice(len(items), count, replace=False))
    return [items[i] for i in pick]


def _need(config) -> int:
    return 2 * max(config.known)


def _require(path: Path, what: str) -> Path:
    if not path.exists():
        raise ValueError(f"{path} does not exist: --data-dir must be the folder that holds {what}")
    return path


def ohsumed(config) -> list[StudyQuery]:
    fold = _require(Path(config.data_dir) / "OHSUMED", "OHSUMED/") / "QueryLevelNorm/Fold1"
    queries = [q for part in ("train", "vali", "test") for q in load_letor(fold / f"{part}.txt.gz")]
    eligible = [q for q in queries if len(pairs_from_grades(q.grades)) >= _need(config)]
    out = []
    for q in _choose(eligible, config.queries, config.seed):
        meta = Path(config.data_dir) / "OHSUMED/Meta" / f"query-{q.qid}.xml.gz"
        W = ohsumed_keyword_graph(meta, doc_ids=q.doc_ids, k=10)[0]
        out.append(StudyQuery(q.qid, q.X, pairs_from_grades(q.grades), {"keyword": W}, q.grades))
    return out


def sample(config) -> list[StudyQuery]:
    out = []
    for q in load_sample():
        pairs = pairs_from_grades(q.grades)
        if len(pairs) < _need(config):
            continue
        W = ohsumed_keyword_graph(sample_meta_path(q.qid), doc_ids=q.doc_ids, k=10)[0]
        out.append(StudyQuery(q.qid, q.X, pairs, {"keyword": W}, q.grades))
    return _choose(out, config.queries, config.seed)


def mq2008(config) -> list[StudyQuery]:
    base = _require(Path(config.data_dir) / "MQ2008", "MQ2008/")
    queries = [q for s in range(1, 6) for q in load_letor(base / f"S{s}.txt.gz")]
    eligible = [q for q in queries if len(pairs_from_grades(q.grades)) >= _need(config)]
    return [
        StudyQuery(
            q.qid,
            q.X,
            pairs_from_grades(q.grades),
            {"feature_knn": feature_similarity_graph(q.X, k=10)},
            q.grades,
        )
        for q in _choose(eligible, config.queries, config.seed)
    ]


def _co_actor(base: Path, movies) -> np.ndarray:
    path = base / "movie_actors_PARTIAL_first473movies.dat.gz"
    with gzip.open(path, "rt", encoding="latin-1") as f:
        rows = f.read().splitlines()[1:]
    members = [(int(r.split("\t")[0]), r.split("\t")[1]) for r in rows if r.strip()]
    return bipartite_projection_from_pairs(movies, members).W


def movielens(config) -> list[StudyQuery]:
    base = _require(Path(config.data_dir) / "hetrec2011-movielens-2k", "hetrec2011-movielens-2k/")
    ratings = user_ratings(config.data_dir)
    attrs = movie_attributes(config.data_dir)
    users = [u for u in sorted(ratings) if sum(m in attrs for m in ratings[u]) >= 60]
    rng = np.random.default_rng(config.seed)
    out = []
    for u in _choose(users, config.queries, config.seed):
        movies = [m for m in sorted(ratings[u]) if m in attrs]
        if len(movies) > config.max_movies:
            movies = sorted(rng.choice(movies, config.max_movies, replace=False).tolist())
        grades = np.array([ratings[u][m] for m in movies])
        relations = load_hetrec_relations(base, movies)
        relations["co_actor"] = _co_actor(base, movies)
        X = scale01(np.stack([attrs[m] for m in movies]))
        out.append(StudyQuery(f"user{u}", X, pairs_from_grades(grades), relations, grades))
    return out


def directory(config) -> list[StudyQuery]:
    if config.data_dir is None:
        raise ValueError("the collection 'dir' needs --data-dir (a folder in the study format)")
    folders = read_study_dir(config.data_dir)
    for q in folders:  # the protocol splits each query's pairs into known and test ones
        if len(q.ties) or q.weights is not None:
            raise ValueError(
                f"{config.data_dir}: query {q.qid!r} has ties or weighted comparisons, which the "
                "relational study's protocol (a split of the pairs) does not take; fit it with "
                "`bayesrank fit`"
            )
    if config.queries is None or config.queries >= len(folders):
        return folders
    chosen = _choose(folders, config.queries, config.seed)
    dropped = sorted({q.qid for q in folders} - {q.qid for q in chosen})
    warnings.warn(
        f"{config.data_dir}: using {len(chosen)} of its {len(folders)} query folders "
        f"(--queries {config.queries}); left out: {dropped[:10]}"
        f"{' ...' if len(dropped) > 10 else ''}",
        UserWarning,
        stacklevel=2,
    )
    return chosen


COLLECTIONS = {
    "sample": sample,
    "dir": directory,
    "OHSUMED": ohsumed,
    "MovieLens": movielens,
    "MQ2008": mq2008,
}


def load_collection(config) -> list[StudyQuery]:
    """The queries of ``config.collection``; ``ValueError`` where none has enough pairs."""
    if config.collection not in COLLECTIONS:
        raise ValueError(
            f"collection must be one of {sorted(COLLECTIONS)}, got {config.collection!r}"
        )
    queries = COLLECTIONS[config.collection](config)
    if not queries:
        raise ValueError(
            f"no query of {config.collection} has {_need(config)} pairs (twice the largest "
            f"number of known pairs, {max(config.known)}): give smaller --known"
        )
    return queries
