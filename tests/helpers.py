"""Helpers shared by the tests: counting XLA compilations (not timing them), and comparing a
result with its reference at the precision it was computed in (``assert_close``)."""

from __future__ import annotations

from contextlib import contextmanager

import jax
import numpy as np
import pytest

#: The monitoring event JAX records once per program it compiles (eager operations included),
#: also when the program is loaded from the persistent compilation cache instead ...
COMPILE_EVENT = "/jax/core/compile/backend_compile_duration"
#: ... which it records as a cache hit. A program that bayesrank kept whole
#: (``bayesrank.executables``) is loaded with neither: its own event counts it as both.
CACHE_HIT_EVENT = "/jax/compilation_cache/cache_hits"
KEPT_LOAD_EVENT = "/bayesrank/executables/loaded"

_active: list[list[int]] = []
_registered = False


def _listener(name, _duration, **_kwargs):
    if name == COMPILE_EVENT:
        for counter in _active:
            counter[0] += 1


def _hit_listener(name, **_kwargs):
    if name in (CACHE_HIT_EVENT, KEPT_LOAD_EVENT):
        for counter in _active:
            counter[1] += 1
            counter[0] += name == KEPT_LOAD_EVENT


@contextmanager
def count_compilations():
    """``with count_compilations() as n: ...``; afterwards ``n[0]`` is the number of programs
    the block did not find in the process's memory (jitted functions and eager operations
    alike): compiled by XLA, or loaded from the persistent compilation cache, which the tests
    turn on (conftest), or from the programs bayesrank keeps whole; ``n[1]`` is how many of
    those were loaded. "A second call compiles
    nothing" is ``n[0] == 0`` whether or not the cache is on; ``n[0] - n[1]`` were compiled."""
    global _registered
    if not _registered:
        jax.monitoring.register_event_duration_secs_listener(_listener)
        jax.monitoring.register_event_listener(_hit_listener)
        _registered = True
    counter = [0, 0]
    _active.append(counter)
    try:
        yield counter
    finally:
        _active.remove(counter)


# --- dtype-aware comparison -----------------------------------------------------------------

#: float64's machine epsilon: the unit the tests' float64 tolerances are written in.
EPS64 = float(np.finfo(np.float64).eps)
#: A derived tolerance is never below this many machine epsilons of ``actual``'s dtype: a value
#: computed in float32 and compared with a float64 reference differs by at least the half ulp
#: of its own rounding, and a few operations make it a few ulps.
FLOOR_EPS = 4
#: A derived relative tolerance (and a derived absolute one, against ``max(1, max|expected|)``)
#: above this is refused: a float64 tolerance that scales to it was not set by round-off (an
#: iterative method's stopping rule, a Monte Carlo error), and the test must say what float32
#: can promise (``rtol32=``, ``atol32=``).
MAX_DERIVED = 1e-2


def float64_only(reason: str):
    """``skipif`` x64 is off, its reason saying why float32 cannot test it."""
    return pytest.mark.skipif(not jax.config.jax_enable_x64, reason=f"float64 only: {reason}")


def float32_param(*values, **kwargs):
    """``pytest.param(*values)`` marked ``float32``: the cases of a parametrized test that the
    float32 run takes (the rest pass in float32 too, but are left out of that run for time)."""
    return pytest.param(*values, marks=pytest.mark.float32, **kwargs)


def float32_not_run(reason: str):
    """``skipif`` x64 is off, for a test float32 could run but that is left out of the float32
    run for its time (issue 33: that run adds about a minute to CI); the reason names what
    covers its float32 behaviour instead."""
    return pytest.mark.skipif(
        not jax.config.jax_enable_x64, reason=f"not run in float32 (time): {reason}"
    )


#: EP's stopping rule in a float32 run, where the float64 test asks for 1e-9 or tighter: a
#: sweep's largest change on O(1) marginals has a round-off floor near 1e-6 in float32 (8 ulps),
#: so 1e-5 is met, not reached by chance (the library's float32 default, 1e-3, is set for 1e4
#: pairs). Relative to the largest prior sd where that exceeds 1 (``ep.fit``'s ``rtol``).
EP_TOL32 = 1e-5
#: How far a float32 EP result may be from EP's fixed point (or another converged result):
#: ``EP_TOL32`` bounds the last sweep's change; with a contraction rate below 1/2 (these
#: small problems) the distance to the fixed point is below that, for each of two results
#: compared, plus float32 round-off (~1e-6): 3 ``EP_TOL32``, on O(1) marginals.
EP_ATOL32 = 3 * EP_TOL32


def ep_tol(tol64: float) -> float:
    """EP's ``tol``: the float64 test's own with x64 on, ``EP_TOL32`` with it off."""
    return tol64 if jax.config.jax_enable_x64 else EP_TOL32


def _precision(actual, dtype) -> np.dtype:
    dtype = np.dtype(dtype) if dtype is not None else np.asarray(actual).dtype
    return dtype if dtype.kind in "fc" else np.dtype(np.float64)  # integers, bools: as given


#: ``numpy.testing.assert_allclose``'s default ``rtol``: a float64 test that writes no ``rtol``
#: keeps it (converting ``assert_allclose(a, b, atol=x)`` keeps its strength), but it was
#: not written for the test, so no float32 tolerance is derived from it.
NUMPY_RTOL = 1e-7


