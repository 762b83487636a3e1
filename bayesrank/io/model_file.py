"""The model file: a fitted ``Posterior`` in one ``.npz``, without pickle.

    save(posterior, "query7.npz")
    posterior = load("query7.npz")        # predicts as the fitted one did, bit for bit

One NumPy ``.npz`` archive (a zip of ``.npy`` arrays, written by ``np.savez``, read by
``np.load(..., allow_pickle=False)``): the arrays, plus a JSON document stored as the UTF-8
bytes of the ``uint8`` array ``meta.json``. Nothing is pickled, and loading never imports a
module or runs code that the file names: classes are looked up by name among the library's own
(and those passed to ``load(..., kernels=...)``). ``docs/formats/model-file.md`` describes the
format for users.

Arrays (keys of the archive):

=================================  ==========================  =================================
key                                shape, dtype                what
=================================  ==========================  =================================
``meta.json``                      ``(bytes,)`` uint8          the JSON document (below)
``problem/pairs``                  ``(m, 2)`` int64            the observed pairs, winner first
``problem/X``                      ``(n, d)`` float64          attributes (absent without them)
``problem/relations/<r>``          ``(n, n)`` float64          relation ``r``'s adjacency
``problem/ties``                   ``(m_t, 2)`` int64          pairs judged equal (absent
                                                               without ties)
``problem/weights``                ``(m,)`` float64            each pair's weight (absent: 1)
``problem/tie_weights``            ``(m_t,)`` float64          each tie's weight (absent: 1)
``problem/graded``                 ``(m_g, 2)`` int64          rows (entity, grade) (absent
                                                               without grades)
``problem/grade_weights``          ``(m_g,)`` float64          each grade's weight (absent: 1)
``prior/...``                      as the hyperparameter       each hyperparameter of the prior,
                                                               e.g. ``prior/attribute/rho``,
                                                               ``prior/weights``,
                                                               ``prior/relations/0/iota``
``result/...``                     as the engine's result      every field of the engine's
                                                               posterior: ``result/mean (n,)``,
                                                               ``result/cov (n, n)``,
                                                               ``result/log_evidence ()``,
                                                               ``result/sites/tau (m,)``,
                                                               ``result/sites/nu (m,)``, its
                                                               diagnostics; NUTS:
                                                               ``result/samples (C, S, n)``,
                                                               ``result/diagnostics/...``
``learning/...``                   as the learning result      with hyperparameter learning:
                                                               ``learning/prior/...``,
                                                               ``learning/posteriors/...``,
                                                               ``learning/trace/...``,
                                                               ``learning/converged``
=================================  ==========================  =================================

The JSON document (an object; floats are written by ``repr``, so they read back exactly):

======================  ==============================================================
key                     value
======================  ==============================================================
``format``              ``"bayesrank-model"`` (``FORMAT``)
``format_version``      1; 2 with ties, weights or a tie margin (``FORMAT_VERSION`` is the
                        newest read); a reader refuses a newer one
``bayesrank_version``   the version that wrote it (also ``jax_version``, ``numpy_version``)
``engine``              ``"ep"``, ``"laplace"`` or ``"nuts"``
``summary``             for people: ``n_entities``, ``n_pairs``, ``n_features``,
                        ``n_relations``, ``dtype``, ``converged``, ``log_evidence``
``problem``             ``{"n": n, "pairs": KEY, "X": KEY or null, "relations": [KEY, ...]}``,
                        and ``"ties"``, ``"weights"``, ``"tie_weights"``, ``"graded"``,
                        ``"grade_weights"`` (KEY) where present
``prior``               the XPGP prior as a tree of nodes (``bayesrank.io.trees``): each
                        kernel's class and fields; each hyperparameter's array key, its
                        ``constraint``, ``default_trainable`` flag and ``value`` (a copy for
                        people; the array is what is read); static fields as values
``result``              the engine's posterior as a tree (``EPPosterior``,
                        ``LaplacePosterior`` or ``NUTSPosterior``)
``learning``            the learning result (``FitResult`` or ``SparseLearning``) as a
                        tree, or ``null``
``learning_summary``    ``converged``, ``log_evidence`` (at the fitted prior), ``n_iter``;
                        or ``null``
``arrays``              every array key with its ``shape`` and ``dtype`` (checked on load)
======================  ==============================================================

Hyperparameters are read from the arrays, not from their JSON ``value``. A JSON number written by
``repr`` keeps a float's value exactly, but not its type: whether it was a Python float, a float32
or float64 array, 0-d or ``(d,)`` (ARD lengthscales), weakly typed or not, which decides how JAX
traces and promotes it. The ``.npy`` keeps the bits and the dtype, and the node's ``as`` the
type, so the loaded prior is the saved one leaf for leaf (and hits the same compiled programs). A
posterior is
rebuilt from what its engine computed, never refitted: ``mean``, ``cov``, ``log_evidence``,
``sites`` (what ``predict_new`` needs) or the NUTS draws.

Loading refuses, with a ``ModelFileError`` (a ``ValueError``) naming the file and the key at
fault: a file that is not an ``.npz`` or has no ``meta.json``; another ``format``; a newer
``format_version``; an array listed in ``arrays`` that is missing or has another shape or dtype;
an unknown class name; a problem, prior or posterior that does not fit together (e.g.
``result/mean`` not ``(n,)``). Arrays in the archive that ``arrays`` does not list are ignored.
"""

