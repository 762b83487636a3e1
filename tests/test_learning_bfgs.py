"""Evidence maximisation by BFGS: its Fisher start, its optimum, its trace and stopping rule.

References: the Fisher information against NumPy (``W`` from an eigendecomposition of ``S``,
``dK`` by central finite differences of a NumPy RBF kernel); the optimum against scipy's
Nelder-Mead (derivative-free) on the re-converged EP evidence. In float32 (x64 off): the Fisher
information, to float32's round-off (``FISHER_RTOL32``); the optimiser's tests say why not.
"""

import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from helpers import assert_close, ep_tol, float32_not_run, float64_only
from scipy import optimize

from bayesrank import EP
from bayesrank.data.batch import stack_problems
from bayesrank.data.problem import PreferenceProblem
from bayesrank.inference import ep
from bayesrank.kernels import RBF, XPGP, Independent
from bayesrank.learning import (
    BFGS,
    LearningConvergenceWarning,
    MultimodalEvidenceWarning,
    Start,
    fit_hyperparameters,
)
from bayesrank.learning.bfgs import backtrack as _backtrack
from bayesrank.learning.config import Config
from bayesrank.learning.diagnostics import warn_multimodal as _warn_multimodal
from bayesrank.learning.evidence import fisher
from bayesrank.learning.initialize import subsample as _subsample
from bayesrank.parallel import prepare_batch

#: The slow BFGS runs left out of the float32 run.
BFGS_RUNS = (
    "slow (BFGS runs of many EP fits); float32 learning: the Fisher information that starts "
    "BFGS here, the evidence gradient in test_learning_touched.py"
)
#: ``K = w^2 RBF + s^2 I`` (w = 1.3, s = 0.4, 25 entities) has condition below
#: ``1 + 25 w^2 / s^2 = 260``: float32's ``K``, ``W`` and ``F`` are good to ~4 cond eps32.
FISHER_RTOL32 = 4 * 260 * float(np.finfo(np.float32).eps)


def problems(seed, n_queries=2, n=25, m=60):
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n_queries):
        X = rng.normal(size=(n, 3))
        utility = np.sin(2 * X[:, 0]) + X[:, 1] + 0.8 * rng.normal(size=n)  # an entity effect
        i = rng.integers(0, n, m)
        j = (i + rng.integers(1, n, m)) % n
        win = rng.uniform(size=m) < 1 / (1 + np.exp(-2 * (utility[i] - utility[j])))
        out.append(PreferenceProblem.create(np.where(win[:, None], np.c_[i, j], np.c_[j, i]), X=X))
    return out


def numpy_covariance(X, w, rho, s):
    """``K = w^2 exp(-rho^2 |x - x'|^2 / 2) + s^2 I`` (``2 sigma^2 = 1``)."""
    d2 = ((X[:, None] - X[None]) ** 2).sum(-1)
    return w**2 * np.exp(-0.5 * rho**2 * d2) + s**2 * np.eye(len(X))


@pytest.mark.float32
@pytest.mark.slow
def test_fisher_information_against_numpy():
    """``F_jk = 1/2 tr(W dK_j W dK_k)`` over queries, ``W = (K + S^-1)^-1``, log coordinates."""
    probs = problems(0)
    w, rho, s = 1.3, 0.8, 0.4
    prior = XPGP(RBF(1.0, rho), (), jnp.array([w]), entity=Independent(s))
    batch = stack_problems(probs)
    data = prepare_batch(prior, batch)
    K = jax.vmap(lambda X: prior.covariance(X))(data.X)
    post = jax.vmap(lambda K, p: ep.fit(K, p, tol=ep_tol(1e-10)))(K, data.pairs)

    # the learner's flattened parameters: w, rho, s (sigma and kappa are frozen)
    from bayesrank.kernels.params import unconstrain

    leaves, treedef = jax.tree_util.tree_flatten(unconstrain(prior))
    names = ["kappa", "rho", "weights", "sigma", "s"]  # the leaves' order, checked below
    assert len(leaves) == len(names)
    flags = tuple(name not in ("kappa", "sigma") for name in names)
    cfg = Config(treedef, flags, "evidence", "bfgs", 1, 100, "parallel", False)
    free = [x for x, f in zip(leaves, flags, strict=True) if f]
    fixed = [x for x, f in zip(leaves, flags, strict=True) if not f]
    got = fisher(free, fixed, (data,), (post,), cfg, per_query=False)

    # NumPy: unconstrained u = (log rho, log w, log s)
    u0 = np.array([np.log(rho), np.log(w), np.log(s)])

    def K_np(X, u):
        return numpy_covariance(X, np.exp(u[1]), np.exp(u[0]), np.exp(u[2]))

    want = np.zeros((3, 3))
    for b, p in enumerate(probs):
        X = np.asarray(p.X)
        h = 1e-6
        dK = [
            (K_np(X, u0 + h * e) - K_np(X, u0 - h * e)) / (2 * h) for e in np.eye(3)
        ]  # central differences
        tau = np.asarray(post.sites.tau[b])
        A = np.zeros((len(p.pairs), p.n))
        A[np.arange(len(p.pairs)), p.pairs[:, 0]] = 1
        A[np.arange(len(p.pairs)), p.pairs[:, 1]] = -1
        S = A.T @ np.diag(tau) @ A
        evals, evecs = np.linalg.eigh(S)
        R = evecs @ np.diag(np.sqrt(np.clip(evals, 0, None))) @ evecs.T  # S^1/2
        Kb = K_np(X, u0)
        W = R @ np.linalg.solve(np.eye(p.n) + R @ Kb @ R, R)
        for j in range(3):
            for k in range(3):
                want[j, k] += 0.5 * np.trace(W @ dK[j] @ W @ dK[k])
    # ``fisher`` returns float64 for the host's solve whatever it computed in: the tolerance
    # follows the computation's precision (the posterior's), not the cast
    assert_close(got, want, rtol=1e-6, atol=1e-9, rtol32=FISHER_RTOL32, dtype=post.mean.dtype)


