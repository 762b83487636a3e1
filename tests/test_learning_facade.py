"""``fit_hyperparameters``' grouped settings: ``optimizer`` (``BFGS``, ``Optax``), ``ep``
(``EP``, shared with ``ep.fit``) and ``start`` (``Start``).

The old keywords map onto the groups exactly: the same settings spelled both ways give
bit-identical fits (the reference is the old spelling, which ran the same code before the
groups existed). A group and an old keyword for it together, or an unknown keyword, are refused.
"""

import inspect
import warnings

import jax
import numpy as np
import optax
import pytest
from helpers import count_compilations

import bayesrank
from bayesrank import EP, RBF, XPGP, Independent, PreferenceProblem, XPGPModel
from bayesrank.inference import ep
from bayesrank.learning import (
    BFGS,
    GlobalStart,
    LearningConvergenceWarning,
    Optax,
    Start,
    fit_hyperparameters,
)


def _problem(seed=0, n=16, m=32):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 2))
    u = X[:, 0] + 0.3 * rng.normal(size=n)
    i = rng.integers(0, n, m)
    j = (i + rng.integers(1, n, m)) % n
    pairs = np.where((u[i] > u[j])[:, None], np.c_[i, j], np.c_[j, i])
    return PreferenceProblem.create(pairs, X=X)


PRIOR = XPGP(RBF(), (), entity=Independent(0.3))


