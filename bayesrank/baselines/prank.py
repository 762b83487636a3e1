"""PRank (Crammer & Singer 2001), the perceptron ranker with ordered thresholds, one ``lax.scan``.

K. Crammer and Y. Singer, "Pranking with ranking", NIPS 14 (2001), Figure 2 (also in the lecture
notes "Preference Learning: Modelli e Metodi"), on examples ``(x^t, y^t)`` with ranks ``y^t`` in
``{1, ..., k}``::

    Initialize: w^1 = 0, b^1_1 = ... = b^1_{k-1} = 0, b^1_k = +inf
    for t = 1, 2, ..., T:
        yhat^t = min {r in 1..k : w^t . x^t - b^t_r < 0}
        if yhat^t != y^t:
            for r = 1..k-1:  y^t_r = -1 if y^t <= r else +1
            for r = 1..k-1:  tau^t_r = y^t_r if (w^t . x^t - b^t_r) y^t_r <= 0 else 0
            w^{t+1} = w^t + (sum_r tau^t_r) x^t
            for r = 1..k-1:  b^{t+1}_r = b^t_r - tau^t_r
        else:
            w^{t+1} = w^t, b^{t+1} = b^t
    Output: H(x) = min {r in 1..k : w^{T+1} . x - b^{T+1}_r < 0}

**Grades here are 0-based**: a grade ``g`` in ``{0, ..., K-1}`` is the paper's rank ``g + 1``
(``k = K``), threshold ``b[r]`` (``r = 0..K-2``) is the paper's ``b_{r+1}``, and ``y_r = -1``
if ``g <= r`` (the paper's ``y <= r + 1``); ``b_k = +inf`` is implicit (``b`` holds the ``K-1``
finite thresholds). Predicted grades are ``min {r in 0..K-1 : w . x - b[r] < 0}``, which for
ordered thresholds is the number of thresholds with ``w . x >= b[r]``. The thresholds stay
ordered, ``b[0] <= ... <= b[K-2]``, after every update (Crammer & Singer's Lemma 1), and they
stay integers (each update moves them by 0 or 1).

One *step* is one example; an *epoch* is a pass over the examples in ``order`` (default: row
order), repeated ``n_epochs`` times. ``averaged=True`` also returns the mean of the iterates
``(w^{t+1}, b^{t+1})`` over all ``T`` steps (the averaged perceptron, Freund & Schapire 1999,
as used for ranking perceptrons; Harrington 2003's OAP-BPM instead averages several PRanks run
on subsampled streams).

Everything is a pure function of arrays (never jitted here; static under ``jit``: ``n_grades``,
``n_epochs`` and ``averaged``), ``vmap``-able over padded queries: rows with ``mask = False``
are no steps (no update, not counted in the average). The estimator ``PRank`` pads the
documents to bucketed sizes (``data.batch.pad_rows``) so that similar sizes reuse the program;
it shares only the estimator face and the padding (``data.batch``) with RankSVM and RankBoost.
"""

from __future__ import annotations

from functools import partial
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from ..compiler import jit
from ..data.batch import bucket_size, pad_rows
from ..data.checks import check_grade_levels, options
from ._arrays import as_float, cast_checked, check_columns, float_dtype
from ._estimator import Ranker, check_inputs

__all__ = ["PRank", "PRankModel", "fit", "predict_grades", "predict_scores"]


class PRankModel(NamedTuple):
    """The learned ranking rule ``H(x) = min {r : w . x - b[r] < 0}`` (0-based, ``b[K-1] = +inf``
    implicit).

    Attributes:
        w: ``(d,)`` weights after the last step.
        b: ``(K-1,)`` thresholds after the last step, ordered.
        w_avg: ``(d,)`` mean of ``w`` over all steps, or None (fitted with ``averaged=False``).
        b_avg: ``(K-1,)`` mean of ``b`` over all steps, or None.
    """

    w: jax.Array
    b: jax.Array
    w_avg: jax.Array | None = None
    b_avg: jax.Array | None = None