@pytest.mark.slow
@float64_only(
    "the optimum is compared with Nelder-Mead's to 1e-6 in log Z and 1e-5 in the log "
    "hyperparameters: float32 rounds log Z (~70) by ~1e-5, so neither optimiser can place the "
    "optimum that finely"
)
def test_bfgs_reaches_the_optimum_of_an_independent_optimiser():
    """BFGS's fitted ``theta`` maximises the converged EP evidence: Nelder-Mead agrees."""
    probs = problems(1)
    start = XPGP(RBF(1.0, 1.0), (), jnp.ones(1), entity=Independent(0.3))
    fit = fit_hyperparameters(
        start,
        probs,
        method="evidence",
        optimizer=BFGS(max_steps=100, tol=1e-8),
        engine=EP(tol=1e-10, step_tol=1e-9),
        start=Start(init=False),
        hyperprior_scale=None,
    )
    trace = fit.trace
    assert len(trace.objective) < 100  # stopped by its rule, not the cap
    before, after = np.asarray(trace.objective_before), np.asarray(trace.objective)
    assert np.all(after >= before)  # the line search only accepts gains
    np.testing.assert_allclose(after, np.asarray(trace.log_evidence))  # no hyperprior

    Xs = [jnp.asarray(p.X) for p in probs]
    pairs = [jnp.asarray(p.pairs) for p in probs]
    evidence = jax.jit(lambda K, p: ep.fit(K, p, tol=1e-10, max_iter=500).log_evidence)

    def negative(u):  # u = log (w, rho, s)
        w, rho, s = np.exp(u[0]), np.exp(u[1]), np.exp(u[2])
        return -sum(
            float(evidence(jnp.asarray(numpy_covariance(np.asarray(X), w, rho, s)), p))
            for X, p in zip(Xs, pairs, strict=True)
        )

    got = fit.prior
    w, rho, s = float(got.weights[0]), float(got.attribute.rho), float(got.entity.scale)
    u_fit = np.log([w, rho, s])
    ref = optimize.minimize(
        negative,
        np.zeros(3) + np.log([1.0, 1.0, 0.3]),
        method="Nelder-Mead",
        options={"xatol": 1e-7, "fatol": 1e-10, "maxiter": 4000},
    )
    assert ref.success
    assert -negative(u_fit) == pytest.approx(-ref.fun, abs=1e-6)
    assert float(trace.objective[-1]) == pytest.approx(-ref.fun, abs=1e-6)
    np.testing.assert_allclose(u_fit, ref.x, atol=1e-5)


@pytest.mark.slow
@float32_not_run(BFGS_RUNS)
def test_bfgs_stops_early():
    """A loose ``tol`` stops sooner, a tight one later, both before the cap; size buckets
    against one padded batch: ``test_learning.py::test_size_buckets_give_the_unbucketed_fit``."""
    probs = problems(2, n=12) + problems(3, n=40)
    prior = XPGP(RBF(), (), entity=Independent(0.1))
    loose = fit_hyperparameters(prior, probs, optimizer=BFGS(max_steps=50, tol=1.0))
    tight = fit_hyperparameters(prior, probs, optimizer=BFGS(max_steps=50, tol=1e-6))
    assert len(loose.trace.objective) < len(tight.trace.objective) < 50
    assert float(tight.trace.objective[-1]) >= float(loose.trace.objective[-1])


