"""The rankers of the baselines study, each trained once on a training set and scored at every
value of its grid: bayesrank's RankSVM and RankBoost (two variants each) and, where their
packages are installed, the peers XGBoost and LightGBM.

The peers are imported here lazily, inside the functions that use them: they are the ``bench``
extra, never a dependency of the package. ``check_peers`` imports them before any slow work.
"""

from __future__ import annotations

import importlib
import platform
import time

import numpy as np

__all__ = ["METHODS", "PEERS", "check_peers", "fit_grid", "param_name", "versions"]

#: Every method, in the order of the tables.
METHODS = (
    "RankSVM",
    "RankSVM-hinge",
    "RankBoost",
    "RankBoost-RankLib",
    "SortNet",
    "PRank",
    "XPGP",
    "XGBoost",
    "LightGBM",
)

#: The methods that need a peer package: method -> (module to import, what pip installs).
PEERS = {"XGBoost": ("xgboost", "xgboost-cpu (or xgboost)"), "LightGBM": ("lightgbm", "lightgbm")}


def param_name(method: str) -> str:
    """The name of the value a method's grid runs over: ``C``, ``T``, ``n_hidden``,
    ``n_epochs`` or ``n_trees``."""
    if method.startswith("RankSVM"):
        return "C"
    if method == "SortNet":
        return "n_hidden"
    if method == "PRank":
        return "n_epochs"
    if method == "XPGP":
        return "n_docs"
    return "T" if method.startswith("RankBoost") else "n_trees"


def check_peers(methods, explicit: bool, import_module=importlib.import_module):
    """``(methods to run, {skipped method: one-line reason})``. A peer whose package does not
    import (not installed, or a broken install: any ``ImportError`` or ``OSError``, e.g. a
    missing shared library) is skipped where the protocol's preset named it, and is a
    ``ValueError`` naming ``--methods`` where the user did (``explicit``)."""
    keep, skipped = [], {}
    for method in methods:
        if method in PEERS:
            module, pip_name = PEERS[method]
            try:
                import_module(module)
            except (ImportError, OSError) as err:
                why = f"cannot import {module} ({type(err).__name__}: "
                why += f"{(str(err).splitlines() or [''])[0]}); pip install {pip_name}, "
                why += "or the bench extra (benchmarks/README.md)"
                if explicit:
                    raise ValueError(f"--methods {method}: {why}") from None
                skipped[method] = f"skipping {method}: {why}"
                continue
        keep.append(method)
    return keep, skipped


def _ranksvm(X, pairs, grid, loss):
    """``ranksvm.fit_linear`` at each ``C``, warm-started along the grid in its order."""
    import jax.numpy as jnp

    from ._programs import fit_ranksvm

    X, pairs = jnp.asarray(X), jnp.asarray(pairs)
    w = jnp.zeros(X.shape[1], X.dtype)
    out = {}
    for C in grid:
        w, info = fit_ranksvm(X, pairs, C, w, loss=loss)
        weights = np.asarray(w)
        info = {"n_iter": int(info.n_iter), "converged": bool(info.converged)}
        out[C] = (lambda Z, sizes, weights=weights: Z @ weights, info)
    return out


def _rankboost(X, pairs, grid, n_thresholds, complements):
    """``rankboost.fit`` for ``max(grid)`` rounds; each ``T`` scores with the first ``T``."""
    import jax.numpy as jnp

    from ...baselines.rankboost import candidate_thresholds
    from ._programs import fit_rankboost, predict_rankboost

    thresholds = jnp.asarray(candidate_thresholds(X, n_thresholds))
    model, info = fit_rankboost(
        jnp.asarray(X), jnp.asarray(pairs), thresholds, n_rounds=max(grid), complements=complements
    )
    loss = np.asarray(info.loss)
    return {
        T: (
            lambda Z, sizes, T=T: predict_rankboost(model, jnp.asarray(Z), T),
            {"train_exp_loss": float(loss[T - 1])},
        )
        for T in grid
    }


def _xgboost(X, y, sizes, grid, seed):
    import xgboost as xgb

    model = xgb.XGBRanker(
        objective="rank:pairwise",
        n_estimators=max(grid),
        learning_rate=0.1,
        max_depth=6,
        n_jobs=2,
        tree_method="hist",
        random_state=seed,
    )
    model.fit(X, y, group=sizes)
    return {n: (lambda Z, sizes, n=n: model.predict(Z, iteration_range=(0, n)), {}) for n in grid}


def _lightgbm(X, y, sizes, grid, seed):
    import lightgbm as lgb

    model = lgb.LGBMRanker(
        objective="lambdarank",
        n_estimators=max(grid),
        learning_rate=0.05,
        num_leaves=31,
        min_child_samples=20,
        n_jobs=2,
        random_state=seed,
        verbose=-1,
    )
    model.fit(X, y, group=sizes)
    return {n: (lambda Z, sizes, n=n: model.predict(Z, num_iteration=n), {}) for n in grid}