def _rank(s, b):
    """The rank rule ``min {r in 0..K-1 : s - b[r] < 0}`` for one score ``s`` and thresholds
    ``b: (K-1,)`` (``b[K-1] = +inf`` appended; ``s`` finite, so the set is never empty)."""
    below = (s - b) < 0
    return jnp.argmax(jnp.append(below, True)).astype(jnp.int32)


def _steps(order, n: int, n_epochs: int):
    """The row visited at each step: ``(n_epochs * m,)`` from ``order: (m,)`` (every epoch) or
    ``(n_epochs, m)`` (one row per epoch); None = ``0..n-1`` every epoch. Concrete indices are
    checked to lie in ``0..n-1``."""
    if order is None:
        return jnp.tile(jnp.arange(n), n_epochs)
    order = jnp.asarray(order)
    if not jnp.issubdtype(order.dtype, jnp.integer):
        raise ValueError(f"order must hold integer row indices, got dtype {order.dtype}")
    if not isinstance(order, jax.core.Tracer) and order.size:  # JAX would clip silently
        values = np.asarray(order).reshape(-1)
        if (bad := (values < 0) | (values >= n)).any():
            i = int(np.argmax(bad))
            raise ValueError(f"order holds row {values[i]}, outside 0..{n - 1}")
    if order.ndim == 1:
        return jnp.tile(order, n_epochs)
    if order.ndim == 2 and order.shape[0] == n_epochs:
        return order.reshape(-1)
    raise ValueError(
        f"order has shape {tuple(order.shape)}: it must be (m,) (the same order every epoch) "
        f"or (n_epochs, m) = ({n_epochs}, m)"
    )


def _check_grades(y, n: int, n_grades: int, mask):
    """``y: (n,)`` integer grades; where concrete (not traced), each unmasked one in
    ``[0, n_grades)``."""
    y = jnp.asarray(y)
    if y.shape != (n,):
        raise ValueError(f"y has shape {tuple(y.shape)}, expected ({n},): one grade per row")
    if not jnp.issubdtype(y.dtype, jnp.integer):
        raise ValueError(f"y must hold integer grades 0..n_grades-1, got dtype {y.dtype}")
    if not isinstance(y, jax.core.Tracer) and not isinstance(mask, jax.core.Tracer):
        values = np.asarray(y)
        live = np.ones(n, bool) if mask is None else np.asarray(mask, bool)
        bad = live & ((values < 0) | (values >= n_grades))
        if bad.any():
            i = int(np.argmax(bad))
            raise ValueError(f"y[{i}] = {values[i]} is not a grade in 0..{n_grades - 1}")
    return y


def _score_lost(w, x, s):
    """Whether the score ``s = w . x`` left the float range: not finite (overflow), or below
    what rounding would hide (``|s| < d tiny / eps``) while a product ``w_k x_k`` of nonzero
    factors underflowed (to 0 or a subnormal): the rank rule compares ``s`` with integer
    thresholds, so a lost score is a wrong decision, not a rounding."""
    info = jnp.finfo(s.dtype)
    p = w * x
    lost = ((p == 0) & (w != 0) & (x != 0)) | ((p != 0) & (jnp.abs(p) < info.tiny))
    small = jnp.abs(s) < w.shape[0] * info.tiny / info.eps
    return ~jnp.isfinite(s) | (jnp.any(lost) & small)


