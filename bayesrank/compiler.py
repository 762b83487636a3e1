"""How bayesrank compiles: ``jit``, which is ``jax.jit`` with the package's XLA options.

Every program of the package is a module-level function decorated ``@jit`` or
``@partial(jit, static_argnames=(...))`` (DESIGN.md, "One jit policy"). A user's own
``jax.jit`` is never touched: the options below hold for bayesrank's programs alone.

**XLA:CPU's loop emitters** (``COMPILER_OPTIONS``). jaxlib 0.6 and later emit each fused
kernel through XLA's MLIR fusion emitters by default. For this package's programs (many small
fusions in ``while`` loops: EP's sweeps, Newton steps, BFGS), the older LLVM IR emitters,
``xla_cpu_use_fusion_emitters=False``, compile the same HLO in about half the time, and the
programs run as fast or faster, with the same bits. On the 2-core CPU (jaxlib 0.10.2), EP's fit
(``bayesrank.inference.ep.fit.fit_core``, 40 pairs on 20 entities) compiled in 0.51 s
against 1.02 s and ran in 0.22 ms against 0.24 ms; at 150 entities 0.66 s against 1.34 s, 10.1
ms against 13.0 ms; at 500 entities 0.98 s against 1.54 s, 198 ms against 208 ms; the mean and
evidence were equal to the last bit (``benchmarks/bench_compiler_options.py`` prints these).
The option is an XLA:CPU one; other backends ignore it.

An option that a jaxlib does not know fails every compile ("No such compile option"), so the
options are given only to the jaxlib versions on which they were checked: 0.6.0 to 0.10.x
(0.4.38 and 0.5.0 refuse this one; 0.4.30's ``jax.jit`` takes no ``compiler_options``). On any
other version ``jit`` is ``jax.jit`` as it is. ``BAYESRANK_XLA_OPTIONS=default`` (read at
import) keeps XLA's defaults too, to compare or to rule the option out.
"""

from __future__ import annotations

import os
from functools import partial
from importlib.metadata import version

import jax

__all__ = ["COMPILER_OPTIONS", "jit"]

#: The jaxlib versions (as ``(major, minor)``, from and up to but not including) on which the
#: options were checked to compile.
CHECKED = ((0, 6), (0, 11))


def _options() -> dict:
    if os.environ.get("BAYESRANK_XLA_OPTIONS", "") == "default":
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

#: ``jax.jit`` with ``COMPILER_OPTIONS``: the one decorator of the package's programs.
jit = partial(jax.jit, compiler_options=COMPILER_OPTIONS) if COMPILER_OPTIONS else jax.jit
