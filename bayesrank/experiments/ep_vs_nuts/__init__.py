"""``bayesrank experiment ep-vs-nuts``: how far is EP from NUTS? The same GP preference model at
fixed hyperparameters, two inference engines, compared pair by pair against NUTS's own Monte
Carlo error. One implementation, two protocols (``--protocol``, each option overriding its
preset):

=================  ==========================================  ===============================
option             ``reduced`` (the default)                   ``full`` (the published table)
=================  ==========================================  ===============================
``--collection``   ``sample`` (``letor`` with ``--data-dir``)  ``OHSUMED`` (``--data-dir``)
``--queries``      2                                           10
``--known``        20                                          100 200
``--test``         200                                         0 (every held-out pair)
``--prior``        ``rbf``                                     ``em-fit``
``--synthetic``    0                                           4
NUTS               2 chains x 500 draws after 500 warm-up      4 chains x 1000 draws after 500
=================  ==========================================  ===============================

``bayesrank experiment ep-vs-nuts`` runs the reduced protocol on the bundled sample;
``bayesrank experiment ep-vs-nuts --protocol full --data-dir DIR`` (``DIR`` holding
``OHSUMED/``), or its front end ``python experiments/ep_vs_nuts.py`` (``../shared/data``, one
CPU), the full one, whose table is ``docs/results/ep-vs-nuts.md``'s. The full protocol was
``experiments/ep_vs_nuts.py``'s own code before; its queries were then drawn among those with
``max(known) + 100`` labelled pairs, now ``2 max(known)`` (the relational study's rule).

Protocol:

* **queries** (``--collection``): ``--queries`` of the collection's queries, chosen at random
  (seeded) among those with at least twice the largest ``--known`` labelled pairs (the
  relational study's loader, ``bayesrank.experiments.relational.load_collection``, with its
  relation graphs: ``sample`` the bundled OHSUMED sample, ``OHSUMED`` LETOR 3.0's 106
  queries, ``MQ2008``, ``MovieLens``, ``dir`` a folder in the study format); ``letor``: the
  LETOR file or folder ``--data-dir`` (no relation), chosen the same way;
* **pairs**: for each ``k`` in ``--known`` a setting: ``k`` of a query's labelled pairs,
  uniformly at random (key ``fold_in(fold_in(PRNGKey(--seed), k), query position)``), are
  known; of the others at most ``--test`` (0: all) at random are the test pairs;
* **prior** (fixed), ``--prior``: ``rbf``: an RBF kernel (``kappa = --kappa``; ``rho`` by the
  median heuristic on the query's documents) plus an independent per-document effect of scale
  0.1 (relations unused); ``em-fit``: the XPGP prior of ``docs/development/learning.md``
  fixed at its EM fit on OHSUMED with 200 known pairs (``EM_FIT``: RBF ``kappa = 1``,
  ``rho = 0.57`` on the 45 features, regularized Laplacian ``iota = 1.68`` on the keyword
  graph, weights (1.63, 2.74), per-document effect 0.11; ``sample`` and ``OHSUMED`` only);
* **synthetic** (``--synthetic N``: ``N`` problems per setting, 0: none): 50 entities,
  ``X ~ N(0, I_3)``, prior ``RBF(kappa, rho = 1/sqrt(3)) + Independent(0.1)``, a latent
  ``xi`` drawn from it, ``m`` known pairs of distinct random entities labelled by the probit
  model, 500 test pairs labelled by the sign of ``xi_i - xi_j``; settings ``m`` in
  (20, 100, 400) x ``kappa`` in (1, 3);
* **engines**: EP (``inference.ep.fit``, parallel schedule, ``tol = 1e-8``, at most 500
  sweeps) on each problem, and NUTS (``inference.nuts.sample_batch``: a setting's problems in
  one compiled call, ``--chains`` chains of ``--samples`` draws after ``--warmup`` warm-up)
  on the same ``K`` and known pairs;
* **measures**, per test pair: ``P(i > j)`` from each engine, EP's ``Phi(dmu / sqrt(1 +
  dvar))`` and NUTS's ``mean_t Phi(xi_i - xi_j)`` (the same quantity), their difference
  ``dp`` and NUTS's Monte Carlo standard error of its probability, ``MCSE = sd_t(Phi(xi_i -
  xi_j)) / sqrt(ESS)`` (ESS from NumPyro, per pair); per problem also the posterior means' and
  sds' differences (``dmu``, ``dsd``, mean and max over the entities), the median NUTS sd,
  each engine's accuracy (a test pair counts when its probability is above 1/2, half at 1/2),
  NUTS's split R-hat, ESS and divergences, and EP's convergence.

How to read it: NUTS's probability is the exact one plus noise of size MCSE. Were EP exact, each
``|dp| / MCSE`` would be about the size of a standard normal: beyond 2 for 4.55% of the pairs.
Many more pairs beyond 2, or a ``max |dp|`` far above the MCSE, is EP's own error; ``|dp|`` of
the size of the MCSE says that this NUTS run cannot tell EP from exact.

Reported (``results.json``): per setting the aggregate (means over problems of the per-problem
means, maxima and ``R-hat`` over problems, the smallest ESS, divergences summed, the pooled
share of pairs beyond 2 MCSE), each problem's summary and every test pair (``pairs``: ``known``,
``test``, ``p_ep``, ``p_nuts``, ``mcse``), and the run times; ``table.txt`` (``table``) and
``markdown`` (the table of ``docs/results/ep-vs-nuts.md``); the figure (``ep_vs_nuts.png``):
``p_EP - p_NUTS`` against ``p_NUTS`` with +- 2 MCSE bars, one panel per setting.
"""

