"""The engine protocol: an inference engine is a small frozen object that carries its own settings.

Every caller above (``XPGPModel``, ``fit_hyperparameters``, ``parallel.fit_predict``, the active
loops, the designs loop, ``io``) is written once against these classes, as NumPyro's
``MCMC(NUTS(model))`` is against its kernels:

- ``Engine``: what every engine offers: ``fit_problem(prior, problem, sites=None, key=None)``,
  the posterior of one ``PreferenceProblem`` (a ``bayesrank.inference.posterior`` face), and
  its ``name`` (the string shorthand, resolved by ``bayesrank.inference.engines.resolve``);
- ``GaussianEngine``: an engine whose posterior is ``N(mean, cov)`` with Gaussian sites on the
  rows (``Sites``: a rank-one precision ``tau`` along ``e_i - e_j`` and its ``nu``), so that
  ``q(xi) prop. N(xi | 0, K) prod_s exp(-tau_s d_s^2 / 2 + nu_s d_s)``, ``d_s = xi_i - xi_j``.
  It adds the pure ``fit(K, rows, *, pair_mask, sites, outcomes)`` (jit, vmap and grad: the
  evidence is differentiable in ``K``), which every compiled program (a collection, a learning
  step, an active loop, a designs loop) calls, and ``default_tol(dtype)``. Prediction at new
  entities, batched collections and evidence-based learning follow from the sites alone.

The built-in engines are ``EP`` (``inference.ep.settings``), ``Laplace``
(``inference.laplace``), ``NUTS`` and ``SparseLaplace`` (``inference.engines``). A new engine is
a frozen dataclass subclassing ``GaussianEngine`` (or ``Engine``) that implements ``fit``
(``fit_problem``): nothing else changes.

Each engine is a JAX pytree: the fields named in ``traced`` (numbers such as iteration caps and
tolerances) are its leaves, so that changing them compiles nothing; every other field is static
(part of the compiled program's key). ``with_defaults(dtype)`` fills the defaults that depend on
the dtype and makes the traced fields host arrays of fixed types, as the façades pass them.
"""

from __future__ import annotations

import abc
import dataclasses
from typing import ClassVar, NamedTuple

import jax
import numpy as np

from ..data.checks import check_float, check_int
from ..runtime import is_traced
from .posterior import GaussianPosterior

__all__ = [
    "MAX_ITER_LIMIT",
    "Engine",
    "GaussianEngine",
    "GaussianFit",
    "check_engine_settings",
    "fit_fields",
]

#: The most iterations an engine may be asked for: the loops' counters are int32.
MAX_ITER_LIMIT = 2**31 - 1


class _GaussianFitFields(NamedTuple):
    mean: jax.Array
    cov: jax.Array
    log_evidence: jax.Array
    sites: tuple
    n_iter: jax.Array
    converged: jax.Array
    max_change: jax.Array


def fit_fields(name: str, **extra) -> type:
    """A ``NamedTuple`` type with ``GaussianFit``'s fields first and ``extra`` (field: type)
    after: the fields of an engine's own posterior type (``EPPosterior``, ``LaplacePosterior``)."""
    return NamedTuple(name, [*_GaussianFitFields.__annotations__.items(), *extra.items()])


class GaussianFit(_GaussianFitFields, GaussianPosterior):
    """What a ``GaussianEngine.fit`` gives at least (``EPPosterior`` and ``LaplacePosterior`` have
    these fields first, and more diagnostics after): ``mean: (n,)``, ``cov: (n, n)``,
    ``log_evidence`` (the engine's approximation of ``log p(data | K)``), ``sites``
    (``Sites``, ``(m,)`` each), ``n_iter``, ``converged``, ``max_change``. Predicts through
    ``GaussianPosterior`` (Eq. 13-14)."""

    __slots__ = ()


def _flatten(engine):
    cls = type(engine)
    leaves = tuple(getattr(engine, name) for name in cls.traced)
    static = tuple(
        (f.name, getattr(engine, f.name))
        for f in dataclasses.fields(engine)
        if f.name not in cls.traced
    )
    return leaves, static


def _unflatten(cls, static, leaves):
    engine = object.__new__(cls)  # no __init__: the leaves may be tracers or placeholders
    for name, value in zip(cls.traced, leaves, strict=True):
        object.__setattr__(engine, name, value)
    for name, value in static:
        object.__setattr__(engine, name, value)
    return engine


