"""Movie relations of the HetRec 2011 MovieLens-2k data: shared directors, genres, countries, tags.

Each relation file lists ``(movieID, other)`` memberships; projected onto a given list of movies
(``bipartite_projection_from_pairs``) it is a relation graph.
"""

from __future__ import annotations

import operator
import os
from collections.abc import Iterable, Sequence
from pathlib import Path

import numpy as np

from ..files import read_bytes
from .relations import bipartite_projection_from_pairs

__all__ = [
    "HETREC_RELATIONS",
    "hetrec_relation_graph",
    "load_hetrec_relations",
    "read_hetrec_memberships",
]

#: The HetRec movie relations: name -> file whose first two columns are ``movieID`` and the other
#: entity (director id, genre, country, tag id). Each relation projects onto the movies.
HETREC_RELATIONS = {
    "co_director": "movie_directors.dat",
    "co_genre": "movie_genres.dat",
    "co_country": "movie_countries.dat",
    "shared_tag": "movie_tags.dat",
}


def _hetrec_file(data_dir: Path, name: str) -> Path:
    for candidate in (data_dir / f"{name}.gz", data_dir / name):
        if candidate.is_file():
            return candidate
    raise ValueError(f"{data_dir}: neither {name}.gz nor {name} exists")


def read_hetrec_memberships(data_dir: str | os.PathLike, relation: str) -> list[tuple[int, str]]:
    """``(movieID, other)`` pairs of one HetRec relation, in file order.

    Reads ``<data_dir>/<file>[.gz]`` (see ``HETREC_RELATIONS``): Latin-1, tab-separated, LF
    or CRLF. A first line starting with ``movieID`` is a header and skipped (the original files
    have one for directors and genres, none for countries and tags). Further columns (director
    name, tag weight) are not used: ``movie_tags.dat``'s tagWeight is ignored.

    Raises:
        ValueError: for an unknown relation, or naming the file and line with fewer than two
            columns, a non-integer movieID, or an empty second column.
    """
    if relation not in HETREC_RELATIONS:
        raise ValueError(f"unknown relation {relation!r}; expected one of {list(HETREC_RELATIONS)}")
    path = _hetrec_file(Path(data_dir), HETREC_RELATIONS[relation])
    pairs = []
    for lineno, line in enumerate(read_bytes(path).decode("latin-1").splitlines(), start=1):
        fields = line.split("\t")
        if (lineno == 1 and fields[0] == "movieID") or not line.strip():
            continue
        if len(fields) < 2 or not fields[1].strip():
            raise ValueError(f"{path}, line {lineno}: expected movieID<TAB>{relation} value")
        try:
            movie = int(fields[0])
        except ValueError:
            raise ValueError(
                f"{path}, line {lineno}: movieID {fields[0]!r} is not an integer"
            ) from None
        pairs.append((movie, fields[1].strip()))
    return pairs


def _movie_id_list(movie_ids: Sequence[int]) -> list[int]:
    ids = []
    for position, movie in enumerate(movie_ids):
        try:
            ids.append(operator.index(movie))
        except TypeError:
            raise ValueError(f"movie_ids[{position}] = {movie!r} is not an integer") from None
    return ids


def hetrec_relation_graph(
    data_dir: str | os.PathLike, movie_ids: Sequence[int], relation: str, binary: bool = False
) -> np.ndarray:
    """One HetRec relation projected onto the given movies.

    ``W[i, j]`` is the number of directors (``"co_director"``), genres (``"co_genre"``),
    countries (``"co_country"``) or tags (``"shared_tag"``, regardless of tagWeight) that movies
    ``movie_ids[i]`` and ``movie_ids[j]`` share; 1 for every edge with ``binary``. Movies without
    an entry in the file are isolated.

    Args:
        data_dir: the ``hetrec2011-movielens-2k`` directory.
        movie_ids: ``n`` distinct MovieLens movie ids (integers), in entity order.
        relation: a key of ``HETREC_RELATIONS``.

    Returns:
        ``W: (n, n)``.
    """
    ids = _movie_id_list(movie_ids)
    memberships = read_hetrec_memberships(data_dir, relation)
    return bipartite_projection_from_pairs(ids, memberships, binary=binary).W


def load_hetrec_relations(
    data_dir: str | os.PathLike,
    movie_ids: Sequence[int],
    relations: Iterable[str] = tuple(HETREC_RELATIONS),
) -> dict[str, np.ndarray]:
    """Several ``hetrec_relation_graph`` s at once: relation name -> ``W: (n, n)``."""
    return {name: hetrec_relation_graph(data_dir, movie_ids, name) for name in relations}
