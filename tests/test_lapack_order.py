"""Batched LAPACK calls run one at a time (jaxlib 0.10's CPU deadlock), and ``runtime.after``.

Two batched LAPACK calls that a compiled program may run side by side can hang jaxlib 0.10's
CPU runtime (``tests/lapack_order.py``); the library orders its own with ``runtime.after``, and
conftest checks every program the suite compiles. The checker is tested on programs whose order
is known by construction, then run on the library's programs that hung before their calls were
chained: the preferential-optimisation loop (NUTS beside EP), mixed-precision EP under ``vmap``
and a collection's size groups under ``vmap``. A run of the whole suite with the checker on
every compiled program found no other.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from lapack_order import allowed, side_by_side

from bayesrank.runtime import after


def _spd(batch, n, seed=0):
    X = np.random.default_rng(seed).standard_normal((batch, n, n))
    return jnp.asarray(X @ np.swapaxes(X, 1, 2) + n * np.eye(n))


def _hlo(f, *args):
    return jax.jit(f).lower(*args).compile().as_text()


def _independent(A, C):
    """A Cholesky factorisation and its solve, and an eigendecomposition of another matrix."""
    L = jnp.linalg.cholesky(A)
    x = jax.scipy.linalg.solve_triangular(L, C, lower=True)
    return x, jnp.linalg.eigh(C)[0]


def _chained(A, C):
    L = jnp.linalg.cholesky(A)
    x = jax.scipy.linalg.solve_triangular(L, C, lower=True)
    return x, jnp.linalg.eigh(after(C, x))[0]


def test_the_checker_finds_independent_batched_calls_and_passes_ordered_ones():
    A = _spd(3, 4)
    with allowed():  # conftest's check of every compiled program would refuse this one
        pairs = side_by_side(_hlo(jax.vmap(_independent), A, A))
    # the eigendecomposition is ordered against neither the factorisation nor the solve
    assert {frozenset(p[1:]) for p in pairs} == {
        frozenset(("cholesky.0", "eigh.0")),
        frozenset(("eigh.0", "triangular_solve.0")),
    }
    assert side_by_side(_hlo(jax.vmap(_chained), A, A)) == []
    # one matrix at a time (no vmap): nothing is split over the thread pool
    assert side_by_side(_hlo(_independent, A[0], A[0])) == []


def test_the_checker_sees_calls_inside_a_loop():
    """A factorisation inside a ``while`` loop beside one outside it: the loop instruction holds
    the call, so the pair is reported, and ``after`` orders it."""

    def loop(A):
        def body(c):
            i, A = c
            L = jnp.linalg.cholesky(A)
            return i + 1, A + 1e-3 * (L @ jnp.swapaxes(L, -1, -2))

        return jax.lax.while_loop(lambda c: c[0] < 3, body, (0, A))[1]

    def side(A, C):
        return loop(A), jnp.linalg.cholesky(C)

    def ordered(A, C):
        out = loop(A)
        return out, jnp.linalg.cholesky(after(C, out))

    A = _spd(4, 5)
    with allowed():
        pairs = side_by_side(_hlo(jax.vmap(side), A, A))
    assert len(pairs) == 1 and any(name.startswith("while") for name in pairs[0][1:])
    assert side_by_side(_hlo(jax.vmap(ordered), A, A)) == []


def test_every_program_the_suite_compiles_is_checked():
    """conftest installs the check (``lapack_order.install``): a program with two unordered
    batched calls fails where it is compiled, naming their source lines."""
    A = _spd(2, 6)
    with pytest.raises(AssertionError, match=r"(?s)runtime\.after.*test_lapack_order\.py:\d+"):
        jax.jit(jax.vmap(_independent))(A, A)
    jax.jit(jax.vmap(_chained))(A, A)  # ordered: compiles and runs


def test_after_changes_no_value_and_no_gradient():
    x = {"a": jnp.array([1.5, -0.0, np.inf, np.nan]), "b": jnp.arange(3), "c": jnp.array([True])}
    for deps in ((jnp.array([2.0]),), (jnp.array([np.nan, 1.0]), jnp.array([-np.inf])), ()):
        out = jax.jit(lambda x, d: after(x, *d))(x, deps)
        np.testing.assert_array_equal(out["a"], x["a"])  # NaN where NaN, inf where inf
        assert out["b"].dtype == x["b"].dtype and out["c"].dtype == x["c"].dtype
        np.testing.assert_array_equal(out["b"], x["b"])
        np.testing.assert_array_equal(out["c"], x["c"])
    # gradients: the identity for x, none for a dependency, whatever its value
    d = jnp.array([3.0, np.inf])
    gx, gd = jax.grad(lambda v, d: jnp.sum(after(v, d) ** 2), argnums=(0, 1))(
        jnp.array([1.0, -2.0]), d
    )
    np.testing.assert_array_equal(gx, [2.0, -4.0])
    np.testing.assert_array_equal(gd, [0.0, 0.0])


@pytest.mark.slow  # compiles the whole loop of each engine (5 s, 5 s and 27 s)
@pytest.mark.parametrize("engine", ["ep", "laplace", "nuts"])
def test_the_optimisation_loop_runs_its_batched_calls_one_at_a_time(engine):
    """``run_batch`` (seeds under ``vmap``): NUTS's factorisations beside EP's loop hung a
    10-seed run of ``benchmarks/bench_pbo.py --engine nuts`` before ``runtime.after`` chained
    them; every engine's program must order all of its batched calls."""
    from bayesrank.active.designs.loop import Settings, initial_theta, run_batch

    seeds, n_init, k, d = 3, 2, 2, 2
    rng = np.random.default_rng(0)
    X = jnp.asarray(rng.uniform(size=(seeds, n_init, 2, d)))
    U = jnp.asarray(rng.uniform(size=(seeds, n_init + k)))
    keys = jax.random.split(jax.random.key(0), seeds)
    settings = Settings(engine=engine, n_raw=16, n_starts=2, steps=2, learn_steps=2,
                        nuts_warmup=4, nuts_samples=4)  # fmt: skip
    lowered = run_batch.lower(lambda x: -jnp.sum(x**2, -1), X, U, keys, 0.1,
                              initial_theta(d), k=k, settings=settings)  # fmt: skip
    assert side_by_side(lowered.compile().as_text()) == []