def _fit_core(X, y, n_grades, n_epochs, order, averaged, mask):
    """``fit`` unchecked: ``(model, step)``, ``step`` (int32) the first live step whose score left
    the float range (``_score_lost``) or whose update overflowed, ``-1`` if none."""
    X = check_columns(as_float(X))
    dtype = X.dtype
    n, d = X.shape
    n_grades = options.check_int(n_grades, "n_grades", low=1)
    n_epochs = options.check_int(n_epochs, "n_epochs", low=1)
    averaged = options.check_bool(averaged, "averaged")
    if mask is not None:
        mask = jnp.asarray(mask)
        if mask.shape != (n,):
            raise ValueError(f"mask has shape {tuple(mask.shape)}, expected ({n},)")
    y = _check_grades(y, n, n_grades, mask)
    live = jnp.ones(n, bool) if mask is None else mask.astype(bool)
    steps = _steps(order, n, n_epochs)
    r = jnp.arange(n_grades - 1)

    def step(carry, t_i):
        w, b, w_sum, b_sum, first = carry
        t, i = t_i
        x, g, valid = X[i], y[i], live[i]
        s = jnp.dot(w, x)
        first = jnp.where((first < 0) & valid & _score_lost(w, x, s), t, first)
        y_r = jnp.where(g <= r, -1, 1).astype(dtype)  # (K-1,)
        tau = jnp.where((s - b) * y_r <= 0, y_r, 0)
        tau = jnp.where(valid & (_rank(s, b) != g), tau, 0)  # update only on a mistake
        w = w + jnp.sum(tau) * x
        b = b - tau
        if averaged:
            w_sum = w_sum + jnp.where(valid, w, 0)
            b_sum = b_sum + jnp.where(valid, b, 0)
        finite = jnp.all(jnp.isfinite(w)) & jnp.all(jnp.isfinite(w_sum))
        first = jnp.where((first < 0) & ~finite, t, first)
        return (w, b, w_sum, b_sum, first), None

    w0, b0 = jnp.zeros(d, dtype), jnp.zeros(n_grades - 1, dtype)
    carry = (w0, b0, w0, b0, jnp.int32(-1))
    ts = jnp.arange(steps.shape[0], dtype=jnp.int32)
    (w, b, w_sum, b_sum, first), _ = jax.lax.scan(step, carry, (ts, steps))
    if not averaged:
        return PRankModel(w, b), first
    count = jnp.maximum(jnp.sum(live[steps]), 1).astype(dtype)
    return PRankModel(w, b, w_sum / count, b_sum / count), first


def fit(
    X,
    y,
    n_grades: int,
    *,
    n_epochs: int = 1,
    order=None,
    averaged: bool = False,
    mask=None,
) -> PRankModel:
    """PRank, the published online algorithm (see the module docstring), over ``n_epochs``
    passes.

    Args:
        X: ``(n, d)`` examples.
        y: ``(n,)`` integer grades in ``0..n_grades-1`` (the paper's ranks minus one).
        n_grades: ``K >= 1`` (static); the model has ``K - 1`` thresholds.
        n_epochs: passes over the examples (static, ``>= 1``).
        order: the rows visited, ``(m,)`` int for the same order every epoch or
            ``(n_epochs, m)`` for one order per epoch (indices into ``X``; repeats allowed);
            None = ``0, ..., n-1`` every epoch.
        averaged: static; if True, also return the mean of the iterates after each step.
        mask: ``(n,)`` bool, False for padded rows (visiting them is no step); None = all rows.

    Returns:
        ``PRankModel``: ``w: (d,)``, ``b: (K-1,)`` in ``X``'s dtype, and ``w_avg: (d,)``,
        ``b_avg: (K-1,)`` with ``averaged`` (zeros when no step was taken), else None.

    Raises:
        ValueError: (concrete inputs) when a score ``x . w`` left the float range (it
            overflowed, or underflowed where the rank rule needs its sign), naming the step,
            the row and the span of ``|X|``. Under ``jit`` this is not checked (the
            estimator ``PRank`` checks it).
    """
    model, first = _fit_core(X, y, n_grades, n_epochs, order, averaged, mask)
    if not isinstance(first, jax.core.Tracer) and (t := int(first)) >= 0:
        raise _range_error(t, int(_steps(order, np.shape(X)[0], n_epochs)[t]), X)
    return model


def _range_error(step: int, row: int, X) -> ValueError:
    """The ``ValueError`` of a fit whose score left the float range at ``step`` (row ``row``)."""
    X, dtype = np.asarray(X), np.dtype(np.asarray(X).dtype)
    nonzero = np.abs(X[X != 0])
    span = f"{nonzero.min():.3g}..{nonzero.max():.3g}" if nonzero.size else "0"
    return ValueError(
        f"PRank's score x . w of X[{row}] at step {step} left {dtype.name}'s range (|X| spans "
        f"{span}): PRank compares scores, which grow as |X|^2, with integer thresholds, so it "
        "is not scale-free and needs features whose squares are normal numbers; standardise X "
        "(e.g. to unit variance)"
    )


