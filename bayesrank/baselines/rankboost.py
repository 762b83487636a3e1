"""RankBoost (Freund, Iyer, Schapire & Singer 2003), threshold weak rankers, one ``lax.scan``.

The pseudo-code of J. Rousu's lecture notes on preference learning (Aalto CS-E4710, 2023), on
preference pairs ``p = (w_p, l_p)`` (``w_p`` preferred to ``l_p``; in the notes' notation
``x'_p = x_{w_p}``, ``x_p = x_{l_p}``, ``y_p = +1``)::

    D_1(p) = 1 / m                                          (over the unmasked pairs)
    for t = 1..T:
        h_t = argmin over weak rankers of  eps- - eps+  =  -sum_p D_t(p) (h(x_{w_p}) - h(x_{l_p}))
        alpha_t = 1/2 log(eps+ / eps-)
        D_{t+1}(p) = D_t(p) exp(-alpha_t (h_t(x_{w_p}) - h_t(x_{l_p}))) / Z_t
    f = sum_t alpha_t h_t

with ``eps+ = sum_p D_t(p) [h(x_w) - h(x_l) = 1]``, ``eps- = ... [= -1]``, ``eps0 = ... [= 0]``
and ``Z_t = eps0 + 2 sqrt(eps+ eps-)`` (we divide by the sum of the updated weights, equal to
``Z_t`` in exact arithmetic). The weak rankers are RankLib's: ``h(x) = [x_k > theta]`` for a
single feature ``k`` and a candidate threshold ``theta`` from ``thresholds[k]`` (see
``candidate_thresholds``), and by default also the complements ``[x_k <= theta]``. Without
them the class is not closed under negation: the argmin of ``eps- - eps+`` only finds positive
edges, and boosting stalls (``alpha = 0``) once none is left; with them the rule picks the largest
``|r|``, as Freund et al. do. Ties (edges within ``TIE`` ``= 1e-12`` of the best: equal up to
rounding, as when two features split the documents alike) go to the first candidate in the order
``[x > theta]`` before complements, then feature, then threshold. ``alpha_t`` uses
``(eps+ + s) / (eps- + s)`` with ``s = smoothing`` (default ``1e-12``): a weak ranker without
errors gets a large finite weight.

RankBoost minimises the exponential ranking loss ``sum_p D_1(p) exp(-(f(x_w) - f(x_l))) =
prod_t Z_t``; ``RankBoostInfo`` records it per round.

The edge of every candidate is computed from the per-document potential
``pi_i = sum_{p: w_p = i} D(p) - sum_{p: l_p = i} D(p)`` as ``r(k, theta) = sum_{i: x_ik > theta}
pi_i``: a suffix sum over the documents sorted once per feature, ``O(d n)`` per round.

Everything is a pure function of arrays (never jitted here; static under ``jit``: ``n_rounds``
and ``complements``), ``vmap``-able over padded queries (masked pairs get no weight; padded
documents touched by no pair change no edge); ``predict`` with ``temperature > 0`` replaces
the step by a sigmoid ``sigma((x_k - theta) / temperature)`` so scores are differentiable in ``X``.

It shares no numerics with the RankSVM's Newton solver (boosting is a ``lax.scan`` of greedy
rounds, nothing is minimised by Newton steps): only the estimator face
(``_estimator``) and the padding (``_arrays``).
The estimator ``RankBoost`` pads documents and pairs to bucketed sizes, and the candidate
thresholds to ``n_thresholds`` columns by repeating each feature's last candidate (a repeat never
wins the first-candidate tie rule over its original, so the rounds are unchanged).
"""

from __future__ import annotations

from functools import partial
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from ..compiler import jit
from ..data.batch import bucket_size, pad_pairs, pad_rows
from ..data.checks import options
from ._arrays import (
    PAIR_FILLER,
    as_float,
    cast_checked,
    check_columns,
    float_dtype,
    pair_weights,
)
from ._data import check_X, pairs_within_queries
from ._estimator import Ranker, check_inputs, check_int

