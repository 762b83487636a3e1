"""How bayesrank's compiled programs run: BLAS threads and the persistent compilation cache.

**One BLAS thread while fits run.** XLA's CPU runtime runs matrix products on its own thread
pool; jaxlib's LAPACK calls (the Cholesky factorisations and triangular solves of every EP
sweep) go to the BLAS that scipy ships (OpenBLAS), with a thread pool of its own. With both
pools on the same cores, a chain of products and factorisations ran slower than its parts: on 2
cores an EP fit at ``n = 1000`` took 0.85 s with one BLAS thread against 1.03 s with two, an
evidence-maximisation fit 4.2 s against 5.1 s. ``one_blas_thread`` limits the BLAS libraries
the process has loaded to one thread for a ``with`` block (or a decorated call), through
``threadpoolctl``, and restores them afterwards. It does nothing where ``threadpoolctl`` is
missing or ``BAYESRANK_BLAS_THREADS=keep``. The limit is process-wide.

**The persistent compilation cache.** Every public façade runs module-level jitted programs at
bucketed shapes, so a process compiles each program once; ``enable_compilation_cache``
keeps the compiled programs on disk (JAX's own cache), so that a second process does not compile
them again. The command line, the experiments and the benchmarks turn it on; a library user
calls it once, before the first fit::

    import bayesrank
    bayesrank.runtime.enable_compilation_cache()      # ~/.cache/bayesrank/jax, or a path

**Long runs of many shapes.** Each distinct compiled program holds memory maps of its own
(about 800 for an EP fit); a process that compiles tens of thousands of programs can reach the
system's limit (``vm.max_map_count``) and die in LLVM with "Cannot allocate memory". Bucketed
shapes bound the number of programs; a loop over thousands of differently-shaped problems that
still needs more can call ``clear_compiled`` between batches.

**float64.** The library does not flip JAX's global x64 flag behind a user's back (the command
line and the experiments turn it on for their own process). With x64 off, JAX silently turns a
user's float64 arrays into float32; the first façade that runs then says so, once per process
(``warn_if_float32``, a ``Float32Warning`` naming the one line that turns x64 on).
float32 works (with jitter) and is faster on accelerators; the GP numerics are checked in
float64.
"""

from __future__ import annotations

import os
import warnings
from contextlib import contextmanager
from functools import lru_cache
from pathlib import Path

__all__ = [
    "Float32Warning",
    "after",
    "clear_compiled",
    "default_cache_dir",
    "enable_compilation_cache",
    "is_traced",
    "one_blas_thread",
    "pin_to_one_cpu",
    "warn_if_float32",
]


def is_traced(*values) -> bool:
    """Whether any leaf of ``values`` is a JAX tracer (inside ``jit``, ``vmap`` or ``grad``):
    the façades check and pad concrete inputs, and pass traced ones to the pure cores."""
    import jax

    return any(isinstance(x, jax.core.Tracer) for x in jax.tree_util.tree_leaves(values))


def after(x, *deps):
    """``x`` (a pytree of arrays) unchanged, as values that XLA computes only after ``deps``.

    Orders a program's batched LAPACK calls (jaxlib 0.10 on a CPU): a batched Cholesky
    factorisation, triangular solve or eigendecomposition splits its batch over XLA's intra-op
    thread pool and waits for the pieces, so two of them that run at once can take every
    thread and wait forever (docs/development/implementation.md). XLA runs two instructions
    side by side only when no chain of operands orders them; ``jax.lax.optimization_barrier``
    does not make one (XLA's CPU pipeline drops it and its ordering). ``after`` makes a real
    one: each leaf of ``x`` gets ``0 * s`` added, with ``s`` built from the first element of
    every leaf of ``deps`` (0 where that is not finite), which XLA cannot fold away. The
    values and gradients are exactly ``x``'s (a zero's sign aside; none flows to ``deps``); the
    cost is one element per dependency and an elementwise add.
    """
    import jax
    import jax.numpy as jnp

    firsts = [jnp.ravel(d)[0] for d in jax.tree_util.tree_leaves(deps) if jnp.size(d)]
    if not firsts:
        return x
    s = sum(jnp.real(f).astype(jnp.result_type(float)) for f in firsts)
    zero = jax.lax.stop_gradient(0.0 * jnp.where(jnp.isfinite(s), s, 0.0))

    def attach(leaf):
        leaf = jnp.asarray(leaf)
        if leaf.dtype == jnp.bool_:
            return leaf | (zero != 0)
        return leaf + zero.astype(leaf.dtype)

    return jax.tree_util.tree_map(attach, x)


@lru_cache(maxsize=1)
def _controller():
    try:
        # loads the BLAS that jaxlib's LAPACK calls use (it is loaded on first use otherwise,
        # after the controller would have looked)
        import scipy.linalg.cython_lapack  # noqa: F401
        from threadpoolctl import ThreadpoolController
    except ImportError:
        return None
    return ThreadpoolController()


