"""The study's compiled programs: the pure cores of ``bayesrank.baselines`` under one ``jit``
each. Imported inside the functions that fit (the command line imports the study to build its
parser, and chooses JAX's platform before JAX is first imported)."""

from __future__ import annotations

from functools import partial

from ...baselines import prank, rankboost, ranksvm
from ...compiler import jit


@partial(jit, static_argnames=("loss",))
def fit_ranksvm(X, pairs, C, w0, loss):
    """``ranksvm.fit_linear`` from the warm start ``w0: (d,)`` (``C`` traced: a grid compiles
    once)."""
    return ranksvm.fit_linear(X, pairs, C, loss=loss, w0=w0)


@partial(jit, static_argnames=("n_rounds", "complements"))
def fit_rankboost(X, pairs, thresholds, n_rounds, complements):
    """``rankboost.fit`` for ``n_rounds`` rounds."""
    return rankboost.fit(X, pairs, thresholds, n_rounds=n_rounds, complements=complements)


@jit
def predict_rankboost(model, X, n_rounds):
    """``rankboost.predict`` of the first ``n_rounds`` rounds (traced: every prefix of a grid
    shares one program)."""
    return rankboost.predict(model, X, None, n_rounds)


@partial(jit, static_argnames=("n_grades", "n_epochs"))
def fit_prank(X, y, order, n_grades, n_epochs):
    """Averaged ``prank.fit`` visiting ``order: (n_epochs, n)``."""
    return prank.fit(X, y, n_grades, n_epochs=n_epochs, order=order, averaged=True)
