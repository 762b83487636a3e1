"""A fifth engine through the public protocol alone: every caller takes it, no package change.

``ExactGaussian`` (defined here, not in the package) is the exact posterior of a Gaussian
likelihood on the latent differences: each row ``s = (i, j)`` observes ``y_s = 1 ~ N(xi_i -
xi_j, v)``. Its sites are exact (``tau_s = 1 / v``, ``nu_s = 1 / v``), its posterior is the GP
regression posterior on the differences and its evidence ``log N(y | 0, A K A^T + v I)``. The
references below are closed forms computed in NumPy from the prior covariance, sharing no code
with the engine's fit or the callers.
"""

from __future__ import annotations

import dataclasses
from typing import ClassVar

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy.stats import norm

from bayesrank import RBF, XPGP, PreferenceProblem, XPGPModel, default_trainable, parallel
from bayesrank.inference.engine import GaussianEngine, GaussianFit
from bayesrank.inference.ep import Sites
from bayesrank.learning import Start, fit_hyperparameters


@dataclasses.dataclass(frozen=True)
class ExactGaussian(GaussianEngine):
    """The exact posterior under ``y_s = 1 ~ N(d_s, v)`` for every row (module docstring)."""

    name: ClassVar[str] = ""
    v: float = 0.5

    def fit(self, K, rows, *, pair_mask=None, sites=None, outcomes=None):
        assert outcomes is None  # probit pairs only in this test
        K = jnp.asarray(K)
        m = rows.shape[0]
        mask = jnp.ones(m, bool) if pair_mask is None else pair_mask
        A = jax.nn.one_hot(rows[:, 0], K.shape[0], dtype=K.dtype) - jax.nn.one_hot(
            rows[:, 1], K.shape[0], dtype=K.dtype
        )
        A = jnp.where(mask[:, None], A, 0.0)
        y = jnp.where(mask, 1.0, 0.0).astype(K.dtype)
        C = A @ K @ A.T + self.v * jnp.eye(m, dtype=K.dtype)
        L = jnp.linalg.cholesky(C)
        alpha = jax.scipy.linalg.cho_solve((L, True), y)
        KA = K @ A.T
        mean = KA @ alpha
        cov = K - KA @ jax.scipy.linalg.cho_solve((L, True), KA.T)
        # padded rows: y = 0 with variance v each; their own log N(0 | 0, v) taken out
        logdet = 2.0 * jnp.sum(jnp.log(jnp.diag(L)))
        log_z = -0.5 * (y @ alpha + logdet + m * jnp.log(2 * jnp.pi))
        log_z = log_z + jnp.sum(~mask) * 0.5 * jnp.log(2 * jnp.pi * self.v)
        tau = jnp.where(mask, 1.0 / self.v, 0.0).astype(K.dtype)
        zero = jnp.zeros((), K.dtype)
        return GaussianFit(mean, cov, log_z, Sites(tau, tau), jnp.int32(0), jnp.bool_(True), zero)


V = 0.5


