"""The paper's relational study (Kersting & Xu 2009, Sec. 6, Fig. 2), with the controls it lacks:
do relations help beyond an independent per-entity effect, and beyond a placebo graph?

Protocol, per collection: ``--queries`` queries (seeded; the choice is recorded), for each
number of known pairs ``k`` in ``--known`` and each of ``--repeats`` repetitions, ``k`` of a
query's pairs known (uniformly at random, key ``fold_in(fold_in(PRNGKey(seed), r), q)``) and
every other pair of the query a test pair. Every model is fitted on the known pairs and predicts
every test pair (transductively: all of a query's entities are in its prior).

Models (the GPs' hyperparameters fitted by evidence maximisation, one ``theta`` shared by the
queries of a repetition, ``bayesrank.learning.fit_hyperparameters``, the queries batched):

- ``PGP``: RBF on the attributes (a fixed 1e-3 entity jitter keeps duplicate documents apart);
- ``PGP+I``: RBF + an independent per-entity effect ``s^2 I`` (``s`` learned): the control for
  the regularized Laplacian's own ``I / iota^2`` term, itself an entity effect;
- ``XPGP``: RBF + a regularized Laplacian per relation (``beta`` fixed, ``iota`` and the mixing
  weights learned), every relation of the collection together;
- ``XPGP-Silva``: RBF + Silva et al.'s hidden-common-cause kernel (one cause per edge);
- ``XPGP-diffusion``: RBF + a diffusion kernel per relation;
- ``placebo``: ``XPGP`` with each relation graph's entities permuted (``permute_graph``: degrees
  and weights kept, identity broken); five permutations per query, repetition ``r`` uses
  permutation ``r mod 5``;
- ``XPGP[<relation>]``: one relation alone (where a collection has several);
- ``RankSVM``: kernel RankSVM on the entities (RBF), ``gamma`` (1/16, 1/4, 1 or 4 times the
  median heuristic's) and ``C`` (0.1 to 1000, by decades) by 3-fold cross-validation on each
  query's known pairs;
- ``LapRankSVM``: the Laplacian-regularised ranking SVM of Qin et al. (WWW 2008) in its
  transductive form: RankSVM with the deformed kernel ``(K^-1 + gamma_L L)^-1`` (Sindhwani et
  al. 2005), ``L`` the Laplacian of the summed relations, ``gamma_L`` from {0.1, 1, 10} by the
  same cross-validation (``C`` as RankSVM's).

Reported per (collection, k, model): pairwise error (a predicted probability within 1e-3 of
1/2 counted as half an error, see ``TIE``; ``err_untied`` without that rule) and AUC (mean and
sd over query-repetitions), the mean log-probability of the truth, the Brier score and the
expected calibration error of the predicted probabilities (pairs oriented at random), the error
split by how many of a test pair's entities occur in known pairs (both, one, neither), the
relative error reduction of ``XPGP`` over each comparator with a Wilcoxon signed-rank test over
the queries (the paper's) and a paired t-test over the query-repetitions. Collections:

- ``OHSUMED`` (LETOR 3.0, QueryLevelNorm, Fold1's 106 queries): queries with at least 400 pairs;
  the relation: the keyword graph (cosine similarity of query-term frequencies, 10 neighbours);
- ``MovieLens`` (HetRec 2011, the 38 users with ratings): users with at least 60 rated movies,
  ``--max-movies`` of each user's movies; attributes: 27 movie features; relations co-director,
  co-genre, co-country, shared tag and co-actor (bipartite projections; the actor file covers the
  first 473 movies only, others are isolated in it). The TREC study of the paper (Fig. 3) cannot
  be rerun: its hyperlink data is not available; co-actor and co-director are the nearest
  substitutes for its co-citation relation;
- ``MQ2008`` (LETOR 4.0, S1-S5): a feature-similarity relation (RBF-weighted 10 nearest
  neighbours), built from the attributes themselves;
- ``dir``: any collection in the on-disk format of :mod:`bayesrank.data.study`
  (``--data-dir``);
- ``sample``: the bundled OHSUMED sample (five queries), for a run of a few minutes.

    python experiments/relational.py --collection OHSUMED|MovieLens|MQ2008|dir|sample
        [--data-dir DIR] [--queries 10] [--known 100 150 200] [--repeats 20] [--models ...]
        [--max-movies 100]
        [--seed 0] [--out DIR]

Writes ``<out>/results.json`` (every query-repetition's numbers), ``<out>/table.txt`` and,
with matplotlib, ``<out>/curves.png`` (error and AUC against ``k``, bands: sd over
query-repetitions).
"""

