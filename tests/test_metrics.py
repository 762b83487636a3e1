"""Tests of bayesrank.metrics against references that share no code with it.

References: a plain-Python transcription of the official LETOR 4.0 evaluation script
(Eval-Score-4.0.pl), hand-worked values, brute force over all permutations, closed forms,
scipy.stats, and explicit numpy loops; plus padding, jit, vmap and retracing invariances.
"""

import functools
import gzip
import itertools
import math
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.stats
from hypothesis import given, settings
from hypothesis import strategies as st

from bayesrank import metrics as M

X64 = jnp.asarray(1.0).dtype == np.float64
FLOAT = np.float64 if X64 else np.float32
# Float64: the metrics are sums of a few dozen terms, so agreement is to rounding (1e-12 leaves
# room). Float32 (BAYESRANK_TEST_X64=0): the same sums in single precision.
TOL = 1e-12 if X64 else 1e-5
N_PAD = 16  # padded query length used by the batched tests


# --- plain-Python transcription of the official LETOR script Eval-Score-4.0.pl ------------------
# (Jun Xu & Tie-Yan Liu; LETOR 4.0 version of March 2009, P@N / NDCG hole fix of 2009-04-24)
NDCG_GAIN = {0: 0, 1: 1, 2: 3}  # %hsNdcgRelScore
PRECISION_REL = {0: 0, 1: 1, 2: 1}  # %hsPrecisionRel
MAX_POSITION = 10  # $iMaxPosition


def perl_rates(scores, labels):
    # EvalQuery: docs in file (line) order, then sort{$b pred <=> $a pred}; Perl's mergesort is
    # stable, and so is Python's sorted.
    order = sorted(range(len(scores)), key=lambda i: -float(scores[i]))
    return [int(labels[i]) for i in order]


def perl_precision_at_n(top_n, rates):
    precision, num_relevant = [], 0
    for i_pos in range(top_n):
        r = rates[i_pos] if i_pos < len(rates) else 0  # the hole is irrelevant
        if PRECISION_REL[r] == 1:
            num_relevant += 1
        precision.append(num_relevant / (i_pos + 1))
    return precision


def perl_map(rates):
    num_relevant, avg_precision = 0, 0.0
    for i_pos in range(len(rates)):
        if PRECISION_REL[rates[i_pos]] == 1:
            num_relevant += 1
            avg_precision += num_relevant / (i_pos + 1)
    if num_relevant == 0:
        return 0.0
    return avg_precision / num_relevant


def perl_dcg(top_n, rates):
    dcg = [NDCG_GAIN[rates[0]]]
    for i_pos in range(1, top_n):
        r = rates[i_pos] if i_pos < len(rates) else 0
        if i_pos < 2:
            dcg.append(dcg[i_pos - 1] + NDCG_GAIN[r])
        else:
            dcg.append(dcg[i_pos - 1] + NDCG_GAIN[r] * math.log(2.0) / math.log(i_pos + 1.0))
    return dcg


def perl_ndcg(top_n, rates):
    dcg = perl_dcg(top_n, rates)
    best_dcg = perl_dcg(top_n, sorted(rates, key=lambda r: -NDCG_GAIN[r]))
    ndcg = []
    for i_pos in range(min(top_n, len(rates))):
        ndcg.append(dcg[i_pos] / best_dcg[i_pos] if best_dcg[i_pos] != 0 else 0)
    return ndcg


def perl_query(scores, labels, max_position=MAX_POSITION):
    """(AP, NDCG@1..max_position, P@1..max_position) as OuputResults averages them."""
    rates = perl_rates(scores, labels)
    ndcg = perl_ndcg(len(rates), rates)  # EvalQuery calls NDCG($#rates + 1, @rates)
    # OuputResults adds $ndcg_q[$iPos] for $iPos < 10: an entry never filled is undef, i.e. 0
    ndcg_at = [ndcg[i] if i < len(ndcg) else 0.0 for i in range(max_position)]
    return perl_map(rates), ndcg_at, perl_precision_at_n(max_position, rates)


# --- helpers ------------------------------------------------------------------------------------


