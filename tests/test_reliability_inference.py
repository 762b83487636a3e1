"""Nothing silent in inference and learning (issue 19): EP converges across kernel scales by
default, float32 never returns NaN, a cap hit warns, and a bad hyperparameter or an impossible
start is a ``ValueError`` that names it.

References share no code with the library: the sequential schedule for the parallel one, the
symmetry of contradicting pairs, NumPy's median distance for the heuristic's start.
"""

import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from bayesrank import ARD, BFGS, RBF, XPGP, Optax, PreferenceProblem, Start, XPGPModel
from bayesrank.diagnostics import ConvergenceWarning
from bayesrank.inference import ep
from bayesrank.learning import fit_hyperparameters
from bayesrank.learning.diagnostics import LearningConvergenceWarning
from bayesrank.predict import predict_pairs

pytestmark = pytest.mark.float32  # dtype-aware: also run with x64 off in CI

SCALES = (1e-6, 1e-3, 1.0, 1e2, 1e4, 1e6, 1e8)
X64 = jax.config.jax_enable_x64
float64_only = pytest.mark.skipif(
    not X64, reason="a float64 promise (the float32 one is tested apart)"
)


def _problem(n, m, seed=0, noise=0.3):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 3))
    u = X[:, 0] + noise * rng.normal(size=n)
    pairs = rng.integers(0, n, (m, 2))
    pairs = pairs[pairs[:, 0] != pairs[:, 1]]
    pairs = np.where((u[pairs[:, 0]] > u[pairs[:, 1]])[:, None], pairs, pairs[:, ::-1])
    return X, pairs


def _rbf(X, scale):
    return scale * np.exp(-0.5 * ((X[:, None] - X[None]) ** 2).sum(-1))


def _finite(post):
    return all(np.all(np.isfinite(np.asarray(a))) for a in (post.mean, post.cov, post.log_evidence))


@float64_only
@pytest.mark.parametrize("n", [30, 100, 300])
@pytest.mark.slow
def test_ep_converges_by_default_across_kernel_scales(n):
    """Dense RBF and diagonal priors at scales 1e-6...1e8: converged, finite, and (at the large
    scales, where parallel EP is slowest) equal to the sequential schedule's fixed point."""
    X, pairs = _problem(n, 2 * n)
    for scale in SCALES:
        for K in (_rbf(X, scale), np.full(n, scale)):
            with warnings.catch_warnings():
                warnings.simplefilter("error", ConvergenceWarning)
                post = ep.fit(K, pairs)
            assert bool(post.converged), (n, scale, K.ndim, int(post.n_iter))
            assert _finite(post)
            if scale >= 1e4 and n <= 100:
                seq = ep.fit(K, pairs, schedule="sequential")
                sd = np.sqrt(scale)  # the marginals' scale; EP's threshold is 1e-6 of it
                np.testing.assert_allclose(post.mean, seq.mean, atol=1e-4 * sd)


@float64_only
@pytest.mark.parametrize("scale", [1e4, 1e8])
def test_parallel_ep_damps_a_slowly_decaying_oscillation(scale):
    """A noise-free problem (10 entities, 27 pairs, an RBF of lengthscale 0.3) at kernel scale
    1e4 or 1e8: undamped parallel sites alternate between two values while the largest change
    falls by about 1% a sweep. Halving the damping only on a growing change took 1,167 and
    1,069 sweeps (the sequential schedule 13); halving it on a change that does not shrink by
    0.9 converges in under 100, at the sequential schedule's fixed point."""
    rng = np.random.default_rng(2)
    X = rng.normal(size=(10, 2))
    u = X.sum(1)
    pairs = rng.integers(0, 10, (30, 2))
    pairs = pairs[pairs[:, 0] != pairs[:, 1]]
    pairs = np.where((u[pairs[:, 0]] > u[pairs[:, 1]])[:, None], pairs, pairs[:, ::-1])
    K = scale * np.exp(-5.0 * ((X[:, None] - X[None]) ** 2).sum(-1))
    post = ep.fit(K, pairs)
    seq = ep.fit(K, pairs, schedule="sequential")
    assert bool(post.converged) and int(post.n_iter) < 100, int(post.n_iter)
    np.testing.assert_allclose(post.mean, seq.mean, atol=1e-4 * np.sqrt(scale))


