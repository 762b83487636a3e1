"""``bayesrank active``: ask the pairs the model is least sure of, on a sample query."""

from __future__ import annotations

import argparse

from ._common import interact, setup_jax

__all__ = ["add_parser"]


def _sample_query(qid: str):
    from ..data.sample import SAMPLE_QIDS, load_sample

    for q in load_sample():
        if q.qid == str(qid):
            return q
    raise ValueError(
        f"--query {qid!r} is not in the bundled sample (it has {', '.join(SAMPLE_QIDS)})"
    )


def _cmd_active(args: argparse.Namespace) -> int:
    """Active exploration on one query of the bundled sample: a person answers
    (``--interactive``), or the query's relevance labels do."""
    setup_jax()
    import numpy as np

    from ..active import Session, ask
    from ..data.pairs import pairs_from_grades
    from ..kernels import RBF, XPGP, Independent
    from ..learning.initialize import median_distance

    query = _sample_query(args.query)
    X = query.X
    rho = 1.0 / median_distance(X)  # the median heuristic
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
    def show(question) -> str:
        lines = []
        for slot, doc in (("1", question.first), ("2", question.second)):
            feats = " ".join(f"{v:.3f}" for v in query.X[doc, :4])
            docid = query.doc_ids[doc] or f"#{doc}"
            lines.append(f"  [{slot}] document {docid} (features 1-4: {feats})\n")
        return "".join(lines)

    print(f"query {query.qid}: {len(query.X)} documents; answers kept in {session.path}")
    interact(session, k, "which document is the more relevant?", show)
    return 0


def add_parser(sub) -> None:
    act = sub.add_parser(
        "active",
        help="ask the pairs the model is least sure of (sample)",
        description="Active preference exploration on a query of the bundled sample: the "
        "model asks about the pair of documents it is least sure of, one at a time; you answer "
        "(--interactive) or the query's relevance labels do. Answers are kept in --answers and "
        "a later run resumes from them.",
    )
    act.add_argument("--interactive", action="store_true", help="you answer, in the terminal")
    act.add_argument("--query", default="5", help="a query of the bundled sample (default 5)")
    act.add_argument("--k", type=int, default=10, help="how many answers (default 10)")
    act.add_argument(
        "--criterion",
        default="variance_ratio",
        choices=["variance_ratio", "mutual_information", "random"],
        help="which pair to ask: variance_ratio (the paper's greedy rule: the pair whose "
        "latent degrees are closest and most uncertain, delta_var / delta_mean^2; the "
        "default), mutual_information (BALD: what the answer tells about the latent degrees), "
        "or random",
    )
    act.add_argument(
        "--answers", default="active_answers.jsonl", help="answer file, resumed if it exists"
    )
    act.set_defaults(func=_cmd_active)