@pytest.mark.slow
def test_mixed_precision_ep_under_vmap_orders_its_two_roots():
    """``precision="mixed"``: the float64 root of ``K`` and the float32 loop's own root and
    factorisations, for a batch of problems (``jax.vmap(ep.fit)``)."""
    from bayesrank.inference import ep

    batch, n, m = 3, 8, 12
    rng = np.random.default_rng(1)
    K = _spd(batch, n, seed=1)
    pairs = jnp.asarray(
        np.stack([[rng.choice(n, 2, replace=False) for _ in range(m)] for _ in range(batch)]),
        jnp.int32,
    )
    fit = jax.vmap(lambda K, p: ep.fit(K, p, precision="mixed", max_iter=20).log_evidence)
    assert side_by_side(_hlo(fit, K, pairs)) == []


@pytest.mark.slow  # runs and compiles a collection twice (8 s)
@pytest.mark.parametrize("method", ["map", "vmap"])
def test_a_collection_runs_its_size_groups_one_after_another(monkeypatch, method):
    """``parallel.fit_predict`` on a CPU: with ``method="vmap"`` each size group's batched EP
    ran beside the next group's (an OHSUMED run sat idle for 300 s; 61 s once chained)."""
    from test_parallel import PRIOR, problems

    from bayesrank import parallel
    from bayesrank.parallel import program

    calls = []
    original = program._collection_jit

    def record(*args, **kwargs):
        calls.append((args, kwargs))
        return original(*args, **kwargs)

    monkeypatch.setattr(program, "_collection_jit", record)
    probs = problems(0, [(10, 15), (70, 140)])  # two size groups, too far apart to merge
    parallel.fit_predict(PRIOR, probs, [p.pairs[:3] for p in probs], method=method)
    ((args, kwargs),) = calls
    assert len(args[1]) == 2  # the blocks of two groups
    assert side_by_side(original.lower(*args, **kwargs).compile().as_text()) == []