from __future__ import annotations

import argparse
import dataclasses
import gzip
import json
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import jax

jax.config.update("jax_enable_x64", True)
from bayesrank.runtime import enable_compilation_cache  # noqa: E402

enable_compilation_cache()

import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from jax.scipy.special import log_ndtr  # noqa: E402

from bayesrank.baselines.ranksvm import fit_kernel, rbf_kernel  # noqa: E402
from bayesrank.data.graphs import (  # noqa: E402
    feature_similarity_graph,
    load_hetrec_relations,
    ohsumed_keyword_graph,
    permute_graph,
)
from bayesrank.data.graphs.relations import bipartite_projection_from_pairs  # noqa: E402
from bayesrank.data.letor import load_letor  # noqa: E402
from bayesrank.data.pairs import pairs_from_grades  # noqa: E402
from bayesrank.data.problem import PreferenceProblem  # noqa: E402
from bayesrank.data.sample import load_sample, sample_meta_path  # noqa: E402
from bayesrank.data.study import (  # noqa: E402
    SEEN,
    StudyQuery,
    read_study_dir,
    seen_category,
    split_known,
)
from bayesrank.kernels import (  # noqa: E402
    RBF,
    XPGP,
    Diffusion,
    HiddenCommonCause,
    Independent,
    RegularizedLaplacian,
)
from bayesrank.learning import default_trainable, fit_hyperparameters  # noqa: E402
from bayesrank.metrics import pairwise_auc, pairwise_error  # noqa: E402
from bayesrank.metrics.calibration import brier_score, expected_calibration_error  # noqa: E402
from bayesrank.parallel import map_queries  # noqa: E402
from bayesrank.predict import predict_pairs  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from accuracy_data import movie_attributes, scale01, user_ratings  # noqa: E402

REPO_ROOT = Path(__file__).resolve().parents[1]
PLACEBO_PERMUTATIONS = 5
JITTER = 1e-3
GRID = (0.1, 1.0, 10.0)
GAMMA_SCALES = (1 / 16, 1 / 4, 1.0, 4.0)  # times the median heuristic's gamma
SVM_C = (0.1, 1.0, 10.0, 100.0, 1000.0)
FOLDS = 3
#: A predicted P(truth) within TIE of 1/2 is a coin flip: half an error. Without it, an
#: attribute-only GP "separates" documents with identical features (a third of some OHSUMED
#: queries' documents) by the sign of its 1e-3 jitter's effect, i.e. by a per-entity effect.
TIE = 1e-3
COMPARATORS = ("PGP", "PGP+I", "placebo", "RankSVM", "LapRankSVM")


# --- collections -----------------------------------------------------------------------------


def _choose(items, count, seed):
    if count >= len(items):
        return list(items)
    pick = np.sort(np.random.default_rng(seed).choice(len(items), count, replace=False))
    return [items[i] for i in pick]


def ohsumed(args) -> list[StudyQuery]:
    fold = args.data_dir / "OHSUMED/QueryLevelNorm/Fold1"
    queries = [q for part in ("train", "vali", "test") for q in load_letor(fold / f"{part}.txt.gz")]
    need = 2 * max(args.known)
    eligible = [q for q in queries if len(pairs_from_grades(q.grades)) >= need]
    out = []
    for q in _choose(eligible, args.queries, args.seed):
        meta = args.data_dir / "OHSUMED/Meta" / f"query-{q.qid}.xml.gz"
        W = ohsumed_keyword_graph(meta, doc_ids=q.doc_ids, k=10)[0]
        out.append(StudyQuery(q.qid, q.X, pairs_from_grades(q.grades), {"keyword": W}, q.grades))
    return out