def _fit_quietly(*args, **kwargs):
    """The fit and the deprecation messages it gave (a short fit's cap warning ignored)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fit = fit_hyperparameters(*args, **kwargs)
    notes = [str(w.message) for w in caught if issubclass(w.category, DeprecationWarning)]
    return fit, notes


def _assert_identical(a, b):
    for x, y in zip(
        jax.tree_util.tree_leaves(a.prior), jax.tree_util.tree_leaves(b.prior), strict=True
    ):
        np.testing.assert_array_equal(np.asarray(x), np.asarray(y))
    np.testing.assert_array_equal(a.trace.objective, b.trace.objective)
    np.testing.assert_array_equal(a.posteriors.mean, b.posteriors.mean)


@pytest.mark.slow
def test_old_and_new_spellings_give_identical_bfgs_fits():
    problem, key = _problem(), jax.random.key(3)
    old, notes = _fit_quietly(
        PRIOR,
        problem,
        n_iter=6,
        tol=1e-3,
        ep_max_iter=150,
        ep_step_tol=1e-5,
        schedule="parallel",
        restarts=1,
        design=GlobalStart(4, 2),
        key=key,
    )
    new, none = _fit_quietly(
        PRIOR,
        problem,
        optimizer=BFGS(max_steps=6, tol=1e-3),
        engine=EP(max_iter=150, step_tol=1e-5),
        start=Start(restarts=1, design=GlobalStart(4, 2)),
        key=key,
    )
    _assert_identical(old, new)
    assert none == []
    (note,) = notes  # one warning, naming every new spelling
    assert "ep_max_iter=150, ep_step_tol=1e-05" in note
    assert "-> engine=EP(max_iter=150, step_tol=1e-05)" in note
    assert "-> start=Start(design=GlobalStart(points=4, starts=2), restarts=1)" in note
    assert "n_iter=6, tol=0.001 -> optimizer=BFGS(max_steps=6, tol=0.001)" in note


@pytest.mark.slow
def test_old_and_new_spellings_give_identical_em_and_optax_fits():
    problem = _problem(1)
    old, notes = _fit_quietly(
        PRIOR, problem, method="em", optimizer="adam", n_iter=3, m_steps=4, learning_rate=0.1
    )
    new, _ = _fit_quietly(
        PRIOR,
        problem,
        method="em",
        optimizer=Optax("adam", steps=3, m_steps=4, learning_rate=0.1),
    )
    _assert_identical(old, new)
    assert (
        "optimizer='adam', n_iter=3, m_steps=4, learning_rate=0.1 -> optimizer=Optax(" in (notes[0])
    )
    # a user's transformation: the old n_iter next to it, or Optax's steps
    old, _ = _fit_quietly(PRIOR, problem, optimizer=optax.sgd(0.01), n_iter=3, init=False)
    new, _ = _fit_quietly(
        PRIOR, problem, optimizer=Optax(optax.sgd(0.01), steps=3), start=Start(init=False)
    )
    _assert_identical(old, new)


def test_defaults_are_the_old_defaults():
    """The groups' defaults are the old keywords' defaults (the fits above rely on it)."""
    assert (BFGS().max_steps, BFGS().tol) == (100, 1e-2)
    assert (Optax().steps, Optax().m_steps, Optax().learning_rate, Optax().tol) == (
        20,
        20,
        0.05,
        1e-2,
    )
    assert Optax().transformation == "lbfgs"  # EM's M-steps
    ep_ = EP()
    assert (ep_.max_iter, ep_.tol, ep_.step_tol, ep_.schedule) == (200, None, 1e-4, "parallel")
    start = Start()
    assert (start.init, start.design, start.coarse, start.laplace, start.restarts) == (
        True,
        "auto",
        "auto",
        False,
        0,
    )


def test_a_group_and_its_old_keyword_together_are_refused():
    problem = _problem()
    cases = [
        ({"ep_max_iter": 300, "engine": EP()}, ("ep_max_iter=300", "engine=EP()")),
        ({"schedule": "sequential", "engine": EP()}, ("schedule=", "engine=")),
        ({"n_iter": 5, "optimizer": BFGS()}, ("n_iter=5", "optimizer=BFGS()")),
        ({"m_steps": 5, "optimizer": Optax()}, ("m_steps=5", "optimizer=Optax()")),
        ({"restarts": 1, "start": Start()}, ("restarts=1", "start=Start()")),
        ({"design": None, "start": Start()}, ("design=None", "start=Start()")),
    ]
    for kwargs, names in cases:
        with pytest.raises(ValueError) as error:
            fit_hyperparameters(PRIOR, problem, **kwargs)
        for name in names:
            assert name in str(error.value)


def test_unknown_keywords_are_a_type_error():
    with pytest.raises(TypeError, match="unexpected keyword argument 'max_steps'"):
        fit_hyperparameters(PRIOR, _problem(), max_steps=5)


@pytest.mark.parametrize(
    ("make", "named"),
    [
        (lambda: EP(max_iter=-1), "max_iter must be .*, got -1"),
        (lambda: EP(max_iter=2.5), "max_iter must be .*, got 2.5"),
        (lambda: EP(tol=0.0), "tol must be .*, got 0.0"),
        (lambda: EP(step_tol=-1.0), "step_tol must be .*, got -1.0"),
        (lambda: EP(schedule="both"), "schedule must be .*, got 'both'"),
        (lambda: EP(damping=2.0), "damping must be .*, got 2.0"),
        (lambda: EP(precision="half"), "precision must be .*, got 'half'"),
        (lambda: EP(accelerate="yes"), "accelerate must be True or False, got 'yes'"),
        (lambda: BFGS(max_steps=0), "max_steps must be .*, got 0"),
        (lambda: BFGS(tol=-1.0), "tol must be .*, got -1.0"),
        (lambda: Optax(transformation="sgd"), "transformation must be .*, got 'sgd'"),
        (lambda: Optax(steps=0), "steps must be .*, got 0"),
        (lambda: Optax(m_steps=True), "m_steps must be .*, got True"),
        (lambda: Optax(learning_rate=float("inf")), "learning_rate must be .*, got inf"),
        (lambda: Start(init="yes"), "init must be True or False, got 'yes'"),
        (lambda: Start(restarts=-1), "restarts must be .*, got -1"),
        (lambda: Start(coarse=1), "coarse must be .*, got 1"),
        (lambda: Start(design=GlobalStart(2, 3)), r"design starts \(3\) must not exceed"),
        (lambda: Start(design="grid"), "design must be .*, got 'grid'"),
    ],
)
def test_each_group_checks_its_fields(make, named):
    with pytest.raises(ValueError, match=named):
        make()


def test_settings_that_do_not_fit_the_fit_are_named():
    problem = _problem()
    with pytest.raises(ValueError, match=r"engine\.damping=0\.5"):
        fit_hyperparameters(PRIOR, problem, engine=EP(damping=0.5))
    with pytest.raises(ValueError, match=r"engine\.max_iter must be .*, got 0"):
        fit_hyperparameters(PRIOR, problem, engine=EP(max_iter=0))
    with pytest.raises(ValueError, match="BFGS"):
        fit_hyperparameters(PRIOR, problem, method="em", optimizer=BFGS())
    with pytest.raises(ValueError, match="design"):
        fit_hyperparameters(PRIOR, problem, method="em", start=Start(design=8))
    with pytest.raises(ValueError, match="optimizer must be"):
        fit_hyperparameters(PRIOR, problem, optimizer="sgd")
    with pytest.raises(ValueError, match="n_iter=0: max_steps must be"):  # the old name too
        fit_hyperparameters(PRIOR, problem, n_iter=0)


def test_the_facade_fits_on_one_screen():
    params = inspect.signature(fit_hyperparameters).parameters.values()
    named = [p for p in params if p.kind is not inspect.Parameter.VAR_KEYWORD]
    assert len(named) <= 14
    doc = inspect.getdoc(fit_hyperparameters)
    for group in ("BFGS(", "Optax(", "EP", "Start("):
        assert group in doc


def test_the_groups_are_exported_and_hashable():
    for name in ("BFGS", "Optax", "Start"):
        assert name in bayesrank.__all__ and name in bayesrank.learning.__all__
        assert getattr(bayesrank, name) is getattr(bayesrank.learning, name)
    assert bayesrank.EP is ep.EP is bayesrank.inference.engines.EP
    with pytest.warns(DeprecationWarning, match="EPSettings moved to .*EP"):
        assert bayesrank.EPSettings is bayesrank.EP  # the old name, the same class
    for make in (
        lambda: EP(max_iter=50, tol=1e-8),
        lambda: BFGS(max_steps=5),
        lambda: Start(design=GlobalStart(8, 2), restarts=2),
        lambda: Optax("adam", steps=3),
    ):
        assert make() == make() and hash(make()) == hash(make())
    with pytest.raises(AttributeError):  # frozen
        BFGS().tol = 1.0


@pytest.mark.slow
def test_new_but_equal_settings_compile_nothing():
    problem = _problem(2)
    settings = dict(optimizer=BFGS(max_steps=3), engine=EP(max_iter=150))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", LearningConvergenceWarning)
        first = fit_hyperparameters(PRIOR, problem, start=Start(design=None), **settings)
        with count_compilations() as n:
            again = fit_hyperparameters(
                PRIOR,
                problem,
                optimizer=BFGS(max_steps=3, tol=1e-3),  # floats are traced
                engine=EP(max_iter=150, tol=1e-7, step_tol=1e-5),
                start=Start(design=None),
            )
    assert n[0] == 0
    assert np.all(np.isfinite(np.asarray(again.trace.objective)))
    assert first.design is None


@pytest.mark.slow
def test_ep_fit_takes_the_same_settings():
    problem = _problem(3)
    K = np.asarray(RBF(1.0, 0.7)(problem.X)) + 0.1 * np.eye(problem.n)
    by_keywords = ep.fit(K, problem.pairs, max_iter=50, tol=1e-8, schedule="sequential")
    settings = EP(max_iter=50, tol=1e-8, schedule="sequential")
    by_settings = ep.fit(K, problem.pairs, settings=settings)
    np.testing.assert_array_equal(by_settings.mean, by_keywords.mean)
    np.testing.assert_array_equal(by_settings.cov, by_keywords.cov)
    default = ep.fit(K, problem.pairs, settings=EP(step_tol=1e-2))  # not EP's own
    np.testing.assert_array_equal(default.mean, ep.fit(K, problem.pairs).mean)
    with pytest.raises(ValueError, match=r"max_iter=20 and settings=EP\(tol=1e-08\)"):
        ep.fit(K, problem.pairs, max_iter=20, settings=EP(tol=1e-8))
    with pytest.raises(ValueError, match="settings must be an EP"):
        ep.fit(K, problem.pairs, settings={"tol": 1e-8})


@pytest.mark.slow
def test_the_model_passes_the_groups_through():
    problem = _problem(4)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", LearningConvergenceWarning)
        post = XPGPModel(PRIOR, max_iter=150).fit(
            problem,
            learn_hyperparameters=True,
            optimizer=BFGS(max_steps=3),
            engine=EP(max_iter=150),
            start=Start(design=None),
        )
    assert len(post.learning.trace.objective) <= 3
    # the learning's final EP ran at the model's settings: its posterior is the model's
    np.testing.assert_array_equal(post.result.mean, post.learning.posteriors.mean[0])
    with pytest.raises(ValueError, match="unknown learning option"):
        XPGPModel(PRIOR).fit(problem, learn_hyperparameters=True, max_steps=3)