def random_queries(seed, count, n_max=N_PAD):
    """Queries with ties in scores, fewer than 10 docs, all-zero labels and all-equal scores."""
    rng = np.random.default_rng(seed)
    queries = []
    for q in range(count):
        n = int(rng.integers(1, n_max + 1))
        scores = [
            rng.integers(0, 3, n),  # many ties
            rng.normal(size=n),
            np.round(rng.normal(size=n), 1),
            np.zeros(n),  # one big tie: file order decides
        ][q % 4].astype(FLOAT)
        labels = rng.integers(0, 3, n) if q % 5 else np.zeros(n, np.int64)
        queries.append((scores, labels))
    return queries


def pad(rows, n_pad, fill, dtype):
    """Stack variable-length rows into (len(rows), n_pad) padded with `fill`, plus the mask."""
    out = np.full((len(rows), n_pad), fill, dtype=dtype)
    mask = np.zeros((len(rows), n_pad), bool)
    for i, row in enumerate(rows):
        out[i, : len(row)] = row
        mask[i, : len(row)] = True
    return out, mask


def batch(queries):
    scores, mask = pad([s for s, _ in queries], N_PAD, np.inf, FLOAT)
    # more garbage in the padding: NaN, inf and huge scores, big labels
    scores[:, -2:] = np.where(mask[:, -2:], scores[:, -2:], np.array([1e30, np.nan], FLOAT))
    labels, _ = pad([lab for _, lab in queries], N_PAD, 7, np.int64)
    return scores, labels, mask


def close(actual, expected, tol=TOL):
    np.testing.assert_allclose(np.asarray(actual), np.asarray(expected), rtol=tol, atol=tol)


def garbage_like(x, extra):
    """`extra` padded entries that would change any result if they were not masked."""
    x = np.asarray(x)
    if x.ndim == 2:  # pairs: indices out of range
        return np.full((extra, 2), 10**6, x.dtype)
    if np.issubdtype(x.dtype, np.integer):
        return np.full(extra, 60, x.dtype)  # label 60: gain 2**60 - 1
    return np.resize(np.array([1e30, -np.inf, np.inf, np.nan, 0.5], x.dtype), extra)


def canonical(x):
    x = np.asarray(x)
    return x.astype(FLOAT) if np.issubdtype(x.dtype, np.floating) else x.astype(np.int64)


@functools.cache
def compiled(f, static):
    return jax.jit(partial(f, **dict(static)))


def pad_args(f, arrays, mask=None):
    """The item axis of ``arrays`` (for pairwise_error_from_scores: of the pairs) padded to N_PAD
    with garbage, and the mask that hides it."""
    arrays = [canonical(a) for a in arrays]
    first = 1 if f is M.pairwise_error_from_scores else 0
    n = len(arrays[first])
    valid = np.ones(n, bool) if mask is None else np.asarray(mask, bool)
    arrays[first:] = [np.concatenate([a, garbage_like(a, N_PAD - n)]) for a in arrays[first:]]
    return arrays, np.concatenate([valid, np.zeros(N_PAD - n, bool)])


def ev(f, *arrays, mask=None, **static):
    """``f(*arrays, mask=mask, **static)`` under jit, padded by :func:`pad_args`: each function
    (and set of static arguments) compiles once for the whole module."""
    arrays, mask = pad_args(f, arrays, mask)
    return compiled(f, tuple(sorted(static.items())))(*arrays, mask=mask)


# --- LETOR metrics ------------------------------------------------------------------------------


