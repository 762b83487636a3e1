"""SortNet (Rigutini, Papini, Maggini & Scarselli, IEEE TNN 22(9), 2011):
rank by sorting with a learned comparator (``cmpnn``), trained on the pairs the sort gets wrong.

**Sorting.** A query's documents are sorted with the comparator ``x`` before ``y`` iff
``P(x > y) > 1/2`` (``cmpnn.preference``; on an exact ``1/2`` the lower index first). The sort
is Batcher's bitonic sorting network: ``log2(N) (log2(N) + 1) / 2`` stages of ``N / 2``
compare-exchanges each (``N``: the documents padded to a power of two; a padded one loses to
every real one), ``O(N log^2 N)`` comparisons, every stage one vectorised call of the network:
jittable and ``vmap``-able over queries. (The paper names an ``O(n log n)`` comparison sort; on
a consistent comparator every sort gives the same order, on an intransitive one each gives its
own. The network's fixed schedule is what makes it one compiled program.) ``SortResult``
records each compare-exchange that ordered two documents of different grades the wrong way.

**Training** (the paper's Algorithm 1)::

    P_T, P_V = {}, {}; C_0 = a random network
    for i = 0 .. max_iter:
        if i > 0: C_i = TrainAndValidate(C_{i-1}, P_T, P_V)
        E_T, R_T = Sort(C_i, T);  E_V, R_V = Sort(C_i, V)     (E: the misordered comparisons)
        if quality(R_V) > best: best, C* = quality(R_V), C_i
        if E_T adds nothing to P_T and E_V nothing to P_V: stop
        P_T, P_V = P_T + E_T, P_V + E_V
    return C*

``TrainAndValidate`` runs ``n_steps`` full-batch Adam steps on ``P_T``'s squared error from the
previous network and keeps the step with the lowest error on ``P_V`` (``P_V`` empty: the last);
``quality`` is the validation queries' MAP (LETOR's relevance: grade >= 1). ``fit`` returns the
best network and its ``SortNetInfo``. The estimator ``SortNet`` holds out a fraction of the
training queries as ``V`` unless a validation set is given.
"""

from __future__ import annotations

from functools import partial
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from ..compiler import jit
from ..data.batch import bucket_size
from ..data.checks import options
from ..metrics import letor_metrics
from . import cmpnn
from ._data import query_codes
from ._estimator import Ranker, check_documents, check_inputs, pairwise_accuracy

__all__ = [
    "SortNet",
    "SortNetInfo",
    "SortResult",
    "bitonic_stages",
    "comparator_sort",
    "fit",
    "sort_queries",
]


class SortResult(NamedTuple):
    """``order: (N,)`` the positions' documents, most preferred first (real documents before
    padded ones); ``errors: (S, N)`` bool, at stage ``s`` and the lower position of a
    compare-exchange, whether it ordered two real documents of different grades against their
    grades (only with grades); ``pairs: (S, N, 2)`` that comparison's (better, worse) documents
    by grade."""

    order: jax.Array
    errors: jax.Array | None = None
    pairs: jax.Array | None = None


class SortNetInfo(NamedTuple):
    """The training's trace: per iteration ``0..max_iter`` (0: the untrained network, whose
    sort seeds the pair sets; so ``max_iter + 1`` entries, fewer where it stopped early) the
    validation MAP, the pairs in ``P_T`` and ``P_V`` after it, and the training loss at the end
    of its ``TrainAndValidate`` (NaN at iteration 0); ``best``: the iteration kept;
    ``stopped``: no new misordered pair."""

    vali_map: np.ndarray
    train_pairs: np.ndarray
    vali_pairs: np.ndarray
    loss: np.ndarray
    best: int
    stopped: bool


def bitonic_stages(size: int) -> np.ndarray:
    """``(S, 2)`` the ``(k, j)`` of each stage of the bitonic network on ``size`` (a power of
    two) positions: ``k = 2, 4, ..., size``, then ``j = k / 2, ..., 1``."""
    if size < 2 or size & (size - 1):
        raise ValueError(f"the bitonic network needs a power of two >= 2, got {size}")
    return np.array(
        [(1 << a, 1 << b) for a in range(1, size.bit_length()) for b in range(a - 1, -1, -1)],
        np.int32,
    ).reshape(-1, 2)


