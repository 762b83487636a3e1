"""The warning every iterative result raises when it stopped at its cap unconverged.

EP, Newton (Laplace), NUTS, hyperparameter learning and RankSVM each return a ``converged`` flag
(or diagnostics); where a façade returns a result whose flag is False it also warns, with a
``ConvergenceWarning`` (or a subclass) naming the cap, how many results hit it and what
to raise. Compiled code cannot warn: the pure cores return the flag only, and the façades, which
hand results back to the host anyway, read it there. Layer 0: NumPy only.
"""

from __future__ import annotations

import warnings

import numpy as np

__all__ = ["ConvergenceWarning", "unconverged_phrase", "warn_if_unconverged"]


class ConvergenceWarning(RuntimeWarning):
    """An iterative method stopped at its iteration cap before its convergence test held (a
    ``RuntimeWarning``: dubious runtime behaviour, as NumPy's overflow warnings)."""


def unconverged_phrase(converged, what: str) -> str | None:
    """``None`` where every flag holds, else ``"the EP fit"`` or ``"3 of 40 EP fits (queries
    [2, 7, 9])"`` (``converged``: a bool or an array of flags, one per query)."""
    flags = np.atleast_1d(np.asarray(converged, bool))
    if flags.all():
        return None
    if flags.size == 1:
        return f"the {what}"
    bad = np.flatnonzero(~flags.ravel())
    more = "..." if bad.size > 10 else ""
    return f"{bad.size} of {flags.size} {what}s (queries {bad[:10].tolist()}{more})"


def warn_if_unconverged(
    converged, what: str, advice: str, category=ConvergenceWarning, stacklevel: int = 3
) -> None:
    """Warn ``"{the EP fit} did not converge: {advice}"`` unless every flag holds."""
    phrase = unconverged_phrase(converged, what)
    if phrase is not None:
        warnings.warn(f"{phrase} did not converge: {advice}", category, stacklevel=stacklevel)