def sample(args) -> list[StudyQuery]:
    out = []
    for q in load_sample():
        pairs = pairs_from_grades(q.grades)
        if len(pairs) < 2 * max(args.known):
            continue
        W = ohsumed_keyword_graph(sample_meta_path(q.qid), doc_ids=q.doc_ids, k=10)[0]
        out.append(StudyQuery(q.qid, q.X, pairs, {"keyword": W}, q.grades))
    return out


def mq2008(args) -> list[StudyQuery]:
    queries = [q for s in range(1, 6) for q in load_letor(args.data_dir / f"MQ2008/S{s}.txt.gz")]
    need = 2 * max(args.known)
    eligible = [q for q in queries if len(pairs_from_grades(q.grades)) >= need]
    return [
        StudyQuery(
            q.qid,
            q.X,
            pairs_from_grades(q.grades),
            {"feature_knn": feature_similarity_graph(q.X, k=10)},
            q.grades,
        )
        for q in _choose(eligible, args.queries, args.seed)
    ]


def _co_actor(base: Path, movies) -> np.ndarray:
    path = base / "movie_actors_PARTIAL_first473movies.dat.gz"
    rows = gzip.open(path, "rt", encoding="latin-1").read().splitlines()[1:]
    members = [(int(r.split("\t")[0]), r.split("\t")[1]) for r in rows if r.strip()]
    return bipartite_projection_from_pairs(movies, members).W


def movielens(args) -> list[StudyQuery]:
    base = args.data_dir / "hetrec2011-movielens-2k"
    ratings = user_ratings(args.data_dir)
    attrs = movie_attributes(args.data_dir)
    users = [u for u in sorted(ratings) if sum(m in attrs for m in ratings[u]) >= 60]
    rng = np.random.default_rng(args.seed)
    out = []
    for u in _choose(users, args.queries, args.seed):
        movies = [m for m in sorted(ratings[u]) if m in attrs]
        if len(movies) > args.max_movies:
            movies = sorted(rng.choice(movies, args.max_movies, replace=False).tolist())
        grades = np.array([ratings[u][m] for m in movies])
        relations = load_hetrec_relations(base, movies)
        relations["co_actor"] = _co_actor(base, movies)
        X = scale01(np.stack([attrs[m] for m in movies]))
        out.append(StudyQuery(f"user{u}", X, pairs_from_grades(grades), relations, grades))
    return out


COLLECTIONS = {
    "OHSUMED": ohsumed,
    "MovieLens": movielens,
    "MQ2008": mq2008,
    "sample": sample,
    "dir": lambda args: read_study_dir(args.data_dir),
}


# --- models ----------------------------------------------------------------------------------


def model_names(relations: list[str]) -> list[str]:
    names = ["PGP", "PGP+I", "XPGP", "XPGP-Silva", "XPGP-diffusion", "placebo"]
    if len(relations) > 1:
        names += [f"XPGP[{r}]" for r in relations]
    return [*names, "RankSVM", "LapRankSVM"]


def gp_prior(model: str, relations: list[str]):
    """``(prior, trainable, relation names used)`` of a GP model."""
    if model in ("PGP", "PGP+I"):
        prior = XPGP(RBF(), (), entity=Independent(JITTER if model == "PGP" else 0.1))
        trainable = default_trainable(prior)
        if model == "PGP":
            trainable = dataclasses.replace(
                trainable, entity=dataclasses.replace(trainable.entity, scale=False)
            )
        return prior, trainable, []
    used = [model[5:-1]] if model.startswith("XPGP[") else relations
    kernel = {"XPGP-Silva": HiddenCommonCause, "XPGP-diffusion": Diffusion}.get(
        model, RegularizedLaplacian
    )
    prior = XPGP(RBF(), tuple(kernel() for _ in used))
    return prior, default_trainable(prior), used


