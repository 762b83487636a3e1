"""The scikit-learn face shared by :class:`~bayesrank.baselines.RankSVM` and
:class:`~bayesrank.baselines.RankBoost`: parameters, ``repr``, ``score`` and option checks.

Host-side NumPy only: nothing here runs JAX, so nothing here compiles.
"""

from __future__ import annotations

import abc
import inspect
import numbers

import numpy as np

from ._data import check_ranking_data, pairs_within_queries, query_codes

__all__ = ["Ranker", "check_int", "pairwise_accuracy"]


def check_int(name: str, value, *, low: int, none_ok: bool = False):
    """An integer ``>= low`` (bools are not integers here); ``ValueError`` naming the option.

    (The estimators' constructor options use :mod:`bayesrank.data.checks.options`; this one
    keeps the published message of ``predict``'s ``n_rounds``.)
    """
    if value is None and none_ok:
        return
    if not (isinstance(value, numbers.Integral) and not isinstance(value, bool) and value >= low):
        what = "None or an integer" if none_ok else "an integer"
        raise ValueError(f"{name} must be {what} >= {low}, got {value!r}")


def pairwise_accuracy(scores, y, qid) -> float:
    """Mean over queries of the fraction of within-query pairs ``y_i > y_j`` ordered correctly.

    A pair counts 1 when ``scores_i > scores_j``, 1/2 on a tie, 0 otherwise (so a constant ranker
    scores 0.5); each query with at least one pair counts once, whatever its number of pairs.
    ``nan`` when no query has a pair.

    Args:
        scores: ``(n,)``; y: ``(n,)`` grades; qid: ``(n,)`` query ids of any hashable kind
            (:func:`~bayesrank.baselines._data.query_codes`).
    """
    codes = query_codes(qid, len(y))
    pairs = pairs_within_queries(y, codes)
    if len(pairs) == 0:
        return float("nan")
    s = np.asarray(scores, dtype=np.float64)
    credit = np.sign(s[pairs[:, 0]] - s[pairs[:, 1]]) * 0.5 + 0.5
    _, group = np.unique(codes[pairs[:, 0]], return_inverse=True)
    per_query = np.bincount(group, credit) / np.bincount(group)
    return float(per_query.mean())


def _differs(value, default) -> bool:
    """Whether a parameter differs from its default (``1`` and ``1.0`` do not; ``True`` and ``1``
    do; anything that cannot be compared does)."""
    if value is default:
        return False
    try:
        return bool(value != default) or isinstance(value, bool) != isinstance(default, bool)
    except (TypeError, ValueError):
        return True


class Ranker(abc.ABC):
    """Parameters, ``repr`` and ``score`` of a scikit-learn-style ranker.

    A subclass's ``__init__`` stores its keyword hyperparameters under their own names and does
    nothing else; ``get_params`` reads the names from its signature. Subclasses define
    :meth:`fit` (returning ``self``) and :meth:`predict`, and are final.
    """

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

    def _check_fitted(self):
        if "n_features_in_" not in vars(self):
            raise ValueError(
                f"this {type(self).__name__} is not fitted yet; call fit(X, y, qid) first"
            )

    @abc.abstractmethod
    def fit(self, X, y, qid): ...

    @abc.abstractmethod
    def predict(self, X) -> np.ndarray: ...

    def score(self, X, y, qid) -> float:
        """Pairwise accuracy of :meth:`predict` on ``X: (n, d)`` with grades ``y`` and query ids
        ``qid`` (see :func:`pairwise_accuracy`: per-query fraction of within-query pairs ordered
        correctly, ties 1/2, averaged over queries); higher is better."""
        X, y, qid = check_ranking_data(X, y, qid)
        return pairwise_accuracy(self.predict(X), y, qid)
