"""``bayesrank experiment inference``: how accurate are EP and Laplace (and NUTS) once the
hyperparameters are learned? Held-out pair error, log-likelihood, Brier score and calibration.

Protocol:

* **queries**: the first ``--queries`` (default 5) with more than ``--known`` labelled pairs
  (the sample's query 8 has none: four queries);
* **pairs**: ``--known`` (default 50) of a query's labelled pairs, uniformly at random (key
  ``fold_in(PRNGKey(--seed), query index)``), are known; of the others at most ``--test``
  (default 1000, at random) are held out, each shown in a random orientation so that its
  outcome is 1 (the first wins) or 0;
* **prior**: ``XPGP(RBF(), entity=Independent())``, the README's default, its hyperparameters
  (RBF ``rho``, weight, entity scale) learned by each engine from the known pairs by maximising
  its own (MAP) evidence (``bayesrank.learning.fit_hyperparameters``, BFGS, the learning
  behind ``XPGPModel.fit(problem, learn_hyperparameters=True)``): ``--theta shared`` (default)
  one ``theta`` for all the queries, ``--theta per-query`` one each (what
  ``learn_hyperparameters=True`` does for a single problem; slower to compile);
* **engines** (``--engines``): ``ep`` and ``laplace``, each with its own learned ``theta`` and
  its posterior there; ``nuts`` (off by default; needs ``ep``): NUTS at EP's learned ``theta``
  (NUTS learns nothing), ``--chains`` x ``--samples`` draws after ``--warmup``, all queries in one
  compiled call (``bayesrank.inference.nuts.sample_batch``), the reference EP's
  probabilities are compared with (``|dp|``);
* **measures** on the held-out pairs, ``p = P(first wins)``: pair error (``p`` on the wrong
  side of 1/2, 1/2 counting half), mean log-likelihood of the outcomes (``-log_loss``), Brier
  score, ECE (10 equal-width bins; ``bayesrank.metrics``). Pair error, log-likelihood and
  Brier are per query, then averaged over queries; the ECE is of all queries' held-out pairs
  pooled (per-query bins hold too few pairs), as the reliability figure shows it.

Reported (``results.json``): per engine the means, the pooled ECE and the learned
hyperparameters; per query every measure; every query's known and held-out pairs, outcomes and
each engine's probabilities; the figure (``inference.png``): ``bayesrank.plot.reliability``
of each engine, pooled.

Reduced from ``experiments/inference_accuracy.py`` (32 OHSUMED, MQ2008 and MovieLens problems,
EP, Laplace and a long NUTS run at the same hyperparameters, then seven fitting methods including
BoTorch and choix, Wilcoxon tests): the bundled sample, the two Gaussian engines, NUTS on demand.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from ._common import (
    Progress,
    check_positive,
    load_queries,
    recorded_warnings,
    rng_for,
    warning_lines,
    write_outputs,
)

NAME = "inference"
HELP = "EP, Laplace (and NUTS) with learned hyperparameters: pair error, log-lik, calibration"

ENGINES = ("ep", "laplace", "nuts")
THETA = ("shared", "per-query")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The protocol's options (the common ``--data-dir``, ``--out``, ``--seed`` are the CLI's)."""
    parser.add_argument("--queries", type=int, default=5, help="at most this many (default 5)")
    parser.add_argument("--known", type=int, default=50, help="known pairs per query (50)")
    parser.add_argument("--test", type=int, default=1000, help="held-out pairs per query, at most")
    parser.add_argument(
        "--engines",
        nargs="+",
        choices=ENGINES,
        default=["ep", "laplace"],
        help="default ep laplace; nuts runs at EP's learned hyperparameters",
    )
    parser.add_argument(
        "--theta", choices=THETA, default="shared", help="one theta for all queries, or one each"
    )
    parser.add_argument("--warmup", type=int, default=500, help="NUTS warm-up draws (500)")
    parser.add_argument("--samples", type=int, default=500, help="NUTS draws per chain (500)")
    parser.add_argument("--chains", type=int, default=2, help="NUTS chains (default 2)")