def fit_gp(model, queries, splits, relations, rep):
    """Fit one GP model (shared theta over the queries) on the known pairs; per query the
    posterior ``(mean, cov)``, and the fitted prior."""
    prior, trainable, used = gp_prior(model, relations)
    problems = []
    for b, (q, (known, _)) in enumerate(zip(queries, splits, strict=True)):
        graphs = [q.relations[r] for r in used]
        if model == "placebo":
            key = jax.random.fold_in(jax.random.PRNGKey(10_000 + b), rep % PLACEBO_PERMUTATIONS)
            graphs = [permute_graph(jax.random.fold_in(key, g), W)[0] for g, W in enumerate(graphs)]
        problems.append(PreferenceProblem.create(known, q.X, relations=graphs))
    fit = fit_hyperparameters(prior, problems, trainable=trainable)
    post = fit.posteriors
    mean, cov = np.asarray(post.mean), np.asarray(post.cov)
    return [(mean[b, : q.n], cov[b, : q.n, : q.n]) for b, q in enumerate(queries)], fit.prior


def _median_gamma(X) -> float:
    d2 = ((X[:, None] - X[None]) ** 2).sum(-1)[np.triu_indices(len(X), 1)]
    return 1.0 / max(float(np.median(d2[d2 > 0])), 1e-12)


def _deformed(K, W, gamma_l):
    """``(K^-1 + gamma_l L)^-1 = K (I + gamma_l L K)^-1``, symmetrised."""
    L = np.diag(W.sum(1)) - W
    D = np.linalg.solve((np.eye(len(K)) + gamma_l * L @ K).T, K.T).T
    return 0.5 * (D + D.T)


@jax.jit
def _ranksvm_batch(K, pairs, mask, C):
    def one(K, pairs, mask, C):
        return K @ fit_kernel(K, pairs, C, mask).beta

    return map_queries(one, K, pairs, mask, C)


def _stack(Ks, pair_lists):
    n = max(len(K) for K in Ks)
    m = max(max(len(p) for p in pair_lists), 1)
    K = np.zeros((len(Ks), n, n))
    pairs = np.zeros((len(Ks), m, 2), np.int64)
    mask = np.zeros((len(Ks), m), bool)
    for b, (Kb, p) in enumerate(zip(Ks, pair_lists, strict=True)):
        K[b, : len(Kb), : len(Kb)] = Kb
        pairs[b, : len(p)] = p
        mask[b, : len(p)] = True
    return K, pairs, mask


def _scores(Ks, pair_lists, Cs):
    """RankSVM scores ``K beta`` per query, all queries in one compiled call."""
    K, pairs, mask = _stack(Ks, pair_lists)
    out = np.asarray(_ranksvm_batch(K, pairs, mask, np.asarray(Cs, float)))
    return [out[b, : len(Kb)] for b, Kb in enumerate(Ks)]


def _cv_error(Ks, splits, Cs, rng_seed):
    """Mean 3-fold CV pair error of RankSVM per query (folds of each query's known pairs)."""
    errors = np.zeros(len(Ks))
    folds = [
        np.random.default_rng(rng_seed + b).permutation(len(known)) % FOLDS
        for b, (known, _) in enumerate(splits)
    ]
    for f in range(FOLDS):
        train = [known[fold != f] for (known, _), fold in zip(splits, folds, strict=True)]
        held = [known[fold == f] for (known, _), fold in zip(splits, folds, strict=True)]
        scores = _scores(Ks, train, Cs)
        for b, (s, h) in enumerate(zip(scores, held, strict=True)):
            d = s[h[:, 0]] - s[h[:, 1]]
            errors[b] += np.mean((d < 0) + 0.5 * (d == 0)) / FOLDS
    return errors


