"""How bayesrank compiles: ``jit``, which is ``jax.jit`` with the package's XLA options.

Every program of the package is a module-level function decorated ``@jit`` or
``@partial(jit, static_argnames=(...))`` (DESIGN.md, "One jit policy"). A user's own
``jax.jit`` is never touched: the options below hold for bayesrank's programs alone.

**XLA:CPU's loop emitters** (``COMPILER_OPTIONS``). jaxlib 0.6 and later emit each fused
kernel through XLA's MLIR fusion emitters by default. For this package's programs (many small
fusions in ``while`` loops: EP's sweeps, Newton steps, BFGS), the older LLVM IR emitters,
``xla_cpu_use_fusion_emitters=False``, compile the same HLO in about half the time, and the
programs run about as fast. EP's fits came out equal to the last bit; a learned fit, whose BFGS
path follows the last bits of its evidence, can end a little elsewhere (a 16-fit study's
held-out pair error .1617 against .1615 with XLA's defaults). On the 2-core CPU (jaxlib
0.10.2), ``ep.fit`` on 20 entities and 40 pairs compiled in 0.68 s against 1.20 s (59 fused
kernels against 80), the first learned fit of 150 entities took 2.9 s against 4.0 s
(``python benchmarks/bench_ep_program.py`` runs both settings side by side; the figures of
larger fits are in docs/development/tests.md). The option is XLA:CPU's; on a GPU or TPU it was
not measured.

JAX takes compiler options on a top-level ``jit`` only: staged inside another trace (a
program of the package calling another, a user's ``jit``, ``vmap`` or ``grad`` around a
façade's program) it refuses them. So ``jit`` makes two programs of a function: the one with the
options runs where no trace is active, the plain ``jax.jit`` inside one (where the outer
program's options hold for the whole).

An option that a jaxlib does not know fails every compile ("No such compile option"), so the
options are given only to the jaxlib versions on which they were checked: 0.6.0 to 0.10.x
(0.4.38 and 0.5.0 refuse this one; 0.4.30's ``jax.jit`` takes no ``compiler_options``). On any
other version ``jit`` is ``jax.jit`` as it is. ``BAYESRANK_XLA_OPTIONS=default`` (read at
import) keeps XLA's defaults too, to compare or to rule the option out.
"""

from __future__ import annotations

import functools
import os
from importlib.metadata import version

import jax

__all__ = ["COMPILER_OPTIONS", "jit"]

try:  # jax's own test for "no trace is active", private in jax 0.10
    from jax._src.core import trace_state_clean as _top_level
except ImportError:  # pragma: no cover - no options are given then (``_options``)
    _top_level = None

#: The jaxlib versions (as ``(major, minor)``, from and up to but not including) on which the
#: options were checked to compile.
CHECKED = ((0, 6), (0, 11))


def _options() -> dict:
    if os.environ.get("BAYESRANK_XLA_OPTIONS", "") == "default" or _top_level is None:
        return {}
    try:
        major, minor = (int(part) for part in version("jaxlib").split(".")[:2])
    except ValueError:  # a development build's version: not checked
        return {}
    if not CHECKED[0] <= (major, minor) < CHECKED[1]:
        return {}
    return {"xla_cpu_use_fusion_emitters": False}


#: The XLA options every bayesrank program compiles with (empty: XLA's defaults).
COMPILER_OPTIONS: dict = _options()


class _Program:
    """A function jitted twice: with ``COMPILER_OPTIONS`` where no trace is active, plainly
    inside one. Attributes (``lower``, ``trace``, ``eval_shape``, ...) are the first's."""

    def __init__(self, fun, **jit_kwargs):
        self._top = jax.jit(fun, compiler_options=COMPILER_OPTIONS, **jit_kwargs)
        self._nested = jax.jit(fun, **jit_kwargs)
        functools.update_wrapper(self, fun)

    def __call__(self, *args, **kwargs):
        if _top_level():
            return self._top(*args, **kwargs)
        return self._nested(*args, **kwargs)

    def __getattr__(self, name):
        return getattr(self._top, name)


def jit(fun, **jit_kwargs):
    """``jax.jit(fun, **jit_kwargs)`` with ``COMPILER_OPTIONS`` (module docstring); as
    ``@jit`` or ``@partial(jit, static_argnames=(...))``."""
    if not COMPILER_OPTIONS:
        return jax.jit(fun, **jit_kwargs)
    return _Program(fun, **jit_kwargs)