from __future__ import annotations

import dataclasses
import json
import os
import secrets
from pathlib import Path

import jax
import numpy as np

from .._version import __version__
from ..data.problem import PreferenceProblem
from ..inference.engines import ENGINES, SparseLaplace, resolve
from ..kernels.xpgp import XPGP, check_prior
from ..learning import FitResult, SparseLearning
from ..model import Posterior
from .archive import (
    FORMAT,
    FORMAT_VERSION,
    META_KEY,
    RESULT_CLASS,
    SPARSE_RESULT,
    ModelFileError,
    check_fit,
    check_manifest,
    read,
    read_problem,
)
from .trees import DATACLASSES, TreeError, decode, encode, namedtuples

__all__ = [
    "FORMAT",
    "FORMAT_VERSION",
    "META_KEY",
    "ModelFileError",
    "load",
    "load_metadata",
    "save",
]


def _finite_or_none(x) -> float | None:
    x = float(np.asarray(x))
    return x if np.isfinite(x) else None


def _learning_summary(learning: FitResult | SparseLearning) -> dict:
    if isinstance(learning, SparseLearning):  # the sparse engine's (an estimate, with its se)
        return {
            "converged": bool(learning.converged),
            "log_evidence": _finite_or_none(learning.log_evidence),
            "log_evidence_se": _finite_or_none(learning.se),
            "n_iter": len(learning.factors),
        }
    post = learning.posteriors
    converged = learning.converged
    return {
        "converged": None if converged is None else bool(np.all(np.asarray(converged))),
        "log_evidence": _finite_or_none(np.sum(np.asarray(post.log_evidence))),
        "n_iter": int(np.shape(learning.trace.objective)[-1]),
    }


