"""Compiled programs kept on disk whole, so that a second process neither traces nor lowers them.

JAX's persistent compilation cache (``runtime.enable_compilation_cache``) skips XLA's compile in a
second process, but not what comes before it: the Python function is traced and lowered again,
because the cache's key is the lowered program. For the first learned fit (``n = 150``) that is
0.68 s of a warm process's 1.1 s, against 0.11 s to load the two programs from JAX's cache; a
serialized executable loads in about the same 0.12 s and needs no trace.

``stored(jitted)`` wraps a module-level ``jax.jit`` program. A call with concrete arguments, while
JAX's compilation cache directory is set, looks its executable up by a key of everything the
trace depends on, in this process and then on disk (``<cache dir>/bayesrank-executables``);
what it does not find it lowers, compiles and writes there. The key (``program_key``):

- the program's module and name, and a digest of every ``.py`` file of the installed
  ``bayesrank`` (any change to the package's code is a new key: a stale program is never run);
- jax's and jaxlib's versions, the backend and its devices, the JAX options that change a
  trace (``KEYED_OPTIONS``), and the environment's ``JAX_*`` and ``XLA_*`` variables (the
  cache directory's aside; no ``BAYESRANK_*`` variable changes a trace, and the study's
  children carry their parent's process id in one);
- the arguments' tree structure and each leaf's shape, dtype, weak type and placement (a host
  array and one on the default device are alike), and the static arguments' ``repr`` (a
  ``repr`` holding a memory address is not stable across processes: such a call runs the
  plain ``jit``). The file also holds the tree structure and the static arguments themselves
  (pickled), and serves a call only where both equal the call's (``==``, as ``jit``'s own
  cache compares them); static arguments that cannot be pickled are not stored.

Under a caller's ``jit``, ``vmap`` or ``grad`` (traced arguments), with ``jax.disable_jit``,
without a cache directory, or with a dynamic argument passed by keyword (only the static ones
may be), a call is the plain ``jit``'s. A file that cannot be read or loaded
is removed and the call takes the path it would take without the store; one that cannot be
written is left unwritten (the store is an optimisation: the values are the same either way,
the program being the same).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import pickle
import tempfile
import threading
from functools import lru_cache
from pathlib import Path

import jax
import jax.numpy as jnp

__all__ = ["KEYED_OPTIONS", "StoredProgram", "program_key", "stored"]

#: JAX options whose value changes what a trace produces.
KEYED_OPTIONS = (
    "jax_enable_x64",
    "jax_default_matmul_precision",
    "jax_numpy_dtype_promotion",
    "jax_numpy_rank_promotion",
    "jax_debug_nans",
    "jax_debug_infs",
    "jax_default_prng_impl",
    "jax_threefry_partitionable",
)

#: The folder of the executables, inside JAX's compilation cache directory.
FOLDER = "bayesrank-executables"


@lru_cache(maxsize=1)
def package_digest() -> str:
    """SHA-256 of every ``.py`` file of the ``bayesrank`` package (paths and contents)."""
    root = Path(__file__).resolve().parent
    digest = hashlib.sha256()
    for path in sorted(root.rglob("*.py")):
        digest.update(path.relative_to(root).as_posix().encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()


def _environment() -> list[str]:
    import jaxlib

    devices = [f"{d.platform}:{d.device_kind}" for d in jax.devices()]
    options = [f"{name}={getattr(jax.config, name, None)!r}" for name in KEYED_OPTIONS]
    variables = sorted(
        f"{k}={v}"
        for k, v in os.environ.items()
        if k.startswith(("JAX_", "XLA_")) and k != "JAX_COMPILATION_CACHE_DIR"
    )
    return [jax.__version__, jaxlib.__version__, jax.default_backend(), *devices, *options,
            *variables]  # fmt: skip


def program_key(name: str, args: tuple, static: dict) -> str | None:
    """The hex key of the program ``name`` (``module.qualname``) called with ``args`` and the
    static keyword arguments ``static`` (module docstring), or None where the call cannot be
    keyed: a traced argument, or a static argument whose ``repr`` holds a memory address."""
    from jax.api_util import shaped_abstractify

    leaves, tree = jax.tree_util.tree_flatten(args)
    parts = [name, package_digest(), *_environment(), str(tree)]
    default = jax.devices()[0]
    for leaf in leaves:
        if isinstance(leaf, jax.core.Tracer):
            return None
        sharding = getattr(leaf, "sharding", None)  # host arrays and one default device: alike
        one = sharding is None or sharding.device_set == {default}
        placement = "default" if one else str(sharding)
        aval = shaped_abstractify(leaf)
        parts.append(f"{aval.str_short()}{'~' if aval.weak_type else ''}@{placement}")
    for k in sorted(static):
        text = repr(static[k])
        if " at 0x" in text:
            return None
        parts.append(f"{k}={text}")
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()


def _directory() -> Path | None:
    path = jax.config.jax_compilation_cache_dir
    if not path or jax.config.jax_disable_jit:
        return None
    return Path(path) / FOLDER


class StoredProgram:
    """A module-level ``jax.jit`` program whose executables are kept (module docstring).
    Called as the ``jit`` is (static arguments by keyword); ``lower`` is the ``jit``'s."""

    def __init__(self, jitted):
        self.jitted = jitted
        self.name = f"{jitted.__module__}.{jitted.__qualname__}"
        self.__wrapped__ = jitted
        self.__doc__ = jitted.__doc__
        self._compiled: dict[str, object] = {}
        self._lock = threading.Lock()

    def lower(self, *args, **static):
        return self.jitted.lower(*args, **static)

    def __call__(self, *args, **static):
        program = self.program(*args, **static)
        return self.jitted(*args, **static) if program is None else program(*args)

    def program(self, *args, **static):
        """The compiled program of this call (from this process, the disk, or compiled and
        stored now), or None where the call is not kept (module docstring)."""
        pending = self.pending(*args, **static)
        return None if pending is None else pending.compile()

    def pending(self, *args, **static) -> _Pending | None:
        """This call's program, not yet compiled where it is neither in this process nor on
        disk (``.compile()`` compiles and stores it; ``.out_info`` its outputs' shapes), or
        None where the call is not kept. For compiling several programs in threads: lower
        here (tracing holds Python's lock), compile there."""
        directory = _directory()
        if directory is None:
            return None
        key = program_key(self.name, args, static)
        if key is None:
            return None
        with self._lock:
            found = self._compiled.get(key)
        if found is None:
            found = _load(directory / f"{key}.pkl", args, static)
            if found is not None:
                with self._lock:
                    self._compiled[key] = found
        if found is not None:
            return _Pending(self, key, directory, compiled=found)
        lowered = self.jitted.lower(*args, **static)
        if jax.tree_util.tree_leaves(lowered.args_info[1]):
            return None  # a dynamic argument by keyword: the compiled program takes args only
        return _Pending(self, key, directory, lowered=lowered, call=(args, static))


