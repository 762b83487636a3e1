"""``bayesrank experiment ep-vs-nuts``: how far is EP from NUTS? The same GP preference model at
fixed hyperparameters, two inference engines, compared pair by pair against NUTS's own Monte
Carlo error.

Protocol:

* **queries**: the first ``--queries`` (default 2) with more than ``--known`` labelled pairs;
* **pairs**: ``--known`` (default 20) of a query's labelled pairs, uniformly at random (key
  ``fold_in(PRNGKey(--seed), query index)``), are known; of the others at most ``--test``
  (default 200, at random) are the test pairs;
* **prior** (fixed): an RBF kernel (``kappa = --kappa``, default 1; ``rho`` by the median
  heuristic on the query's documents) plus an independent per-document effect of scale 0.1;
* **engines**: EP (``XPGPModel(prior).fit(problem)``) and NUTS (``XPGPModel(prior,
  inference="nuts").fit(problem, key=...)``, ``--chains`` chains of ``--samples`` draws after
  ``--warmup`` warm-up);
* **per test pair**: ``P(i > j)`` from each, EP's ``Phi(dmu / sqrt(1 + dvar))`` and NUTS's
  ``mean_t Phi(xi_i - xi_j)`` (the same quantity), their difference ``dp``, and NUTS's Monte
  Carlo standard error of its probability, ``MCSE = sd_t(Phi(xi_i - xi_j)) / sqrt(ESS)`` (ESS
  from NumPyro, per pair).

How to read it: NUTS's probability is the exact one plus noise of size MCSE. Were EP exact, each
``|dp| / MCSE`` would be about the size of a standard normal: beyond 2 for 4.55% of the pairs.
Many more pairs beyond 2, or a ``max |dp|`` far above the MCSE, is EP's own error; ``|dp|`` of
the size of the MCSE says that this NUTS run cannot tell EP from exact.

Reported (``results.json``): per query the summary (max and mean ``|dp|``, the MCSE's median
and maximum, ``max |dp| / MCSE``, the share of pairs beyond 2 MCSE, the posterior means' and
sds' largest differences, each engine's accuracy, NUTS's split R-hat, ESS and divergences) and
every test pair (``pairs``, ``p_ep``, ``p_nuts``, ``mcse``); the figure (``ep_vs_nuts.png``):
``p_EP - p_NUTS`` against ``p_NUTS`` with +- 2 MCSE bars.

Reduced from ``experiments/ep_vs_nuts.py`` (10 OHSUMED queries with 100 and 200 known pairs
under the keyword-graph XPGP prior fitted by EM, 4 chains of 1000 draws, 24 synthetic
problems): one or two queries, few known pairs, a short run.
"""

from __future__ import annotations

import argparse

import numpy as np

from ._common import (
    Progress,
    check_positive,
    load_queries,
    median_rho,
    recorded_warnings,
    rng_for,
    warning_lines,
    write_outputs,
)

NAME = "ep-vs-nuts"
HELP = "EP against NUTS at fixed hyperparameters, per pair, with NUTS's Monte Carlo error"

#: The share of ``|Z| > 2`` for a standard normal ``Z``.
BEYOND_2 = 0.0455


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The protocol's options (the common ``--data-dir``, ``--out``, ``--seed`` are the CLI's)."""
    parser.add_argument("--queries", type=int, default=2, help="how many queries (default 2)")
    parser.add_argument("--known", type=int, default=20, help="known pairs per query (20)")
    parser.add_argument("--test", type=int, default=200, help="test pairs per query, at most")
    parser.add_argument("--kappa", type=float, default=1.0, help="the RBF's scale (default 1)")
    parser.add_argument("--warmup", type=int, default=500, help="NUTS warm-up draws (500)")
    parser.add_argument("--samples", type=int, default=500, help="NUTS draws per chain (500)")
    parser.add_argument("--chains", type=int, default=2, help="NUTS chains (default 2)")


def _check(args) -> dict:
    kappa = float(args.kappa)
    if not (np.isfinite(kappa) and kappa > 0):
        raise ValueError(f"--kappa must be a positive finite number, got {args.kappa!r}")
    return {
        "queries": check_positive(args.queries, "--queries"),
        "known": check_positive(args.known, "--known"),
        "test": check_positive(args.test, "--test"),
        "kappa": kappa,
        "warmup": check_positive(args.warmup, "--warmup", low=0),
        "samples": check_positive(args.samples, "--samples", low=4),
        "chains": check_positive(args.chains, "--chains"),
        "seed": int(args.seed),
    }


def split(grades, b: int, opt: dict):
    """One query's ``known: (k, 2)`` and ``test: (t, 2)`` pairs (winner first)."""
    import jax

    from ..data.pairs import pairs_from_grades, split_pairs

    key = jax.random.fold_in(jax.random.PRNGKey(opt["seed"]), b)
    known, rest = split_pairs(key, pairs_from_grades(grades), opt["known"])
    if len(rest) > opt["test"]:
        rest = rest[np.sort(rng_for(opt["seed"], b).choice(len(rest), opt["test"], False))]
    return known, rest


