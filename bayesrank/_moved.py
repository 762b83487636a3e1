"""Old import paths of public names that moved: they keep working, with a ``DeprecationWarning``.

A module whose names moved assigns ``__getattr__ = moved(__name__, {old: "new.module"})``
(PEP 562): ``from bayesrank.data.letor import read_scores`` then imports the name from its new
module (``bayesrank.data.scores``), the same object, and warns naming the new spelling, as the
learning keywords do (``bayesrank.learning.options``). The new module is imported only when an
old name is asked for, so no import cycle and no import-time work.
"""

from __future__ import annotations

import importlib
import warnings
from collections.abc import Callable, Mapping

__all__ = ["moved"]


def moved(module: str, table: Mapping[str, str]) -> Callable[[str], object]:
    """A module ``__getattr__`` serving the names of ``table`` (``{name: new module}``, or
    ``{name: "new.module:new_name"}`` for a renamed one) from their new modules with a
    ``DeprecationWarning``; any other name is an ``AttributeError``."""

    def __getattr__(name: str):
        if name not in table:
            raise AttributeError(f"module {module!r} has no attribute {name!r}")
        target, _, new = table[name].partition(":")
        new = new or name
        warnings.warn(
            f"{module}.{name} moved to {target}.{new}; import it from there (the old path "
            "will be removed)",
            DeprecationWarning,
            stacklevel=2,
        )
        return getattr(importlib.import_module(target), new)

    return __getattr__
