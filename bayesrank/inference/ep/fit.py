"""``fit``: EP to convergence, the posterior ``(mean, cov)``, the EP evidence and diagnostics.

``fit`` is both the pure core and the user's façade:

- on traced inputs (inside a caller's ``jit``, ``vmap`` or ``grad``) it is the plain function
  (``fit_core``), to compose freely;
- on concrete inputs it checks them (a ``ValueError`` names the entry at fault), pads ``K`` and
  the pairs to size buckets (``bayesrank.data.batch.bucket_size``: padded entities get a
  decoupled unit prior, padded pairs a zero site, which leaves the real entities' posterior as
  it is), runs one module-level jitted program and slices the result back on the host. A second
  call with shapes in the same buckets compiles nothing; only the schedule, precision,
  acceleration and damping rule are static (``max_iter``, ``tol`` and ``damping`` are not).
"""

from __future__ import annotations

import inspect
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np

from ...compiler import jit
from ...data.batch import bucket_size
from ...data.checks import (
    check_bool,
    check_covariance,
    check_fits_dtype,
    check_float,
    check_int,
    check_pairs,
)
from ...diagnostics import warn_if_unconverged
from ...likelihoods import Outcomes
from ...runtime import is_traced, one_blas_thread, warn_if_float32
from ..engine import fit_fields
from ..gaussian.factor import covariance, dense
from ..gaussian.sites import Sites, informative_pairs, pair_mask_or_all
from ..posterior import GaussianPosterior
from .evidence import evidence_from_posterior
from .host import (
    as_outcomes,
    check_sites,
    loop_settings,
    pad_outcomes,
    pad_pairs,  # the old name of pad_pairs_and_sites, imported from here
    pad_pairs_and_sites,
    unpad_posterior,
    validate_problem,
)
from .loop import convergence_tol
from .run import run
from .settings import EP, MAX_ITER_LIMIT, check_settings

__all__ = [
    "EPPosterior",
    "check_settings",
    "fit",
    "fit_core",
    "loop_settings",
    "pad_pairs",
    "unpad_posterior",
    "validate_problem",
]


_EPPosteriorFields = fit_fields(
    "_EPPosteriorFields", n_skipped=jax.Array, n_clipped=jax.Array, n_uninformative=jax.Array
)


class EPPosterior(_EPPosteriorFields, GaussianPosterior):
    """Result of ``fit``: the Gaussian posterior of ``xi_hat`` and diagnostics.

    ``mean: (n,)``, ``cov: (n, n)``, ``log_evidence`` (the EP evidence), ``sites``
    (``Sites``, ``(m,)`` each), ``n_iter`` (sweeps), ``converged``, ``max_change``,
    ``n_skipped``, ``n_clipped``, ``n_uninformative`` (see ``bayesrank.inference.ep``).
    Predicts through ``GaussianPosterior``
    (``predict_pairs``, ``probability_matrix``, ``scores``, ``rank``); batched results (a
    leading query axis) predict per query.
    """

    __slots__ = ()


def fit_core(
    K, pairs, *, tol=None, rtol=None, sites=None, pair_mask=None, outcomes=None, **options
) -> EPPosterior:
    """``fit`` as a pure function (no checks, no padding, no jit): see ``fit``.

    ``options``: ``run``'s settings (``max_iter``, ``damping``, ``adapt_damping``,
    ``schedule``, ``precision``, ``accelerate``, ``residual_stop``). ``outcomes``: an
    ``Outcomes`` (ties, weights, tie margin) or None.
    """
    K = jnp.asarray(K)
    pairs = jnp.asarray(pairs)
    tol = convergence_tol(K, tol, rtol)
    valid = pair_mask_or_all(pairs, pair_mask)
    active = informative_pairs(jax.lax.stop_gradient(K), pairs, valid)
    fixed = None if outcomes is None else jax.lax.stop_gradient(outcomes)
    state = run(
        jax.lax.stop_gradient(K),
        pairs,
        tol=tol,
        sites=sites,
        pair_mask=pair_mask,
        outcomes=fixed,
        **options,
    )
    cov = covariance(state, jnp.ndim(K) == 1)
    evidence = evidence_from_posterior(
        dense(K), cov, state.logdet, pairs, state.sites, active, valid, state.factor, outcomes
    )
    return EPPosterior(
        mean=state.mean,
        cov=cov,
        log_evidence=evidence,
        sites=state.sites,
        n_iter=state.n_iter,
        converged=state.max_change < tol,
        max_change=state.max_change,
        n_skipped=state.n_skipped,
        n_clipped=state.n_clipped,
        n_uninformative=jnp.sum(valid & ~active).astype(jnp.int32),
    )