__all__ = [
    "THRESHOLD_METHODS",
    "RankBoost",
    "RankBoostInfo",
    "RankBoostModel",
    "candidate_thresholds",
    "exp_loss",
    "fit",
    "predict",
]


THRESHOLD_METHODS = ("uniform", "quantile")


class RankBoostModel(NamedTuple):
    """The learned ranker ``f(x) = sum_t alphas[t] h_t(x)``.

    ``h_t(x) = [x[features[t]] > thresholds[t]]`` where ``signs[t] = +1``, and the complement
    ``[x[features[t]] <= thresholds[t]]`` where ``signs[t] = -1``.

    Attributes:
        features: ``(T,)`` int32 feature index of each round's weak ranker.
        thresholds: ``(T,)`` its threshold.
        signs: ``(T,)`` int32, +1 or -1 (always +1 when fitted with ``complements=False``).
        alphas: ``(T,)`` its weight.
    """

    features: jax.Array
    thresholds: jax.Array
    signs: jax.Array
    alphas: jax.Array


class RankBoostInfo(NamedTuple):
    """Per-round diagnostics, each ``(T,)``: ``eps_plus``, ``eps_minus``, ``eps_zero`` (under
    ``D_t``), ``Z`` (the normaliser) and ``loss``, the exponential ranking loss after the round,
    ``sum_p D_1(p) exp(-(f_t(x_w) - f_t(x_l)))``."""

    eps_plus: jax.Array
    eps_minus: jax.Array
    eps_zero: jax.Array
    Z: jax.Array
    loss: jax.Array


def candidate_thresholds(X, n_thresholds: int | None = 10, method: str = "uniform") -> np.ndarray:
    """Candidate thresholds per feature (host-side NumPy).

    Args:
        X: ``(n, d)`` training documents.
        n_thresholds: candidates per feature; None = every distinct value of the feature.
        method: ``"uniform"`` (RankLib's ``-tc``: ``n_thresholds`` evenly spaced values from the
            feature's minimum to its maximum) or ``"quantile"`` (empirical quantiles).

    Returns:
        ``(d, K)`` thresholds; features with fewer distinct values are padded with ``+inf``
        (a weak ranker that is 0 everywhere, edge 0).
    """
    X = check_X(X)
    options.check_choice(method, "method", THRESHOLD_METHODS)
    options.check_int(n_thresholds, "n_thresholds", low=1, allow_none=True)
    quantiles = None if n_thresholds is None else np.linspace(0, 1, n_thresholds)

    def spread(x):
        if method == "uniform":
            return np.linspace(x.min(), x.max(), n_thresholds)
        return np.quantile(x, quantiles)

    cols = []
    for k in range(X.shape[1]):
        x = X[:, k]
        cols.append(np.unique(x if n_thresholds is None else _halved(spread, x)))
    width = max(len(c) for c in cols)
    out = np.full((X.shape[1], width), np.inf)
    for k, c in enumerate(cols):
        out[k, : len(c)] = c
    return out


def _halved(spread, x: np.ndarray) -> np.ndarray:
    """``spread(x)``, computed on ``x / 2`` and doubled when ``max(x) - min(x)`` overflows (a
    feature spanning more than the float64 range would give ``inf`` steps and NaN candidates)."""
    with np.errstate(over="ignore"):  # the overflow is the test
        span = x.max() - x.min()
    if np.isfinite(span):
        return spread(x)
    return spread(x / 2) * 2


#: Edges (in [-1, 1]: ``D`` sums to 1) closer than this to the best count as tied.
TIE = 1e-12


def _pad_thresholds(thresholds: np.ndarray, width: int, dtype) -> np.ndarray:
    """``(d, K)`` candidates widened to ``(d, width)`` by repeating each row's last entry."""
    return np.pad(thresholds, ((0, 0), (0, width - thresholds.shape[1])), mode="edge").astype(dtype)


