"""A relational preference collection on disk, and the study protocol's split of its pairs.

**The format** (one folder per query; the folder's name is the query id)::

    <data-dir>/
        <query>/
            attributes.csv        n rows of d numbers, comma-separated, no header: entity i is
                                  row i (0-based)
            grades.csv            n numbers, one per line: relevance grades or ratings (higher
                                  is preferred; every pair of different grades is a preference)
            comparisons.csv       or instead of grades: rows "winner,loser" (entity indices),
                                  or "a,b,tie" for a tie, each optionally ",weight" (how
                                  many times it was judged; ``userdata.read_judgements``)
            relation-<name>.csv   one per relation type: rows "i,j" or "i,j,weight" (an
                                  undirected edge, weight 1 by default; a repeated edge, in
                                  either orientation, adds up)

Lines starting with ``#`` and blank lines are skipped. Every relation name must occur in every
query (a query without edges of that type has an empty file). ``read_study_dir`` reads it
(errors name the file and line), ``write_study_dir`` writes it.

**The protocol's split** (``split_known``): ``k`` of a query's pairs known, chosen uniformly
at random, every other pair a test pair; ``seen_category`` says for each test pair whether
both, one or neither of its entities occur in a known pair (relations should matter most where
there is no entity-specific evidence).

**The entity-level split** (``split_entities``): entities, not pairs, are held out. A share of
the query's judged entities is drawn; each keeps ``j`` of its judgements (pairs with an entity
that is not held out) in training, for every ``j`` of a grid (0: the cold start), and the test
pairs are the held-out entities' other judgements. The question it asks is the XPGP paper's:
do relations help an entity with few or no judgements of its own?
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import jax
import numpy as np

from .checks import check_adjacency, check_features, check_int, check_pair_array
from .files import as_path, csv_rows
from .keys import check_key, permutation
from .pairs import pairs_from_grades, split_pairs
from .userdata import read_judgements

__all__ = [
    "DEFAULT_KEEP",
    "SEEN",
    "EntitySplit",
    "StudyQuery",
    "check_held_out",
    "check_keep",
    "read_study_dir",
    "seen_category",
    "split_entities",
    "split_known",
    "write_study_dir",
]

#: ``split_entities``' default numbers of judgements a held-out entity keeps (0: the cold start).
DEFAULT_KEEP = (0, 1, 2, 5, 10)

#: ``seen_category``'s codes, by name: how many of a test pair's entities are in known pairs.
SEEN = {"neither": 0, "one": 1, "both": 2}


@dataclass(frozen=True, eq=False)
class StudyQuery:
    """One query of a relational collection: ``X: (n, d)`` attributes, the preference
    ``pairs: (m, 2)`` (winner first), and ``relations``: name -> ``W: (n, n)``; ``grades:
    (n,)`` where the pairs come from grades (None for explicit comparisons); from a comparisons
    file also ``ties: (m_t, 2)`` and the weights (None: 1), as ``PreferenceProblem``'s."""

    qid: str
    X: np.ndarray
    pairs: np.ndarray
    relations: dict[str, np.ndarray] = field(default_factory=dict)
    grades: np.ndarray | None = None
    ties: np.ndarray = field(default_factory=lambda: np.zeros((0, 2), np.int64))
    weights: np.ndarray | None = None
    tie_weights: np.ndarray | None = None

    @property
    def judgements(self) -> dict:
        """``ties``, ``weights`` and ``tie_weights`` as ``PreferenceProblem.create``'s keywords
        (empty where the query has none)."""
        out = {"weights": self.weights, "tie_weights": self.tie_weights}
        if len(self.ties):
            out["ties"] = self.ties
        return {k: v for k, v in out.items() if v is not None}

    @property
    def n(self) -> int:
        return len(self.X)


