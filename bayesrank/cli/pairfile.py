"""``bayesrank predict MODEL --pairs FILE``'s pair file: for every pair of entities of each query,
the higher-ranked first (``PAIR_COLUMNS``): ``prob = P(i > j | data)`` (Eq. 13-14), the moments
of ``xi_i - xi_j``, and ``prob_05``, ``prob_50``, ``prob_95``: the 5 %, 50 % and 95 % posterior
quantiles of ``Phi(xi_i - xi_j)`` (the uncertainty of the probability itself). A model of data
with ties (a tie margin ``eps``) gives ``P(i > j) = Phi((dm - eps) / s)``, the quantiles of
``Phi(xi_i - xi_j - eps)``, and a last column ``prob_tie``.

``prob`` is the *mean* of ``Phi(xi_i - xi_j - eps)`` and ``prob_50`` its median: two summaries
of one distribution, not an estimate inside its interval. Under a Gaussian posterior (EP,
Laplace) ``prob = Phi(a / sqrt(1 + v))`` lies between the median ``Phi(a)`` and 1/2 (``a = dm -
eps``, ``v = delta_var``: uncertainty pulls the mean toward a coin flip), and it falls outside
``[prob_05, prob_95]`` only where ``|a| sqrt(v) > 2 z_0.95 = 3.29``: a pair whose difference is
large and uncertain, so that most of the posterior puts ``Phi`` near 1 and a tail puts it near
0. (``prob < prob_05`` means ``a (1 - 1 / sqrt(1 + v)) > z sqrt(v)``, and ``1 - 1 / sqrt(1 + v)
< v / 2``.)

It streams: every pair of a query, ``n (n - 1) / 2`` of them, is predicted and written in
blocks of ``PAIR_BLOCK`` (``Posterior.outcome_blocks``: a sparse posterior's draws are made once
for all of them), into a temporary file renamed over the path at the end, so the memory is a
block's, whatever the number of entities, and the file is never half-written.
"""

from __future__ import annotations

from pathlib import Path

from ._common import csv_rows

__all__ = ["PAIR_BLOCK", "PAIR_COLUMNS", "QUANTILES", "quantiles", "upper_pairs", "write_pairs"]

#: The pair file's columns (``prob_tie`` follows for a model with a tie margin).
PAIR_COLUMNS = ("qid", "i", "j", "doc_i", "doc_j", "prob", "delta_mean", "delta_var",
                "prob_05", "prob_50", "prob_95")  # fmt: skip
#: The quantiles of ``Phi(xi_i - xi_j - eps)`` in the pair file: ``prob_05``, ``prob_50``,
#: ``prob_95``.
QUANTILES = (0.05, 0.5, 0.95)


def quantiles(posterior, pairs, delta_mean, delta_var, eps: float):
    """``(lo, median, hi)``, each ``(p,)``: the ``QUANTILES`` of ``Phi(xi_i - xi_j - eps)``
    under the posterior, for ``pairs: (p, 2)`` (``delta_mean``, ``delta_var``: their
    moments, ``eps``: the tie margin or 0). A Gaussian posterior's are ``Phi(delta_mean - eps
    + z_q sqrt(delta_var))`` (``Phi`` is increasing, so the quantiles of ``Phi(d)`` are ``Phi``
    of ``d``'s); NUTS's are its draws' quantiles."""
    import numpy as np
    from scipy.stats import norm

    from ..inference.posterior import SamplePosterior

    if isinstance(posterior.result, SamplePosterior):
        draws = np.asarray(posterior.result.draws)
        d = draws[:, pairs[:, 0]] - draws[:, pairs[:, 1]]
        return tuple(np.quantile(norm.cdf(d - eps), QUANTILES, axis=0))
    z = norm.ppf(QUANTILES)
    return tuple(norm.cdf(delta_mean - eps + zq * np.sqrt(delta_var)) for zq in z)


#: Pairs predicted and written at a time: the pair file streams, so its memory stays that of a
#: block, whatever the number of entities (a query of n entities has n (n - 1) / 2 pairs).
PAIR_BLOCK = 1 << 16


def upper_pairs(order, block: int):
    """Every pair ``(order[a], order[b])``, ``a < b``, in row order, as ``(<= block, 2)`` int64
    arrays: the upper triangle without ever holding all of it."""
    import numpy as np

    n, rows = len(order), []
    held = 0
    for a in range(n - 1):
        rows.append(np.stack([np.full(n - 1 - a, order[a]), order[a + 1 :]], axis=1))
        held += n - 1 - a
        while held >= block or (a == n - 2 and held):
            stacked = np.concatenate(rows)
            yield stacked[:block]
            rows, held = [stacked[block:]], len(stacked) - min(block, len(stacked))


def write_pairs(path: Path, queries: list[dict], posteriors: list) -> int:
    """The pair file (``PAIR_COLUMNS``, then ``prob_tie`` where a prior has a tie margin) of
    every query, streamed block by block into a temporary file renamed over ``path`` (never
    half-written); returns the number of pairs."""
    import numpy as np

    ties = any(p.prior.margin is not None for p in posteriors)
    head = [*PAIR_COLUMNS, "prob_tie"] if ties else list(PAIR_COLUMNS)
    tmp = path.with_name(path.name + ".tmp")
    count = 0
    with open(tmp, "w", newline="") as out:
        out.write(csv_rows([head]))
        for q, posterior in zip(queries, posteriors, strict=True):
            mean = np.asarray(posterior.mean)
            order = np.argsort(-mean, kind="stable")
            ids = q["doc_ids"] or [""] * len(mean)
            # the tie model (a prior with a margin): P(i > j) = Phi((dm - eps) / s), and P(tie)
            eps = 0.0 if posterior.prior.margin is None else float(posterior.prior.margin)
            total = len(mean) * (len(mean) - 1) // 2
            for pairs, pred in posterior.outcome_blocks(upper_pairs(order, PAIR_BLOCK), total):
                prob, tie, dm, dv = (
                    np.asarray(a) for a in (pred.win, pred.tie, pred.delta_mean, pred.delta_var)
                )
                lo, mid, hi = quantiles(posterior, pairs, dm, dv, eps)
                numbers = [prob, dm, dv, lo, mid, hi] + ([tie] if ties else [])
                columns = zip(pairs.tolist(), *(a.tolist() for a in numbers), strict=True)
                rows = [[q["qid"], a, b, ids[a], ids[b], *values] for (a, b), *values in columns]
                out.write(csv_rows(rows))
                count += len(pairs)
    tmp.replace(path)
    return count
