"""The one Newton solver of the RankSVM baselines: damped Newton with Armijo backtracking, Huber
continuation for the hinge, and implicit differentiation at the solution.

Both RankSVMs minimise, over a vector ``x`` (``w: (d,)`` or ``beta: (n,)``)::

    J_h(x) = R(x) + C sum_p mask_p l_h(r_p(x)),     r_p = 1 - (s_i - s_j)   for pair p = (i, j)

with scores ``s`` linear in ``x``, a quadratic regulariser ``R`` and the loss ``l`` of
``loss_terms``: the squared hinge ``max(0, r)^2``, or the hinge made Newton-friendly by
Chapelle's (2007) Huber smoothing of width ``h``. A problem reaches the solver as a
*parameterisation* ``parts(operands, h) -> Parts`` (see ``Parts``), where ``operands`` is the
pytree of differentiable inputs (features or Gram matrix, ``C``, pair weights) and ``h`` the
Huber width (None: the plain hinge, for reporting the objective).

``minimize`` runs, for each width of ``huber_widths`` (a single stage for the squared
hinge), ``damped_newton`` from the previous stage's solution on *stopped* operands, stopping
when ``||F(x)|| <= tol * ||F(0)||`` (``F`` the stage's residual; the norm is overflow- and
underflow-safe, so the rule is invariant to the scale of the problem). Then one Newton step on
the *live* operands at the stopped solution carries the derivative by the implicit function
theorem, ``dx/dtheta = -M^{-1} dF/dtheta``, so ``jax.grad`` is exact without differentiating
through the loop. Everything is a pure function (no ``jit`` here), so it runs under the caller's
``jit``, ``vmap`` and ``grad``; the Huber widths are a fixed-length traced array, so
``smoothing`` is not static.

Nothing fails silently: ``SolverInfo`` says why the solver stopped (``status``), a step or
residual that is not finite (overflow) is reported as ``NONFINITE`` and the last finite
iterate is returned, never NaN.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import jax
import jax.numpy as jnp

__all__ = [
    "CONVERGED",
    "MAX_ITER",
    "NONFINITE",
    "STALLED",
    "STATUS",
    "Parts",
    "SolverInfo",
    "damped_newton",
    "explain",
    "huber_widths",
    "loss_terms",
    "minimize",
    "safe_norm",
]

#: ``SolverInfo.status`` codes: met the tolerance; ran out of iterations; the line search found no
#: decrease (machine precision); a step, residual or objective was not finite (overflow).
CONVERGED, MAX_ITER, STALLED, NONFINITE = 0, 1, 2, 3
_RUNNING = -1
STATUS = {CONVERGED: "converged", MAX_ITER: "max_iter", STALLED: "stalled", NONFINITE: "non-finite"}

#: Huber widths of the hinge continuation above the final one: 1, 0.1, ..., 1e-15 (by repeated
#: division, as the schedule always was). Python floats: no array is built at import time.
_LADDER = (1.0,)
for _ in range(15):
    _LADDER = (*_LADDER, _LADDER[-1] / 10.0)
_LINE_SEARCH_HALVINGS = 30


class SolverInfo(NamedTuple):
    """Diagnostics of a Newton solve (scalars; batched under ``vmap``).

    Attributes:
        objective: ``J`` at the returned solution (for the hinge: the *hinge* objective; after
            an overflow, the last finite objective of the solve, smoothed for the hinge).
        grad_norm: the final stopping quantity ``||F(x)||`` of the last stage.
        n_iter: Newton iterations, summed over the continuation stages of the hinge.
        converged: whether the last stage met its tolerance within ``max_iter``
            (``status == CONVERGED``).
        status: int32, why the last stage stopped (``STATUS`` maps codes to words).
    """

    objective: jax.Array
    grad_norm: jax.Array
    n_iter: jax.Array
    converged: jax.Array
    status: jax.Array


class Parts(NamedTuple):
    """One problem at one Huber width, as functions of ``x``.

    Attributes:
        value: ``x -> J_h(x)``, a scalar.
        residual: ``x -> F(x)``, zero exactly at the minimiser (the gradient, or the gradient
            preconditioned as in Chapelle's kernel step); the stopping quantity is ``||F||``.
        step: ``x -> (delta, slope)``: the Newton step ``delta = -M(x)^{-1} F(x)`` and the
            directional derivative ``<grad J_h(x), delta>`` (negative for a descent step).
    """

    value: Callable[[jax.Array], jax.Array]
    residual: Callable[[jax.Array], jax.Array]
    step: Callable[[jax.Array], tuple[jax.Array, jax.Array]]


def loss_terms(r, loss: str, h):
    """``l(r), l'(r), l''(r)`` elementwise for ``r: (m,)``.

    ``loss = "squared_hinge"``: ``max(0, r)^2`` (``h`` unused). ``loss = "hinge"``: with
    ``h = None`` the plain hinge ``max(0, r)`` (objective reporting only); otherwise Chapelle's
    Huber smoothing ``l_h(r) = r`` for ``r > h``, ``(r + h)^2 / (4 h)`` for ``|r| <= h``, 0 below.
    """
    if loss == "squared_hinge":
        rp = jnp.maximum(r, 0.0)
        return rp**2, 2.0 * rp, 2.0 * (r > 0).astype(r.dtype)
    if h is None:
        return jnp.maximum(r, 0.0), (r > 0).astype(r.dtype), jnp.zeros_like(r)
    band = jnp.abs(r) <= h
    value = jnp.where(r > h, r, jnp.where(band, (r + h) ** 2 / (4 * h), 0.0))
    d1 = jnp.where(r > h, 1.0, jnp.where(band, (r + h) / (2 * h), 0.0))
    d2 = jnp.where(band, 1.0 / (2 * h), 0.0)
    return value, d1, d2


def huber_widths(smoothing, dtype) -> tuple[jax.Array, jax.Array]:
    """The hinge continuation ``1, 0.1, ...`` down to ``smoothing``, in a fixed-length array.

    The widths of the ladder above ``smoothing`` (``h > smoothing (1 + 1e-12)``), then
    ``smoothing`` itself, then ``smoothing`` repeated to fill ``len(ladder) + 1 = 17`` slots. The
    length does not depend on ``smoothing``, so it may be traced; below ``1e-15`` the
    continuation jumps from ``1e-15`` straight to ``smoothing``.

    Returns:
        ``(widths: (17,), n_stages)``: the schedule is ``widths[:n_stages]`` (int32 scalar) and
        ``widths[n_stages - 1] == widths[-1] == smoothing``.
    """
    s = jnp.asarray(smoothing, dtype)
    ladder = jnp.append(jnp.asarray(_LADDER, dtype), s)
    n_keep = jnp.sum(ladder[:-1] > s * (1 + 1e-12)).astype(jnp.int32)  # a prefix: it decreases
    widths = jnp.where(jnp.arange(len(ladder)) < n_keep, ladder, s)
    return widths, n_keep + 1


def safe_norm(x):
    """``||x||_2`` scaled by ``max |x|``: no overflow above ``1e154`` nor underflow below
    ``1e-154`` (inf or NaN entries give inf or NaN)."""
    top = jnp.max(jnp.abs(x))
    ok = (top > 0) & jnp.isfinite(top)
    scale = jnp.where(ok, top, 1.0)
    return jnp.where(ok, scale * jnp.sqrt(jnp.sum((x / scale) ** 2)), top)


def explain(status: int, grad_norm: float, max_iter: int, dtype) -> str:
    """Why a solve with ``SolverInfo`` ``status`` and ``grad_norm`` stopped, in words."""
    name = jnp.dtype(dtype).name
    return {
        CONVERGED: "it converged",
        MAX_ITER: f"max_iter={max_iter} Newton iterations ended with a residual {grad_norm:.3g} "
        "above tol (raise max_iter or tol)",
        STALLED: f"the line search found no decrease at {name} precision with a residual "
        f"{grad_norm:.3g} still above tol (loosen tol)",
        NONFINITE: f"the Newton system overflowed in {name} or is singular (a non-finite "
        "matrix, step or objective; singular e.g. for the hinge at a large C * max|x_i - x_j|^2)",
    }[status]


class _State(NamedTuple):
    x: jax.Array
    value: jax.Array
    grad_norm: jax.Array
    it: jax.Array
    status: jax.Array


def damped_newton(x0, parts: Parts, threshold, max_iter: int) -> _State:
    """Newton steps with Armijo backtracking until ``||F(x)|| <= threshold``.

    Each step ``x + t delta`` takes the first ``t`` in ``1, 1/2, ..., 2^-30`` with
    ``J(x + t delta) <= J(x) + 1e-4 t slope + 10 eps |J(x)|`` (the last term absorbs rounding at
    the optimum). Stops converged, after ``max_iter`` steps, when no ``t`` decreases ``J``
    or leaves ``x`` unchanged (stalled at machine precision), or when a step or residual is not
    finite (the iterate is then left where it was).

    Returns:
        ``(x, value, grad_norm, it, status)`` with ``status`` one of the ``STATUS`` codes.
    """
    dtype = x0.dtype
    eps = jnp.finfo(dtype).eps

    def line_search(x, value, delta, slope):
        def cond(c):
            t, v_new, k = c
            ok = v_new <= value + 1e-4 * t * slope + 10 * eps * jnp.abs(value)
            return (~ok) & (k < _LINE_SEARCH_HALVINGS)

        def body(c):
            t, _, k = c
            t = 0.5 * t
            return t, parts.value(x + t * delta), k + 1

        init = (jnp.ones((), dtype), parts.value(x + delta), 0)
        t, v_new, k = jax.lax.while_loop(cond, body, init)
        return t, v_new, (k < _LINE_SEARCH_HALVINGS) | (v_new <= value)

    def body(s):
        delta, slope = parts.step(s.x)
        finite = jnp.isfinite(slope)  # NaN or inf in delta make the slope so
        t, v_new, ok = line_search(s.x, s.value, delta, slope)
        ok = ok & finite  # an overflowed step is not taken
        x = jnp.where(ok, s.x + t * delta, s.x)
        value = jnp.where(ok, v_new, s.value)
        gn = safe_norm(parts.residual(x))
        it = s.it + 1
        stuck = ~ok | jnp.all(x == s.x)  # no decrease, or a step too small to move x
        status = jnp.where(it >= max_iter, MAX_ITER, _RUNNING)
        status = jnp.where(stuck, STALLED, status)
        status = jnp.where(finite & jnp.isfinite(gn), status, NONFINITE)
        status = jnp.where(gn <= threshold, CONVERGED, status)
        return _State(x, value, gn, it, status.astype(jnp.int32))

    g0 = safe_norm(parts.residual(x0))
    v0 = parts.value(x0)
    status0 = jnp.where(g0 <= threshold, CONVERGED, MAX_ITER if max_iter <= 0 else _RUNNING)
    finite0 = jnp.isfinite(g0) & jnp.isfinite(v0) & jnp.isfinite(threshold)
    status0 = jnp.where(finite0, status0, NONFINITE).astype(jnp.int32)
    init = _State(x0, v0, g0, jnp.zeros((), jnp.int32), status0)
    return jax.lax.while_loop(lambda s: s.status == _RUNNING, body, init)


def minimize(
    parts_fn: Callable[..., Parts],
    operands,
    x0,
    *,
    loss: str,
    tol,
    max_iter: int,
    smoothing,
) -> tuple[jax.Array, SolverInfo]:
    """Minimise ``J`` by Newton with continuation; gradients by the implicit function theorem.

    Args:
        parts_fn: ``(operands, h) -> Parts`` (``h`` a width, or None for the plain hinge).
        operands: pytree of the inputs that ``x*`` depends on (differentiable ones included).
        x0: ``(k,)`` float starting point; its dtype is the solver's.
        loss: ``"squared_hinge"`` (one stage) or ``"hinge"`` (one stage per Huber width).
        tol: relative tolerance (may be traced): stop at ``||F(x)|| <= tol * ||F(0)||``.
        max_iter: Newton iterations per stage (static: it bounds a loop).
        smoothing: final Huber width for the hinge (may be traced); unused for the squared hinge.

    Returns:
        ``(x: (k,), SolverInfo)``: ``x`` is finite (the last finite iterate when the solve
        overflowed, with ``status == NONFINITE``).
    """
    dtype = x0.dtype
    stopped = jax.lax.stop_gradient(operands)
    x0 = jax.lax.stop_gradient(x0)  # the solution does not depend on the starting point
    zero = jnp.zeros_like(x0)
    if loss == "hinge":
        widths, n_stages = huber_widths(smoothing, dtype)
    else:  # one stage; the width is unused
        widths, n_stages = jnp.ones(1, dtype), 1

    def stage(carry):
        k, x, n_iter, _, _, _ = carry
        parts = parts_fn(stopped, widths[k])
        s = damped_newton(x, parts, tol * safe_norm(parts.residual(zero)), max_iter)
        return k + 1, s.x, n_iter + s.it, s.status, s.grad_norm, s.value

    nothing = jnp.zeros((), dtype)
    init = (0, x0, jnp.zeros((), jnp.int32), jnp.int32(CONVERGED), nothing, nothing)
    if loss == "hinge":
        # One Newton solve per width; a width that overflowed ends the continuation (the next
        # would start from nonsense) and its status and residual stay for the report.
        def more(carry):
            return (carry[0] < n_stages) & (carry[3] != NONFINITE)

        carry = jax.lax.while_loop(more, stage, init)
    else:
        carry = stage(init)
    _, x, n_iter, status, grad_norm, last = carry

    # Implicit differentiation: one Newton step on the live operands at the stopped solution.
    # It is not taken after an overflow, nor where it is not finite or leaves J non-finite;
    # the objective is then the last finite one of the solve. A finite step that raises J_h
    # beyond rounding is not taken either (only its derivative is kept): at a large C the
    # margins of the solution round to 1, every pair looks inactive, and the step of that local
    # model jumps to x = 0.
    x = jax.lax.stop_gradient(x)
    delta, _ = parts_fn(operands, widths[-1]).step(x)  # widths[-1] is the final width
    stepped = x + delta
    final = jax.lax.stop_gradient(parts_fn(stopped, widths[-1]).value(stepped))
    finite = (status != NONFINITE) & jnp.isfinite(final)  # a non-finite step makes J so
    eps = jnp.finfo(dtype).eps
    worse = final > last + 10 * eps * jnp.abs(last)
    tangent = x + (delta - jax.lax.stop_gradient(delta))  # the value x, the derivative of delta
    x = jnp.where(finite & ~worse, stepped, jnp.where(finite, tangent, x))
    objective = jax.lax.stop_gradient(parts_fn(stopped, None).value(x))
    ok = finite & jnp.isfinite(objective)
    objective = jnp.where(ok, objective, last)
    status = jnp.where(ok, status, NONFINITE)
    info = SolverInfo(objective, grad_norm, n_iter, status == CONVERGED, status)
    return x, info
