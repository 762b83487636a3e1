"""The contract of the learning faces (issue 49): hyperprior specs and the optax path.

A hyperprior spec is taken exactly or refused, before anything is compiled, with a
``ValueError`` naming the key, the parameter and the value at fault; an optax transformation's
step that makes the hyperparameters or the objective non-finite is rejected (the last finite
point kept, the result flagged and warned), as BFGS rejects such trial points. Each property
decides what is valid by the test's own reading of the input (what a Gamma's parameters may be,
which hyperparameters the prior has), never by the library's checks. One tiny problem, few
shapes: each learning fit compiles.
"""

from __future__ import annotations

import functools
import math
import warnings

import jax
import numpy as np
import optax
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

import bayesrank.learning
from bayesrank import ARD, BFGS, RBF, XPGP, Optax, PreferenceProblem, SparseLaplace, XPGPModel
from bayesrank.learning import (
    LearningConvergenceWarning,
    NonFiniteStartError,
    NonFiniteStepWarning,
    bfgs,
    default_trainable,
    fit_hyperparameters,
)
from bayesrank.learning import fit as fit_module
from bayesrank.learning.hyperpriors import Gamma, SmoothedBox

FEW = settings(max_examples=40, deadline=None, database=None)
DTYPE = np.float64 if jax.config.jax_enable_x64 else np.float32

#: The documented range of every hyperprior parameter (``hyperpriors.BOUND``).
LIMIT = 1e150

#: Values a user may type for a parameter: one of each class.
PARAMETER_CLASSES = {
    "ordinary": [0.5, 2.4, 7, np.float32(1.5)],
    "negative": [-1.0, -3, -1e-300],
    "zero": [0, 0.0, -0.0],
    "nan": [math.nan],
    "inf": [math.inf, -math.inf],
    "str": ["a", "2.4"],
    "bool": [True, False],
    "huge": [1e200, 1e308, 2**600, 1e150],
    "tiny": [1e-200, 1e-149],
    "none": [None],
    "array": [np.array([1.0, 2.0])],
}
PARAMETERS = st.sampled_from([v for vs in PARAMETER_CLASSES.values() for v in vs])


def _real(v) -> bool:
    """The test's reading of a real number: an int or float (NumPy's too), not a bool."""
    return isinstance(v, int | float | np.integer | np.floating) and not isinstance(
        v, bool | np.bool_
    )


def _within(v, low) -> bool:
    return _real(v) and math.isfinite(float(v)) and low < float(v) < LIMIT


def _valid_gamma(concentration, rate, relative) -> bool:
    positive = all(_within(v, 1 / LIMIT) for v in (concentration, rate))
    return positive and isinstance(relative, bool)


def _valid_box(a, b, sigma) -> bool:
    ends = _within(a, -LIMIT) and _within(b, 0.0)
    return ends and float(a) < float(b) and _within(sigma, 1 / LIMIT)


@FEW
@given(
    kind=st.sampled_from(["Gamma", "SmoothedBox"]),
    values=st.tuples(PARAMETERS, PARAMETERS, PARAMETERS),
)
@example(kind="Gamma", values=("a", 1, False))  # issue 49: the check itself raised TypeError
@example(kind="Gamma", values=(2.0, math.inf, False))  # passed, blamed the EP evidence later
@example(kind="SmoothedBox", values=(0.1, math.inf, 0.01))  # likewise
@example(kind="SmoothedBox", values=(5.0, 1.0, 0.01))  # bounds in the wrong order
@example(kind="Gamma", values=(2.4, 1e-149, True))  # valid, at the edges
@example(kind="SmoothedBox", values=(-3, 1e-200, 2.4))
def test_hyperprior_parameters_are_checked_when_made(kind, values):
    """Every parameter (type, finite, sign, range, the box's order): a valid one is kept as
    the number given; an invalid one is a ValueError naming the distribution and the field."""
    if kind == "Gamma":
        names, make, valid = ("concentration", "rate", "relative"), Gamma, _valid_gamma(*values)
    else:
        names, make, valid = ("a", "b", "sigma"), SmoothedBox, _valid_box(*values)
    try:
        dist = make(*values)
    except ValueError as error:
        assert not valid, (kind, values, str(error))
        message = str(error)
        assert f"not a valid {kind}" in message, message
        assert any(name in message for name in names), message
        return
    assert valid, (kind, values)
    for name, v in zip(names, values, strict=True):
        assert getattr(dist, name) == v