def monte_carlo_error(samples, pairs) -> np.ndarray:
    """NUTS's Monte Carlo standard error of each pair's probability.

    Args:
        samples: ``(C, S, n)`` draws of the latent preferences (chains kept apart).
        pairs: ``(t, 2)``.

    Returns:
        ``(t,)``: ``sd(Phi(xi_i - xi_j)) / sqrt(ESS)`` over the ``C * S`` draws, the ESS
        NumPyro's (per pair, over the chains); where the ESS is not finite, ``C * S``.
    """
    from numpyro.diagnostics import effective_sample_size
    from scipy.special import ndtr

    s = np.asarray(samples)
    phi = ndtr(s[..., pairs[:, 0]] - s[..., pairs[:, 1]])  # (C, S, t)
    ess = np.asarray(effective_sample_size(phi), float)
    ess = np.where(np.isfinite(ess) & (ess > 0), ess, phi.shape[0] * phi.shape[1])
    return phi.reshape(-1, len(pairs)).std(axis=0, ddof=1) / np.sqrt(ess)


def compare(query, b: int, opt: dict, progress) -> dict:
    """EP and NUTS on one query: the summary and the per-pair numbers."""
    import time

    import jax

    from ..data.problem import PreferenceProblem
    from ..kernels import RBF, XPGP, Independent
    from ..model import XPGPModel

    known, test = split(query.grades, b, opt)
    prior = XPGP(RBF(opt["kappa"], median_rho(query.X)), (), entity=Independent(0.1))
    problem = PreferenceProblem.create(known, X=query.X)
    start = time.perf_counter()
    ep = XPGPModel(prior).fit(problem)
    p_ep = np.asarray(ep.predict_pairs(test).prob)
    t_ep = time.perf_counter() - start
    progress(f"query {query.qid} EP")
    start = time.perf_counter()
    options = dict(num_warmup=opt["warmup"], num_samples=opt["samples"], num_chains=opt["chains"])
    key = jax.random.fold_in(jax.random.PRNGKey(opt["seed"] + 1), b)
    nuts = XPGPModel(prior, inference="nuts", nuts_options=options).fit(problem, key=key)
    p_nuts = np.asarray(nuts.predict_pairs(test).prob)
    t_nuts = time.perf_counter() - start
    progress(f"query {query.qid} NUTS {opt['chains']} x {opt['samples']} draws")
    mcse = monte_carlo_error(nuts.result.samples, test)
    dp = np.abs(p_ep - p_nuts)
    z = dp / np.maximum(mcse, np.finfo(float).tiny)
    sd_ep = np.sqrt(np.clip(np.diag(np.asarray(ep.cov)), 0, None))
    sd_nuts = np.sqrt(np.clip(np.diag(np.asarray(nuts.cov)), 0, None))
    diag = nuts.result.diagnostics
    summary = {
        "qid": query.qid,
        "n": query.n_docs,
        "known": len(known),
        "test": len(test),
        "dp_max": float(dp.max()),
        "dp_mean": float(dp.mean()),
        "mcse_median": float(np.median(mcse)),
        "mcse_max": float(mcse.max()),
        "z_max": float(z.max()),
        "beyond_2_mcse": float(np.mean(z > 2)),
        "dmu_max": float(np.abs(np.asarray(ep.mean) - np.asarray(nuts.mean)).max()),
        "dsd_max": float(np.abs(sd_ep - sd_nuts).max()),
        "sd_nuts_median": float(np.median(sd_nuts)),
        "acc_ep": float(np.mean(p_ep > 0.5) + 0.5 * np.mean(p_ep == 0.5)),
        "acc_nuts": float(np.mean(p_nuts > 0.5) + 0.5 * np.mean(p_nuts == 0.5)),
        "ep_converged": bool(ep.converged),
        "r_hat_max": float(np.max(diag.r_hat)),
        "ess_min": float(np.min(diag.ess)),
        "divergences": int(np.sum(diag.divergences)),
        "nuts_converged": bool(diag.converged),
        "rho": float(prior.attribute.rho),
        "seconds": {"ep": t_ep, "nuts": t_nuts},
    }
    pairs = {
        "known": known.tolist(),
        "test": test.tolist(),
        "p_ep": p_ep.tolist(),
        "p_nuts": p_nuts.tolist(),
        "mcse": mcse.tolist(),
    }
    return {"summary": summary, "pairs": pairs}


