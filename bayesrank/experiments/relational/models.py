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
  (``permute_graph``: degrees and weights kept, identity broken); five
  permutations per query, repetition ``r`` uses permutation ``r mod 5``;
- ``XPGP[<relation>]``: one relation alone (where a collection has several);
- ``Entity``: the entity effect alone, ``s^2 I`` (``s`` learned), no attributes and no
  relations: choix's Thurstone model (``choix.ep_pairwise(..., model="probit")`` with
  ``alpha = 1 / s^2``), which gives an entity without judgements its prior alone;
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
full-size solves. Every fit of a repetition runs in two compiled calls (RankSVM's 4 gammas x 4
training sets x 5 C, then LapRankSVM's 3 x 4), and along the ``C`` grid each fit starts from the
last one's solution (timed by ``benchmarks/bench_study_svm.py``).
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np

from ...baselines.ranksvm import fit_kernel, rbf_kernel
from ...compiler import jit
from ...data.batch import bucket_size
from ...data.graphs import permute_graph
from ...data.problem import PreferenceProblem
from ...kernels import RBF, XPGP, Diffusion, HiddenCommonCause, Independent, RegularizedLaplacian
from ...learning import default_trainable, fit_hyperparameters
from ...learning.initialize import median_distance
from ...parallel import map_queries

__all__ = ["SVMS", "entity_split_models", "fit_gp", "fit_svms", "gp_prior", "model_names"]

PLACEBO_PERMUTATIONS = 5
JITTER = 1e-3
GRID = (0.1, 1.0, 10.0)
GAMMA_SCALES = (1 / 16, 1 / 4, 1.0, 4.0)  # times the median heuristic's gamma
SVM_C = (0.1, 1.0, 10.0, 100.0, 1000.0)
FOLDS = 3
SVMS = ("RankSVM", "LapRankSVM")


def model_names(relations: list[str]) -> list[str]:
    """Every model of a collection with these relation names, in the table's order (the pair
    split's default; ``Entity`` runs where asked for)."""
    names = ["PGP", "PGP+I", "XPGP", "XPGP-Silva", "XPGP-diffusion", "placebo"]
    if len(relations) > 1:
        names += [f"XPGP[{r}]" for r in relations]
    return [*names, *SVMS]


def entity_split_models(relations: list[str]) -> list[str]:
    """The entity split's default models: the comparison that decides whether relations help
    an entity with few judgements (XPGP; the placebo graph of the same degrees; attributes
    with and without the entity effect; the entity effect alone, choix's model; RankSVM),
    and each relation alone where a collection has several."""
    names = ["XPGP", "placebo", "PGP+I", "PGP", "Entity"]
    if len(relations) > 1:
        names += [f"XPGP[{r}]" for r in relations]
    return [*names, "RankSVM"]


def gp_prior(model: str, relations: list[str]):
    """``(prior, trainable, relation names used)`` of a GP model."""
    if model == "Entity":
        prior = XPGP(None, (), entity=Independent(1.0))
        return prior, default_trainable(prior), []
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
        raise ValueError(f"unknown model {model!r} (models: {[*model_names(relations), 'Entity']})")
    kernel = {"XPGP-Silva": HiddenCommonCause, "XPGP-diffusion": Diffusion}.get(
        model, RegularizedLaplacian
    )
    prior = XPGP(RBF(), tuple(kernel() for _ in used))
    return prior, default_trainable(prior), used


def fit_gp(model, queries, splits, relations, rep, per_query: bool = False):
    """Fit one GP model (one ``theta`` shared by the queries, or one per query with
    ``per_query``) on the known pairs of ``splits[b] = (known, test)``; per query the posterior
    ``(mean: (N,), cov: (N, N))`` on the batch's padded entities (the query's ``n`` first; the
    rest decoupled padding, so that every query predicts in one program), and the fitted prior
    (per query: leaves ``(B, ...)``)."""
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
    return [(mean[b], cov[b]) for b in range(len(queries))], fit.prior


# --- the SVMs --------------------------------------------------------------------------------


@jit
def _rbf_jit(X, gamma):
    return rbf_kernel(X, X, gamma)


def _rbf(X, gamma, size: int) -> np.ndarray:
    """``rbf_kernel(X, X, gamma)``, ``X: (n, d)``, computed on ``X`` padded with zero rows to
    ``size``, so that every query of a study shares one compiled program (zero rows change
    neither the real rows' norms nor the features' scale, ``rbf_kernel``)."""
    n = len(X)
    padded = np.zeros((size, X.shape[1]), X.dtype)
    padded[:n] = X
    return np.asarray(_rbf_jit(padded, gamma))[:n, :n]


def _median_gamma(X) -> float:
    """The RBF ``gamma = 1 / (2 ell^2)`` of scikit-learn's form at the median heuristic's
    length ``ell`` (without the 2: the grid ``GAMMA_SCALES`` spans it)."""
    return 1.0 / median_distance(X) ** 2


def _deformed(K, W, gamma_l):
    """``(K^-1 + gamma_l L)^-1 = K (I + gamma_l L K)^-1``, symmetrised."""
    L = np.diag(W.sum(1)) - W
    D = np.linalg.solve((np.eye(len(K)) + gamma_l * L @ K).T, K.T).T
    return 0.5 * (D + D.T)


@jit
def _paths(K, pairs, mask, Cs):
    """RankSVM's ``beta`` for each ``C`` of a grid, every problem in one compiled call.

    ``K: (P, n, n)``, ``pairs: (P, m, 2)``, ``mask: (P, m)``, ``Cs: (P, c)`` ascending ->
    ``(P, c, n)``. Along each problem's grid the solve for ``C`` starts from the solution for
    the ``C`` before it (the tolerance stays relative to ``||F(0)||``: the same optimum, fewer
    Newton steps).
    """

    def one(K, pairs, mask, Cs):
        def step(beta, C):
            beta = fit_kernel(K, pairs, C, mask, beta0=beta).beta
            return beta, beta

        return jax.lax.scan(step, jnp.zeros(K.shape[0], K.dtype), Cs)[1]

    return map_queries(one, K, pairs, mask, Cs)


def _solve_all(Ks, pair_lists, Cs):
    """Scores ``K[:, touched] beta`` of every entity for each problem ``p`` and each ``C`` of
    ``Cs[p]`` (``(len(Ks), c)``): each solved on the entities its pairs touch, padded to a
    bucketed size, all in one call of ``_paths``. ``-> (P, c)`` nested lists of ``(n_p,)``."""
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
    beta = np.asarray(_paths(K, pairs, mask, np.asarray(Cs, float)))
    return [
        [Kb[:, t] @ beta[b, c, : len(t)] for c in range(beta.shape[1])]
        for b, (Kb, t) in enumerate(zip(Ks, touched, strict=True))
    ]


def _cross_validate(kernels, splits, Cs, seed):
    """3-fold cross-validation of RankSVM along a grid of ``C``, every setting in one call.

    ``kernels[o][b]``: query ``b``'s Gram matrix under option ``o``; ``Cs: (B, c)``, each
    query's grid (ascending). Folds of each query's known pairs are seeded by ``seed + b``.
    Returns the mean held-out pair error ``(O, B, c)`` (ties count half) and the scores of the
    fits on all known pairs ``[o][b][c]``: ``(n_b,)``.
    """
    folds = [
        np.random.default_rng(seed + b).permutation(len(known)) % FOLDS
        for b, (known, _) in enumerate(splits)
    ]
    train = [
        [known[fold != f] for f in range(FOLDS)] + [known]
        for (known, _), fold in zip(splits, folds, strict=True)
    ]
    Ks, pair_lists, grids = [], [], []
    for option in kernels:
        for b, sets in enumerate(train):
            Ks += [option[b]] * len(sets)
            pair_lists += sets
            grids += [Cs[b]] * len(sets)
    scores = iter(_solve_all(Ks, pair_lists, grids))
    errors = np.zeros((len(kernels), len(splits), len(Cs[0])))
    full = []
    for o in range(len(kernels)):
        full.append([])
        for b, ((known, _), fold) in enumerate(zip(splits, folds, strict=True)):
            for f in range(FOLDS):
                held = known[fold == f]
                for c, s in enumerate(next(scores)):
                    d = s[held[:, 0]] - s[held[:, 1]]
                    errors[o, b, c] += np.mean((d < 0) + 0.5 * (d == 0)) / FOLDS
            full[o].append(next(scores))
    return errors, full


def fit_svms(queries, splits, relations, seed):
    """RankSVM and LapRankSVM: per query the scores of every entity, and the chosen settings.
    RankSVM's ``(gamma, C)`` by cross-validation over ``GAMMA_SCALES x SVM_C``; LapRankSVM's
    ``gamma_L`` over ``GRID``, with RankSVM's ``gamma`` and ``C``. Two compiled calls: the
    kernels are built once per ``gamma``, and each fit along the ``C`` grid starts from the
    last."""
    medians = [_median_gamma(q.X) for q in queries]
    size = bucket_size(max(q.n for q in queries))
    Ks = [
        [_rbf(np.asarray(q.X, float), g * m, size) for q, m in zip(queries, medians, strict=True)]
        for g in GAMMA_SCALES
    ]
    grid = np.tile(np.asarray(SVM_C), (len(queries), 1))
    cv, full = _cross_validate(Ks, splits, grid, seed)
    options = cv.transpose(1, 0, 2).reshape(len(queries), -1)  # (B, gamma x C), C fastest
    best = [divmod(int(i), len(SVM_C)) for i in np.argmin(options, axis=1)]
    svm = [full[g][b][c] for b, (g, c) in enumerate(best)]
    K = [Ks[g][b] for b, (g, _) in enumerate(best)]
    C = np.array([[SVM_C[c]] for _, c in best])
    W = [sum(q.relations[r] for r in relations) for q in queries]
    deformed = [[_deformed(Kb, w, g) for Kb, w in zip(K, W, strict=True)] for g in GRID]
    cv, full = _cross_validate(deformed, splits, C, seed)
    chosen_l = np.argmin(cv[:, :, 0], axis=0)
    lap = [full[g][b][0] for b, g in enumerate(chosen_l)]
    chosen = {
        "gamma_scale": [GAMMA_SCALES[g] for g, _ in best],
        "C": [float(c[0]) for c in C],
        "gamma_L": [GRID[g] for g in chosen_l],
    }
    return {"RankSVM": svm, "LapRankSVM": lap}, chosen