def fit(
    X,
    pairs,
    thresholds,
    n_rounds: int,
    pair_mask=None,
    smoothing: float = 1e-12,
    complements: bool = True,
) -> tuple[RankBoostModel, RankBoostInfo]:
    """``n_rounds`` rounds of RankBoost (the pseudo-code of the module docstring).

    Args:
        X: ``(n, d)`` documents (one query, or a whole collection stacked).
        pairs: ``(m, 2)`` int indices into ``X``, winner first.
        thresholds: ``(d, K)`` candidates per feature (``candidate_thresholds``; ``+inf``
            pads).
        n_rounds: ``T`` (static).
        pair_mask: ``(m,)`` bool, False for padded pairs; None = all.
        smoothing: ``s > 0`` in ``alpha = 1/2 log((eps+ + s) / (eps- + s))``, at least the
            smallest normal number of ``X``'s dtype so that ``|alpha|`` stays finite (may be
            traced; then unchecked).
        complements: static; if True (default) the weak rankers ``[x_k <= theta]`` are candidates
            too (Freund et al.'s choice of the largest ``|r|``); if False only ``[x_k > theta]``
            (RankLib), and boosting stalls (``alpha = 0``) once no candidate has a positive edge.

    Returns:
        ``(RankBoostModel, RankBoostInfo)``, arrays of length ``T``.
    """
    X = check_columns(as_float(X))
    dtype = X.dtype
    options.check_int(n_rounds, "n_rounds", low=1)
    if not isinstance(smoothing, jax.core.Tracer):
        _check_smoothing(smoothing, dtype)
    thresholds = jnp.asarray(thresholds, dtype)
    pairs = jnp.asarray(pairs)
    n, d = X.shape
    K = thresholds.shape[1]
    win, lose = pairs[:, 0], pairs[:, 1]
    mask = pair_weights(pairs, pair_mask, dtype)
    D0 = mask / jnp.maximum(jnp.sum(mask), 1.0)

    # Sort each feature once: r(k, theta) is a suffix sum of pi in that order.
    order = jnp.argsort(X, axis=0).T  # (d, n)
    xs = jnp.take_along_axis(X.T, order, axis=1)  # (d, n) ascending
    start = jax.vmap(lambda x, th: jnp.searchsorted(x, th, side="right"))(xs, thresholds)  # (d, K)

    def round_(carry, _):
        D, f = carry
        pi = jnp.zeros(n, dtype).at[win].add(D).at[lose].add(-D)
        suffix = jnp.cumsum(pi[order][:, ::-1], axis=1)[:, ::-1]  # suffix[k, s] = sum_{q>=s}
        suffix = jnp.concatenate([suffix, jnp.zeros((d, 1), dtype)], axis=1)
        r = jnp.take_along_axis(suffix, start, axis=1).reshape(-1)  # (d K,), [x_k > theta]
        if complements:  # [x_k <= theta] = 1 - [x_k > theta]: edge -r (sum_i pi_i = 0)
            r = jnp.concatenate([r, -r])
        # ties (edges within TIE of the best, i.e. equal up to rounding) go to the first candidate
        best = jnp.argmax(r >= jnp.max(r) - TIE)
        sign = jnp.where(best < d * K, 1, -1)
        best = best % (d * K)
        k, theta = best // K, thresholds.reshape(-1)[best]
        h = _weak(X[:, k], theta, sign).astype(dtype)
        u = h[win] - h[lose]
        eps_plus = jnp.sum(D * (u > 0))
        eps_minus = jnp.sum(D * (u < 0))
        eps_zero = jnp.sum(D * (u == 0))
        alpha = 0.5 * jnp.log((eps_plus + smoothing) / (eps_minus + smoothing))
        D_new = D * jnp.exp(-alpha * u)
        Z = jnp.sum(D_new)
        D_new = D_new / jnp.where(Z > 0, Z, 1.0)
        f = f + alpha * h
        loss = jnp.sum(D0 * jnp.exp(-(f[win] - f[lose])))
        out = (k.astype(jnp.int32), theta, sign.astype(jnp.int32), alpha)
        return (D_new, f), (out, (eps_plus, eps_minus, eps_zero, Z, loss))

    _, (model, info) = jax.lax.scan(round_, (D0, jnp.zeros(n, dtype)), None, length=n_rounds)
    return RankBoostModel(*model), RankBoostInfo(*info)


