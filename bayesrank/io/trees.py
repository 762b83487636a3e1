"""Pytrees to JSON plus named arrays, and back, without pickle.

A tree (the prior, the engine's result, the learning result) is written as a JSON *node* per
object and one named array per numeric leaf:

=====================  =============================================================  =========
object                 JSON node                                                      arrays
=====================  =============================================================  =========
``None``               ``null``                                                       none
numeric leaf           ``{"array": KEY, "as": AS}`` (``"weak_type": true`` if so)     ``KEY``
known ``NamedTuple``   ``{"namedtuple": CLASS, "fields": {name: node}}``              its leaves
known dataclass        ``{"dataclass": CLASS, "module": M, "fields": {name: node}}``  its leaves
tuple, list            ``{"tuple": [node, ...]}``, ``{"list": [node, ...]}``          its leaves
``dict`` (str keys)    ``{"dict": [[key, node], ...]}``                               its leaves
=====================  =============================================================  =========

``AS`` says what the leaf was, so that it comes back as the same type: ``"jax"`` (a
``jax.Array``, put back with ``jax.device_put``), ``"numpy"`` (an ``ndarray``),
``"numpy_scalar"`` (e.g. ``np.float64``), ``"float"``, ``"int"``, ``"bool"`` (Python scalars).
A weakly typed 0-d JAX array (``jnp.asarray(1.0)``) comes back weakly typed where its dtype is
JAX's default one. A dataclass's static fields (``normalized``, ``construction``) are
``{"static": VALUE}`` (a JSON string, number, boolean or null); a constrained field (a
hyperparameter) adds ``"constraint"`` (``{"Positive": {"lower": 0.0}}``) and
``"default_trainable"`` (``bayesrank.kernels.xpgp.default_trainable``), and, with
``readable``, ``"value"``: the value as JSON numbers, for people and other tools only (decoding
reads the array: the npz keeps every bit and the dtype, JSON would keep neither a float32 nor
an array's dtype).

Classes are looked up by name in a fixed registry (the library's kernels, the XPGP prior, the
engines' results, the learning result) plus those the caller adds: a file never makes the loader
import a module or run code it names.
"""

from __future__ import annotations

import dataclasses
import re
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from ..inference import ep, laplace, sparse
from ..kernels import (
    ARD,
    RBF,
    XPGP,
    Diffusion,
    Fixed,
    HiddenCommonCause,
    Independent,
    Linear,
    RegularizedLaplacian,
)
from ..kernels.params import Bounded, Positive
from ..kernels.xpgp import FROZEN_BY_DEFAULT
from ..learning import FitResult, SparseLearning, Trace
from ..learning.results import Design

__all__ = ["DATACLASSES", "TreeError", "decode", "encode", "namedtuples"]

#: The dataclass pytrees a file may name (the prior and its kernels; the sparse engine's latent
#: prior and its precisions).
DATACLASSES = {
    cls.__name__: cls
    for cls in (
        XPGP,
        RBF,
        ARD,
        Linear,
        Independent,
        RegularizedLaplacian,
        Diffusion,
        Fixed,
        HiddenCommonCause,
        sparse.LatentPrior,
        sparse.LaplacianPrecision,
    )
}


def namedtuples() -> dict[str, type]:
    """The ``NamedTuple`` classes a file may name: the engines' results and the learning result
    (NUTS's classes are imported here, on first use: they load NumPyro)."""
    from ..inference.nuts import NUTSDiagnostics, NUTSPosterior

    classes = (
        ep.EPPosterior,
        ep.Sites,
        laplace.LaplacePosterior,
        sparse.SparsePosterior,
        sparse.SparseMode,
        NUTSPosterior,
        NUTSDiagnostics,
        FitResult,
        SparseLearning,
        Design,
        Trace,
    )
    names = {cls.__name__: cls for cls in classes}
    names["SparseLaplace"] = sparse.SparseMode  # its name in files written before 2026-11-29
    return names


class TreeError(ValueError):
    """A node that cannot be written or read; ``where`` is its key (``prior/attribute/rho``)."""

    def __init__(self, where: str, message: str):
        super().__init__(f"{where}: {message}")
        self.where = where
        self.message = message