def test_hand_worked_query():
    # Ranked labels [2, 0, 1]: gains 3, 0, 1, discounts 1, 1, 1/log2(3).
    # DCG@1..3 = 3, 3, 3 + 1/log2(3) = 3.63093. Ideal order [2, 1, 0]: IDCG@1..3 = 3, 4, 4.
    # NDCG@1..3 = 1, 3/4, 3.63093/4 = 0.907732; NDCG@4 = 0 (3 < 4 docs, official) or 0.907732.
    # Relevant (label >= 1) at positions 1 and 3: P@1..4 = 1, 1/2, 2/3, 2/4 (hole irrelevant);
    # AP = (1/1 + 2/3) / 2 = 5/6.
    scores, labels = [0.3, 0.2, 0.1], [2, 0, 1]
    ndcg3 = (3 + 1 / math.log2(3)) / 4
    out = ev(M.letor_metrics, scores, labels)
    close(out.ndcg, [1, 0.75, ndcg3] + [0] * 7)
    close(out.precision, [1, 0.5, 2 / 3, 0.5, 0.4, 2 / 6, 2 / 7, 2 / 8, 2 / 9, 0.2])
    close(out.map, 5 / 6)
    close(ev(M.letor_metrics, scores, labels, short_query="truncate").ndcg, [1, 0.75] + [ndcg3] * 8)
    close(ev(M.ndcg_at, scores, labels, k=5), 0.0)
    close(ev(M.ndcg_at, scores, labels, k=12, short_query="truncate"), ndcg3)
    close(ev(M.precision_at, scores, labels, k=3), 2 / 3)
    close(ev(M.average_precision, scores, labels), 5 / 6)
    # relevant_threshold=2: only the top document is relevant
    strict = ev(M.letor_metrics, scores, labels, relevant_threshold=2)
    close(strict.precision[:3], [1, 1 / 2, 1 / 3])
    close(strict.map, 1.0)
    # label 3 has gain 7. Ranked [0, 3]: DCG@2 = 0 + 7 (discount 1 at position 2) = ideal.
    close(ev(M.letor_metrics, [1.0, 0.0], [0, 3]).ndcg[1], 1.0)
    # ranked [0, 1, 3]: DCG@3 = 0 + 1 + 7/log2(3); ideal [3, 1, 0]: 7 + 1 + 0
    close(ev(M.letor_metrics, [2.0, 1.0, 0.0], [0, 1, 3]).ndcg[2], (1 + 7 / math.log2(3)) / 8)


def test_ties_keep_file_order():
    # all tied: file order, label 0 first
    close(ev(M.letor_metrics, np.zeros(3), [0, 0, 2]).ndcg[:3], [0, 0, 1 / math.log2(3)])
    close(ev(M.letor_metrics, np.zeros(3), [2, 0, 0]).ndcg[:3], [1, 1, 1])
    close(ev(M.average_precision, [1.0, 1.0, 0.0], [0, 1, 0]), 0.5)
    close(ev(M.average_precision, [1.0, 1.0, 0.0], [1, 0, 0]), 1.0)
    close(ev(M.letor_metrics, [0.0, -0.0], [0, 1]).ndcg[0], 0.0)  # -0.0 ties with 0.0


def test_matches_official_script_on_random_queries():
    queries = random_queries(seed=0, count=400)
    scores, labels, mask = batch(queries)
    out = jax.tree.map(np.asarray, jax.jit(jax.vmap(M.letor_metrics))(scores, labels, mask))
    for q, (s, lab) in enumerate(queries):
        ap, ndcg, precision = perl_query(s, lab)
        close(out.map[q], ap)
        close(out.ndcg[q], ndcg)
        close(out.precision[q], precision)
    # the official mean: plain mean over all queries, those without relevant documents included
    reference = np.mean([perl_query(s, lab)[1] for s, lab in queries], axis=0)
    close(np.mean(out.ndcg, axis=0), reference)


@pytest.mark.shared_data
def test_matches_official_script_on_mq2008(shared_data):
    """A real LETOR 4.0 test set (MQ2008 Fold1, 156 queries of 6 to 119 documents), ranked by a
    rounded feature: many ties, and queries shorter than 10."""
    queries = {}
    with gzip.open(shared_data / "MQ2008/Fold1/test.txt.gz", "rt") as lines:
        for line in lines:
            label, qid, first_feature = line.split()[:3]
            score = round(float(first_feature.split(":")[1]), 2)
            queries.setdefault(qid, []).append((score, int(label)))
    queries = [
        (np.array([s for s, _ in q], FLOAT), np.array([lab for _, lab in q]))
        for q in queries.values()
    ]
    n_pad = max(len(s) for s, _ in queries)
    scores, mask = pad([s for s, _ in queries], n_pad, np.nan, FLOAT)
    labels, _ = pad([lab for _, lab in queries], n_pad, 2, np.int64)
    out = jax.tree.map(np.asarray, jax.jit(jax.vmap(M.letor_metrics))(scores, labels, mask))
    perl = [perl_query(s, lab) for s, lab in queries]
    close(out.map, [ap for ap, _, _ in perl])
    close(out.ndcg, [ndcg for _, ndcg, _ in perl])
    close(out.precision, [precision for _, _, precision in perl])


CUTOFFS = (1, 3, 12, 20)  # 20 > N_PAD: past the end of the padded arrays


