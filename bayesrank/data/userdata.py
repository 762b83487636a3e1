"""Data from the user's world: ratings and comparisons (arrays or CSV files) as preference pairs,
and LETOR queries as the ``(X, y, qid)`` arrays of scikit-learn-style rankers. The parsing
behind ``PreferenceProblem.from_ratings`` and ``from_comparisons``.

**Ratings**: ``(n,)`` numbers, one per entity, higher preferred; every two rated entities with
different ratings give a pair, winner first (the convention of
``pairs_from_grades``, which this uses). ``NaN`` marks an unrated
entity: it takes part in no pair but keeps its row (its attributes and relations still inform
the others). Equal ratings give no pair (``ties="skip"``) or a pair each way (``ties="both"``:
two contradicting observations, whose likelihood ``Phi(f_i - f_j) Phi(f_j - f_i)`` is largest at
``f_i = f_j``).

**Comparisons**: ``(m, 2)`` rows ``winner, loser``. In a file, a line may go on with ``tie``
(the two were judged equal: the tie model, ``bayesrank.likelihoods``) and a weight (how many
times the judgement was made): ``a,b``, ``a,b,3``, ``a,b,tie``, ``a,b,tie,2``
(``read_judgements``).

**CSV files**: plain comma-separated text without quoting; blank lines and lines starting with
``#`` are skipped (the line reader of ``study``'s ``comparisons.csv``).

* ratings: lines ``entity,rating``; a rating is a number, or ``nan`` or an empty field for
  unrated; an entity listed twice is an error; an entity not listed is unrated.
* comparisons: lines ``winner,loser``, optionally ``,tie`` and then ``,weight`` (a number > 0).

*Entities* in a file are 0-based row indices (``0..n-1``, ``n`` from ``X``, the relations, or
else the largest index + 1) unless ``entities=[id_0, id_1, ...]`` is given: then the fields are
ids, compared as text (``str(id)``), and ``entities[i]`` is row ``i`` of ``X``, the relations and
the problem. ``entity_ids`` lists a file's ids in order of first appearance.

*A header line* (optional) is the first line; ``header=None`` recognises it as a line none of
whose fields is data: no entity (not an integer, or not in ``entities``), no rating (not a
number). ``header=True`` / ``False`` says so instead (``entity_ids``, without entities to
judge by, needs it for comparisons).

Errors are ``ValueError``\\ s naming the file and 1-based line (``ratings.csv, line 4: unknown
entity 'carol' (not in entities)``), or the argument and index of an array.

**LETOR queries**: ``queries_to_arrays`` stacks them for ``RankSVM().fit(X, y, qid)``.

Length: under 500 lines because the CSV readers share one line grammar and one
entity-naming rule, written once here with their messages.
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterable, Sequence
from typing import NamedTuple

import numpy as np

from .checks import check_distinct, check_grades, check_pair_array, check_pairs, options
from .files import as_path, csv_rows
from .letor import Query
from .pairs import pairs_from_grades

__all__ = [
    "TIES",
    "Judgements",
    "comparisons_pairs",
    "entity_ids",
    "queries_to_arrays",
    "ratings_pairs",
    "read_comparisons",
    "read_judgements",
    "read_ratings",
]

TIES = ("skip", "both", "tie")  # ties=: equal ratings give no pair, a pair each way, or a tie


class _Bad(Exception):
    """A bad field or line (the caller adds the file and line)."""


def _is_path(source) -> bool:
    return isinstance(source, str | os.PathLike)  # a path, not a sequence of ratings or ids


class _Entities:
    """Turns a file's entity fields (or an array's entries) into rows: indices checked against
    ``n``, or ids looked up in ``entities``."""

    def __init__(self, entities, n: int | None):
        self.n, self.ids, self.values = n, None, None
        if entities is not None:
            if _is_path(entities) or not isinstance(entities, Sequence | np.ndarray):
                raise ValueError(f"entities must be a sequence of ids, got {type(entities)}")
            entities = list(entities)
            self.values = check_distinct(entities, "entities")
            self.ids = check_distinct([str(e).strip() for e in entities], "entities (as text)")
            self.n = len(entities)

    def field(self, text: str) -> int:
        """The row of a file's entity field, or ``_Bad`` saying why not."""
        if self.ids is not None:
            if text not in self.ids:
                raise _Bad(f"unknown entity {text!r} (not in entities)")
            return self.ids[text]
        try:
            i = int(text)
        except ValueError:
            raise _Bad(
                f"entity {text!r} is not a 0-based row index (name entities by id with "
                "entities=[...])"
            ) from None
        if i < 0 or (self.n is not None and i >= self.n):
            top = "" if self.n is None else f"..{self.n - 1}"
            raise _Bad(f"entity {i} outside 0{top}")
        return i

    def value(self, value, where: str) -> int:
        """The row of the id ``value`` of an array entry (``where``, e.g. ``source[3, 1]``)."""
        try:
            return self.values[value]
        except (KeyError, TypeError):
            raise ValueError(f"{where} = {value!r} is not in entities") from None


