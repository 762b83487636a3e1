"""``bayesrank experiment active``: active preference exploration (Kersting & Xu 2009, Sec. 5,
Fig. 4) on the bundled OHSUMED sample (or ``--data-dir``): pairs chosen by the model against
pairs chosen at random.

Protocol:

* **queries**: those with at least ``--min-pairs`` labelled pairs (default 20; the sample's
  query 8 has none), the first ``--queries`` of them in file order;
* **pairs**: every pair implied by a query's relevance grades; a random ``--test-fraction`` of
  them (default 1/2; seeded by ``--seed`` and the query) are **test pairs**, never asked; the
  others are the **candidates**, each shown in a random orientation and answered by the grades;
* **prior** (fixed, not learned; that of ``bayesrank active``): an RBF kernel (``kappa = 1``,
  ``rho`` by the median heuristic on the query's documents) plus an independent per-document
  effect of scale 0.1;
* **loop**: from no known pair, ``--k`` candidates are asked one at a time by each criterion,
  the paper's variance ratio, BALD's mutual information and uniformly at random (``--repeats``
  runs), the posterior (EP, or Laplace with ``--engine``) updated after each answer;
* **measure**: the pair error on the query's test pairs after each answer (``P(winner) < 1/2``
  an error, ``= 1/2`` half one); ``k = 0`` is the prior alone, whose zero mean puts every test
  pair at 1/2: error exactly 1/2.

Each criterion is one ``bayesrank.active.explore_queries`` call, every query and repetition
in one compiled program: the queries' covariances are padded to one size with decoupled
unit-prior entities that no pair touches, which changes no real document's posterior.

Reported (``results.json``): per criterion the curve ``k = 0..K`` of every query (random: the
mean of its repetitions, and each repetition), their mean over queries, and the pairs asked
(winner first); the test pairs; the table: the mean curve at a few ``k`` and each query's error
at ``K``; the figure (``active.png``): ``bayesrank.plot.learning_curves`` of the per-query
curves, band +- one standard error over queries.

Reduced from ``experiments/active.py`` (10 OHSUMED queries with at least 200 pairs, ``k`` up to
50, 20 random repetitions, three priors including XPGP with the keyword graph, the error on all
labelled pairs): one prior, test pairs disjoint from the candidates.
"""

from __future__ import annotations

import argparse

import numpy as np

from ._common import (
    Progress,
    check_fraction,
    check_positive,
    load_queries,
    rbf_entity_prior,
    recorded_warnings,
    rng_for,
    warning_lines,
    write_outputs,
)

NAME = "active"
HELP = "active exploration: variance ratio, mutual information and random questions"

