"""``bayesrank experiment inference``: how accurate are bayesrank's engines and fits? EP, Laplace
and NUTS; the default fit and its variants (and, from the full-data front end, BoTorch and choix).

One protocol, two presets (``--protocol``); every option below overrides its preset's value.

* **problems** (``--problems``, module ``problems``): ``queries`` (the ``reduced`` preset): the
  first ``--queries`` (5) LETOR queries of ``--data-dir`` (default: the bundled OHSUMED sample,
  whose query 8 has too few pairs: four queries) with more than ``--known`` (50) labelled pairs,
  ``--known`` of them known (seeded), up to ``--test`` (1000) of the others held out;
  ``accuracy`` (the ``full`` preset): the 32 seeded real problems of the benchmark data folder
  ``--data-dir`` (12 OHSUMED queries with 150 known pairs, 10 MQ2008 queries with 60, 10 HetRec
  MovieLens users with 300 and 27 movie attributes; at most 150 entities and ``--test`` held-out
  pairs each); ``hetrec21``: 16 HetRec splits of a researcher's own ratings (21 standardised
  attributes);
  ``all``: both. Features scaled to ``[0, 1]`` per problem; each held-out pair shown in a random
  orientation (seeded, ``default_rng(seed + problem index)``) so that its outcome is 0 or 1.
* **part 2, fitted methods** (``--methods``): each fits its own hyperparameters on the known pairs
  and predicts the held-out ones. ``bayesrank``: the README's default, ``XPGPModel(XPGP(RBF(),
  entity=Independent())).fit(problem, learn_hyperparameters=True)`` (EP-evidence maximisation);
  ``bayesrank-laplace``: the same with ``engine="laplace"``; ``bayesrank-em``:
  ``learn_hyperparameters="em"``; ``bayesrank-no-entity``: ``XPGP(RBF())``; ``bayesrank-plain``:
  ``XPGP(RBF())`` with ``start=Start(design=None)``; ``bayesrank-ard``: an ``ARD`` attribute kernel
  plus the entity effect; ``bayesrank-ard-botorch``: ``XPGP(ARD(...))`` with
  ``hyperprior="botorch"``. ``--theta per-query`` fits each problem alone (through
  ``XPGPModel.fit``, as above); ``--theta shared`` (the ``reduced`` preset) fits one theta for all
  problems in one ``bayesrank.learning.fit_hyperparameters`` call, its posteriors the fit's. The
  ``reduced`` preset: ``bayesrank`` and ``bayesrank-laplace``; ``full``: all seven.
* **part 1, engines at one prior** (``--nuts``; on in ``full``): at each problem's ``bayesrank``
  prior, the posteriors of EP, Laplace and NUTS (``--chains`` x ``--samples`` draws after
  ``--warmup``: ``reduced`` 2 x 500 after 500, ``full`` 4 x 2000 after 1000), each through
  ``XPGPModel(prior, engine).fit``; ``|dp|`` of each engine's held-out probabilities
  against NUTS's, NUTS's smallest ESS, largest split R-hat and divergences.
* **measures** on the held-out pairs, ``p = P(first wins) = Phi(dmu / sqrt(noise + dvar))``:
  pair error (``p`` on the wrong side of 1/2, 1/2 counting half), mean log-likelihood of the
  outcomes, ECE (10 bins) and Brier score (``bayesrank.metrics``); NDCG@10 and Kendall's tau
  of the posterior mean against the grades over all entities of the problem. Per problem, then
  the mean over problems; the ECE also pooled over all problems' held-out pairs (the
  reliability figure's). Each method against ``bayesrank``: the mean paired difference in pair
  error and log-likelihood with a two-sided Wilcoxon signed-rank test over the problems.

The full configuration is ``--protocol full --data-dir DIR``, DIR the benchmark data folder
(``../shared/data``): ``experiments/inference_accuracy.py`` runs it, with BoTorch's
``PairwiseGP`` and choix as peer methods (``run(args, peers=...)``: a peer is a function
``(problem, seed) -> {"mean", "cov", "noise_var"}``; the package itself imports no peer), and
``docs/results/inference.md`` holds its tables. With ``--theta per-query`` and ``--out`` a run
keeps its rows in ``rows.json`` after each problem and a rerun resumes from them.

Reported (``results.json``): the settings; the problems; ``fits`` (one row per problem and
method: the measures, seconds, convergence, learned hyperparameters); ``engines`` (part 1's
rows); ``summary`` (per method the means and the pooled ECE); ``pairs`` (each problem's known
and held-out pairs, outcomes and every method's and engine's probabilities). ``table.txt``: the
summary and the two Markdown tables of ``docs/results/inference.md``; ``inference.png``: the
reliability diagram of each method, pooled.
"""