def _size(X, relations: Sequence, entities) -> int | None:
    """The number of entities that ``entities``, ``X`` or the first relation implies, or None
    (``PreferenceProblem.create`` checks that they agree)."""
    if not _is_path(entities) and isinstance(entities, Sequence | np.ndarray):
        return len(entities)
    first = [] if relations is None or isinstance(relations, np.ndarray) else list(relations)[:1]
    for source in (X, *first):  # (create() rejects an array of relations, naming it)
        if source is not None and len(shape := np.shape(source)) >= 1:
            return int(shape[0])
    return None


def _rating(text: str) -> float | None:
    """A rating field as a float (an empty field is NaN), or None for what is no number."""
    if text == "":
        return math.nan
    try:
        return float(text)
    except ValueError:
        return None


def _no_data(fields: list[str], resolve: _Entities) -> bool:
    """Whether a ratings line holds no data (a header): no entity and no rating."""
    return len(fields) == 2 and _rating(fields[1]) is None and not _is_entity(fields[0], resolve)


def _is_entity(text: str, resolve: _Entities) -> bool:
    try:
        resolve.field(text)
    except _Bad:
        return False
    return True


def read_ratings(path, entities=None, n: int | None = None, *, header=None) -> np.ndarray:
    """A ratings CSV file (lines ``entity,rating``; see the module docstring).

    Args:
        path: the file.
        entities: ids naming the rows (row ``i`` is ``entities[i]``), or None: the entity field
            is a 0-based row index.
        n: the number of entities (default ``len(entities)``, else the largest index + 1).
        header: whether the first line is a header; None: when neither of its two fields is
            data (the entity is none, the rating no number).

    Returns:
        ``(n,)`` float64 ratings, ``NaN`` for the entities not rated.

    Raises:
        ValueError: ``<path>, line <k>: ...`` for a line without two fields, a rating that is
            not a number or infinite, an unknown entity or index, an entity listed twice.
    """
    path = as_path(path, "ratings")
    resolve = _Entities(entities, n)
    rows, values, seen = [], [], {}
    for k, (lineno, fields) in enumerate(csv_rows(path)):
        if k == 0 and (header or (header is None and _no_data(fields, resolve))):
            continue
        try:
            if len(fields) != 2:
                raise _Bad(f"expected 'entity,rating', got {len(fields)} fields")
            value = _rating(fields[1])
            if value is None:
                raise _Bad(f"rating {fields[1]!r} is not a number")
            if math.isinf(value):
                raise _Bad(f"rating {fields[1]!r} is not finite (nan or empty: unrated)")
            row = resolve.field(fields[0])
            if row in seen:
                raise _Bad(f"entity {fields[0]!r} listed again (first on line {seen[row]})")
        except _Bad as bad:
            raise ValueError(f"{path}, line {lineno}: {bad}") from None
        seen[row] = lineno
        rows.append(row)
        values.append(value)
    if not rows:
        raise ValueError(f"{path}: no ratings")
    ratings = np.full(resolve.n if resolve.n is not None else max(rows) + 1, np.nan)
    ratings[rows] = values
    return ratings


