"""The scikit-learn face shared by ``RankSVM`` and
``RankBoost``: parameters, ``repr``, ``score`` and option checks.

**scikit-learn** is not a dependency: the estimators are duck-typed (``get_params``,
``set_params``, ``fit`` returning ``self``, learned attributes ending in ``_``), and the two hooks
scikit-learn asks for import it only when scikit-learn itself calls them:

* ``__sklearn_tags__``: an estimator of no scikit-learn type (a ranker is neither a classifier
  nor a regressor), ``y`` required, dense 2-D ``X`` without NaN.
* ``get_metadata_routing``: ``fit`` and ``score`` always request ``qid``. With
  ``sklearn.set_config(enable_metadata_routing=True)`` a meta-estimator then hands each fold's
  ``qid`` to both (no ``set_fit_request`` / ``set_score_request`` calls needed)::

      sklearn.set_config(enable_metadata_routing=True)
      search = GridSearchCV(RankSVM(), {"C": [0.01, 0.1, 1]}, cv=GroupKFold(3))
      search.fit(X, y, qid=qid, groups=qid)   # groups: to GroupKFold; qid: to fit and score

  Without metadata routing scikit-learn passes ``qid`` to ``fit`` only, and ``score(X, y)``
  then counts the whole test fold as one query (see ``Ranker.score``): use routing.

``qid=None`` in ``fit`` and ``score`` means *one query* (every pair of documents with different
grades is a pair), which is how scikit-learn's checks, which know nothing of queries, call them.

Host-side NumPy only: nothing here runs JAX, so nothing here compiles.
"""

from __future__ import annotations

import abc
import numbers

import numpy as np

from ._data import check_ranking_data, check_X, pairs_within_queries, query_codes
from .params import Params

__all__ = [
    "Params",
    "Ranker",
    "check_documents",
    "check_inputs",
    "check_int",
    "pairwise_accuracy",
]


def check_int(name: str, value, *, low: int, none_ok: bool = False):
    """An integer ``>= low`` (bools are not integers here); ``ValueError`` naming the option.

    (The estimators' constructor options use ``bayesrank.data.checks.options``; this one
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
            (``query_codes``).
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


def _dense(a, name: str) -> np.ndarray:
    """``a`` as a NumPy array, refusing in scikit-learn's words what the data checks
    (``bayesrank.data.checks``) would only call "not a real numeric array": a scipy sparse
    matrix, complex numbers. (Object arrays stay refused there: strings are never parsed.)"""
    if type(a).__module__.startswith("scipy.sparse"):
        raise ValueError(
            f"{name} is a {type(a).__name__}: sparse input is not supported; pass {name}.toarray()"
        )
    arr = np.asarray(a)
    if arr.dtype.kind == "c":
        raise ValueError(f"{name} has dtype {arr.dtype}: Complex data not supported")
    return arr


def check_documents(X, n_features: int | None = None, owner: str = "the ranker") -> np.ndarray:
    """Documents ``X: (n, d)`` as float64 (``check_X``), with the messages
    scikit-learn's conventions ask for where they differ: a 1-D ``X`` says how to reshape it, a
    wrong number of features names what ``owner`` was fitted on, a NaN or inf says "NaN and inf".

    Raises:
        ValueError: naming the shape, the feature count or the first non-finite entry
            (``X[2, 1] = nan is not finite``); sparse or complex ``X``.
    """
    X = _dense(X, "X")
    if X.ndim == 1:
        raise ValueError(
            f"X must be 2-D (n, d), got shape {X.shape}. Reshape your data: X.reshape(-1, 1) "
            "for a single feature, X.reshape(1, -1) for a single document"
        )
    if n_features is not None and X.ndim == 2 and X.shape[1] != n_features:
        raise ValueError(
            f"X has {X.shape[1]} features, but {owner} is expecting {n_features} features as "
            "input (the number it was fitted on)"
        )
    if X.ndim == 2 and X.dtype.kind == "f" and not np.all(np.isfinite(X)):
        i, j = (int(k) for k in np.argwhere(~np.isfinite(X))[0])
        raise ValueError(f"X[{i}, {j}] = {X[i, j]} is not finite (NaN and inf are not allowed)")
    return check_X(X, n_features)


def check_inputs(
    X, y, qid=None, owner: str = "the ranker"
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``fit(X, y, qid)``'s inputs checked (``check_ranking_data``).

    Args:
        X: ``(n, d)`` documents; y: ``(n,)`` grades (None is an error naming ``owner``);
            qid: ``(n,)`` query ids of any hashable kind, or None: all rows are one query.

    Returns:
        ``X: (n, d)`` float64, ``y: (n,)`` float64, ``qid: (n,)`` int64 codes (all 0 for None).
    """
    X = check_documents(X, owner=owner)
    if y is None:
        raise ValueError(
            f"{owner} requires y to be passed, but the target y is None: y holds the grades (n,)"
        )
    y = _dense(y, "y")
    if qid is None:
        qid = np.zeros(X.shape[0], np.int64)
    return check_ranking_data(X, y, qid)


class Ranker(Params, abc.ABC):
    """Parameters, ``repr`` and ``score`` of a scikit-learn-style ranker.

    A subclass's ``__init__`` stores its keyword hyperparameters under their own names and does
    nothing else; ``get_params`` reads the names from its signature. Subclasses define
    ``fit`` (returning ``self``) and ``predict``, and are final.
    """

    def _check_X(self, X) -> np.ndarray:
        """``predict``'s documents: ``(n, d)`` float64 with the fitted number of features."""
        return check_documents(X, self.n_features_in_, type(self).__name__)

    def _check_fitted(self):
        if "n_features_in_" not in vars(self):
            raise ValueError(
                f"this {type(self).__name__} is not fitted yet; call fit(X, y, qid) first"
            )

    @abc.abstractmethod
    def fit(self, X, y, qid=None): ...

    @abc.abstractmethod
    def predict(self, X) -> np.ndarray: ...

    def score(self, X, y, qid=None) -> float:
        """Pairwise accuracy of ``predict`` on ``X: (n, d)`` with grades ``y: (n,)`` and
        query ids ``qid: (n,)`` (see ``pairwise_accuracy``: per-query fraction of
        within-query pairs ordered correctly, ties 1/2, averaged over queries); higher is better.
        ``qid=None``: all rows are one query. ``nan`` when no query has two different grades."""
        X, y, qid = check_inputs(X, y, qid, type(self).__name__)
        return pairwise_accuracy(self.predict(X), y, qid)

    def __sklearn_tags__(self):
        """scikit-learn's tags (called by scikit-learn only, which is imported here): no
        estimator type, ``y`` required, dense finite 2-D ``X``."""
        from sklearn.utils import InputTags, Tags, TargetTags

        return Tags(
            estimator_type=None,
            target_tags=TargetTags(required=True),
            input_tags=InputTags(allow_nan=False, sparse=False, two_d_array=True),
        )

    def get_metadata_routing(self):
        """scikit-learn's metadata request (called by scikit-learn only): ``fit`` and ``score``
        always consume ``qid``, so that with metadata routing enabled meta-estimators such as
        ``GridSearchCV`` and ``cross_validate`` pass each fold's query ids to both."""
        from sklearn.utils.metadata_routing import MetadataRequest

        request = MetadataRequest(owner=type(self).__name__)
        request.fit.add_request(param="qid", alias=True)
        request.score.add_request(param="qid", alias=True)
        return request