def fit(
    K,
    pairs,
    *,
    max_iter: int = 200,
    tol: float | None = None,
    rtol: float | None = None,
    damping: float = 1.0,
    adapt_damping: bool = True,
    schedule: str = "parallel",
    sites: Sites | None = None,
    pair_mask=None,
    precision: str = "full",
    accelerate: bool = False,
    residual_stop=False,
    settings: EP | None = None,
    ties=None,
    weights=None,
    margin: float | None = None,
    outcomes: Outcomes | None = None,
) -> EPPosterior:
    """Run EP to convergence and return the posterior, the EP evidence and diagnostics.

    Args:
        K: ``(n, n)`` prior covariance of ``xi_hat`` (paper Eq. 5); may be singular. A diagonal
            prior (independent entities, e.g. choix's ``I / alpha``) may be given as its
            diagonal ``(n,)``: then ``B`` is sparse and a sweep needs no ``n^3`` product.
        pairs: ``(m, 2)`` int, row ``(i, j)`` meaning *i is preferred to j*.
        max_iter, tol, rtol: at most ``max_iter`` sweeps; converged when no marginal mean or
            standard deviation moved by ``max(tol, rtol * sqrt(max_i K_ii))`` or more in the last
            sweep (``convergence_tol``: relative to the prior sd
            where that exceeds 1, as round-off is). ``tol`` defaults to 1e-6 in float64 and 1e-3
            in float32 (``default_tol``), ``rtol`` to ``tol``; ``rtol=0`` is an absolute
            test.
        damping: the first sweep's step fraction in ``(0, 1]``; with ``adapt_damping`` (default)
            halved whenever the marginals' largest change shrinks by less than a factor 0.9 from one
            sweep to the next, down to ``MIN_DAMPING``.
        schedule: ``"parallel"`` or ``"sequential"``.
        sites: warm start (e.g. the previous EM iteration's sites).
        pair_mask: ``(m,)`` bool, False for padded pairs.
        precision: ``"full"``, or ``"mixed"``: float64 EP whose first sweeps run in float32
            (``run``); the same fixed point, 25-35% faster on a CPU at ``n = 1000``.
        accelerate: Anderson mixing of the parallel sweeps' sites (``run``); the same
            fixed point in fewer sweeps where plain EP converges slowly.
        residual_stop: with ``accelerate``, also stop when a sweep's moment-matching residual is
            below ``tol``, before refactorising (``run``); ``converged`` then reports it.
        settings: the same settings as one engine ``EP`` (``bayesrank.inference.engine``,
            shared with every caller), in place of the keywords above: a keyword given a value
            other than its default beside it is a ``ValueError`` naming both; ``step_tol``
            does not apply.
        ties: ``(m,)`` bool, True where row ``(i, j)`` is a tie (``P(tie | d) = Phi(eps - d) -
            Phi(-eps - d)``; a win is then ``Phi(d - eps)``); None: no tie.
        weights: ``(m,)`` reals > 0: each row's likelihood raised to its weight, e.g. how many
            times the judgement was made (a row of weight ``c`` equals ``c`` copies).
        margin: the tie margin ``eps >= 0`` (> 0 with ties; None: 0); 0 without ties and
            weights is the probit pair model. ``ties``, ``weights`` and ``margin`` make one
            ``bayesrank.likelihoods.Outcomes`` (``tie_outcomes``).
        outcomes: the rows' likelihood as one ``Outcomes`` in place of ``ties``, ``weights`` and
            ``margin``: any interval per row (``grade_outcomes``, or ``tie_outcomes`` under a
            transformation, where ``log_evidence`` is differentiable in the intervals' ends).

    ``log_evidence`` is differentiable with respect to ``K`` (the EP loop runs on
    ``stop_gradient(K)`` and the evidence is evaluated at the converged sites, whose own gradient
    vanishes at a fixed point). ``mean`` and ``cov`` are the loop's (not differentiated).

    Called on concrete arrays, ``fit`` validates them and runs a cached compiled program at
    bucketed shapes (module docstring); under a caller's transformation it is ``fit_core``.
    """
    warn_if_float32("ep.fit")
    options = dict(
        max_iter=max_iter,
        tol=tol,
        rtol=rtol,
        damping=damping,
        adapt_damping=adapt_damping,
        schedule=schedule,
        precision=precision,
        accelerate=accelerate,
        residual_stop=residual_stop,
    )
    if settings is not None:
        options = _from_settings(settings, options)
        max_iter, tol, rtol, damping, residual_stop = (
            options[k] for k in ("max_iter", "tol", "rtol", "damping", "residual_stop")
        )
    given = ties is not None or weights is not None or margin is not None
    if outcomes is not None and given:
        raise ValueError("give ties, weights and margin, or outcomes, not both")
    if given:
        outcomes = (ties, weights, 0.0 if margin is None else margin)
    if is_traced(K, pairs, sites, pair_mask, max_iter, tol, rtol, damping, residual_stop, outcomes):
        if isinstance(outcomes, tuple) and not isinstance(outcomes, Outcomes):
            outcomes = as_outcomes(*outcomes, pairs=pairs, dtype=jnp.result_type(K))
        return fit_core(K, pairs, sites=sites, pair_mask=pair_mask, outcomes=outcomes, **options)
    with one_blas_thread():  # bayesrank.runtime: XLA's and BLAS's thread pools contend
        post = _fit_eagerly(K, pairs, sites, pair_mask, outcomes=outcomes, **options)
    if max_iter:  # max_iter=0 asks for no sweep: not a cap hit
        warn_if_unconverged(post.converged, "EP fit", EP_ADVICE)
    return post