class Judgements(NamedTuple):
    """A comparisons file's lines: ``pairs: (m, 2)`` (winner first), ``ties: (m_t, 2)``, and
    their weights (``(m,)``, ``(m_t,)``; ``None`` where every line of the kind has none)."""

    pairs: np.ndarray
    ties: np.ndarray
    weights: np.ndarray | None
    tie_weights: np.ndarray | None


def _outcome(tail: list[str]) -> tuple[bool, float | None]:
    """``(tie, weight)`` of the fields after ``winner,loser``: none, ``W``, ``tie`` or
    ``tie,W``."""
    tie = bool(tail) and tail[0].lower() == "tie"
    rest = tail[1:] if tie else tail
    if len(rest) > 1:
        raise _Bad(
            f"expected 'a,b', 'a,b,weight', 'a,b,tie' or 'a,b,tie,weight', got {2 + len(tail)} "
            "fields"
        )
    if not rest:
        return tie, None
    weight = _rating(rest[0])
    if weight is None or not (math.isfinite(weight) and weight > 0):
        raise _Bad(f"weight {rest[0]!r} is not a number > 0 (or the outcome is not 'tie')")
    return tie, weight


def read_judgements(path, entities=None, n: int | None = None, *, header=None) -> Judgements:
    """A comparisons CSV file with ties and weights (module docstring): lines ``winner,loser``,
    ``a,b,tie``, each optionally ``,weight``.

    Args, header: as ``read_comparisons``.

    Raises:
        ValueError: ``<path>, line <k>: ...`` for a malformed line, an unknown entity or an
            index out of range, an entity compared with itself, a weight that is not > 0.
    """
    path = as_path(path, "comparisons")
    resolve = _Entities(entities, n)
    kept: dict[bool, list] = {False: [], True: []}
    weights: dict[bool, list] = {False: [], True: []}
    for k, (lineno, fields) in enumerate(csv_rows(path)):
        if k == 0 and header:
            continue
        try:
            if len(fields) < 2:
                raise _Bad(f"expected 'winner,loser', got {len(fields)} fields")
            if k == 0 and header is None and not any(_is_entity(f, resolve) for f in fields[:2]):
                continue  # neither entity field is an entity: a header
            rows = [resolve.field(text) for text in fields[:2]]
            if rows[0] == rows[1]:
                raise _Bad(f"entity {fields[0]!r} compared with itself")
            tie, weight = _outcome(fields[2:])
        except _Bad as bad:
            raise ValueError(f"{path}, line {lineno}: {bad}") from None
        kept[tie].append(rows)
        weights[tie].append(weight)

    def weight_array(values):
        return None if all(w is None for w in values) else np.array([w or 1.0 for w in values])

    return Judgements(
        np.array(kept[False], np.int64).reshape(-1, 2),
        np.array(kept[True], np.int64).reshape(-1, 2),
        weight_array(weights[False]),
        weight_array(weights[True]),
    )


def read_comparisons(path, entities=None, n: int | None = None, *, header=None) -> np.ndarray:
    """A comparisons CSV file of pairs only (lines ``winner,loser``; see the module docstring;
    a file with ties or weights: ``read_judgements``, or ``PreferenceProblem.from_comparisons``).

    Args:
        path: the file.
        entities: ids naming the rows, or None: the fields are 0-based row indices.
        n: the number of entities, the bound on indices (None: no upper bound).
        header: whether the first line is a header; None: when neither field is an entity.

    Returns:
        ``(m, 2)`` int64 pairs, winner first, in file order (``m = 0`` for a file without any).

    Raises:
        ValueError: ``<path>, line <k>: ...`` for a line without two fields, an unknown entity
            or an index out of range, an entity compared with itself.
    """
    read = read_judgements(path, entities, n, header=header)
    if len(read.ties) or read.weights is not None:
        raise ValueError(
            f"{path}: has ties or weights, which pairs alone cannot hold: read it with "
            "read_judgements, or PreferenceProblem.from_comparisons"
        )
    return read.pairs


