"""``bayesrank experiment labels``: at equal labelling cost, do ties or grades beat pairs alone?

The same number of judgements ``J`` of each query's documents, asked three ways; the same
attribute prior (RBF plus a per-document effect), one ``theta`` per way learned by the EP
evidence over the queries; scored on the same held-out pairs. One implementation, two protocols
(``--protocol``, each option overriding its preset):

=================  ===================================  =====================================
option             ``reduced`` (the default)            ``full`` (``docs/results/labels.md``)
=================  ===================================  =====================================
``--collection``   ``sample``                           ``OHSUMED`` (``MQ2008``, ``MovieLens``)
``--queries``      3                                    30
``--budget``       30                                   25 50 100
``--repeats``      1                                    2
=================  ===================================  =====================================

Queries: ``--queries`` of the collection's, at random (seeded), among those with at least
``2 max(J)`` pairs of documents with different grades (the relational study's loader and rule),
so that every draw leaves held-out pairs. Protocol, per query, budget ``J`` and repetition (a
NumPy generator of ``--seed``, ``J``, the query's position and the repetition):

* **the judgements**: ``J`` distinct unordered pairs of the query's documents, uniformly at
  random; each is answered by the documents' grades: the higher graded wins, equal grades are a
  tie (MovieLens: its stars); and ``J`` distinct documents (at most all), each graded;
* **the three ways**, each the same ``J`` judgements of a kind:
  ``pairs``: the judged pairs with a winner, ties thrown away (today's practice);
  ``ties``: every judged pair, ties as ties (a learned tie margin); ``grades``: the graded
  documents (the ordinal model, learned thresholds; MovieLens's stars mapped to ``ceil(stars)
  - 1``, 0..4);
* **prior**: ``XPGP(RBF(), entity=Independent())`` with, for ``ties``, ``margin=0.5`` and for
  ``grades`` thresholds from -1 to 1 (``start_thresholds``); ``theta`` learned by
  ``fit_hyperparameters`` (EP evidence, the default hyperprior) over all the way's problems of a
  budget, then each problem's posterior by ``XPGPModel.fit`` at it;
* **held out**: every pair of the query's documents with different grades that was not
  judged, oriented winner first; and, for the tie calibration, every unjudged pair;
* **measures**, per problem: the pair error (``P(winner > loser) < 1/2``, one half at 1/2;
  ``predict_pairs``, the forced choice) and the mean held-out log-probability of the winner;
  NDCG@10 and average precision (documents graded >= 1 relevant; MovieLens >= 4 stars) of the
  ranking by posterior mean; for ``ties`` the tie calibration: the mean predicted ``P(tie)``
  (``predict_outcomes``) over the unjudged pairs against their observed tie rate;
* **significance**: per budget, each way's per-query mean (over repetitions) against
  ``pairs``'s, paired over queries: Wilcoxon's signed-rank test and the paired t-test.

Reported (``results.json``): the settings, every problem's numbers (``rows``), per budget and
way the means over queries and the paired tests, the learned priors and the run time;
``table.txt`` and ``markdown`` (the table of ``docs/results/labels.md``).
"""

from __future__ import annotations

import argparse

from .._common import write_outputs

__all__ = ["HELP", "NAME", "add_arguments", "markdown", "run"]

NAME = "labels"
HELP = "ties or grades against pairs alone at equal labelling cost: pair error, NDCG, MAP"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The protocol's options (the common ``--data-dir``, ``--out``, ``--seed`` are the CLI's);
    None keeps the preset's value."""
    from ..protocol import add_protocol_argument
    from .protocol import COLLECTIONS, PRESETS

    r, f = PRESETS["reduced"], PRESETS["full"]
    add_protocol_argument(
        parser,
        PRESETS,
        help="the preset: reduced (default: the bundled sample) or full (--data-dir the "
        "benchmark data); the options below override it",
    )
    parser.add_argument(
        "--collection",
        choices=COLLECTIONS,
        default=None,
        help=f"the queries: sample (the bundled sample) or OHSUMED, MQ2008, MovieLens (in "
        f"--data-dir) (reduced: {r.collection}; full: {f.collection})",
    )
    parser.add_argument(
        "--queries", type=int, default=None, help=f"queries ({r.queries}; full: {f.queries})"
    )
    parser.add_argument(
        "--budget",
        type=int,
        nargs="+",
        default=None,
        help=f"judgements per query ({r.budget[0]}; full: {' '.join(map(str, f.budget))})",
    )
    parser.add_argument(
        "--repeats", type=int, default=None, help=f"draws per query ({r.repeats}; full: "
        f"{f.repeats})",
    )  # fmt: skip


def run(args: argparse.Namespace) -> dict:
    """Run the protocol of ``args`` (module docstring); print the table, write the outputs to
    ``args.out`` (if set) and return the results."""
    from .protocol import from_args
    from .report import figure, table
    from .runner import run_protocol

    protocol = from_args(args)
    results = run_protocol(protocol, args.data_dir)
    text = table(results)
    print(text)
    if args.out is not None:
        write_outputs(results, args.out, text, lambda: figure([results]), NAME)
    return results


def markdown(results: dict) -> str:
    """The Markdown table of ``docs/results/labels.md``."""
    from .report import markdown_table

    return markdown_table(results)
