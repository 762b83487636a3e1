"""BFGS ascent on ``log Z_EP + log hyperprior``, driven from the host, for ``B`` fits at once.

Why on the host (the one optimiser here that is not an optax transformation inside a compiled
loop): each evaluation runs EP, itself a ``while_loop`` whose sweep count varies, warm-started
from the previous point's sites; keeping the optimiser's ``p``-vectors and ``p x p`` matrices in
NumPy lets every evaluation be one compiled call per size bucket, the line search stop as soon as
a point is accepted, and the buckets of a shared fit run one after another (their batched LAPACK
calls must not overlap on jaxlib 0.10's CPU runtime). Measured against optax's L-BFGS and Adam
on the same objective it took fewer evaluations (``docs/development/learning.md``).

- The first inverse Hessian is the inverse of the Fisher information (plus the hyperprior's
  precision; ``objectives.prior_fisher``), so the first step is a
  Fisher-scoring step; each accepted step then updates it by BFGS (skipped when the curvature
  ``s^T y`` is not positive).
- Line search: the full step first (no unconstrained value moves by more than ``MAX_STEP``),
  then backtracking by quadratic interpolation (``backtrack``) until the Armijo condition
  holds.
- A fit stops when a step gains less than ``tol`` nats and the quasi-Newton model predicts less
  than that to come (``g^T H g / 2``), or when no step along the direction gains: it has then
  converged. One that reaches ``max_steps`` iterations has not.

**Many fits at once.** ``x: (B, p)`` holds ``B`` independent fits (one ``theta`` per query); a
round evaluates every fit's next trial point in one compiled call (``evaluate``), and each fit
takes its own decision on its own values: every fit follows exactly the path it would follow
alone. A fit that has stopped is evaluated at its last point and ignored. A shared ``theta``
is ``B = 1``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import numpy as np

from .diagnostics import NonFiniteStartError

__all__ = ["ARMIJO", "MAX_HALVINGS", "MAX_STEP", "backtrack", "minimize"]

#: Armijo constant and the most step halvings of the BFGS line search; the longest step in any
#: unconstrained coordinate (a log scale: a factor e^2 = 7.4).
ARMIJO, MAX_HALVINGS, MAX_STEP = 1e-4, 30, 2.0


def backtrack(step: float, f: float, slope: float, f_step: float) -> float:
    """The next trial step after ``step`` failed the Armijo test: the maximiser of the quadratic
    through ``f`` (slope ``slope > 0`` at 0) and ``f_step`` at ``step``, kept within
    ``[0.1, 0.5] * step`` (Nocedal & Wright, Sec. 3.5); half the step where ``f_step`` is not
    finite. A far overshoot (``f_step`` far below ``f``) is cut back in one trial, not several
    halvings."""
    if not np.isfinite(f_step):
        return 0.5 * step
    curvature = (f_step - f - slope * step) / step**2  # < 0: the Armijo test failed
    best = -slope / (2.0 * curvature) if curvature < 0 else 0.5 * step
    return float(np.clip(best, 0.1 * step, 0.5 * step))


class Evaluation(NamedTuple):
    """What ``evaluate(x, sites)`` returns for ``B`` fits."""

    neg_log_evidence: np.ndarray  # (B,) -log Z_EP
    gradient: np.ndarray  # (B, p) of -log Z_EP
    sites: object  # EP's sites at x (warm start of the next evaluation)
    sweeps: np.ndarray  # (B,) largest EP sweep count
    converged: np.ndarray  # (B,) every EP run converged
    posteriors: object = None  # what ``fisher`` needs (the EP posteriors at x)


class Result(NamedTuple):
    x: np.ndarray  # (B, p)
    sites: object
    rows: list  # per fit: (x, log_evidence, before, after, sweeps, ep_converged) per iteration
    converged: np.ndarray  # (B,) stopped by the rule, before n_iter


def _nonfinite_start(b: int, e: Evaluation, lp, dlp) -> NonFiniteStartError:
    """The error for fit ``b``, whose objective or gradient is not finite at the start: it names
    the terms that are not (the EP evidence, the hyperprior's log density, their gradients)
    and shows both values."""
    evidence = -float(e.neg_log_evidence[b])
    terms = [
        ("the EP evidence", np.isfinite(evidence)),
        ("the EP evidence's gradient", np.all(np.isfinite(e.gradient[b]))),
        ("the hyperprior's log density", np.isfinite(lp[b])),
        ("the hyperprior's gradient", np.all(np.isfinite(dlp[b]))),
    ]
    faulty = [name for name, ok in terms if not ok]
    in_hyperprior = bool(faulty) and all("hyperprior" in name for name in faulty)
    what = " and ".join(faulty) or "the objective (log evidence + log hyperprior, each finite)"
    advice = (
        "check the hyperprior against the starting values (hyperprior=, hyperprior_scale=)"
        if in_hyperprior
        else "check the prior's values and the data"
    )
    return NonFiniteStartError(
        f"at the initial hyperparameters {what} {'is' if len(faulty) < 2 else 'are'} not finite "
        f"(query {b}: log evidence {evidence:.6g}, log hyperprior {float(lp[b]):.6g}); {advice}",
        in_hyperprior=in_hyperprior,
    )


def _initial_inverse_hessian(F: np.ndarray, precision: float) -> np.ndarray:
    """``(F + precision I + ridge)^-1`` per fit, the identity where that is not positive."""
    B, p, _ = F.shape
    eye = np.eye(p)
    H = np.empty_like(F)
    for b in range(B):  # p x p each: host work, no compiled program per fit
        Fb = 0.5 * (F[b] + F[b].T) + precision * eye
        ridge = (
            1e-10 * max(1.0, float(np.max(np.abs(np.diag(Fb))))) if np.all(np.isfinite(Fb)) else 0
        )
        try:
            Hb = np.linalg.inv(Fb + ridge * eye)
            if not np.all(np.isfinite(Hb)) or np.any(np.linalg.eigvalsh(Hb) <= 0):
                raise np.linalg.LinAlgError
        except np.linalg.LinAlgError:
            Hb = eye.copy()
        H[b] = Hb
    return H


def _bfgs_update(H, s, y, accepted, first):
    """The BFGS update of every accepting fit's inverse Hessian ``H: (B, p, p)`` at once.

    ``s``: the steps, ``y``: the changes in the gradient of ``-f`` (``(B, p)``); a fit updates
    where it accepted its step and the curvature ``s^T y`` is positive; at its ``first``
    iteration its Fisher start is first scaled to the curvature seen (Nocedal & Wright, 6.20).
    """
    sy = np.einsum("bi,bi->b", s, y)
    ok = accepted & (
        sy > 1e-12 * np.sqrt(np.einsum("bi,bi->b", s, s) * np.einsum("bi,bi->b", y, y))
    )
    safe = np.where(ok, sy, 1.0)
    yHy = np.einsum("bi,bij,bj->b", y, H, y)
    scale = np.where(ok & first, sy / np.where(ok & first, yHy, 1.0), 1.0)
    H = H * scale[:, None, None]
    V = np.eye(H.shape[-1]) - np.einsum("bi,bj->bij", s, y) / safe[:, None, None]
    updated = V @ H @ np.swapaxes(V, 1, 2) + np.einsum("bi,bj->bij", s, s) / safe[:, None, None]
    return np.where(ok[:, None, None], updated, H)


def minimize(
    evaluate: Callable[[np.ndarray, object], Evaluation],
    fisher: Callable[[np.ndarray, object], np.ndarray],
    select: Callable[[object, object, np.ndarray], object],
    x0: np.ndarray,
    sites0,
    center: np.ndarray,
    precision: float,
    *,
    n_iter: int,
    tol: float,
    report: Callable[[int, np.ndarray], None] | None = None,
    log_prior: Callable[[np.ndarray], tuple[np.ndarray, np.ndarray]] | None = None,
) -> Result:
    """Maximise ``f(x) = log Z_EP(x) - precision / 2 ||x - center||^2`` for each of ``B`` fits.

    Args:
        evaluate: ``(x: (B, p), sites) -> Evaluation`` (one compiled call per bucket).
        fisher: ``(x, evaluation) -> (B, p, p)``: the Fisher information at the start.
        select: ``(sites, new_sites, accepted: (B,) bool) -> sites``: each fit's new sites where
            it accepted its trial point.
        x0, center: ``(B, p)``; ``precision``: the hyperprior's ``1 / scale^2`` (0: none).
        n_iter: at most that many iterations per fit; ``tol``: the stopping rule (nats).
        report: called with ``(iteration, log_evidence: (B,))`` after each round that ends an
            iteration of some fit.
        log_prior: ``x -> (log p: (B,), gradient: (B, p))``, a hyperprior in place of the
            normal one (``center`` and ``precision`` then only scale the first inverse Hessian).
    """
    x = np.array(x0, np.float64)
    B, p = x.shape

    def hyperprior(x):
        if log_prior is None:
            dev = x - center
            return -0.5 * precision * np.sum(dev * dev, axis=1), -precision * dev
        return log_prior(x)

    def objective(x, sites, trial=True):
        e = evaluate(x, sites)
        lp, dlp = hyperprior(x)
        f = -e.neg_log_evidence + lp
        if trial:  # a trial point where EP did not converge is rejected: its evidence is wrong
            f = np.where(e.converged, f, -np.inf)
        g = -e.gradient + dlp
        return f, g, e

    f, g, e = objective(x, sites0, trial=False)
    bad = np.flatnonzero(~(np.isfinite(f) & np.all(np.isfinite(g), axis=1)))
    if bad.size:
        raise _nonfinite_start(int(bad[0]), e, *hyperprior(x))
    H = _initial_inverse_hessian(fisher(x, e), precision)
    sites, value = e.sites, e.neg_log_evidence
    sweeps, ep_ok = e.sweeps, e.converged
    rows: list[list] = [[] for _ in range(B)]
    active = np.full(B, n_iter > 0)
    converged = np.zeros(B, bool)
    new_iteration = np.ones(B, bool)
    direction = np.zeros((B, p))
    slope, step = np.zeros(B), np.zeros(B)
    halvings = np.zeros(B, int)
    while active.any():
        start = active & new_iteration
        if start.any():
            d = np.einsum("bij,bj->bi", H, g)
            longest = np.max(np.abs(d), axis=1)
            scale = np.where(longest > MAX_STEP, MAX_STEP / np.maximum(longest, 1e-300), 1.0)
            d = d * scale[:, None]  # a factor e^MAX_STEP on a scale at most
            direction = np.where(start[:, None], d, direction)
            slope = np.where(start, np.sum(g * d, axis=1), slope)
            step = np.where(start, 1.0, step)
            halvings = np.where(start, 0, halvings)
            new_iteration = new_iteration & ~start
        trial = np.where(active[:, None], x + step[:, None] * direction, x)
        f_new, g_new, e_new = objective(trial, sites)
        halvings = halvings + active
        armijo = np.isfinite(f_new) & (f_new >= f + ARMIJO * step * slope)
        ends = active & (armijo | (halvings >= MAX_HALVINGS))
        accepted = ends & armijo & np.all(np.isfinite(g_new), axis=1)
        for b in np.flatnonzero(active & ~ends):  # backtrack: one float each
            step[b] = backtrack(float(step[b]), float(f[b]), float(slope[b]), float(f_new[b]))
        if not ends.any():
            continue
        before = f.copy()
        H = _bfgs_update(H, trial - x, g - g_new, accepted, first=np.array([not r for r in rows]))
        x = np.where(accepted[:, None], trial, x)
        f = np.where(accepted, f_new, f)
        g = np.where(accepted[:, None], g_new, g)
        value = np.where(accepted, e_new.neg_log_evidence, value)
        sweeps = np.where(accepted, e_new.sweeps, sweeps)
        ep_ok = np.where(accepted, e_new.converged, ep_ok)
        sites = select(sites, e_new.sites, accepted)
        for b in np.flatnonzero(ends):
            rows[b].append((x[b].copy(), -value[b], before[b], f[b], sweeps[b], ep_ok[b]))
            predicted = 0.5 * float(g[b] @ H[b] @ g[b])
            if not accepted[b] or (f[b] - before[b] < tol and predicted < tol):
                active[b], converged[b] = False, True
            elif len(rows[b]) >= n_iter:
                active[b] = False
        new_iteration = new_iteration | ends
        if report is not None:
            report(max(len(r) for r in rows), -value)
    return Result(x, sites, rows, converged)