def entity_ids(path, kind: str = "comparisons", *, header: bool | None = None) -> list[str]:
    """The distinct entity ids of a CSV file in order of first appearance: with
    ``entities=entity_ids(path, ...)`` the problem's row ``i`` is the ``i``-th id named.

    Args:
        path: a ratings or comparisons file.
        kind: ``"comparisons"`` (both fields are entities) or ``"ratings"`` (the first).
        header: whether the first line is a header. None: for ratings, when its rating is not
            a number; for comparisons a ``ValueError`` (no entities to judge by: say it).
    """
    options.check_choice(kind, "kind", ("comparisons", "ratings"))
    if header is None and kind == "comparisons":
        raise ValueError(
            "entity_ids of a comparisons file needs header=True or header=False: without "
            "entities a header line ('winner,loser') looks like a comparison"
        )
    rows = csv_rows(as_path(path, "path"))
    if rows and (header or (header is None and _rating(rows[0][1][-1]) is None)):
        rows = rows[1:]
    seen: dict[str, None] = {}
    for _, fields in rows:
        for text in fields[:1] if kind == "ratings" else fields[:2]:
            seen.setdefault(text, None)
    return list(seen)


def ratings_pairs(
    ratings, X=None, relations: Sequence = (), *, ties: str = "skip", entities=None, header=None
) -> tuple[Judgements, int]:
    """The pairs implied by ratings given as an array or a CSV file, and the number of entities.

    Args:
        ratings: ``(n,)`` real numbers (``NaN`` = unrated), or a path to a ratings CSV file.
        X, relations: the problem's attributes and adjacencies; only their number of rows is
            used (a file's index range; the length ``ratings`` must have).
        ties: ``"skip"`` (equal ratings, no pair), ``"both"`` (a pair each way) or ``"tie"``
            (a tie ``(i, j)``, ``i < j``: the tie model).
        entities, header: for a file (see ``read_ratings``).

    Returns:
        ``(Judgements, n)``: pairs (and ties) in lexicographic order, no weights.
    """
    options.check_choice(ties, "ties", TIES)
    size = _size(X, relations, entities)
    if _is_path(ratings):
        values = read_ratings(ratings, entities, size, header=header)
    else:
        values = _rating_array(ratings)
        if size is not None and len(values) != size:
            raise ValueError(
                f"ratings has {len(values)} entries for {size} entities (as X, relations or "
                "entities say): one rating per entity, NaN for unrated"
            )
    rated = np.flatnonzero(~np.isnan(values))
    sub = values[rated]
    equal = np.zeros((0, 2), np.int64)
    if ties == "both":  # row-major argwhere: lexicographic, as pairs_from_grades
        local = np.argwhere((sub[:, None] >= sub[None, :]) & ~np.eye(len(sub), dtype=bool))
    else:
        local = pairs_from_grades(sub)
        if ties == "tie":
            equal = rated[np.argwhere(np.triu(sub[:, None] == sub[None, :], 1))]
    pairs = rated[local].reshape(-1, 2).astype(np.int64)
    return Judgements(pairs, equal.reshape(-1, 2).astype(np.int64), None, None), len(values)


def _rating_array(ratings) -> np.ndarray:
    """``(n,)`` float64 ratings (NaN kept: unrated); ``ValueError`` naming an entry that is
    infinite or not a real number (a bool, a string, a complex number)."""
    # real numbers, NaN for unrated: bool, str and complex refused, naming the index
    arr = check_grades(ratings, name="ratings", missing=True, bools=False)
    if arr.size == 0:
        raise ValueError(f"ratings must have shape (n,) with n >= 1, got {arr.shape}")
    return arr


