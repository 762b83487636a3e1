"""Fit time of bayesrank's RankSVM and RankBoost on one OHSUMED fold against today's peers.

One training set (OHSUMED QueryLevelNorm Fold1 ``train``: 63 queries, 9,219 documents, all
367,663 within-query pairs), every method in this one process, one after the other. bayesrank
is called as a user calls it, through the public estimators on ``(X, y, qid)`` (never wrapped in
a ``jax.jit`` of ours; the estimators call their own compiled cores), float64:

* ``bayesrank-ranksvm``: ``RankSVM(C).fit(X, y, qid)`` (linear, squared hinge, primal Newton,
  default ``tol``); the time includes building the within-query pairs and the padding.
* ``sklearn-linearsvc``: scikit-learn's ``LinearSVC(loss="squared_hinge", fit_intercept=False)``
  (liblinear) on the explicit pairwise transform (the seed tutorial's construction, balanced
  classes by flipping every other pair): the same objective ``1/2 ||w||^2 + C sum sqhinge``.
  Building the transform is timed separately (``sklearn-transform``) and not included in ``fit``.
  Both objectives are printed, so the comparison is at equal (or stated) accuracy.
* ``bayesrank-ranksvm-hinge``: ``RankSVM(C, loss="hinge")`` (Huber continuation), for reference.
* ``bayesrank-rankboost``: ``RankBoost(n_rounds=T, n_thresholds=10)``.
* ``xgboost-pairwise``: ``XGBRanker(objective="rank:pairwise")``, ``--trees`` trees of depth 6.
* ``lightgbm-lambdarank``: ``LGBMRanker(objective="lambdarank")``, ``--trees`` trees.

A peer that is not installed is skipped with a printed line; so is the whole run (exit 0) when
the data are absent. bayesrank: "compile" = first call minus the best later call;
``best``/``median`` over ``--repeats`` steady-state calls. Peers: ``--repeats`` calls after one
untimed warm-up on a small slice. ``ratio`` = method best / ``bayesrank-ranksvm`` best (>1:
slower than ours). Output: a table on stdout and ``benchmarks/out/bench_baselines.json`` with the
settings, versions and machine.

Usage::

    python benchmarks/bench_baselines.py [--data-dir ../shared/data] [--C 1e-4] [--rounds 300]
        [--trees 100] [--repeats 3]
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
from pathlib import Path

import _harness as harness

jax = harness.setup_jax()  # float64; compiled programs kept on disk between runs

import numpy as np  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bayesrank.baselines import RankBoost, RankSVM  # noqa: E402
from bayesrank.data.letor import load_letor  # noqa: E402
from bayesrank.data.pairs import pairs_within_queries  # noqa: E402
from bayesrank.data.userdata import queries_to_arrays  # noqa: E402


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--data-dir", default=os.environ.get("BAYESRANK_SHARED_DATA", "../shared/data"))
    p.add_argument("--fold", type=int, default=1)
    p.add_argument("--C", type=float, default=1e-4)
    p.add_argument("--rounds", type=int, default=300)
    p.add_argument("--trees", type=int, default=100)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--out", default="benchmarks/out/bench_baselines.json")
    args = p.parse_args(argv)

    path = Path(args.data_dir) / "OHSUMED" / "QueryLevelNorm" / f"Fold{args.fold}" / "train.txt.gz"
    if not path.is_file():
        print(f"{path} not found (the LETOR data, see --data-dir): nothing to measure")
        return
    queries = load_letor(path)
    X, y, qid = queries_to_arrays(queries)
    groups = [q.n_docs for q in queries]
    pairs = pairs_within_queries(y, qid)
    print(f"{path}: {len(queries)} queries, {X.shape[0]} documents, {len(pairs)} pairs", flush=True)
    rows = []

    def record(method, times, compile_s=None, **extra):
        row = {
            "method": method,
            "compile_s": compile_s,
            **harness.best_and_median(times),
            "runs": len(times),
            **extra,
        }
        rows.append(row)
        print(
            f"{method:24s} best {row['best_s']:8.3f} s  median {row['median_s']:8.3f} s"
            + (f"  compile {compile_s:6.2f} s" if compile_s is not None else "")
            + "".join(f"  {k} {v}" for k, v in extra.items()),
            flush=True,
        )

    def bayes(method, make, **extra_fn):
        """``make().fit(X, y, qid)``: the estimators return NumPy arrays, so a fit is finished
        when it returns."""
        first, _ = harness.timed(lambda: make().fit(X, y, qid))
        times, est = harness.repeat(lambda: make().fit(X, y, qid), args.repeats)
        extra = {k: f(est) for k, f in extra_fn.items()}
        record(method, times, compile_s=first - min(times), **extra)
        return est

    A = X[pairs[:, 0]] - X[pairs[:, 1]]

    def objective(w):
        return float(0.5 * w @ w + args.C * np.sum(np.maximum(0.0, 1.0 - A @ w) ** 2))

    svm = bayes(
        "bayesrank-ranksvm",
        lambda: RankSVM(C=args.C),
        objective=lambda e: round(objective(e.coef_), 6),
        newton_iters=lambda e: e.n_iter_,
        converged=lambda e: e.converged_,
    )
    bayes(
        "bayesrank-ranksvm-hinge",
        lambda: RankSVM(C=args.C, loss="hinge"),
        newton_iters=lambda e: e.n_iter_,
        converged=lambda e: e.converged_,
    )
    bayes("bayesrank-rankboost", lambda: RankBoost(n_rounds=args.rounds, n_thresholds=10))

    versions = {
        "python": platform.python_version(),
        "jax": jax.__version__,
        "numpy": np.__version__,
    }
    sklearn = harness.optional("sklearn")
    if sklearn is not None:
        from sklearn.svm import LinearSVC

        versions["scikit-learn"] = sklearn.__version__

        def transform():
            flip = np.where(np.arange(len(pairs)) % 2 == 0, 1.0, -1.0)
            return (X[pairs[:, 0]] - X[pairs[:, 1]]) * flip[:, None], flip

        times, (Ap, yp) = harness.repeat(transform, args.repeats)
        record("sklearn-transform", times)
        LinearSVC(C=args.C, fit_intercept=False).fit(Ap[:2000], yp[:2000])  # warm-up
        clf = LinearSVC(C=args.C, loss="squared_hinge", fit_intercept=False, max_iter=100000)
        times, _ = harness.repeat(lambda: clf.fit(Ap, yp), args.repeats)
        record(
            "sklearn-linearsvc",
            times,
            objective=round(objective(clf.coef_.ravel()), 6),
            max_abs_w_diff=float(np.max(np.abs(clf.coef_.ravel() - svm.coef_))),
        )
    xgb = harness.optional("xgboost")
    if xgb is not None:
        versions["xgboost"] = xgb.__version__
        kw = dict(objective="rank:pairwise", max_depth=6, learning_rate=0.1, n_jobs=2)
        xgb.XGBRanker(n_estimators=2, tree_method="hist", **kw).fit(X[:500], y[:500], group=[500])
        model = xgb.XGBRanker(n_estimators=args.trees, tree_method="hist", random_state=0, **kw)
        times, _ = harness.repeat(lambda: model.fit(X, y, group=groups), args.repeats)
        record("xgboost-pairwise", times)
    lgb = harness.optional("lightgbm")
    if lgb is not None:
        versions["lightgbm"] = lgb.__version__
        kw = dict(objective="lambdarank", learning_rate=0.05, n_jobs=2, verbose=-1)
        lgb.LGBMRanker(n_estimators=2, **kw).fit(X[:500], y[:500], group=[500])
        model = lgb.LGBMRanker(n_estimators=args.trees, random_state=0, **kw)
        times, _ = harness.repeat(lambda: model.fit(X, y, group=groups), args.repeats)
        record("lightgbm-lambdarank", times)

    base = next(r["best_s"] for r in rows if r["method"] == "bayesrank-ranksvm")
    for r in rows:
        r["ratio"] = r["best_s"] / base
    print(f"\n{'method':24s} {'compile s':>9s} {'best s':>8s} {'median s':>8s} {'ratio':>7s}")
    for r in rows:
        c = f"{r['compile_s']:.2f}" if r["compile_s"] is not None else "-"
        print(
            f"{r['method']:24s} {c:>9s} {r['best_s']:8.3f} {r['median_s']:8.3f} {r['ratio']:7.2f}"
        )
    payload = {
        "settings": vars(args),
        "data": {
            "path": str(path),
            "queries": len(queries),
            "docs": int(X.shape[0]),
            "pairs": len(pairs),
        },
        "versions": versions,
        "machine": {
            "cpu": harness.cpu_model(),
            "cpus": os.cpu_count(),
            "platform": platform.platform(),
        },
        "rows": rows,
    }
    print(f"wrote {harness.write_json(args.out, payload, indent=1)}")


if __name__ == "__main__":
    main()
