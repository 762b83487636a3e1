"""The OHSUMED keyword graph of Kersting & Xu (Section 6), from the LETOR 3.0 ``Meta`` files.

``read_ohsumed_meta`` parses one ``Meta/query-<qid>.xml[.gz]`` (the query's terms, and each
judged document's term frequencies per stream); ``ohsumed_term_vectors`` turns it into vectors
and ``ohsumed_keyword_graph`` into the cosine-similarity graph of the documents.
"""

from __future__ import annotations

import os
import xml.etree.ElementTree as ET
from collections.abc import Sequence
from pathlib import Path
from typing import NamedTuple

import numpy as np

from ..checks import check_choice
from ..files import read_bytes
from .similarity import cosine_similarity_graph

__all__ = [
    "OHSUMED_COLLECTION_SIZE",
    "OHSUMED_STREAMS",
    "OhsumedMeta",
    "ohsumed_keyword_graph",
    "ohsumed_term_vectors",
    "read_ohsumed_meta",
]

#: Documents in the OHSUMED collection (``Meta/collectioninfo.xml``): the ``N`` of the idf.
OHSUMED_COLLECTION_SIZE = 348_566

#: LETOR 3.0 OHSUMED streams: 1 = title, 2 = abstract, 3 = title + abstract.
OHSUMED_STREAMS = (1, 2, 3)


class OhsumedMeta(NamedTuple):
    """One LETOR 3.0 OHSUMED ``Meta/query-<qid>.xml`` file.

    Attributes:
        qid: the query id (``<id>``).
        terms: the ``T`` stemmed query terms; ``terms[t - 1]`` has ``<termid>`` ``t``.
        doc_ids: ``(n,)`` str, the judged documents in file order (the LETOR feature file's
            row order for the query).
        labels: ``(n,)`` int64 relevance labels.
        tf: ``(n, T, 3)`` int64; ``tf[d, t - 1, s - 1]`` is the frequency of term ``t`` in
            stream ``s`` of document ``d``.
        lengths: ``(n, 3)`` int64 document length (tokens) per stream.
        doc_freq: ``(T, 3)`` int64 number of collection documents whose stream ``s`` contains
            term ``t`` (``<streamfrequency>``).
    """

    qid: str
    terms: tuple[str, ...]
    doc_ids: np.ndarray
    labels: np.ndarray
    tf: np.ndarray
    lengths: np.ndarray
    doc_freq: np.ndarray


def _text(elem: ET.Element, tag: str, where: str) -> str:
    found = elem.find(tag)
    if found is None or found.text is None or not found.text.strip():
        raise ValueError(f"{where}: missing <{tag}>")
    return found.text.strip()


def _integer(elem: ET.Element, tag: str, where: str, low: int = 0, high: int | None = None) -> int:
    text = _text(elem, tag, where)
    try:
        value = int(text)
    except ValueError:
        raise ValueError(f"{where}: <{tag}> {text!r} is not an integer") from None
    if value < low or (high is not None and value > high):
        bound = f"{low}..{high}" if high is not None else f">= {low}"
        raise ValueError(f"{where}: <{tag}> {value} is out of range ({bound})")
    return value


def _fill_term_frequencies(doc: ET.Element, where: str, n_terms: int, out: np.ndarray) -> None:
    """Fill ``out[t - 1, s - 1]`` with the ``<termfrequency>`` of term ``t`` in stream ``s``."""
    for stream in doc.findall("stream"):
        s = _integer(stream, "streamid", where, 1, 3)
        for term in stream.findall("term"):
            t = _integer(term, "termid", f"{where}, stream {s}", 1, n_terms)
            out[t - 1, s - 1] = _integer(term, "termfrequency", f"{where}, stream {s}, term {t}")


def _first_missing(values: np.ndarray) -> tuple[int, ...] | None:
    missing = np.argwhere(values < 0)
    return tuple(int(v) for v in missing[0]) if missing.size else None


