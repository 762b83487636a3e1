"""The study's numbers: per query-repetition (``evaluate``), per setting and model
(``summarize``), and XPGP against each comparator (``compare``).

Per query-repetition, from ``prob: (p,)`` = the predicted P(truth) of each test pair: the
pairwise error (a probability within ``TIE`` of 1/2 counts as half an error;
``err_untied`` without that rule), the share of such ties, AUC, and for the GPs the mean
log-probability of the truth, the Brier score and the expected calibration error (pairs
oriented at random, so that both outcomes occur), and the error split by how many of a test
pair's entities occur in known pairs (both, one, neither:
``bayesrank.data.study.seen_category``).
"""

from __future__ import annotations

import warnings

import jax.numpy as jnp
import numpy as np
from jax.scipy.special import log_ndtr

from ...compiler import jit
from ...data.batch import bucket_size
from ...data.study import SEEN, seen_category
from ...metrics import pairwise_auc, pairwise_error
from ...metrics.calibration import brier_score, expected_calibration_error
from ...predict import predict_pairs

__all__ = ["COMPARATORS", "TIE", "compare", "evaluate", "gp_numbers", "summarize", "svm_numbers"]

#: A predicted P(truth) within TIE of 1/2 is a coin flip: half an error, a tie in the AUC, 1/2
#: in the calibration measures' bins. Without it, an attribute-only GP "separates" documents
#: with identical features (a third of some OHSUMED queries' documents) by the sign of its 1e-3
#: jitter's effect, i.e. by a per-entity effect, and the AUC and ECE of a fit moved by 0.01 with
#: its arithmetic's last bits (posteriors equal to 1e-12 after a change of padding).
TIE = 1e-3
#: The models XPGP is compared with.
COMPARATORS = ("PGP", "PGP+I", "placebo", "Entity", "RankSVM", "LapRankSVM")
KEYS = ("err", "err_untied", "ties", "auc", "loglik", "brier", "ece")
KEYS += tuple(f"err_{name}" for name in SEEN)


@jit
def _metrics(prob, oriented, outcome, mask):
    """The pair metrics of ``evaluate`` in one compiled program: ``(p,)`` arrays padded to
    a bucketed length, ``mask`` marking the real pairs."""
    tied = jnp.abs(prob - 0.5) < TIE
    return {
        "err": pairwise_error(jnp.where(tied, 0.5, prob), mask),
        "err_untied": pairwise_error(prob, mask),
        "auc": pairwise_auc(jnp.where(tied, 0.5, prob), mask),
        "brier": brier_score(oriented, outcome, mask),
        "ece": expected_calibration_error(jnp.where(tied, 0.5, oriented), outcome, mask),
    }


def evaluate(prob, log_prob, test, known, n, flip, size: int | None = None) -> dict:
    """Numbers of one query-repetition from ``prob: (p,)``, P(truth) of each test pair
    ``test: (p, 2)``; ``log_prob: (p,)`` its log (None for the SVMs, whose scores are not
    probabilities); ``flip: (p,)`` bools orienting pairs for the calibration measures;
    ``size``: the padded length the metrics compile at (default ``bucket_size(p, 4)``; a
    study passes one for all its queries, so that they share one program)."""
    prob = np.asarray(prob)
    count = len(prob)
    tied = np.abs(prob - 0.5) < TIE
    flip = np.zeros(count, bool) if flip is None else np.asarray(flip)
    size = bucket_size(count, 4) if size is None else size  # every split shares a program
    pad = lambda a: np.pad(a, (0, size - count), constant_values=0.5)  # noqa: E731
    oriented, outcome = np.where(flip, 1.0 - prob, prob), (~flip).astype(float)
    numbers = _metrics(pad(prob), pad(oriented), pad(outcome), np.arange(size) < count)
    numbers = {k: float(v) for k, v in numbers.items()}
    out = {k: numbers[k] for k in ("err", "err_untied", "auc")}
    out["ties"] = float(tied.mean())
    if log_prob is not None:
        out["loglik"] = float(np.mean(log_prob))
        out["brier"], out["ece"] = numbers["brier"], numbers["ece"]
    category = seen_category(known, test, n)
    wrong = np.where(tied, 0.5, prob < 0.5)
    for name, code in SEEN.items():
        hit = category == code
        out[f"count_{name}"] = int(hit.sum())
        out[f"err_{name}"] = float(wrong[hit].mean()) if hit.any() else None
    return out