def comparisons_pairs(
    source, X=None, relations: Sequence = (), *, entities=None, header=None
) -> tuple[Judgements, int]:
    """The pairs of comparisons given as an array or a CSV file, and the number of entities
    (from ``entities``, ``X`` or the relations, else the largest index + 1).

    Args:
        source: ``(m, 2)`` rows ``(winner, loser)``: indices, or ids when ``entities`` is
            given; or a path to a comparisons CSV file.
        X, relations: as in ``ratings_pairs``.
        entities, header: see ``read_comparisons`` (for an array, ids are looked up as
            values, not as text).

    Returns:
        ``(Judgements, n)``: a file's pairs, ties and weights (``read_judgements``); an
        array's rows are pairs.

    Raises:
        ValueError: naming the file and line, or the entry ``source[r, c]``, of an unknown
            entity, an index out of range, a self-comparison; nothing that tells the number of
            entities (no comparison and none of ``X``, relations, ``entities``).
    """
    size = _size(X, relations, entities)
    if _is_path(source):
        read = read_judgements(source, entities, size, header=header)
        if size is None and len(read.pairs) + len(read.ties) == 0:
            raise ValueError(
                "no comparisons, and no X, relations or entities to tell the number of entities"
            )
        if size is None:
            size = int(max(np.max(read.pairs, initial=0), np.max(read.ties, initial=0))) + 1
        return read, size
    if entities is None:
        pairs = check_pair_array(source, "source")
        if size is not None:  # name the argument; create() checks again, as "pairs"
            check_pairs(pairs, size, "source")
    else:
        resolve = _Entities(entities, size)
        arr = np.asarray(source, dtype=object)
        if arr.ndim != 2 or arr.shape[1] != 2:
            raise ValueError(f"source must have shape (m, 2), got {arr.shape}")
        rows = [
            [resolve.value(value, f"source[{r}, {c}]") for c, value in enumerate(pair)]
            for r, pair in enumerate(arr.tolist())
        ]
        pairs = np.array(rows, np.int64).reshape(-1, 2)
    if size is None:
        if len(pairs) == 0:
            raise ValueError(
                "no comparisons, and no X, relations or entities to tell the number of entities"
            )
        size = int(pairs.max()) + 1
    return Judgements(pairs, np.zeros((0, 2), np.int64), None, None), size


def queries_to_arrays(
    queries: Iterable[Query], *, by_position: bool = False
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """LETOR queries stacked for a ranker's ``fit(X, y, qid)``, in the queries' order:
    ``RankSVM().fit(*queries_to_arrays(load_letor(path)))`` fits one model on all of them, with
    pairs only within each query.

    Args:
        queries: ``Query`` objects (from
            ``load_letor``), with distinct ``qid``\\ s and one number
            of features.
        by_position: identify each row's query by its position in ``queries`` (int64), not by
            its ``qid``: queries from several files may reuse a qid.

    Returns:
        ``X: (N, d)`` float64, ``y: (N,)`` int64 grades, ``qid: (N,)`` NumPy str, each row's
        ``Query.qid`` (``by_position``: int64 positions); ``N`` is the total number of
        documents, rows in query order.

    Raises:
        ValueError: naming the query (position and qid): no query at all, an item that is no
            ``Query``, a number of features other than the first query's, a qid seen before
            (stacked, a ranker would take the two for one query).
    """
    queries = list(queries)
    if not queries:
        raise ValueError("queries is empty: no query to stack")
    seen: dict[str, int] = {}
    for k, q in enumerate(queries):
        if not isinstance(q, Query):
            raise ValueError(f"queries[{k}] is a {type(q).__name__}, not a Query")
        if q.n_features != queries[0].n_features:
            raise ValueError(
                f"queries[{k}] (qid {q.qid!r}) has {q.n_features} features, queries[0] (qid "
                f"{queries[0].qid!r}) has {queries[0].n_features}: read the files with one "
                "n_features (load_letor(path, n_features=...))"
            )
        if q.qid in seen and not by_position:
            raise ValueError(
                f"queries[{k}] has qid {q.qid!r}, as queries[{seen[q.qid]}]: stacked, a ranker "
                "would take the two for one query"
            )
        seen[q.qid] = k
    X = np.concatenate([q.X for q in queries]).astype(np.float64, copy=False)
    y = np.concatenate([q.grades for q in queries]).astype(np.int64, copy=False)
    ids = np.arange(len(queries)) if by_position else np.array([q.qid for q in queries], dtype=str)
    return X, y, np.repeat(ids, [q.n_docs for q in queries])