@pytest.mark.slow
@float32_not_run(BFGS_RUNS)
def test_a_fit_that_hits_its_cap_warns_and_says_so():
    """``n_iter`` too small: ``converged`` is False and a LearningConvergenceWarning names the
    cap (per query: which queries); a fit given room converges without a warning."""
    probs = problems(2, n=12) + problems(3, n=40)
    prior = XPGP(RBF(), (), entity=Independent(0.1))
    with pytest.warns(LearningConvergenceWarning, match=r"BFGS\(max_steps=1\) "):
        short = fit_hyperparameters(prior, probs, optimizer=BFGS(max_steps=1, tol=1e-6))
    assert short.converged is False or not bool(np.all(short.converged))
    with pytest.warns(LearningConvergenceWarning, match=r"per-query fits \(indices \[0, 1"):
        each = fit_hyperparameters(
            prior, probs, optimizer=BFGS(max_steps=1, tol=1e-6), per_query=True
        )
    assert not np.any(each.converged)
    with warnings.catch_warnings():
        warnings.simplefilter("error", LearningConvergenceWarning)
        done = fit_hyperparameters(prior, probs, optimizer=BFGS(max_steps=50, tol=1e-6))
    assert bool(np.all(done.converged))


def test_restarts_that_end_at_distinct_optima_of_equal_evidence_are_reported():
    """Two starts ending 0.5 nats apart at log-values 2 apart: a warning naming the query; 3
    nats apart, or at the same values, none."""
    same = np.zeros((2, 3))
    moved = same.copy()
    moved[1, 2] = 2.0  # query 1's third value: a factor e^2 away
    with pytest.warns(MultimodalEvidenceWarning, match=r"queries \[1\]"):
        _warn_multimodal([(np.array([-10.0, -10.0]), same), (np.array([-11.0, -10.5]), moved)])
    with warnings.catch_warnings():
        warnings.simplefilter("error", MultimodalEvidenceWarning)
        _warn_multimodal([(np.array([-10.0, -10.0]), same), (np.array([-11.0, -13.0]), moved)])
        _warn_multimodal([(np.array([-10.0, -10.0]), same), (np.array([-10.0, -10.0]), same)])
        _warn_multimodal([(np.array(-10.0), same[:1])])


@pytest.mark.slow
@float32_not_run(BFGS_RUNS)
def test_per_query_bfgs_fits_match_single_fits():
    """Per-query BFGS fits stop at different iterations; each equals its query's own fit."""
    probs = problems(4, n=12, m=30)
    prior = XPGP(RBF(), (), entity=Independent(0.3))
    joint = fit_hyperparameters(prior, probs, method="evidence", per_query=True)
    assert_each_is_its_own_fit(joint, probs, prior)


def assert_each_is_its_own_fit(joint, probs, prior):
    """Query ``b`` of a per-query fit against ``probs[b]`` fitted alone: the same trace (a
    shorter one repeated to the joint length), hyperparameters, posterior mean and flag."""
    for b, p in enumerate(probs):
        single = fit_hyperparameters(prior, p, method="evidence")
        k = len(single.trace.objective)
        np.testing.assert_allclose(joint.trace.objective[b, :k], single.trace.objective, rtol=1e-7)
        np.testing.assert_allclose(joint.trace.objective[b, k:], single.trace.objective[-1])
        np.testing.assert_allclose(joint.prior.attribute.rho[b], single.prior.attribute.rho, 1e-6)
        np.testing.assert_allclose(
            joint.posteriors.mean[b, : p.n], single.posteriors.mean[0], atol=1e-6
        )
        assert bool(joint.converged[b]) == bool(single.converged)


