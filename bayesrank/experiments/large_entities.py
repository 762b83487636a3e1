"""``bayesrank experiment large --split entities``: HetRec's movies held out, each keeping ``j``
of its judgements, as the XPGP paper's claim asks (do relations help an entity with few or no
judgements of its own?).

Protocol: ``data.study.split_entities`` on the pooled pairs (key ``PRNGKey(seed)``):
``--held-out`` of the rated movies held out (a count, or a share), ``--n-train`` training pairs
among the other movies, and for each ``j`` of ``--keep`` each held-out movie's first ``j`` of its
judgements (with movies that are not held out) added; the held-out pairs are ``--n-test`` of the
held-out movies' other judgements (drawn once, seeded, the same for every ``j``), so the
settings are paired.

Models, each fitted afresh at every ``j`` by ``inference.sparse`` (the Laplace mode; held-out
variances from ``--samples`` draws) with ``large``'s prior, or with ``--learn`` at the prior each
GP model learns once on the smallest ``j``'s training pairs (``learned_priors``: its weights,
entity effect and RBF lengthscale from its sparse Laplace evidence):

- ``XPGP``: attributes (RBF at rank ``--rank``), an entity effect of variance 0.5 and the two
  relations (co-director, co-genre);
- ``placebo``: the same with each relation's movies permuted (every movie keeps the groups of
  another: the groups' sizes kept, identity broken);
- ``attributes + entity``: no relations;
- ``attributes``: no relations and an entity effect of variance 1e-3 (the attributes' residual
  variance from the low-rank factor kept: the attribute kernel itself);
- ``RankSVM``: linear, on the attributes (``baselines.ranksvm.fit_linear``), ``C`` from
  ``SVM_C`` by the error on a tenth of the training pairs held aside;
- ``choix`` (where installed): Bradley-Terry by ``ilsr_pairwise``, ``alpha = 0.01``, which
  gives a movie without judgements its prior alone (``theta = 0``).
"""

from __future__ import annotations

import sys
import time

import jax
import numpy as np

from ..baselines.ranksvm import fit_linear
from ..compiler import jit

__all__ = [
    "LEARN",
    "SVM_C",
    "entity_rows",
    "entity_table",
    "held_out_pairs",
    "latent_builder",
    "learned_priors",
    "placebo_memberships",
    "run_entities",
]

#: The linear RankSVM's grid of ``C``.
SVM_C = (0.01, 0.1, 1.0, 10.0)
#: The ``attributes`` model's entity variance: a jitter, no entity effect.
JITTER = 1e-3
#: ``--learn``'s settings of ``learning.fit_latent_scales``: a coarser search than its
#: defaults (a factor within 4x of the median heuristic's, bracketed to 0.2 in its log: about
#: eight lengthscales), at most 10 variance steps at each, the evidence from 32 probes.
LEARN = {"max_steps": 10, "n_probes": 32, "search_range": 4.0, "search_tol": 0.2}


def placebo_memberships(memberships: dict, n: int, seed: int) -> dict:
    """Each relation's ``(entities, groups)`` with the entities permuted (a permutation of the
    ``n`` movies per relation, seeded): group sizes kept, which movie is in which group broken."""
    rng = np.random.default_rng([seed, 7])
    out = {}
    for name, (entities, groups) in memberships.items():
        perm = rng.permutation(n)
        out[name] = (perm[entities], groups)
    return out


def held_out_pairs(split, n_test: int, seed: int) -> np.ndarray:
    """``n_test`` of the split's test pairs, drawn without replacement (seeded; all of them
    where there are fewer), in their order."""
    test = split.test
    if n_test >= len(test):
        return test
    pick = np.sort(np.random.default_rng([seed, 11]).choice(len(test), n_test, replace=False))
    return test[pick]


@jit
def _fit_linear(X, pairs, C):
    """``fit_linear`` as one compiled program (every ``C`` of the grid shares it)."""
    return fit_linear(X, pairs, C)


def _error(d) -> float:
    """The pair error of score differences ``d`` (winner minus loser; a tie counts half)."""
    return float(np.mean((d < 0) + 0.5 * (d == 0)))