from __future__ import annotations

import argparse
import dataclasses

import numpy as np

from .._common import Progress, check_positive, recorded_warnings, write_outputs
from ..protocol import Protocol, add_protocol_argument, from_args, preset_of
from .comparison import BEYOND_2, compare, pair_z
from .problems import load, query_settings, synthetic_settings
from .report import figure, markdown, table

__all__ = [
    "HELP",
    "NAME",
    "PRESETS",
    "PROTOCOLS",
    "EpVsNutsProtocol",
    "add_arguments",
    "figure",
    "markdown",
    "run",
    "table",
]

NAME = "ep-vs-nuts"
HELP = "EP against NUTS at fixed hyperparameters, per pair, with NUTS's Monte Carlo error"


@dataclasses.dataclass(frozen=True)
class EpVsNutsProtocol(Protocol):
    """The settings ``--protocol`` presets (the table above; ``collection`` None: ``sample``,
    or ``letor`` with ``--data-dir``)."""

    collection: str | None = None
    queries: int = 2
    known: tuple[int, ...] = (20,)
    test: int = 200
    prior: str = "rbf"
    synthetic: int = 0
    warmup: int = 500
    samples: int = 500
    chains: int = 2


#: The protocols' settings (``experiments.protocol``); an option given overrides its preset.
PRESETS = {
    "reduced": EpVsNutsProtocol(),
    "full": EpVsNutsProtocol(
        collection="OHSUMED",
        queries=10,
        known=(100, 200),
        test=0,
        prior="em-fit",
        synthetic=4,
        warmup=500,
        samples=1000,
        chains=4,
    ),
}
#: The old name of ``PRESETS``.
PROTOCOLS = PRESETS

COLLECTIONS = ("sample", "letor", "OHSUMED", "MQ2008", "MovieLens", "dir")
PRIORS = ("rbf", "em-fit")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The protocol's options (the common ``--data-dir``, ``--out``, ``--seed`` are the CLI's);
    ``None`` defaults are the ``--protocol``'s."""
    r, f = PRESETS["reduced"], PRESETS["full"]

    def preset(name):
        return f"(reduced {_show(getattr(r, name))}, full {_show(getattr(f, name))})"

    add = parser.add_argument
    add_protocol_argument(
        parser,
        PRESETS,
        help="the presets of the options below (default reduced: the bundled sample in under "
        "a minute; full: the published table, --data-dir holding OHSUMED/)",
    )
    add(
        "--collection",
        choices=COLLECTIONS,
        default=None,
        help="the queries (reduced: sample, or letor, a LETOR file or folder, with --data-dir; "
        "full: OHSUMED); OHSUMED, MQ2008, MovieLens: the folder --data-dir holds them; dir: a "
        "folder in the study format",
    )
    add("--queries", type=int, default=None, help=f"queries, chosen at random {preset('queries')}")
    add(
        "--known",
        type=int,
        nargs="+",
        default=None,
        help=f"known pairs per query, one setting each {preset('known')}",
    )
    add(
        "--test",
        type=int,
        default=None,
        help=f"test pairs per query at most, 0: all held-out pairs {preset('test')}",
    )
    add(
        "--prior",
        choices=PRIORS,
        default=None,
        help="rbf: RBF (median-heuristic rho) + Independent(0.1); em-fit: OHSUMED's keyword-"
        f"graph XPGP at its EM fit (sample, OHSUMED) {preset('prior')}",
    )
    add("--kappa", type=float, default=1.0, help="the rbf prior's scale (default 1)")
    add(
        "--synthetic",
        type=int,
        default=None,
        help=f"synthetic problems per setting, 0: none {preset('synthetic')}",
    )
    add("--warmup", type=int, default=None, help=f"NUTS warm-up draws {preset('warmup')}")
    add("--samples", type=int, default=None, help=f"NUTS draws per chain {preset('samples')}")
    add("--chains", type=int, default=None, help=f"NUTS chains {preset('chains')}")


