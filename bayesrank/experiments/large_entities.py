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
variances from ``--samples`` draws) with ``large``'s prior:

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

__all__ = [
    "SVM_C",
    "entity_rows",
    "entity_table",
    "held_out_pairs",
    "placebo_memberships",
    "run_entities",
]

#: The linear RankSVM's grid of ``C``.
SVM_C = (0.01, 0.1, 1.0, 10.0)
#: The ``attributes`` model's entity variance: a jitter, no entity effect.
JITTER = 1e-3


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


@jax.jit
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


def entity_rows(X, memberships, split, test, keep, rank, samples, probes, seed):
    """``{str(j): {model: row}}`` for every ``j`` of ``keep`` (module docstring), with the
    held-out pairs' error, log-likelihood, ECE and seconds (``large._sparse``); the progress
    printed to stderr."""
    from .large import _choix, _prior, _sparse

    n = len(X)
    placebo = placebo_memberships(memberships, n, seed)
    out = {}
    for j in keep:
        train = split.known[j]
        rows = {}
        t = time.perf_counter()
        for name, members, relations, entity in (
            ("XPGP", memberships, True, None),
            ("placebo", placebo, True, None),
            ("attributes + entity", memberships, False, None),
            ("attributes", memberships, False, JITTER),
        ):
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
    rows = entity_rows(X, memberships, split, test, keep, rank, samples, probes, args.seed)
    results = {
        "settings": {"protocol": protocol, "split": "entities", "n_movies": len(ids),
                     "pooled_pairs": len(pairs), "n_train": n_train, "n_test": len(test),
                     "held_out_movies": len(split.held), "keep": keep, "rank": rank,
                     "samples": samples, "probes": probes, "seed": int(args.seed),
                     "train_pairs": {str(j): len(split.known[j]) for j in keep}},
        "entity_split": rows,
        "seconds": time.perf_counter() - start,
    }  # fmt: skip
    text = entity_table(results)
    print(text)
    if args.out is not None:
        write_outputs(results, args.out, text, None, NAME)
    return results
