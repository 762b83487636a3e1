r"""Reader for LETOR / SVMlight ranking files.

A LETOR line is::

    <label> qid:<q> <id>:<value> <id>:<value> ... [# comment, e.g. docid = GX008-86-4444840 inc = 1]

Feature ids are 1-based, dense (every id on every line, as in LETOR 3.0/4.0) or sparse (missing
ids are 0, as in SVMlight). Files may be gzipped (detected by content, not by name). LightGBM-style
files carry no ``qid:`` token; their groups come from a separate ``.query`` file holding one group
size per line.

The grammar, exactly (the reader accepts this and nothing else):

* Text is UTF-8 (a leading byte-order mark is skipped), or Latin-1 where it is not valid UTF-8.
* Lines end at ``\n``; one ``\r`` before it is dropped (CRLF files). No other character ends a
  line: form feed, ``\v``, U+2028, NEL, ... inside a comment are comment text, and outside one
  (like any other non-printable character) an error. A lone ``\r`` (old Mac line endings) is an
  error.
* A line is split at its first ``#``: what follows is a comment. A line holding only spaces and
  tabs, or whose first non-blank character is ``#``, is not a data line.
* Tokens are separated by runs of spaces and tabs, and nothing else.
* The first token is the label: a decimal number (ASCII digits, optional sign, point and
  exponent: ``2``, ``-1``, ``+1``, ``2.0``, ``1e0``) whose exact value is a whole number of
  magnitude at most ``2**53`` (``1e20`` and ``2.5`` are errors, not an overflowed or rounded grade).
* An optional second token ``qid:<q>``: ``<q>`` is one or more printable characters other than
  space (compared as text). It is required unless the groups come from a ``.query`` file.
* Every further token is ``<id>:<value>`` with exactly one ``:`` and no space around it.
  ``<id>`` is ASCII digits only (``1.0``, ``1e0``, ``+3``, ``1_000``, ``inf`` and non-ASCII
  digits are errors) with value in ``1..n_features`` when ``n_features`` is given, else in
  ``1..MAX_FEATURE_ID``. ``<value>`` is a finite decimal number as for the label (no ``_``, no
  ``inf``/``nan``, no hexadecimal, ASCII only), parsed to the nearest float64 (as ``float()``
  does). An id may appear once per line. A line may have no features (all zero).
* The ``.query`` file of LightGBM: one positive group size per line, ASCII digits; blank lines
  are skipped. A prediction file (``bayesrank.data.scores.read_scores``): one number per line.

The reader is host-side NumPy: it turns text into ``Query`` objects, which the rest of
the library converts to JAX arrays. Bad input raises ``ValueError`` naming the file, the 1-based
line and the token at fault; a path that does not exist raises ``FileNotFoundError``.

Parsing strategy: a vectorised fast path checks the feature tokens of the whole file with a small
automaton over the bytes (one pass of NumPy operations) and parses them with one C-level float
parse; it may decline a valid but unusual file (``5.`` as a value, a tab after the label, ...).
Then, or on any error, the line-by-line path parses the file with the same grammar spelled as
regular expressions, and names the first offending line. The two paths return identical arrays
on every file the fast path accepts (tested by property tests).

Length: over 400 lines because the one grammar has two readers that must agree, the vectorised
fast path for files in the common form and the line-by-line path that parses the rest and names
the first bad line; splitting them would put the grammar's two halves in different modules.
"""

from __future__ import annotations

import math
import os
import re
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path

import numpy as np

from .._moved import moved
from ._letor_automaton import _parse_features_fast
from .checks import check_int
from .files import as_path, read_bytes

__all__ = ["MAX_FEATURE_ID", "Query", "load_letor", "read_query_file"]

MAX_FEATURE_ID = 1_000_000
"""The largest feature id accepted without an explicit ``n_features`` (a guard against a typo such
as ``10000000000000:1`` asking for a dense matrix of that width)."""