def _ranksvm(X, train, test, seed):
    """Linear RankSVM: ``C`` by the error on a tenth of ``train`` held aside, then refitted."""
    t = time.perf_counter()
    aside = np.random.default_rng([seed, 13]).random(len(train)) < 0.1
    errors = []
    for C in SVM_C:
        w = np.asarray(_fit_linear(X, train[~aside], C).w)
        d = X[train[aside, 0]] @ w - X[train[aside, 1]] @ w
        errors.append(_error(d))
    C = SVM_C[int(np.argmin(errors))]
    w = np.asarray(_fit_linear(X, train, C).w)
    d = X[test[:, 0]] @ w - X[test[:, 1]] @ w
    seconds = time.perf_counter() - t
    return {"fit_s": seconds, "C": C, "error": _error(d)}


def latent_builder(X, memberships, rank, relations: bool, entity: float | None = None):
    """``build(factor) -> (LatentPrior, T)`` for ``learning.fit_latent_scales``: ``large``'s
    prior at the RBF lengthscale ``factor`` times the median heuristic's, with its scales
    ``[w_1^2 (the features and their residual variances), w_r^2 per relation, s^2 (the entity
    effect, a block of its own)]``; ``entity`` (a fixed variance, ``JITTER`` for the
    ``attributes`` model) instead joins the residual block, tied to ``w_1``."""
    import jax.numpy as jnp

    from ..inference import sparse as S
    from ..kernels import RBF
    from ..kernels.lowrank import pivoted_cholesky
    from .large import ENTITY_VARIANCE, median_rho

    n, rho = len(X), median_rho(X)
    groups = []
    if relations:
        groups = [S.membership_precision(e, g, n, normalize=True)
                  for e, g in memberships.values()]  # fmt: skip
    n_scales = 1 + len(groups) + (entity is None)

    def build(factor: float):
        low = pivoted_cholesky(RBF(1.0, rho / factor), jnp.asarray(X), rank)
        residual = np.asarray(low.residual) + (0.0 if entity is None else entity)
        blocks = [S.residual_precision(residual), *groups]
        rows = [0, 0, *range(1, 1 + len(groups))]  # features and residual: w_1
        if entity is None:
            blocks.append(S.diagonal_precision(np.full(n, ENTITY_VARIANCE)))
            rows.append(n_scales - 1)
        return S.latent_prior(low.features, blocks), np.eye(n_scales)[rows]

    return build


def learned_priors(X, memberships, rank, train, seed) -> tuple[dict, dict]:
    """``({model: LatentPrior}, {model: row})``: each GP model's scales and lengthscale learned
    once, on ``train`` (the smallest ``j``'s training pairs, which every larger ``j`` holds), by
    ``learning.fit_latent_scales`` with ``LEARN``'s settings; each row the learning's answer,
    evidence and seconds."""
    from ..learning.sparse_evidence import fit_latent_scales

    placebo = placebo_memberships(memberships, len(X), seed)
    priors, rows = {}, {}
    for name, members, relations, entity in _models(memberships, placebo):
        t = time.perf_counter()
        build = latent_builder(X, members, rank, relations, entity)
        got = fit_latent_scales(build, train, key=jax.random.key(seed), **LEARN)
        priors[name] = got.latent
        rows[name] = {
            "learn_s": time.perf_counter() - t, "factor": got.factor,
            "variances": [float(v) for v in got.variances],
            "log_evidence": got.log_evidence, "se": got.se,
            "start_log_evidence": got.start_log_evidence, "start_se": got.start_se,
            "factors": [float(f) for f in got.factors],
            "evidences": [float(e) for e in got.evidences],
            "converged": got.converged, "at_bound": got.at_bound, "start_kept": got.start_kept,
        }  # fmt: skip
        print(f"learned {name}: {rows[name]['learn_s']:.0f} s, factor {got.factor:.3g}, "
              f"variances {np.round(got.variances, 3)}", file=sys.stderr, flush=True)  # fmt: skip
    return priors, rows


def _models(memberships, placebo):
    """``(name, memberships, relations, entity)`` of the four GP models (module docstring)."""
    return (
        ("XPGP", memberships, True, None),
        ("placebo", placebo, True, None),
        ("attributes + entity", memberships, False, None),
        ("attributes", memberships, False, JITTER),
    )