def _check(args) -> dict:
    engines = [e for e in ENGINES if e in args.engines]  # in this order
    unknown = sorted(set(args.engines) - set(ENGINES))
    if unknown or not engines:
        raise ValueError(f"--engines: give one or more of {', '.join(ENGINES)}, got {args.engines}")
    if "nuts" in engines and "ep" not in engines:
        raise ValueError("--engines nuts runs at EP's learned hyperparameters: add ep")
    if args.theta not in THETA:
        raise ValueError(f"--theta must be one of {', '.join(THETA)}, got {args.theta!r}")
    return {
        "queries": check_positive(args.queries, "--queries"),
        "known": check_positive(args.known, "--known"),
        "test": check_positive(args.test, "--test"),
        "engines": engines,
        "theta": args.theta,
        "warmup": check_positive(args.warmup, "--warmup", low=0),
        "samples": check_positive(args.samples, "--samples", low=2),
        "chains": check_positive(args.chains, "--chains"),
        "seed": int(args.seed),
    }


def split(grades, b: int, opt: dict):
    """One query's ``known: (k, 2)`` pairs (winner first) and held-out pairs as shown,
    ``shown: (t, 2)`` in a random orientation, with ``outcome: (t,)`` 1.0 where the first
    wins."""
    import jax

    from ..data.pairs import pairs_from_grades, split_pairs

    key = jax.random.fold_in(jax.random.PRNGKey(opt["seed"]), b)
    known, rest = split_pairs(key, pairs_from_grades(grades), opt["known"])
    rng = rng_for(opt["seed"], b)
    if len(rest) > opt["test"]:
        rest = rest[np.sort(rng.choice(len(rest), opt["test"], replace=False))]
    flip = rng.uniform(size=len(rest)) < 0.5
    return known, np.where(flip[:, None], rest[:, ::-1], rest), (~flip).astype(float)


def hyperparameters(prior) -> dict:
    """The learned values (floats, or lists of one per query): ``kappa``, ``rho`` (RBF),
    ``weight`` (the attribute kernel's), ``entity`` (the per-document effect's scale),
    ``sigma`` (the pair noise; not learned)."""
    weights = np.asarray(prior.weights)
    values = {
        "kappa": prior.attribute.kappa,
        "rho": prior.attribute.rho,
        "weight": weights[..., 0],
        "entity": prior.entity.scale,
        "sigma": prior.sigma,
    }
    return {k: np.asarray(v, float).tolist() for k, v in values.items()}


def measures(probs: list[np.ndarray], outcomes: list[np.ndarray]) -> list[dict]:
    """Pair error, log-likelihood, Brier score and ECE of each query's ``probs[q]: (t_q,)``
    against ``outcomes[q]: (t_q,)``, the queries padded to one length (masked) so that the
    measures compile once."""
    from . import _programs

    T = max(len(p) for p in probs)
    out = []
    for p, y in zip(probs, outcomes, strict=True):
        pp, yy, mask = np.full(T, 0.5), np.zeros(T), np.arange(T) < len(p)
        pp[: len(p)], yy[: len(p)] = p, y
        values = _programs.measures(pp, yy, mask)
        out.append({k: float(v) for k, v in zip(_programs.MEASURES, values, strict=True)})
    return out


def learn(engine: str, problems, opt: dict):
    """``fit_hyperparameters`` of the default prior with ``engine``; ``(FitResult, one
    posterior per query)``."""
    import jax

    from ..kernels import RBF, XPGP, Independent
    from ..learning import fit_hyperparameters

    fit = fit_hyperparameters(
        XPGP(RBF(), entity=Independent()),
        problems,
        inference=engine,
        per_query=opt["theta"] == "per-query",
    )
    posts = [
        jax.tree_util.tree_map(lambda x, b=b: x[b], fit.posteriors) for b in range(len(problems))
    ]
    return fit, posts


