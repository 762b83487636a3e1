"""The bundled OHSUMED sample (five LETOR 3.0 queries; provenance in ``sample/README.md``)."""

from __future__ import annotations

from pathlib import Path

from .letor import Query, load_letor

__all__ = ["SAMPLE_QIDS", "load_sample", "sample_meta_path", "sample_path"]

_SAMPLE_DIR = Path(__file__).resolve().parent / "sample"

#: Query ids in the bundled sample, in file order.
SAMPLE_QIDS = ("5", "7", "8", "10", "12")


def sample_path() -> Path:
    """Path of the bundled LETOR file (QueryLevelNorm features, 271 documents, 45 features)."""
    return _SAMPLE_DIR / "ohsumed_sample.txt.gz"


def sample_meta_path(qid: str | int) -> Path:
    """Path of the LETOR ``Meta/query-<qid>.xml.gz`` file of one sample query."""
    if str(qid) not in SAMPLE_QIDS:
        raise ValueError(f"query {qid!r} is not in the bundled sample (it has {SAMPLE_QIDS})")
    return _SAMPLE_DIR / f"query-{qid}.xml.gz"


def load_sample() -> list[Query]:
    """Read the bundled sample into five ``Query`` objects."""
    return load_letor(sample_path())