class _Pending:
    def __init__(self, program: StoredProgram, key: str, directory: Path, compiled=None,
                 lowered=None, call=None):  # fmt: skip
        self.program, self.key, self.directory = program, key, directory
        self.compiled, self.lowered, self.call = compiled, lowered, call

    @property
    def out_info(self):
        return (self.compiled or self.lowered).out_info

    def compile(self):
        if self.compiled is None:
            _watch_cache_hits()
            _seen.hit = False
            self.compiled = self.lowered.compile()
            with self.program._lock:
                self.program._compiled[self.key] = self.compiled
            if not _seen.hit:  # (see _watch_cache_hits)
                _save(self.directory / f"{self.key}.pkl", self.compiled, *self.call)
        return self.compiled


#: Per thread: whether the last compile was served by JAX's persistent cache.
_seen = threading.local()


@lru_cache(maxsize=1)
def _watch_cache_hits() -> None:
    """Note JAX's persistent-cache hits, per thread (JAX records the event in the compiling
    thread). jaxlib 0.10's CPU executables that JAX's cache served serialize incompletely:
    loaded in another process they fail ("NOT_FOUND: Function ... not found"). So only a
    fresh compile is stored; a program that JAX's cache already holds keeps today's path (a
    trace, a lowering and a load) until it is compiled afresh."""
    import jax.monitoring

    def listen(event: str, **_):
        if event == "/jax/compilation_cache/cache_hits":
            _seen.hit = True

    jax.monitoring.register_event_listener(listen)


def _signature(args, static) -> tuple:
    """What a stored program must equal to serve a call, besides its key: the arguments' tree
    structure and the static arguments, compared by ``==`` as ``jit``'s own cache compares
    them (a ``repr`` that leaves out a field cannot make two programs one)."""
    return jax.tree_util.tree_structure(args), tuple(sorted(static.items()))


@lru_cache(maxsize=1)
def _prepare_custom_calls() -> None:
    """jaxlib binds its LAPACK kernels (scipy's) when a program that calls one is first
    lowered; an executable loaded without lowering would call through unset pointers (a
    segmentation fault). Lowering one tiny factorisation binds them all."""
    import numpy as np

    _cholesky.lower(np.eye(1))


@jax.jit
def _cholesky(a):
    return jnp.linalg.cholesky(a)


def _load(path: Path, args, static):
    from jax.experimental.serialize_executable import deserialize_and_load

    try:
        with open(path, "rb") as f:
            payload, in_tree, out_tree, signature = pickle.load(f)
        if signature != _signature(args, static):
            return None
        _prepare_custom_calls()
        return deserialize_and_load(payload, in_tree, out_tree)
    except FileNotFoundError:
        return None
    except Exception:  # a torn or foreign file
        with contextlib.suppress(OSError):
            path.unlink()
        return None


def _save(path: Path, compiled, args, static) -> None:
    from jax.experimental.serialize_executable import serialize

    name = None
    try:
        blob = pickle.dumps((*serialize(compiled), _signature(args, static)))
        path.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=path.parent, delete=False, suffix=".tmp") as f:
            name = f.name
            f.write(blob)
        os.replace(name, path)  # atomic: a reader sees the whole file or none
    except Exception:  # not serializable, or not writable: kept in this process only
        if name is not None and os.path.exists(name):
            os.unlink(name)


def stored(jitted) -> StoredProgram:
    """``jitted`` (a module-level ``jax.jit`` program) with its executables kept on disk."""
    return StoredProgram(jitted)
