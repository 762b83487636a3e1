"""The ``bayesrank`` command (also ``python -m bayesrank``).

Subcommands:
    ``bayesrank data summary [PATH ...] [--json]``  queries, documents, labels and pairs of LETOR
        files (default: the bundled OHSUMED sample).
    ``bayesrank evaluate DATA SCORES [--json] [--max-k K]``  MAP, NDCG@1..K and P@1..K of a LETOR
        prediction file (one score per line) against a LETOR data file, LETOR 3.0 conventions.

``--json`` output is strict JSON (RFC 8259): a number that is not finite (NaN, inf) is never
written as ``NaN`` or ``Infinity``; the command fails instead (exit status 2) with a message
naming the key that holds it, and writes nothing to stdout. (Labels whose NDCG gain overflows
are refused before that, naming the query and label.)

The CLI runs JAX in float64 (it sets ``jax_enable_x64`` for its own process) so that its metrics
match the official Perl evaluation scripts to the last printed digit, and keeps compiled programs
in the persistent compilation cache (:func:`bayesrank.runtime.enable_compilation_cache`;
``BAYESRANK_CACHE_DIR`` names the directory, ``off`` turns it off; one that cannot be created
is reported as a one-line warning and the command runs without the cache).

User errors (a missing or malformed file, a label the metrics refuse, ``--max-k`` larger than
the longest query or 10, whichever is larger) exit with status 2 and a one-line message on
stderr, never a traceback.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import warnings
from collections.abc import Sequence

__all__ = ["main"]

#: The largest ``--max-k`` ever accepted (beyond the longest query it only allocates memory).
MAX_K_LIMIT = 10**6


def _non_finite(obj, path: str = "") -> str | None:
    """The path (``['per_query'][0]['NDCG@2']``) of the first float in ``obj`` that is not
    finite, or None."""
    if isinstance(obj, float):
        return None if math.isfinite(obj) else path or "the value"
    if isinstance(obj, dict):
        items = ((f"{path}[{k!r}]", v) for k, v in obj.items())
    elif isinstance(obj, list | tuple):
        items = ((f"{path}[{i}]", v) for i, v in enumerate(obj))
    else:
        return None
    for where, value in items:
        if (found := _non_finite(value, where)) is not None:
            return found
    return None


def _json(obj) -> str:
    """``obj`` as strict JSON; ``ValueError`` naming the first non-finite number instead of
    writing ``NaN`` or ``Infinity`` (which JSON does not have)."""
    if (where := _non_finite(obj)) is not None:
        raise ValueError(f"cannot write JSON: {where} is not a finite number")
    return json.dumps(obj, indent=2, allow_nan=False)


def _cmd_summary(args: argparse.Namespace) -> int:
    from .data.letor import load_letor
    from .data.sample import sample_path
    from .data.summary import summarize

    paths = args.paths or [str(sample_path())]
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
        print(_json(reports if len(reports) > 1 else reports[0]))
    return 0


def _cmd_evaluate(args: argparse.Namespace) -> int:
    import jax

    jax.config.update("jax_enable_x64", True)
    from .data.letor import load_letor, read_scores
    from .evaluation import evaluate_queries, scores_by_query
    from .runtime import enable_compilation_cache

    with warnings.catch_warnings(record=True) as caught:  # one line each, no source excerpt
        warnings.simplefilter("always", RuntimeWarning)
        enable_compilation_cache()  # a second run loads its programs from disk
    for warning in caught:
        message = str(warning.message).removeprefix("bayesrank: ")
        print(f"bayesrank: warning: {message}", file=sys.stderr)

    queries = load_letor(args.data)
    longest = max((q.n_docs for q in queries), default=0)
    if args.max_k > max(longest, 10):
        raise ValueError(
            f"--max-k {args.max_k} is too large: the longest query has {longest} documents, so "
            f"--max-k may be at most {max(longest, 10)}"
        )
    scores = read_scores(args.scores, n_expected=sum(q.n_docs for q in queries))
    result = evaluate_queries(queries, scores_by_query(queries, scores), max_k=args.max_k)
    if args.json:
        print(_json(result))
        return 0
    ks = range(1, args.max_k + 1)
    print(f"queries  {result['n_queries']}")
    print(f"MAP      {result['MAP']:.4f}")
    print("k        " + " ".join(f"{k:>6d}" for k in ks))
    print("NDCG@k   " + " ".join(f"{result[f'NDCG@{k}']:.4f}" for k in ks))
    print("P@k      " + " ".join(f"{result[f'P@{k}']:.4f}" for k in ks))
    return 0


def _sample_query(qid: str):
    from .data.sample import SAMPLE_QIDS, load_sample

    for q in load_sample():
        if q.qid == str(qid):
            return q
    raise ValueError(
        f"--query {qid!r} is not in the bundled sample (it has {', '.join(SAMPLE_QIDS)})"
    )


def _cmd_active(args: argparse.Namespace) -> int:
    """Active exploration on one query of the bundled sample: a person answers
    (``--interactive``), or the query's relevance labels do."""
    import jax

    jax.config.update("jax_enable_x64", True)
    import numpy as np

    from .active import Session, ask
    from .data.pairs import pairs_from_grades
    from .kernels import RBF, XPGP, Independent

    query = _sample_query(args.query)
    X = query.X
    dist = np.sqrt(((X[:, None] - X[None]) ** 2).sum(-1))[np.triu_indices(len(X), 1)]
    rho = 1.0 / float(np.median(dist[dist > 0]))  # the median heuristic
    K = np.asarray(XPGP(RBF(1.0, rho), (), entity=Independent(0.1)).covariance(X))
    if args.interactive:
        candidates = np.array(np.triu_indices(len(X), 1)).T
        session = Session(K, candidates, args.criterion, answers=args.answers)
        return _interact(session, query, args.k)
    truth = pairs_from_grades(query.grades)  # (better, worse): the labels answer
    order = np.random.default_rng(0).permutation(len(truth))
    candidates = np.sort(truth[order], axis=1)
    better = {tuple(r) for r in truth}
    session = ask(K, candidates, lambda i, j: (i, j) in better, args.k, criterion=args.criterion)
    asked = {tuple(sorted(p)) for p in session.pairs}
    rest = np.array([r for r in truth if tuple(sorted(r)) not in asked]).reshape(-1, 2)
    d = session.mean[rest[:, 0]] - session.mean[rest[:, 1]]
    print(f"query {query.qid}: {len(X)} documents, {len(truth)} labelled pairs")
    print(f"asked {len(session.pairs)} pairs by {args.criterion}; the labels answered")
    print(
        f"pair error on the {len(rest)} others: {float(np.mean(d < 0) + 0.5 * np.mean(d == 0)):.3f}"
    )
    return 0


