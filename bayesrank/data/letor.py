"""Reader for LETOR / SVMlight ranking files.

A LETOR line is::

    <label> qid:<q> <id>:<value> <id>:<value> ... [# comment, e.g. docid = GX008-86-4444840 inc = 1]

Feature ids are 1-based integers, dense (every id on every line, as in LETOR 3.0/4.0) or sparse
(missing ids are 0, as in SVMlight). Files may be gzipped (detected by content, not by name)
and may use LF or CRLF line endings. LightGBM-style files carry no ``qid:`` token; their groups come
from a separate ``.query`` file holding one group size per line.

The reader is host-side NumPy: it turns text into :class:`Query` objects, which the rest of
the library converts to JAX arrays. Bad input raises ``ValueError`` naming the file and the
1-based line.

Parsing strategy: a vectorised fast path (one C-level float parse of all ``id:value`` tokens)
handles well-formed files; any inconsistency sends the file through a line-by-line path whose
only job is to find and name the first offending line. Both paths apply the same rules.
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ._io import read_bytes
from .checks import check_int

__all__ = ["Query", "load_letor", "read_query_file", "read_scores"]

_DOCID = re.compile(r"docid\s*=\s*(\S+)")


@dataclass(frozen=True, eq=False)
class Query:
    """The judged documents of one query.

    Attributes:
        qid: the query id as written after ``qid:`` (or the group's 0-based index, as a string,
            for LightGBM-style files).
        X: ``(n, d)`` float64 feature matrix, rows in file order.
        grades: ``(n,)`` int64 relevance labels.
        doc_ids: ``(n,)`` document ids from ``#docid = ...`` comments (``""`` where absent).
        lines: ``(n,)`` 1-based line numbers in the source file (for messages).
        rows: ``(n,)`` 0-based index of each document among the file's data lines (blank and
            ``#`` comment lines are not data lines); a LETOR prediction file's line ``rows[i] + 1``
            holds the score of document ``i``.
    """

    qid: str
    X: np.ndarray
    grades: np.ndarray
    doc_ids: np.ndarray
    lines: np.ndarray
    rows: np.ndarray

    @property
    def n_docs(self) -> int:
        return int(self.X.shape[0])

    @property
    def n_features(self) -> int:
        return int(self.X.shape[1])

    def __repr__(self) -> str:
        return f"Query(qid={self.qid!r}, n_docs={self.n_docs}, n_features={self.n_features})"


def _read_text(path: Path) -> str:
    raw = read_bytes(path)
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return raw.decode("latin-1")


def _split_comment(line: str) -> tuple[str, str]:
    body, _, comment = line.partition("#")
    return body, comment


def _error(path: Path, lineno: int, msg: str) -> ValueError:
    return ValueError(f"{path}, line {lineno}: {msg}")


def _parse_label(path: Path, lineno: int, token: str) -> int:
    try:
        value = float(token)
    except ValueError:
        raise _error(path, lineno, f"label {token!r} is not a number") from None
    if not math.isfinite(value) or value != int(value):
        raise _error(path, lineno, f"label {token!r} is not an integer grade")
    return int(value)


def _check_line(path: Path, lineno: int, line: str, need_qid: bool, n_features: int | None) -> None:
    """Validate one line with the fast path's rules; raise the precise error or return."""
    body, _ = _split_comment(line)
    tokens = body.split()
    if not tokens:
        raise _error(path, lineno, "no label before the comment")
    _parse_label(path, lineno, tokens[0])
    rest = tokens[1:]
    if rest and rest[0].startswith("qid:"):
        if len(rest[0]) == 4:
            raise _error(path, lineno, "empty query id after 'qid:'")
        rest = rest[1:]
    elif need_qid:
        raise _error(path, lineno, "missing 'qid:<id>' after the label")
    seen: set[int] = set()
    for token in rest:
        fid_text, sep, value_text = token.partition(":")
        if not sep or ":" in value_text:
            raise _error(path, lineno, f"feature token {token!r} is not of the form <id>:<value>")
        try:
            fid = int(fid_text)
        except ValueError:
            raise _error(path, lineno, f"feature id {fid_text!r} is not an integer") from None
        if fid < 1 or (n_features is not None and fid > n_features):
            bound = f"1..{n_features}" if n_features is not None else ">= 1"
            raise _error(path, lineno, f"feature id {fid} out of range ({bound})")
        if fid in seen:
            raise _error(path, lineno, f"feature id {fid} appears twice")
        seen.add(fid)
        try:
            value = float(value_text)
        except ValueError:
            raise _error(
                path, lineno, f"feature {fid} has non-numeric value {value_text!r}"
            ) from None
        if not math.isfinite(value):
            raise _error(path, lineno, f"feature {fid} has non-finite value {value_text!r}")