def fit_svms(queries, splits, relations, seed):
    """RankSVM and LapRankSVM: per query the scores of every entity, and the chosen settings.
    RankSVM's ``(gamma, C)`` by cross-validation over ``GAMMA_SCALES x GRID``; LapRankSVM's
    ``gamma_L`` over ``GRID``, with RankSVM's ``gamma`` and ``C``."""
    medians = [_median_gamma(q.X) for q in queries]
    options = [(g, C) for g in GAMMA_SCALES for C in SVM_C]
    Ks = {
        g: [np.asarray(rbf_kernel(q.X, q.X, g * m)) for q, m in zip(queries, medians, strict=True)]
        for g in GAMMA_SCALES
    }
    cv = np.stack([_cv_error(Ks[g], splits, [C] * len(queries), seed) for g, C in options])
    best = [options[i] for i in np.argmin(cv, axis=0)]
    K = [Ks[g][b] for b, (g, _) in enumerate(best)]
    C = [c for _, c in best]
    known = [kn for kn, _ in splits]
    svm = _scores(K, known, C)
    W = [sum(q.relations[r] for r in relations) for q in queries]
    deformed = {g: [_deformed(Kb, w, g) for Kb, w in zip(K, W, strict=True)] for g in GRID}
    cv = np.stack([_cv_error(deformed[g], splits, C, seed) for g in GRID])
    gamma_l = [GRID[i] for i in np.argmin(cv, axis=0)]
    lap = _scores([deformed[g][b] for b, g in enumerate(gamma_l)], known, C)
    chosen = {"gamma_scale": [g for g, _ in best], "C": C, "gamma_L": gamma_l}
    return {"RankSVM": svm, "LapRankSVM": lap}, chosen


# --- evaluation ------------------------------------------------------------------------------


def evaluate(prob, log_prob, test, known, n, flip) -> dict:
    """Numbers of one query-repetition from ``prob: (p,)``, P(truth) of each test pair. The
    error counts ``|P - 1/2| < TIE`` as half an error (:data:`TIE`)."""
    prob = np.asarray(prob)
    tied = np.abs(prob - 0.5) < TIE
    out = {
        "err": float(pairwise_error(np.where(tied, 0.5, prob))),
        "err_untied": float(pairwise_error(prob)),
        "ties": float(tied.mean()),
        "auc": float(pairwise_auc(prob)),
    }
    if log_prob is not None:
        y = (~flip).astype(float)
        p = np.where(flip, 1.0 - prob, prob)
        out["loglik"] = float(np.mean(log_prob))
        out["brier"] = float(brier_score(p, y))
        out["ece"] = float(expected_calibration_error(p, y))
    category = seen_category(known, test, n)
    wrong = np.where(tied, 0.5, prob < 0.5)
    for name, code in SEEN.items():
        hit = category == code
        out[f"count_{name}"] = int(hit.sum())
        out[f"err_{name}"] = float(wrong[hit].mean()) if hit.any() else None
    return out


def gp_numbers(mean, cov, known, test, n, flip) -> dict:
    pred = predict_pairs(jnp.asarray(mean), jnp.asarray(cov), jnp.asarray(test))
    log_prob = log_ndtr(pred.delta_mean / jnp.sqrt(1.0 + pred.delta_var))
    return evaluate(np.asarray(pred.prob), np.asarray(log_prob), test, known, n, flip)


def svm_numbers(scores, known, test, n) -> dict:
    d = scores[test[:, 0]] - scores[test[:, 1]]
    prob = 1.0 / (1.0 + np.exp(-np.clip(d, -50, 50)))  # a monotone map: error and AUC only
    prob = np.where(d == 0, 0.5, prob)
    return evaluate(prob, None, test, known, n, None)