PRIOR = XPGP(ARD(1.0, np.ones(2)))  # its hyperparameters: ARD.kappa, ARD.lengthscales,
TRAINED = ("ARD.lengthscales", "XPGP.weights")  # XPGP.weights, XPGP.sigma; these two trained
FIXED = ("ARD.kappa", "XPGP.sigma")  # frozen by default: a prior on them would do nothing
MISSPELT = ("ARD.lengthscale", "ard.lengthscales", "XPGP.weight", "RBF.rho", "ARD.rho")
MALFORMED = ("lengthscales", "ARD.lengthscales.x", 1, None, ("ARD", "lengthscales"))
KEYS = st.sampled_from(TRAINED + FIXED + MISSPELT + MALFORMED)
#: A Gamma's concentration below 1 (density unbounded at 0: no MAP), at 1 (bounded: taken).
UNBOUNDED, AT_ONE = Gamma(0.5, 1.0), Gamma(1.0, 1.0, relative=True)
VALUES = st.sampled_from(
    [Gamma(2.4, 2.7, relative=True), SmoothedBox(0.1, 7.0), None, (2.4, 2.7), 1.0, "Gamma",
     UNBOUNDED, AT_ONE, SmoothedBox(-1.0, 1e-3, 1e-100)]
)  # fmt: skip
SPECS = st.one_of(
    st.none(),
    st.sampled_from(["botorch", "BoTorch", "gpytorch", "", b"botorch", 3, ["botorch"]]),
    st.dictionaries(KEYS, VALUES, max_size=3),
)


class _Accepted(Exception):
    """Raised in place of the fit: every check passed (nothing compiled)."""


def _checked(**kwargs):
    """``fit_hyperparameters(PRIOR, problem, **kwargs)`` up to the fit itself, which raises
    ``_Accepted`` instead of running (no compilation)."""

    def accepted(*args, **kw):
        raise _Accepted

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(fit_module, "_dispatch", accepted)
        prior = kwargs.pop("prior", PRIOR)
        return fit_hyperparameters(prior, _problem(), **kwargs)


def _problem():
    rng = np.random.default_rng(0)
    pairs = np.array([(0, 1), (1, 2), (3, 2), (4, 5), (6, 7), (0, 7)])
    return PreferenceProblem.create(pairs, X=rng.random((8, 2)))


def _expected(spec):
    """The test's reading of a spec: ``(valid, what the message must name)``."""
    if spec is None:
        return True, None
    if isinstance(spec, str):
        return spec == "botorch", repr(spec)
    if not isinstance(spec, dict):
        return False, "hyperprior"
    for key, value in spec.items():
        if not isinstance(key, str) or key.count(".") != 1:
            return False, "Class.field"
        if value is None:
            continue
        if not isinstance(value, Gamma | SmoothedBox):
            return False, repr(key)
        if isinstance(value, Gamma) and value.concentration < 1:  # sup of the density: inf
            return False, repr(key)
    for key, value in spec.items():
        if value is not None and key not in TRAINED:
            return False, repr(key)
    return True, None