def _check_smoothing(smoothing, dtype) -> float:
    # 1 / s must be finite: alpha = 1/2 log((eps+ + s) / s) when no pair is misordered.
    smoothing = options.check_float(smoothing, "smoothing", 0.0, low_open=True)
    return options.check_representable(smoothing, "smoothing", dtype)


def _weak(x, theta, sign):
    """The weak ranker ``[x > theta]`` (``sign = +1``) or its complement ``[x <= theta]`` (-1)."""
    return jnp.where(sign > 0, x > theta, x <= theta)


def predict(model: RankBoostModel, X, temperature: float | None = None, n_rounds=None):
    """Scores ``(n,)`` of documents ``X: (n, d)``.

    Args:
        model: a ``RankBoostModel`` (``T`` rounds).
        temperature: None or 0 = the hard step ``[x_k > theta]``; ``> 0`` = the sigmoid
            ``sigma((x_k - theta) / temperature)``, smooth in ``X`` (tends to the step as the
            temperature goes to 0, except exactly at ``x_k = theta``).
        n_rounds: use only the first rounds (an int, may be traced); None = all ``T``.
    """
    X = check_columns(jnp.asarray(X))
    cols = X[:, model.features]  # (n, T)
    if temperature is None or (isinstance(temperature, (int, float)) and temperature == 0):
        h = _weak(cols, model.thresholds, model.signs).astype(X.dtype)
    else:  # sigma(-z) = 1 - sigma(z): the complement's smooth version
        h = jax.nn.sigmoid(model.signs * (cols - model.thresholds) / temperature)
    alphas = model.alphas
    if n_rounds is not None:
        alphas = jnp.where(jnp.arange(alphas.shape[0]) < n_rounds, alphas, 0.0)
    return h @ alphas


def exp_loss(scores, pairs, pair_mask=None):
    """The exponential ranking loss ``mean_p exp(-(s_w - s_l))`` over the unmasked pairs."""
    scores = jnp.asarray(scores)
    mask = pair_weights(pairs, pair_mask, scores.dtype)
    terms = jnp.exp(-(scores[pairs[:, 0]] - scores[pairs[:, 1]]))
    return jnp.sum(mask * terms) / jnp.maximum(jnp.sum(mask), 1.0)


# The estimator's compiled cores: static are n_rounds (a loop length) and complements (a flag);
# smoothing, temperature and the number of rounds used by predict are traced.
@partial(jit, static_argnames=("n_rounds", "complements"))
def _fit_jit(X, pairs, thresholds, n_rounds, pair_mask, smoothing, complements):
    return fit(X, pairs, thresholds, n_rounds, pair_mask, smoothing, complements)


@jit
def _predict_jit(model, X, temperature, n_rounds):
    return predict(model, X, temperature, n_rounds)


