"""The engines by name: ``EP``, ``Laplace``, ``NUTS`` and ``SparseLaplace``, and ``resolve``,
the one place where an engine's string shorthand (``"ep"``, ``"laplace"``, ``"nuts"``,
``"sparse"``) becomes an engine object (``bayesrank.inference.engine``).

``NUTS`` and ``SparseLaplace`` are problem-level engines: they fit a ``PreferenceProblem``
(``fit_problem``), not a covariance inside a caller's compiled program. NumPyro loads only
when ``NUTS`` samples.
"""

from __future__ import annotations

import dataclasses
from typing import ClassVar

from ..data.checks import check_choice, check_float, check_int
from ..diagnostics import warn_if_unconverged
from .engine import Engine, GaussianEngine, check_engine_settings
from .ep.settings import EP
from .laplace import Laplace

__all__ = [
    "ENGINES",
    "EP",
    "NUTS",
    "Laplace",
    "SparseLaplace",
    "engine_from_keywords",
    "names",
    "resolve",
]


@dataclasses.dataclass(frozen=True)
class NUTS(Engine):
    """NumPyro's NUTS at the prior's hyperparameters, as an engine: its ``fit_problem`` needs a
    ``key``; the posterior (``NUTSPosterior``) predicts by the average over the draws and has no
    evidence.

    Attributes (NumPyro's, ``bayesrank.inference.nuts.NUTSSettings``): ``num_warmup`` (500),
    ``num_samples`` (500), ``num_chains`` (4, run as a ``vmap``), ``target_accept_prob`` (0.8),
    ``max_tree_depth`` (10), ``dense_mass`` (False), ``init_radius`` (2.0: chains start at
    ``z ~ Uniform(-r, r)^n``).
    """

    name: ClassVar[str] = "nuts"
    advice: ClassVar[str] = "raise num_warmup and num_samples"

    num_warmup: int = 500
    num_samples: int = 500
    num_chains: int = 4
    target_accept_prob: float = 0.8
    max_tree_depth: int = 10
    dense_mass: bool = False
    init_radius: float = 2.0

    def options(self) -> dict:
        """The sampler's keywords (``bayesrank.inference.nuts.sample``)."""
        return dataclasses.asdict(self)

    def fit_problem(self, prior, problem, sites=None, *, key=None):
        if key is None:
            raise ValueError("NUTS needs a key: XPGPModel(prior, NUTS()).fit(problem, key=...)")
        if sites is not None:
            raise ValueError("NUTS takes no sites (a warm start is EP's or Laplace's)")
        from . import nuts  # NumPyro loads only when sampling is asked for

        return nuts.sample_problem(key, prior, problem, **self.options())


#: ``SparseLaplace``'s ``exact_up_to``: exact pair variances (a CG solve each) for at most this
#: many pairs at once, draws beyond. Both ways cost about one CG solve per pair or per draw
#: (``benchmarks/bench_sparse_pairs.py``, n = 5,000: 200 pairs exactly 12.7 s, by 200 draws
#: 8.0 s; 50 pairs 2.5 s against 10.9 s), so well before ``n_samples`` pairs the draws win.
EXACT_UP_TO = 100


@dataclasses.dataclass(frozen=True)
class SparseLaplace(Engine):
    """The Laplace approximation in precision form (``bayesrank.inference.sparse``): no dense
    ``(n, n)`` matrix, for thousands of entities and more; strict pairs only, at the prior's
    hyperparameters. The attribute kernel at ``rank`` by pivoted Cholesky with its residual
    variances kept; relations ``RegularizedLaplacian``. Its posterior predicts pairs' variances
    by one CG solve each, or, for more than ``exact_up_to`` pairs at once, from ``n_samples``
    posterior draws (one CG solve each, shared by every pair: relative error about
    ``sqrt(2 / n_samples)``); it estimates its evidence by stochastic Lanczos quadrature.

    Attributes: ``rank`` (256), ``max_iter`` (200 Newton steps), ``tol`` (1e-10, on the mode),
    ``exact_up_to`` (``EXACT_UP_TO``: exact variances up to that many pairs at once; ``0``:
    always draws), ``n_samples`` (200 draws).
    """

    name: ClassVar[str] = "sparse"
    advice: ClassVar[str] = "raise max_iter (Newton's iterations)"

    rank: int = 256
    max_iter: int = 200
    tol: float | None = 1e-10
    exact_up_to: int = EXACT_UP_TO
    n_samples: int = 200

    def __post_init__(self):
        check_int(self.rank, "rank", low=1)
        check_engine_settings(self)
        check_float(self.tol, "tol", 0.0, low_open=True)
        check_int(self.exact_up_to, "exact_up_to", low=0)
        check_int(self.n_samples, "n_samples", low=2)

    def fit_problem(self, prior, problem, sites=None, *, key=None):
        if sites is not None:
            raise ValueError("SparseLaplace takes no sites (it fits at the prior's values)")
        from . import sparse

        result = sparse.fit_problem(prior, problem, self.rank, self.max_iter, self.tol, key,
                                    exact_up_to=self.exact_up_to,
                                    n_samples=self.n_samples)  # fmt: skip
        warn_if_unconverged(result.converged, "Laplace fit", self.advice)
        return result