@pytest.mark.parametrize("n", [30, 300])
@pytest.mark.slow
def test_float32_ep_never_returns_nan(n):
    X, pairs = _problem(n, 2 * n, seed=1)
    for scale in SCALES:
        for K in (_rbf(X, scale), np.full(n, scale)):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", ConvergenceWarning)
                post = ep.fit(K.astype(np.float32), pairs)
            assert post.mean.dtype == np.float32
            assert _finite(post), (n, scale, K.ndim)


@pytest.mark.slow  # 3 s or more in the fast loop
def test_a_factorisation_that_fails_in_float32_is_refused_not_propagated():
    """50 copies of (0, 1) and 50 of (1, 0) at K = 1e6 I: ``B`` exceeds float32's range of
    condition numbers; EP keeps the last finite posterior. By symmetry the two means are equal
    and near 0 against their sd (~700)."""
    pairs = np.array([[0, 1]] * 50 + [[1, 0]] * 50)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        post = ep.fit(1e6 * np.eye(5, dtype=np.float32), pairs)
    assert _finite(post)
    mean, sd = np.asarray(post.mean), np.sqrt(np.diag(np.asarray(post.cov)))
    assert abs(mean[0] - mean[1]) < 1e-3 * sd[0]
    assert abs(mean[0]) < 0.01 * sd[0]
    np.testing.assert_allclose(mean[2:], 0.0, atol=1e-6)


@pytest.mark.slow  # 3 s or more in the fast loop
@float64_only
def test_mixed_precision_keeps_a_float64_sweep():
    """Even when the cap ends the float32 phase, at least one sweep runs in float64: the change
    it reports is a float64 sweep's (finite), not the hand-over's ``inf``."""
    X, pairs = _problem(60, 120)
    K = _rbf(X, 1e4)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        for max_iter in (1, 2, 5):
            post = ep.fit(K, pairs, precision="mixed", max_iter=max_iter)
            assert int(post.n_iter) <= max_iter
            assert np.isfinite(float(post.max_change)), max_iter
            assert post.mean.dtype == np.float64


@pytest.mark.slow  # 3 s or more in the fast loop
def test_the_default_threshold_is_relative_to_the_prior_sd_beyond_one():
    X, pairs = _problem(30, 60, seed=2)
    K = _rbf(X, 1e8)
    post = ep.fit(K, pairs)
    assert float(post.max_change) < 1e-6 * np.sqrt(1e8)
    # an absolute test at that scale is below float64's round-off: flagged and warned
    with pytest.warns(ConvergenceWarning, match="EP fit did not converge"):
        strict = ep.fit(K, pairs, rtol=0.0, max_iter=40)
    assert not bool(strict.converged)
    np.testing.assert_allclose(strict.mean, post.mean, rtol=1e-3)
    # at unit scale nothing changes: the absolute tolerance rules
    unit = ep.fit(_rbf(X, 1.0), pairs)
    assert float(unit.max_change) < 1e-6


@pytest.mark.slow
def test_hitting_the_cap_warns_in_every_facade():
    X, pairs = _problem(30, 60)
    problem = PreferenceProblem.create(pairs, X=X)
    with pytest.warns(ConvergenceWarning, match="EP fit did not converge"):
        assert not bool(ep.fit(_rbf(X, 1e4), pairs, max_iter=2).converged)
    with pytest.warns(ConvergenceWarning, match="EP fit did not converge"):
        XPGPModel(XPGP(RBF(100.0)), max_iter=2).fit(problem)
    with pytest.warns(ConvergenceWarning, match="LAPLACE fit did not converge"):
        XPGPModel(XPGP(RBF(100.0)), inference="laplace", max_iter=1).fit(problem)