def run_setting(queries, k, args, relations, models):
    """Every repetition of one number of known pairs: {model: [rows per query-repetition]}."""
    rows = {m: [] for m in models}
    hyper = {m: [] for m in models}
    for rep in range(args.repeats):
        key = jax.random.fold_in(jax.random.PRNGKey(args.seed), rep)
        splits = [
            split_known(jax.random.fold_in(key, b), q.pairs, k) for b, q in enumerate(queries)
        ]
        flips = [
            np.random.default_rng([args.seed, rep, b]).uniform(size=len(test)) < 0.5
            for b, (_, test) in enumerate(splits)
        ]
        for model in models:
            if model in ("RankSVM", "LapRankSVM"):
                continue
            posts, prior = fit_gp(model, queries, splits, relations, rep)
            hyper[model].append(str(prior))
            for b, (q, (mean, cov)) in enumerate(zip(queries, posts, strict=True)):
                known, test = splits[b]
                row = gp_numbers(mean, cov, known, test, q.n, flips[b])
                rows[model].append({"qid": q.qid, "rep": rep, **row})
        if {"RankSVM", "LapRankSVM"} & set(models):
            scores, chosen = fit_svms(queries, splits, relations, args.seed + rep)
            for model in ("RankSVM", "LapRankSVM"):
                if model not in models:
                    continue
                hyper[model].append(chosen)
                for b, q in enumerate(queries):
                    known, test = splits[b]
                    row = svm_numbers(scores[model][b], known, test, q.n)
                    rows[model].append({"qid": q.qid, "rep": rep, **row})
        print(f"  k={k} repetition {rep + 1}/{args.repeats} done", flush=True)
    return rows, hyper


# --- statistics and reporting ----------------------------------------------------------------


def _stat(rows, key):
    values = np.array([r[key] for r in rows if r.get(key) is not None], float)
    if not len(values):
        return None
    return {"mean": float(values.mean()), "sd": float(values.std(ddof=1)) if len(values) > 1 else 0}


def compare(rows, target: str, other: str) -> dict:
    """``target`` against ``other``: relative error reduction, Wilcoxon over the per-query mean
    errors (the paper's test), paired t-test over the query-repetitions."""
    from scipy.stats import ttest_rel, wilcoxon

    a = {(r["qid"], r["rep"]): r["err"] for r in rows[target]}
    b = {(r["qid"], r["rep"]): r["err"] for r in rows[other]}
    keys = sorted(a)
    ea, eb = np.array([a[x] for x in keys]), np.array([b[x] for x in keys])
    qids = sorted({q for q, _ in keys})
    qa = np.array([np.mean([a[x] for x in keys if x[0] == q]) for q in qids])
    qb = np.array([np.mean([b[x] for x in keys if x[0] == q]) for q in qids])
    out = {"reduction": float((eb.mean() - ea.mean()) / eb.mean()) if eb.mean() > 0 else None}
    out["wilcoxon_p"] = float(wilcoxon(qa, qb).pvalue) if np.any(qa != qb) else 1.0
    out["ttest_p"] = float(ttest_rel(ea, eb).pvalue) if np.any(ea != eb) else 1.0
    out["queries_lower"] = int(np.sum(qa < qb))
    out["queries"] = len(qids)
    return out


def summarize(rows) -> dict:
    keys = ["err", "err_untied", "ties", "auc", "loglik", "brier", "ece"]
    keys += ["err_both", "err_one", "err_neither"]
    summary = {m: {k: _stat(r, k) for k in keys} for m, r in rows.items() if r}
    for m, r in rows.items():
        if r:
            summary[m]["counts"] = {name: int(sum(x[f"count_{name}"] for x in r)) for name in SEEN}
    return summary


def fmt(stat, digits=3) -> str:
    return "-" if stat is None else f"{stat['mean']:.{digits}f}+-{stat['sd']:.{digits}f}"


def table(results) -> str:
    lines = []
    for k, block in results["settings"].items():
        lines.append(f"== {results['collection']}, {k} known pairs ==")
        lines.append(
            f"{'model':<26}{'error':>14}{'AUC':>14}{'log P(truth)':>15}{'Brier':>8}{'ECE':>8}"
            f"{'err both':>10}{'err one':>9}{'err neither':>12}"
        )
        for m, s in block["summary"].items():
            short = lambda x: "-" if x is None else f"{x['mean']:.3f}"  # noqa: E731
            lines.append(
                f"{m:<26}{fmt(s['err']):>14}{fmt(s['auc']):>14}{short(s['loglik']):>15}"
                f"{short(s['brier']):>8}{short(s['ece']):>8}{short(s['err_both']):>10}"
                f"{short(s['err_one']):>9}{short(s['err_neither']):>12}"
            )
        counts = next(iter(block["summary"].values()))["counts"]
        lines.append(f"test pairs by seen entities (all repetitions): {counts}")
        for other, c in block["comparisons"].items():
            red = "-" if c["reduction"] is None else f"{100 * c['reduction']:+.1f}%"
            lines.append(
                f"XPGP vs {other:<14} error reduction {red:>7}; lower in {c['queries_lower']} of "
                f"{c['queries']} queries; Wilcoxon p={c['wilcoxon_p']:.3g}, paired t "
                f"p={c['ttest_p']:.3g}"
            )
        lines.append("")
    return "\n".join(lines)