#: The string shorthands: each names its engine at its defaults.
ENGINES: dict[str, type[Engine]] = {
    "ep": EP,
    "laplace": Laplace,
    "nuts": NUTS,
    "sparse": SparseLaplace,
}


def names(*, gaussian: bool = False, sparse: bool = False) -> tuple[str, ...]:
    """The shorthands of ``ENGINES``, in order: only ``GaussianEngine``s' where ``gaussian``,
    and the sparse engine's only where ``sparse`` (a choice list, e.g. a command's
    ``--engine``, written once here)."""
    return tuple(
        n
        for n, cls in ENGINES.items()
        if (not gaussian or issubclass(cls, GaussianEngine))
        and (sparse or not issubclass(cls, SparseLaplace))
    )


def resolve(engine, name: str = "engine", *, gaussian: bool = False) -> Engine:
    """The engine object of ``engine``: an ``Engine`` as given, a shorthand of ``ENGINES`` at its
    defaults, ``None`` as ``EP()``. ``gaussian``: the caller needs a ``GaussianEngine`` (a
    posterior with sites, fitted inside its compiled program). ``ValueError`` naming ``name``
    and the value otherwise."""
    if engine is None:
        engine = EP()
    elif isinstance(engine, str) and engine in ENGINES:
        engine = ENGINES[engine]()
    elif isinstance(engine, type) and issubclass(engine, Engine):
        raise ValueError(f"{name} must be an engine object, e.g. {engine.__name__}(): got a class")
    if not isinstance(engine, Engine):
        raise ValueError(
            f"{name} must be one of {sorted(ENGINES)} or an engine object (EP(...), "
            f"Laplace(...), NUTS(...), SparseLaplace(...)), got {engine!r}"
        )
    if gaussian and not isinstance(engine, GaussianEngine):
        raise ValueError(
            f"{name}={engine!r} is not a Gaussian engine: this needs a posterior with sites "
            "fitted inside a compiled program (EP(...), Laplace(...) or your GaussianEngine)"
        )
    return engine


def engine_from_keywords(inference, settings: dict, approximation="dense", rank: int = 256):
    """The engine that ``XPGPModel``'s old keywords (and ``bayesrank fit``'s options) spell:
    ``inference`` (a name, default ``"ep"``), its ``settings`` (``schedule``, ``max_iter``,
    ``tol``, ``damping``, ``precision``; ``nuts_options``, a dict, for NUTS and ignored by the
    others, as before), ``approximation`` (``"sparse"``: the sparse form, at ``rank``; other
    values leave the engine dense). ``ValueError`` naming a keyword the engine does not
    have."""
    if inference == SparseLaplace.name:  # an engine's name, but not an inference's
        raise ValueError(
            "inference='sparse' is not an inference name (ep, laplace, nuts): the sparse engine "
            "is the engine object, XPGPModel(prior, SparseLaplace(rank=256)) (or engine="
            "'sparse'); XPGPModel(prior, Laplace(), approximation='auto') picks it beyond "
            "2,000 entities"
        )
    name = EP.name if inference is None else check_choice(inference, "inference", names())
    settings = dict(settings)
    options = settings.pop("nuts_options", None) or {}
    if ENGINES[name] is NUTS:
        settings = {**settings, **dict(options)}
    cls = ENGINES[name]
    fields = {f.name for f in dataclasses.fields(cls)}
    if unknown := sorted(set(settings) - fields):
        raise ValueError(
            f"{unknown[0]}={settings[unknown[0]]!r} is not a setting of {cls.__name__} "
            f"(inference={name!r}): it has {sorted(fields)}"
        )
    engine = cls(**settings)
    return engine.large(None, rank) if approximation == "sparse" else engine