@FEW
@given(spec=SPECS)
@example(spec={"ARD.lengthscale": Gamma(2.4, 2.7)})  # issue 49: fitted as if no hyperprior
@example(spec={"ARD.kappa": Gamma(2.4, 2.7)})  # a fixed hyperparameter: silently ignored
@example(spec={"ARD.lengthscales": UNBOUNDED})  # issue 49: lengthscales fitted to ~1e-11
@example(spec={"XPGP.weights": AT_ONE, "ARD.lengthscales": SmoothedBox(-1.0, 1e-3, 1e-100)})
def test_hyperprior_specs_are_taken_or_refused_by_key(spec):
    """A spec is None, the name 'botorch', or a dict from 'Class.field' to a Gamma, a
    SmoothedBox or None whose keys with a distribution name the prior's trained positive
    hyperparameters. Anything else is a ValueError naming the key (and, for a key the prior
    lacks, listing the keys it takes), raised before anything is compiled."""
    valid, named = _expected(spec)
    try:
        _checked(hyperprior=spec)
    except _Accepted:
        assert valid, spec
        return
    except ValueError as error:
        assert not valid, (spec, str(error))
        message = str(error)
        assert named in message, (named, message)
        if isinstance(spec, dict) and "names no hyperparameter" in message:
            assert all(repr(k) in message for k in TRAINED), message
        return
    raise AssertionError(f"neither refused nor accepted: {spec!r}")


def test_a_misspelt_key_lists_the_keys_of_this_prior():
    """Issue 49, case 3: 'ARD.lengthscale' fitted exactly as with no hyperprior. An RBF prior
    takes other keys than an ARD one; by name ('botorch') the priors apply where they fit."""
    with pytest.raises(ValueError) as caught:
        _checked(hyperprior={"ARD.lengthscale": Gamma(2.4, 2.7)})
    message = str(caught.value)
    assert "'ARD.lengthscale'" in message and "'ARD.lengthscales', 'XPGP.weights'" in message
    with pytest.raises(ValueError, match=r"'RBF\.rho', 'XPGP\.weights'"):
        _checked(prior=XPGP(RBF()), hyperprior={"ARD.lengthscales": Gamma(1, 1)})
    with pytest.raises(ValueError, match=r"'ARD\.kappa'\] is held fixed"):
        _checked(hyperprior={"ARD.kappa": Gamma(2.4, 2.7)})
    with pytest.raises(_Accepted):
        _checked(prior=XPGP(RBF()), hyperprior="botorch")


#: Learning options of ``XPGPModel.fit`` (fit_hyperparameters' keywords), with careless values.
LEARNING_OPTIONS = ("hyperprior", "optimizer", "start", "ep", "trainable", "progress")
OPTION_VALUES = st.sampled_from(["bogus", "garbage", None, 0, True, {"ARD.lengthscales": 1}])


@FEW
@given(
    options=st.dictionaries(st.sampled_from(LEARNING_OPTIONS), OPTION_VALUES, min_size=1),
    learn=st.sampled_from([False, np.False_, True, np.True_, "evidence", "em"]),
    approximation=st.sampled_from(["dense", "sparse"]),
)
@example(
    options={"hyperprior": "bogus", "optimizer": "garbage"}, learn=False, approximation="dense"
)  # issue 49: a posterior, both options silently ignored
@example(options={"optimizer": "garbage"}, learn=False, approximation="sparse")
def test_learning_options_without_learning_are_refused(options, learn, approximation):
    """Issue 49: every learning option was silently ignored without learn_hyperparameters (on
    the sparse path too). Refused naming each option and the flag to pass; with the flag they
    reach fit_hyperparameters (dense) or, on the sparse path, a refusal naming the options that
    its learning (fit_sparse_hyperparameters) does not take, or of ``"em"``. Nothing
    compiles: every case is refused or stopped before a fit."""

    @functools.wraps(fit_hyperparameters)  # XPGPModel.fit reads its signature
    def accepted(*args, **kw):
        raise _Accepted

    engine = SparseLaplace() if approximation == "sparse" else None
    model = XPGPModel(XPGP(ARD(1.0, np.ones(2)), weights=np.ones(1)), engine)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(bayesrank.learning, "fit_hyperparameters", accepted)
        try:
            model.fit(_problem(), learn_hyperparameters=learn, **options)
        except _Accepted:
            assert learn and approximation == "dense", (options, learn, approximation)
            return
        except ValueError as error:
            message = str(error)
            if not learn:
                assert "learn_hyperparameters=True" in message, message
                assert all(repr(name) in message for name in options), message
            else:
                assert approximation == "sparse", message  # dense options, or "em", refused
                assert "unknown learning option" in message or "by its evidence" in message
            return
    raise AssertionError(f"neither refused nor learned: {options!r}, {learn!r}")