def entity_rows(X, memberships, split, test, keep, rank, samples, probes, seed, learned=None):
    """``{str(j): {model: row}}`` for every ``j`` of ``keep`` (module docstring), with the
    held-out pairs' error, log-likelihood, ECE and seconds (``large._sparse``); the progress
    printed to stderr. ``learned``: ``{model: LatentPrior}``, the GP models' priors (default
    ``large``'s fixed ones)."""
    from .large import _choix, _prior, _sparse

    n = len(X)
    placebo = placebo_memberships(memberships, n, seed)
    out = {}
    for j in keep:
        train = split.known[j]
        rows = {}
        t = time.perf_counter()
        for name, members, relations, entity in _models(memberships, placebo):
            if learned is not None:
                prior = learned[name]
            else:
                prior, _ = _prior(X, members, rank, relations=relations, entity=entity)
            rows[name] = _sparse(prior, train, test, samples, seed, probes)
        rows["RankSVM"] = _ranksvm(X, train, test, seed)
        rows["choix"] = _choix(n, train, test, seed)
        out[str(j)] = rows
        print(f"j={j}: {time.perf_counter() - t:.0f} s", file=sys.stderr, flush=True)
    return out


def entity_table(results) -> str:
    """One block per ``j``: each model's held-out error, log-likelihood, ECE and seconds."""
    s = results["settings"]
    lines = [
        f"{s['n_movies']} movies, {s['held_out_movies']} held out; {s['n_train']} training "
        f"pairs among the others, {s['n_test']} held-out pairs that touch a held-out movie",
    ]
    if results.get("learning"):
        lines.append("== hyperparameters learned on the smallest j's training pairs ==")
        lines.append(f"{'model':20}  {'factor':>6}  {'variances':>28}  {'log Z (start)':>26}  "
                     f"{'s':>5}")  # fmt: skip
        for name, r in results["learning"].items():
            v = " ".join(f"{x:.3g}" for x in r["variances"])
            z = f"{r['log_evidence']:.1f} ({r['start_log_evidence']:.1f}) ± {r['se']:.1f}"
            lines.append(f"{name:20}  {r['factor']:6.3f}  {v:>28}  {z:>26}  {r['learn_s']:5.0f}")
    for j, rows in results["entity_split"].items():
        lines.append(f"== held-out movies keeping {j} judgement{'' if j == '1' else 's'} ==")
        lines.append(f"{'model':20}  {'error':>6}  {'loglik':>7}  {'ECE':>6}  {'fit s':>6}")
        for name, r in rows.items():
            if r is None:
                lines.append(f"{name:20}  not installed")
                continue
            ll = f"{r['log_likelihood']:7.4f}" if "log_likelihood" in r else f"{'-':>7}"
            ece = f"{r['ece']:6.4f}" if "ece" in r else f"{'-':>6}"
            lines.append(f"{name:20}  {r['error']:6.4f}  {ll}  {ece}  {r['fit_s']:6.1f}")
    return "\n".join(lines)


def run_entities(args, start, ids, X, pairs, memberships, n_train, n_test, rank, samples,
                 probes, protocol) -> dict:  # fmt: skip
    """``--split entities`` (``large_entities``): the split, every model at every ``j``."""
    from ..data.study import split_entities
    from ._common import write_outputs
    from .large import NAME

    split = split_entities(jax.random.PRNGKey(args.seed), pairs, len(ids),
                           held_out=args.held_out, keep=args.keep, n_known=n_train)  # fmt: skip
    test = held_out_pairs(split, n_test, args.seed)
    keep = sorted(set(args.keep))
    learned, learning = None, None
    if getattr(args, "learn", False):
        learned, learning = learned_priors(X, memberships, rank, split.known[keep[0]], args.seed)
    rows = entity_rows(X, memberships, split, test, keep, rank, samples, probes, args.seed,
                       learned)  # fmt: skip
    results = {
        "settings": {"protocol": protocol, "split": "entities", "n_movies": len(ids),
                     "pooled_pairs": len(pairs), "n_train": n_train, "n_test": len(test),
                     "held_out_movies": len(split.held), "keep": keep, "rank": rank,
                     "samples": samples, "probes": probes, "seed": int(args.seed),
                     "train_pairs": {str(j): len(split.known[j]) for j in keep},
                     "learned": learning is not None},
        "entity_split": rows,
        "learning": learning,
        "seconds": time.perf_counter() - start,
    }  # fmt: skip
    text = entity_table(results)
    print(text)
    if args.out is not None:
        write_outputs(results, args.out, text, None, NAME)
    return results
