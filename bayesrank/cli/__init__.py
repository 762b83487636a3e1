"""The ``bayesrank`` command (also ``python -m bayesrank``).

Subcommands (``bayesrank COMMAND --help`` for each one's options):

- ``experiment relational|active|baselines|ep-vs-nuts|inference``: the project's studies, on the
  bundled sample by default, with ``--data-dir``, ``--out``, ``--device``;
- ``fit DATA --out MODEL`` and ``predict MODEL --scores FILE --pairs FILE``: a model of every
  query of a collection, saved (``bayesrank.io``), and its scores and pair probabilities
  with their uncertainty;
- ``evaluate DATA SCORES``: MAP, NDCG@k, P@k of a LETOR prediction file (LETOR 3.0 conventions);
- ``data summary [PATH ...]``: queries, documents, labels and pairs of LETOR files;
- ``active``: ask the pairs the model is least sure of, on a sample query (you or the labels
  answer);
- ``optimize --dim D``: preferential Bayesian optimisation over ``[0, 1]^D``, one pair of
  designs at a time (you answer, ``--interactive``, or a synthetic ``--function`` does).

``--json`` output is strict JSON (RFC 8259): a number that is not finite is never written as
``NaN`` or ``Infinity``; the command fails instead (exit status 2) naming the key that holds it.
Every command runs JAX in float64 (it enables x64 for its own process) and keeps compiled
programs in the persistent compilation cache (``BAYESRANK_CACHE_DIR`` names the directory,
``off`` turns it off). User errors (a missing or malformed file, a bad option) exit with status
2 and a one-line message on stderr, never a traceback; so does a command that needs a package
bayesrank does not install (``experiment label-ranking``: scikit-learn), naming it.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from ._common import MAX_K_LIMIT, json_text

__all__ = ["main"]

_json = json_text  # the name the reliability tests use

DESCRIPTION = (
    "Bayesian preference learning: Gaussian-process models of pairwise preferences with "
    "relations (XPGP), EP, Laplace and NUTS inference, LETOR evaluation."
)
EPILOG = (
    "start with: bayesrank experiment relational   (the relational study on the bundled "
    "sample, a few minutes)"
)


def _parser() -> argparse.ArgumentParser:
    from .._version import __version__
    from . import active, data, experiment, model, optimize

    parser = argparse.ArgumentParser(prog="bayesrank", description=DESCRIPTION, epilog=EPILOG)
    parser.add_argument("--version", action="version", version=f"bayesrank {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    experiment.add_parser(sub)
    model.add_parsers(sub)
    data.add_parsers(sub)
    active.add_parser(sub)
    optimize.add_parser(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if getattr(args, "max_k", 1) < 1:
        print("bayesrank: error: --max-k must be at least 1", file=sys.stderr)
        return 2
    if getattr(args, "max_k", 1) > MAX_K_LIMIT:
        print(f"bayesrank: error: --max-k must be at most {MAX_K_LIMIT}", file=sys.stderr)
        return 2
    try:
        return args.func(args)
    except (ValueError, OSError, MemoryError) as err:  # user errors: one line, no traceback
        message = str(err) or type(err).__name__
        print(f"bayesrank: error: {message}", file=sys.stderr)
        return 2
    except ModuleNotFoundError as err:  # an optional package a command needs: say which
        if (err.name or "").split(".")[0] == "bayesrank":
            raise  # a broken install of bayesrank itself: its traceback says where
        print(f"bayesrank: error: {err}", file=sys.stderr)
        return 2
