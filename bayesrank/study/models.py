"""The study's models: the GPs (one ``theta`` per repetition, fitted by evidence maximisation
over the queries together) and the two ranking SVMs (settings by cross-validation per query).

- ``PGP``: RBF on the attributes (a fixed 1e-3 entity jitter keeps duplicate documents apart);
- ``PGP+I``: RBF + an independent per-entity effect ``s^2 I`` (``s`` learned): the control for
  the regularized Laplacian's own ``I / iota^2`` term, itself an entity effect;
- ``XPGP``: RBF + a regularized Laplacian per relation (``beta`` fixed, ``iota`` and the mixing
  weights learned), every relation of the collection together (the multi-relation XPGP);
- ``XPGP-Silva``: RBF + Silva et al.'s hidden-common-cause kernel (one cause per edge);
- ``XPGP-diffusion``: RBF + a diffusion kernel per relation;
- ``placebo``: ``XPGP`` with each relation graph's entities permuted
  (:func:`~bayesrank.data.graphs.permute_graph`: degrees and weights kept, identity broken); five
  permutations per query, repetition ``r`` uses permutation ``r mod 5``;
- ``XPGP[<relation>]``: one relation alone (where a collection has several);
- ``RankSVM``: kernel RankSVM on the entities (RBF), ``gamma`` (1/16, 1/4, 1 or 4 times the
  median heuristic's) and ``C`` (0.1 to 1000, by decades) by 3-fold cross-validation on each
  query's known pairs;
- ``LapRankSVM``: the Laplacian-regularised ranking SVM of Qin et al. (WWW 2008) in its
  transductive form: RankSVM with the deformed kernel ``(K^-1 + gamma_L L)^-1`` (Sindhwani et
  al. 2005), ``L`` the Laplacian of the summed relations, ``gamma_L`` from {0.1, 1, 10} by the
  same cross-validation (``C`` as RankSVM's).

A kernel RankSVM's solution is ``f = K beta`` with ``beta`` zero off the entities its pairs
touch, so each fit solves on those entities alone (padded to a bucketed size) and scores every
entity by ``K[:, touched] beta``: the cross-validation's 69 fits per query cost a fraction of
full-size solves.
"""

from __future__ import annotations

import dataclasses

import jax
import numpy as np

from ..baselines.ranksvm import fit_kernel, rbf_kernel
from ..data.batch import bucket_size
from ..data.graphs import permute_graph
from ..data.problem import PreferenceProblem
from ..kernels import RBF, XPGP, Diffusion, HiddenCommonCause, Independent, RegularizedLaplacian
from ..learning import default_trainable, fit_hyperparameters
from ..parallel import map_queries

__all__ = ["SVMS", "fit_gp", "fit_svms", "gp_prior", "model_names"]

PLACEBO_PERMUTATIONS = 5
JITTER = 1e-3
GRID = (0.1, 1.0, 10.0)
GAMMA_SCALES = (1 / 16, 1 / 4, 1.0, 4.0)  # times the median heuristic's gamma
SVM_C = (0.1, 1.0, 10.0, 100.0, 1000.0)
FOLDS = 3
SVMS = ("RankSVM", "LapRankSVM")


def model_names(relations: list[str]) -> list[str]:
    """Every model of a collection with these relation names, in the table's order."""
    names = ["PGP", "PGP+I", "XPGP", "XPGP-Silva", "XPGP-diffusion", "placebo"]
    if len(relations) > 1:
        names += [f"XPGP[{r}]" for r in relations]
    return [*names, *SVMS]


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
    unknown = sorted(set(used) - set(relations))
    if unknown or model not in {*model_names(relations), "placebo"}:
        raise ValueError(f"unknown model {model!r} (models: {model_names(relations)})")
    kernel = {"XPGP-Silva": HiddenCommonCause, "XPGP-diffusion": Diffusion}.get(
        model, RegularizedLaplacian
    )
    prior = XPGP(RBF(), tuple(kernel() for _ in used))
    return prior, default_trainable(prior), used


def fit_gp(model, queries, splits, relations, rep, per_query: bool = False):
    """Fit one GP model (one ``theta`` shared by the queries, or one per query with
    ``per_query``) on the known pairs of ``splits[b] = (known, test)``; per query the posterior
    ``(mean: (n,), cov: (n, n))``, and the fitted prior (per query: leaves ``(B, ...)``)."""
    prior, trainable, used = gp_prior(model, relations)
    problems = []
    for b, (q, (known, _)) in enumerate(zip(queries, splits, strict=True)):
        graphs = [q.relations[r] for r in used]
        if model == "placebo":
            key = jax.random.fold_in(jax.random.PRNGKey(10_000 + b), rep % PLACEBO_PERMUTATIONS)
            graphs = [permute_graph(jax.random.fold_in(key, g), W)[0] for g, W in enumerate(graphs)]
        problems.append(PreferenceProblem.create(known, q.X, relations=graphs))
    fit = fit_hyperparameters(prior, problems, trainable=trainable, per_query=per_query)
    post = fit.posteriors
    mean, cov = np.asarray(post.mean), np.asarray(post.cov)
    return [(mean[b, : q.n], cov[b, : q.n, : q.n]) for b, q in enumerate(queries)], fit.prior


# --- the SVMs --------------------------------------------------------------------------------


def _median_gamma(X) -> float:
    d2 = ((X[:, None] - X[None]) ** 2).sum(-1)[np.triu_indices(len(X), 1)]
    return 1.0 / max(float(np.median(d2[d2 > 0])), 1e-12)


def _deformed(K, W, gamma_l):
    """``(K^-1 + gamma_l L)^-1 = K (I + gamma_l L K)^-1``, symmetrised."""
    L = np.diag(W.sum(1)) - W
    D = np.linalg.solve((np.eye(len(K)) + gamma_l * L @ K).T, K.T).T
    return 0.5 * (D + D.T)


@jax.jit
def _betas(K, pairs, mask, C):
    def one(K, pairs, mask, C):
        return fit_kernel(K, pairs, C, mask).beta

    return map_queries(one, K, pairs, mask, C)


def _scores(Ks, pair_lists, Cs):
    """RankSVM scores ``K beta`` of every entity per query, all queries in one compiled call
    (each solved on the entities its pairs touch, padded to a bucketed size)."""
    touched = [np.unique(p) for p in pair_lists]
    n = bucket_size(max(len(t) for t in touched), 4)
    m = bucket_size(max(len(p) for p in pair_lists), 4)
    K = np.zeros((len(Ks), n, n))
    pairs = np.zeros((len(Ks), m, 2), np.int64)
    mask = np.zeros((len(Ks), m), bool)
    for b, (Kb, p, t) in enumerate(zip(Ks, pair_lists, touched, strict=True)):
        K[b, : len(t), : len(t)] = Kb[np.ix_(t, t)]
        pairs[b, : len(p)] = np.searchsorted(t, p)
        mask[b, : len(p)] = True
    beta = np.asarray(_betas(K, pairs, mask, np.asarray(Cs, float)))
    return [Kb[:, t] @ beta[b, : len(t)] for b, (Kb, t) in enumerate(zip(Ks, touched, strict=True))]


def _cv_error(Ks, splits, Cs, seed):
    """Mean 3-fold CV pair error of RankSVM per query (folds of each query's known pairs)."""
    errors = np.zeros(len(Ks))
    folds = [
        np.random.default_rng(seed + b).permutation(len(known)) % FOLDS
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
    RankSVM's ``(gamma, C)`` by cross-validation over ``GAMMA_SCALES x SVM_C``; LapRankSVM's
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
