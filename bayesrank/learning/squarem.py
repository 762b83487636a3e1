"""SQUAREM (Varadhan & Roland 2008, scheme S3): the acceleration of a fixed-point map such as an
EM iteration, which for variance components converges linearly, often at a rate near 1.

One cycle is three steps of the map ``F`` from ``x``: ``x1 = F(x)``, ``x2 = F(x1)``, ``r = x1 -
x``, ``s = x2 - 2 x1 + x``, ``alpha = min(-|r| / |s|, -1)`` and the next point ``F(x - 2 alpha r
+ alpha^2 s)``; ``alpha = -1`` is the plain map's two steps. An extrapolation past a factor of
``max_move`` from ``x2`` in any coordinate is clipped, and a proposal whose image is not finite
is refused (the cycle keeps ``x2``).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

__all__ = ["squarem"]


def squarem(
    step: Callable[[np.ndarray], np.ndarray],
    x: np.ndarray,
    max_iter: int,
    tol: float,
    max_move: float = np.log(100.0),
) -> tuple[np.ndarray, list[np.ndarray], bool]:
    """``(x, trace, converged)``: SQUAREM cycles of ``step`` from ``x: (p,)`` (module
    docstring) while three more steps fit in ``max_iter``; ``trace`` the cycles' points from
    ``x``; ``converged``: the last cycle's step moved no coordinate by more than ``tol``."""
    x = np.asarray(x, float)
    trace, converged, steps = [x], False, 0
    while steps + 3 <= max_iter and not converged:
        x1 = step(x)
        x2 = step(x1)
        r, s = x1 - x, x2 - 2 * x1 + x
        alpha = min(-np.linalg.norm(r) / max(np.linalg.norm(s), 1e-300), -1.0)
        proposal = np.clip(x - 2 * alpha * r + alpha**2 * s, x2 - max_move, x2 + max_move)
        new = step(proposal)
        steps += 3
        if not np.all(np.isfinite(new)):
            new = x2
        converged = bool(np.max(np.abs(new - proposal), initial=0.0) <= tol)
        x = new
        trace.append(x)
    return x, trace, converged