def test_a_gamma_of_concentration_below_one_is_refused_for_a_map_fit():
    """Issue 49: Gamma(0.5, 1) on the lengthscales fitted them to ~1e-11 with converged=True:
    its density ``v^(a - 1) e^(-b v)`` has no maximum as v -> 0 when a < 1, so neither has the
    MAP objective. Refused naming the key and the parameter; a = 1 (bounded) is taken."""
    with pytest.raises(ValueError) as caught:
        _checked(hyperprior={"ARD.lengthscales": Gamma(0.5, 1.0)})
    message = str(caught.value)
    assert "'ARD.lengthscales'" in message and "concentration 0.5" in message, message
    with pytest.raises(ValueError, match=r"'XPGP\.weights'.*concentration 0\.999"):
        _checked(hyperprior={"XPGP.weights": Gamma(0.999, 2.0, relative=True)})
    with pytest.raises(_Accepted):
        _checked(hyperprior={"ARD.lengthscales": Gamma(1.0, 1.0)})


@pytest.mark.parametrize("optimizer", [None, Optax(steps=2)], ids=["bfgs", "optax"])
def test_nothing_trainable_is_named(optimizer):
    """Every flag False: "need at least one array to concatenate" (BFGS) or a message about
    vmap's arguments (optax) before; now a ValueError naming trainable, nothing compiled."""
    prior = XPGP(ARD(1.0, np.ones(2)), weights=np.ones(1))
    frozen = jax.tree_util.tree_map(lambda _: False, default_trainable(prior))
    with pytest.raises(ValueError, match="trainable holds every hyperparameter fixed"):
        fit_hyperparameters(prior, _problem(), optimizer=optimizer, trainable=frozen)


def _evaluation(neg_log_evidence, gradient):
    return bfgs.Evaluation(
        np.array([neg_log_evidence]), np.array([gradient]), None, np.array([1]), np.array([True])
    )


def test_a_non_finite_start_names_the_term_at_fault():
    """Issue 49: with an infinite Gamma rate the start failed as "the EP evidence or its
    gradient ... is not finite (log evidence -4.48)": a finite number named not finite, the
    hyperprior not named. The message names the term that is not finite and shows both."""

    def run(evidence, log_prior):
        return bfgs.minimize(
            lambda x, sites: _evaluation(-evidence, [0.5, -0.25]),
            lambda x, e: np.eye(2)[None],
            lambda a, b, accepted: a,
            np.zeros((1, 2)),
            None,
            np.zeros((1, 2)),
            0.25,
            n_iter=3,
            tol=1e-2,
            log_prior=log_prior,
        )

    with pytest.raises(NonFiniteStartError) as caught:
        run(-4.48, lambda x: (np.array([-np.inf]), np.zeros_like(x)))
    message = str(caught.value)
    assert "hyperprior's log density is not finite" in message, message
    assert "EP evidence" not in message and "log evidence -4.48" in message, message
    assert caught.value.in_hyperprior
    with pytest.raises(NonFiniteStartError) as caught:
        run(math.nan, lambda x: (np.zeros(1), np.zeros_like(x)))
    message = str(caught.value)
    assert "the EP evidence is not finite" in message and "hyperprior's" not in message
    assert not caught.value.in_hyperprior


