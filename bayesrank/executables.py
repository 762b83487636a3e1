"""Compiled programs kept on disk whole, so that a second process neither traces nor lowers them.

JAX's persistent compilation cache (``runtime.enable_compilation_cache``) skips XLA's compile in a
second process, but not what comes before it: the Python function is traced and lowered again,
because the cache's key is the lowered program. For the first learned fit (``n = 150``) that is
0.6-0.95 s of a warm process's 1-1.5 s, against 0.11 s to load the two programs from JAX's
cache; a serialized executable loads in about the same 0.12 s and needs no trace.

``stored(jitted)`` wraps a module-level ``jax.jit`` program of bayesrank. A call with concrete
arguments, while JAX's compilation cache directory is set, looks its executable up in this
process (``_memory_key``, as ``jit``'s own cache: the arguments' structure, shapes, dtypes,
weak types and placement, the static arguments by ``==``, the options), then on disk
(``<cache dir>/bayesrank-executables``) by a key of everything the trace depends on
(``program_key``); what it does not find it lowers, compiles and writes there:

- the program's module and name, and a digest of every ``.py`` file of the installed
  ``bayesrank`` (any change to the package's code is a new key);
- the versions of jax, jaxlib, numpy, optax and ml_dtypes, the backend, its devices and its
  platform version, the JAX options that change a trace (``KEYED_OPTIONS``), and the
  environment's ``JAX_*`` and ``XLA_*`` variables (no ``BAYESRANK_*`` variable changes a
  trace, and the study's children carry their parent's process id in one), and the XLA
  options the package's programs compile with (``bayesrank.compiler.COMPILER_OPTIONS``);
- the arguments' tree structure and each leaf's shape, dtype, weak type and placement (a host
  array and one on the default device are alike), and the static arguments' ``repr``. The
  file also holds the tree structure and the static arguments themselves (pickled), and
  serves a call only where both equal the call's (``==``).

**What is never kept** (such a call is the plain ``jit``'s): a call whose pytree node types,
static arguments or their functions come from outside ``KNOWN_MODULES`` (a user's engine or
kernel, a script's ``__main__``: its code is not in the key, and an edited class must not be
served its old program); a static argument whose ``repr`` holds a memory address, or that
cannot be pickled; a dynamic argument passed by keyword; a traced argument (under a caller's
``jit``, ``vmap`` or ``grad``); ``jax.disable_jit``; no cache directory, or
``jax_enable_compilation_cache`` off.

**jaxlib 0.10's two limits.** An executable loaded without lowering would call jaxlib's LAPACK
kernels through unset pointers (a segmentation fault), so one tiny factorisation is lowered
before the first load. And an executable that JAX's cache served serializes incompletely
(another process fails to run it: ``NOT_FOUND: Function ... not found``), so only fresh
compiles are written (``_watch_cache_hits``); a program loaded from disk runs its first call
under watch, and is dropped for the ``jit`` should it fail. A file that cannot be read or
loaded is removed; one that cannot be written is left unwritten (the store is an
optimisation: the values are the same either way, the program being the same).
``runtime.clear_compiled`` forgets this process's programs (``clear``).

The files are pickles: the cache directory must be as trusted as the code (it is the user's
own, ``~/.cache/bayesrank/jax`` by default).

Length: one concept, the store; most of it is what keeps a stale program from being served
(the key, the known modules' walk, the checks on load and on first run).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import pickle
import tempfile
import threading
import weakref
from functools import lru_cache
from pathlib import Path

import jax
import jax.numpy as jnp

from .compiler import COMPILER_OPTIONS, jit

__all__ = [
    "FOLDER",
    "KEYED_OPTIONS",
    "KNOWN_MODULES",
    "LOADED_EVENT",
    "StoredProgram",
    "clear",
    "program_key",
    "stored",
]

#: JAX options whose value changes what a trace produces.
KEYED_OPTIONS = (
    "jax_enable_x64",
    "jax_default_device",
    "jax_default_matmul_precision",
    "jax_numpy_dtype_promotion",
    "jax_numpy_rank_promotion",
    "jax_debug_nans",
    "jax_debug_infs",
    "jax_debug_key_reuse",
    "jax_default_prng_impl",
    "jax_threefry_partitionable",
    "jax_random_seed_offset",
    "jax_softmax_custom_jvp",
    "jax_use_direct_linearize",
    "jax_check_static_indices",
    "jax_explicit_x64_dtypes",
    "jax_optimization_level",
    "jax_memory_fitting_level",
    "jax_enable_pgle",
    "jax_use_shardy_partitioner",
)

#: Modules whose types and functions may reach a kept program's trace (their versions are in
#: the key; bayesrank's by its digest). A call whose arguments hold a type or a function from
#: anywhere else (a user's engine or kernel, a script's ``__main__``) runs the plain ``jit``:
#: its code is not in the key, and an edit to it must not be served a stale program.
KNOWN_MODULES = ("bayesrank", "builtins", "numpy", "jax", "jaxlib", "optax", "ml_dtypes",
                 "collections", "functools")  # fmt: skip

#: The folder of the executables, inside JAX's compilation cache directory.
FOLDER = "bayesrank-executables"

#: The ``jax.monitoring`` event recorded for each program loaded from ``FOLDER`` (a load, like
#: JAX's cache hits, but with no compile event before it).
LOADED_EVENT = "/bayesrank/executables/loaded"


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
    import ml_dtypes
    import numpy as np
    import optax

    devices = [f"{d.platform}:{d.device_kind}" for d in jax.devices()]
    devices.append(str(getattr(jax.devices()[0].client, "platform_version", "")))
    options = [f"{name}={getattr(jax.config, name, None)!r}" for name in KEYED_OPTIONS]
    variables = sorted(
        f"{k}={v}"
        for k, v in os.environ.items()
        if k.startswith(("JAX_", "XLA_")) and k != "JAX_COMPILATION_CACHE_DIR"
    )
    versions = [jax.__version__, jaxlib.__version__, np.__version__, optax.__version__,
                ml_dtypes.__version__]  # fmt: skip
    compiler = [f"{k}={v!r}" for k, v in sorted(COMPILER_OPTIONS.items())]
    return [*versions, jax.default_backend(), *devices, *options, *variables, *compiler]


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
    if not path or jax.config.jax_disable_jit or not jax.config.jax_enable_compilation_cache:
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
        self._compiled: dict = {}  # _memory_key -> the compiled program, or _NOT_KEPT
        self._unverified: set = set()  # loaded from disk, not yet run
        self._lock = threading.Lock()
        _PROGRAMS.add(self)

    def clear(self) -> None:
        """Forget this process's programs (``runtime.clear_compiled``)."""
        with self._lock:
            self._compiled.clear()
            self._unverified.clear()

    def lower(self, *args, **static):
        return self.jitted.lower(*args, **static)

    def __call__(self, *args, **static):
        pending = self.pending(*args, **static)
        if pending is None:
            return self.jitted(*args, **static)
        program = pending.compile()
        if pending.memo not in self._unverified:
            return program(*args)
        # a program loaded from disk runs once under watch: should it fail (a file from a
        # compile that JAX's cache served, which no check caught), it is dropped for the jit
        try:
            out = jax.block_until_ready(program(*args))
        except jax.errors.JaxRuntimeError:
            with contextlib.suppress(OSError):
                pending.path.unlink()
            self._remember(pending.memo, _NOT_KEPT)
            self._unverified.discard(pending.memo)
            return self.jitted(*args, **static)
        self._unverified.discard(pending.memo)
        return out

    def pending(self, *args, **static) -> _Pending | None:
        """This call's program, not yet compiled where it is neither in this process nor on
        disk (``.compile()`` compiles and stores it; ``.out_info`` its outputs' shapes), or
        None where the call is not kept. For compiling several programs in threads: lower
        here (tracing holds Python's lock), compile there. In this process the programs are
        found by ``_memory_key`` (as ``jit``'s own cache: no digest, no strings)."""
        directory = _directory()
        if directory is None or not self.name.startswith("bayesrank."):
            return None  # (a program outside the package: its code is not in the key)
        memo = _memory_key(args, static)
        if memo is None:
            return None
        with self._lock:
            found = self._compiled.get(memo)
        if found is _NOT_KEPT:
            return None
        if found is not None:
            return _Pending(self, memo, None, compiled=found)
        key = program_key(self.name, args, static)
        if key is None:
            return self._remember(memo, _NOT_KEPT)
        path = directory / f"{key}.pkl"
        found = _load(path, args, static)
        if found is not None:
            jax.monitoring.record_event(LOADED_EVENT)
            self._remember(memo, found)
            self._unverified.add(memo)
            return _Pending(self, memo, path, compiled=found)
        lowered = self.jitted.lower(*args, **static)
        if jax.tree_util.tree_leaves(lowered.args_info[1]):
            # a dynamic argument by keyword: the compiled program takes positional ones only
            return self._remember(memo, _NOT_KEPT)
        return _Pending(self, memo, path, lowered=lowered, call=(args, static))

    def _remember(self, memo, compiled) -> None:
        with self._lock:
            self._compiled[memo] = compiled