def comparator_sort(params, X, mask, grades=None) -> SortResult:
    """Sort the documents ``X: (N, d)`` (``N`` a power of two; ``mask: (N,)`` True for the real
    ones) with the comparator ``params`` (module docstring); with ``grades: (N,)`` also the
    misordered comparisons. One query; ``vmap`` it over queries."""
    N = X.shape[0]
    stages = jnp.asarray(bitonic_stages(N))
    idx = jnp.arange(N)

    def before(a, b):
        p = jax.vmap(cmpnn.preference, in_axes=(None, 0, 0))(params, X[a], X[b])
        real = (p > 0.5) | ((p == 0.5) & (a < b))
        return jnp.where(mask[a] & mask[b], real, jnp.where(mask[a] == mask[b], a < b, mask[a]))

    def stage(perm, kj):
        k, j = kj[0], kj[1]
        partner = idx ^ j
        lo, hi = jnp.minimum(idx, partner), jnp.maximum(idx, partner)
        A, B = perm[lo], perm[hi]
        first = before(A, B)
        up = (lo & k) == 0
        swap = jnp.where(up, ~first, first)
        new = jnp.where(idx == lo, jnp.where(swap, B, A), jnp.where(swap, A, B))
        if grades is None:
            return new, None
        real = mask[A] & mask[B] & (grades[A] != grades[B]) & (idx == lo)
        wrong = real & ((grades[A] > grades[B]) != first)
        better = jnp.where(grades[A] > grades[B], A, B)
        worse = jnp.where(grades[A] > grades[B], B, A)
        return new, (wrong, jnp.stack([better, worse], -1))

    order, record = jax.lax.scan(stage, idx, stages)
    if grades is None:
        return SortResult(order)
    return SortResult(order, *record)


def _positions_scores(order, mask):
    """Scores from an order: ``N - position`` for real documents, 0 for padded ones."""
    N = order.shape[0]
    position = jnp.zeros(N, jnp.int32).at[order].set(jnp.arange(N, dtype=jnp.int32))
    return jnp.where(mask, N - position, 0).astype(jnp.result_type(float))


@jit
def _sort_batch(params, X, mask, grades):
    """Every padded query sorted: ``(SortResult, scores (Q, N), MAP per query)``."""
    result = jax.vmap(comparator_sort, in_axes=(None, 0, 0, 0))(params, X, mask, grades)
    scores = jax.vmap(_positions_scores)(result.order, mask)
    metrics = jax.vmap(letor_metrics, in_axes=(0, 0, 0, None))(scores, grades, mask, 1)
    return result, scores, metrics.map


def sort_queries(params, queries):
    """Scores of each query's documents from the sort (``n_q`` for the first, 1 for the last),
    for ``queries``: a list of ``X: (n_q, d)``. Queries of one padded size are sorted in one
    compiled call (``vmap`` over them)."""
    dtype = np.asarray(params.v_x).dtype
    sizes = [max(2, 1 << (len(X) - 1).bit_length()) for X in queries]
    out: list = [None] * len(queries)
    for N in sorted(set(sizes)):
        members = [k for k, size in enumerate(sizes) if size == N]
        batch = _stack([(queries[k], np.zeros(len(queries[k]))) for k in members], dtype)
        _, scores, _ = _sort_batch(params, batch.X, batch.mask, batch.grades)
        scores = np.asarray(scores)
        for row, k in enumerate(members):
            n = len(queries[k])
            out[k] = scores[row, :n] - N + n  # 1..n, the top document n
    return out


class _Batch(NamedTuple):
    X: np.ndarray  # (Q, N, d)
    mask: np.ndarray  # (Q, N)
    grades: np.ndarray  # (Q, N)


