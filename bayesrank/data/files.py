"""Reading plain or gzipped files, with errors that name the file; ``first_non_finite`` finds what
strict JSON cannot hold (the CLI and the studies check their results with it)."""

from __future__ import annotations

import errno
import gzip
import math
import os
import zlib
from pathlib import Path

__all__ = ["MissingFileError", "as_path", "csv_rows", "first_non_finite", "read_bytes"]


class MissingFileError(FileNotFoundError, ValueError):
    """A path that does not exist. A ``FileNotFoundError``; also a ``ValueError``, as the readers
    raised before, so that callers catching ``ValueError`` (the CLI) still report it cleanly."""

    def __str__(self) -> str:
        return f"{self.filename}: no such file"


def as_path(path, name: str = "path") -> Path:
    """``path`` as a ``Path``; ``ValueError`` for what is not a path (``None``,
    a number, bytes)."""
    if not isinstance(path, str | os.PathLike):
        raise ValueError(f"{name} must be a str or os.PathLike, got {type(path).__name__}")
    return Path(path)


def read_bytes(path: Path) -> bytes:
    """The content of a plain or gzipped file (gzip detected by content, not by name).

    Raises:
        MissingFileError: (a ``FileNotFoundError``) ``path`` does not exist.
        ValueError: ``path`` is not a regular file, or holds corrupt gzip data.
    """
    path = as_path(path)
    if not path.exists():
        raise MissingFileError(errno.ENOENT, "no such file", str(path))
    if not path.is_file():
        raise ValueError(f"{path}: not a regular file")
    raw = path.read_bytes()
    if raw[:2] == b"\x1f\x8b":
        try:
            raw = gzip.decompress(raw)
        except (OSError, EOFError, zlib.error) as err:
            raise ValueError(f"{path}: corrupt gzip data ({err})") from None
    return raw


def first_non_finite(obj, path: str = "") -> str | None:
    """The path (``['per_query'][0]['NDCG@2']``) of the first float in the nested dicts, lists
    and tuples ``obj`` that is not finite, or None: what strict JSON (RFC 8259) cannot hold."""
    if isinstance(obj, float):
        return None if math.isfinite(obj) else path or "the value"
    if isinstance(obj, dict):
        items = ((f"{path}[{k!r}]", v) for k, v in obj.items())
    elif isinstance(obj, list | tuple):
        items = ((f"{path}[{i}]", v) for i, v in enumerate(obj))
    else:
        return None
    for where, value in items:
        if (found := first_non_finite(value, where)) is not None:
            return found
    return None


def csv_rows(path: Path) -> list[tuple[int, list[str]]]:
    """``(line number, fields)`` of a CSV file, comments and blank lines skipped."""
    if not path.is_file():
        raise ValueError(f"{path}: no such file")
    out = []
    for lineno, line in enumerate(path.read_text().splitlines(), start=1):
        text = line.strip()
        if text and not text.startswith("#"):
            out.append((lineno, [f.strip() for f in text.split(",")]))
    return out
