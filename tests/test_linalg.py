"""PSD roots and blocked triangular products (``bayesrank.linalg``) against NumPy's dense
inverses and products, and the Cholesky-or-eigh root under ``vmap``.

Float64 references throughout (NumPy); in float32 the tolerances are the float64 ones scaled
to float32's epsilon (``helpers.assert_close``): these are round-off tolerances."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from helpers import assert_close, float32_param

from bayesrank import linalg


# float32 run (time): past one block; the others pass in float32 too
@pytest.mark.slow  # 3 s or more in the fast loop
@pytest.mark.parametrize("n", [5, 128, float32_param(129), 300, 1000, 1023])
def test_blocked_triangular_inverse_against_numpy(n):
    rng = np.random.default_rng(n)
    A = rng.standard_normal((n, n))
    L = np.linalg.cholesky(A @ A.T / n + np.eye(n))
    got = np.asarray(jax.jit(linalg.tril_inverse_t)(jnp.asarray(L)))
    assert_close(got, np.linalg.inv(L).T, atol=1e-12)
    assert np.all(np.tril(got, -1) == 0.0)


@pytest.mark.slow  # 3 s or more in the fast loop
@pytest.mark.parametrize("n", [float32_param(100), float32_param(300), 517])
def test_triangular_gram_against_dense_product(n):
    U = np.triu(np.random.default_rng(n).standard_normal((n, n)))
    got = np.asarray(linalg.gram(jnp.asarray(U), upper=True))
    assert_close(got, U @ U.T, atol=1e-11)


@pytest.mark.float32
@pytest.mark.parametrize("q", [64, 300])
def test_triangular_products_against_dense(q):
    rng = np.random.default_rng(q)
    T = np.triu(rng.standard_normal((2, q, q)))
    X = rng.standard_normal((2, 7, q))
    Y = rng.standard_normal((2, q, 5))
    assert_close(linalg.times_upper(X, T, min_size=32), X @ T, atol=1e-11)
    assert_close(linalg.upper_times(T, Y, min_size=32), T @ Y, atol=1e-11)


@pytest.mark.slow
@pytest.mark.float32
def test_prior_root_under_vmap_falls_back_only_where_needed():
    """A batch mixing a singular Gram matrix (identical points) with regular ones: each root
    satisfies ``M M^T = K`` (NumPy); the Cholesky roots equal the unbatched ones and NumPy's,
    the fallback's gives the unbatched fallback's ``M M^T`` (a root of a singular matrix is not
    unique: on a GPU, batched and unbatched ``eigh`` differ in its null space by 1e-9); nested
    vmap agrees."""
    rng = np.random.default_rng(11)
    A = rng.normal(size=(2, 7, 7))
    regular = A @ np.swapaxes(A, 1, 2) + np.eye(7)
    singular = np.ones((7, 7))  # seven copies of one point: rank one, the Cholesky fails
    assert not np.all(np.isfinite(jax.lax.linalg.cholesky(jnp.asarray(singular))))
    batch = jnp.asarray(np.stack([regular[0], singular, regular[1]]))
    roots = np.asarray(jax.jit(jax.vmap(linalg.prior_root))(batch))
    for b in range(3):
        assert_close(roots[b] @ roots[b].T, batch[b], atol=1e-12)
        single = np.asarray(linalg.prior_root(batch[b]))
        if b == 1:
            assert_close(roots[b] @ roots[b].T, single @ single.T, atol=1e-14)
        else:
            assert_close(roots[b], single, atol=1e-14)
    assert_close(roots[0], np.linalg.cholesky(regular[0]), atol=1e-12)
    nested = jax.vmap(jax.vmap(linalg.prior_root))(jnp.stack([batch, batch]))
    assert_close(nested[1], roots, atol=1e-14)