from __future__ import annotations

import argparse

from .._common import write_outputs

NAME = "inference"
HELP = "EP, Laplace (and NUTS) with learned hyperparameters: pair error, log-lik, calibration"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The protocol's options (the common ``--data-dir``, ``--out``, ``--seed`` are the CLI's);
    None keeps the preset's value."""
    from ..protocol import add_protocol_argument
    from .methods import METHODS
    from .protocol import PRESETS, PROBLEMS, THETA

    r, f = PRESETS["reduced"], PRESETS["full"]
    add_protocol_argument(
        parser,
        PRESETS,
        help="the preset: reduced (default: the bundled sample or --data-dir's LETOR queries, "
        "two methods, shared theta) or full (--data-dir the benchmark data: the 32 problems, "
        "seven methods per problem, NUTS); the options below override it",
    )
    parser.add_argument(
        "--problems",
        choices=PROBLEMS,
        default=None,
        help="queries: LETOR queries of --data-dir or the sample (reduced); accuracy: the 32 "
        "OHSUMED/MQ2008/HetRec problems (full); hetrec21: 16 HetRec splits; all: both",
    )
    parser.add_argument(
        "--queries",
        type=int,
        default=None,
        help=f"at most this many problems ({r.queries}; full: all)",
    )
    parser.add_argument(
        "--known",
        type=int,
        default=None,
        help=f"known pairs per query, --problems queries ({r.known})",
    )
    parser.add_argument(
        "--test", type=int, default=None, help=f"held-out pairs per problem, at most ({r.test})"
    )
    parser.add_argument(
        "--methods",
        nargs="+",
        default=None,
        metavar="METHOD",
        help=f"part 2's methods, of {', '.join(METHODS)} (reduced: {' '.join(r.methods)}; "
        "full: all seven)",
    )
    parser.add_argument(
        "--theta",
        choices=THETA,
        default=None,
        help=f"one theta for all problems or one each ({r.theta}; full: {f.theta})",
    )
    parser.add_argument(
        "--nuts",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="part 1: EP, Laplace and NUTS at each problem's default-fitted prior (full: on)",
    )
    parser.add_argument(
        "--warmup", type=int, default=None, help=f"NUTS warm-up draws ({r.warmup}; full {f.warmup})"
    )
    parser.add_argument(
        "--samples",
        type=int,
        default=None,
        help=f"NUTS draws per chain ({r.samples}; full {f.samples})",
    )
    parser.add_argument(
        "--chains", type=int, default=None, help=f"NUTS chains ({r.chains}; full {f.chains})"
    )


def run(args: argparse.Namespace, peers: dict | None = None) -> dict:
    """Run the protocol (module docstring) of ``args``, with the peer methods ``peers`` (``{name:
    fit(problem, seed)}``, a front end's, allowed in ``args.methods``); print the table, write
    the outputs to ``args.out`` (if set) and return the results."""
    from .protocol import from_args
    from .report import figure, table
    from .runner import run_protocol

    protocol = from_args(args, peers=tuple(peers or ()))
    results = run_protocol(protocol, args.data_dir, args.out, peers)
    text = table(results)
    print(text)
    if args.out is not None:
        write_outputs(results, args.out, text, lambda: figure(results), NAME)
    return results