class _NotOptax:
    init = staticmethod(optax.sgd(0.1).init)
    update = staticmethod(optax.sgd(0.1).update)


NOT_TRANSFORMATIONS = {
    "an object": object(),
    "optax.sgd itself": optax.sgd,
    "a look-alike class": _NotOptax(),
    "a name": "sgd",
    "a tuple of functions": (optax.sgd(0.1).init, optax.sgd(0.1).update),
    "None fields": optax.GradientTransformation(None, None),
    "init of no params": optax.GradientTransformation(lambda: None, optax.sgd(0.1).update),
    "a scalar update": optax.GradientTransformation(lambda p: (), lambda u, s, p=None: (1.0, s)),
    "an update needing the objective": optax.lbfgs(),
}


@pytest.mark.parametrize("name", sorted(NOT_TRANSFORMATIONS))
def test_a_non_optax_object_is_refused_by_name(name):
    """Where an optax transformation is expected, anything that cannot step the parameters is a
    ValueError naming the optimizer, before anything is compiled (a TypeError from deep in
    optax before, for the last four)."""
    bad = NOT_TRANSFORMATIONS[name]
    for optimizer in (bad, "wrap"):
        with pytest.raises(ValueError, match=r"optimizer|transformation") as caught:
            if optimizer == "wrap":
                optimizer = Optax(bad, steps=2)
            fit_hyperparameters(PRIOR, _problem(), method="em", optimizer=optimizer)
        assert "optax" in str(caught.value), str(caught.value)


CAP_VALUES = st.sampled_from(
    [1, 3, 0, -1, 2**31 - 1, 2**31, 2.0, 2.5, True, None, "3", math.nan, math.inf, np.int64(2)]
)


def _count(v, high=2**31 - 1) -> bool:
    return isinstance(v, int | np.integer) and not isinstance(v, bool) and 1 <= v <= high


@FEW
@given(kind=st.sampled_from(["Optax", "BFGS"]), field=st.integers(0, 3), value=CAP_VALUES)
def test_step_caps_and_rates_are_taken_or_named(kind, field, value):
    """The optimisers' caps (``steps``, ``m_steps``, ``max_steps``: whole counts up to the loop
    counter's 2**31 - 1) and rates (``learning_rate``, ``tol``: finite and positive), checked
    when the settings are made, named with the value."""
    names = ("max_steps", "tol")
    if kind == "Optax":
        names = ("steps", "m_steps", "learning_rate", "tol")
    name = names[field % len(names)]
    if name in ("learning_rate", "tol"):
        valid = _real(value) and math.isfinite(value) and value > 0
    else:
        valid = _count(value)
    try:
        (Optax if kind == "Optax" else BFGS)(**{name: value})
    except ValueError as error:
        assert not valid, (kind, name, value, str(error))
        assert name in str(error), str(error)
        return
    assert valid, (kind, name, value)


