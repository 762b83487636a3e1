"""RankBoost (Freund, Iyer, Schapire & Singer 2003), threshold weak rankers, one ``lax.scan``.

The seed notes' pseudo-code, on preference pairs ``p = (w_p, l_p)`` (``w_p`` preferred to
``l_p``; in the notes' notation ``x'_p = x_{w_p}``, ``x_p = x_{l_p}``, ``y_p = +1``)::

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
:func:`candidate_thresholds`), and by default also the complements ``[x_k <= theta]``. Without
them the class is not closed under negation: the argmin of ``eps- - eps+`` only finds positive
edges, and boosting stalls (``alpha = 0``) once none is left; with them the rule picks the largest
``|r|``, as Freund et al. do. Ties (edges within :data:`TIE` ``= 1e-12`` of the best: equal up to
rounding, as when two features split the documents alike) go to the first candidate in the order
``[x > theta]`` before complements, then feature, then threshold. ``alpha_t`` uses
``(eps+ + s) / (eps- + s)`` with ``s = smoothing`` (default ``1e-12``): a weak ranker without
errors gets a large finite weight.

RankBoost minimises the exponential ranking loss ``sum_p D_1(p) exp(-(f(x_w) - f(x_l))) =
prod_t Z_t``; :class:`RankBoostInfo` records it per round.

The edge of every candidate is computed from the per-document potential
``pi_i = sum_{p: w_p = i} D(p) - sum_{p: l_p = i} D(p)`` as ``r(k, theta) = sum_{i: x_ik > theta}
pi_i``: a suffix sum over the documents sorted once per feature, ``O(d n)`` per round.

Everything is a pure function of arrays (static: ``n_rounds``), ``vmap``-able over padded queries
(masked pairs get no weight); :func:`predict` with ``temperature > 0`` replaces the step by a
sigmoid ``sigma((x_k - theta) / temperature)`` so scores are differentiable in ``X``.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from ._data import check_ranking_data, check_X, pairs_within_queries

__all__ = [
    "RankBoost",
    "RankBoostInfo",
    "RankBoostModel",
    "candidate_thresholds",
    "exp_loss",
    "fit",
    "predict",
]


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
    if method not in ("uniform", "quantile"):
        raise ValueError(f"method must be 'uniform' or 'quantile', got {method!r}")
    if n_thresholds is not None and n_thresholds < 1:
        raise ValueError(f"n_thresholds must be >= 1 or None, got {n_thresholds}")
    cols = []
    for k in range(X.shape[1]):
        x = X[:, k]
        if n_thresholds is None:
            cols.append(np.unique(x))
        elif method == "uniform":
            cols.append(np.unique(np.linspace(x.min(), x.max(), n_thresholds)))
        else:
            cols.append(np.unique(np.quantile(x, np.linspace(0, 1, n_thresholds))))
    width = max(len(c) for c in cols)
    out = np.full((X.shape[1], width), np.inf)
    for k, c in enumerate(cols):
        out[k, : len(c)] = c
    return out


#: Edges (in [-1, 1]: ``D`` sums to 1) closer than this to the best count as tied.
TIE = 1e-12


def _pair_mask(pairs, pair_mask, dtype):
    if pair_mask is None:
        return jnp.ones(pairs.shape[0], dtype)
    return jnp.asarray(pair_mask).astype(dtype)


def fit(
    X,
    pairs,
    thresholds,
    n_rounds: int,
    pair_mask=None,
    smoothing: float = 1e-12,
    complements: bool = True,
) -> tuple[RankBoostModel, RankBoostInfo]:
    """``n_rounds`` rounds of RankBoost (the seed's pseudo-code; see the module docstring).

    Args:
        X: ``(n, d)`` documents (one query, or a whole collection stacked).
        pairs: ``(m, 2)`` int indices into ``X``, winner first.
        thresholds: ``(d, K)`` candidates per feature (:func:`candidate_thresholds`; ``+inf``
            pads).
        n_rounds: ``T`` (static).
        pair_mask: ``(m,)`` bool, False for padded pairs; None = all.
        smoothing: ``s`` in ``alpha = 1/2 log((eps+ + s) / (eps- + s))``.
        complements: static; if True (default) the weak rankers ``[x_k <= theta]`` are candidates
            too (Freund et al.'s choice of the largest ``|r|``); if False only ``[x_k > theta]``
            (RankLib), and boosting stalls (``alpha = 0``) once no candidate has a positive edge.

    Returns:
        ``(RankBoostModel, RankBoostInfo)``, arrays of length ``T``.
    """
    X = jnp.asarray(X)
    if not jnp.issubdtype(X.dtype, jnp.floating):
        X = X.astype(jnp.result_type(float))
    dtype = X.dtype
    thresholds = jnp.asarray(thresholds, dtype)
    pairs = jnp.asarray(pairs)
    n, d = X.shape
    K = thresholds.shape[1]
    win, lose = pairs[:, 0], pairs[:, 1]
    mask = _pair_mask(pairs, pair_mask, dtype)
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


def _weak(x, theta, sign):
    """The weak ranker ``[x > theta]`` (``sign = +1``) or its complement ``[x <= theta]`` (-1)."""
    return jnp.where(sign > 0, x > theta, x <= theta)


def predict(model: RankBoostModel, X, temperature: float | None = None, n_rounds=None):
    """Scores ``(n,)`` of documents ``X: (n, d)``.

    Args:
        model: a :class:`RankBoostModel` (``T`` rounds).
        temperature: None or 0 = the hard step ``[x_k > theta]``; ``> 0`` = the sigmoid
            ``sigma((x_k - theta) / temperature)``, smooth in ``X`` (tends to the step as the
            temperature goes to 0, except exactly at ``x_k = theta``).
        n_rounds: use only the first rounds (an int, may be traced); None = all ``T``.
    """
    X = jnp.asarray(X)
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
    mask = _pair_mask(pairs, pair_mask, scores.dtype)
    terms = jnp.exp(-(scores[pairs[:, 0]] - scores[pairs[:, 1]]))
    return jnp.sum(mask * terms) / jnp.maximum(jnp.sum(mask), 1.0)


_fit_jit = jax.jit(fit, static_argnames=("n_rounds", "complements"))
_predict_jit = jax.jit(predict, static_argnames=("temperature",))


class RankBoost:
    """RankBoost estimator (scikit-learn style) on the pairs within each query.

    Args (hyperparameters only):
        n_rounds: ``T``, boosting rounds.
        n_thresholds: candidate thresholds per feature (None = all distinct values).
        threshold_method: ``"uniform"`` (RankLib) or ``"quantile"``.
        temperature: None = hard weak rankers in :meth:`predict`; ``> 0`` = sigmoid (smooth).
        smoothing: ``s`` in ``alpha``.
        complements: also use the complement weak rankers ``[x_k <= theta]`` (see :func:`fit`).

    Learned attributes: ``model_`` (:class:`RankBoostModel`), ``info_``
    (:class:`RankBoostInfo`), ``features_``, ``thresholds_``, ``alphas_`` (each ``(T,)``),
    ``signs_``, ``candidates_: (d, K)``, ``pairs_: (m, 2)``, ``n_features_in_``.
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

    def get_params(self, deep: bool = True) -> dict:
        names = (
            "n_rounds",
            "n_thresholds",
            "threshold_method",
            "temperature",
            "smoothing",
            "complements",
        )
        return {k: getattr(self, k) for k in names}

    def set_params(self, **params) -> RankBoost:
        for k, v in params.items():
            if k not in self.get_params():
                raise ValueError(f"unknown parameter {k!r}")
            setattr(self, k, v)
        return self

    def fit(self, X, y, qid) -> RankBoost:
        """Fit on documents ``X: (n, d)`` with grades ``y: (n,)`` and query ids ``qid: (n,)``."""
        if int(self.n_rounds) != self.n_rounds or self.n_rounds < 1:
            raise ValueError(f"n_rounds must be an integer >= 1, got {self.n_rounds}")
        if self.temperature is not None and not self.temperature >= 0:
            raise ValueError(f"temperature must be None or >= 0, got {self.temperature}")
        X, y, qid = check_ranking_data(X, y, qid)
        self.candidates_ = candidate_thresholds(X, self.n_thresholds, self.threshold_method)
        self.pairs_ = pairs_within_queries(y, qid)
        dtype = jnp.result_type(float)
        model, info = _fit_jit(
            jnp.asarray(X, dtype),
            jnp.asarray(self.pairs_),
            jnp.asarray(self.candidates_, dtype),
            n_rounds=int(self.n_rounds),
            smoothing=self.smoothing,
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
        if not hasattr(self, "model_"):
            raise ValueError("this RankBoost is not fitted yet; call fit(X, y, qid) first")
        X = check_X(X, self.n_features_in_)
        dtype = jnp.result_type(float)
        return np.asarray(
            _predict_jit(self.model_, jnp.asarray(X, dtype), self.temperature, n_rounds)
        )