def sample_nuts(prior, problems, opt: dict):
    """NUTS at ``prior`` (shared, or batched per query) on every problem in one compiled call;
    one ``NUTSPosterior`` per problem, real entities only."""
    import jax

    from ..data.batch import stack_problems
    from ..inference import nuts
    from ..inference.nuts.sampler import first_entities
    from ..parallel import query_map_method

    batch = stack_problems(problems)
    per_query = opt["theta"] == "per-query"

    from . import _programs

    K = _programs.covariances(prior, batch.X, batch.mask, per_query)
    posts = nuts.sample_batch(
        jax.random.PRNGKey(opt["seed"] + 1),
        K,
        batch.pairs,
        pair_mask=batch.pair_mask,
        method=query_map_method(),
        num_warmup=opt["warmup"],
        num_samples=opt["samples"],
        num_chains=opt["chains"],
    )
    return [first_entities(post, p.n) for post, p in zip(posts, problems, strict=True)]


def run(args: argparse.Namespace) -> dict:
    """Run the protocol (module docstring) with ``args``; print the table, write the outputs to
    ``args.out`` (if set) and return the results."""
    from ..data.pairs import pairs_from_grades
    from ..data.problem import PreferenceProblem

    opt = _check(args)
    queries, source = load_queries(args.data_dir)
    usable = [q for q in queries if len(pairs_from_grades(q.grades)) > opt["known"]]
    if not usable:
        most = max(len(pairs_from_grades(q.grades)) for q in queries)
        raise ValueError(
            f"--known {opt['known']} is too large: no query of {source} has more labelled pairs "
            f"(the most is {most}; at least one pair must be held out)"
        )
    usable = usable[: opt["queries"]]
    splits = [split(q.grades, b, opt) for b, q in enumerate(usable)]
    problems = [
        PreferenceProblem.create(known, X=q.X)
        for q, (known, _, _) in zip(usable, splits, strict=True)
    ]
    progress = Progress(len(opt["engines"]))
    probs, engines, fitted = {}, {}, {}
    with recorded_warnings() as caught:
        for engine in opt["engines"]:
            start = time.perf_counter()
            if engine == "nuts":
                posts = sample_nuts(fitted["ep"].prior, problems, opt)
                info = {
                    "hyperparameters": "EP's",
                    "converged": all(p.diagnostics.converged for p in posts),
                }
                info["r_hat_max"] = float(max(np.max(p.diagnostics.r_hat) for p in posts))
                info["ess_min"] = float(min(np.min(p.diagnostics.ess) for p in posts))
                info["divergences"] = int(sum(np.sum(p.diagnostics.divergences) for p in posts))
                what = f"nuts {opt['chains']} x {opt['samples']} draws at EP's theta"
            else:
                fit, posts = learn(engine, problems, opt)
                fitted[engine] = fit
                info = {
                    "hyperparameters": hyperparameters(fit.prior),
                    "converged": bool(np.all(np.asarray(fit.converged))),
                }
                what = f"{engine}: theta learned ({opt['theta']}) and posteriors"
            probs[engine] = [
                np.asarray(post.predict_pairs(shown).prob)
                for post, (_, shown, _) in zip(posts, splits, strict=True)
            ]
            info["seconds"] = time.perf_counter() - start
            engines[engine] = info
            progress(what)
    outcomes = [y for _, _, y in splits]
    per_query = {e: measures(probs[e], outcomes) for e in opt["engines"]}
    pooled_y = np.concatenate(outcomes)
    from ..metrics import expected_calibration_error

    for e, info in engines.items():
        for key in ("pair_error", "loglik", "brier", "ece"):
            info[key] = float(np.mean([m[key] for m in per_query[e]]))
        info["ece_pooled"] = float(expected_calibration_error(np.concatenate(probs[e]), pooled_y))
    if "nuts" in engines:
        dp = np.abs(np.concatenate(probs["ep"]) - np.concatenate(probs["nuts"]))
        engines["nuts"]["ep_dp_mean"], engines["nuts"]["ep_dp_max"] = (
            float(dp.mean()),
            float(dp.max()),
        )
    results = {
        "experiment": NAME,
        "data": source,
        "settings": {**opt, "prior": "XPGP(RBF(), entity=Independent()), learned"},
        "engines": engines,
        "queries": [
            {
                "qid": q.qid,
                "n": q.n_docs,
                "known": len(known),
                "test": len(shown),
                **{e: per_query[e][b] for e in opt["engines"]},
            }
            for b, (q, (known, shown, _)) in enumerate(zip(usable, splits, strict=True))
        ],
        "pairs": [
            {
                "known": known.tolist(),
                "shown": shown.tolist(),
                "outcome": y.tolist(),
                "prob": {e: probs[e][b].tolist() for e in opt["engines"]},
            }
            for b, (known, shown, y) in enumerate(splits)
        ],
        "warnings": caught.messages,
        "seconds": progress.seconds,
    }
    text = table(results)
    print(text)
    if args.out is not None:
        write_outputs(results, args.out, text, lambda: figure(results), NAME)
    return results


