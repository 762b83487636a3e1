"""Host-side checks of the precision-form engine's arguments, before anything is traced.

JAX reads an index outside ``[0, n)`` clamped (``xi[n]`` is ``xi[n - 1]``, ``xi[-1]`` is
``xi[n - 1]``) and drops it on ``segment_sum``, so a pair naming an entity that does not exist
would give a wrong mode, variance or prediction with no error; a self pair ``(i, i)`` has
``d = 0`` and would shift the evidence by ``log 2``. Every public function of ``laplace`` and
``learning.sparse_em`` therefore checks here, on concrete inputs, with the library's own checks
(``bayesrank.data.checks``): training pairs as every fitting face takes them (``check_pairs``:
whole floats accepted, as ``PreferenceProblem.create`` does), test pairs as every prediction
face (``check_index_pairs``: self pairs allowed). Under a caller's ``jit`` nothing can be
checked, and the cores run as given.
"""

from __future__ import annotations

import numpy as np

from ...data.checks import (
    check_float,
    check_grades,
    check_index_pairs,
    check_int,
    check_pairs,
)
from ..ep.settings import MAX_ITER_LIMIT
from .prior import LatentPrior

__all__ = [
    "check_cg_tol",
    "check_fit",
    "check_fitted",
    "check_latent_prior",
    "check_mode_options",
    "check_test_pairs",
    "check_training_pairs",
    "check_z0",
]


def check_latent_prior(prior, name: str = "prior") -> LatentPrior:
    """``prior`` if it is a ``LatentPrior`` (``latent_prior``, ``from_xpgp``)."""
    if not isinstance(prior, LatentPrior):
        raise ValueError(
            f"{name} must be a LatentPrior (inference.sparse.latent_prior or from_xpgp), got "
            f"{type(prior).__name__}"
        )
    return prior


def check_training_pairs(prior: LatentPrior, pairs, name: str = "pairs") -> np.ndarray:
    """``(m, 2)`` int64 training pairs over the prior's ``n`` entities: whole numbers (floats
    that are whole accepted), in ``[0, n)``, no self pair; ``[]`` is no pair."""
    return check_pairs(pairs, prior.n, name).pairs


def check_test_pairs(prior: LatentPrior, test, name: str = "test") -> np.ndarray:
    """``(p, 2)`` int64 pairs to predict, in ``[0, n)``; self pairs allowed (``P = 1/2``)."""
    return check_index_pairs(test, prior.n, name)


def check_fit(fit, prior: LatentPrior, pairs: np.ndarray, name: str = "fit"):
    """``fit`` if it is a ``SparseMode`` of this prior (``z: (r + K n,)``, ``mean: (n,)``) and
    of as many pairs as ``pairs: (m, 2)`` (``w: (m,)``)."""
    from .laplace import SparseMode  # laplace imports this module

    if not isinstance(fit, SparseMode):
        raise ValueError(f"{name} must be a SparseMode (mode's result), got {type(fit).__name__}")
    for field, want, of in (
        ("z", (prior.size,), "the prior's latent size r + K n"),
        ("mean", (prior.n,), "the prior's n entities"),
        ("w", (pairs.shape[0],), "one curvature per training pair"),
    ):
        got = tuple(np.shape(getattr(fit, field)))
        if got != want:
            raise ValueError(
                f"{name}.{field} has shape {got}, expected {want} ({of}): {name} was computed "
                "for another prior or other pairs"
            )
    return fit


def check_fitted(prior, pairs, fit) -> np.ndarray:
    """The training ``pairs`` of ``fit``, checked with the prior and the fit (``ValueError``)."""
    check_latent_prior(prior)
    pairs = check_training_pairs(prior, pairs)
    check_fit(fit, prior, pairs)
    return pairs