def _document(posterior: Posterior) -> tuple[dict, dict]:
    """The JSON document and the arrays of a posterior (``ValueError`` for what cannot be
    saved)."""
    problem, result, engine = posterior.problem, posterior.result, posterior.engine.name
    if not isinstance(problem, PreferenceProblem):
        raise ValueError(f"posterior.problem must be a PreferenceProblem, got {type(problem)}")
    if engine not in ENGINES:
        raise ValueError(
            f"a posterior of the engines {sorted(ENGINES)} can be saved, not {posterior.engine!r}'s"
        )
    sparse = type(result).__name__ == SPARSE_RESULT.get(engine)
    if type(result).__name__ != RESULT_CLASS[engine] and not sparse:
        raise ValueError(
            f"posterior.result must be a {RESULT_CLASS[engine]} for inference={engine!r}, got "
            f"{type(result).__name__}"
        )
    if np.ndim(result.mean) != 1:
        raise ValueError(
            f"only a single problem's posterior can be saved (result.mean: (n,)), got shape "
            f"{np.shape(result.mean)}"
        )
    if posterior.learning is not None and not isinstance(
        posterior.learning, FitResult | SparseLearning
    ):
        raise ValueError(
            f"posterior.learning must be a FitResult, a SparseLearning or None, got "
            f"{type(posterior.learning)}"
        )
    check_prior(posterior.prior, None if problem.X is None else problem.X.shape[1])
    arrays = {"problem/pairs": np.asarray(problem.pairs)}
    problem_node = {"n": int(problem.n), "pairs": "problem/pairs", "X": None, "relations": []}
    if problem.X is not None:
        arrays["problem/X"] = np.asarray(problem.X)
        problem_node["X"] = "problem/X"
    for r, W in enumerate(problem.relations):
        arrays[f"problem/relations/{r}"] = np.asarray(W)
        problem_node["relations"].append(f"problem/relations/{r}")
    for name in ("ties", "weights", "tie_weights", "graded", "grade_weights"):  # where present
        value = getattr(problem, name)
        if value is not None and len(value):
            arrays[f"problem/{name}"] = np.asarray(value)
            problem_node[name] = f"problem/{name}"
    prior_node = encode(posterior.prior, "prior", arrays, readable=True)
    result_node = encode(result, "result", arrays)
    learning = posterior.learning
    learning_node = None if learning is None else encode(learning, "learning", arrays)
    # the sparse engine's evidence is an estimate that costs a run: not in the summary
    log_evidence = None if sparse else getattr(result, "log_evidence", None)
    meta = {
        "format": FORMAT,
        "format_version": 2 if problem.has_outcomes or _likelihood_params(posterior.prior) else 1,
        "bayesrank_version": __version__,
        "jax_version": jax.__version__,
        "numpy_version": np.__version__,
        "engine": engine,
        "engine_settings": dataclasses.asdict(posterior.engine),
        "summary": {
            "n_entities": int(problem.n),
            "n_pairs": len(problem.pairs),
            "n_ties": len(problem.ties),
            "n_features": None if problem.X is None else int(problem.X.shape[1]),
            "n_relations": len(problem.relations),
            "dtype": np.asarray(result.mean).dtype.name,
            "converged": bool(posterior.converged),
            "log_evidence": None if log_evidence is None else _finite_or_none(log_evidence),
        },
        "problem": problem_node,
        "prior": prior_node,
        "result": result_node,
        "learning": learning_node,
        "learning_summary": None if learning is None else _learning_summary(learning),
        "arrays": {
            k: {"shape": list(a.shape), "dtype": a.dtype.name} for k, a in sorted(arrays.items())
        },
    }
    return meta, arrays


def save(posterior: Posterior, path, *, compress: bool = False) -> None:
    """Write a fitted posterior to a model file (module docstring; ``docs/formats/model-file.md``).

    Args:
        posterior: a ``Posterior``, as ``XPGPModel(...).fit`` returns it
            (any engine, with or without hyperparameter learning).
        path: a file name (written whole or not at all: to a temporary file beside it, then
            renamed; no suffix is added, ``.npz`` is a good one) or a binary file object.
        compress: zip-deflate the arrays (``np.savez_compressed``): smaller files for sparse
            relations, slower to write and read.

    Raises:
        ValueError: ``posterior`` is not a ``Posterior``; ``path`` is an existing directory,
            or neither a path nor a file object with ``write``; a part of the posterior cannot
            be saved (a batched posterior, an unknown kernel class, a non-numeric leaf),
            naming it.
        FileNotFoundError: the directory ``path`` names does not exist.
    """
    if not isinstance(posterior, Posterior):
        raise ValueError(
            "save expects a bayesrank.model.Posterior (what XPGPModel(prior).fit(problem) "
            f"returns), got {type(posterior).__name__}"
        )
    is_name = isinstance(path, str | os.PathLike)
    if is_name and Path(path).is_dir():
        raise ValueError(f"cannot save to {str(path)!r}: it is a directory, not a file name")
    if not is_name and not callable(getattr(path, "write", None)):
        raise ValueError(
            f"path must be a file name or a binary file object, got {type(path).__name__}"
        )
    try:
        meta, arrays = _document(posterior)
    except TreeError as error:
        raise ValueError(f"cannot save the posterior: {error}") from None
    text = json.dumps(meta, indent=1, allow_nan=False)
    entries = {META_KEY: np.frombuffer(text.encode("utf-8"), np.uint8), **arrays}
    write = np.savez_compressed if compress else np.savez
    if not is_name:
        write(path, **entries)
        return
    target = Path(path)
    if not target.parent.is_dir():
        raise FileNotFoundError(f"cannot save {target}: no directory {target.parent}")
    # a new file beside the target, renamed over it once written ("x": created by this call;
    # opened as usual, so the file's mode follows the umask, as the target's would)
    tmp = target.with_name(f".{target.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp")
    try:
        with open(tmp, "xb") as f:
            write(f, **entries)
        os.replace(tmp, target)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def load_metadata(path) -> dict:
    """The JSON document of a model file (its ``format`` and ``format_version`` checked), e.g.
    to read its ``summary`` or ``prior`` without rebuilding the posterior."""
    return read(path)[1]