@jax.jit
@jax.vmap
def single_cutoffs(scores, labels, mask):
    """ndcg_at (both short-query modes), precision_at at CUTOFFS and average_precision."""
    return (
        [M.ndcg_at(scores, labels, k, mask) for k in CUTOFFS],
        [M.ndcg_at(scores, labels, k, mask, short_query="truncate") for k in CUTOFFS],
        [M.precision_at(scores, labels, k, mask) for k in CUTOFFS],
        M.average_precision(scores, labels, mask),
    )


def test_single_cutoff_functions_match_official_script():
    queries = random_queries(seed=1, count=120)
    ndcg, trunc, precision, ap = jax.tree.map(np.asarray, single_cutoffs(*batch(queries)))
    for q, (s, lab) in enumerate(queries):
        rates = perl_rates(s, lab)
        perl = perl_ndcg(len(rates), rates)
        for i, k in enumerate(CUTOFFS):
            close(ndcg[i][q], perl[k - 1] if k <= len(rates) else 0.0)
            close(trunc[i][q], perl[min(k, len(rates)) - 1])
            close(precision[i][q], perl_precision_at_n(k, rates)[k - 1])
        close(ap[q], perl_map(rates))


@settings(max_examples=50, deadline=None)
@given(
    st.lists(st.tuples(st.integers(-2, 2), st.integers(0, 2)), min_size=1, max_size=N_PAD),
    st.sampled_from(["letor", "truncate"]),
)
def test_official_script_property(docs, short_query):
    scores = np.array([s for s, _ in docs], FLOAT)
    labels = np.array([lab for _, lab in docs])
    out = ev(M.letor_metrics, scores, labels, short_query=short_query)
    ap, ndcg, precision = perl_query(scores, labels)
    if short_query == "truncate":
        ndcg = [ndcg[min(i, len(docs) - 1)] for i in range(MAX_POSITION)]
    close(out.map, ap)
    close(out.ndcg, ndcg)
    close(out.precision, precision)
    assert np.all((np.asarray(out.ndcg) >= 0) & (np.asarray(out.ndcg) <= 1 + TOL))


def test_brute_force_over_all_permutations():
    labels = np.array([0, 2, 1, 0, 1, 2])
    n, n_rel = len(labels), int(np.sum(labels >= 1))
    perms = np.array(list(itertools.permutations(range(n))))  # perms[p, r] = item at rank r
    scores = np.empty(perms.shape, FLOAT)
    np.put_along_axis(scores, perms, np.arange(n, 0, -1).astype(FLOAT)[None, :], axis=1)
    outs = [ev(M.letor_metrics, row, labels) for row in scores]  # NDCG and P at 1..10
    ndcg_n = np.array([o.ndcg[n - 1] for o in outs])
    precision = np.array([o.precision[:n] for o in outs])
    ranked = labels[perms]
    # NDCG@n = 1 iff the ranking is ideal, up to swapping positions 1 and 2 (same discount)
    top_two_sorted = np.concatenate([-np.sort(-ranked[:, :2], axis=1), ranked[:, 2:]], axis=1)
    ideal = np.all(np.diff(top_two_sorted, axis=1) <= 0, axis=1)
    np.testing.assert_array_equal(np.isclose(ndcg_n, 1.0, rtol=0, atol=TOL), ideal)
    assert 0 < ideal.sum() < len(perms)
    # a random ranking: E[P@k] = R/n, E[AP] = (H_n + (R-1)/(n-1) (n - H_n)) / n
    harmonic = sum(1 / i for i in range(1, n + 1))
    close(np.mean(precision, axis=0), np.full(n, n_rel / n))
    mean_ap = np.mean([o.map for o in outs])
    close(mean_ap, (harmonic + (n_rel - 1) / (n - 1) * (n - harmonic)) / n)


# --- pairwise metrics ---------------------------------------------------------------------------


def brute_force_auc(probs):
    positives, negatives = probs, FLOAT(1) - probs
    total = 0.0
    for p in positives:
        for q in negatives:
            total += 1.0 if p > q else 0.5 if p == q else 0.0
    return total / (len(positives) * len(negatives))


def test_pairwise_error_hand_worked():
    close(ev(M.pairwise_error, [0.9, 0.4, 0.5, 0.7]), 1.5 / 4)
    pairs = [[0, 1], [1, 0], [2, 3], [3, 0]]  # errors 0, 1, 1/2, 1
    close(ev(M.pairwise_error_from_scores, [3.0, 1.0, 2.0, 2.0], pairs), 2.5 / 4)


