"""The model file's archive: its constants, reading it, and checking what it holds.

``read`` opens the ``.npz`` (``allow_pickle=False``) and checks its ``format`` and
``format_version``; ``check_manifest`` compares the arrays with the document's ``arrays``
listing; ``read_problem`` and ``check_fit`` check that the problem and the engine's
result fit together. Every refusal is a ``ModelFileError`` naming the file and the key at
fault (the format: ``bayesrank.io.model_file``).
"""

from __future__ import annotations

import json
import os
import zipfile

import numpy as np

from ..data.problem import PreferenceProblem
from ..inference.engines import EP, NUTS, Laplace, SparseLaplace
from ..inference.posterior import SamplePosterior

__all__ = [
    "FORMAT",
    "FORMAT_VERSION",
    "META_KEY",
    "RESULT_CLASS",
    "SPARSE_RESULT",
    "ModelFileError",
    "check_fit",
    "check_manifest",
    "name_of",
    "read",
    "read_problem",
]

#: The ``format`` entry of every model file.
FORMAT = "bayesrank-model"
#: The newest version ``bayesrank.io.load`` reads. ``save`` writes 2 for a problem with ties or
#: weights or a prior with a tie margin (which a version-1 reader would drop or refuse), else 1.
FORMAT_VERSION = 2
#: The archive entry holding the JSON document (UTF-8 bytes as a ``uint8`` array).
META_KEY = "meta.json"

#: The engine's result class for each ``engine`` (the engines' names, ``inference.engines``).
RESULT_CLASS = {
    EP.name: "EPPosterior",
    Laplace.name: "LaplacePosterior",
    NUTS.name: "NUTSPosterior",
    SparseLaplace.name: "SparsePosterior",
}
#: Files written before the engines were objects name the sparse Laplace ``"laplace"``.
SPARSE_RESULT = {Laplace.name: "SparsePosterior", SparseLaplace.name: "SparsePosterior"}


class ModelFileError(ValueError):
    """A model file that cannot be read: ``file`` (its name) and ``key`` (the archive key or the
    JSON entry at fault) are attributes and open the message."""

    def __init__(self, file: str, key: str, message: str):
        super().__init__(f"{file}: {key}: {message}")
        self.file = file
        self.key = key


def name_of(path) -> str:
    """What messages call a file: its path, or a file object's ``name``."""
    if isinstance(path, str | os.PathLike):
        return os.fspath(path)
    return str(getattr(path, "name", "<file object>"))