def float32_tolerances(rtol, atol, *, rtol32=None, atol32=None, dtype=np.float32, scale=1.0):
    """The ``(rtol, atol)`` that ``assert_close`` uses for a result of ``dtype`` (see there);
    ``rtol=None``: none written by the test."""
    eps = float(np.finfo(dtype).eps)
    if eps <= EPS64:  # float64 (or wider): the test's own tolerance, unchanged
        return (NUMPY_RTOL if rtol is None else rtol), atol
    floor = FLOOR_EPS * eps
    if rtol32 is not None or atol32 is not None:  # the test states float32's promise
        return (floor if rtol32 is None else rtol32), (0.0 if atol32 is None else atol32)
    ratio = eps / EPS64
    rtol_d = floor if rtol is None else max(rtol * ratio, floor)
    atol_d = atol * ratio
    if rtol_d > MAX_DERIVED or atol_d > MAX_DERIVED * max(1.0, scale):
        raise ValueError(
            f"the float64 tolerances rtol={rtol}, atol={atol:g} scale to rtol={rtol_d:.3g}, "
            f"atol={atol_d:.3g} in {np.dtype(dtype).name}: not a round-off tolerance; give "
            "rtol32= and/or atol32= (what float32 can promise, and why, in the test)"
        )
    return rtol_d, atol_d


def assert_close(
    actual, expected, *, rtol=None, atol=0.0, rtol32=None, atol32=None, dtype=None, err_msg=""
):
    """``|actual - expected| <= atol + rtol |expected|`` elementwise (``numpy.testing.
    assert_allclose``: broadcasting, NaN equals NaN, its mismatch report on failure), with the
    tolerance set by the precision ``actual`` was computed in.

    - ``actual`` of float64 (``dtype``, when given, overrides ``actual``'s own; integers and
      bools count as float64): ``rtol`` and ``atol`` exactly as written, the float64 test
      (``rtol`` not written: NumPy's default, 1e-7, as ``assert_allclose`` has it).
    - ``actual`` of float32 (x64 off, ``BAYESRANK_TEST_X64=0``), where the test gives no float32
      tolerance: the ones it wrote scaled by ``eps(dtype) / eps(float64)`` (2^29 for float32).
      A float64 tolerance of ``k`` ulps of round-off (amplified by the problem's conditioning,
      which does not depend on the dtype) is then ``k`` ulps of float32: 1e-12 becomes 5.4e-4.
      The relative one is at least ``FLOOR_EPS`` ulps (4.8e-7 in float32), and is that floor
      where the test wrote none (NumPy's default is no statement about round-off). A derived
      tolerance above ``MAX_DERIVED`` (relative; absolute against ``max(1, max|expected|)``)
      raises: the float64 one was set by something other than round-off, so scaling it says
      nothing.
    - ``rtol32=`` / ``atol32=``: float32's tolerance stated by the test, where it knows better
      than the scaling: an iterative method (EP, Newton, an optimiser) whose float32 error is
      set by its own stopping rule, not by ``eps``. The one not given is then the floor
      (``rtol``) or 0 (``atol``). They replace the float64 tolerances only for a float32 (or
      narrower) ``actual``.

    Loud, never lenient: wherever ``expected`` is finite, ``actual`` must be finite (a NaN or
    inf fails, whatever the tolerance), and a mismatch reports the tolerance used and how it
    was derived.
    """
    precision = _precision(actual, dtype)
    got, want = np.asarray(actual), np.asarray(expected)
    scale = float(np.max(np.abs(want[np.isfinite(want)]), initial=0.0)) if want.size else 0.0
    r, a = float32_tolerances(
        rtol, atol, rtol32=rtol32, atol32=atol32, dtype=precision, scale=scale
    )
    written = NUMPY_RTOL if rtol is None else rtol
    how = f"{precision.name}: rtol={r:.3g}, atol={a:.3g}" + (
        "" if (r, a) == (written, atol) else f" (the float64 test's: rtol={rtol}, atol={atol:g})"
    )
    msg = f"{err_msg}\n{how}" if err_msg else how
    if got.dtype.kind in "fc" or want.dtype.kind in "fc":
        got_b, want_b = np.broadcast_arrays(got, want)
        bad = np.isfinite(want_b) & ~np.isfinite(got_b)
        if np.any(bad):
            where = [tuple(int(i) for i in ix) for ix in np.argwhere(bad)[:5]]
            raise AssertionError(
                f"{msg}\nactual is not finite where expected is: {int(bad.sum())} of "
                f"{bad.size} at {where}{' ...' if bad.sum() > 5 else ''}; "
                f"actual there: {got_b[bad][:5]}, expected: {want_b[bad][:5]}"
            )
    np.testing.assert_allclose(got, want, rtol=r, atol=a, err_msg=msg)


# --- Monte Carlo error ------------------------------------------------------------------------


def mcse_mean(x) -> float:
    """Monte Carlo standard error of the mean of ``x: (chains, draws)``: its sd over the square
    root of NumPyro's effective sample size (split chains, autocorrelation)."""
    from numpyro.diagnostics import effective_sample_size

    x = np.asarray(x)
    return float(x.std() / np.sqrt(effective_sample_size(x)))