#: A call signature that runs the plain ``jit`` (``StoredProgram.pending``).
_NOT_KEPT = object()


def _memory_key(args, static):
    """A hashable key of a call within this process: the arguments' tree structure, each
    leaf's shape, dtype, weak type and placement, the static arguments and the keyed options
    (``KEYED_OPTIONS``); None for a traced argument or an unhashable static one."""
    from jax.api_util import shaped_abstractify

    leaves, tree = jax.tree_util.tree_flatten(args)
    default = _default_device()
    signature = []
    for leaf in leaves:
        if isinstance(leaf, jax.core.Tracer):
            return None
        try:
            aval = shaped_abstractify(leaf)
        except TypeError:  # a static argument passed by position: the plain jit says so
            return None
        sharding = getattr(leaf, "sharding", None)
        one = sharding is None or (
            sharding.device_set == {default}
            and getattr(sharding, "memory_kind", None) in (None, "device")
        )
        signature.append((aval.shape, aval.dtype, aval.weak_type, None if one else sharding))
    options = tuple(getattr(jax.config, name, None) for name in KEYED_OPTIONS)
    statics = tuple(sorted(static.items()))
    key = (tree, tuple(signature), statics, options)
    try:
        hash(key)
    except TypeError:
        return None
    known = _KNOWN.get((tree, statics))
    if known is None:
        known = _KNOWN[(tree, statics)] = _known(tree, static)
    return key if known else None