def _stack(queries, dtype) -> _Batch:
    """``queries``: ``(X_q, y_q)`` pairs, stacked at a power-of-two size ``N`` and a bucketed
    number of rows (padded rows: no real document)."""
    N = max(2, 1 << (max(len(X) for X, _ in queries) - 1).bit_length())
    Q = bucket_size(len(queries), per_octave=4)
    d = queries[0][0].shape[1]
    X = np.zeros((Q, N, d), dtype)
    mask = np.zeros((Q, N), bool)
    grades = np.zeros((Q, N), dtype)
    for q, (Xq, yq) in enumerate(queries):
        X[q, : len(Xq)], mask[q, : len(Xq)], grades[q, : len(Xq)] = Xq, True, yq
    return _Batch(X, mask, grades)


def _new_pairs(result: SortResult, n_queries: int) -> set:
    """The misordered comparisons as ``(query, better, worse)``."""
    errors = np.asarray(result.errors)[:n_queries]
    pairs = np.asarray(result.pairs)[:n_queries]
    q, s, i = np.nonzero(errors)
    return set(zip(q.tolist(), *pairs[q, s, i].T.tolist(), strict=True))


def _pair_arrays(pairs: set, batch: _Batch):
    """Winner and loser features ``(P_b, d)`` of ``pairs``, padded to a bucketed ``P_b``, and
    the mask; sorted, so the arrays do not depend on the set's order."""
    rows = np.array(sorted(pairs), np.int64).reshape(-1, 3)
    size = bucket_size(max(len(rows), 1))
    d = batch.X.shape[-1]
    win = np.zeros((size, d), batch.X.dtype)
    lose = np.zeros((size, d), batch.X.dtype)
    mask = np.zeros(size, bool)
    win[: len(rows)] = batch.X[rows[:, 0], rows[:, 1]]
    lose[: len(rows)] = batch.X[rows[:, 0], rows[:, 2]]
    mask[: len(rows)] = True
    return win, lose, mask


@partial(jit, static_argnames=("n_steps",))
def _train_and_validate(params, train, vali, n_steps, learning_rate):
    """``cmpnn.train`` on ``train = (winners, losers, mask)``, validated on ``vali``: the best
    network and the last step's training loss."""
    best, losses = cmpnn.train(params, *train, n_steps, learning_rate, vali=vali)
    return best, losses[-1]


def fit(
    key,
    train,
    vali,
    *,
    n_hidden: int = 10,
    max_iter: int = 20,
    n_steps: int = 200,
    learning_rate: float = 0.01,
):
    """SortNet's Algorithm 1 (module docstring) on ``train`` and ``vali``: lists of ``(X_q:
    (n_q, d), y_q: (n_q,))`` queries (grades; relevant: ``>= 1``). Returns ``(params, info)``:
    the comparator of the best validation MAP and the ``SortNetInfo`` trace."""
    dtype = np.dtype(jnp.result_type(float))
    T, V = _stack(train, dtype), _stack(vali, dtype)
    params = cmpnn.init(key, T.X.shape[-1], n_hidden, dtype)
    P_T, P_V = set(), set()
    best, best_params, trace = -np.inf, params, []
    stopped = False
    for i in range(max_iter + 1):
        loss = np.nan
        if i > 0:
            params, loss = _train_and_validate(
                params, _pair_arrays(P_T, T), _pair_arrays(P_V, V), n_steps, learning_rate
            )
        result_T, _, _ = _sort_batch(params, T.X, T.mask, T.grades)
        result_V, _, vali_map = _sort_batch(params, V.X, V.mask, V.grades)
        score = float(np.mean(np.asarray(vali_map)[: len(vali)]))
        if score > best:
            best, best_params, best_i = score, params, i
        new_T = _new_pairs(result_T, len(train)) - P_T
        new_V = _new_pairs(result_V, len(vali)) - P_V
        P_T |= new_T
        P_V |= new_V
        trace.append((score, len(P_T), len(P_V), float(loss)))
        if not new_T and not new_V:
            stopped = True
            break
    vali_map, n_t, n_v, losses = (np.array(c) for c in zip(*trace, strict=True))
    return best_params, SortNetInfo(vali_map, n_t, n_v, losses, best_i, stopped)


def _split_queries(X, y, codes):
    """``[(X_q, y_q)]`` per query code, in code order."""
    return [(X[codes == c], y[codes == c]) for c in np.unique(codes)]