@pytest.mark.slow
@float32_not_run(BFGS_RUNS)
def test_coarse_start_reaches_the_same_optimum_sooner():
    """``coarse``: a first fit on a subset of each query's entities starts the full fit; the
    hyperprior stays centred on the initial values, so both runs maximise the same objective
    (reference: the fit from the median-heuristic start)."""
    probs = problems(3, n_queries=1, n=80, m=240)
    prior = XPGP(RBF(), (), entity=Independent(0.2))
    cold = fit_hyperparameters(prior, probs, optimizer=BFGS(max_steps=50))
    warm = fit_hyperparameters(prior, probs, optimizer=BFGS(max_steps=50), start=Start(coarse=40))
    assert float(warm.trace.objective[0]) > float(cold.trace.objective[0]) + 1.0
    np.testing.assert_allclose(warm.trace.objective[-1], cold.trace.objective[-1], atol=2e-2)
    assert len(warm.trace.objective) < len(cold.trace.objective)
    subsets, origins = _subsample(probs, 40)
    for sub, (b, inside) in zip(subsets, origins, strict=True):  # each subset's pairs' origin
        np.testing.assert_array_equal(sub.X[sub.pairs], probs[b].X[probs[b].pairs[inside]])
        assert sub.n == 40 and len(inside) < len(probs[b].pairs)
    with pytest.raises(ValueError, match="coarse"):
        fit_hyperparameters(prior, probs, method="em", start=Start(coarse=40))
    with pytest.raises(ValueError, match="coarse"):
        Start(coarse=1)


@pytest.mark.slow
@float32_not_run(BFGS_RUNS)
def test_laplace_start_reaches_the_same_ep_optimum():
    """``laplace_start``: the Laplace evidence's optimum and sites start EP's evidence
    maximisation; the hyperprior stays centred on the initial values, so it ends at the EP fit's
    optimum (reference: the EP fit from the median-heuristic start), from a better first step."""
    probs = problems(3, n_queries=1, n=80, m=240)
    prior = XPGP(RBF(), (), entity=Independent(0.2))
    cold = fit_hyperparameters(prior, probs, optimizer=BFGS(max_steps=50))
    warm = fit_hyperparameters(
        prior, probs, optimizer=BFGS(max_steps=50), start=Start(laplace=True)
    )
    assert float(warm.trace.objective[0]) > float(cold.trace.objective[0]) + 1.0
    np.testing.assert_allclose(warm.trace.objective[-1], cold.trace.objective[-1], atol=2e-2)
    np.testing.assert_allclose(warm.prior.entity.scale, cold.prior.entity.scale, rtol=0.05)
    assert isinstance(warm.posteriors, ep.EPPosterior)
    with pytest.raises(ValueError, match=r"Start\(laplace=True\) needs"):
        fit_hyperparameters(prior, probs, method="em", start=Start(laplace=True))


@pytest.mark.slow
@float32_not_run(BFGS_RUNS)
def test_per_query_fits_of_different_sizes_run_by_size_group():
    """Queries of 12 and 40 entities: fitted per size group (two calls), returned in the
    problems' order, each as its own fit; padded entities keep their prior, shorter traces
    repeat their last entry."""
    from bayesrank.learning.layout import per_query_groups

    probs = [problems(6, n_queries=1, n=40, m=60)[0], *problems(7, n=12, m=30)]
    assert per_query_groups(probs, True, 64) == [[1, 2], [0]]
    assert per_query_groups(probs, False, 64) is None
    assert per_query_groups(probs, True, None) is None
    prior = XPGP(RBF(), (), entity=Independent(0.3))
    joint = fit_hyperparameters(prior, probs, method="evidence", per_query=True)
    assert joint.posteriors.mean.shape[1] >= 40
    assert_each_is_its_own_fit(joint, probs, prior)
    pad = np.asarray(joint.posteriors.cov[1])[12:, 12:]  # a 12-entity query's padding
    np.testing.assert_allclose(pad, np.eye(len(pad)))


def test_the_automatic_coarse_start_rule():
    """``coarse="auto"``: half the largest problem's touched entities from 500 on, for BFGS
    evidence maximisation of a shared theta; otherwise no coarse start."""
    from bayesrank.learning.initialize import COARSE_FROM
    from bayesrank.learning.initialize import auto_coarse as _auto_coarse

    def touching(k):  # a chain through the first k of k + 10 entities
        idx = np.arange(k)
        return PreferenceProblem.create(np.c_[idx[:-1], idx[1:]], X=np.zeros((k + 10, 1)))

    big, small = touching(COARSE_FROM + 1), touching(COARSE_FROM - 1)
    assert _auto_coarse("auto", [small, big], "evidence", None, False, False) == 250
    assert _auto_coarse("auto", [small], "evidence", None, False, False) is None
    assert _auto_coarse("auto", [big], "em", None, False, False) is None
    assert _auto_coarse("auto", [big], "evidence", "adam", False, False) is None
    assert _auto_coarse("auto", [big], "evidence", None, True, False) is None
    assert _auto_coarse("auto", [big], "evidence", None, False, True) is None
    assert _auto_coarse(40, [small], "evidence", None, False, False) == 40
    with pytest.raises(ValueError, match="coarse must be 'auto'"):
        _auto_coarse("half", [small], "evidence", None, False, False)