def _problem(seed: int, n: int = 9, m: int = 14):
    """Pairs of random entities, the winner the higher of ``sin(3 x_0) + cos(2 x_1)``."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 2))
    utility = np.sin(3 * X[:, 0]) + np.cos(2 * X[:, 1])
    pairs = np.array([rng.choice(n, 2, replace=False) for _ in range(m)])
    flip = utility[pairs[:, 0]] < utility[pairs[:, 1]]
    pairs[flip] = pairs[flip][:, ::-1]
    return PreferenceProblem.create(pairs, X=X)


def _reference(K, pairs, v=V):
    """NumPy closed form: posterior mean and covariance of ``xi``, and the log evidence."""
    n, m = len(K), len(pairs)
    A = np.zeros((m, n))
    A[np.arange(m), pairs[:, 0]] = 1.0
    A[np.arange(m), pairs[:, 1]] -= 1.0
    C = A @ K @ A.T + v * np.eye(m)
    Ci = np.linalg.inv(C)
    mean = K @ A.T @ Ci @ np.ones(m)
    cov = K - K @ A.T @ Ci @ A @ K
    _, logdet = np.linalg.slogdet(C)
    log_z = -0.5 * (np.ones(m) @ Ci @ np.ones(m) + logdet + m * np.log(2 * np.pi))
    return mean, cov, log_z


def _rbf(X, rho, kappa=1.0):
    """Paper Eq. 1: ``kappa^2 exp(-rho^2 / 2 ||x - x'||^2)`` (``rho`` an inverse lengthscale)."""
    d2 = ((X[:, None, :] - X[None, :, :]) ** 2).sum(-1)
    return kappa**2 * np.exp(-0.5 * rho**2 * d2)


PRIOR = XPGP(RBF(1.0, 0.9))


def test_the_model_fits_predicts_and_extends_with_a_new_engine():
    problem = _problem(0)
    post = XPGPModel(PRIOR, ExactGaussian(V)).fit(problem)
    K = np.asarray(XPGPModel(PRIOR).covariance(problem)[0])
    mean, cov, log_z = _reference(K, problem.pairs)
    np.testing.assert_allclose(post.mean, mean, atol=1e-10)
    np.testing.assert_allclose(post.cov, cov, atol=1e-10)
    np.testing.assert_allclose(post.log_evidence, log_z, atol=1e-10)
    assert post.inference == "ExactGaussian" and post.converged
    test = np.array([[0, 1], [2, 5], [8, 3]])
    dm = mean[test[:, 0]] - mean[test[:, 1]]
    dv = cov[test[:, 0], test[:, 0]] + cov[test[:, 1], test[:, 1]] - 2 * cov[test[:, 0], test[:, 1]]
    np.testing.assert_allclose(post.predict_pairs(test).prob, norm.cdf(dm / np.sqrt(1 + dv)))
    # a new entity: the GP's conditional on the same pseudo-observations of the differences
    X_new = np.array([[0.3, -0.2], [1.0, 0.5]])
    X_all = np.vstack([problem.X, X_new])
    K_all = _rbf(X_all, 0.9) / (2 * PRIOR.sigma**2)
    mean_all, cov_all, _ = _reference(K_all, problem.pairs)
    new_mean, new_cov = post.predict_new(X_new)
    np.testing.assert_allclose(new_mean, mean_all[-2:], atol=1e-10)
    np.testing.assert_allclose(new_cov, cov_all[-2:, -2:], atol=1e-10)


@pytest.mark.slow
def test_learning_maximises_the_new_engines_evidence():
    """Evidence maximisation (BFGS on ``log Z``, the rho of the RBF) with the new engine reaches
    the maximum of the closed-form evidence over a fine grid of rho (an interior one), to
    BFGS's tolerance (1e-2 nats)."""
    problem = _problem(1, n=15, m=40)
    prior = XPGP(RBF(1.0, 0.9), weights=np.ones(1))
    rho_only = dataclasses.replace(default_trainable(prior), weights=np.zeros(1, bool))
    fit = fit_hyperparameters(
        prior,
        problem,
        engine=ExactGaussian(V),
        trainable=rho_only,
        hyperprior_scale=None,
        start=Start(design=None),
    )
    assert float(fit.prior.weights[0]) == 1.0
    grid = np.exp(np.linspace(np.log(0.05), np.log(20.0), 4001))
    scale = 1.0 / (2 * PRIOR.sigma**2)
    values = [_reference(scale * _rbf(problem.X, r), problem.pairs)[2] for r in grid]
    best = int(np.argmax(values))
    assert 0 < best < len(grid) - 1  # an interior maximum
    learned = float(fit.prior.attribute.rho)
    _, _, at_learned = _reference(scale * _rbf(problem.X, learned), problem.pairs)
    np.testing.assert_allclose(fit.posteriors.log_evidence, at_learned, atol=1e-8)
    assert at_learned >= max(values) - 1e-2, (learned, grid[best])
    assert abs(np.log(learned / grid[best])) < 0.1, (learned, grid[best])


@pytest.mark.slow
def test_a_collection_runs_the_new_engine_in_one_program():
    """``parallel.fit_predict`` with the new engine (touched entities fitted, the rest by
    prediction at new entities) equals the closed form on every query's whole problem."""
    problems = [_problem(seed, n, m) for seed, (n, m) in enumerate([(9, 14), (11, 6), (6, 9)])]
    tests = [np.array([[0, 1], [2, 3], [4, 5]]) for _ in problems]
    result = parallel.fit_predict(PRIOR, problems, tests, engine=ExactGaussian(V))
    for q, (problem, test) in enumerate(zip(problems, tests, strict=True)):
        K = np.asarray(XPGPModel(PRIOR).covariance(problem)[0])
        mean, cov, _ = _reference(K, problem.pairs)
        dm = mean[test[:, 0]] - mean[test[:, 1]]
        dv = cov[test[:, 0], test[:, 0]] + cov[test[:, 1], test[:, 1]]
        dv = dv - 2 * cov[test[:, 0], test[:, 1]]
        np.testing.assert_allclose(result.mean[q], mean, atol=1e-9, err_msg=str(q))
        np.testing.assert_allclose(
            result.predictions[q].prob, norm.cdf(dm / np.sqrt(1 + dv)), atol=1e-9
        )


def test_strings_resolve_in_one_place_and_bad_engines_are_named():
    from bayesrank import EP, NUTS, Laplace, SparseLaplace
    from bayesrank.inference.engines import ENGINES, resolve

    assert {name: type(resolve(name)) for name in ENGINES} == {
        "ep": EP,
        "laplace": Laplace,
        "nuts": NUTS,
        "sparse": SparseLaplace,
    }
    with pytest.raises(ValueError, match=r"engine must be one of .* got 'gibbs'"):
        resolve("gibbs")
    with pytest.raises(ValueError, match=r"engine object, e.g. Laplace\(\)"):
        resolve(Laplace)
    with pytest.raises(ValueError, match="not a Gaussian engine"):
        parallel.fit_predict(PRIOR, [_problem(0)], [np.array([[0, 1]])], engine=NUTS())
    with pytest.raises(ValueError, match="tol must be"):
        Laplace(tol=-1.0)


def test_an_engine_is_a_pytree_whose_numbers_are_traced():
    """Changing a traced setting reuses the compiled program; a static one is its key."""
    from bayesrank import EP

    leaves, treedef = jax.tree_util.tree_flatten(EP(max_iter=7, tol=1e-8))
    assert leaves == [7, 1e-8, 1.0, 1e-4]  # max_iter, tol, damping, step_tol (rtol None)
    _, other = jax.tree_util.tree_flatten(EP(max_iter=9, tol=1e-5))
    assert treedef == other
    _, sequential = jax.tree_util.tree_flatten(EP(schedule="sequential"))
    assert treedef != sequential
    assert jax.tree_util.tree_unflatten(treedef, leaves) == EP(max_iter=7, tol=1e-8)


def test_engine_names_are_compared_only_in_the_resolver():
    """No module but ``inference/engines.py`` compares a value with an engine's shorthand or
    lists the shorthands (a choice list is ``engines.names()``): a new engine registered there
    is known everywhere. The checks catch each form they look for."""
    import ast
    import pathlib

    import bayesrank
    from bayesrank.inference.engines import ENGINES

    shorthands = set(ENGINES)

    def offences(source: str) -> list[str]:
        found, tree = [], ast.parse(source)
        exports = {  # __all__ lists modules named like engines (bayesrank.inference.ep)
            id(node.value)
            for node in ast.walk(tree)
            if isinstance(node, ast.Assign)
            and any(isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets)
        }
        for node in ast.walk(tree):
            if id(node) in exports:
                continue
            if isinstance(node, ast.Compare):
                sides = [node.left, *node.comparators]
                strings = {s.value for s in sides if isinstance(s, ast.Constant)}
                for s in sides:  # x in ("ep", "laplace")
                    if isinstance(s, ast.Tuple | ast.List | ast.Set):
                        strings |= {e.value for e in s.elts if isinstance(e, ast.Constant)}
                found += sorted(shorthands & {x for x in strings if isinstance(x, str)})
            elif isinstance(node, ast.Tuple | ast.List | ast.Set):  # a list of names
                names = {e.value for e in node.elts if isinstance(e, ast.Constant)}
                if len(shorthands & {x for x in names if isinstance(x, str)}) >= 2:
                    found.append(str(sorted(shorthands & names)))
        return found

    assert offences('if engine == "nuts": pass') == ["nuts"]
    assert offences('x = "laplace" != name') == ["laplace"]
    assert offences('ok = name in ("ep", "laplace")') != []
    assert offences('CHOICES = ["ep", "nuts"]') != []
    assert offences('x = EP.name == name; y = ("ep",); __all__ = ["ep", "nuts"]') == []

    root = pathlib.Path(bayesrank.__file__).parent
    bad = {
        str(path.relative_to(root)): found
        for path in sorted(root.rglob("*.py"))
        if path.name != "engines.py" or path.parent.name != "inference"
        if (found := offences(path.read_text()))
    }
    assert bad == {}