@pytest.mark.parametrize("seed", range(6))
def test_pairwise_auc_against_brute_force(seed):
    rng = np.random.default_rng(seed)
    m = int(rng.integers(1, N_PAD + 1))
    grid = rng.integers(0, 9, m) / 8  # dyadic: exact ties between p and 1 - p, p = 0.5 included
    probs = (grid if seed % 2 else rng.uniform(size=m)).astype(FLOAT)
    close(ev(M.pairwise_auc, probs), brute_force_auc(probs))
    error = np.mean(np.where(probs < 0.5, 1.0, np.where(probs == 0.5, 0.5, 0.0)))
    close(ev(M.pairwise_error, probs), error)


def test_pairwise_auc_extremes():
    close(ev(M.pairwise_auc, [0.6, 0.9, 0.51]), 1.0)
    close(ev(M.pairwise_auc, [0.5, 0.5]), 0.5)
    close(ev(M.pairwise_auc, [0.1, 0.3]), 0.0)


# --- rank correlations --------------------------------------------------------------------------


def test_lecture_notes_example():
    # Aalto notes: truth E > B > C > A > D, prediction with inverted pairs (A,B), (A,E), (A,C),
    # (B,E), i.e. A > B > E > C > D. Items in order A, B, C, D, E.
    truth, pred = [2.0, 4.0, 3.0, 1.0, 5.0], [5.0, 4.0, 2.0, 1.0, 3.0]
    close(ev(M.kendall_distance, truth, pred, normalize=False), 4.0)
    close(ev(M.kendall_distance, truth, pred), 4 / 10)
    close(ev(M.kendall_tau, truth, pred), (6 - 4) / 10)
    # footrule: positions A 4->1, B 2->2, C 3->4, D 5->5, E 1->3: 3 + 0 + 1 + 0 + 2
    close(ev(M.spearman_footrule, truth, pred), 6.0)
    close(ev(M.position_error, pred, truth), 2.0)  # E, the true best, is predicted third