_SAFE = re.compile(r"^[A-Za-z0-9_.-]+$")
_STATIC_TYPES = (str, bool, int, float, type(None))


def _child(path: str, name: Any, index: int) -> str:
    """The key of a child: ``path/name`` where ``name`` is a safe string, else ``path/#index``."""
    name = str(name)
    return f"{path}/{name}" if _SAFE.match(name) else f"{path}/#{index}"


def _constraint_json(c) -> dict:
    if isinstance(c, Positive):
        return {"Positive": {"lower": float(c.lower)}}
    if isinstance(c, Bounded):
        return {"Bounded": {"low": float(c.low), "high": float(c.high)}}
    return {type(c).__name__: {}}


def _leaf(value, path: str, arrays: dict, readable: bool) -> dict:
    """The node of a numeric leaf; its array goes into ``arrays[path]``."""
    if isinstance(value, jax.core.Tracer):
        raise TreeError(path, "is a traced value: save outside jit, vmap and grad")
    if isinstance(value, np.generic):  # before float: np.float64 is a float
        kind = "numpy_scalar"
    elif isinstance(value, jax.Array):
        kind = "jax"
    elif isinstance(value, np.ndarray):
        kind = "numpy"
    elif isinstance(value, bool):
        kind = "bool"
    elif isinstance(value, int):
        kind = "int"
    elif isinstance(value, float):
        kind = "float"
    else:
        raise TreeError(
            path,
            f"cannot be saved: {type(value).__name__} is not an array, a number or a known "
            "structure (the model file holds arrays, numbers, the library's kernels and results)",
        )
    array = np.asarray(jax.device_get(value))
    if array.dtype.kind not in "biuf":
        raise TreeError(path, f"has dtype {array.dtype}; only numbers and booleans can be saved")
    arrays[path] = array
    node = {"array": path, "as": kind}
    if kind == "jax" and array.ndim == 0 and getattr(value, "weak_type", False):
        node["weak_type"] = True
    if readable:
        node["value"] = array.tolist()
    return node


def encode(obj, path: str, arrays: dict, readable: bool = False):
    """The JSON node of ``obj``; its numeric leaves are added to ``arrays`` under keys below
    ``path``. ``readable``: hyperparameters also get a ``"value"`` (module docstring).
    ``TreeError`` (a ``ValueError``) names the first part that cannot be saved."""
    if obj is None:
        return None
    cls = type(obj)
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        fields = {}
        for f in dataclasses.fields(obj):
            value = getattr(obj, f.name)
            key = f"{path}/{f.name}"
            if f.metadata.get("static", False):
                if not isinstance(value, _STATIC_TYPES):
                    raise TreeError(key, f"static value {value!r} is not a JSON scalar")
                fields[f.name] = {"static": value}
                continue
            node = encode(value, key, arrays, readable)
            constraint = f.metadata.get("constraint")
            if constraint is not None and isinstance(node, dict) and "array" in node:
                node["constraint"] = _constraint_json(constraint)
                node["default_trainable"] = (cls.__name__, f.name) not in FROZEN_BY_DEFAULT
            fields[f.name] = node
        return {"dataclass": cls.__name__, "module": cls.__module__, "fields": fields}
    if isinstance(obj, tuple) and hasattr(cls, "_fields"):
        if cls.__name__ not in namedtuples():
            raise TreeError(path, f"cannot be saved: unknown structure {cls.__name__}")
        fields = {
            name: encode(getattr(obj, name), f"{path}/{name}", arrays) for name in cls._fields
        }
        return {"namedtuple": cls.__name__, "fields": fields}
    if isinstance(obj, tuple | list):
        kind = "tuple" if isinstance(obj, tuple) else "list"
        items = [encode(x, f"{path}/{i}", arrays, readable) for i, x in enumerate(obj)]
        return {kind: items}
    if isinstance(obj, dict):
        if not all(isinstance(k, str) for k in obj):
            raise TreeError(path, "a dict can be saved only with string keys")
        items = [[k, encode(v, _child(path, k, i), arrays)] for i, (k, v) in enumerate(obj.items())]
        return {"dict": items}
    return _leaf(obj, path, arrays, readable)