def markdown(results) -> str:
    """The summary as Markdown tables (for ``docs/results.md``)."""
    lines = []
    for k, block in results["settings"].items():
        lines += [
            f"**{results['collection']}, {k} known pairs**",
            "",
            "| model | error | AUC | log P(truth) | Brier | ECE | error: both seen | one | "
            "neither |",
            "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
        ]
        for m, s in block["summary"].items():
            short = lambda x: "-" if x is None else f"{x['mean']:.3f}"  # noqa: E731
            lines.append(
                f"| {m} | {fmt(s['err'])} | {fmt(s['auc'])} | {short(s['loglik'])} | "
                f"{short(s['brier'])} | {short(s['ece'])} | {short(s['err_both'])} | "
                f"{short(s['err_one'])} | {short(s['err_neither'])} |"
            )
        lines += [
            "",
            "| XPGP against | error reduction | queries lower | Wilcoxon p | paired t p |",
        ]
        lines.append("| --- | ---: | ---: | ---: | ---: |")
        for other, c in block["comparisons"].items():
            red = "-" if c["reduction"] is None else f"{100 * c['reduction']:+.1f}%"
            lines.append(
                f"| {other} | {red} | {c['queries_lower']} of {c['queries']} | "
                f"{c['wilcoxon_p']:.3g} | {c['ttest_p']:.3g} |"
            )
        counts = next(iter(block["summary"].values()))["counts"]
        lines += ["", f"Test pairs by seen entities (all repetitions): {counts}.", ""]
    return "\n".join(lines)


def plot(results, path: Path) -> None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return
    ks = [int(k) for k in results["settings"]]
    models = list(next(iter(results["settings"].values()))["summary"])
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.8))
    for metric, ax in zip(("err", "auc"), axes, strict=True):
        for m in models:
            s = [results["settings"][str(k)]["summary"][m][metric] for k in ks]
            mu, sd = np.array([x["mean"] for x in s]), np.array([x["sd"] for x in s])
            ax.plot(ks, mu, marker="o", label=m)
            ax.fill_between(ks, mu - sd, mu + sd, alpha=0.08)
        ax.set(
            xlabel="known pairs",
            ylabel="pairwise error" if metric == "err" else "AUC",
            title=results["collection"],
        )
    axes[1].legend(fontsize=7, loc="lower right")
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def parts(models) -> list[list[str]]:
    """The models in separately run groups: each GP alone, the two SVMs together."""
    svms = [m for m in models if m in ("RankSVM", "LapRankSVM")]
    return [[m] for m in models if m not in svms] + ([svms] if svms else [])