def _interact(session, query, k: int) -> int:
    def show(slot: str, doc: int) -> str:
        feats = " ".join(f"{v:.3f}" for v in query.X[doc, :4])
        docid = query.doc_ids[doc] or f"#{doc}"
        return f"  [{slot}] document {docid} (features 1-4: {feats})"

    print(f"query {query.qid}: {len(query.X)} documents; answers kept in {session.path}")
    while len(session.pairs) < k:
        s = session.propose()
        if s is None:
            print("every pair has been asked")
            break
        i, j = (int(x) for x in session.candidates[s])
        print(f"pair {len(session.pairs) + 1} of {k}: which document is the more relevant?")
        print(show("1", i))
        print(show("2", j))
        try:
            reply = input("answer 1 or 2, s (skip), u (undo), q (stop): ").strip().lower()
        except EOFError:
            break
        if reply == "q":
            break
        if reply == "u":
            print("undone" if session.undo() else "nothing to undo")
            continue
        choice = {"1": "first", "2": "second", "s": "skip"}.get(reply)
        if choice is None:
            print(f"not an answer: {reply!r}")
            continue
        session.answer(s, choice)
    print(f"{len(session.pairs)} answers in {session.path}")
    return 0


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="bayesrank", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)

    data = sub.add_parser("data", help="inspect ranking datasets")
    data_sub = data.add_subparsers(dest="data_command", required=True)
    summary = data_sub.add_parser("summary", help="queries, documents, labels, pairs per query")
    summary.add_argument("paths", nargs="*", help="LETOR files (default: the bundled sample)")
    summary.add_argument("--json", action="store_true", help="print JSON instead of a table")
    summary.set_defaults(func=_cmd_summary)

    evaluate = sub.add_parser("evaluate", help="MAP, NDCG@k, P@k of a prediction file")
    evaluate.add_argument("data", help="LETOR data file (labels, qids)")
    evaluate.add_argument("scores", help="prediction file: one score per data line")
    evaluate.add_argument("--json", action="store_true", help="print one JSON object")
    evaluate.add_argument("--max-k", type=int, default=10, help="largest cut-off (default 10)")
    evaluate.set_defaults(func=_cmd_evaluate)

    act = sub.add_parser("active", help="ask the pairs the model is least sure of (sample)")
    act.add_argument("--interactive", action="store_true", help="you answer, in the terminal")
    act.add_argument("--query", default="5", help="a query of the bundled sample (default 5)")
    act.add_argument("--k", type=int, default=10, help="how many answers (default 10)")
    act.add_argument(
        "--criterion",
        default="variance_ratio",
        choices=["variance_ratio", "mutual_information", "random"],
    )
    act.add_argument(
        "--answers", default="active_answers.jsonl", help="answer file, resumed if it exists"
    )
    act.set_defaults(func=_cmd_active)
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


if __name__ == "__main__":
    sys.exit(main())