def _restore_leaf(node: dict, path: str, arrays: dict):
    key = node.get("array")
    if not isinstance(key, str):
        raise TreeError(path, f"a leaf's 'array' must be a key string, got {key!r}")
    if key not in arrays:
        raise TreeError(key, "array missing from the file")
    array = arrays[key]
    kind = node.get("as")
    if kind in ("bool", "int", "float", "numpy_scalar") and array.ndim != 0:
        raise TreeError(key, f"a {kind} must be a 0-d array, got shape {array.shape}")
    if kind == "bool":
        return bool(array)
    if kind == "int":
        return int(array)
    if kind == "float":
        return float(array)
    if kind == "numpy_scalar":
        return array[()]
    if kind == "numpy":
        return array
    if kind == "jax":
        if node.get("weak_type") and array.dtype == jnp.result_type(type(array.item())):
            return jax.device_put(array.item())  # weakly typed, as jnp.asarray(1.0) is
        return jax.device_put(array)
    raise TreeError(path, f"unknown leaf kind 'as': {kind!r}")


def _fields(node: dict, path: str) -> dict:
    fields = node.get("fields")
    if not isinstance(fields, dict):
        raise TreeError(path, "'fields' must be an object")
    return fields


def decode(node, path: str, arrays: dict, dataclasses_: dict | None = None):
    """The object of a JSON node (inverse of ``encode``), leaves from ``arrays``.

    ``dataclasses_``: the dataclass registry (default ``DATACLASSES``). ``TreeError`` (a
    ``ValueError``) names the key at fault: an unknown class or field, a missing array.
    """
    registry = DATACLASSES if dataclasses_ is None else dataclasses_
    if node is None:
        return None
    if not isinstance(node, dict):
        raise TreeError(path, f"expected a JSON object or null, got {type(node).__name__}")
    if "dataclass" in node:
        name = node["dataclass"]
        if name not in registry:
            raise TreeError(
                f"{path}/dataclass",
                f"unknown kernel class {name!r}; this version knows {sorted(registry)} "
                "(pass your own classes to load(..., kernels=[...]))",
            )
        cls = registry[name]
        known = {f.name: f for f in dataclasses.fields(cls)}
        values = {}
        for field_name, child in _fields(node, path).items():
            key = f"{path}/{field_name}"
            if field_name not in known:
                raise TreeError(key, f"{name} has no field {field_name!r}")
            if known[field_name].metadata.get("static", False):
                if not isinstance(child, dict) or "static" not in child:
                    raise TreeError(key, "a static field must be {'static': value}")
                values[field_name] = child["static"]
            else:
                values[field_name] = decode(child, key, arrays, registry)
        try:
            return cls(**values)
        except (TypeError, ValueError) as error:
            raise TreeError(path, f"cannot rebuild {name}: {error}") from None
    if "namedtuple" in node:
        name = node["namedtuple"]
        classes = namedtuples()
        if name not in classes:
            raise TreeError(
                f"{path}/namedtuple", f"unknown structure {name!r}; known: {sorted(classes)}"
            )
        cls = classes[name]
        fields = _fields(node, path)
        if set(fields) != set(cls._fields):
            missing = sorted(set(cls._fields) - set(fields))
            extra = sorted(set(fields) - set(cls._fields))
            raise TreeError(path, f"{name}'s fields differ: missing {missing}, unknown {extra}")
        return cls(**{k: decode(v, f"{path}/{k}", arrays, registry) for k, v in fields.items()})
    if "tuple" in node or "list" in node:
        items = node.get("tuple", node.get("list"))
        if not isinstance(items, list):
            raise TreeError(path, "a tuple's or list's items must be a JSON array")
        out = [decode(x, f"{path}/{i}", arrays, registry) for i, x in enumerate(items)]
        return tuple(out) if "tuple" in node else out
    if "dict" in node:
        items = node["dict"]
        if not isinstance(items, list) or not all(
            isinstance(kv, list) and len(kv) == 2 and isinstance(kv[0], str) for kv in items
        ):
            raise TreeError(path, "a dict's items must be [[key, node], ...]")
        return {
            k: decode(v, _child(path, k, i), arrays, registry) for i, (k, v) in enumerate(items)
        }
    if "array" in node:
        return _restore_leaf(node, path, arrays)
    raise TreeError(path, f"unknown node {sorted(node)}")
