"""Reading plain or gzipped files, with errors that name the file."""

from __future__ import annotations

import gzip
from pathlib import Path

__all__ = ["read_bytes"]


def read_bytes(path: Path) -> bytes:
    """The content of a plain or gzipped file (gzip detected by content, not by name)."""
    path = Path(path)
    if not path.is_file():
        raise ValueError(f"{path}: no such file")
    raw = path.read_bytes()
    if raw[:2] == b"\x1f\x8b":
        try:
            raw = gzip.decompress(raw)
        except (OSError, EOFError) as err:
            raise ValueError(f"{path}: corrupt gzip data ({err})") from None
    return raw