@jit
def _predict(mean, cov, pairs):
    pred = predict_pairs(mean, cov, pairs)
    return pred.prob, log_ndtr(pred.delta_mean / jnp.sqrt(1.0 + pred.delta_var))


def gp_numbers(mean, cov, known, test, n, flip, size: int | None = None) -> dict:
    """``evaluate`` of a GP posterior ``(mean: (N,), cov: (N, N))`` (Eq. 13-14) on the query's
    ``n <= N`` entities (the rest padding), the test pairs padded to ``size`` (default a
    bucketed count) so that every split of a query, and with one ``size`` and ``N`` every
    query of a study, runs one compiled program."""
    p = len(test)
    size = bucket_size(p, 4) if size is None else size
    padded = np.zeros((size, 2), np.int64)
    padded[:p] = test
    prob, log_prob = (np.asarray(a)[:p] for a in _predict(mean, cov, padded))
    return evaluate(prob, log_prob, test, known, n, flip, size)


def svm_numbers(scores, known, test, n, size: int | None = None) -> dict:
    """``evaluate`` of entity scores ``(n,)`` (error, AUC and the breakdown only)."""
    d = scores[test[:, 0]] - scores[test[:, 1]]
    prob = 1.0 / (1.0 + np.exp(-np.clip(d, -50, 50)))  # a monotone map: error and AUC only
    prob = np.where(d == 0, 0.5, prob)
    return evaluate(prob, None, test, known, n, None, size)


def _stat(rows, key):
    values = np.array([r[key] for r in rows if r.get(key) is not None], float)
    if not len(values):
        return None
    sd = float(values.std(ddof=1)) if len(values) > 1 else 0.0
    return {"mean": float(values.mean()), "sd": sd}


def compare(rows, target: str, other: str) -> dict:
    """``target`` against ``other`` (``rows[model]``: the rows of ``evaluate`` with ``qid``
    and ``rep``): the relative error reduction ``(e_other - e_target) / e_other`` of the mean
    errors, a Wilcoxon signed-rank test over the per-query mean errors (the paper's), a paired
    t-test over the query-repetitions, and the number of queries where ``target`` is lower."""
    from scipy.stats import ttest_rel, wilcoxon

    a = {(r["qid"], r["rep"]): r["err"] for r in rows[target]}
    b = {(r["qid"], r["rep"]): r["err"] for r in rows[other]}
    keys = sorted(a)
    ea, eb = np.array([a[x] for x in keys]), np.array([b[x] for x in keys])
    qids = sorted({q for q, _ in keys})
    qa = np.array([np.mean([a[x] for x in keys if x[0] == q]) for q in qids])
    qb = np.array([np.mean([b[x] for x in keys if x[0] == q]) for q in qids])
    out = {"reduction": float((eb.mean() - ea.mean()) / eb.mean()) if eb.mean() > 0 else None}
    out["wilcoxon_p"] = _p_value(wilcoxon, qa, qb)
    out["ttest_p"] = _p_value(ttest_rel, ea, eb)
    out["queries_lower"] = int(np.sum(qa < qb))
    out["queries"] = len(qids)
    return out


def _p_value(test, a, b) -> float | None:
    """The test's p-value: 1 where ``a`` and ``b`` are equal, None where it is undefined (one
    observation, a zero variance of the differences), never NaN (results.json is strict)."""
    if not np.any(a != b):
        return 1.0
    if len(a) < 2:
        return None
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        p = float(test(a, b).pvalue)
    return p if np.isfinite(p) else None


def summarize(rows) -> dict:
    """Per model: mean and sd over query-repetitions of every number, and the test pairs'
    counts by seen entities."""
    summary = {m: {k: _stat(r, k) for k in KEYS} for m, r in rows.items() if r}
    for m, r in rows.items():
        if r:
            summary[m]["counts"] = {name: int(sum(x[f"count_{name}"] for x in r)) for name in SEEN}
    return summary