def _xpgp(train, grid, seed):
    """XPGP as a ranker across queries: an attribute-only prior with a linear kernel (a
    Bayesian probit RankSVM) on a random subset of about ``n_docs`` training documents (the
    same number from each query, at least 4), all pairs of different grades within each query,
    ``theta`` by the EP evidence; a document's score is its posterior mean utility
    (``predict_new``). The subset keeps EP's dense ``n^3`` within reach (a fold of OHSUMED
    has about 9,000 training documents). An RBF kernel ranks new queries poorly here: its
    evidence prefers lengthscales below the documents' spacing (on OHSUMED Fold1 ``rho``
    7.8, test MAP 0.20), and at the median heuristic it reaches 0.25 (``docs/results``)."""
    from ...data.pairs import pairs_within_queries
    from ...data.problem import PreferenceProblem
    from ...kernels import XPGP, Linear
    from ...learning import fit_hyperparameters
    from ...model import XPGPModel

    rng = np.random.default_rng(seed)
    out = {}
    for budget in grid:
        per = max(4, -(-budget // len(train)))
        picks = [rng.choice(q.n_docs, min(per, q.n_docs), replace=False) for q in train]
        X = np.concatenate([q.X[k] for q, k in zip(train, picks, strict=True)])
        y = np.concatenate([q.grades[k] for q, k in zip(train, picks, strict=True)])
        qid = np.repeat(np.arange(len(train)), [len(k) for k in picks])
        problem = PreferenceProblem.create(pairs_within_queries(y.astype(float), qid), X=X)
        fitted = fit_hyperparameters(XPGP(Linear()), [problem])
        posterior = XPGPModel(fitted.prior).fit(problem)

        def score(Z, sizes, posterior=posterior):
            blocks = range(0, len(Z), 1024)  # predict_new's covariance is (p, p)
            return np.concatenate(
                [np.asarray(posterior.predict_new(Z[a : a + 1024])[0]) for a in blocks]
            )

        out[budget] = (
            score,
            {"n_docs": len(X), "n_pairs": len(problem.pairs), "prior": repr(fitted.prior)},
        )
    return out


def _sortnet(train, vali, grid, seed):
    """``sortnet.fit`` (Algorithm 1, ``vali`` its validation queries; 10 iterations of 100
    Adam steps, the best by vali MAP) at each number of hidden unit pairs; each scores a
    query by its place in the sort."""
    import jax

    from ...baselines import sortnet

    out = {}
    for h in grid:
        params, info = sortnet.fit(
            jax.random.key(seed),
            [(q.X, q.grades) for q in train],
            [(q.X, q.grades) for q in vali],
            n_hidden=h,
            max_iter=10,
            n_steps=100,
        )
        out[h] = (
            lambda Z, sizes, params=params: np.concatenate(
                sortnet.sort_queries(params, np.split(Z, np.cumsum(sizes)[:-1]))
            ),
            {
                "best_iteration": int(info.best),
                "iterations": len(info.vali_map),
                "train_pairs": int(info.train_pairs[-1]),
                "vali_MAP_by_iteration": [float(v) for v in info.vali_map],
            },
        )
    return out


def _prank(X, y, grid, seed):
    """Averaged PRank (``prank.fit``) on the training documents' grades, shuffled each epoch
    (seeded), at each number of epochs; scores ``w . x``."""
    import jax.numpy as jnp

    from ._programs import fit_prank

    grades = y.astype(np.int64)
    rng = np.random.default_rng(seed)
    out = {}
    for epochs in grid:
        order = np.stack([rng.permutation(len(X)) for _ in range(epochs)])
        model = fit_prank(
            jnp.asarray(X), jnp.asarray(grades), jnp.asarray(order), int(grades.max()) + 1, epochs
        )
        w = np.asarray(model.w_avg)
        out[epochs] = (lambda Z, sizes, w=w: Z @ w, {})
    return out


def fit_grid(method: str, train, opt: dict, vali=None) -> tuple[dict, float]:
    """``({value: (score function, fit info)}, fit seconds)`` of ``method`` trained on the
    queries ``train`` (all pairs within each query) at each value of its grid (``opt["C"]``,
    ``opt["rounds"]``, ``opt["hidden"]``, ``opt["epochs"]``, ``opt["n_docs"]`` or
    ``opt["trees"]``; boosting fits
    ``max`` of its grid once and scores its prefixes). A score function takes the documents of
    one or more queries stacked, ``X: (n, d)``, and their sizes, and returns ``(n,)``. SortNet
    validates on ``vali`` (None: a fifth of ``train``'s queries, seeded)."""
    from ...data.pairs import pairs_within_queries
    from ...data.userdata import queries_to_arrays

    X, y, qid = queries_to_arrays(train, by_position=True)  # files may reuse a qid
    start = time.perf_counter()
    if method.startswith("RankSVM"):
        loss = "hinge" if method == "RankSVM-hinge" else "squared_hinge"
        grid = _ranksvm(X, pairs_within_queries(y, qid), opt["C"], loss)
    elif method.startswith("RankBoost"):
        complements = method == "RankBoost"
        pairs = pairs_within_queries(y, qid)
        grid = _rankboost(X, pairs, opt["rounds"], opt["n_thresholds"], complements)
    elif method == "SortNet":
        if not vali:
            rng = np.random.default_rng(opt["seed"])
            held = set(rng.permutation(len(train))[: max(1, len(train) // 5)].tolist())
            vali = [q for k, q in enumerate(train) if k in held]
            train = [q for k, q in enumerate(train) if k not in held] or vali
        grid = _sortnet(train, vali, opt["hidden"], opt["seed"])
    elif method == "PRank":
        grid = _prank(X, y, opt["epochs"], opt["seed"])
    elif method == "XPGP":
        grid = _xpgp(train, opt["n_docs"], opt["seed"])
    else:
        sizes = [q.n_docs for q in train]
        fit = _xgboost if method == "XGBoost" else _lightgbm
        grid = fit(X, y, sizes, opt["trees"], opt["seed"])
    return grid, time.perf_counter() - start


def versions() -> dict:
    """The versions that the numbers depend on (a peer absent: None)."""
    import jax

    out = {"python": platform.python_version(), "jax": jax.__version__, "numpy": np.__version__}
    for name in ("xgboost", "lightgbm"):
        try:
            out[name] = importlib.import_module(name).__version__
        except (ImportError, OSError):
            out[name] = None
    return out