def _numbers(path: Path, width: int | None) -> np.ndarray:
    rows = []
    for lineno, fields in csv_rows(path):
        if width is not None and len(fields) != width:
            raise ValueError(f"{path}, line {lineno}: expected {width} values, got {len(fields)}")
        try:
            row = [float(f) for f in fields]
        except ValueError:
            raise ValueError(f"{path}, line {lineno}: not a number in {fields}") from None
        for f, x in zip(fields, row, strict=True):
            if not np.isfinite(x):
                raise ValueError(f"{path}, line {lineno}: {f!r} is not a finite number")
        rows.append(row)
    return np.array(rows, float).reshape(len(rows), -1)


def _indices(path: Path, n: int, what: str) -> tuple[np.ndarray, np.ndarray]:
    """Index pairs (and a weight column, default 1) of an edge or comparison file."""
    pairs, weights = [], []
    for lineno, fields in csv_rows(path):
        if len(fields) not in (2, 3):
            raise ValueError(f"{path}, line {lineno}: expected i,j or i,j,weight")
        try:
            i, j = int(fields[0]), int(fields[1])
            w = float(fields[2]) if len(fields) == 3 else 1.0
        except ValueError:
            raise ValueError(f"{path}, line {lineno}: {what} must be integers") from None
        for index in (i, j):
            if not 0 <= index < n:
                raise ValueError(f"{path}, line {lineno}: entity {index} outside 0..{n - 1}")
        if i == j:
            raise ValueError(f"{path}, line {lineno}: entity {i} paired with itself")
        if not (np.isfinite(w) and w > 0):
            raise ValueError(f"{path}, line {lineno}: weight {fields[2]} must be positive")
        pairs.append((i, j))
        weights.append(w)
    return np.array(pairs, np.int64).reshape(-1, 2), np.array(weights)


def read_study_dir(path: str | os.PathLike) -> list[StudyQuery]:
    """Every query folder under ``path`` (sorted by name), in the module's format.

    Raises:
        ValueError: naming the file and line of a malformed row, an entity out of range, a
            query with neither or both of ``grades.csv`` and ``comparisons.csv``, or relation
            names that differ between queries.
    """
    root = as_path(path, "data_dir")
    if not root.is_dir():
        raise ValueError(f"{root}: not a directory")
    folders = sorted(p for p in root.iterdir() if p.is_dir())
    if not folders:
        raise ValueError(f"{root}: no query folders")
    queries, names = [], None
    for folder in folders:
        X = check_features(_numbers(folder / "attributes.csv", None), name=f"{folder}/X")
        n = len(X)
        has_grades = (folder / "grades.csv").is_file()
        if has_grades == (folder / "comparisons.csv").is_file():
            raise ValueError(f"{folder}: needs exactly one of grades.csv and comparisons.csv")
        grades, read = None, None
        if has_grades:
            grades = _numbers(folder / "grades.csv", 1)[:, 0]
            if len(grades) != n:
                raise ValueError(f"{folder / 'grades.csv'}: {len(grades)} grades for {n} entities")
            pairs = pairs_from_grades(grades)
        else:
            read = read_judgements(folder / "comparisons.csv", None, n, header=False)
            pairs = read.pairs
        relations = {}
        for file in sorted(folder.glob("relation-*.csv")):
            edges, weights = _indices(file, n, "entity indices")
            W = np.zeros((n, n))
            np.add.at(W, (edges[:, 0], edges[:, 1]), weights)
            np.add.at(W, (edges[:, 1], edges[:, 0]), weights)
            relations[file.stem.removeprefix("relation-")] = check_adjacency(W, name=str(file))
        if names is None:
            names = sorted(relations)
        elif sorted(relations) != names:
            raise ValueError(f"{folder}: relations {sorted(relations)}, other queries {names}")
        judged = {}
        if read is not None:
            judged = dict(ties=read.ties, weights=read.weights, tie_weights=read.tie_weights)
        queries.append(StudyQuery(folder.name, X, pairs, relations, grades, **judged))
    return queries


