"""Stochastic Lanczos quadrature (bayesrank.lanczos) against dense NumPy: the tridiagonal's
eigenvalues against ``np.linalg.eigvalsh``, the quadrature of ``z^T log(A) z`` against ``eigh``,
the log-determinant against ``np.linalg.slogdet``, and the stated standard error's coverage over
independent runs."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from bayesrank.lanczos import lanczos, slq_logdet, slq_logdet_with_probes

X64 = pytest.mark.skipif(not jax.config.jax_enable_x64, reason="compares to 1e-8 (float64)")


def exact_tol(value):
    """1e-8 in float64; in float32, a relative 1e-5 (about a hundred roundings of ``eps = 1.2e-7``;
    the errors seen are 2e-7)."""
    return 1e-8 if jax.config.jax_enable_x64 else 1e-5 * abs(value)


def spd(n, c=1.0, scale=10.0, seed=0):
    """``c I + scale G G^T / n`` with standard normal ``G: (n, n)``: the eigenvalues of
    ``G G^T / n`` fill ``[0, 4]`` (Marchenko-Pastur), so the condition number is about
    ``1 + 4 scale / c`` (41 by default)."""
    G = np.random.default_rng(seed).normal(size=(n, n))
    return c * np.eye(n) + scale * G @ G.T / n


def quadratic_log(A, z):
    """``z^T log(A) z`` by NumPy's ``eigh``."""
    w, V = np.linalg.eigh(A)
    return (V.T @ z) ** 2 @ np.log(w)


def tridiagonal(alpha, beta):
    alpha, beta = np.asarray(alpha), np.asarray(beta)
    return np.diag(alpha) + np.diag(beta, 1) + np.diag(beta, -1)


@X64
def test_n_steps_give_the_matrix_eigenvalues():
    """With ``k = n`` the Krylov space is everything, so ``T`` is similar to ``A``: its
    eigenvalues are NumPy's ``eigvalsh(A)``."""
    A = spd(30, seed=1)
    z = np.random.default_rng(2).normal(size=30)
    alpha, beta = lanczos(lambda v: jnp.asarray(A) @ v, z, 30)
    assert alpha.shape == (30,) and beta.shape == (29,)
    np.testing.assert_allclose(
        np.linalg.eigvalsh(tridiagonal(alpha, beta)), np.linalg.eigvalsh(A), rtol=0, atol=1e-8
    )


def per_probe(A, z, n_steps):
    _, _, value = slq_logdet_with_probes(lambda v: jnp.asarray(A) @ v, z[None], n_steps)
    return float(value[0])


@pytest.mark.parametrize("n_steps", [30, 45, 90])
def test_breakdown_leaves_the_quadrature_exact(n_steps):
    """``n_steps >= n``: the Krylov space runs out at step ``n`` (no NaN; ``beta`` is zero from
    there on), and the quadrature is ``z^T log(A) z`` by NumPy's ``eigh``, to 1e-8 (float32:
    ``exact_tol``)."""
    A = spd(30, seed=3)
    z = np.random.default_rng(4).choice([-1.0, 1.0], size=30)
    alpha, beta = lanczos(lambda v: jnp.asarray(A) @ v, z, n_steps)
    assert np.all(np.isfinite(alpha)) and np.all(np.isfinite(beta))
    assert np.all(np.asarray(beta)[29:] == 0) and np.all(np.asarray(beta)[:29] > 0)
    want = quadratic_log(A, z)
    assert abs(per_probe(A, z, n_steps) - want) < exact_tol(want)


def test_an_invariant_subspace_breaks_down_early_and_exactly():
    """Three distinct eigenvalues: the Krylov space has dimension 3, so Lanczos stops after three
    steps of ten, and three nodes already give ``z^T log(A) z`` (NumPy's ``eigh``) to 1e-8
    (float32: ``exact_tol``)."""
    rng = np.random.default_rng(5)
    Q, _ = np.linalg.qr(rng.normal(size=(30, 30)))
    A = (Q * np.repeat([0.5, 2.0, 7.0], 10)) @ Q.T
    z = rng.choice([-1.0, 1.0], size=30)
    _, beta = lanczos(lambda v: jnp.asarray(A) @ v, z, 10)
    assert np.all(np.asarray(beta)[:2] > 0) and np.all(np.asarray(beta)[2:] == 0)
    want = quadratic_log(A, z)
    assert abs(per_probe(A, z, 10) - want) < exact_tol(want)


