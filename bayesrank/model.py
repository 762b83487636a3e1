"""The user-facing model: an XPGP prior plus an inference engine (``EP()`` by default).

    model = XPGPModel(XPGP(RBF(), (RegularizedLaplacian(),), jnp.array([1.0, 1.0])))
    posterior = model.fit(PreferenceProblem.create(pairs, X=X, relations=[W]))
    posterior.predict_pairs(held_out).prob        # P(i > j | data), Eq. 13-14
    posterior.rank()                              # entity indices, best first

``XPGPModel.fit`` never changes the model: with ``learn_hyperparameters`` the fitted prior, the
learning trace and its convergence flag come back on the ``Posterior``. Each fit pads the
problem to size buckets (``bayesrank.data.batch.bucket_size``; padded entities are decoupled
and touched by no pair, so the real entities' posterior is unchanged) and runs one module-level
jitted program, which a new split of the same query, or a query of similar size, reuses.

The posterior it returns is ``bayesrank.posterior.Posterior`` (re-exported here).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from .data.checks import (
    check_choice,
    check_int,
)
from .data.problem import PreferenceProblem
from .diagnostics import warn_if_unconverged
from .inference import ep
from .inference.engine import Engine, GaussianEngine
from .inference.engines import EP, NUTS, Laplace, SparseLaplace, engine_from_keywords, resolve
from .inference.problem import why_not_finite
from .kernels.xpgp import XPGP, check_prior
from .posterior import Posterior
from .runtime import one_blas_thread, warn_if_float32

__all__ = ["AUTO_DENSE_UP_TO", "Posterior", "XPGPModel"]

#: ``approximation="auto"``'s largest dense problem. Measured on 2 CPU cores (HetRec subsets,
#: docs/results/large.md): the dense Laplace fit takes 9.4 s at 2,000 entities and 48 s at
#: 5,000 (the sparse one 1.4 s, within 0.001 of its held-out error); its covariance alone is
#: 0.8 GB at 10,000.
AUTO_DENSE_UP_TO = 2000


LEARNING = ("evidence", "em", NUTS.name)


def _large(engine: Engine, n: int, rank: int) -> Engine:
    """``approximation="auto"``'s engine for ``n > AUTO_DENSE_UP_TO`` entities: the engine's
    own sparse form (``Laplace`` -> ``SparseLaplace``), or, for an engine that has none (EP,
    NUTS), the sparse Laplace at ``rank``, said in a ``UserWarning`` (once per place, as
    Python's warnings are)."""
    if type(engine).large is not Engine.large:
        return engine.large(n, rank)
    import warnings

    sparse = Laplace().large(n, rank)
    warnings.warn(
        f"approximation='auto' at {n} entities (beyond AUTO_DENSE_UP_TO = {AUTO_DENSE_UP_TO}): "
        f"{engine!r} has no form without an n x n matrix, so this fit uses {sparse!r}, the "
        "Laplace approximation in precision form (pass that engine to say so yourself)",
        UserWarning,
        stacklevel=4,
    )
    return sparse


#: ``XPGPModel``'s old engine keywords (each now a field of the engine object).
_OLD_KEYWORDS = ("schedule", "max_iter", "tol", "damping", "precision", "nuts_options")


def _given(old_keywords: dict) -> dict:
    """The old keywords given: ``None`` is the default of ``tol`` and ``nuts_options`` only (for
    the others it is a value, which the engine refuses, naming the keyword)."""
    return {
        k: v for k, v in old_keywords.items() if v is not None or k not in ("tol", "nuts_options")
    }


class XPGPModel:
    """XPGP prior + an inference engine, optionally with hyperparameter learning.

    Args:
        prior: the ``XPGP`` prior (never modified).
        engine: the inference engine (``bayesrank.inference.engine``), an object that carries
            its own settings: ``EP(...)`` (EP with 2-D sites, the default), ``Laplace(...)``,
            ``NUTS(...)`` (NumPyro's NUTS at the prior's hyperparameters: ``fit`` then needs a
            ``key``), ``SparseLaplace(rank=...)`` (no dense matrix: ``bayesrank.inference.sparse``,
            for thousands of entities and more; strict pairs, at the prior's hyperparameters),
            or any ``GaussianEngine``. The strings ``"ep"``, ``"laplace"``, ``"nuts"`` and
            ``"sparse"`` are the engines at their defaults.
        approximation: ``"dense"`` (the default: the engine as given) or ``"auto"``: beyond
            ``AUTO_DENSE_UP_TO`` entities (where a dense engine would take minutes and
            gigabytes: docs/results/large.md) a ``Laplace`` engine becomes
            ``SparseLaplace(rank, max_iter, tol)``, and an engine with no sparse form (``EP``,
            the default, or ``NUTS``) gives way to ``SparseLaplace(rank)``, with a
            ``UserWarning`` saying so. ``"sparse"`` is the old spelling of
            ``engine=SparseLaplace(rank=rank)``.
        rank: the attribute kernel's rank where ``"auto"`` goes sparse (256).

    The old keywords ``inference``, ``schedule``, ``max_iter``, ``tol``, ``damping``,
    ``precision`` and ``nuts_options`` still work, with a ``DeprecationWarning`` naming the
    engine they spell (``XPGPModel(prior, inference="laplace", max_iter=50)`` is
    ``XPGPModel(prior, Laplace(max_iter=50))``).
    """

    def __init__(
        self,
        prior: XPGP,
        engine: Engine | str | None = None,
        *,
        approximation: str = "dense",
        rank: int = 256,
        inference: str | None = None,
        **old_keywords,
    ):
        if unknown := sorted(set(old_keywords) - set(_OLD_KEYWORDS)):
            raise TypeError(f"XPGPModel() got an unexpected keyword argument {unknown[0]!r}")
        self.prior = prior
        self.approximation = approximation
        self.rank = rank
        self._spelled = (engine, inference, approximation, rank, old_keywords)
        old = _given(old_keywords)
        if inference is not None or old or approximation not in ("dense", "auto"):
            if engine is not None:
                raise ValueError(
                    f"engine={engine!r} and the old keyword(s) "
                    f"{sorted(old) + (['inference'] if inference else [])} both set the engine: "
                    "give its settings in the engine object alone"
                )
            self._warn_old(inference, approximation, rank, old)

    @staticmethod
    def _warn_old(inference, approximation, rank, old) -> None:
        import warnings

        spelled = [f"inference={inference!r}"] if inference is not None else []
        spelled += [f"approximation={approximation!r}"] if approximation != "dense" else []
        spelled += [f"{k}={v!r}" for k, v in old.items()]
        try:
            new = repr(engine_from_keywords(inference, old, approximation, rank))
        except ValueError:
            new = "EP(...), Laplace(...), NUTS(...) or SparseLaplace(...)"
        warnings.warn(
            f"XPGPModel({', '.join(spelled)}) is deprecated: pass the engine object, "
            f"XPGPModel(prior, {new})",
            DeprecationWarning,
            stacklevel=3,
        )

    @property
    def engine(self) -> Engine:
        """The engine object (``ValueError`` naming a setting at fault)."""
        engine, inference, approximation, rank, old = self._spelled
        if engine is not None:
            return resolve(engine)
        old = _given(old)
        return engine_from_keywords(inference, old, approximation, rank)

    @property
    def inference(self) -> str:
        """The engine's name (the old keyword's spelling)."""
        return self.engine.describe()

    def __repr__(self) -> str:
        engine, *_ = self._spelled
        try:
            engine = self.engine
        except ValueError:
            pass
        return f"XPGPModel({self.prior!r}, {engine!r})"

    def covariance(self, problem: PreferenceProblem) -> tuple[jax.Array, tuple]:
        """The prior covariance ``K: (n, n)`` of the problem and the prepared graph data."""
        graphs = self.prior.prepare(problem.relations)
        X = None if problem.X is None else jnp.asarray(problem.X)
        return self.prior.covariance(X, graphs, np.ones(problem.n, bool)), graphs

    def fit(
        self,
        problem: PreferenceProblem,
        sites: ep.Sites | None = None,
        *,
        key=None,
        learn_hyperparameters: bool | str = False,
        **learning_options,
    ) -> Posterior:
        """The posterior of the problem's entities by the model's engine (``sites``: a Gaussian
        engine's optional warm start; ``key``: the PRNG key NUTS needs).

        ``learn_hyperparameters``: ``True`` or ``"evidence"`` (evidence maximisation by BFGS,
        the default by measurement: ``docs/results/inference.md``), ``"em"`` (EM-EP),
        ``"nuts"`` (no point estimate: the hyperparameters marginalised by NUTS together with
        the preference degrees, whatever the engine; needs ``key``; the posterior predicts by
        the average over the draws, its ``prior`` is the hyperprior's centre, the median
        heuristic, and ``result.hyper`` holds the hyperparameters' draws), or ``False`` (keep
        the prior as given); the learning maximises the evidence of the engine's
        ``learning_engine()`` (``Laplace()`` for a Laplace engine, your ``GaussianEngine``
        itself, else ``EP()``). ``learning_options`` go to
        ``bayesrank.learning.fit_hyperparameters`` (e.g. ``optimizer=BFGS(max_steps=50)``,
        ``engine=EP(...)``, ``start=Start(restarts=2)``); given without
        ``learn_hyperparameters`` they are a ``ValueError`` (they would be ignored). The fitted
        prior is the posterior's ``prior`` and the learning result its ``learning``;
        ``self.prior`` stays as it was. On the sparse engine (``SparseLaplace``) ``True``
        learns the mixing weights, the entity effect and the lengthscale from its Laplace
        evidence (``bayesrank.learning.fit_sparse_hyperparameters``, whose keywords the
        learning options are; the result a ``SparseLearning``).
        """
        warn_if_float32("XPGPModel.fit")
        if not isinstance(problem, PreferenceProblem):
            raise ValueError(
                f"problem must be a PreferenceProblem (PreferenceProblem.create), got "
                f"{type(problem).__name__}"
            )
        self._check_settings(problem)
        if not (
            isinstance(learn_hyperparameters, bool | np.bool_)
            or (isinstance(learn_hyperparameters, str) and learn_hyperparameters in LEARNING)
        ):
            raise ValueError(
                "learn_hyperparameters must be True, False, 'evidence', 'em' or 'nuts', got "
                f"{learn_hyperparameters!r} (learning options go as keywords of fit, e.g. "
                "fit(problem, learn_hyperparameters=True, start=Start(restarts=2), key=key))"
            )
        if learning_options and not learn_hyperparameters:
            raise ValueError(
                f"learning option(s) {sorted(learning_options)} given without "
                "learn_hyperparameters, which would ignore them: pass learn_hyperparameters=True "
                "(or 'em', 'nuts') to learn the hyperparameters, or drop them"
            )
        engine = self._engine_for(problem)
        if not isinstance(engine, GaussianEngine):
            if key is None and isinstance(engine, NUTS):
                raise ValueError("NUTS needs a key: XPGPModel(prior, NUTS()).fit(problem, key=...)")
            if learn_hyperparameters and not isinstance(engine, NUTS | SparseLaplace):
                raise ValueError(
                    f"{engine!r} fits at the prior's hyperparameters: no learn_hyperparameters"
                )
        prior, learning = self.prior, None
        if learn_hyperparameters == NUTS.name:
            return self._marginalise(problem, key, learning_options)
        if learn_hyperparameters and isinstance(engine, SparseLaplace):
            return self._learn_sparse(engine, problem, key, learn_hyperparameters,
                                      learning_options)  # fmt: skip
        if learn_hyperparameters:
            import inspect

            from .learning import fit_hyperparameters
            from .learning.options import DEPRECATED, OLD_ENGINE_KEYWORDS

            named = inspect.signature(fit_hyperparameters).parameters
            known = (set(named) - {"prior", "problems", "deprecated"}) | set(DEPRECATED)
            known |= set(OLD_ENGINE_KEYWORDS)
            if unknown := sorted(set(learning_options) - known):
                raise ValueError(
                    f"unknown learning option(s) {unknown}; fit_hyperparameters takes "
                    f"{sorted(known)}"
                )
            method = learn_hyperparameters if isinstance(learn_hyperparameters, str) else "evidence"
            if not {"engine", *OLD_ENGINE_KEYWORDS} & set(learning_options):
                learning_options["engine"] = engine.learning_engine()
            if key is not None:  # restarts draw from it (NUTS, if asked for, from another)
                learning_options.setdefault("key", jax.random.fold_in(key, 1))
            learning = fit_hyperparameters(prior, [problem], method=method, **learning_options)
            prior = learning.prior
        if not isinstance(engine, GaussianEngine):
            result = engine.fit_problem(prior, problem, sites, key=key)  # warns itself
            return Posterior(prior, problem, result, learning, engine)
        if learning is not None and sites is None and self._learned_posterior(learning_options):
            # the learning's final EP ran at this model's settings: its posterior is this fit's
            # (no second EP sweep, no second compiled program)
            result = jax.device_put(
                jax.tree_util.tree_map(lambda x: np.asarray(x)[0], learning.posteriors)
            )
        else:
            with one_blas_thread():  # bayesrank.runtime: XLA's and BLAS's thread pools contend
                result = engine.fit_problem(prior, problem, sites)
        if not all(np.all(np.isfinite(np.asarray(a))) for a in (result.mean, result.cov)):
            raise ValueError(why_not_finite(prior, problem))
        warn_if_unconverged(result.converged, f"{engine.describe().upper()} fit", engine.advice)
        return Posterior(prior, problem, result, learning, engine)

    def _learn_sparse(self, engine, problem, key, method, options: dict) -> Posterior:
        """``learn_hyperparameters`` on the sparse engine: the weights, entity effect and
        lengthscale from its Laplace evidence (``learning.fit_sparse_hyperparameters``, at the
        engine's ``rank``; its options as keywords), then the fit at them."""
        import inspect

        from .learning.sparse_evidence import fit_sparse_hyperparameters

        if method not in (True, "evidence"):
            raise ValueError(
                f"the sparse engine learns by its evidence (learn_hyperparameters=True), not "
                f"{method!r}"
            )
        named = set(inspect.signature(fit_sparse_hyperparameters).parameters)
        if unknown := sorted(set(options) - (named - {"prior", "problem", "rank", "key"})):
            raise ValueError(
                f"unknown learning option(s) {unknown} for the sparse engine; it takes "
                f"{sorted(named - {'prior', 'problem', 'rank', 'key'})}"
            )
        learning = fit_sparse_hyperparameters(self.prior, problem, rank=engine.rank, key=key,
                                              **options)  # fmt: skip
        result = engine.fit_problem(learning.prior, problem, key=key)
        return Posterior(learning.prior, problem, result, learning, engine)

    def _marginalise(self, problem: PreferenceProblem, key, options: dict) -> Posterior:
        """``learn_hyperparameters="nuts"``: NUTS on the hyperparameters and the preference
        degrees together (``bayesrank.inference.nuts.sample_hyperparameters``), the
        hyperprior a normal of sd ``hyperprior_scale`` (default 2, as the evidence fit's) on
        each free unconstrained value, centred on the median heuristic's start; the sampler's
        settings are the model's engine's where it is ``NUTS``, else ``NUTS()``'s."""
        from .inference import nuts  # NumPyro loads only when sampling is asked for
        from .learning.initialize import initialize
        from .learning.layout import stack

        if key is None:
            raise ValueError(
                "learn_hyperparameters='nuts' needs a key: XPGPModel(...).fit(problem, key=...)"
            )
        problem.require_pairs_only("learn_hyperparameters='nuts'")
        if self.prior.margin is not None:
            raise ValueError(
                "learn_hyperparameters='nuts' samples the probit pair model's hyperparameters: "
                "the prior's tie margin is not sampled (use learn_hyperparameters=True)"
            )
        if unknown := sorted(set(options) - {"hyperprior_scale", "trainable"}):
            raise ValueError(
                f"learn_hyperparameters='nuts' takes hyperprior_scale and trainable, got {unknown}"
            )
        if isinstance(self.engine, NUTS):
            sampler = self.engine
        else:  # the old nuts_options, given beside another engine, set the sampler here
            sampler = NUTS(**(self._spelled[4].get("nuts_options") or {}))
        centre = initialize(self.prior, stack([problem]))
        result = nuts.sample_hyperparameters(
            key,
            centre,
            problem.pairs,
            X=problem.X,
            graphs=centre.prepare(problem.relations),
            trainable=options.get("trainable"),
            hyperprior_scale=options.get("hyperprior_scale", 2.0),
            **sampler.options(),
        )
        return Posterior(centre, problem, result, None, sampler)

    def _learned_posterior(self, options: dict) -> bool:
        """Whether hyperparameter learning with ``options`` ends with the posterior this model
        computes: EP at the model's settings (and no damping, full precision)."""
        from .learning.options import learning_engine

        return isinstance(self.engine, EP) and learning_engine(options) == self.engine

    def _check_settings(self, problem: PreferenceProblem) -> None:
        """``ValueError`` naming a model setting or hyperparameter at fault."""
        check_prior(self.prior, None if problem.X is None else problem.X.shape[1])
        check_choice(self.approximation, "approximation", ("dense", "sparse", "auto"))
        check_int(self.rank, "rank", low=1)

    def _engine_for(self, problem: PreferenceProblem) -> Engine:
        """The engine for ``problem`` (``approximation="auto"``: its large-scale form beyond
        ``AUTO_DENSE_UP_TO`` entities); ``ValueError`` naming a setting at fault (a model's fit
        iterates: ``max_iter`` at least 1, where the engine has one)."""
        engine = self.engine
        if getattr(engine, "max_iter", None) is not None:
            check_int(engine.max_iter, "max_iter", low=1)
        if self.approximation == "auto" and problem.n > AUTO_DENSE_UP_TO:
            engine = _large(engine, problem.n, self.rank)
        return engine