#: ``_known``'s answers by ``(tree, static items)``: it walks the tree, once per signature.
_KNOWN: dict = {}


def _default_device():
    chosen = jax.config.jax_default_device
    return chosen if isinstance(chosen, jax.Device) else jax.devices()[0]


def _known(tree, static) -> bool:
    """Whether every pytree node type of ``tree`` and every type and function inside the static
    arguments comes from ``KNOWN_MODULES``."""
    seen: set[int] = set()

    def known_module(obj) -> bool:
        module = getattr(obj, "__module__", None) or ""
        return module.split(".")[0] in KNOWN_MODULES

    def walk_tree(t) -> bool:
        data = t.node_data()
        if data is not None and not known_module(data[0]):
            return False
        if data is not None and not walk(data[1]):
            return False
        return all(walk_tree(c) for c in t.children())

    def walk(x) -> bool:
        if id(x) in seen or x is None or isinstance(x, bool | int | float | str | bytes):
            return True
        seen.add(id(x))
        if isinstance(x, jax.tree_util.PyTreeDef):
            return walk_tree(x)
        if callable(x) and not isinstance(x, type) and not known_module(x):
            return False
        if not known_module(type(x)):
            return False
        if isinstance(x, type):
            return known_module(x)
        if isinstance(x, dict):
            return all(walk(k) and walk(v) for k, v in x.items())
        if isinstance(x, tuple | list | frozenset | set):
            return all(walk(v) for v in x)
        fields = getattr(x, "__dict__", None)
        if fields is not None and not all(walk(v) for v in fields.values()):
            return False
        closure = getattr(x, "__closure__", None) or ()
        return all(walk(c.cell_contents) for c in closure if _filled(c))

    return walk_tree(tree) and all(walk(v) for v in static.values())


def _filled(cell) -> bool:
    try:
        _ = cell.cell_contents
    except ValueError:
        return False
    return True


class _Pending:
    def __init__(self, program: StoredProgram, memo, path: Path | None, compiled=None,
                 lowered=None, call=None):  # fmt: skip
        self.program, self.memo, self.path = program, memo, path
        self.compiled, self.lowered, self.call = compiled, lowered, call

    @property
    def out_info(self):
        return (self.compiled or self.lowered).out_info

    def compile(self):
        if self.compiled is None:
            _watch_cache_hits()
            _seen.hit = False
            # an executable JAX already holds in this process may have come from its cache
            # without a new hit event (JAX's private attribute, read defensively)
            held = getattr(getattr(self.lowered, "_lowering", None), "_executable", None)
            self.compiled = self.lowered.compile()
            self.program._remember(self.memo, self.compiled)
            if not _seen.hit and held is None:  # (see _watch_cache_hits)
                _save(self.path, self.compiled, *self.call)
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


@jit
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


#: Every kept program, for ``clear``.
_PROGRAMS: weakref.WeakSet = weakref.WeakSet()


def clear() -> None:
    """Forget every kept program of this process (the files stay): ``runtime.clear_compiled``
    calls it beside ``jax.clear_caches``, so that their memory is released too."""
    for program in list(_PROGRAMS):
        program.clear()
    _KNOWN.clear()


def stored(jitted) -> StoredProgram:
    """``jitted`` (a module-level ``jax.jit`` program) with its executables kept on disk."""
    return StoredProgram(jitted)
