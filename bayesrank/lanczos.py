"""Log-determinants of large symmetric positive-definite matrices by stochastic Lanczos quadrature.

For ``A: (n, n)`` SPD, given only as its matrix-vector product ``matvec: (n,) -> (n,)``,

    log det A = tr(log A) = E_z[z^T log(A) z],   z_i = +-1 with probability 1/2 (Rademacher),

and each quadratic form is a Gauss quadrature of ``A``'s spectral measure seen from ``z``:
``k`` Lanczos steps from ``z`` give a tridiagonal ``T = V diag(theta) V^T: (k, k)`` and

    z^T log(A) z ~= ||z||^2 sum_j tau_j^2 log(theta_j),   tau_j = V[0, j]

(Ubaru, Chen & Saad 2017, "Fast estimation of tr(f(A)) via stochastic Lanczos quadrature", Eq.
(6)-(7)). The estimate is the mean over ``S`` probes (``slq_logdet``); two matrices estimated
with the same probes (``slq_logdet_with_probes``) give a difference whose error is far smaller
than each one's (common random numbers), and the per-probe values let a caller compute it.

- ``lanczos``: the tridiagonal ``(alpha: (k,), beta: (k - 1,))`` of ``k`` Lanczos steps, the
  basis fully reorthogonalised (twice, classical Gram-Schmidt) and stored as ``(k, n)``;
- ``slq_logdet_with_probes``: ``(estimate, standard_error, per_probe: (S,))`` for given probes
  ``(S, n)``;
- ``slq_logdet``: ``(estimate, standard_error)`` with ``S`` fresh Rademacher probes.

Cost: ``S * k`` matrix-vector products plus ``O(S k^2 n)`` for the reorthogonalisation; memory:
``batch_size`` bases ``(k, n)`` at a time (probes run ``batch_size`` together, ``vmap``, the
batches one after another, ``lax.map``: a product with a matrix held in memory reads it once for
the batch). Everything is pure and jit-compatible; ``n``, ``S``, ``k`` and ``batch_size`` are
static.

The error has two parts. The probes' is the sampling error of a mean, stated as the standard
error (sample standard deviation over the probes / ``sqrt(S)``; for Rademacher probes each
value's variance is ``2 sum_{i != j} (log A)_ij^2``). Lanczos's is the quadrature's bias, not
stated: the ``k``-point Gauss rule is exact for polynomials of degree ``2k - 1`` and its error for
``log`` falls like ``((sqrt(kappa) - 1) / (sqrt(kappa) + 1))^(2k)`` in the condition number
``kappa``, so it is negligible once ``k`` is a few times ``sqrt(kappa)`` (and exactly zero once
``k`` reaches the dimension of the Krylov space, at most ``n``).
"""

from __future__ import annotations

from collections.abc import Callable

import jax
import jax.numpy as jnp

from .querymap import map_in_batches

__all__ = ["lanczos", "slq_logdet", "slq_logdet_with_probes"]

Matvec = Callable[[jax.Array], jax.Array]


def lanczos(matvec: Matvec, v0: jax.Array, n_steps: int) -> tuple[jax.Array, jax.Array]:
    """The Lanczos tridiagonal ``(alpha: (k,), beta: (k - 1,))`` of ``k = n_steps`` steps from
    ``v0: (n,)`` (normalised here; nonzero), for a symmetric ``matvec: (n,) -> (n,)``; in the
    promoted type of ``v0`` and ``matvec(v0)``.

    ``T = diag(alpha) + diag(beta, 1) + diag(beta, -1)`` is ``Q^T A Q`` for the orthonormal
    Krylov basis ``Q: (n, k)``, ``Q[:, 0] = v0 / ||v0||``. Each new basis vector is
    reorthogonalised against the whole stored basis ``(k, n)``, twice (classical Gram-Schmidt
    twice is as orthogonal as modified Gram-Schmidt, in two matrix products a pass instead of a
    loop): without it, Ritz values repeat ("ghosts") and the quadrature's weights are wrong.

    **Breakdown.** When the residual ``beta_j`` falls below ``sqrt(eps) ||A q_j||`` the Krylov
    space is exhausted (``k > n``, or ``v0`` lies in an invariant subspace) and the process
    stops: ``beta[j:] = 0`` and ``alpha[j + 1:] = alpha[0]``. ``T`` then splits into the
    Krylov block and a diagonal block that ``e_1`` does not reach: its eigenvectors' first
    components are 0, so its nodes carry no quadrature weight, and ``alpha[0]`` (a Rayleigh
    quotient, inside ``A``'s spectrum) keeps any ``f`` defined on the spectrum finite there.
    The number of steps that ran is ``1 +`` the number of leading nonzero ``beta``. Dropping a
    ``beta`` that small changes ``e_1^T f(T) e_1`` by ``O(beta^2)``, i.e. ``O(eps)``.
    """
    v0 = jnp.asarray(v0)
    # The basis takes the promoted type of ``v0`` and ``A v0``: float32 probes on a float64
    # matrix run in float64, as ``A @ v`` would.
    dtype = jnp.result_type(v0.dtype, jax.eval_shape(matvec, v0).dtype, float)
    v0 = v0.astype(dtype)
    n = v0.shape[0]
    tol = jnp.sqrt(jnp.finfo(v0.dtype).eps)
    q0 = v0 / jnp.linalg.norm(v0)
    basis = jnp.zeros((n_steps, n), v0.dtype).at[0].set(q0)

    def step(carry, j):
        basis, q_prev, q, beta_prev, alive = carry
        w = matvec(q).astype(dtype)
        scale = jnp.linalg.norm(w)
        alpha = jnp.vdot(q, w)
        w = w - alpha * q - beta_prev * q_prev
        # Rows of ``basis`` past ``j`` are still zero, so these project on ``q_0 .. q_j`` only.
        w = w - basis.T @ (basis @ w)
        w = w - basis.T @ (basis @ w)
        beta = jnp.linalg.norm(w)
        going = alive & (beta > tol * scale)
        q_next = jnp.where(going, w / jnp.where(going, beta, 1.0), 0.0)
        basis = jax.lax.dynamic_update_index_in_dim(
            basis, q_next, jnp.minimum(j + 1, n_steps - 1), 0
        )
        beta = jnp.where(going, beta, 0.0)
        return (basis, q, q_next, beta, going), (alpha, beta, alive)

    zero = jnp.zeros((), v0.dtype)
    init = (basis, jnp.zeros_like(q0), q0, zero, jnp.asarray(True))
    _, (alpha, beta, ran) = jax.lax.scan(step, init, jnp.arange(n_steps))
    return jnp.where(ran, alpha, alpha[0]), beta[:-1]