def check_z0(z0, prior: LatentPrior, pairs: np.ndarray) -> np.ndarray | None:
    """A warm start ``z0: (r + K n,)`` of finite reals, or None,
    whose pair differences ``d = A J z0`` (``pairs: (m, 2)``, checked) are at most
    ``eps^-1/4`` of the prior's dtype (8192 in float64, about 54 in float32). Further out the
    curvature ``w = r (d + r)``, ``r = phi(d) / Phi(d)``, is lost: ``r`` carries a relative
    error of about ``eps d^2`` (``likelihoods.inverse_mills`` cancels in the log), ``d + r`` is
    about ``1 / |d|``, so ``w`` can turn negative and Newton's iteration stop where it started,
    reported converged (``z0 = 1e7`` did so). And ``|z0|`` at most ``eps^-1/2`` (6.7e7 in
    float64, about 2900 in float32): CG's first solve, warm-started there, is accurate to ``eps
    |z0|`` only, and Newton's stopping rule, relative to ``max |xi|``, then took a start of
    ``1e150`` in ``J``'s null space for the mode."""
    if z0 is None:
        return None
    arr = check_grades(z0, None, "z0")  # 1-D, real, finite
    if arr.shape != (prior.size,):
        raise ValueError(
            f"z0 has shape {arr.shape}, expected ({prior.size},): the prior's latent size r + K n "
            f"= {prior.rank} + {len(prior.blocks)} * {prior.n}"
        )
    eps = float(np.finfo(prior.features.dtype).eps)
    if (bad := np.flatnonzero(np.abs(arr) > eps**-0.5)).size:
        raise ValueError(
            f"z0[{bad[0]}] = {arr[bad[0]]:.3g} is beyond {eps**-0.5:.3g}, where a warm start's "
            "round-off outweighs the mode: start nearer the mode (z0=None)"
        )
    r, n = prior.rank, prior.n
    with np.errstate(over="ignore", invalid="ignore"):
        xi = np.asarray(prior.features, np.float64) @ arr[:r]
        xi = xi + arr[r:].reshape(len(prior.blocks), n).sum(axis=0)
        d = np.abs(xi[pairs[:, 0]] - xi[pairs[:, 1]])
    bound = eps**-0.25
    if (bad := np.flatnonzero(~(d <= bound))).size:
        s = bad[0]
        raise ValueError(
            f"z0 puts pair {s} ({pairs[s, 0]}, {pairs[s, 1]}) at a difference |xi_i - xi_j| = "
            f"{d[s]:.3g}, beyond {bound:.3g} where the probit's curvature is computed: start "
            "nearer the mode (z0=None)"
        )
    return arr


def check_mode_options(max_iter, tol, cg_tol, dtype) -> tuple[int, float, float]:
    """``(max_iter, tol, cg_tol)`` as Python numbers: ``max_iter`` an integer ``>= 0`` (0: the
    start itself, unconverged), ``tol`` a finite number ``>= 0`` (a float: an ``int`` past
    int32 would overflow JAX's argument parsing in float32), ``cg_tol`` as ``check_cg_tol``
    (``dtype``: the prior's)."""
    return (
        check_int(max_iter, "max_iter", low=0, high=MAX_ITER_LIMIT),
        check_float(tol, "tol", low=0.0),
        check_cg_tol(cg_tol, dtype),
    )


def check_cg_tol(cg_tol, dtype) -> float:
    """CG's tolerance relative to the right-hand side's norm, below 1 (at 1 or more CG stops at
    its start: a mode of zeros, reported converged) and at least ``sqrt(tiny)`` of ``dtype``
    (1.5e-154 in float64, 1.1e-19 in float32): below, ``r . r`` underflows before the stopping
    test holds and CG's next step divides 0 by 0 (``cg_tol = 1e-77`` did so in float32)."""
    cg_tol = check_float(cg_tol, "cg_tol", low=0.0, high=1.0, low_open=True, high_open=True)
    floor = float(np.sqrt(np.finfo(dtype).tiny))
    if cg_tol < floor:
        raise ValueError(
            f"cg_tol = {cg_tol:.3g} is below {floor:.3g}, where CG's residual underflows in "
            f"{np.dtype(dtype).name}"
        )
    return cg_tol