class Engine(abc.ABC):
    """The base of every inference engine (module docstring). Subclasses are frozen dataclasses.

    Class attributes: ``name`` (the string shorthand, ``""`` for an engine without one),
    ``traced`` (the fields that are pytree leaves), ``advice`` (what a ``ConvergenceWarning``
    advises). What its posterior offers is stated by the posterior's type
    (``bayesrank.inference.posterior``: ``PosteriorFace``, ``DensePosterior``, ``WithEvidence``).
    """

    name: ClassVar[str] = ""
    traced: ClassVar[tuple[str, ...]] = ()
    advice: ClassVar[str] = "raise max_iter"

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        jax.tree_util.register_pytree_node(
            cls, _flatten, lambda static, leaves: _unflatten(cls, static, leaves)
        )

    @abc.abstractmethod
    def fit_problem(self, prior, problem, sites=None, *, key=None):
        """The posterior of ``problem`` (a ``PreferenceProblem``) under the ``XPGP`` ``prior``;
        ``sites``: a warm start, ``key``: a PRNG key where the engine draws."""

    def describe(self) -> str:
        """What a message calls this engine: its name, or its class."""
        return self.name or type(self).__name__

    def learning_engine(self) -> GaussianEngine:
        """The engine that hyperparameter learning runs where a model has this one (learning
        needs an evidence and sets its own tolerances): ``EP()`` unless a subclass says."""
        from .ep.settings import EP  # the default engine, built on this module

        return EP()

    def large(self, n: int | None, rank: int) -> Engine:
        """This engine's sparse form at ``rank``: what ``XPGPModel(approximation="auto")`` runs on
        ``n`` entities beyond ``AUTO_DENSE_UP_TO`` (``n`` None: the old
        ``approximation="sparse"``). ``ValueError`` unless a subclass has one."""
        where = "approximation='sparse'" if n is None else f"approximation='auto' at {n} entities"
        raise ValueError(
            f"{where}: {self!r} has no sparse form (EP in precision form is not built): use "
            "Laplace() (whose sparse form is SparseLaplace; it works with inference='laplace' "
            "only) or approximation='dense'"
        )


class GaussianEngine(Engine):
    """An engine whose posterior is Gaussian with sites on the rows (module docstring).

    Subclasses implement ``fit``; ``fit_problem`` pads the problem to size buckets and calls
    ``fit`` inside one cached compiled program (``bayesrank.inference.problem``).
    """

    @abc.abstractmethod
    def fit(self, K, rows, *, pair_mask=None, sites=None, outcomes=None) -> GaussianFit:
        """The posterior of ``xi ~ N(0, K)``, ``K: (n, n)``, given ``rows: (m, 2)`` (row
        ``(i, j)``: i beat j; ``pair_mask: (m,)`` False for padding; ``outcomes``: the rows'
        interval likelihoods, ``bayesrank.likelihoods.Outcomes``, None for probit pairs;
        ``sites``: a warm start). Pure: called inside ``jit`` and ``vmap``, with this engine's
        traced fields possibly tracers. Returns a ``GaussianFit`` (or a type with its fields)."""

    def default_tol(self, dtype) -> float:
        """The tolerance ``tol=None`` means in ``dtype`` (engines without one: ignored)."""
        return 1e-6 if np.finfo(dtype).bits == 64 else 1e-3

    def with_defaults(self, dtype) -> GaussianEngine:
        """This engine with ``tol=None`` made ``default_tol(dtype)`` and every traced field a
        host array (int32 for integers, ``dtype`` for the rest and for an integer beyond
        int32: ``tol=2**70`` is a tolerance, and a count that large was refused where it was
        set), so that every call of a compiled program traces the same types."""
        values = {}
        for name in self.traced:
            value = getattr(self, name)
            if name == "tol" and value is None:
                value = self.default_tol(dtype)
            if value is None or is_traced(value):
                values[name] = value
            elif isinstance(value, bool | np.bool_):
                values[name] = np.asarray(value)
            elif isinstance(value, int | np.integer) and abs(int(value)) <= MAX_ITER_LIMIT:
                values[name] = np.asarray(value, np.int32)
            else:
                values[name] = np.asarray(value, dtype)
        return _replace_unchecked(self, values)

    def learning_engine(self) -> GaussianEngine:
        """This engine itself: learning maximises its evidence."""
        return self

    def fit_problem(self, prior, problem, sites=None, *, key=None):
        from .problem import fit_problem  # the padded, compiled call (a layer this one serves)

        del key  # a Gaussian engine draws nothing
        return fit_problem(prior, problem, sites, self)


def _replace_unchecked(engine, values: dict):
    """``dataclasses.replace`` without ``__post_init__``'s checks (arrays are not re-checked)."""
    leaves, static = _flatten(engine)
    leaves = tuple(
        values.get(name, leaf) for name, leaf in zip(type(engine).traced, leaves, strict=True)
    )
    return _unflatten(type(engine), static, leaves)


def check_engine_settings(engine, *, max_iter: str = "max_iter", low: int = 1) -> None:
    """``ValueError`` naming ``max_iter`` or ``tol`` of ``engine`` where one is out of range (an
    int in ``[low, MAX_ITER_LIMIT]``; a float > 0 or None); tracers are left to the core."""
    if not is_traced(engine.max_iter):
        check_int(engine.max_iter, max_iter, low=low, high=MAX_ITER_LIMIT)
    if not is_traced(engine.tol):
        check_float(engine.tol, "tol", 0.0, low_open=True, allow_none=True)
