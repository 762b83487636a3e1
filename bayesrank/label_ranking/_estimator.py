"""The scikit-learn face shared by the label rankers: parameters, ``repr``, ``score``, tags.

scikit-learn is not a dependency: the estimators are duck-typed (``get_params``, ``set_params``,
``fit`` returning ``self``, learned attributes ending in ``_``), so ``sklearn.base.clone`` and
the model-selection tools accept them; ``__sklearn_tags__`` imports scikit-learn only when
scikit-learn itself calls it. Host-side only: nothing here runs JAX.
"""

from __future__ import annotations

import warnings

import numpy as np

from ..baselines.params import Params
from ..data.batch import bucket_size
from ._checks import check_lengths, check_orders, check_X

__all__ = ["LabelRanker", "padded_size", "warn_unconverged"]


def padded_size(n: int) -> int:
    """The rows a fit or prediction on ``n`` rows compiles at: ``bucket_size(n, per_octave=2)``
    (``1.5 * 2^k`` or ``2^(k+1)``: at most 50% more rows). The estimators pad to it with
    ``data.batch.pad_rows`` and give the padded rows weight 0, so the folds of a
    cross-validation (train sizes that differ by one) and similar sizes reuse one compiled
    program."""
    return bucket_size(n, per_octave=2)


def warn_unconverged(owner: str, converged, X: np.ndarray, C: float, what: str) -> None:
    """A ``ConvergenceWarning`` (``bayesrank.diagnostics``) unless every flag of ``converged``
    holds, naming how many of ``what`` stopped short and the scale at fault, as ``RankSVM``
    does: ``C max|x|^2`` far from 1 leaves Newton's steps below rounding (all-zero weights, a
    constant order) or its system overflowing."""
    from ..diagnostics import ConvergenceWarning

    flags = np.atleast_1d(np.asarray(converged, bool))
    if flags.all():
        return
    scale = float(np.max(np.abs(X), initial=0.0))
    warnings.warn(
        f"{owner} did not converge on {int((~flags).sum())} of {flags.size} {what} "
        f"(converged_ is False there; the fit may be the starting point, all zero): "
        f"max |X| = {scale:.3g}, C = {C:.3g}, C * max|X|^2 = {C * scale * scale:.3g}; "
        "standardise X (e.g. StandardScaler), bring C nearer 1 or raise max_iter",
        ConvergenceWarning,
        stacklevel=3,
    )


class LabelRanker(Params):
    """Parameters, ``repr``, input checks and ``score`` of a label ranker.

    A subclass's ``__init__`` stores its keyword hyperparameters under their own names and does
    nothing else; it defines ``fit(X, rankings)`` (returning ``self``) and ``predict(X)`` (label
    orders ``(n, c)``).
    """

    def __sklearn_tags__(self):
        """scikit-learn's tags (called by scikit-learn only, which is imported here): no
        estimator type, a required 2-D target (the rankings), dense finite 2-D ``X``."""
        from sklearn.utils import InputTags, Tags, TargetTags

        return Tags(
            estimator_type=None,
            target_tags=TargetTags(required=True, multi_output=True, single_output=False),
            input_tags=InputTags(allow_nan=False, sparse=False, two_d_array=True),
        )

    def _check_fit_inputs(self, X, rankings):
        """``fit``'s ``X: (n, d)`` float64 and ``rankings: (n, c)`` int64 orders, checked."""
        name = type(self).__name__
        if rankings is None:
            raise ValueError(f"{name}.fit needs rankings: (n, c) label orders, got None")
        X = check_X(X)
        rankings = check_orders(rankings)
        check_lengths(X, rankings)
        return X, rankings

    def _check_fitted(self):
        if "n_features_in_" not in vars(self):
            raise ValueError(
                f"this {type(self).__name__} is not fitted yet; call fit(X, rankings) first"
            )

    def _check_X(self, X) -> np.ndarray:
        self._check_fitted()
        return check_X(X, n_features=self.n_features_in_, owner=type(self).__name__)

    def score(self, X, rankings) -> float:
        """Mean Kendall tau (``metrics.mean_label_kendall_tau``) of ``predict(X)`` against the
        true orders ``rankings: (n, c)``."""
        from .metrics import mean_label_kendall_tau

        X = self._check_X(X)
        rankings = check_orders(rankings, n_labels=self.n_labels_)
        check_lengths(X, rankings)
        return float(mean_label_kendall_tau(rankings, self.predict(X)))