class RankBoost(Ranker):
    """RankBoost estimator (scikit-learn style) on the pairs within each query.

    Args (hyperparameters only):
        n_rounds: ``T``, boosting rounds (an integer >= 1).
        n_thresholds: candidate thresholds per feature (>= 1; None = all distinct values).
        threshold_method: ``"uniform"`` (RankLib) or ``"quantile"``.
        temperature: None or 0 = hard weak rankers in ``predict``; ``> 0`` = sigmoid (smooth).
        smoothing: ``s > 0`` in ``alpha`` (0 would give an error-free weak ranker infinite weight),
            a normal number of the working dtype (float64 under ``jax_enable_x64``, else float32).
        complements: also use the complement weak rankers ``[x_k <= theta]`` (see ``fit``).

    Learned attributes: ``model_`` (``RankBoostModel``), ``info_``
    (``RankBoostInfo``), ``features_``, ``thresholds_``, ``alphas_`` (each ``(T,)``),
    ``signs_``, ``candidates_: (d, K)``, ``pairs_: (m, 2)``, ``n_features_in_``.

    ``score`` is the pairwise accuracy (see
    ``pairwise_accuracy``).
    """

    def __init__(
        self,
        n_rounds: int = 300,
        n_thresholds: int | None = 10,
        threshold_method: str = "uniform",
        temperature: float | None = None,
        smoothing: float = 1e-12,
        complements: bool = True,
    ):
        self.n_rounds = n_rounds
        self.n_thresholds = n_thresholds
        self.threshold_method = threshold_method
        self.temperature = temperature
        self.smoothing = smoothing
        self.complements = complements

    def _check_params(self, dtype):
        """Every hyperparameter, ``ValueError`` naming the first one at fault and its value."""
        options.check_int(self.n_rounds, "n_rounds", low=1)
        options.check_int(self.n_thresholds, "n_thresholds", low=1, allow_none=True)
        options.check_choice(self.threshold_method, "threshold_method", THRESHOLD_METHODS)
        temperature = options.check_float(self.temperature, "temperature", 0.0, allow_none=True)
        if temperature:  # cast to the working dtype for predict: 0 there would give 0 / 0
            options.check_representable(temperature, "temperature", dtype)
        _check_smoothing(self.smoothing, dtype)
        options.check_bool(self.complements, "complements")

    def fit(self, X, y, qid=None) -> RankBoost:
        """Fit on documents ``X: (n, d)`` with grades ``y: (n,)`` and query ids ``qid: (n,)``
        (any hashable ids; ints and strings may be mixed; None = one query, as scikit-learn's
        ``fit(X, y)`` calls it)."""
        dtype = float_dtype()
        self._check_params(dtype)
        X, y, qid = check_inputs(X, y, qid, type(self).__name__)
        Xd = cast_checked(X, dtype)
        self.candidates_ = candidate_thresholds(X, self.n_thresholds, self.threshold_method)
        self.pairs_ = pairs_within_queries(y, qid)
        width = self.candidates_.shape[1]
        width = bucket_size(width) if self.n_thresholds is None else self.n_thresholds
        P, pair_mask = pad_pairs(self.pairs_, filler=PAIR_FILLER, dtype=np.int32)
        model, info = _fit_jit(
            pad_rows(Xd, dtype=dtype),
            P,
            _pad_thresholds(self.candidates_, width, dtype),
            n_rounds=int(self.n_rounds),
            pair_mask=pair_mask,
            smoothing=np.asarray(self.smoothing, dtype),
            complements=bool(self.complements),
        )
        self.model_ = model
        self.info_ = info
        self.features_ = np.asarray(model.features)
        self.thresholds_ = np.asarray(model.thresholds)
        self.signs_ = np.asarray(model.signs)
        self.alphas_ = np.asarray(model.alphas)
        self.n_features_in_ = X.shape[1]
        return self

    def predict(self, X, n_rounds: int | None = None) -> np.ndarray:
        """Scores ``(n,)`` of ``X: (n, d)`` from the first ``n_rounds`` rounds (None = all)."""
        self._check_fitted()
        check_int("n_rounds", n_rounds, low=0, none_ok=True)
        X = self._check_X(X)
        dtype = float_dtype()
        smooth = self.temperature is not None and self.temperature != 0
        scores = _predict_jit(
            self.model_,
            pad_rows(cast_checked(X, dtype), dtype=dtype),
            np.asarray(self.temperature, dtype) if smooth else None,
            np.int32(len(self.alphas_) if n_rounds is None else min(n_rounds, len(self.alphas_))),
        )
        return np.asarray(scores)[: len(X)]