@contextmanager
def one_blas_thread():
    """Context manager (and decorator): BLAS limited to one thread inside, restored after.

    Block on the results inside it (``jax.block_until_ready``): JAX dispatches asynchronously,
    and work still running after the block ends runs with the restored limits.
    """
    controller = None if os.environ.get("BAYESRANK_BLAS_THREADS") == "keep" else _controller()
    if controller is None:
        yield
        return
    with controller.limit(limits=1, user_api="blas"):
        yield


def default_cache_dir() -> Path | None:
    """``$BAYESRANK_CACHE_DIR``, else ``$XDG_CACHE_HOME/bayesrank/jax`` (``~/.cache/...``);
    ``None`` where ``BAYESRANK_CACHE_DIR=off``."""
    if os.environ.get("BAYESRANK_CACHE_DIR") == "off":
        return None
    if os.environ.get("BAYESRANK_CACHE_DIR"):
        return Path(os.environ["BAYESRANK_CACHE_DIR"])
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "bayesrank" / "jax"


def enable_compilation_cache(path: str | os.PathLike | None = None) -> Path | None:
    """Keep compiled programs on disk in ``path`` (default ``default_cache_dir``).

    Sets JAX's ``jax_compilation_cache_dir`` and caches every program however short its compile
    time (JAX's default skips those under a second, which on a small fit is most of them).
    Returns the directory (``None``, doing nothing, where no ``path`` is given and
    ``BAYESRANK_CACHE_DIR=off``). Safe to call more than once; call it before the first
    compilation.

    A directory that cannot be created or written (a path under ``/proc``, one that names a file,
    no permission) is not an error: the cache is an optimisation, so this warns
    (``RuntimeWarning`` naming the path and the reason), leaves JAX's configuration alone and
    returns ``None``; everything then runs, compiling in each process.
    """
    import jax

    directory = Path(path) if path is not None else default_cache_dir()
    if directory is None:
        return None
    try:
        directory.mkdir(parents=True, exist_ok=True)
        if not os.access(directory, os.W_OK | os.X_OK):
            raise PermissionError("not writable")
    except (OSError, ValueError) as err:  # ValueError: a path with a NUL byte
        reason = err.strerror if isinstance(err, OSError) and err.strerror else str(err)
        warnings.warn(
            f"bayesrank: compilation cache disabled: cannot use {str(directory)!r} as a cache "
            f"directory ({reason})",
            RuntimeWarning,
            stacklevel=2,
        )
        return None
    jax.config.update("jax_compilation_cache_dir", str(directory))
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
    jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)
    return directory


def clear_compiled() -> None:
    """Drop every compiled program of this process (``jax.clear_caches``), releasing their memory
    maps: for long loops over very many shapes (module docstring). Later calls compile again (or
    load from the persistent cache). The programs kept whole (``executables``) are forgotten
    too; their files stay."""
    import jax

    from . import executables

    jax.clear_caches()
    executables.clear()


class Float32Warning(UserWarning):
    """A computation ran in float32 because JAX's x64 mode is off (said once per process)."""


X64_LINE = 'jax.config.update("jax_enable_x64", True)'
_said_float32 = False


def warn_if_float32(what: str) -> None:
    """Warn once per process, from the first façade that runs with x64 off, that ``what``
    computes in float32, naming the line that turns float64 on. Nothing with x64 on."""
    global _said_float32
    import jax

    if _said_float32 or jax.config.jax_enable_x64:
        return
    _said_float32 = True
    warnings.warn(
        f"bayesrank: {what} runs in float32: JAX's x64 mode is off, so float64 inputs are "
        f"cast down. For float64 (the precision the GP numerics are checked in) run "
        f"`{X64_LINE}` at start-up, before any JAX work. (Said once per process.)",
        Float32Warning,
        stacklevel=3,
    )


def pin_to_one_cpu(argv=None) -> int | None:
    """Pin this process to one CPU (chosen by process id, so concurrent runs spread out), unless
    ``--all-cpus`` is in ``argv`` (default ``sys.argv``); returns the CPU (None: not pinned).

    A workaround for a jaxlib 0.10 CPU deadlock: batched LAPACK custom calls (the vmapped
    Cholesky factorisations and triangular solves of a multi-query fit) split their batch over
    XLA's intra-op thread pool and block until the pieces finish; when as many such calls run
    concurrently as the pool has threads, every thread waits on work queued behind it and the
    process hangs at 0% CPU. The pool is sized from the process's CPU affinity when JAX's CPU
    backend starts (its first computation, not ``import jax``), and a one-thread pool runs the
    batch inline. Call it before the first computation. ``--xla_cpu_multi_thread_eigen=false``
    does not help. bayesrank keeps its own batched calls in one chain; the long experiments and
    benchmarks pin themselves as a belt-and-braces default.
    """
    import sys

    argv = sys.argv if argv is None else argv
    if "--all-cpus" in argv or not hasattr(os, "sched_setaffinity"):
        return None
    cpus = sorted(os.sched_getaffinity(0))
    cpu = cpus[os.getpid() % len(cpus)]
    os.sched_setaffinity(0, {cpu})
    return cpu