def _show(value) -> str:
    if value is None:
        return "auto"
    return " ".join(map(str, value)) if isinstance(value, list | tuple) else str(value)


def _check(args) -> dict:
    protocol, _ = preset_of(args, PRESETS)
    opt = from_args(args, PRESETS).settings()
    if opt["collection"] is None:
        opt["collection"] = "sample" if args.data_dir is None else "letor"
    if opt["collection"] not in COLLECTIONS:
        raise ValueError(f"--collection must be one of {COLLECTIONS}, got {opt['collection']!r}")
    if opt["collection"] != "sample" and args.data_dir is None:
        raise ValueError(f"--collection {opt['collection']} reads --data-dir: give it")
    if opt["prior"] not in PRIORS:
        raise ValueError(f"--prior must be one of {PRIORS}, got {opt['prior']!r}")
    if opt["prior"] == "em-fit" and opt["collection"] not in ("sample", "OHSUMED"):
        raise ValueError(
            f"--prior em-fit is OHSUMED's keyword-graph fit: --collection {opt['collection']} "
            "has no keyword graph (use sample or OHSUMED, or --prior rbf)"
        )
    kappa = float(args.kappa)
    if not (np.isfinite(kappa) and kappa > 0):
        raise ValueError(f"--kappa must be a positive finite number, got {args.kappa!r}")
    known = opt["known"] if isinstance(opt["known"], list | tuple) else [opt["known"]]
    opt.update(
        protocol=protocol,
        queries=check_positive(opt["queries"], "--queries", low=0),
        known=[check_positive(k, "--known") for k in known],
        test=check_positive(opt["test"], "--test", low=0),
        kappa=kappa,
        synthetic=check_positive(opt["synthetic"], "--synthetic", low=0),
        warmup=check_positive(opt["warmup"], "--warmup", low=0),
        samples=check_positive(opt["samples"], "--samples", low=4),
        chains=check_positive(opt["chains"], "--chains"),
        seed=int(args.seed),
    )
    if not opt["queries"] and not opt["synthetic"]:
        raise ValueError("--queries 0 and --synthetic 0: nothing to compare")
    return opt


def run(args: argparse.Namespace) -> dict:
    """Run the protocol (module docstring) with ``args``; print the table, write the outputs to
    ``args.out`` (if set) and return the results."""
    import jax

    opt = _check(args)
    settings, source, labels = [], "synthetic problems only", []
    if opt["queries"]:
        queries, source = load(opt, args.data_dir)
        labels = [q.qid for q in queries]
        settings += query_settings(queries, opt)
    if opt["synthetic"]:
        settings += synthetic_settings(opt)
    progress = Progress(len(settings))
    key = jax.random.PRNGKey(opt["seed"] + 1)
    with recorded_warnings() as caught:
        done = [
            compare(s, jax.random.fold_in(key, i), opt, progress) for i, s in enumerate(settings)
        ]
    every = [p for s in done for p in s["pairs"]]
    dp_all = np.concatenate([np.abs(np.subtract(p["p_ep"], p["p_nuts"])) for p in every])
    mcse_all = np.concatenate([p["mcse"] for p in every])
    z_all = np.concatenate([pair_z(p) for p in every])
    prior = (
        "XPGP at OHSUMED's EM fit: RBF(kappa 1, rho 0.57) on the attributes and "
        "RegularizedLaplacian(iota 1.68) on the keyword graph, weights (1.63, 2.74), "
        "+ Independent(0.11)"
        if opt["prior"] == "em-fit"
        else f"RBF(kappa={opt['kappa']:g}, rho=median heuristic) + Independent(0.1)"
    )
    results = {
        "experiment": NAME,
        "data": source,
        "queries": labels,
        "protocol": {**opt, "prior_description": prior, "ep": "parallel, tol 1e-8, max_iter 500"},
        "settings": done,
        "overall": {
            "pairs": len(dp_all),
            "dp_max": float(dp_all.max()),
            "dp_mean": float(dp_all.mean()),
            "mcse_median": float(np.median(mcse_all)),
            "z_max": float(z_all.max()),
            "beyond_2_mcse": float(np.mean(z_all > 2)),
            "beyond_2_if_exact": BEYOND_2,
        },
        "warnings": caught.messages,
        "seconds": progress.seconds,
    }
    text = table(results)
    print(text)
    if args.out is not None:
        write_outputs(results, args.out, text, lambda: figure(results), "ep_vs_nuts")
    return results