@pytest.mark.parametrize("n", [2, 3, 6, 7])
def test_reversed_ranking(n):
    x = np.random.default_rng(n).permutation(n).astype(FLOAT)
    close(ev(M.kendall_distance, x, -x), 1.0)
    close(ev(M.kendall_tau, x, -x), -1.0)
    close(ev(M.spearman_rho, x, -x), -1.0)
    close(ev(M.spearman_footrule, x, -x), n * n // 2)
    close(ev(M.spearman_footrule, x, -x, normalize=True), 1.0)
    close(ev(M.position_error, -x, x), n - 1)


def test_all_permutations_of_five():
    n = 5
    perms = np.array(list(itertools.permutations(range(n)))).astype(FLOAT)
    truth = np.arange(n, dtype=FLOAT)
    for perm in perms:
        inversions = sum(perm[i] > perm[j] for i in range(n) for j in range(i + 1, n))
        close(ev(M.kendall_distance, truth, perm, normalize=False), inversions)
        close(ev(M.kendall_tau, truth, perm), 1 - 4 * inversions / (n * (n - 1)))
        # no ties: rho = 1 - 6 sum d^2 / (n (n^2 - 1)) with d the rank differences
        rho = 1 - 6 * np.sum((perm - truth) ** 2) / (n * (n * n - 1))
        close(ev(M.spearman_rho, truth, perm), rho)
        close(ev(M.spearman_footrule, truth, perm), np.sum(np.abs(perm - truth)))


def test_kendall_distance_ties_count_half():
    close(ev(M.kendall_distance, [1.0, 1.0, 2.0], [1.0, 2.0, 3.0], normalize=False), 0.5)
    close(ev(M.kendall_distance, [1.0, 1.0], [5.0, 5.0]), 0.0)  # tied in both: 0
    rng = np.random.default_rng(3)
    for _ in range(20):
        a, b = rng.integers(0, 3, 9).astype(FLOAT), rng.integers(0, 3, 9).astype(FLOAT)
        expected = 0.0
        for i in range(9):
            for j in range(i + 1, 9):
                da, db = np.sign(a[i] - a[j]), np.sign(b[i] - b[j])
                expected += 1.0 if da * db < 0 else 0.5 if (da == 0) != (db == 0) else 0.0
        close(ev(M.kendall_distance, a, b), expected / 36)


@pytest.mark.filterwarnings("ignore::scipy.stats.ConstantInputWarning")
def test_kendall_and_spearman_match_scipy():
    rng = np.random.default_rng(1)
    rows_a, rows_b = [], []
    for c in range(150):
        n = int(rng.integers(2, N_PAD + 1))
        hi = [2, 4, 50][c % 3]  # integer draws: ties, from many to few
        rows_a.append(rng.integers(0, hi, n).astype(FLOAT))
        rows_b.append(rng.integers(0, hi, n).astype(FLOAT) if c % 7 else np.full(n, 3.0))
    a, mask = pad(rows_a, N_PAD, 1e30, FLOAT)
    b, _ = pad(rows_b, N_PAD, -np.inf, FLOAT)
    tau = jax.jit(jax.vmap(M.kendall_tau))(a, b, mask)
    rho = jax.jit(jax.vmap(M.spearman_rho))(a, b, mask)
    for c, (ra, rb) in enumerate(zip(rows_a, rows_b, strict=True)):
        ref_tau = scipy.stats.kendalltau(ra, rb).statistic
        ref_rho = scipy.stats.spearmanr(ra, rb).statistic
        close(tau[c], 0.0 if np.isnan(ref_tau) else ref_tau)
        close(rho[c], 0.0 if np.isnan(ref_rho) else ref_rho)
    assert np.sum(np.asarray(tau) == 0) > 10  # the constant rows were exercised


def test_footrule_and_position_error_break_ties_by_index():
    # positions by a: 0->1, 1->2, 2->3; by b: 1->1, 2->2, 0->3; |1-3| + |2-1| + |3-2| = 4
    close(ev(M.spearman_footrule, [1.0, 1.0, 0.0], [0.0, 1.0, 1.0]), 4.0)
    # target = first item with the highest label (item 0), ranked last by score -> error 2
    close(ev(M.position_error, [0.0, 1.0, 2.0], [2, 0, 2]), 2.0)
    close(ev(M.position_error, np.zeros(3), [0, 0, 1]), 2.0)  # tied scores: index order
    close(ev(M.position_error, np.zeros(3), [1, 0, 1]), 0.0)


# --- calibration --------------------------------------------------------------------------------


def calibration_reference(probs, outcomes, n_bins):
    """(Brier, log loss, ECE, counts, mean p, mean outcome) by explicit loops."""
    eps = np.finfo(FLOAT).eps
    brier = log_loss = 0.0
    for p, o in zip(probs, outcomes, strict=True):
        brier += (p - o) ** 2
        q = min(max(p, eps), 1 - eps)
        log_loss -= o * math.log(q) + (1 - o) * math.log(1 - q)
    counts, mean_p, mean_o = np.zeros(n_bins, int), np.zeros(n_bins), np.zeros(n_bins)
    ece = 0.0
    for b in range(n_bins):
        lo, hi = FLOAT(b) / FLOAT(n_bins), FLOAT(b + 1) / FLOAT(n_bins)
        members = [i for i, p in enumerate(probs) if lo <= p < hi or (b == n_bins - 1 and p == 1.0)]
        if members:
            counts[b] = len(members)
            mean_p[b] = np.mean([probs[i] for i in members])
            mean_o[b] = np.mean([outcomes[i] for i in members])
            ece += len(members) / len(probs) * abs(mean_o[b] - mean_p[b])
    m = len(probs)
    return brier / m, log_loss / m, ece, counts, mean_p, mean_o


@pytest.mark.parametrize("n_bins", [1, 10, 15])
def test_calibration_against_loops(n_bins):
    rng = np.random.default_rng(n_bins)
    edges = np.arange(n_bins + 1, dtype=FLOAT) / FLOAT(n_bins)  # values exactly on bin edges
    probs = np.concatenate([rng.uniform(size=60 - n_bins), edges, [0, 1]]).astype(FLOAT)
    outcomes = (rng.uniform(size=probs.size) < probs).astype(FLOAT)
    outcomes[-2:] = [1.0, 0.0]  # confidently wrong: the log loss clipping matters
    brier, log_loss, ece, counts, mean_p, mean_o = calibration_reference(probs, outcomes, n_bins)
    p, o = jnp.asarray(probs), jnp.asarray(outcomes)  # always 63 items: compiled once
    close(compiled(M.brier_score, ())(p, o), brier)
    close(compiled(M.log_loss, ())(p, o), log_loss)
    close(compiled(M.expected_calibration_error, (("n_bins", n_bins),))(p, o), ece)
    curve = compiled(M.reliability_curve, (("n_bins", n_bins),))(p, o)
    np.testing.assert_array_equal(curve.counts, counts)
    close(curve.mean_prob, mean_p)
    close(curve.mean_outcome, mean_o)


def test_calibration_hand_worked():
    # bins of width 1/2: {0.2, 0.4} with outcomes {0, 1}, {0.9} with outcome 1
    # ECE = 2/3 |0.5 - 0.3| + 1/3 |1 - 0.9| = 0.2 / 1.5 + 0.1 / 3 = 1/6
    probs, outcomes = [0.2, 0.4, 0.9], [0.0, 1.0, 1.0]
    close(ev(M.expected_calibration_error, probs, outcomes, n_bins=2), 1 / 6, tol=10 * TOL)
    close(ev(M.brier_score, probs, outcomes), (0.04 + 0.36 + 0.01) / 3, tol=10 * TOL)
    curve = ev(M.reliability_curve, [-0.1, 1.2], [0.0, 1.0], n_bins=4)
    np.testing.assert_array_equal(curve.counts, [1, 0, 0, 1])  # out of [0, 1]: end bins
    close(ev(M.log_loss, [0.0], [1.0]), -math.log(np.finfo(FLOAT).eps))


# --- padding, jit, vmap, retracing, degenerate input --------------------------------------------

# (function, static keyword arguments, kind of input)
CASES = [
    (M.ndcg_at, {"k": 5}, "query"),
    (M.ndcg_at, {"k": 12, "short_query": "truncate"}, "query"),
    (M.precision_at, {"k": 3}, "query"),
    (M.average_precision, {}, "query"),
    (M.letor_metrics, {}, "query"),
    (M.position_error, {}, "query"),
    (M.kendall_tau, {}, "two"),
    (M.kendall_distance, {}, "two"),
    (M.spearman_rho, {}, "two"),
    (M.spearman_footrule, {}, "two"),
    (M.spearman_footrule, {"normalize": True}, "two"),
    (M.pairwise_error, {}, "probs"),
    (M.pairwise_auc, {}, "probs"),
    (M.pairwise_error_from_scores, {}, "pairs"),
    (M.brier_score, {}, "calib"),
    (M.log_loss, {}, "calib"),
    (M.expected_calibration_error, {"n_bins": 7}, "calib"),
    (M.reliability_curve, {}, "calib"),
]
IDS = [f"{f.__name__}-{'-'.join(map(str, kw.values()))}" for f, kw, _ in CASES]


def make_args(kind, rng, n):
    """Arguments (each of leading length n) for one evaluation, ties included."""
    if kind == "query":
        return rng.integers(0, 4, n).astype(FLOAT), rng.integers(0, 3, n)
    if kind == "two":
        return rng.integers(0, 4, n).astype(FLOAT), rng.normal(size=n).astype(FLOAT)
    if kind == "probs":
        return (rng.integers(0, 9, n) / 8).astype(FLOAT), None
    if kind == "pairs":
        return rng.integers(0, 3, 6).astype(FLOAT), rng.integers(0, 6, (n, 2))
    probs = rng.uniform(size=n).astype(FLOAT)
    return probs, (rng.uniform(size=n) < probs).astype(FLOAT)


@pytest.mark.parametrize(("f", "kw", "kind"), CASES, ids=IDS)
@pytest.mark.slow
def test_padding_and_jit(f, kw, kind):
    args = [canonical(a) for a in make_args(kind, np.random.default_rng(7), 9) if a is not None]
    eager = f(*args, **kw)  # no jit, no padding
    padded = ev(f, *args, **kw)  # jit, padded to N_PAD with masked garbage
    for e, p in zip(jax.tree.leaves(eager), jax.tree.leaves(padded), strict=True):
        assert np.all(np.isfinite(p))
        # the same sums (the padding adds exact zeros), up to the compiler's order of operations
        close(p, e, tol=4 * np.finfo(FLOAT).eps)


@pytest.mark.slow  # 3 s or more in the fast loop
def test_vmap_equals_python_loop():
    rng = np.random.default_rng(11)
    lengths = (1, 4, 9, N_PAD)
    rows = [
        [[canonical(a) for a in make_args(kind, rng, n) if a is not None] for n in lengths]
        for _, _, kind in CASES
    ]
    inputs = []
    for (f, _, _), case_rows in zip(CASES, rows, strict=True):
        padded = [pad_args(f, row) for row in case_rows]
        columns = zip(*(arrays for arrays, _ in padded), strict=True)
        inputs.append(([np.stack(c) for c in columns], np.stack([m for _, m in padded])))

    @jax.jit
    def batched(inputs):  # every case, each vmapped over its batch of padded problems
        return [
            jax.vmap(lambda m, *a, f=f, kw=kw: f(*a, mask=m, **kw))(masks, *arrays)
            for (f, kw, _), (arrays, masks) in zip(CASES, inputs, strict=True)
        ]

    for (f, kw, _), out, case_rows in zip(CASES, batched(inputs), rows, strict=True):
        for r, row in enumerate(case_rows):
            single = ev(f, *row, **kw)
            for b, one in zip(jax.tree.leaves(out), jax.tree.leaves(single), strict=True):
                close(b[r], one)


def test_second_call_does_not_retrace():
    traces = []

    @jax.jit
    def evaluate(scores, labels, probs, mask):
        traces.append(None)  # runs only while tracing
        letor = jax.vmap(M.letor_metrics)(scores, labels, mask)
        return letor, jax.vmap(M.log_loss)(probs, probs, mask)

    rng = np.random.default_rng(0)
    for _ in range(3):
        scores = rng.normal(size=(4, N_PAD)).astype(FLOAT)
        labels = rng.integers(0, 3, (4, N_PAD))
        probs = rng.uniform(size=(4, N_PAD)).astype(FLOAT)
        mask = rng.uniform(size=(4, N_PAD)) < 0.8
        jax.block_until_ready(evaluate(scores, labels, probs, mask))
    assert len(traces) == 1


# documented values with no valid item (all-False mask, or arrays of length 0)
EMPTY = {
    "ndcg_at": 0.0,
    "precision_at": 0.0,
    "average_precision": 0.0,
    "position_error": 0.0,
    "kendall_tau": 0.0,
    "kendall_distance": 0.0,
    "spearman_rho": 0.0,
    "spearman_footrule": 0.0,
    "pairwise_error": 0.0,
    "pairwise_auc": 0.5,
    "pairwise_error_from_scores": 0.0,
    "brier_score": 0.0,
    "log_loss": 0.0,
    "expected_calibration_error": 0.0,
}


@pytest.mark.parametrize("n", [0, 5])
@pytest.mark.parametrize(("f", "kw", "kind"), CASES, ids=IDS)
def test_no_valid_item_gives_documented_value(f, kw, kind, n):
    rng = np.random.default_rng(0)
    args = [canonical(a) for a in make_args(kind, rng, n) if a is not None]
    if n == 0:  # arrays of length 0
        out = compiled(f, tuple(sorted(kw.items())))(*args, mask=np.zeros(0, bool))
    else:  # all masked (and padded on to N_PAD)
        args = [a if kind == "pairs" and i == 0 else garbage_like(a, n) for i, a in enumerate(args)]
        out = ev(f, *args, mask=np.zeros(n, bool), **kw)
    leaves = jax.tree.leaves(out)
    assert all(np.all(np.isfinite(x)) for x in leaves)
    if f.__name__ in EMPTY:
        close(out, EMPTY[f.__name__])
    else:  # letor_metrics and reliability_curve: all zeros
        assert all(np.all(np.asarray(x) == 0) for x in leaves)


def test_constant_or_single_item_correlations_are_zero():
    const, x = np.full(5, 2.0), np.arange(5.0)
    for f in (M.kendall_tau, M.spearman_rho):
        close(ev(f, const, x), 0.0)
        close(ev(f, x, const), 0.0)
        close(ev(f, [1.0], [3.0]), 0.0)
    close(ev(M.kendall_distance, [1.0], [3.0]), 0.0)


def test_invalid_static_arguments():
    s, lab = jnp.zeros(3), jnp.zeros(3, int)
    with pytest.raises(ValueError, match="k must be"):
        M.ndcg_at(s, lab, 0)
    with pytest.raises(ValueError, match="short_query"):
        M.ndcg_at(s, lab, 2, short_query="trec")
    with pytest.raises(ValueError, match="max_k"):
        M.letor_metrics(s, lab, max_k=0)
    with pytest.raises(ValueError, match="n_bins"):
        M.reliability_curve(s, s, n_bins=0)
    with pytest.raises(TypeError, match="static"):
        jax.jit(M.precision_at)(s, lab, 3)