def _weights(model: PRankModel, averaged: bool):
    if not averaged:
        return model.w, model.b
    if model.w_avg is None:
        raise ValueError("averaged=True needs a model fitted with averaged=True")
    return model.w_avg, model.b_avg


def predict_scores(model: PRankModel, X, averaged: bool = False):
    """Scores ``X @ w``, ``(n,)``, of ``X: (n, d)`` (``w_avg`` with ``averaged=True``)."""
    w, _ = _weights(model, averaged)
    return check_columns(jnp.asarray(X)) @ w


def predict_grades(model: PRankModel, X, averaged: bool = False):
    """Grades ``(n,)`` int32 in ``0..K-1`` of ``X: (n, d)`` by the rank rule
    ``min {r : x . w - b[r] < 0}`` (``w_avg``, ``b_avg`` with ``averaged=True``)."""
    _, b = _weights(model, averaged)
    return jax.vmap(_rank, in_axes=(0, None))(predict_scores(model, X, averaged), b)


# The estimator's compiled cores: static are the number of grades and epochs (shapes, a loop
# length) and the averaging flag; X, y, the order and the mask are traced.
@partial(jit, static_argnames=("n_grades", "n_epochs", "averaged"))
def _fit_jit(X, y, order, mask, n_grades, n_epochs, averaged):
    return _fit_core(X, y, n_grades, n_epochs, order, averaged, mask)


@jit
def _predict_jit(model, X):
    scores = predict_scores(model, X)
    lost = jax.vmap(_score_lost, in_axes=(None, 0, 0))(model.w, X, scores)
    return scores, predict_grades(model, X), lost


def _normal_features(X: np.ndarray, dtype) -> np.ndarray:
    """``X`` in ``dtype`` (``cast_checked``), refusing subnormal entries naming the first: the
    compiled program flushes subnormal results to 0, so PRank's weights and scores built from
    them would be silently other than its rule's."""
    Z = cast_checked(X, dtype)
    if (bad := (Z != 0) & (np.abs(Z) < np.finfo(dtype).tiny)).any():
        i, j = (int(k) for k in np.argwhere(bad)[0])
        raise ValueError(
            f"X[{i}, {j}] = {X[i, j]:.3g} is subnormal in "
            f"{np.dtype(dtype).name} (below {np.finfo(dtype).tiny:.3g}): PRank's scores of such "
            "features leave the float range; standardise X (e.g. to unit variance)"
        )
    return Z


def _integer_grades(y: np.ndarray) -> np.ndarray:
    """``y: (n,)`` float64 (checked finite) as int64 grades in ``[0, MAX_GRADE]`` (PRank learns
    a threshold per grade); ``ValueError`` naming the first row that is not one, checked before
    the int64 cast (which would wrap ``1e20`` to a negative grade)."""
    try:
        return check_grade_levels(y, "y")
    except ValueError as error:
        raise ValueError(f"{error}: PRank needs integer grades 0, 1, ..., K-1") from None