def read(path) -> tuple[str, dict, dict]:
    """``(name, meta, arrays)`` of a model file, its ``format`` and ``format_version`` checked."""
    name = name_of(path)
    try:
        archive = np.load(path, allow_pickle=False)
    except (OSError, ValueError, EOFError, zipfile.BadZipFile) as error:
        raise ModelFileError(
            name, "file", f"not a bayesrank model file (not a NumPy .npz archive: {error})"
        ) from None
    if not isinstance(archive, np.lib.npyio.NpzFile):
        raise ModelFileError(name, "file", "not a bayesrank model file (a .npy, not an .npz)")
    with archive:
        if META_KEY not in archive.files:
            raise ModelFileError(
                name, META_KEY, "not a bayesrank model file (no meta.json entry in the archive)"
            )
        arrays = {}
        for key in archive.files:
            try:
                arrays[key] = archive[key]
            except (OSError, ValueError, EOFError, zipfile.BadZipFile) as error:
                raise ModelFileError(name, key, f"cannot be read: {error}") from None
    raw = arrays.pop(META_KEY)
    if raw.dtype != np.uint8 or raw.ndim != 1:
        raise ModelFileError(name, META_KEY, "must be a 1-d uint8 array of UTF-8 JSON")
    try:
        meta = json.loads(raw.tobytes().decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as error:  # too deep
        raise ModelFileError(name, META_KEY, f"is not valid JSON: {error}") from None
    if not isinstance(meta, dict) or meta.get("format") != FORMAT:
        got = meta.get("format") if isinstance(meta, dict) else meta
        raise ModelFileError(
            name, "format", f"not a bayesrank model file (format {got!r}, expected {FORMAT!r})"
        )
    version = meta.get("format_version")
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        raise ModelFileError(name, "format_version", f"must be an integer >= 1, got {version!r}")
    if version > FORMAT_VERSION:
        raise ModelFileError(
            name,
            "format_version",
            f"{version} is newer than this bayesrank reads (up to {FORMAT_VERSION}; the file "
            f"was written by bayesrank {meta.get('bayesrank_version')}): upgrade bayesrank",
        )
    return name, meta, arrays


def check_manifest(name: str, meta: dict, arrays: dict) -> None:
    """Every array the document's ``arrays`` lists is in the archive with that shape and dtype
    (arrays it does not list are ignored)."""
    manifest = meta.get("arrays")
    if not isinstance(manifest, dict):
        raise ModelFileError(name, "arrays", "must be an object of array keys")
    for key, spec in manifest.items():
        if key not in arrays:
            raise ModelFileError(name, key, "array listed in 'arrays' is missing from the file")
        if not isinstance(spec, dict) or "shape" not in spec or "dtype" not in spec:
            raise ModelFileError(name, f"arrays/{key}", "must be {'shape': [...], 'dtype': ...}")
        array = arrays[key]
        if list(array.shape) != spec["shape"]:
            raise ModelFileError(
                name, key, f"has shape {array.shape}, the file lists {tuple(spec['shape'])}"
            )
        if array.dtype.name != spec["dtype"]:
            raise ModelFileError(
                name, key, f"has dtype {array.dtype.name}, the file lists {spec['dtype']}"
            )


def read_problem(name: str, node, arrays: dict) -> PreferenceProblem:
    """The document's ``problem`` rebuilt and checked by
    ``create`` (its message names the array)."""
    if not isinstance(node, dict) or not isinstance(node.get("relations", []), list):
        raise ModelFileError(name, "problem", "must be {'n', 'pairs', 'X', 'relations'}")

    def array(key):
        if key is None:
            return None
        if key not in arrays:
            raise ModelFileError(name, str(key), "array missing from the file")
        return arrays[key]

    try:
        return PreferenceProblem.create(
            array(node.get("pairs")),
            X=array(node.get("X")),
            relations=[array(k) for k in node.get("relations", [])],
            n=node.get("n"),
            ties=array(node.get("ties")),
            weights=array(node.get("weights")),
            tie_weights=array(node.get("tie_weights")),
            graded=array(node.get("graded")),
            grade_weights=array(node.get("grade_weights")),
        )
    except ModelFileError:
        raise
    except (TypeError, ValueError) as error:
        raise ModelFileError(name, "problem", str(error)) from None


def _expect_shape(name: str, key: str, value, shape: tuple) -> None:
    if np.shape(value) != shape:
        raise ModelFileError(name, key, f"has shape {np.shape(value)}, the problem needs {shape}")


def check_fit(name: str, posterior) -> None:
    """The posterior's arrays fit its problem: ``mean (n,)``, ``cov (n, n)``, ``sites (m,)``
    (one per row: pairs, then ties)
    (or longer, zero beyond ``m``), NUTS ``samples (C, S, n)``."""
    n, m = posterior.problem.n, len(posterior.problem.rows)
    result = posterior.result
    _expect_shape(name, "result/mean", result.mean, (n,))
    if type(result).__name__ == SPARSE_RESULT.get(posterior.inference):
        _expect_shape(name, "result/fit/w", result.fit.w, (m,))
        _expect_shape(name, "result/pairs", result.pairs, (m, 2))
        if result.latent.n != n:
            raise ModelFileError(name, "result/latent", f"has {result.latent.n} entities, not {n}")
        return
    _expect_shape(name, "result/cov", result.cov, (n, n))
    if isinstance(result, SamplePosterior):
        samples = np.shape(result.samples)
        if len(samples) != 3 or samples[2] != n:
            raise ModelFileError(
                name, "result/samples", f"has shape {samples}, the problem needs (C, S, {n})"
            )
        return
    # one site per pair; a Laplace fit keeps the zero sites of the pairs it was padded with
    # (XPGPModel pads the pairs to a size bucket), so more sites than pairs are fine if zero
    for key in ("tau", "nu"):
        site = np.asarray(getattr(result.sites, key))
        if site.ndim != 1 or len(site) < m or np.any(site[m:] != 0):
            raise ModelFileError(
                name,
                f"result/sites/{key}",
                f"has shape {site.shape}, the problem needs ({m},) (one site per pair; a longer "
                "tail of zero sites is padding)",
            )
