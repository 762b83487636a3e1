"""Semi-synthetic label-ranking benchmarks made from classification data (Hüllermeier,
Fürnkranz, Cheng & Brinker 2008, Sec. 6; Cheng, Hühn & Hüllermeier 2009, Sec. 5, "Decision tree
and instance-based learning for label ranking", ICML).

Construction. A naive Bayes classifier is fitted to the WHOLE classification data set
``(X, y)``; for each instance, the ``c`` class labels are ranked by the classifier's predicted
class probabilities, most probable first::

    orders[i] = labels sorted by decreasing P_NB(label | x_i)   (equal values: lower index first)

so the top label of every ranking is naive Bayes's prediction (not always the true class).
Here the classifier is scikit-learn's ``GaussianNB`` (a normal density per class and feature);
the authors used Weka's naive Bayes.

``decimals``: the benchmark files the authors published (the KEBI Marburg label-ranking data,
redistributed e.g. in ``scikit-lr``'s ``iris.csv`` / ``wine.csv``) rank by the probabilities
*rounded to three decimals*, ties going to the lower label index: wherever two probabilities
are below 0.0005, the two labels are in index order, not in the order of their probabilities.
``decimals=3`` (default) reproduces that: checked against those files, 147 of the 150 iris
rankings and 177 of the 178 wine rankings are identical (the others differ where Weka's and
scikit-learn's naive Bayes disagree in the third decimal or, for one wine instance, on the top
label: 0.52 / 0.48). ``decimals=None`` ranks by the exact posterior (compared in log space, so
probabilities that underflow to 0 are still ordered).

``scale``: the published files also min-max scale every feature to ``[-1, 1]`` over the whole
data set; ``scale=True`` (default) does the same (it does not change the naive Bayes rankings,
which are invariant to affine rescaling of a feature, but it does change an L2-penalised
learner). scikit-learn's iris follows Fisher's paper in rows 35 and 38, where the UCI file
behind the published data has two known errors.

scikit-learn (the test extra, not a dependency of the package) is imported inside the functions.
"""

from __future__ import annotations

import numpy as np

from ._checks import check_X

__all__ = ["load_label_ranking", "naive_bayes_orders", "orders_from_scores"]

_LOADERS = ("iris", "wine")


def orders_from_scores(scores, decimals: int | None = None) -> np.ndarray:
    """Labels by decreasing score, equal scores in increasing label index.

    Args:
      scores: ``(n, c)`` real scores (probabilities, log-probabilities).
      decimals: round the scores to this many decimals first (None: no rounding).

    Returns:
      ``(n, c)`` int64 orders (row: labels from most to least preferred).
    """
    s = np.asarray(scores, dtype=np.float64)
    if decimals is not None:
        s = np.round(s, decimals)
    return np.argsort(-s, axis=1, kind="stable").astype(np.int64)


def _sklearn(module: str):
    """``sklearn.<module>``, or ``ModuleNotFoundError`` saying in one line what to install
    (scikit-learn is not among bayesrank's dependencies; ``bayesrank[test]`` carries it)."""
    import importlib

    try:
        return importlib.import_module(f"sklearn.{module}")
    except ModuleNotFoundError as error:
        if error.name not in ("sklearn", f"sklearn.{module}"):
            raise
        raise ModuleNotFoundError(
            "the label-ranking benchmarks (iris and wine, ranked by naive Bayes) come from "
            "scikit-learn, which is not installed: pip install scikit-learn",
            name="sklearn",
        ) from None


def naive_bayes_orders(X, y, decimals: int | None = 3) -> np.ndarray:
    """Label rankings from a Gaussian naive Bayes fitted to all of ``(X, y)``.

    Args:
      X: ``(n, d)`` finite features; y: ``(n,)`` class labels ``0..c-1`` (every class present).
      decimals: rank by the probabilities rounded to this many decimals (3: as the published
        benchmark files), or None: by the exact posterior (log space).

    Returns:
      ``(n, c)`` int64 orders; ``orders[:, 0]`` is naive Bayes's predicted class.

    Raises:
      ValueError: for a non-finite ``X``, or ``y`` not of ``n`` labels covering ``0..c-1``.
    """
    GaussianNB = _sklearn("naive_bayes").GaussianNB
    X = check_X(X)
    y = np.asarray(y)
    if y.shape != (X.shape[0],):
        raise ValueError(f"y must have shape ({X.shape[0]},) like X's rows, got {y.shape}")
    classes = np.unique(y)
    if not np.array_equal(classes, np.arange(len(classes))) or len(classes) < 2:
        raise ValueError(f"y must hold the labels 0..c-1 (c >= 2), each present; got {classes}")
    nb = GaussianNB().fit(X, y)
    if decimals is None:
        return orders_from_scores(nb.predict_joint_log_proba(X))
    return orders_from_scores(nb.predict_proba(X), decimals)


def load_label_ranking(name: str, *, decimals: int | None = 3, scale: bool = True):
    """The ``iris`` or ``wine`` label-ranking benchmark, from scikit-learn's bundled data.

    Args:
      name: ``"iris"`` (150 x 4, 3 labels) or ``"wine"`` (178 x 13, 3 labels).
      decimals: as ``naive_bayes_orders`` (3: the published construction).
      scale: min-max scale each feature to ``[-1, 1]`` (as the published files).

    Returns:
      ``(X, orders)``: ``X: (n, d)`` float64 features, ``orders: (n, c)`` int64 label ORDERS
      (row ``i``: the class labels from most to least probable under naive Bayes;
      ``metrics.orders_to_positions`` gives each label's position).
    """
    if name not in _LOADERS:
        raise ValueError(f"name must be one of {_LOADERS}, got {name!r}")
    datasets = _sklearn("datasets")
    X, y = getattr(datasets, f"load_{name}")(return_X_y=True)
    X = np.asarray(X, dtype=np.float64)
    orders = naive_bayes_orders(X, y, decimals)
    if scale:
        lo, hi = X.min(axis=0), X.max(axis=0)
        X = 2.0 * (X - lo) / np.where(hi > lo, hi - lo, 1.0) - 1.0
    return X, orders