def _log_quadrature(alpha: jax.Array, beta: jax.Array) -> jax.Array:
    """``e_1^T log(T) e_1 = sum_j tau_j^2 log(theta_j)`` for the tridiagonal ``T`` of
    ``alpha: (k,)``, ``beta: (k - 1,)``."""
    T = jnp.diag(alpha) + jnp.diag(beta, 1) + jnp.diag(beta, -1)
    theta, V = jnp.linalg.eigh(T)
    return jnp.sum(V[0] ** 2 * jnp.log(theta))


def slq_logdet_with_probes(
    matvec: Matvec, probes: jax.Array, n_steps: int = 40, batch_size: int = 8
) -> tuple[jax.Array, jax.Array, jax.Array]:
    """``(estimate, standard_error, per_probe: (S,))`` of ``log det A`` from the given
    ``probes: (S, n)``, ``n_steps`` Lanczos steps each.

    ``per_probe[s] = ||z_s||^2 e_1^T log(T_s) e_1``, the quadrature of ``z_s^T log(A) z_s``; the
    estimate is their mean, and the standard error their sample standard deviation (``ddof=1``)
    over ``sqrt(S)``: NaN for ``S = 1``. Unbiased (up to the quadrature's bias) for probes with
    ``E[z z^T] = I`` (Rademacher or standard normal). Two matrices estimated with the same probes
    have correlated errors: the standard error of ``log det A - log det B`` is that of the
    per-probe differences, ``std(per_probe_A - per_probe_B, ddof=1) / sqrt(S)``. Probes run
    ``batch_size`` at a time (``querymap.map_in_batches``: ``vmap`` within a batch, one compiled
    body): that many ``(n_steps, n)`` bases are
    held at once, and each product with ``A`` serves the whole batch (the sparse evidence on
    HetRec's 10,197 movies at rank 300: 32 probes in 4.4 s instead of 8.2 s one at a time).
    """
    probes = jnp.asarray(probes)
    n_probes = probes.shape[0]

    alpha, beta = map_in_batches(lambda z: lanczos(matvec, z, n_steps), probes, batch_size)
    # the small eigendecompositions one at a time: batched LAPACK calls that may run side by
    # side deadlock jaxlib 0.10's CPU thread pool (docs/development/implementation.md)
    quadrature = jax.lax.map(lambda ab: _log_quadrature(*ab), (alpha, beta))
    per_probe = jnp.sum(probes * probes, axis=1) * quadrature
    estimate = jnp.mean(per_probe)
    se = jnp.std(per_probe, ddof=1) / jnp.sqrt(n_probes) if n_probes > 1 else jnp.nan * estimate
    return estimate, se, per_probe


def slq_logdet(
    matvec: Matvec,
    n: int,
    key: jax.Array,
    n_probes: int = 30,
    n_steps: int = 40,
    dtype=None,
) -> tuple[jax.Array, jax.Array]:
    """``(estimate, standard_error)`` of ``log det A`` for an SPD ``A: (n, n)`` given as
    ``matvec: (n,) -> (n,)``, from ``n_probes`` Rademacher probes drawn with ``key`` and
    ``n_steps`` Lanczos steps each (``n_probes * n_steps`` matrix-vector products).

    ``n``, ``n_probes`` and ``n_steps`` are static; ``dtype``, the probes', defaults to JAX's
    default float (the Lanczos basis takes the promoted type of the probes and ``matvec``'s
    output). The standard error covers the probes' sampling
    error only; the quadrature's bias is negligible when ``n_steps`` is a few times the square
    root of ``A``'s condition number (module docstring).
    """
    dtype = jnp.result_type(float) if dtype is None else dtype
    probes = jax.random.rademacher(key, (n_probes, n), dtype=dtype)
    estimate, se, _ = slq_logdet_with_probes(matvec, probes, n_steps)
    return estimate, se