class PRank(Ranker):
    """PRank estimator (scikit-learn style): one weight vector and ``K - 1`` ordered thresholds
    learned online from graded documents (pointwise: query ids do not enter the model).

    Args (hyperparameters only):
        n_epochs: passes over the training documents (an integer >= 1).
        averaged: predict with the mean of ``(w, b)`` over all steps instead of the last iterate.
        shuffle: visit the documents in a new random order each epoch (else in row order).
        random_state: the seed of the shuffles, anything ``numpy.random.default_rng`` takes
            (None: fresh entropy, so fits differ; an int: reproducible).

    Learned attributes: ``coef_: (d,)`` and ``thresholds_: (K-1,)`` (averaged ones with
    ``averaged=True``), ``n_grades_`` (``K = max(y) + 1``), ``n_features_in_``.

    ``predict`` gives scores ``X @ coef_`` (ranking within a query), ``predict_grade`` the grades;
    ``score`` is the pairwise accuracy (``pairwise_accuracy``) of ``predict``.

    PRank is not scale-free (scores grow as ``|X|^2``, thresholds move by 1): ``fit`` and
    ``predict`` raise ``ValueError`` naming the row when a score leaves the float range
    (overflows, or underflows where its sign decides a grade) instead of returning wrong grades.
    """

    def __init__(
        self,
        n_epochs: int = 1,
        averaged: bool = False,
        shuffle: bool = False,
        random_state=None,
    ):
        self.n_epochs = n_epochs
        self.averaged = averaged
        self.shuffle = shuffle
        self.random_state = random_state

    def _check_params(self) -> np.random.Generator:
        """Every hyperparameter (``ValueError`` naming the first at fault); the shuffling
        generator."""
        options.check_int(self.n_epochs, "n_epochs", low=1)
        options.check_bool(self.averaged, "averaged")
        options.check_bool(self.shuffle, "shuffle")
        try:
            return np.random.default_rng(self.random_state)
        except (TypeError, ValueError) as err:
            raise ValueError(
                "random_state must be None, an integer >= 0 or a numpy Generator (anything "
                f"numpy.random.default_rng takes), got {self.random_state!r}: {err}"
            ) from None

    def fit(self, X, y, qid=None) -> PRank:
        """Fit on documents ``X: (n, d)`` with integer grades ``y: (n,)`` in ``0..K-1``;
        ``qid: (n,)`` is checked and otherwise ignored (PRank is pointwise)."""
        rng = self._check_params()
        X, y, _ = check_inputs(X, y, qid, type(self).__name__)
        grades = _integer_grades(y)
        dtype = float_dtype()
        n, size, n_epochs = len(X), bucket_size(len(X)), int(self.n_epochs)
        n_grades = int(grades.max()) + 1
        order = np.tile(np.arange(size, dtype=np.int32), (n_epochs, 1))
        if self.shuffle:  # padded rows stay at the end: they are no steps wherever they are
            for e in range(n_epochs):
                order[e, :n] = rng.permutation(n)
        y_pad = pad_rows(grades, size, dtype=np.int32)
        model, first = _fit_jit(
            pad_rows(_normal_features(X, dtype), size, dtype=dtype),
            y_pad,
            order,
            np.arange(size) < n,
            n_grades=n_grades,
            n_epochs=n_epochs,
            averaged=bool(self.averaged),
        )
        if (t := int(first)) >= 0:  # the row visited at step t (padded rows are no steps)
            raise _range_error(t, int(order.reshape(-1)[t]), X)
        w, b = (model.w_avg, model.b_avg) if self.averaged else (model.w, model.b)
        self.coef_ = np.asarray(w)
        self.thresholds_ = np.asarray(b)
        self.n_grades_ = n_grades
        self.n_features_in_ = X.shape[1]
        return self

    def _predict(self, X) -> tuple[np.ndarray, np.ndarray]:
        self._check_fitted()
        X = self._check_X(X)
        dtype = float_dtype()
        model = PRankModel(jnp.asarray(self.coef_, dtype), jnp.asarray(self.thresholds_, dtype))
        scores, grades, lost = _predict_jit(
            model, pad_rows(_normal_features(X, dtype), dtype=dtype)
        )
        if (bad := np.flatnonzero(np.asarray(lost)[: len(X)])).size:
            i = int(bad[0])
            raise ValueError(
                f"PRank's score X[{i}] . coef_ = {float(scores[i]):.3g} left "
                f"{np.dtype(dtype).name}'s range (max |X[{i}]| = {np.max(np.abs(X[i])):.3g}, "
                f"max |coef_| = {np.max(np.abs(self.coef_)):.3g}): its grade would be wrong; "
                "standardise X as for fit"
            )
        return np.asarray(scores)[: len(X)], np.asarray(grades)[: len(X)].astype(np.int64)

    def predict(self, X) -> np.ndarray:
        """Scores ``(n,)`` ``X @ coef_`` of ``X: (n, d)``: higher ranks first."""
        return self._predict(X)[0]

    def predict_grade(self, X) -> np.ndarray:
        """Grades ``(n,)`` int64 in ``0..n_grades_-1`` of ``X: (n, d)`` by the rank rule
        ``min {r : x . coef_ - thresholds_[r] < 0}``."""
        return self._predict(X)[1]