class SortNet(Ranker):
    """SortNet as a scikit-learn-style ranker (module docstring).

    Args:
        n_hidden: the comparator's hidden unit pairs ``h`` (``2h`` hidden units).
        max_iter: Algorithm 1's iterations after the first sort.
        n_steps: Adam steps of each ``TrainAndValidate``; learning_rate: Adam's.
        validation_fraction: the share of the training queries held out as ``V`` (at least
            one query) when ``fit`` is given no ``vali``.
        random_state: seed of the initial weights and of the held-out queries, an integer in
            ``[0, 2^63 - 1]`` (``data.checks.MAX_SEED``).

    Learned: ``params_`` (``cmpnn.CmpNNParams``), ``info_`` (``SortNetInfo``),
    ``n_features_in_``. ``predict(X, qid=None)`` scores each query's documents by their place
    in the sort (``n`` the first, 1 the last); without ``qid`` all rows are one query.
    """

    def __init__(
        self,
        n_hidden: int = 10,
        max_iter: int = 20,
        n_steps: int = 200,
        learning_rate: float = 0.01,
        validation_fraction: float = 0.2,
        random_state: int = 0,
    ):
        self.n_hidden = n_hidden
        self.max_iter = max_iter
        self.n_steps = n_steps
        self.learning_rate = learning_rate
        self.validation_fraction = validation_fraction
        self.random_state = random_state

    def fit(self, X, y, qid=None, vali=None):
        """Train on ``X: (n, d)``, grades ``y: (n,)``, query ids ``qid: (n,)`` (None: one
        query); ``vali``: ``(X_v, y_v, qid_v)`` the validation queries, else
        ``validation_fraction`` of the training queries (none where there is one query: the
        training queries validate). Returns ``self``."""
        options.check_int(self.n_hidden, "n_hidden", low=1)
        options.check_int(self.max_iter, "max_iter", low=0)
        options.check_int(self.n_steps, "n_steps", low=1)
        options.check_float(self.learning_rate, "learning_rate", 0.0, low_open=True)
        options.check_float(
            self.validation_fraction, "validation_fraction", 0.0, 1.0, high_open=True
        )
        options.check_int(self.random_state, "random_state", 0, options.MAX_SEED)
        X, y, codes = check_inputs(X, y, qid, "SortNet")
        queries = _split_queries(X, y, codes)
        if vali is not None:
            Xv, yv, cv = check_inputs(*vali, "SortNet (vali)")
            if Xv.shape[1] != X.shape[1]:
                raise ValueError(f"vali has {Xv.shape[1]} features, the training data {X.shape[1]}")
            train, held = queries, _split_queries(Xv, yv, cv)
        else:
            rng = np.random.default_rng(self.random_state)
            count = round(self.validation_fraction * len(queries))
            count = min(max(count, 1), len(queries) - 1) if len(queries) > 1 else 0
            chosen = set(rng.permutation(len(queries))[:count].tolist())
            train = [q for k, q in enumerate(queries) if k not in chosen]
            held = [q for k, q in enumerate(queries) if k in chosen] or train
        self.params_, self.info_ = fit(
            jax.random.key(self.random_state),
            train,
            held,
            n_hidden=self.n_hidden,
            max_iter=self.max_iter,
            n_steps=self.n_steps,
            learning_rate=float(self.learning_rate),
        )
        self.n_features_in_ = X.shape[1]
        return self

    def predict(self, X, qid=None) -> np.ndarray:
        """Scores ``(n,)``: each document's place in its query's sort, ``n_q`` for the first
        (``qid=None``: one query)."""
        self._check_fitted()
        X = check_documents(X, self.n_features_in_, "SortNet")
        codes = query_codes(qid, len(X)) if qid is not None else np.zeros(len(X), np.int64)
        groups = np.unique(codes)
        scores = np.zeros(len(X))
        sorted_ = sort_queries(self.params_, [X[codes == c] for c in groups])
        for c, s in zip(groups, sorted_, strict=True):
            scores[codes == c] = s
        return scores

    def score(self, X, y, qid=None) -> float:
        """Pairwise accuracy of the sort within each query (``Ranker.score``)."""
        X, y, codes = check_inputs(X, y, qid, "SortNet")
        return pairwise_accuracy(self.predict(X, codes), y, codes)