def read_ohsumed_meta(path: str | os.PathLike) -> OhsumedMeta:
    """Parse a LETOR 3.0 OHSUMED ``Meta/query-<qid>.xml`` file (plain or gzipped).

    Raises:
        ValueError: naming the file and the element (term, or document position and docid,
            stream, term) that is missing, not an integer or out of range, or a repeated termid.
    """
    path = Path(path)
    try:
        root = ET.fromstring(read_bytes(path))
    except ET.ParseError as err:
        raise ValueError(f"{path}: malformed XML ({err})") from None
    qid = _text(root, "id", f"{path}")
    term_elems = root.findall("terminfo/term")
    n_terms = len(term_elems)
    if n_terms == 0:
        raise ValueError(f"{path}: no <terminfo><term> elements")
    words: list[str | None] = [None] * n_terms
    doc_freq = np.full((n_terms, 3), -1, dtype=np.int64)
    for position, term in enumerate(term_elems, start=1):
        where = f"{path}, term #{position}"
        t = _integer(term, "termid", where, 1, n_terms)
        if words[t - 1] is not None:
            raise ValueError(f"{where}: termid {t} appears twice")
        words[t - 1] = _text(term, "word", where)
        for stream in term.findall("stream"):
            s = _integer(stream, "streamid", f"{where} (termid {t})", 1, 3)
            doc_freq[t - 1, s - 1] = _integer(stream, "streamfrequency", f"{where}, stream {s}")
    if (missing := _first_missing(doc_freq)) is not None:
        raise ValueError(f"{path}: termid {missing[0] + 1} has no stream {missing[1] + 1}")

    doc_elems = root.findall("docinfo/doc")
    n_docs = len(doc_elems)
    doc_ids, labels = [], []
    tf = np.full((n_docs, n_terms, 3), -1, dtype=np.int64)
    lengths = np.full((n_docs, 3), -1, dtype=np.int64)
    for d, doc in enumerate(doc_elems):
        where = f"{path}, doc #{d + 1}"
        doc_ids.append(_text(doc, "docid", where))
        where = f"{where} (docid {doc_ids[-1]})"
        labels.append(_integer(doc, "label", where))
        for stream in doc.findall("stream"):
            s = _integer(stream, "streamid", where, 1, 3)
            lengths[d, s - 1] = _integer(stream, "length", f"{where}, stream {s}")
        _fill_term_frequencies(doc, where, n_terms, tf[d])
        if (missing := _first_missing(tf[d])) is not None:
            t, s = missing[0] + 1, missing[1] + 1
            raise ValueError(f"{where}: no termfrequency of termid {t} in stream {s}")
        if (missing := _first_missing(lengths[d])) is not None:
            raise ValueError(f"{where}: no <length> of stream {missing[0] + 1}")
    return OhsumedMeta(
        qid=qid,
        terms=tuple(words),
        doc_ids=np.asarray(doc_ids, dtype=str),
        labels=np.asarray(labels, dtype=np.int64),
        tf=tf,
        lengths=lengths,
        doc_freq=doc_freq,
    )


def ohsumed_term_vectors(meta: OhsumedMeta, stream: int = 3, weighting: str = "tf") -> np.ndarray:
    """Each document's vector of query-term weights in one stream.

    Args:
        meta: a parsed Meta file.
        stream: 1 = title, 2 = abstract, 3 = title + abstract.
        weighting: ``"tf"`` (default: raw term frequencies) or ``"tfidf"``: ``tf * idf`` with
            ``idf_t = log(N / df_t)``, ``N`` = ``OHSUMED_COLLECTION_SIZE`` and ``df_t`` the
            collection document frequency of the term in that stream (``idf_t = 0`` where
            ``df_t = 0``: the term occurs in no document's stream, so its ``tf`` is 0 as well).

    Returns:
        ``(n, T)`` float64.
    """
    stream = check_choice(stream, "stream", OHSUMED_STREAMS)
    weighting = check_choice(weighting, "weighting", ("tf", "tfidf"))
    tf = meta.tf[:, :, stream - 1].astype(np.float64)
    if weighting == "tf":
        return tf
    df = meta.doc_freq[:, stream - 1].astype(np.float64)
    idf = np.log(OHSUMED_COLLECTION_SIZE / np.where(df > 0, df, OHSUMED_COLLECTION_SIZE))
    return tf * idf


def ohsumed_keyword_graph(
    meta_xml_path: str | os.PathLike,
    doc_ids: Sequence[str] | None = None,
    stream: int = 3,
    k: int | None = None,
    weighting: str = "tf",
) -> tuple[np.ndarray, np.ndarray]:
    """The OHSUMED document graph of Kersting & Xu (Section 6): cosine similarity of keywords.

    The documents' query-term vectors (``ohsumed_term_vectors``) go through
    ``cosine_similarity_graph``. Only the query's own terms are known (LETOR ships no full
    document text), so documents containing none of them in the stream are isolated.

    Args:
        meta_xml_path: ``Meta/query-<qid>.xml[.gz]``.
        doc_ids: the expected document ids in order (e.g. ``Query.doc_ids`` of the LETOR
            feature file), checked against the Meta file.
        stream: 1 = title, 2 = abstract, 3 = title + abstract.
        k: keep each document's ``k`` nearest neighbours ("or" rule), ``None`` for all edges.
        weighting: ``"tf"`` or ``"tfidf"``.

    Returns:
        ``(W, doc_ids)``: ``W: (n, n)`` in the Meta file's document order and ``(n,)`` doc ids.

    Raises:
        ValueError: if ``doc_ids`` differ from the file's, naming the first mismatch.
    """
    meta = read_ohsumed_meta(meta_xml_path)
    if doc_ids is not None:
        expected = [str(d) for d in doc_ids]
        for position, (want, got) in enumerate(zip(expected, meta.doc_ids.tolist(), strict=False)):
            if want != got:
                raise ValueError(
                    f"{meta_xml_path}: doc #{position + 1} is {got!r}, expected {want!r}"
                )
        if len(expected) != len(meta.doc_ids):
            raise ValueError(
                f"{meta_xml_path}: {len(meta.doc_ids)} documents, expected {len(expected)}"
            )
    vectors = ohsumed_term_vectors(meta, stream=stream, weighting=weighting)
    return cosine_similarity_graph(vectors, k=k), meta.doc_ids