@pytest.mark.parametrize(
    ("prior", "named"),
    [
        (XPGP(RBF(), sigma=0.0), "XPGP.sigma"),
        (XPGP(RBF(), sigma=-1.0), "XPGP.sigma"),
        (XPGP(RBF(float("nan"))), "RBF.kappa"),
        (XPGP(RBF(1.0, float("inf"))), "RBF.rho"),
        (XPGP(ARD(1.0, jnp.array([1.0, 0.0, 1.0]))), "ARD.lengthscales[1]"),
        (XPGP(RBF(), weights=jnp.array([-1.0])), "XPGP.weights[0]"),
    ],
)
def test_a_bad_hyperparameter_is_named(prior, named):
    X, pairs = _problem(20, 40)
    problem = PreferenceProblem.create(pairs, X=X)
    with pytest.raises(ValueError, match=named.replace("[", r"\[").replace("]", r"\]")):
        XPGPModel(prior).fit(problem)
    with pytest.raises(ValueError, match=named.replace("[", r"\[").replace("]", r"\]")):
        fit_hyperparameters(prior, problem, optimizer=BFGS(max_steps=2))


@pytest.mark.parametrize(
    ("kernel", "units"),
    [
        (ARD(1.0, jnp.ones(3)), np.array([1e-8, 1e-8, 1e-8])),
        (ARD(1.0, jnp.ones(3)), np.array([1.0, 1e-7, 1.0])),  # one feature in other units
        (RBF(), np.array([1e8, 1e8, 1e8])),
    ],
)
@pytest.mark.parametrize("method", ["evidence", "em"])
@pytest.mark.slow
def test_learning_does_not_depend_on_the_features_units(kernel, units, method):
    """Features in units of 1e8 or 1e-8 (or one ARD feature in units of 1e-7) fit as in units
    of 1: the same predictions, lengthscales in the new units. Before, a ``Positive(1e-6)``
    floor on ``rho`` and on ARD lengthscales, in feature units, refused them (and before that,
    EM returned NaN hyperparameters)."""
    X, pairs = _problem(20, 40)
    test = np.array([[i, j] for i in range(20) for j in range(i)])
    fits = []
    for scale in (np.ones(3), units):
        problem = PreferenceProblem.create(pairs, X=X * scale)
        with warnings.catch_warnings():  # two runs of 5 iterations compared, converged or not
            warnings.simplefilter("ignore", LearningConvergenceWarning)
            optimizer = Optax(steps=5) if method == "em" else BFGS(max_steps=5)
            fit = fit_hyperparameters(XPGP(kernel), problem, method=method, optimizer=optimizer)
        mean, cov = np.asarray(fit.posteriors.mean[0]), np.asarray(fit.posteriors.cov[0])
        fits.append((fit.prior.attribute, np.asarray(predict_pairs(mean, cov, test).prob)))
    (plain, p_plain), (scaled, p_scaled) = fits
    # float32: EP stops at changes of 1e-3 (its float32 tolerance), and the scaled distances
    # round differently; five optimiser steps carry both into the hyperparameters
    tol = 1e-8 if X64 else 5e-2
    np.testing.assert_allclose(p_scaled, p_plain, rtol=tol, atol=1e-10 if X64 else 1e-2)
    if isinstance(kernel, RBF):  # rho is an inverse lengthscale
        np.testing.assert_allclose(scaled.rho * units[0], plain.rho, rtol=tol)
    else:
        np.testing.assert_allclose(scaled.lengthscales / units, plain.lengthscales, rtol=tol)


@pytest.mark.slow
def test_the_default_hyperprior_stops_lengthscale_collapse_on_separable_data():
    """Noise-free preferences of a utility unrelated to ``X``: without a hyperprior the
    lengthscale collapses (to 0.004-0.05 here); with the default (``hyperprior_scale=2``, a
    normal on the log lengthscale around the median heuristic) it stays within 3 prior sds."""
    for seed in range(2):
        rng = np.random.default_rng(seed)
        X = rng.normal(size=(40, 3))
        u = rng.normal(size=40)
        pairs = rng.integers(0, 40, (120, 2))
        pairs = pairs[pairs[:, 0] != pairs[:, 1]]
        pairs = np.where((u[pairs[:, 0]] > u[pairs[:, 1]])[:, None], pairs, pairs[:, ::-1])
        problem = PreferenceProblem.create(pairs, X=X)
        distances = np.sqrt(((X[:, None] - X[None]) ** 2).sum(-1))[np.triu_indices(40, 1)]
        start = np.median(distances)  # the heuristic's lengthscale, 1 / rho
        fit = fit_hyperparameters(XPGP(RBF()), problem)
        free = fit_hyperparameters(XPGP(RBF()), problem, hyperprior_scale=None)
        lengthscale = 1.0 / float(fit.prior.attribute.rho)
        assert abs(np.log(lengthscale / start)) < 3 * 2.0
        assert 1.0 / float(free.prior.attribute.rho) < lengthscale