def load(path, *, kernels=()) -> Posterior:
    """Read a model file back into a ``Posterior``, without refitting.

    Args:
        path: a file name or a binary file object, as written by ``save``.
        kernels: your own kernel classes (dataclass pytrees, e.g. made with
            ``bayesrank.kernels.params.pytree_dataclass``) that the file's prior names,
            looked up by class name beside the library's.

    Returns:
        the posterior: the same prior (hyperparameter values and types bit for bit), problem,
        engine result and learning result, so ``predict_pairs``, ``probability_matrix``,
        ``scores``, ``rank``, ``mean``, ``cov``, ``log_evidence`` and ``predict_new`` give what
        the saved one gave.

    Raises:
        ModelFileError: (a ``ValueError``) naming the file and the key at fault (module
            docstring).
    """
    name, meta, arrays = read(path)
    check_manifest(name, meta, arrays)
    engine = meta.get("engine")
    if engine not in ENGINES:
        raise ModelFileError(name, "engine", f"must be one of {sorted(ENGINES)}, got {engine!r}")
    registry = dict(DATACLASSES)
    registry.update({cls.__name__: cls for cls in kernels})
    problem = read_problem(name, meta.get("problem"), arrays)
    try:
        prior = decode(meta.get("prior"), "prior", arrays, registry)
        result = decode(meta.get("result"), "result", arrays, registry)
        learning = decode(meta.get("learning"), "learning", arrays, registry)
    except TreeError as error:
        raise ModelFileError(name, error.where, error.message) from None
    if not isinstance(prior, XPGP):
        raise ModelFileError(name, "prior", f"must be an XPGP prior, got {type(prior).__name__}")
    known = namedtuples()
    if type(result) is not known[RESULT_CLASS[engine]] and type(result) is not known.get(
        SPARSE_RESULT.get(engine, "")
    ):
        raise ModelFileError(
            name,
            "result",
            f"engine {engine!r} needs a {RESULT_CLASS[engine]}, got {type(result).__name__}",
        )
    if learning is not None and not isinstance(learning, FitResult | SparseLearning):
        raise ModelFileError(
            name, "learning", f"must be a FitResult or a SparseLearning, got {type(learning)}"
        )
    try:
        check_prior(prior, None if problem.X is None else problem.X.shape[1])
    except ValueError as error:
        raise ModelFileError(name, "prior", str(error)) from None
    if type(result).__name__ == SPARSE_RESULT.get(engine):  # an older file's sparse Laplace
        engine = SparseLaplace.name
    try:
        settings = meta.get("engine_settings") or {}
        engine = dataclasses.replace(resolve(engine), **settings)
    except (TypeError, ValueError) as error:
        raise ModelFileError(name, "engine_settings", str(error)) from None
    posterior = Posterior(prior, problem, result, learning, engine)
    check_fit(name, posterior)
    return posterior


def _likelihood_params(prior) -> bool:
    """Whether the prior has a tie margin or thresholds (which a version-1 reader refuses)."""
    return prior.margin is not None or prior.threshold is not None