#: What a ``ConvergenceWarning`` from EP advises.
EP_ADVICE = (
    "the posterior is the last sweep's (converged=False, max_change says how far); raise "
    "max_iter, or try accelerate=True or schedule='sequential'"
)


def _from_settings(settings: EP, options: dict) -> dict:
    """``fit``'s options from ``settings``; ``ValueError`` where a keyword beside it was given
    a value other than its default (two spellings of one setting)."""
    if not isinstance(settings, EP):
        raise ValueError(f"settings must be an EP, got {type(settings).__name__}")
    keywords = inspect.signature(fit).parameters
    defaults = {name: keywords[name].default for name in options}
    for name, default in defaults.items():
        value = options[name]
        if value is not default and not (
            type(value) is type(default) and not is_traced(value) and value == default
        ):
            raise ValueError(
                f"{name}={value!r} and settings={settings!r} both set EP's {name}: give it "
                f"in settings alone (EP({name}=...))"
            )
    return {name: getattr(settings, name) for name in options}


def _fit_eagerly(K, pairs, sites, pair_mask, outcomes=None, **options) -> EPPosterior:
    """Check, pad to size buckets, run the jitted program, slice back (module docstring)."""
    check_settings(
        options["schedule"],
        options["precision"],
        options["damping"],
        options["accelerate"],
        options["residual_stop"],
    )
    # 0: the posterior at the given sites; at most int32's range (a traced loop counter)
    check_int(options["max_iter"], "max_iter", low=0, high=MAX_ITER_LIMIT)
    check_bool(options["adapt_damping"], "adapt_damping")
    check_bool(options["accelerate"], "accelerate")
    check_bool(options["residual_stop"], "residual_stop")
    check_float(options["tol"], "tol", low=0.0, low_open=True, allow_none=True)
    check_float(options["rtol"], "rtol", low=0.0, allow_none=True)
    K = np.asarray(K)
    if K.dtype.kind in "iub":  # an integer K is a valid covariance: compute in floating point
        K = K.astype(jnp.result_type(float))
    elif K.dtype.kind == "f" and K.dtype not in (np.float32, np.float64):
        K = K.astype(np.float32 if K.dtype.itemsize < 4 else np.float64)  # float16, longdouble
    K = check_covariance(K)
    K = check_fits_dtype(K, "K", jax.dtypes.canonicalize_dtype(K.dtype))
    pairs = check_pairs(pairs, K.shape[0]).pairs
    n, m = K.shape[0], pairs.shape[0]
    sites = check_sites(sites, m)
    N = bucket_size(n)
    if K.ndim == 1:
        K_pad = np.ones(N, K.dtype)
        K_pad[:n] = K
    else:
        K_pad = np.eye(N, dtype=K.dtype)
        K_pad[:n, :n] = K
    pairs_pad, mask_pad, sites_pad = pad_pairs_and_sites(pairs, pair_mask, sites, K.dtype)
    settings = loop_settings(options["max_iter"], options["tol"], options["damping"], K.dtype)
    result = _fit_jit(
        K_pad,
        pairs_pad,
        mask_pad,
        sites_pad,
        pad_outcomes(outcomes, m, K.dtype),
        *settings,
        rtol=settings[1] if options["rtol"] is None else np.asarray(options["rtol"], K.dtype),
        schedule=options["schedule"],
        precision=options["precision"],
        accelerate=options["accelerate"],
        adapt_damping=bool(options["adapt_damping"]),
        residual_stop=bool(options["residual_stop"]),
    )
    return unpad_posterior(result, n, m)


@partial(
    jit,
    static_argnames=("schedule", "precision", "accelerate", "adapt_damping", "residual_stop"),
)
def _fit_jit(K, pairs, pair_mask, sites, outcomes, max_iter, tol, damping, rtol, **static):
    return fit_core(
        K,
        pairs,
        sites=sites,
        pair_mask=pair_mask,
        outcomes=outcomes,
        max_iter=max_iter,
        tol=tol,
        rtol=rtol,
        damping=damping,
        **static,
    )
