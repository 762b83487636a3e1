"""A new engine runs the designs loop through the public engine protocol alone.

``Exact`` is written here, not in the package: the exact posterior when each row ``(i, j)``
observes ``y_s = 1 = xi_i - xi_j + e_s``, ``e_s ~ N(0, v)``, a Gaussian likelihood on the latent
differences. Its sites are ``tau_s = 1 / v``, ``nu_s = y_s / v`` and it fits in closed form. The
reference is NumPy on the same closed form with the prior's ARD formula written out, sharing no
code with the package: the loop's posterior mean at the shown designs (``propose``), and the
belief's moments at new designs (``latent``), are the joint Gaussian's.
"""

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from helpers import float64_only

from bayesrank.active.designs import belief as B
from bayesrank.active.designs import loop
from bayesrank.active.designs.loop import Settings, initial_theta, propose, run_batch
from bayesrank.inference.engine import GaussianEngine, GaussianFit
from bayesrank.inference.gaussian import Sites

pytestmark = float64_only("1e-9 agreement with a NumPy closed form")


@dataclasses.dataclass(frozen=True)
class Exact(GaussianEngine):
    """The exact posterior of ``y_s = xi_i - xi_j + e_s``, ``y_s = 1``, ``e_s ~ N(0, v)``."""

    v: float = 0.5

    def fit(self, K, rows, *, pair_mask=None, sites=None, outcomes=None):
        n, m = K.shape[0], rows.shape[0]
        valid = jnp.ones(m, bool) if pair_mask is None else pair_mask
        A = (jax.nn.one_hot(rows[:, 0], n) - jax.nn.one_hot(rows[:, 1], n)) * valid[:, None]
        y = valid.astype(K.dtype)
        # Woodbury: Sigma = K - K A^T C^-1 A K, C = A K A^T + v I (no inverse of K)
        C = A @ K @ A.T + self.v * jnp.eye(m, dtype=K.dtype)
        root = jnp.linalg.cholesky(C)
        KA = K @ A.T
        # one solve for both right-hand sides (independent LAPACK calls may run side by side,
        # which jaxlib 0.10's CPU thread pool does not survive: tests/lapack_order.py)
        both = jax.scipy.linalg.cho_solve((root, True), jnp.concatenate([y[:, None], KA.T], 1))
        mean = KA @ both[:, 0]
        cov = K - KA @ both[:, 1:]
        # log N(y | 0, C) over the real rows (a padded row: y = 0, its own N(0 | 0, v))
        log_det = 2.0 * jnp.sum(jnp.log(jnp.diag(root)))
        log_z = -0.5 * (y @ both[:, 0] + log_det + m * jnp.log(2 * jnp.pi))
        log_z = log_z + 0.5 * jnp.sum(~valid) * jnp.log(2 * jnp.pi * self.v)
        tau = jnp.where(valid, 1.0 / self.v, 0.0).astype(K.dtype)
        zero = jnp.zeros((), K.dtype)
        return GaussianFit(mean, cov, log_z, Sites(tau, y / self.v), jnp.int32(0), True, zero)


def _kernel(theta, X1, X2):
    """``kappa^2 exp(-1/2 sum_k ((x_k - x'_k) / ell_k)^2)``, written out in NumPy."""
    theta = np.asarray(theta)
    z1, z2 = np.asarray(X1) / np.exp(theta[1:]), np.asarray(X2) / np.exp(theta[1:])
    return np.exp(theta[0]) * np.exp(-0.5 * ((z1[:, None] - z2[None]) ** 2).sum(-1))


def _exact(theta, X, pairs, X_new, v):
    """NumPy: the posterior mean at ``X`` and the moments at ``X_new`` of the joint Gaussian."""
    n = len(X)
    A = np.zeros((len(pairs), n))
    A[np.arange(len(pairs)), pairs[:, 0]] = 1.0
    A[np.arange(len(pairs)), pairs[:, 1]] = -1.0
    Xa = np.concatenate([X, X_new])
    K = _kernel(theta, Xa, Xa)
    Aa = np.concatenate([A, np.zeros((len(pairs), len(X_new)))], axis=1)
    C = Aa @ K @ Aa.T + v * np.eye(len(pairs))
    gain = K @ Aa.T @ np.linalg.inv(C)
    mean = gain @ np.ones(len(pairs))
    cov = K - gain @ Aa @ K
    return mean[:n], mean[n:], cov[n:, n:]


def _shown(seed=0, n=8, m=6):
    rng = np.random.default_rng(seed)
    X = rng.random((n, 2))
    pairs = np.array([rng.choice(n, 2, replace=False) for _ in range(m)], np.int32)
    return X, pairs


