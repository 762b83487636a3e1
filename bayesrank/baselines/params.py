"""scikit-learn's parameter face, shared by every estimator of the package: the baselines'
rankers (``Ranker`` in ``_estimator``) and ``bayesrank.label_ranking``'s label rankers.

Host-side Python only: nothing here runs JAX.
"""

from __future__ import annotations

import inspect

__all__ = ["Params"]


def _differs(value, default) -> bool:
    """Whether a parameter differs from its default (``1`` and ``1.0`` do not; ``True`` and ``1``
    do; anything that cannot be compared does)."""
    if value is default:
        return False
    try:
        return bool(value != default) or isinstance(value, bool) != isinstance(default, bool)
    except (TypeError, ValueError):
        return True


class Params:
    """scikit-learn's parameter face, shared by every estimator of the package (rankers,
    label rankers): ``get_params`` / ``set_params`` read the names from ``__init__``'s
    signature, and ``repr`` lists the parameters that differ from their defaults."""

    @classmethod
    def _param_names(cls) -> tuple[str, ...]:
        sig = inspect.signature(cls.__init__)
        return tuple(p for p in sig.parameters if p != "self")

    def get_params(self, deep: bool = True) -> dict:
        """The hyperparameters, ``{name: value}`` (scikit-learn's ``get_params``)."""
        return {k: getattr(self, k) for k in self._param_names()}

    def set_params(self, **params):
        """Set hyperparameters by name; ``ValueError`` for an unknown name. Returns ``self``."""
        names = self._param_names()
        for k, v in params.items():
            if k not in names:
                raise ValueError(f"unknown parameter {k!r}; {type(self).__name__} has {names}")
            setattr(self, k, v)
        return self

    def __repr__(self) -> str:
        defaults = inspect.signature(type(self).__init__).parameters
        changed = [
            f"{k}={v!r}" for k, v in self.get_params().items() if _differs(v, defaults[k].default)
        ]
        return f"{type(self).__name__}({', '.join(changed)})"