def _first_bad_line(
    path: Path, lines: Sequence[str], linenos: Sequence[int], need_qid: bool, n_features: int | None
) -> ValueError:
    for lineno, line in zip(linenos, lines, strict=True):
        _check_line(path, lineno, line, need_qid, n_features)
    return ValueError(f"{path}: could not be parsed (no single offending line found)")


def read_query_file(path: str | os.PathLike) -> np.ndarray:
    """Read a LightGBM ``.query`` file: one positive group size a line. Returns ``(n_groups,)``."""
    path = Path(path)
    sizes = []
    for lineno, line in enumerate(_read_text(path).splitlines(), start=1):
        text = line.strip()
        if not text:
            continue
        try:
            size = int(text)
        except ValueError:
            raise _error(path, lineno, f"group size {text!r} is not an integer") from None
        if size <= 0:
            raise _error(path, lineno, f"group size {size} is not positive")
        sizes.append(size)
    if not sizes:
        raise ValueError(f"{path}: empty query file")
    return np.asarray(sizes, dtype=np.int64)


def _default_query_file(path: Path) -> Path | None:
    stem = path.name[:-3] if path.name.endswith(".gz") else path.name
    candidate = path.with_name(stem + ".query")
    return candidate if candidate.is_file() else None


def load_letor(
    path: str | os.PathLike,
    *,
    n_features: int | None = None,
    query_file: str | os.PathLike | None = None,
) -> list[Query]:
    """Read a LETOR / SVMlight ranking file into one :class:`Query` per query, in file order.

    Args:
        path: the data file, plain or gzipped.
        n_features: the number of features ``d``. Feature ids above it are an error. By default
            ``d`` is the largest id in the file; pass it to give the folds of a dataset one width.
        query_file: LightGBM-style group sizes. By default ``<path without .gz>.query`` is used
            when it exists and the lines carry no ``qid:``.

    Returns:
        Queries in order of first appearance; within a query, documents in file order. Rows of a
        query need not be contiguous (they are gathered, and ``Query.lines`` records where each
        came from).

    Raises:
        ValueError: naming the file and line, for a ``NULL`` or other non-numeric value, a missing
            ``qid:``, a feature id out of range or repeated on a line, a non-integer label, an
            empty file, or a ``.query`` file whose sizes do not add up to the number of lines.
    """
    n_features = check_int(n_features, "n_features", low=1, allow_none=True)
    path = Path(path)
    text = _read_text(path)
    lines: list[str] = []
    linenos: list[int] = []
    for lineno, line in enumerate(text.splitlines(), start=1):
        stripped = line.strip()
        if stripped and not stripped.startswith("#"):
            lines.append(stripped)
            linenos.append(lineno)
    if not lines:
        raise ValueError(f"{path}: empty file (no data lines)")

    first_tokens = lines[0].split(None, 2)
    has_qid = len(first_tokens) > 1 and first_tokens[1].startswith("qid:")
    if query_file is None and not has_qid:
        query_file = _default_query_file(path)
    need_qid = query_file is None

    labels: list[str] = []
    qids: list[str] = []
    features: list[str] = []
    comments: list[str] = []
    try:
        for line in lines:
            body, comment = _split_comment(line)
            parts = body.split(None, 2)
            labels.append(parts[0])
            if len(parts) > 1 and parts[1].startswith("qid:"):
                qids.append(parts[1][4:])
                features.append(parts[2] if len(parts) > 2 else "")
            else:
                if need_qid:
                    raise ValueError
                qids.append("")
                features.append(" ".join(parts[1:]))
            comments.append(comment)
        counts = np.fromiter((f.count(":") for f in features), dtype=np.int64, count=len(lines))
        flat = np.fromstring(" ".join(features).replace(":", " "), dtype=np.float64, sep=" ")
        label_values = np.asarray(labels, dtype=np.float64)
        if flat.size != 2 * counts.sum() or any(q == "" for q in qids if need_qid):
            raise ValueError
    except (ValueError, IndexError):
        raise _first_bad_line(path, lines, linenos, need_qid, n_features) from None

    ids, values = flat[0::2], flat[1::2]
    row_of = np.repeat(np.arange(len(lines)), counts)
    bad = ~np.isfinite(values) | (ids < 1) | (ids != np.floor(ids))
    if n_features is not None:
        bad |= ids > n_features
    bad_labels = ~np.isfinite(label_values) | (label_values != np.round(label_values))
    if bad.any() or bad_labels.any():
        first = min(
            [int(row_of[np.argmax(bad)])] * bool(bad.any())
            + [int(np.argmax(bad_labels))] * bool(bad_labels.any())
        )
        _check_line(path, linenos[first], lines[first], need_qid, n_features)
        raise _error(path, linenos[first], "invalid line")
    d = n_features if n_features is not None else int(ids.max()) if ids.size else 0
    cols = ids.astype(np.int64) - 1
    linear = row_of * max(d, 1) + cols
    # Ids ascending within each line (the usual case) rule out repeats without a sort.
    if linear.size and not (np.diff(linear) > 0).all():
        ordered = np.sort(linear)
        repeated = ordered[1:][np.diff(ordered) == 0]
        if repeated.size:
            first = int(repeated.min() // max(d, 1))
            raise _error(
                path, linenos[first], f"feature id {int(repeated.min() % d) + 1} appears twice"
            )
    X = np.zeros((len(lines), d), dtype=np.float64)
    X[row_of, cols] = values
    grades = label_values.astype(np.int64)
    doc_ids = np.array([(m.group(1) if (m := _DOCID.search(c)) else "") for c in comments])
    line_arr = np.asarray(linenos, dtype=np.int64)

    if query_file is not None:
        sizes = read_query_file(query_file)
        if sizes.sum() != len(lines):
            raise ValueError(
                f"{query_file}: group sizes add up to {int(sizes.sum())} lines, "
                f"but {path} has {len(lines)} data lines"
            )
        group = np.repeat(np.arange(sizes.size), sizes)
        keys = [str(g) for g in range(sizes.size)]
    else:
        keys, group = np.unique(np.asarray(qids), return_inverse=True)
        first_seen = np.full(len(keys), len(lines))
        np.minimum.at(first_seen, group, np.arange(len(lines)))
        rank = np.empty(len(keys), dtype=np.int64)
        rank[np.argsort(first_seen)] = np.arange(len(keys))
        group = rank[group]
        keys = [str(k) for k in np.asarray(keys)[np.argsort(first_seen)]]

    order = np.argsort(group, kind="stable")
    bounds = np.searchsorted(group[order], np.arange(len(keys) + 1))
    queries = []
    for g, qid in enumerate(keys):
        rows = order[bounds[g] : bounds[g + 1]]
        queries.append(
            Query(
                qid=qid,
                X=X[rows],
                grades=grades[rows],
                doc_ids=doc_ids[rows],
                lines=line_arr[rows],
                rows=rows.astype(np.int64),
            )
        )
    return queries


def read_scores(path: str | os.PathLike, n_expected: int | None = None) -> np.ndarray:
    """Read a prediction file: one score per line (LETOR's format). Returns ``(n,)`` float64.

    Blank lines are not allowed between scores (each line belongs to one document); a trailing
    newline is fine. ``n_expected`` checks the count against the data file's number of documents.
    """
    n_expected = check_int(n_expected, "n_expected", low=0, allow_none=True)
    path = Path(path)
    rows = _read_text(path).splitlines()
    while rows and not rows[-1].strip():
        rows.pop()
    if not rows:
        raise ValueError(f"{path}: empty score file")
    scores = np.empty(len(rows), dtype=np.float64)
    for lineno, row in enumerate(rows, start=1):
        token = row.strip().split()
        if len(token) != 1:
            raise _error(path, lineno, f"expected one score, got {row.strip()!r}")
        try:
            scores[lineno - 1] = float(token[0])
        except ValueError:
            raise _error(path, lineno, f"score {token[0]!r} is not a number") from None
        if not math.isfinite(scores[lineno - 1]):
            raise _error(path, lineno, f"score {token[0]!r} is not finite")
    if n_expected is not None and scores.size != n_expected:
        raise ValueError(
            f"{path}: {scores.size} scores for {n_expected} documents in the data file"
        )
    return scores