def run_part(args, k: int, models: list[str], path: Path) -> None:
    """One setting's repetitions for some models, in a child process: rows to ``path``."""
    command = [sys.executable, __file__, "--part", str(path), "--known", str(k), "--models"]
    command += models
    for name in ("collection", "data_dir", "queries", "repeats", "max_movies", "seed"):
        command += [f"--{name.replace('_', '-')}", str(getattr(args, name))]
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode:
        raise RuntimeError(f"{' '.join(command)} failed:\n{done.stderr[-3000:]}")


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    p.add_argument("--collection", default="OHSUMED", choices=list(COLLECTIONS))
    p.add_argument("--data-dir", type=Path, default=REPO_ROOT / ".." / "shared" / "data")
    p.add_argument("--queries", type=int, default=10)
    p.add_argument("--known", type=int, nargs="+", default=None)
    p.add_argument("--repeats", type=int, default=None, help="default 20 (sample: 3)")
    p.add_argument("--max-movies", type=int, default=100)
    p.add_argument("--models", nargs="+", default=None)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--jobs", type=int, default=2, help="child processes at a time (0: none)")
    p.add_argument("--out", type=Path, default=None)
    p.add_argument("--part", type=Path, default=None, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.known is None:
        defaults = {"MovieLens": [50, 100, 200], "MQ2008": [20, 40, 60], "sample": [20, 40]}
        defaults["dir"] = [25, 50, 100]
        args.known = defaults.get(args.collection, [100, 150, 200])
    if args.repeats is None:
        args.repeats = 3 if args.collection == "sample" else 20
    out = args.out or REPO_ROOT / "experiments/out" / f"relational_{args.collection.lower()}"
    start = time.perf_counter()
    queries = COLLECTIONS[args.collection](args)
    if not queries:
        raise SystemExit(f"no query of {args.collection} has {2 * max(args.known)} pairs")
    relations = sorted(queries[0].relations)
    models = args.models or model_names(relations)
    if args.part is not None:  # a child: one setting, some models
        rows, hyper = run_setting(queries, args.known[0], args, relations, models)
        args.part.write_text(json.dumps({"rows": rows, "hyper": hyper}))
        return
    print(
        f"{args.collection}: {len(queries)} queries ({[q.qid for q in queries]}), "
        f"n = {[q.n for q in queries]}, relations {relations}, models {models}",
        flush=True,
    )
    # Each (setting, model group) runs in its own process: compiled CPU programs hold memory
    # mappings that jaxlib does not release, and one process running every model hit the
    # kernel's limit of 65,530 mappings ("LLVM ERROR: Unable to allocate section memory").
    out.mkdir(parents=True, exist_ok=True)
    tasks = [(k, group) for k in args.known for group in parts(models)]
    paths = {
        (k, tuple(g)): out / f"part-{k}-{'+'.join(g).replace('[', '_').replace(']', '')}.json"
        for k, g in tasks
    }

    def one(task):
        k, group = task
        if args.jobs == 0:  # in this process (small runs, tests)
            rows, hyper = run_setting(queries, k, args, relations, group)
            paths[(k, tuple(group))].write_text(json.dumps({"rows": rows, "hyper": hyper}))
        else:
            run_part(args, k, group, paths[(k, tuple(group))])
        print(f"  k={k} {', '.join(group)} done ({time.perf_counter() - start:.0f} s)", flush=True)

    with ThreadPoolExecutor(max_workers=max(args.jobs, 1)) as pool:
        list(pool.map(one, tasks))
    results = {
        "collection": args.collection,
        "queries": [{"qid": q.qid, "n": q.n, "pairs": len(q.pairs)} for q in queries],
        "relations": relations,
        "settings": {},
        "args": {k: str(v) for k, v in vars(args).items()},
    }
    for k in args.known:
        rows, hyper = {}, {}
        for group in parts(models):
            part = json.loads(paths[(k, tuple(group))].read_text())
            rows.update({m: part["rows"][m] for m in group})
            hyper.update({m: part["hyper"][m] for m in group})
        comparisons = {
            other: compare(rows, "XPGP", other)
            for other in COMPARATORS
            if other in rows and rows[other] and rows.get("XPGP")
        }
        results["settings"][str(k)] = {
            "summary": summarize(rows),
            "comparisons": comparisons,
            "rows": rows,
            "hyperparameters": hyper,
        }
    for path in paths.values():
        path.unlink()
    results["seconds"] = time.perf_counter() - start
    text = table(results) + f"run time {results['seconds']:.0f} s\n"
    print(text)
    (out / "results.json").write_text(json.dumps(results))
    (out / "table.txt").write_text(text)
    (out / "table.md").write_text(markdown(results))
    plot(results, out / "curves.png")
    print(f"written {out}")


if __name__ == "__main__":
    main()
