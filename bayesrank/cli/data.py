"""``bayesrank data summary`` and ``bayesrank evaluate``: LETOR files and prediction files."""

from __future__ import annotations

import argparse

from ._common import data_path, json_text, setup_jax

__all__ = ["add_parsers"]


def _cmd_summary(args: argparse.Namespace) -> int:
    from ..data.letor import load_letor
    from ..data.sample import sample_path
    from ..data.summary import summarize

    paths = [str(data_path(p)) for p in args.paths] or [str(sample_path())]
    reports = []
    for path in paths:
        summary = summarize(load_letor(path))
        reports.append({"path": str(path), **summary.to_dict()})
        if args.json:
            continue
        lo, mean, hi = summary.docs_per_query
        plo, pmean, phi = summary.pairs_per_query
        labels = ", ".join(f"{k}: {v}" for k, v in summary.label_counts.items())
        print(f"{path}")
        print(f"  queries              {summary.n_queries}")
        print(f"  documents            {summary.n_docs}")
        print(f"  features             {summary.n_features}")
        print(f"  labels               {labels}")
        print(f"  documents per query  min {lo}, mean {mean:.1f}, max {hi}")
        total = summary.pairs_total
        print(f"  pairs per query      min {plo}, mean {pmean:.1f}, max {phi} (total {total})")
        print(f"  queries with no relevant document  {summary.queries_without_relevant}")
    if args.json:
        print(json_text(reports if len(reports) > 1 else reports[0]))
    return 0


def _cmd_evaluate(args: argparse.Namespace) -> int:
    setup_jax()
    from ..data.letor import load_letor
    from ..data.scores import read_scores
    from ..evaluation import evaluate_queries, scores_by_query

    queries = load_letor(data_path(args.data))
    scores = read_scores(args.scores, n_expected=sum(q.n_docs for q in queries))
    result = evaluate_queries(queries, scores_by_query(queries, scores), max_k=args.max_k)
    if args.json:
        print(json_text(result))
        return 0
    # every k up to 20; past that the first ten and the last (the JSON has every k)
    ks = list(range(1, args.max_k + 1)) if args.max_k <= 20 else [*range(1, 11), args.max_k]
    print(f"queries  {result['n_queries']}")
    print(f"MAP      {result['MAP']:.4f}")
    print("k        " + " ".join(f"{k:>6d}" for k in ks))
    print("NDCG@k   " + " ".join(f"{result[f'NDCG@{k}']:.4f}" for k in ks))
    print("P@k      " + " ".join(f"{result[f'P@{k}']:.4f}" for k in ks))
    return 0


def add_parsers(sub) -> None:
    """``data summary`` and ``evaluate``."""
    data = sub.add_parser(
        "data",
        help="inspect ranking datasets",
        description="Inspect ranking datasets (data summary: queries, documents, labels and "
        "pairs of LETOR files).",
    )
    data_sub = data.add_subparsers(dest="data_command", required=True, metavar="COMMAND")
    summary = data_sub.add_parser(
        "summary",
        help="queries, documents, labels, pairs per query",
        description="Queries, documents, relevance labels and the preference pairs they imply, "
        "per LETOR file and in total.",
    )
    summary.add_argument(
        "paths", nargs="*", help="LETOR files, or sample (the default: the bundled sample)"
    )
    summary.add_argument("--json", action="store_true", help="print JSON instead of a table")
    summary.set_defaults(func=_cmd_summary)

    evaluate = sub.add_parser(
        "evaluate",
        help="MAP, NDCG@k, P@k of a prediction file",
        description="MAP, NDCG@1..K and P@1..K of a LETOR prediction file (one score per data "
        "line of DATA), by the official LETOR 3.0 evaluation conventions.",
    )
    evaluate.add_argument("data", help="LETOR data file (labels, qids), or sample")
    evaluate.add_argument("scores", help="prediction file: one score per data line")
    evaluate.add_argument("--json", action="store_true", help="print one JSON object")
    evaluate.add_argument("--max-k", type=int, default=10, help="largest cut-off (default 10)")
    evaluate.set_defaults(func=_cmd_evaluate)