_MAX_LABEL = 2**53  # float64 holds every whole number up to here exactly
_DOCID = re.compile(r"docid\s*=\s*(\S+)")
_NUMBER = re.compile(r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")
_SEPARATORS = re.compile(r"[ \t]+")
_NON_FINITE = {"inf", "infinity", "nan"}


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


class _Bad(Exception):
    """A grammar violation in one line; the caller adds the file and line number."""


def _error(path: Path, lineno: int, msg: str) -> ValueError:
    return ValueError(f"{path}, line {lineno}: {msg}")


def _show(token: str) -> str:
    """``repr`` of a token, shortened: a message must stay readable for a 10 MB garbage line."""
    return repr(token) if len(token) <= 40 else repr(token[:37]) + "..."


def _read_text(path: Path) -> str:
    raw = read_bytes(path)
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError:
        return raw.decode("latin-1")


def _split_lines(text: str, path: Path) -> list[str]:
    """The lines of ``text``, split at line feeds only, less one trailing carriage return; a
    ``\r`` anywhere else, a comment included, is an error naming ``path`` and the line (old Mac
    line endings: read as one line, several documents would become one)."""
    lines = text.split("\n")
    if "\r" in text:
        lines = [line[:-1] if line.endswith("\r") else line for line in lines]
        for lineno, line in enumerate(lines, start=1):
            if "\r" in line:
                raise _error(
                    path,
                    lineno,
                    "unexpected carriage return '\\r' (only \\n or \\r\\n end a line; convert old "
                    "Mac line endings)",
                )
    return lines


def _tokens(body: str) -> list[str]:
    """The tokens of a line's part before ``#`` (separated by spaces and tabs only)."""
    if not body.replace("\t", " ").isprintable():
        for ch in body:
            if ch != "\t" and not ch.isprintable():
                what = "carriage return" if ch == "\r" else "character"
                raise _Bad(f"unexpected {what} {ch!r} (only spaces and tabs separate tokens)")
    stripped = body.strip(" \t")
    return _SEPARATORS.split(stripped) if stripped else []


def _number(text: str) -> float | str:
    """The float64 value of a finite decimal literal, else ``"non-finite"`` or ``"non-numeric"``."""
    if _NUMBER.fullmatch(text):
        value = float(text)
        return value if math.isfinite(value) else "non-finite"
    return "non-finite" if text.lstrip("+-").lower() in _NON_FINITE else "non-numeric"


def _label(token: str) -> int:
    if not _NUMBER.fullmatch(token):
        if token.lstrip("+-").lower() in _NON_FINITE:
            raise _Bad(f"label {_show(token)} is not an integer grade")
        raise _Bad(f"label {_show(token)} is not a number")
    exact = Decimal(token)  # not float: "9007199254740993" must not round to an integer
    if exact.copy_abs() > _MAX_LABEL:
        raise _Bad(f"label {_show(token)} is out of range (magnitude above 2**53)")
    if exact != exact.to_integral_value():
        raise _Bad(f"label {_show(token)} is not an integer grade")
    return int(float(token))  # exact below 2**53; int(Decimal("0e999999999")) would take ages


def _qid(token: str) -> str:
    """The query id of a ``qid:<q>`` token."""
    qid = token[4:]
    if not qid:
        raise _Bad("empty query id after 'qid:'")
    if " " in qid or not qid.isprintable():
        raise _Bad(f"query id {_show(qid)} holds a non-printable character")
    return qid


def _digits(text: str) -> bool:
    """Whether ``text`` is one or more ASCII digits (``str.isdigit`` alone admits other scripts)."""
    return text.isascii() and text.isdigit()


def _show_int(text: str) -> str:
    """An integer's text for a message, shortened."""
    return text if len(text) <= 40 else text[:37] + "..."


def _feature_id(text: str, cap: int, bound: str) -> int:
    if not _digits(text):
        if text[:1] == "-" and _digits(text[1:]):
            raise _Bad(f"feature id {_show_int(text)} out of range ({bound})")
        raise _Bad(f"feature id {_show(text)} is not an integer (ASCII digits 0-9 only)")
    digits = text.lstrip("0")
    # Compare lengths first: int() of a 5000-digit string is itself an error in Python.
    if not digits or len(digits) > len(str(cap)) or int(digits) > cap:
        raise _Bad(f"feature id {_show_int(digits or '0')} out of range ({bound})")
    return int(digits)


def _parse_line(
    line: str, need_qid: bool, cap: int, bound: str
) -> tuple[int, str, list[int], list[float], str]:
    """One data line: ``(label, qid or "", ids, values, comment)``, or ``_Bad``."""
    body, _, comment = line.partition("#")
    tokens = _tokens(body)
    if not tokens:
        raise _Bad("no label before the comment")
    label = _label(tokens[0])
    rest = tokens[1:]
    qid = ""
    if rest and rest[0].startswith("qid:"):
        qid = _qid(rest[0])
        rest = rest[1:]
    elif need_qid:
        raise _Bad("missing 'qid:<id>' after the label")
    ids: list[int] = []
    values: list[float] = []
    seen: set[int] = set()
    for token in rest:
        id_text, sep, value_text = token.partition(":")
        if not sep or ":" in value_text:
            raise _Bad(f"feature token {_show(token)} is not of the form <id>:<value>")
        fid = _feature_id(id_text, cap, bound)
        if fid in seen:
            raise _Bad(f"feature id {fid} appears twice")
        seen.add(fid)
        value = _number(value_text)
        if isinstance(value, str):
            raise _Bad(f"feature {fid} has {value} value {_show(value_text)}")
        ids.append(fid)
        values.append(value)
    return label, qid, ids, values, comment


@dataclass(frozen=True)
class _Parsed:
    """A file's data lines, parsed: ``n`` lines, ``nnz`` features written in them.

    grades ``(n,)`` int64; qids: ``n`` strings (``""`` where absent); comments: ``n`` strings;
    rows ``(nnz,)`` int64 line index of each feature; ids ``(nnz,)`` int64 1-based; values
    ``(nnz,)`` float64.
    """

    grades: np.ndarray
    qids: list[str]
    comments: list[str]
    rows: np.ndarray
    ids: np.ndarray
    values: np.ndarray


def _parse_slow(
    path: Path, lines: list[str], linenos: list[int], need_qid: bool, cap: int, bound: str
) -> _Parsed:
    """Line by line; raises ``ValueError`` naming the first offending line."""
    grades, qids, comments, counts = [], [], [], []
    ids: list[int] = []
    values: list[float] = []
    for lineno, line in zip(linenos, lines, strict=True):
        try:
            label, qid, line_ids, line_values, comment = _parse_line(line, need_qid, cap, bound)
        except _Bad as bad:
            raise _error(path, lineno, str(bad)) from None
        grades.append(label)
        qids.append(qid)
        comments.append(comment)
        counts.append(len(line_ids))
        ids += line_ids
        values += line_values
    return _Parsed(
        grades=np.asarray(grades, dtype=np.int64),
        qids=qids,
        comments=comments,
        rows=np.repeat(np.arange(len(lines), dtype=np.int64), counts),
        ids=np.asarray(ids, dtype=np.int64),
        values=np.asarray(values, dtype=np.float64),
    )


def _parse_fast(lines: list[str], need_qid: bool, cap: int) -> _Parsed | None:
    """Vectorised parse of well-formed files; None to leave the file to ``_parse_slow``."""
    labels, qid_tokens, feats, comments = [], [], [], []
    for line in lines:
        body, _, comment = line.partition("#")
        label, _, rest = body.partition(" ")
        if rest.startswith("qid:"):
            qid_token, _, rest = rest.partition(" ")
        else:
            qid_token = ""
        labels.append(label)
        qid_tokens.append(qid_token)
        feats.append(rest)
        comments.append(comment)
    try:
        grade_of = {token: _label(token) for token in set(labels)}
        qid_of = {token: _qid(token) if token else "" for token in set(qid_tokens)}
    except _Bad:
        return None
    if need_qid and "" in qid_of:
        return None
    parsed = _parse_features_fast(feats, cap)
    if parsed is None:
        return None
    rows, ids, values = parsed
    if ids.size:
        if len(lines) * (int(ids.max()) + 1) >= 2**62:  # the keys below would overflow
            return None
        # Ids ascending within each line (the usual case) rule out repeats without a sort.
        linear = rows * (int(ids.max()) + 1) + ids
        if not (np.diff(linear) > 0).all() and np.unique(linear).size != linear.size:
            return None
    return _Parsed(
        grades=np.fromiter(map(grade_of.__getitem__, labels), dtype=np.int64, count=len(lines)),
        qids=[qid_of[token] for token in qid_tokens],
        comments=comments,
        rows=rows,
        ids=ids,
        values=values,
    )


def read_query_file(path: str | os.PathLike) -> np.ndarray:
    """Read a LightGBM ``.query`` file: one positive group size a line. Returns ``(n_groups,)``."""
    path = as_path(path)
    sizes = []
    for lineno, line in enumerate(_split_lines(_read_text(path), path), start=1):
        text = line.strip(" \t")
        if not text:
            continue
        if (text[:1] == "-" and _digits(text[1:])) or not text.lstrip("0"):
            raise _error(path, lineno, f"group size {_show_int(text)} is not positive")
        if not _digits(text):
            raise _error(path, lineno, f"group size {_show(text)} is not an integer")
        if len(text.lstrip("0")) > 15:
            raise _error(path, lineno, f"group size {_show_int(text)} is too large")
        sizes.append(int(text))
    if not sizes:
        raise ValueError(f"{path}: empty query file")
    return np.asarray(sizes, dtype=np.int64)


def _default_query_file(path: Path) -> Path | None:
    stem = path.name[:-3] if path.name.endswith(".gz") else path.name
    candidate = path.with_name(stem + ".query")
    return candidate if candidate.is_file() else None


def _data_lines(text: str, path: Path) -> tuple[list[str], list[int]]:
    """The data lines (stripped of spaces and tabs) and their 1-based line numbers."""
    lines: list[str] = []
    linenos: list[int] = []
    for lineno, line in enumerate(_split_lines(text, path), start=1):
        stripped = line.strip(" \t")
        if stripped and stripped[0] != "#":
            lines.append(stripped)
            linenos.append(lineno)
    return lines, linenos


def load_letor(
    path: str | os.PathLike,
    *,
    n_features: int | None = None,
    query_file: str | os.PathLike | None = None,
) -> list[Query]:
    """Read a LETOR / SVMlight ranking file into one ``Query`` per query, in file order.

    Args:
        path: the data file, plain or gzipped (see the module docstring for the grammar).
        n_features: the number of features ``d``. Feature ids above it are an error. By default
            ``d`` is the largest id in the file (at most ``MAX_FEATURE_ID``, 0 when no line
            has a feature); pass it to give the folds of a dataset one width.
        query_file: LightGBM-style group sizes. By default ``<path without .gz>.query`` is used
            when it exists and the lines carry no ``qid:``.

    Returns:
        Queries in order of first appearance; within a query, documents in file order, each
        ``Query.X`` of shape ``(n_docs, d)``. Rows of a query need not be contiguous (they are
        gathered, and ``Query.lines`` records where each came from).

    Raises:
        FileNotFoundError: ``path`` (or ``query_file``) does not exist.
        ValueError: naming the file, the line and the token, for any departure from the grammar: a
            ``NULL`` or other non-numeric value, a missing ``qid:``, a feature id out of range or
            repeated on a line, a label that is not a whole number, an empty file, or a ``.query``
            file whose sizes do not add up to the number of lines.
    """
    n_features = check_int(n_features, "n_features", low=1, allow_none=True)
    path = as_path(path)
    lines, linenos = _data_lines(_read_text(path), path)
    if not lines:
        raise ValueError(f"{path}: empty file (no data lines)")

    try:
        first = _tokens(lines[0].partition("#")[0])
    except _Bad:
        first = []
    has_qid = len(first) > 1 and first[1].startswith("qid:")
    if query_file is None and not has_qid:
        query_file = _default_query_file(path)
    need_qid = query_file is None

    cap = n_features if n_features is not None else MAX_FEATURE_ID
    bound = f"1..{cap}" + ("" if n_features else "; larger ids than MAX_FEATURE_ID need n_features")
    parsed = _parse_fast(lines, need_qid, cap)
    if parsed is None:
        parsed = _parse_slow(path, lines, linenos, need_qid, cap, bound)
    n = len(lines)
    d = n_features if n_features is not None else int(parsed.ids.max()) if parsed.ids.size else 0
    try:
        X = np.zeros((n, d), dtype=np.float64)
    except MemoryError:
        what = f"the {n} x {d} feature matrix does not fit in memory"
        if n_features is not None:
            raise ValueError(f"{path}: {what} (n_features={d})") from None
        widest = int(parsed.rows[np.argmax(parsed.ids)])
        raise _error(path, linenos[widest], f"{what} (feature id {d})") from None
    X[parsed.rows, parsed.ids - 1] = parsed.values
    doc_ids = np.array(
        [(m.group(1) if (m := _DOCID.search(c)) else "") for c in parsed.comments], dtype=str
    )
    line_arr = np.asarray(linenos, dtype=np.int64)

    if query_file is not None:
        sizes = read_query_file(query_file)
        if sizes.sum() != n:
            raise ValueError(
                f"{query_file}: group sizes add up to {int(sizes.sum())} lines, "
                f"but {path} has {n} data lines"
            )
        group = np.repeat(np.arange(sizes.size), sizes)
        keys = [str(g) for g in range(sizes.size)]
    else:
        keys, group = np.unique(np.asarray(parsed.qids, dtype=str), return_inverse=True)
        first_seen = np.full(len(keys), n)
        np.minimum.at(first_seen, group, np.arange(n))
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
                grades=parsed.grades[rows],
                doc_ids=doc_ids[rows],
                lines=line_arr[rows],
                rows=rows.astype(np.int64),
            )
        )
    return queries


# read_scores moved to bayesrank.data.scores; the old path keeps working.
__getattr__ = moved(__name__, {"read_scores": "bayesrank.data.scores"})