@pytest.mark.parametrize(
    ("option", "value"),
    [("max_iter", -1), ("max_iter", 2.5), ("tol", 0.0), ("tol", float("nan")), ("rtol", -1.0)],
)
def test_ep_options_are_checked(option, value):
    X, pairs = _problem(10, 20)
    with pytest.raises(ValueError, match=option):
        ep.fit(_rbf(X, 1.0), pairs, **{option: value})


def test_a_laplacian_spectrum_scales_with_the_weights_to_the_ends_of_float64():
    """``eig(L(s W)) = s eig(L(W))``: before, weights beyond ~1e154 overflowed inside ``eigh``
    and gave a zero kernel with no error."""
    from bayesrank.kernels.graph import laplacian_spectrum

    rng = np.random.default_rng(0)
    W = np.triu((rng.random((9, 9)) < 0.4) * rng.random((9, 9)), 1)
    W = W + W.T
    L = np.diag(W.sum(1)) - W
    reference = np.linalg.eigvalsh(L)  # NumPy, at unit scale
    rtol = 1e-10 if X64 else 1e-5
    for s in (1e-200, 1e-100, 1e-30, 1e30, 1e100, 1e200, 1e300):
        spectrum = laplacian_spectrum(W * s)
        evals = np.sort(np.asarray(spectrum.evals, np.float64))
        assert np.all(np.isfinite(evals))
        finfo = np.finfo(spectrum.evals.dtype)
        if s * reference.max() < finfo.max and s * reference[1] > finfo.tiny:
            np.testing.assert_allclose(evals / s, reference, rtol=rtol, atol=rtol * reference.max())
        elif s > 1:  # beyond float32's range: its largest number, and the null space kept
            assert evals[0] == 0 and evals[-1] == finfo.max


def test_an_adjacency_whose_degrees_overflow_is_named():
    W = np.zeros((3, 3))
    W[0, 1] = W[1, 0] = W[0, 2] = W[2, 0] = 1e308
    with pytest.raises(ValueError, match=r"relations\[0\]'s row 0 sums to inf"):
        PreferenceProblem.create([[0, 1]], relations=[W])
    # weights of 1e308 whose degrees stay finite are kept as given (no overflow in symmetrising)
    W[0, 2] = W[2, 0] = 0.0
    problem = PreferenceProblem.create([[0, 1]], relations=[W])
    assert problem.relations[0][0, 1] == 1e308


@pytest.mark.slow
def test_nuts_says_when_its_chains_have_not_mixed():
    K = np.eye(4) + 0.5
    pairs = np.array([[0, 1], [1, 2], [2, 3], [0, 3]])
    import jax

    from bayesrank.inference import nuts

    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        good = nuts.sample(jax.random.PRNGKey(0), K, pairs, num_warmup=300, num_samples=300)
    assert good.diagnostics.converged and good.diagnostics.problems() == ""
    with pytest.warns(ConvergenceWarning, match="NUTS run did not converge: .*R-hat"):
        short = nuts.sample(
            jax.random.PRNGKey(1), K, pairs, num_warmup=2, num_samples=4, num_chains=2
        )
    assert not short.diagnostics.converged
    r_hat = short.diagnostics.r_hat
    assert np.max(r_hat) > 1.05 or not np.all(np.isfinite(r_hat))


def _small_problem(n=12, m=24, **extra):
    X, pairs = _problem(n, m)
    return PreferenceProblem.create(pairs, X=X, **extra), X, pairs