def run(args: argparse.Namespace) -> dict:
    """Run the protocol (module docstring) with ``args``; print the table, write the outputs to
    ``args.out`` (if set) and return the results."""
    from ..data.pairs import pairs_from_grades

    opt = _check(args)
    queries, source = load_queries(args.data_dir)
    usable = [q for q in queries if len(pairs_from_grades(q.grades)) > opt["known"]]
    if not usable:
        most = max(len(pairs_from_grades(q.grades)) for q in queries)
        raise ValueError(
            f"--known {opt['known']} is too large: no query of {source} has more labelled pairs "
            f"(the most is {most}; at least one pair must be left to test)"
        )
    usable = usable[: opt["queries"]]
    progress = Progress(2 * len(usable))
    with recorded_warnings() as caught:
        per_query = [compare(q, b, opt, progress) for b, q in enumerate(usable)]
    rows = [r["summary"] for r in per_query]
    z_all = np.concatenate(
        [
            np.abs(np.subtract(r["pairs"]["p_ep"], r["pairs"]["p_nuts"]))
            / np.maximum(r["pairs"]["mcse"], np.finfo(float).tiny)
            for r in per_query
        ]
    )
    dp_all = np.concatenate(
        [np.abs(np.subtract(r["pairs"]["p_ep"], r["pairs"]["p_nuts"])) for r in per_query]
    )
    mcse_all = np.concatenate([r["pairs"]["mcse"] for r in per_query])
    results = {
        "experiment": NAME,
        "data": source,
        "settings": {
            **opt,
            "prior": f"RBF(kappa={opt['kappa']:g}, rho=median heuristic) + Independent(0.1)",
        },
        "overall": {
            "pairs": len(dp_all),
            "dp_max": float(dp_all.max()),
            "dp_mean": float(dp_all.mean()),
            "mcse_median": float(np.median(mcse_all)),
            "mcse_max": float(mcse_all.max()),
            "z_max": float(z_all.max()),
            "beyond_2_mcse": float(np.mean(z_all > 2)),
            "beyond_2_if_exact": BEYOND_2,
        },
        "queries": rows,
        "pairs": [r["pairs"] for r in per_query],
        "warnings": caught.messages,
        "seconds": progress.seconds,
    }
    text = table(results)
    print(text)
    if args.out is not None:
        write_outputs(results, args.out, text, lambda: figure(results), "ep_vs_nuts")
    return results


def table(results: dict) -> str:
    """The summary: per query and over all test pairs."""
    s = results["settings"]
    qids = [r["qid"] for r in results["queries"]]
    head = (
        f"{'query':>6} {'n':>4} {'known':>5} {'test':>5} {'max|dp|':>8} {'mean|dp|':>9} "
        f"{'MCSE med':>9} {'MCSE max':>9} {'max z':>6} {'z>2':>6} {'R-hat':>6} {'ESS':>6} "
        f"{'div':>4}"
    )
    lines = [
        f"EP against NUTS on {len(qids)} queries ({', '.join(qids)}) of {results['data']}",
        f"prior {s['prior']}, fixed; NUTS {s['chains']} chains x {s['samples']} draws after "
        f"{s['warmup']} warm-up",
        "dp = P_EP(i > j) - P_NUTS(i > j) per test pair; MCSE: NUTS's Monte Carlo standard error "
        "of its P; z = |dp| / MCSE",
        "",
        head,
    ]
    for r in results["queries"]:
        lines.append(
            f"{r['qid']:>6} {r['n']:4d} {r['known']:5d} {r['test']:5d} {r['dp_max']:8.4f} "
            f"{r['dp_mean']:9.4f} {r['mcse_median']:9.4f} {r['mcse_max']:9.4f} "
            f"{r['z_max']:6.2f} {r['beyond_2_mcse']:6.1%} {r['r_hat_max']:6.3f} "
            f"{r['ess_min']:6.0f} {r['divergences']:4d}"
        )
    o = results["overall"]
    lines += [
        "",
        f"all {o['pairs']} test pairs: max |dp| {o['dp_max']:.4f}, mean |dp| {o['dp_mean']:.4f}; "
        f"median MCSE {o['mcse_median']:.4f}; z > 2 for {o['beyond_2_mcse']:.1%} of the pairs "
        f"({o['beyond_2_if_exact']:.1%} expected were EP exact)",
    ]
    lines += warning_lines(results["warnings"])
    lines.append(f"run time {results['seconds']:.0f} s")
    return "\n".join(lines)


def figure(results: dict):
    """``p_EP - p_NUTS`` against ``p_NUTS``, one colour per query, +- 2 MCSE bars."""
    from ..plot._base import axes

    ax = axes(None, figsize=(5.5, 4.0))
    for r, pairs in zip(results["queries"], results["pairs"], strict=True):
        p_nuts = np.asarray(pairs["p_nuts"])
        dp = np.asarray(pairs["p_ep"]) - p_nuts
        ax.errorbar(
            p_nuts,
            dp,
            yerr=2 * np.asarray(pairs["mcse"]),
            fmt="o",
            ms=2.5,
            lw=0.6,
            alpha=0.6,
            label=f"query {r['qid']} (max |dp| {r['dp_max']:.3f})",
        )
    ax.axhline(0.0, color="0.4", lw=0.8)
    ax.set(
        xlabel="NUTS P(i > j)",
        ylabel="EP P(i > j) - NUTS P(i > j)",
        title="EP against NUTS per test pair (bars: +- 2 MCSE)",
    )
    ax.legend(fontsize=8)
    return ax