def _fit(optimizer, method="evidence", problems=None, **kwargs):
    """The fit and its warnings."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        problems = _problem() if problems is None else problems
        result = fit_hyperparameters(PRIOR, problems, method=method, optimizer=optimizer, **kwargs)
    return result, [w for w in caught if issubclass(w.category, LearningConvergenceWarning)]


def _leaves(tree):
    return [np.asarray(x) for x in jax.tree_util.tree_leaves(tree)]


def _check_honest(result, warned, per_query=False):
    """The contract of a fit on the optax path: finite hyperparameters, evidence and
    posteriors; the last trace entry's params are the fitted ones; a rejected step is flagged
    (``nonfinite_step``, ``converged`` False) and warned with its own warning."""
    for leaf in _leaves(result.prior) + _leaves(result.posteriors.mean):
        assert np.all(np.isfinite(leaf))
    assert np.all(np.isfinite(np.asarray(result.posteriors.log_evidence)))
    assert np.all(np.isfinite(np.asarray(result.trace.objective)))
    rtol = 1e-12 if DTYPE == np.float64 else 1e-5  # the host's exp against the device's
    for fitted, traced in zip(_leaves(result.prior), _leaves(result.trace.params), strict=True):
        np.testing.assert_allclose(fitted, traced[:, -1] if per_query else traced[-1], rtol=rtol)
    flags = np.atleast_1d(result.nonfinite_step)
    assert not np.any(np.atleast_1d(result.converged) & flags)
    kinds = {w.category for w in warned}
    assert (NonFiniteStepWarning in kinds) == bool(flags.any()), [str(w.message) for w in warned]
    if flags.any():
        message = next(str(w.message) for w in warned if w.category is NonFiniteStepWarning)
        assert "non-finite step" in message and "learning rate" in message, message
    if not np.all(np.atleast_1d(result.converged) | flags):
        assert LearningConvergenceWarning in kinds


@pytest.mark.slow
@settings(max_examples=4, deadline=None, database=None)
@given(log_rate=st.floats(-6, 14), steps=st.integers(1, 3))
@example(log_rate=14.0, steps=1)  # the last step sent everything to NaN: seen only at the end
@example(log_rate=12.0, steps=3)
@example(log_rate=-6.0, steps=2)
def test_adam_at_any_learning_rate_is_finite_or_flagged(log_rate, steps):
    """Adam's step size is traced: every rate and cap here runs the same compiled programs.
    From 1e-6 to 1e14: finite hyperparameters and evidence, the rejected step flagged."""
    result, warned = _fit(Optax("adam", steps=steps, learning_rate=10.0**log_rate))
    _check_honest(result, warned)


@pytest.mark.slow
@pytest.mark.parametrize(
    "method, transformation",
    [("evidence", optax.sgd(1e12)), ("em", optax.scale(math.nan))],
    ids=["sgd-1e12-evidence", "nan-updates-em"],
)
def test_a_step_to_nan_is_rejected_and_flagged(method, transformation):
    """Issue 49, case 4: NaN hyperparameters and evidence, flagged only as "stopped at the
    optimizer's cap: raise it". Now the step is rejected, the start kept, the fit flagged."""
    result, warned = _fit(Optax(transformation, steps=3, m_steps=2), method=method)
    _check_honest(result, warned)
    assert result.nonfinite_step and not result.converged
    caps = [w for w in warned if w.category is LearningConvergenceWarning]
    assert not caps, [str(w.message) for w in caps]  # not "raise the cap"


@pytest.mark.slow
def test_per_query_fits_reject_only_their_own_steps():
    """Per query, in lockstep: the query whose step goes non-finite stops at its last finite
    point; the other goes on exactly as it would alone (same trace as a fit with no rejection).
    The transformation sends a query's values to NaN where its first lengthscale exceeds 1."""
    rng = np.random.default_rng(3)
    pairs = np.array([(0, 1), (1, 2), (3, 2), (4, 5), (6, 7), (0, 7)])
    small = PreferenceProblem.create(pairs, X=0.2 * rng.random((8, 2)))
    large = PreferenceProblem.create(pairs, X=20.0 * rng.random((8, 2)))
    sgd = optax.sgd(0.01)

    def update(grads, state, params=None):
        updates, state = sgd.update(grads, state, params)
        blow = params[0][0] > 0.0  # log lengthscale > 0: the large query's
        return jax.tree_util.tree_map(lambda u: jax.numpy.where(blow, np.nan, u), updates), state

    transformation = optax.GradientTransformation(sgd.init, update)
    result, warned = _fit(Optax(transformation, steps=3), problems=[small, large], per_query=True)
    _check_honest(result, warned, per_query=True)
    np.testing.assert_array_equal(result.nonfinite_step, [False, True])
    alone, _ = _fit(Optax(transformation, steps=3), problems=[small, small], per_query=True)
    np.testing.assert_allclose(
        np.asarray(result.trace.objective)[0], np.asarray(alone.trace.objective)[0], rtol=1e-12
    )