@pytest.mark.slow  # 3 s or more in the fast loop
@pytest.mark.parametrize("inference", ["ep", "laplace"])
def test_an_entity_only_prior_needs_no_attributes(inference):
    """Before: ``AttributeError`` on ``X.shape``. Reference: with ``K = s^2 I`` the model is
    :func:`ep.fit` on the diagonal ``s^2 / (2 sigma^2)``."""
    from bayesrank import Independent

    problem = PreferenceProblem.create([[0, 1], [1, 2], [0, 2]], n=4)
    post = XPGPModel(XPGP(None, entity=Independent(1.5)), inference=inference).fit(problem)
    if inference == "ep":
        reference = ep.fit(np.full(4, 1.5**2 / (2 * 0.5)), problem.pairs)
        tol = 1e-5 if X64 else 2e-3  # EP stops at 1e-6 (float64) or 1e-3 (float32)
        np.testing.assert_allclose(post.mean, reference.mean, rtol=tol, atol=tol)
    assert np.asarray(post.mean)[3] == pytest.approx(0.0, abs=1e-6)  # untouched entity


@pytest.mark.slow
def test_restarts_work_on_one_problem_and_through_the_model():
    from bayesrank import Independent

    problem, _, _ = _small_problem()
    prior = XPGP(RBF(), entity=Independent())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        one = fit_hyperparameters(prior, problem, start=Start(restarts=2), key=jax.random.key(0))
        none = fit_hyperparameters(prior, problem)
        post = XPGPModel(prior).fit(
            problem, learn_hyperparameters=True, start=Start(restarts=2), key=jax.random.key(0)
        )
    # the best of three starts (one of them the default start) is at least as good
    assert float(one.trace.objective[-1]) >= float(none.trace.objective[-1]) - 1e-6
    assert post.learning is not None


@pytest.mark.slow
def test_default_trainable_of_a_prior_without_weights_is_taken():
    from bayesrank import Independent
    from bayesrank.kernels.xpgp import default_trainable

    problem, _, _ = _small_problem()
    prior = XPGP(RBF(), entity=Independent())
    a = fit_hyperparameters(prior, problem, trainable=default_trainable(prior))
    b = fit_hyperparameters(prior, problem)
    np.testing.assert_allclose(a.prior.attribute.rho, b.prior.attribute.rho, rtol=1e-6)


def _raises(match, call):
    with pytest.raises(ValueError, match=match):
        call()


def test_bad_structure_flags_and_arrays_are_named():
    from bayesrank import Fixed, Independent, RegularizedLaplacian

    problem, X, pairs = _small_problem()
    K = _rbf(X, 1.0)
    model = XPGPModel(XPGP(RBF()))
    fit = model.fit(problem)
    path = np.array([[0, 1, 0], [1, 0, 1], [0, 1, 0.0]])
    cases = [
        (
            "Fixed kernel's matrix M: M is not positive semi-definite",
            lambda: XPGPModel(XPGP(None, (Fixed(),))).fit(
                PreferenceProblem.create([[0, 1]], relations=[path])
            ),
        ),
        ("prior.attribute must be a kernel", lambda: XPGPModel(XPGP("rbf")).fit(problem)),
        (
            "prior.relations must be a tuple",
            lambda: XPGPModel(XPGP(RBF(), RegularizedLaplacian())).fit(problem),
        ),
        ("RBF.rho is None", lambda: XPGPModel(XPGP(RBF(rho=None))).fit(problem)),
        (
            "prior.entity must be Independent",
            lambda: XPGPModel(XPGP(RBF(), entity=RBF())).fit(problem),
        ),
        (
            "ARD.lengthscales has 5 entries but X has 3",
            lambda: XPGPModel(XPGP(ARD(1.0, jnp.ones(5)))).fit(problem),
        ),
        ("adapt_damping must be True or False", lambda: ep.fit(K, pairs, adapt_damping="no")),
        (
            "per_query must be True or False",
            lambda: fit_hyperparameters(XPGP(RBF()), problem, per_query="yes"),
        ),
        (
            "key must be a JAX PRNG key",
            lambda: fit_hyperparameters(XPGP(RBF()), problem, start=Start(restarts=1), key=0),
        ),
        (
            r"sites.tau\[0\] = nan is not finite",
            lambda: ep.fit(K, pairs, sites=(np.full(len(pairs), np.nan), np.zeros(len(pairs)))),
        ),
        (
            r"sites.tau\[0\] = -1.0 is negative",
            lambda: model.fit(problem, sites=(-np.ones(len(pairs)), np.zeros(len(pairs)))),
        ),
        (r"X_new\[0, 0\] = nan is not finite", lambda: fit.predict_new(np.full((2, 3), np.nan))),
        ("X_new must be a real numeric array", lambda: fit.predict_new(np.zeros((1, 3)) + 1j)),
        ("unknown learning option", lambda: model.fit(problem, learn_hyperparameters=True, foo=1)),
        (
            "relations must be a list",
            lambda: PreferenceProblem.create(pairs, X=X, relations=np.eye(12)),
        ),
        (
            "an entity-only prior needs the number of entities",
            lambda: XPGP(None, entity=Independent()).covariance(None),
        ),
    ]
    for match, call in cases:
        _raises(match, call)