CRITERIA = ("variance_ratio", "mutual_information", "random")
ENGINES = ("ep", "laplace")
#: The ``k`` of the table's columns (those up to ``--k``, and ``--k`` itself).
MARKS = (0, 1, 2, 5, 10, 20, 50, 100)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The protocol's options (the common ``--data-dir``, ``--out``, ``--seed`` are the CLI's)."""
    parser.add_argument("--k", type=int, default=10, help="answers per query (default 10)")
    parser.add_argument(
        "--repeats", type=int, default=5, help="runs of the random criterion (default 5)"
    )
    parser.add_argument(
        "--queries", type=int, default=5, help="at most this many queries (default 5)"
    )
    parser.add_argument(
        "--min-pairs",
        type=int,
        default=20,
        help="a query needs this many labelled pairs (default 20)",
    )
    parser.add_argument(
        "--test-fraction",
        type=float,
        default=0.5,
        help="share of each query's pairs held out as test pairs, never asked (default 0.5)",
    )
    parser.add_argument(
        "--criteria",
        nargs="+",
        choices=CRITERIA,
        default=list(CRITERIA),
        help="which criteria (default all three)",
    )
    parser.add_argument(
        "--engine", choices=ENGINES, default="ep", help="posterior update (default ep)"
    )


def _check(args) -> dict:
    """The options, checked (``ValueError`` naming the option)."""
    criteria = list(dict.fromkeys(args.criteria))
    for c in criteria:
        if c not in CRITERIA:
            raise ValueError(f"--criteria: {c!r} is not one of {', '.join(CRITERIA)}")
    if not criteria:
        raise ValueError("--criteria: name at least one criterion")
    if args.engine not in ENGINES:
        raise ValueError(f"--engine must be one of {', '.join(ENGINES)}, got {args.engine!r}")
    return {
        "k": check_positive(args.k, "--k"),
        "repeats": check_positive(args.repeats, "--repeats"),
        "queries": check_positive(args.queries, "--queries"),
        "min_pairs": check_positive(args.min_pairs, "--min-pairs", low=2),
        "test_fraction": check_fraction(args.test_fraction, "--test-fraction"),
        "criteria": criteria,
        "engine": args.engine,
        "seed": int(args.seed),
    }


def split_query(grades, b: int, seed: int, test_fraction: float):
    """One query's test pairs and candidates.

    Args:
        grades: ``(n,)`` relevance grades; b: the query's index (seeds its split).

    Returns:
        ``test: (t, 2)`` (winner first), ``candidates: (c, 2)`` (random orientation),
        ``outcome: (c,)`` bool (True where the candidate's first document wins); ``t + c`` is the
        number of labelled pairs, ``t = round(test_fraction * (t + c))`` within ``[1, t + c - 1]``.
    """
    from ..data.pairs import pairs_from_grades

    truth = pairs_from_grades(grades)
    m = len(truth)
    rng = rng_for(seed, b)
    perm = rng.permutation(m)
    n_test = min(max(round(test_fraction * m), 1), m - 1)
    test = truth[np.sort(perm[:n_test])]
    asked = truth[np.sort(perm[n_test:])]
    flip = rng.uniform(size=len(asked)) < 0.5
    return test, np.where(flip[:, None], asked[:, ::-1], asked), ~flip


def prior_alone(priors, Xs, tests) -> tuple[list[np.ndarray], list[float]]:
    """Every query's prior covariance, padded to the largest query's size ``N`` (padded
    documents decoupled, unit prior variance), and the pair error of the prior alone (zero mean)
    on its test pairs: one compiled program for all queries.

    Args:
        priors: one XPGP prior per query (one structure); Xs: ``(n_q, d)`` documents;
            tests: ``(t_q, 2)`` test pairs, winner first.

    Returns:
        ``[K_q: (N, N)]`` and ``[error_q]``.
    """
    from . import _programs

    N = max(len(X) for X in Xs)
    T = max(len(t) for t in tests)
    Ks, errors = [], []
    for prior, X, t in zip(priors, Xs, tests, strict=True):
        Xp = np.zeros((N, X.shape[1]))
        Xp[: len(X)] = X
        tp = np.tile(np.array([[0, 1]]), (T, 1))
        tp[: len(t)] = t
        K, err = _programs.prior_alone(prior, Xp, np.arange(N) < len(X), tp, np.arange(T) < len(t))
        Ks.append(np.asarray(K))
        errors.append(float(err))
    return Ks, errors


def run(args: argparse.Namespace) -> dict:
    """Run the protocol (module docstring) with ``args``; print the table, write the outputs to
    ``args.out`` (if set) and return the results."""
    import jax

    from ..active import explore_queries
    from ..data.pairs import pairs_from_grades

    opt = _check(args)
    k = opt["k"]
    queries, source = load_queries(args.data_dir)
    usable = [q for q in queries if len(pairs_from_grades(q.grades)) >= opt["min_pairs"]]
    usable = usable[: opt["queries"]]
    if not usable:
        raise ValueError(
            f"no query of {source} has --min-pairs {opt['min_pairs']} labelled pairs or more"
        )
    setups = [
        split_query(q.grades, b, opt["seed"], opt["test_fraction"]) for b, q in enumerate(usable)
    ]
    for q, (_, cand, _) in zip(usable, setups, strict=True):
        if len(cand) < k:
            raise ValueError(
                f"--k {k} is larger than the {len(cand)} candidate pairs of query {q.qid} "
                f"(its labelled pairs less the test pairs): lower --k or --test-fraction, or "
                f"raise --min-pairs"
            )
    progress = Progress(1 + len(opt["criteria"]))
    priors = [rbf_entity_prior(q.X) for q in usable]
    tests = [t for t, _, _ in setups]
    Ks, start = prior_alone(priors, [q.X for q in usable], tests)
    curves = {}
    progress("prior alone k=0")

    key = jax.random.PRNGKey(opt["seed"])
    asked = {}
    with recorded_warnings() as caught:
        for criterion in opt["criteria"]:
            repeats = opt["repeats"] if criterion == "random" else None
            out = explore_queries(
                Ks,
                [c for _, c, _ in setups],
                [o for _, _, o in setups],
                k,
                criterion,
                key,
                repeats=repeats,
                tests=tests,
                engine=opt["engine"],
            )
            runs = [np.asarray(o.curve).reshape(-1, k) for o in out]
            curves[criterion] = [
                np.concatenate([np.full((len(r), 1), s0), r], axis=1)
                for r, s0 in zip(runs, start, strict=True)
            ]
            pairs = [np.asarray(o.pairs).reshape(-1, k, 2) for o in out]
            asked[criterion] = [(p[0] if repeats is None else p).tolist() for p in pairs]
            what = f"{criterion} k={k}" + (f" x {repeats} runs" if repeats else "")
            progress(what)

    ks = list(range(k + 1))
    results = {
        "experiment": NAME,
        "data": source,
        "settings": {
            **opt,
            "prior": "RBF(kappa=1, rho=median heuristic) + Independent(0.1), fixed",
        },
        "queries": [
            {
                "qid": q.qid,
                "n": q.n_docs,
                "pairs": len(t) + len(c),
                "candidates": len(c),
                "test": len(t),
                "rho": float(p.attribute.rho),
            }
            for q, (t, c, _), p in zip(usable, setups, priors, strict=True)
        ],
        "ks": ks,
        "curves": {},
        "asked": asked,
        "test_pairs": [t.tolist() for t in tests],
    }
    for criterion, runs in curves.items():
        per_query = np.stack([r.mean(axis=0) for r in runs])
        entry = {"mean": per_query.mean(axis=0).tolist(), "per_query": per_query.tolist()}
        if criterion == "random":
            entry["repetitions"] = [r.tolist() for r in runs]
        results["curves"][criterion] = entry
    results["warnings"] = caught.messages
    results["seconds"] = progress.seconds
    text = table(results)
    print(text)
    if args.out is not None:
        write_outputs(results, args.out, text, lambda: figure(results), NAME)
    return results


def table(results: dict) -> str:
    """The summary: the mean curve at a few ``k``, each query's error at the last ``k``."""
    s = results["settings"]
    ks = results["ks"]
    K = ks[-1]
    qids = [q["qid"] for q in results["queries"]]
    marks = [m for m in MARKS if m < K] + [K]
    lines = [
        f"active exploration on {len(qids)} queries ({', '.join(qids)}) of {results['data']}",
        f"{s['engine'].upper()} posterior, {K} answers, test pairs: {s['test_fraction']:.0%} of "
        f"each query's labelled pairs (never asked); random: {s['repeats']} runs",
        "",
        "pair error on the test pairs, mean over queries",
        f"{'criterion':<20}" + "".join(f"{'k=' + str(m):>8}" for m in marks),
    ]
    for c, entry in results["curves"].items():
        lines.append(f"{c:<20}" + "".join(f"{entry['mean'][m]:8.3f}" for m in marks))
    lines += ["", f"pair error at k={K}, per query", f"{'criterion':<20}"]
    lines[-1] += "".join(f"{'q' + q:>8}" for q in qids)
    for c, entry in results["curves"].items():
        lines.append(f"{c:<20}" + "".join(f"{row[K]:8.3f}" for row in entry["per_query"]))
    lines += warning_lines(results["warnings"])
    lines.append(f"run time {results['seconds']:.0f} s")
    return "\n".join(lines)


def figure(results: dict):
    """``bayesrank.plot.learning_curves`` of the per-query curves (band: +- s.e.)."""
    from ..plot import learning_curves

    curves = {c: np.asarray(e["per_query"]) for c, e in results["curves"].items()}
    return learning_curves(
        np.asarray(results["ks"]),
        curves,
        band="sem",
        xlabel="pairs asked k",
        ylabel="pair error (held-out test pairs)",
        title=f"mean over {len(results['queries'])} queries (band: +- 1 s.e.)",
    )