def write_study_dir(path: str | os.PathLike, queries: Sequence[StudyQuery]) -> Path:
    """Write ``queries`` in the module's format (grades where a query has them, else its
    comparisons); returns the directory."""
    root = as_path(path, "path")
    for q in queries:
        folder = root / q.qid
        folder.mkdir(parents=True, exist_ok=True)
        np.savetxt(folder / "attributes.csv", q.X, delimiter=",", fmt="%.17g")
        if q.grades is not None:
            np.savetxt(folder / "grades.csv", q.grades, fmt="%.17g")
        else:
            _write_comparisons(folder / "comparisons.csv", q)
        for name, W in q.relations.items():
            i, j = np.nonzero(np.triu(W, 1))
            rows = np.column_stack([i, j, W[i, j]])
            with open(folder / f"relation-{name}.csv", "w") as f:
                for a, b, w in rows:
                    f.write(f"{int(a)},{int(b)},{w:.17g}\n")
    return root


def _write_comparisons(path: Path, q: StudyQuery) -> None:
    """``winner,loser[,weight]`` per pair and ``a,b,tie[,weight]`` per tie."""
    lines = []
    for rows, weights, tail in ((q.pairs, q.weights, ""), (q.ties, q.tie_weights, ",tie")):
        for k, (i, j) in enumerate(rows):
            weight = "" if weights is None else f",{weights[k]:.17g}"
            lines.append(f"{int(i)},{int(j)}{tail}{weight}\n")
    path.write_text("".join(lines))


def split_known(key, pairs, n_known: int) -> tuple[np.ndarray, np.ndarray]:
    """``n_known`` of ``pairs`` known (uniformly at random, by ``key``), every other pair a test
    pair: ``(known (n_known, 2), test (m - n_known, 2))``, disjoint by row."""
    return split_pairs(key, pairs, n_known)


def seen_category(known, test, n: int) -> np.ndarray:
    """For each ``test`` pair, how many of its two entities occur in a ``known`` pair: ``(p,)``
    int, codes ``SEEN`` (0 neither, 1 one, 2 both)."""
    seen = np.zeros(n, bool)
    seen[np.asarray(known, np.int64).reshape(-1)] = True
    test = np.asarray(test, np.int64).reshape(-1, 2)
    return seen[test[:, 0]].astype(np.int64) + seen[test[:, 1]]


@dataclass(frozen=True, eq=False)
class EntitySplit:
    """One query's entity-level split (``split_entities``).

    ``held: (h,)`` the held-out entities (sorted); ``known[j]: (k_j, 2)`` the training pairs
    when each held-out entity keeps ``j`` judgements (the pairs among the other entities, then
    the kept ones; nested: ``known[j]`` holds ``known[i]`` for ``i < j``); ``test: (t, 2)`` every
    pair that involves a held-out entity and is not kept at the grid's largest ``j``, the same
    for every ``j``, so that the settings are paired."""

    held: np.ndarray
    known: dict[int, np.ndarray]
    test: np.ndarray


