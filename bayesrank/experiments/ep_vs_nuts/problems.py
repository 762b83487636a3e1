"""The problems EP and NUTS are compared on: the chosen queries of a collection split into
known and test pairs under a fixed prior, and the synthetic problems (the protocol: the package's
docstring)."""

from __future__ import annotations

import numpy as np

from .._common import load_queries, median_rho, rng_for

#: The EM fit of ``docs/development/learning.md`` (OHSUMED, 200 known pairs, one theta shared by
#: the queries, XPGP with the keyword graph): the ``em-fit`` prior.
EM_FIT = dict(rho=0.57, iota=1.68, weights=(1.63, 2.74), entity=0.11)


#: The synthetic settings: known pairs ``m`` and prior scales ``kappa``, and the sizes.
SYNTHETIC = dict(m=(20, 100, 400), kappa=(1.0, 3.0), n=50, d=3, test=500)


def load(opt: dict, data_dir) -> tuple[list, str]:
    """The chosen queries (``StudyQuery``: ``X``, ``pairs``, ``relations``) and their source."""
    from ...data.pairs import pairs_from_grades
    from ...data.study import StudyQuery
    from ..relational import StudyConfig, load_collection
    from ..relational.collections import _choose

    need = 2 * max(opt["known"])
    if opt["collection"] == "letor":
        queries, source = load_queries(data_dir)
        eligible = [
            StudyQuery(q.qid, q.X, pairs_from_grades(q.grades), {}, q.grades)
            for q in queries
            if len(pairs_from_grades(q.grades)) >= need
        ]
        chosen = _choose(eligible, opt["queries"], opt["seed"])
    else:
        source = "bundled sample" if data_dir is None else f"{opt['collection']} in {data_dir}"
        config = StudyConfig(
            collection=opt["collection"],
            data_dir=data_dir,
            queries=opt["queries"],
            known=tuple(opt["known"]),
            seed=opt["seed"],
        )
        try:
            chosen = [q for q in load_collection(config) if len(q.pairs) >= need]
        except ValueError as err:
            if not str(err).startswith("no query of"):  # a missing folder, a bad file: as is
                raise
            chosen = []
    if not chosen:
        raise ValueError(
            f"--known {max(opt['known'])} is too large: no query of {source} has {need} labelled "
            "pairs (twice the largest --known)"
        )
    return chosen, source


def em_fit_prior():
    """The ``em-fit`` prior (``EM_FIT``): XPGP with the keyword graph at OHSUMED's EM fit."""
    import jax.numpy as jnp

    from ...kernels import RBF, XPGP, Independent, RegularizedLaplacian

    p = EM_FIT
    return XPGP(
        RBF(jnp.asarray(1.0), jnp.asarray(p["rho"])),
        (RegularizedLaplacian(iota=jnp.asarray(p["iota"])),),
        jnp.asarray(p["weights"]),
        entity=Independent(jnp.asarray(p["entity"])),
    )


def rbf_prior(kappa: float, rho: float):
    """``RBF(kappa, rho) + Independent(0.1)``: the ``rbf`` prior and the synthetic one."""
    import jax.numpy as jnp

    from ...kernels import RBF, XPGP, Independent

    return XPGP(RBF(jnp.asarray(kappa), jnp.asarray(rho)), (), entity=Independent(jnp.asarray(0.1)))


def query_settings(queries, opt: dict) -> list[dict]:
    """One setting per ``--known``: its problems, test pairs and priors (one per problem)."""
    import jax

    from ...data.pairs import split_pairs
    from ...data.problem import PreferenceProblem

    shared = em_fit_prior() if opt["prior"] == "em-fit" else None
    out = []
    for k in opt["known"]:
        problems, tests, priors = [], [], []
        for b, q in enumerate(queries):
            key = jax.random.fold_in(jax.random.fold_in(jax.random.PRNGKey(opt["seed"]), k), b)
            known, rest = split_pairs(key, q.pairs, k)
            if opt["test"] and len(rest) > opt["test"]:
                pick = rng_for(opt["seed"], k, b).choice(len(rest), opt["test"], False)
                rest = rest[np.sort(pick)]
            relations = list(q.relations.values()) if shared is not None else []
            problems.append(PreferenceProblem.create(known, X=q.X, relations=relations))
            tests.append(rest)
            priors.append(shared or rbf_prior(opt["kappa"], median_rho(q.X)))
        name = f"{opt['collection']}, {k} known"
        out.append(
            dict(
                name=name,
                labels=[q.qid for q in queries],
                problems=problems,
                tests=tests,
                priors=priors,
            )
        )
    return out


def synthetic_settings(opt: dict) -> list[dict]:
    """The synthetic settings (module docstring), ``opt['synthetic']`` problems each."""
    from scipy.special import ndtr

    from ...data.problem import PreferenceProblem

    n, d, n_test = SYNTHETIC["n"], SYNTHETIC["d"], SYNTHETIC["test"]
    rng = np.random.default_rng(opt["seed"])
    out = []
    for kappa in SYNTHETIC["kappa"]:
        prior = rbf_prior(kappa, 1 / np.sqrt(d))
        for m in SYNTHETIC["m"]:
            problems, tests = [], []
            for _ in range(opt["synthetic"]):
                X = rng.normal(size=(n, d))
                K = np.asarray(prior.covariance(X))
                xi = rng.multivariate_normal(np.zeros(n), K)
                pairs = np.array([rng.choice(n, 2, replace=False) for _ in range(m + n_test)])
                win = rng.random(m) < ndtr(xi[pairs[:m, 0]] - xi[pairs[:m, 1]])
                known = np.where(win[:, None], pairs[:m], pairs[:m, ::-1])
                test = pairs[m:]
                right = (xi[test[:, 0]] > xi[test[:, 1]])[:, None]  # winner first
                tests.append(np.where(right, test, test[:, ::-1]))
                problems.append(PreferenceProblem.create(known, X=X))
            out.append(
                dict(
                    name=f"synthetic, kappa={kappa:g}, m={m}",
                    labels=[f"s{b}" for b in range(len(problems))],
                    problems=problems,
                    tests=tests,
                    priors=[prior] * len(problems),
                )
            )
    return out
