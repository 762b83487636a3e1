"""The collections of the sharding tests, shared by tests/test_sharding.py and the processes it
starts (tests/collection_worker.py)."""

import os

import jax.numpy as jnp
import numpy as np

from bayesrank import RBF, XPGP, Independent, PreferenceProblem, RegularizedLaplacian
from bayesrank.data.letor import load_letor
from bayesrank.data.pairs import pairs_from_grades

PRIOR = XPGP(
    RBF(1.0, 0.8), (RegularizedLaplacian(1.0, 0.7),), jnp.array([1.3, 0.6]), entity=Independent(0.2)
)

#: (entities, known pairs): three buckets in two size groups (``plan.merge_groups``), and more
#: queries than 4 devices in one of them
SIZES = [(12, 20), (30, 40), (13, 22), (50, 60), (11, 19), (29, 35), (9, 15), (14, 3), (10, 0)]


def flat(result) -> dict:
    """A collection's outputs, every query's concatenated, for comparing two runs."""
    return {
        "prob": np.concatenate([p.prob for p in result.predictions]),
        "delta_var": np.concatenate([p.delta_var for p in result.predictions]),
        "mean": np.concatenate(result.mean),
        "var": np.concatenate(result.var),
        "log_evidence": result.log_evidence,
        "n_iter": result.n_iter,
    }


def graph(rng, n):
    W = (rng.uniform(size=(n, n)) < 0.2) * rng.uniform(0.5, 2.0, size=(n, n))
    return np.triu(W, 1) + np.triu(W, 1).T


def random_problems(seed=0, sizes=SIZES):
    """Problems with attributes and a relation, and 25 pairs to predict each."""
    rng = np.random.default_rng(seed)
    problems, tests = [], []
    for n, m in sizes:
        X = rng.normal(size=(n, 2))
        u = X[:, 0] + 0.5 * rng.normal(size=n)
        i = rng.integers(0, n, m + 25)
        j = (i + rng.integers(1, n, m + 25)) % n
        pairs = np.where((u[i] > u[j])[:, None], np.c_[i, j], np.c_[j, i])
        problems.append(
            PreferenceProblem.create(pairs[:m].reshape(-1, 2), X=X, relations=[graph(rng, n)])
        )
        tests.append(pairs[m:])
    return problems, tests


def write_letor_files(directory, n_files=3, per_file=2, seed=1):
    """``n_files`` LETOR files of ``per_file`` queries each (3 features, grades 0-2)."""
    rng = np.random.default_rng(seed)
    qid = 0
    for f in range(n_files):
        lines = []
        for _ in range(per_file):
            qid += 1
            n = int(rng.integers(8, 30))
            X = rng.uniform(size=(n, 3))
            grades = np.clip(np.round(2 * X[:, 0] + 0.6 * rng.normal(size=n)), 0, 2).astype(int)
            for g, x in zip(grades, X, strict=True):
                feats = " ".join(f"{k + 1}:{v:.6f}" for k, v in enumerate(x))
                lines.append(f"{g} qid:{qid} {feats}")
        with open(os.path.join(directory, f"part-{f}.txt"), "w") as fh:
            fh.write("\n".join(lines) + "\n")


def letor_problems(files):
    """Each query of ``files``: its pairs from grades, a third known (a seeded choice per query,
    so that any process reading the query makes the same), the rest to predict; a graph from
    the features (each document linked to its nearest neighbour)."""
    problems, tests = [], []
    for path in files:
        for q in load_letor(path, n_features=3):
            pairs = pairs_from_grades(q.grades)
            known = np.random.default_rng(int(q.qid)).permutation(len(pairs)) < len(pairs) // 3
            d = ((q.X[:, None] - q.X[None]) ** 2).sum(-1) + np.eye(len(q.X)) * 1e9
            W = np.zeros_like(d)
            W[np.arange(len(d)), d.argmin(1)] = 1.0
            problems.append(
                PreferenceProblem.create(pairs[known], X=q.X, relations=[np.maximum(W, W.T)])
            )
            tests.append(pairs[~known])
    return problems, tests