def split_entities(key, pairs, n: int, *, held_out=0.2, keep=DEFAULT_KEEP, n_known=None):
    """Hold out entities of one query: ``EntitySplit``.

    1. ``held_out`` of the entities that occur in ``pairs`` are drawn uniformly at random (a
       share in (0, 1), rounded, at least 1; or a count), leaving at least two judged ones.
    2. The pairs among the other entities are training pairs: all of them, or ``n_known`` of
       them uniformly at random.
    3. Each held-out entity's judgements with an entity that is not held out are put in a random
       order; at setting ``j`` (each of ``keep``) its first ``j`` are training pairs too (all of
       them where it has fewer). No held-out entity has more than ``j`` training judgements: a
       pair of two held-out entities is never kept.
    4. The test pairs: every pair that involves a held-out entity, less those kept at
       ``max(keep)``.

    Every draw is a function of ``key`` (``jax.random``), so the split is reproducible.

    Raises:
        ValueError: naming ``pairs`` (shape, an entity outside ``0..n-1``), ``held_out`` (not a
            share or count, or leaving fewer than two judged entities), ``keep`` (empty or a
            negative entry) or ``n_known`` (more than the pairs among the other entities).
    """
    check_key(key)
    arr = check_pair_array(pairs)
    n = check_int(n, "n", low=1)
    if len(arr) and (arr.min() < 0 or arr.max() >= n):
        row = int(np.flatnonzero((arr < 0).any(1) | (arr >= n).any(1))[0])
        raise ValueError(f"pairs row {row}: {arr[row].tolist()} is outside 0..{n - 1}")
    keep = check_keep(keep)
    judged = np.unique(arr)
    count = _held_count(held_out, len(judged))
    held = np.sort(judged[permutation(jax.random.fold_in(key, 0), len(judged))[:count]])
    is_held = np.zeros(n, bool)
    is_held[held] = True
    first, second = is_held[arr[:, 0]], is_held[arr[:, 1]]
    touches = first | second
    rest = np.flatnonzero(~touches)
    if n_known is not None:
        n_known = check_int(n_known, "n_known", low=0)
        if n_known > len(rest):
            raise ValueError(
                f"n_known={n_known} exceeds the {len(rest)} pairs among the entities that are "
                f"not held out"
            )
        rest = np.sort(rest[permutation(jax.random.fold_in(key, 1), len(rest))[:n_known]])
    single = np.flatnonzero(first ^ second)  # one held-out entity: a judgement it may keep
    single = single[permutation(jax.random.fold_in(key, 2), len(single))]
    owner = np.where(first[single], arr[single, 0], arr[single, 1])
    by_owner = np.argsort(owner, kind="stable")  # each owner's judgements in the random order
    rank = np.empty(len(single), np.int64)
    sorted_owner = owner[by_owner]
    rank[by_owner] = np.arange(len(single)) - np.searchsorted(sorted_owner, sorted_owner)
    kept = {j: single[rank < j] for j in keep}
    test = np.setdiff1d(np.flatnonzero(touches), kept[keep[-1]])
    known = {j: arr[np.concatenate([rest, np.sort(kept[j])])] for j in keep}
    return EntitySplit(held, known, arr[test])


def check_keep(keep) -> tuple[int, ...]:
    """``keep`` (numbers of kept judgements) as a sorted tuple of distinct integers ``>= 0``;
    ``ValueError`` for a non-sequence, an empty one or a negative entry."""
    if isinstance(keep, str) or not hasattr(keep, "__iter__"):
        raise ValueError(f"keep must be a sequence of integers, got {keep!r}")
    out = tuple(sorted({check_int(j, "keep", low=0) for j in keep}))
    if not out:
        raise ValueError("keep is empty: give at least one number of kept judgements")
    return out


def check_held_out(held_out):
    """``held_out``, a share in (0, 1) or a count ``>= 1``; ``ValueError`` otherwise."""
    if isinstance(held_out, bool) or not isinstance(held_out, int | float | np.number):
        raise ValueError(f"held_out must be a share in (0, 1) or a count, got {held_out!r}")
    if not (0 < held_out < 1 or (isinstance(held_out, int | np.integer) and held_out >= 1)):
        raise ValueError(f"held_out={held_out!r} must be a share in (0, 1) or a count >= 1")
    return held_out


def _held_count(held_out, judged: int) -> int:
    """The number of entities ``held_out`` (a share in (0, 1) or a count) means among
    ``judged`` ones."""
    held_out = check_held_out(held_out)
    if isinstance(held_out, int | np.integer):
        count = int(held_out)
    else:
        count = max(1, round(float(held_out) * judged))
    if not 1 <= count <= judged - 2:
        raise ValueError(
            f"held_out={held_out!r} holds out {count} of the {judged} judged entities: it must "
            f"hold out at least 1 and leave at least 2"
        )
    return count