def test_backtracking_steps_to_the_quadratics_maximiser():
    """On an exact quadratic ``phi(t) = 1 + 2 t - 5 t^2`` (maximiser 0.2) a failed unit step is
    replaced by 0.2 in one trial; far overshoots and non-finite values stay in [0.1, 0.5]."""
    phi = lambda t: 1.0 + 2.0 * t - 5.0 * t**2  # noqa: E731
    assert _backtrack(1.0, phi(0.0), 2.0, phi(1.0)) == pytest.approx(0.2)
    assert _backtrack(0.5, phi(0.0), 2.0, phi(0.5)) == pytest.approx(0.2)
    assert _backtrack(1.0, 0.0, 1.0, -1e6) == pytest.approx(0.1)  # far below: 10x shorter
    assert _backtrack(1.0, 0.0, 1.0, 0.9) == pytest.approx(0.5)  # nearly linear: halve
    assert _backtrack(1.0, 0.0, 1.0, float("nan")) == 0.5


@pytest.mark.slow
def test_split_evidence_gradient_against_finite_differences_with_ties_and_grades():
    """``evidence.evaluate``: the prior's ``K`` and likelihood parameters, EP's evidence and its
    gradient in them (one program every prior shares), the chain rule back to ``theta``. Its
    gradient in every unconstrained leaf (RBF's, the tie margin's and the grade thresholds')
    equals central finite differences of its value, shared and per query; the per-query values
    at one ``theta`` sum to the shared value."""
    from bayesrank.kernels.params import unconstrain
    from bayesrank.learning.evidence import evaluate, evaluate_per_query, tolerances
    from bayesrank.learning.layout import bucket_sites

    rng = np.random.default_rng(7)
    probs = []
    for base in problems(3, n_queries=2, n=12, m=24):
        n = base.X.shape[0]
        probs.append(
            PreferenceProblem.create(
                base.pairs,
                X=base.X,
                ties=np.c_[np.arange(3), np.arange(3) + 4],
                graded=np.c_[np.arange(n), rng.integers(0, 3, n)],
            )
        )
    prior = XPGP(RBF(1.0, 0.8), margin=0.3, threshold=-0.2, threshold_gaps=jnp.array([0.9]))
    data = (prepare_batch(prior, stack_problems(probs)),)
    leaves, treedef = jax.tree_util.tree_flatten(unconstrain(prior))
    flags = (True,) * len(leaves)
    sites = bucket_sites(None, data, None, np.float64)
    tol = tolerances(1e-13, np.float64)
    free = [np.asarray(x, np.float64) for x in leaves]
    h = 1e-5

    shared = Config(treedef, flags, "evidence", "bfgs", 1, 2000, "parallel", False)
    value, grad, _ = evaluate(free, [], data, sites, tol, shared)
    flat = np.concatenate([np.ravel(g) for g in grad])
    fd = []
    for k, leaf in enumerate(free):
        for idx in np.ndindex(leaf.shape):
            step = [x.copy() for x in free]
            step[k][idx] += h
            up = evaluate(step, [], data, sites, tol, shared)[0]
            step[k][idx] -= 2 * h
            down = evaluate(step, [], data, sites, tol, shared)[0]
            fd.append((up - down) / (2 * h))
    assert len(fd) == flat.size >= 5  # RBF's kappa and rho, margin, threshold and its gap
    np.testing.assert_allclose(flat, fd, rtol=1e-6, atol=1e-7)

    per = shared._replace(single=True)
    stacked = [np.stack([x, x]) for x in free]
    values, grads, _ = evaluate_per_query(stacked, [], data, sites, tol, per)
    np.testing.assert_allclose(values.sum(), value, rtol=1e-10)
    for b in range(2):
        own = np.concatenate([np.ravel(g[b]) for g in grads])
        fd = []
        for k, leaf in enumerate(free):
            for idx in np.ndindex(leaf.shape):
                step = [x.copy() for x in stacked]
                step[k][(b, *idx)] += h
                up = evaluate_per_query(step, [], data, sites, tol, per)[0][b]
                step[k][(b, *idx)] -= 2 * h
                down = evaluate_per_query(step, [], data, sites, tol, per)[0][b]
                fd.append((up - down) / (2 * h))
        np.testing.assert_allclose(own, fd, rtol=1e-6, atol=1e-7)