def test_inputs_beyond_the_working_dtype_are_named():
    """float32 (x64 off): a float64 input that overflows it is refused before the cast; a
    ``sigma`` outside ``sigma_range`` by name; a prior whose scales overflow ``K`` is named at
    ``K``'s first non-finite entry (in float64 all are fine)."""
    problem, X, pairs = _small_problem()
    if X64:
        assert np.all(np.isfinite(ep.fit(np.eye(12) * 1e200, pairs).mean))
        return
    _raises(r"K\[0, 0\] = 1e\+200 overflows float32", lambda: ep.fit(np.eye(12) * 1e200, pairs))
    _raises(
        r"X\[0, 0\] = .* overflows float32",
        lambda: XPGPModel(XPGP(RBF())).fit(PreferenceProblem.create(pairs, X=X * 1e300)),
    )
    # sigma = 1e-30 squares below float32's range: named by its own check (sigma_range) ...
    _raises(
        r"XPGP\.sigma = 1e-30 is outside \[1\.1e-19, 6\.5e\+18\]",
        lambda: XPGPModel(XPGP(RBF(), sigma=1e-30)).fit(problem),
    )
    # ... and scales each within range whose product overflows K are named at K
    _raises(
        r"prior covariance K\[0, 0\] = inf",
        lambda: XPGPModel(XPGP(RBF(kappa=1e10), sigma=1e-15)).fit(problem),
    )
    # features in 1e-30 units: the median heuristic's rho (~1e30) squares beyond float32
    _raises(
        r"The start was XPGP\(attribute=RBF\(.*rho=.*standardise X",
        lambda: fit_hyperparameters(XPGP(RBF()), PreferenceProblem.create(pairs, X=X * 1e-30)),
    )


def test_keys_paths_and_problems_are_checked_before_jax_sees_them():
    from bayesrank.data.letor import load_letor
    from bayesrank.data.pairs import split_pairs
    from bayesrank.inference import nuts

    pairs = [[0, 1], [1, 2]]
    for bad in (None, 3, b"/x"):
        _raises("path must be a str or os.PathLike", lambda bad=bad: load_letor(bad))
    _raises("key must be a JAX PRNG key", lambda: split_pairs(0, pairs, 1))
    _raises("key must be a JAX PRNG key", lambda: nuts.sample("abc", np.eye(3), pairs))
    _raises(
        "problem must be a PreferenceProblem",
        lambda: nuts.sample_problem(jax.random.key(0), XPGP(RBF()), (pairs, np.eye(3))),
    )
    # both kinds of key are taken, and give the same split
    a = split_pairs(jax.random.PRNGKey(0), pairs, 1)
    b = split_pairs(jax.random.key(0), pairs, 1)
    np.testing.assert_array_equal(a[0], b[0])
    # relations as a generator are taken once
    W = np.ones((3, 3)) - np.eye(3)
    problem = PreferenceProblem.create(pairs, relations=(w for w in [W]))
    np.testing.assert_array_equal(problem.relations[0], W)