def test_the_estimate_agrees_with_slogdet():
    """``n = 500``, condition number about 40: within 3 standard errors of NumPy's ``slogdet``,
    and the standard error is below 2% of ``|log det A|``."""
    A = spd(500, seed=6)
    _, truth = np.linalg.slogdet(A)
    A = jnp.asarray(A)
    estimate, se = slq_logdet(lambda v: A @ v, 500, jax.random.key(0))
    assert abs(float(estimate) - truth) <= 3 * float(se)
    assert 0 < float(se) < 0.02 * abs(truth)


@pytest.mark.slow  # 3 s or more in the fast loop
def test_the_standard_error_covers_the_truth():
    """100 independent runs of 10 probes each on ``n = 200`` (one compiled program, vmapped over
    the keys), against NumPy's ``slogdet``. With the quadrature's bias negligible (40 steps,
    condition number about 40), ``(estimate - truth) / se`` is Student's t with 9 degrees of
    freedom where the per-probe values are normal (sums of many terms here), so ``|estimate -
    truth| <= 2 se`` in a fraction ``P(|t_9| <= 2) = 0.924`` of the runs; 0.85 is 2.8 binomial
    standard deviations (``sqrt(0.924 * 0.076 / 100) = 0.027``) below it. A stated error that
    were too large would pass that, so the spread of the 100 estimates must also match the
    stated errors' root mean square, within 20% (the spread's own relative error is about 7%)."""
    A = spd(200, seed=7)
    _, truth = np.linalg.slogdet(A)
    A = jnp.asarray(A)
    run = jax.jit(jax.vmap(lambda key: slq_logdet(lambda v: A @ v, 200, key, n_probes=10)))
    estimate, se = (np.asarray(x) for x in run(jax.random.split(jax.random.key(1), 100)))
    assert np.mean(np.abs(estimate - truth) <= 2 * se) >= 0.85
    spread = np.sqrt(np.mean((estimate - truth) ** 2))
    assert abs(spread / np.sqrt(np.mean(se**2)) - 1) < 0.2


def test_common_probes_give_a_difference_with_a_small_error():
    """``log det (P + U U^T) - log det P`` for a rank-5 ``U``, both estimated with the same 30
    probes: within 3 of the difference's standard error (the per-probe differences') of NumPy's
    ``slogdet``, an error over three times smaller than independent estimates' would have,
    ``sqrt(se_H^2 + se_P^2)`` (6.7 times here)."""
    P = spd(200, seed=9)
    U = 0.3 * np.random.default_rng(10).normal(size=(200, 5))
    H = P + U @ U.T
    truth = np.linalg.slogdet(H)[1] - np.linalg.slogdet(P)[1]
    probes = jax.random.rademacher(jax.random.key(3), (30, 200), dtype=jnp.result_type(float))
    H, P = jnp.asarray(H), jnp.asarray(P)
    _, se_h, per_h = slq_logdet_with_probes(lambda v: H @ v, probes)
    _, se_p, per_p = slq_logdet_with_probes(lambda v: P @ v, probes)
    diff = np.asarray(per_h - per_p)
    se = np.std(diff, ddof=1) / np.sqrt(30)
    assert abs(diff.mean() - truth) <= 3 * se
    assert se < np.hypot(float(se_h), float(se_p)) / 3


def test_float32_under_jit_is_finite_and_close():
    """Probes and matrix in float32, under ``jax.jit``: finite, and within 4 standard errors of
    NumPy's float64 ``slogdet`` (float32's round-off is far below the probes' error)."""
    A = spd(100, seed=8)
    _, truth = np.linalg.slogdet(A)
    A32 = jnp.asarray(A, jnp.float32)
    run = jax.jit(lambda key: slq_logdet(lambda v: A32 @ v, 100, key, dtype=jnp.float32))
    estimate, se = run(jax.random.key(2))
    assert estimate.dtype == jnp.float32 and se.dtype == jnp.float32
    assert np.isfinite(float(estimate)) and np.isfinite(float(se))
    assert abs(float(estimate) - truth) <= 4 * float(se)