def _theta(h) -> str:
    if isinstance(h, str):
        return f"{h} theta"
    if isinstance(h["rho"], list):
        return "per query (results.json)"
    return f"rho {h['rho']:.3g}, weight {h['weight']:.3g}, entity {h['entity']:.3g}"


def table(results: dict) -> str:
    """The summary: per engine the means over queries, the pooled ECE and the learned theta;
    the pair error per query."""
    s = results["settings"]
    qids = [q["qid"] for q in results["queries"]]
    lines = [
        f"inference engines on {len(qids)} queries ({', '.join(qids)}) of {results['data']}",
        f"prior {s['prior']} by each engine's evidence, theta {s['theta']}; {s['known']} known "
        "pairs per query, the others held out (random orientation)",
        "pair error, log-likelihood, Brier: mean over queries; ECE: all held-out pairs pooled",
        "",
        f"{'engine':<8} {'pair err':>9} {'log-lik':>8} {'Brier':>7} {'ECE':>7}  theta",
    ]
    for e, info in results["engines"].items():
        lines.append(
            f"{e:<8} {info['pair_error']:9.4f} {info['loglik']:8.4f} {info['brier']:7.4f} "
            f"{info['ece_pooled']:7.4f}  {_theta(info['hyperparameters'])}"
        )
    if "nuts" in results["engines"]:
        n = results["engines"]["nuts"]
        lines.append(
            f"EP against NUTS at EP's theta: mean |dp| {n['ep_dp_mean']:.4f}, max "
            f"{n['ep_dp_max']:.4f}; NUTS R-hat max {n['r_hat_max']:.3f}, ESS min "
            f"{n['ess_min']:.0f}, {n['divergences']} divergences"
        )
    lines += ["", "pair error per query", f"{'engine':<8}" + "".join(f"{q:>8}" for q in qids)]
    for e in results["engines"]:
        lines.append(f"{e:<8}" + "".join(f"{q[e]['pair_error']:8.3f}" for q in results["queries"]))
    lines += warning_lines(results["warnings"])
    lines.append(f"run time {results['seconds']:.0f} s")
    return "\n".join(lines)


def figure(results: dict):
    """``bayesrank.plot.reliability`` of each engine on the pooled held-out pairs."""
    from ..plot import reliability

    outcomes = np.concatenate([p["outcome"] for p in results["pairs"]])
    ax = None
    for e in results["engines"]:
        probs = np.concatenate([p["prob"][e] for p in results["pairs"]])
        ax = reliability(probs, outcomes, label=e, counts=e == "ep", ax=ax)
    ax.set_title(f"held-out pairs of {len(results['pairs'])} queries, pooled")
    return ax