@pytest.mark.slow
def test_a_toy_engine_proposes_with_its_exact_posterior():
    engine = Exact(v=0.5)
    X, pairs = _shown()
    pad = 2  # two padded designs and one padded pair, as a session's capacity has
    Xp = jnp.asarray(np.concatenate([X, np.full((pad, 2), 0.5)]))
    mask = jnp.arange(len(Xp)) < len(X)
    pp = jnp.asarray(np.concatenate([pairs, [[0, 1]]]).astype(np.int32))
    pair_mask = jnp.arange(len(pp)) < len(pairs)
    sites = Sites(jnp.zeros(len(pp)), jnp.zeros(len(pp)))
    settings = Settings(engine=engine, n_raw=16, n_starts=2, steps=5, learn_steps=3)
    theta0 = jnp.array([0.3, -1.0, -0.7])
    out = propose(Xp, mask, pp, pair_mask, sites, theta0, jax.random.key(0),
                  settings=settings, learn_now=True)  # fmt: skip
    assert out.X.shape == (2, 2) and np.all((out.X >= 0) & (out.X <= 1))
    assert not np.allclose(out.theta, theta0)  # learned on the toy's evidence
    X_new = np.random.default_rng(1).random((3, 2))
    mean, mean_new, cov_new = _exact(out.theta, X, pairs, X_new, engine.v)
    np.testing.assert_allclose(out.mean[: len(X)], mean, atol=1e-9)
    np.testing.assert_allclose(out.sites.tau[: len(pairs)], 1.0 / engine.v)
    # the belief the acquisition reads: the joint Gaussian's moments at new designs
    belief, _, _ = loop.posterior(out.theta, Xp, mask, pp, pair_mask, out.sites,
                                  jax.random.key(1), loop.check_settings(settings))  # fmt: skip
    got_mean, got_cov = B.latent(belief, jnp.asarray(X_new))
    np.testing.assert_allclose(got_mean, mean_new, atol=1e-9)
    np.testing.assert_allclose(got_cov, cov_new, atol=1e-9)
    got_shown, _ = B.latent(belief, jnp.asarray(X))
    np.testing.assert_allclose(got_shown, mean, atol=1e-9)


@pytest.mark.slow  # compiles a whole loop (about 15 s)
def test_a_toy_engine_runs_the_whole_loop():
    d, k, n_init = 2, 3, 2
    rng = np.random.default_rng(3)
    # learn_every=0: the toy's evidence gradient (learned in the test above) under vmap has
    # unordered batched LAPACK calls, which tests/lapack_order.py refuses; the package's engines
    # order theirs (runtime.after), a toy need not
    settings = Settings(engine=Exact(v=0.5), n_raw=16, n_starts=2, steps=5, learn_every=0)
    trace = run_batch(lambda x: -jnp.sum((x - 0.3) ** 2, -1),
                      jnp.asarray(rng.random((2, n_init, 2, d))),
                      jnp.asarray(rng.random((2, n_init + k))),
                      jax.random.split(jax.random.key(0), 2), 0.1, initial_theta(d), k=k,
                      settings=settings)  # fmt: skip
    assert trace.X.shape == (2, 2 * (n_init + k), d)
    assert np.all(np.isfinite(trace.best_guess)) and np.all(np.isfinite(trace.value))
    assert np.all((trace.X >= 0) & (trace.X <= 1))


def test_engines_are_objects_and_names_are_resolved_once():
    from bayesrank.active.designs.settings import check_settings
    from bayesrank.inference.engines import EP, NUTS, Laplace, SparseLaplace

    assert Settings().engine == EP()
    assert check_settings(Settings(engine="laplace")).engine == Laplace()
    assert check_settings(Settings(engine=Exact(v=2.0))).engine == Exact(v=2.0)
    # the name "nuts" is the loop's one-chain NUTS at nuts_warmup and nuts_samples
    named = check_settings(Settings(engine="nuts", nuts_warmup=30, nuts_samples=40)).engine
    assert named == NUTS(num_warmup=30, num_samples=40, num_chains=1)
    with pytest.raises(ValueError, match="cannot run the designs loop"):
        check_settings(Settings(engine=SparseLaplace()))
    with pytest.raises(ValueError, match=r"settings\.nuts_samples applies to engine='nuts'"):
        check_settings(Settings(engine=NUTS(), nuts_samples=3))
    with pytest.raises(ValueError, match=r"num_samples \* num_chains = 32768"):
        check_settings(Settings(engine=NUTS(num_samples=2**13, num_chains=4)))


@pytest.mark.slow  # compiles NUTS inside the proposal (about 20 s)
def test_a_nuts_object_with_two_chains_extends_all_its_draws():
    from bayesrank.inference.engines import NUTS

    X, pairs = _shown(2)
    settings = Settings(engine=NUTS(num_warmup=30, num_samples=20, num_chains=2), n_raw=16,
                        n_starts=2, steps=3, acquisition="qeubo")  # fmt: skip
    sites = Sites(jnp.zeros(len(pairs)), jnp.zeros(len(pairs)))
    out = propose(jnp.asarray(X), jnp.ones(len(X), bool), jnp.asarray(pairs),
                  jnp.ones(len(pairs), bool), sites, jnp.array([0.3, -1.0, -0.7]),
                  jax.random.key(0), settings=settings, learn_now=False)  # fmt: skip
    assert out.X.shape == (2, 2) and np.isfinite(float(out.value))
