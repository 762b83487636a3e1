"""``bayesrank fit`` and ``bayesrank predict``: a model of every query of a collection, saved
to a folder, and its predictions as a LETOR prediction file and pair probabilities.

``fit DATA --out MODEL``: DATA is a LETOR file (the bundled sample by default; pairs from the
relevance grades) or a folder in the study format (``bayesrank.data.study``: attributes, grades or
comparisons, relation graphs per query). The prior: an RBF kernel on the attributes, a regularized
Laplacian per relation (``--relations``, study folders), and an independent per-entity effect
(``--no-entity`` drops it); its hyperparameters are learned by maximising the EP evidence
(``--fixed`` keeps the defaults; the engine's own evidence with ``--inference laplace``), one
``theta`` shared by the queries (with ``--approximation sparse``, each query's own, from the sparse
engine's evidence: ``learning.fit_sparse_hyperparameters``); then each query's posterior by the
engine (``--inference ep|laplace|nuts``). Graded data (a LETOR file, study folders with
``grades.csv``) gives the pairs its grades imply (``--labels pairs``, the default), those and a tie
for every two equal grades (``--labels ties``: a tie margin in the prior), or the grades themselves
(``--labels grades``: the ordinal model, ``K - 1`` thresholds for grades ``0..K-1``); the margin
and thresholds are learned with the kernel.

MODEL is a folder: ``collection.json`` (the format below) and one model file per query
(``bayesrank.io``, ``query-<k>.npz``).

``collection.json``: ``{"format": "bayesrank-collection", "format_version": 1, "data": DATA,
"kind": "letor" | "study", "lines": number of data lines of a LETOR file (or null),
"queries": [{"qid", "file", "rows": the LETOR data-line index of each entity (or null),
"doc_ids"}]}``.

``predict MODEL --scores FILE --pairs FILE``: the posterior mean of every entity as a LETOR
prediction file (one score per data line of the LETOR file the model was fitted on, so
``bayesrank evaluate DATA FILE`` scores it), and every pair's probability with its uncertainty
(``cli.pairfile``: its columns, what they mean, and how it streams).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from pathlib import Path

from ..inference.engines import EP, names
from ._common import csv_text, data_path, exact, plural, seed, setup_jax
from .pairfile import write_pairs

__all__ = ["add_parsers", "csv_text", "exact"]

COLLECTION = "bayesrank-collection"
COLLECTION_VERSION = 1
INDEX = "collection.json"


def _labels(qid, grades, pairs, judged, labels: str):
    """A query's ``(pairs, keywords of PreferenceProblem.create)`` under ``--labels``: the pairs
    its grades imply (``pairs``), with equal grades as ties (``ties``), or the grades themselves
    (``grades``, the ordinal model); a query of comparisons keeps its own."""
    import numpy as np

    from ..data.checks import check_graded
    from ..data.pairs import pairs_from_grades

    if grades is None:
        if labels != "pairs":
            raise ValueError(
                f"--labels {labels}: query {qid!r} has comparisons, not grades (its ties and "
                "weights, if any, are read as they are)"
            )
        return pairs, judged
    if labels == "grades":
        # the float values as read: check_graded names 1e300 where an int64 cast would wrap it
        rows = np.column_stack([np.arange(len(grades)), np.asarray(grades, np.float64)])
        try:
            graded = check_graded(rows, len(grades))
        except ValueError as error:
            raise ValueError(f"--labels grades: query {qid!r}: {error}") from None
        return np.zeros((0, 2), np.int64), {"graded": graded}
    if labels == "ties":
        equal = np.argwhere(np.triu(np.equal.outer(grades, grades), 1))
        return pairs_from_grades(grades), {"ties": equal} if len(equal) else {}
    return pairs_from_grades(grades), {}


def _queries(data: Path | None, labels: str = "pairs"):
    """``(kind, lines, [(qid, X, (pairs, judged), relations dict, rows, doc_ids)])`` of DATA,
    the labels taken as ``--labels`` says (``_labels``)."""
    import numpy as np

    from ..data.letor import load_letor
    from ..data.study import read_study_dir

    if data is not None and Path(data).is_dir():
        out = []
        for q in read_study_dir(data):
            labelled = _labels(q.qid, q.grades, q.pairs, q.judgements, labels)
            out.append((q.qid, q.X, labelled, q.relations, None, None))
        return "study", None, out
    queries = load_letor(data_path(data))
    lines = sum(q.n_docs for q in queries)
    out = []
    for q in queries:
        labelled = _labels(q.qid, q.grades, None, {}, labels)
        out.append((q.qid, q.X, labelled, {}, np.asarray(q.rows), q.doc_ids))
    return "letor", lines, out


def _cmd_fit(args: argparse.Namespace) -> int:
    setup_jax()
    import jax

    from ..data.problem import PreferenceProblem
    from ..inference.engines import SparseLaplace, engine_from_keywords
    from ..io import save
    from ..kernels import RBF, XPGP, Independent, RegularizedLaplacian
    from ..kernels.xpgp import default_trainable, start_thresholds
    from ..learning import fit_hyperparameters
    from ..model import XPGPModel

    try:
        engine = engine_from_keywords(args.inference, {}, args.approximation, args.rank)
    except ValueError:  # the sparse form of an engine that has none
        engine = None
    if engine is None:
        raise ValueError("--approximation sparse needs --inference laplace")
    sparse = isinstance(engine, SparseLaplace)
    kind, lines, queries = _queries(args.data, args.labels)
    if args.query:
        known = [q[0] for q in queries]
        if missing := sorted(set(args.query) - set(known)):
            raise ValueError(f"--query {missing[0]!r} is not in {args.data or 'the sample'}")
        queries = [q for q in queries if q[0] in set(args.query)]
    names = sorted(queries[0][3]) if args.relations is None else list(args.relations)
    for qid, _, _, rels, _, _ in queries:
        if missing := sorted(set(names) - set(rels)):
            raise ValueError(
                f"--relations: query {qid!r} has no relation {missing[0]!r} "
                f"(it has {sorted(rels) or 'none'})"
            )
    problems = [
        PreferenceProblem.create(pairs, X, relations=[rels[r] for r in names], **judged)
        for _, X, (pairs, judged), rels, _, _ in queries
    ]
    n_ties = sum(len(p.ties) for p in problems)
    top = max((int(p.graded[:, 1].max()) for p in problems if p.anchored), default=0)
    # the ordinal model: K - 1 thresholds from -1 to 1, learned unless --fixed
    thresholds = start_thresholds(top + 1) if top > 0 else {}
    prior = XPGP(
        RBF(),
        tuple(RegularizedLaplacian() for _ in names),
        entity=None if args.no_entity else Independent(),
        margin=0.5 if n_ties else None,  # the tie model's margin, learned unless --fixed
        **thresholds,
    )

    def say(text: str) -> None:
        if not args.quiet:
            print(text, file=sys.stderr, flush=True)

    if sparse and not args.fixed:
        say("learning each query's hyperparameters from the sparse engine's evidence ...")
    elif not args.fixed:
        say(f"learning the hyperparameters on {plural(len(problems), 'query', 'queries')} ...")
        learner = engine.learning_engine()  # EP's evidence for NUTS, the engine's own else
        trainable = None
        if (n_ties or top) and not isinstance(learner, EP):  # only EP's evidence has their
            frozen = dict(margin=False, threshold=False, threshold_gaps=False)  # gradients
            trainable = dataclasses.replace(default_trainable(prior), **frozen)
            say(f"the tie margin and thresholds stay as they start (--inference {args.inference})")
        prior = fit_hyperparameters(prior, problems, engine=learner, trainable=trainable).prior
    say(f"prior: {prior}")
    args.out.mkdir(parents=True, exist_ok=True)
    model = XPGPModel(prior, engine)
    index = []
    key = jax.random.PRNGKey(args.seed)
    for k, (problem, (qid, _, _, _, rows, doc_ids)) in enumerate(
        zip(problems, queries, strict=True)
    ):
        say(
            f"[{k + 1}/{len(problems)}] query {qid}: {problem.n} entities, "
            f"{len(problem.pairs)} pairs"
            + (f", {len(problem.ties)} ties" if len(problem.ties) else "")
            + (f", {len(problem.graded)} grades" if problem.anchored else "")
            + f" ({args.inference})"
        )
        learn = {"learn_hyperparameters": True} if sparse and not args.fixed else {}
        posterior = model.fit(problem, key=jax.random.fold_in(key, k), **learn)
        if learn:
            say(f"  learned: {posterior.prior}")
        name = f"query-{k}.npz"
        save(posterior, args.out / name)
        index.append(
            {
                "qid": qid,
                "file": name,
                "rows": None if rows is None else [int(r) for r in rows],
                "doc_ids": None if doc_ids is None else [str(d) for d in doc_ids],
            }
        )
    document = {
        "format": COLLECTION,
        "format_version": COLLECTION_VERSION,
        "data": str(args.data) if args.data is not None else "bundled sample",
        "kind": kind,
        "lines": lines,
        "queries": index,
    }
    (args.out / INDEX).write_text(json.dumps(document, indent=1))
    fitted = plural(len(index), "query", "queries")
    print(f"fitted {fitted} ({args.inference}); model in {args.out}")
    return 0


def read_collection(folder: Path) -> dict:
    """The ``collection.json`` of a model folder, checked."""
    path = Path(folder) / INDEX
    if not path.is_file():
        raise ValueError(
            f"{folder}: not a model folder ({INDEX} is missing; `bayesrank fit` writes one)"
        )
    try:
        document = json.loads(path.read_text())
    except json.JSONDecodeError as error:
        raise ValueError(f"{path}: not JSON ({error})") from None
    if not isinstance(document, dict) or document.get("format") != COLLECTION:
        raise ValueError(f"{path}: format is not {COLLECTION!r}")
    version = document.get("format_version")
    if not isinstance(version, int) or version > COLLECTION_VERSION:
        raise ValueError(
            f"{path}: format_version {version!r} is newer than this bayesrank reads "
            f"({COLLECTION_VERSION}); upgrade bayesrank"
        )
    for k, q in enumerate(document.get("queries") or []):
        if not (Path(folder) / str(q.get("file"))).is_file():
            raise ValueError(f"{path}: queries[{k}]: file {q.get('file')!r} is missing")
    return document


def _cmd_predict(args: argparse.Namespace) -> int:
    setup_jax()
    import numpy as np

    from ..io import load

    document = read_collection(args.model)
    letor = document["kind"] == "letor"
    total = document["lines"] if letor else sum(1 for _ in document["queries"])
    if letor and args.scores is not None:  # checked before any file is written
        covered = sum(len(q["rows"]) for q in document["queries"])
        if covered < total:
            raise ValueError(
                f"{args.model}: the model covers {covered} of the {total} data lines (fitted "
                "with --query): predict writes a LETOR prediction file only for a model of "
                "every query; nothing written"
                + (" (without --scores, the pairs are)" if args.pairs is not None else "")
            )
    posteriors = [load(Path(args.model) / q["file"]) for q in document["queries"]]
    if args.scores is not None:
        means = [np.asarray(p.mean) for p in posteriors]
        if letor:
            filled = np.full(total, np.nan)
            for q, mean in zip(document["queries"], means, strict=True):
                filled[np.asarray(q["rows"])] = mean
            text = "".join(exact(s) + "\n" for s in filled.tolist())
        else:
            scores = [[q["qid"], i, m] for q, mean in zip(document["queries"], means, strict=True)
                      for i, m in enumerate(mean.tolist())]  # fmt: skip
            text = csv_text(["qid", "entity", "score"], scores)
        Path(args.scores).write_text(text)
    n_pairs = 0
    if args.pairs is not None:
        n_pairs = write_pairs(Path(args.pairs), document["queries"], posteriors)
    print(
        f"{plural(len(document['queries']), 'query', 'queries')}: "
        + (f"scores in {args.scores}" if args.scores else "no --scores")
        + "; "
        + (f"{n_pairs} pairs in {args.pairs}" if args.pairs else "no --pairs")
    )
    return 0


def add_parsers(sub) -> None:
    fit = sub.add_parser(
        "fit",
        help="fit a model of every query of a collection and save it",
        description="Fit the XPGP model (RBF on attributes, a regularized Laplacian per "
        "relation, an entity effect) to every query of DATA, hyperparameters learned by the "
        "evidence (shared by the queries), and save it to a folder.",
    )
    fit.add_argument(
        "data", nargs="?", type=Path, default=None,
        help="a LETOR file, a folder in the study format, or sample (the default: the "
        "bundled sample)",
    )  # fmt: skip
    fit.add_argument("--out", type=Path, required=True, help="the model folder to write")
    fit.add_argument("--query", nargs="+", default=None, help="only these query ids")
    fit.add_argument("--relations", nargs="*", default=None, help="relation names (study data)")
    fit.add_argument(
        "--inference",
        choices=names(),
        default=EP.name,
        help="the posterior of each query: ep (expectation propagation, the default), laplace, "
        "or nuts (NumPyro's sampler; its hyperparameters by EP's evidence)",
    )
    fit.add_argument(
        "--approximation",
        choices=["dense", "sparse"],
        default="dense",
        help="dense (the default: n x n matrices) or sparse (none, for thousands of entities; "
        "needs --inference laplace; its hyperparameters learned per query from its evidence "
        "unless --fixed; docs/guide/large.md)",
    )
    fit.add_argument("--rank", type=int, default=256, help="attribute kernel's rank (sparse)")
    fit.add_argument("--fixed", action="store_true", help="keep the default hyperparameters")
    fit.add_argument(
        "--labels", choices=["pairs", "ties", "grades"], default="pairs",
        help="graded data as the pairs its grades imply (default), with equal grades as ties "
        "(a learned tie margin), or as grades (the ordinal model, learned thresholds)",
    )  # fmt: skip
    fit.add_argument("--no-entity", action="store_true", help="no per-entity effect")
    fit.add_argument("--seed", type=seed, default=0, help="NUTS's key")
    fit.add_argument("--quiet", action="store_true", help="no progress on stderr")
    fit.set_defaults(func=_cmd_fit)

    predict = sub.add_parser(
        "predict",
        help="scores and pair probabilities (with their uncertainty) of a fitted model",
        description="Write the posterior mean of every entity as a LETOR prediction file "
        "(--scores) and every pair's probability with the moments of the latent difference "
        "and the probability's own uncertainty (--pairs, CSV). Columns: prob = P(i > j | "
        "data), the posterior mean of Phi(xi_i - xi_j); prob_05, prob_50, prob_95: its 5%, 50% "
        "and 95% posterior quantiles (its median and 90% interval). The mean and the "
        "median differ: prob lies between prob_50 and 1/2, and outside [prob_05, prob_95] "
        "only where the difference is large and uncertain (|delta_mean| * sqrt(delta_var) > 3.29).",
    )
    predict.add_argument("model", type=Path, help="a folder written by `bayesrank fit`")
    predict.add_argument("--scores", type=Path, default=None, help="prediction file to write")
    predict.add_argument("--pairs", type=Path, default=None, help="pair CSV to write")
    predict.set_defaults(func=_cmd_predict)
