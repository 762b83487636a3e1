"""A graph's Laplacian spectrum is computed once per process and then served from the store
(``bayesrank.kernels.spectra``): the same values as a fresh diagonalisation, read-only, a graph
changed in place recomputed, and the store kept within its byte budget.

The reference is the Laplacian written out by hand, compared with the spectrum's reconstruction
``V diag(lam) V^T`` (eigenvectors are defined up to sign), to 1e-12 (1e-4 in float32).
"""

import jax.numpy as jnp
import numpy as np
import pytest

from bayesrank.kernels import graph, laplacian_spectrum, spectra

#: The reconstruction's tolerance in the working dtype (float32: eigh's round-off on entries up
#: to a node's degree, about 10).
ATOL = 1e-12 if jnp.result_type(float) == jnp.float64 else 1e-4


def _random_graph(n: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    W = rng.uniform(0.0, 2.0, (n, n)) * (rng.uniform(size=(n, n)) < 0.3)
    W = np.triu(W, 1)
    return W + W.T


def _reconstruct(s) -> np.ndarray:
    return (np.asarray(s.evecs) * np.asarray(s.evals)) @ np.asarray(s.evecs).T


@pytest.fixture(autouse=True)
def _empty_store():
    spectra.clear()
    yield
    spectra.clear()


def test_a_second_call_on_an_equal_graph_is_served_and_equals_numpys_eigh(monkeypatch):
    W = _random_graph(40, 0)
    first = laplacian_spectrum(W)
    calls = []
    original = graph._host_spectrum
    monkeypatch.setattr(
        graph, "_host_spectrum", lambda *a: calls.append(1) or original(*a)
    )  # fmt: skip
    again = laplacian_spectrum(W.copy())  # an equal graph, another array
    assert calls == [] and again.evecs is first.evecs and again.evals is first.evals
    L = np.diag(W.sum(axis=1)) - W
    np.testing.assert_allclose(_reconstruct(again), L, atol=ATOL)
    assert not again.evecs.flags.writeable and not again.evals.flags.writeable
    # the normalized Laplacian of the same graph is another key
    normalized = laplacian_spectrum(W, normalized=True)
    assert calls == [1]
    d = W.sum(axis=1)
    L_norm = np.eye(40) - W / np.sqrt(np.outer(d, d))
    np.testing.assert_allclose(_reconstruct(normalized), L_norm, atol=ATOL)


def test_a_graph_changed_in_place_is_diagonalised_again():
    W = _random_graph(30, 1)
    before = laplacian_spectrum(W)
    W[0, 1] = W[1, 0] = W[0, 1] + 1.0
    after = laplacian_spectrum(W)
    assert after.evecs is not before.evecs
    np.testing.assert_allclose(_reconstruct(after), np.diag(W.sum(axis=1)) - W, atol=ATOL)


def test_the_store_keeps_within_its_budget_least_recently_used_first(monkeypatch):
    n = 20
    one = (n * n + n) * np.dtype(jnp.result_type(float)).itemsize  # eigenvectors and values
    monkeypatch.setattr(spectra, "MAX_BYTES", 2 * one)
    graphs = [_random_graph(n, seed) for seed in range(3)]
    a, b = laplacian_spectrum(graphs[0]), laplacian_spectrum(graphs[1])
    assert laplacian_spectrum(graphs[0]).evecs is a.evecs  # a is now the most recent
    laplacian_spectrum(graphs[2])  # over budget: b, the least recent, goes
    assert laplacian_spectrum(graphs[0]).evecs is a.evecs
    assert laplacian_spectrum(graphs[1]).evecs is not b.evecs
    assert spectra._size <= 2 * one
    monkeypatch.setattr(spectra, "MAX_BYTES", one - 1)  # larger than the budget: not kept
    spectra.clear()
    big = laplacian_spectrum(graphs[0])
    assert laplacian_spectrum(graphs[0]).evecs is not big.evecs and spectra._size == 0


def test_a_bad_graph_is_refused_at_every_call_and_a_list_is_checked_then_kept():
    W = _random_graph(10, 2)
    W[2, 5] += 1.0  # no longer symmetric
    for _ in range(2):
        with pytest.raises(ValueError, match=r"W is not symmetric: W\[2, 5\]"):
            laplacian_spectrum(W)
    assert spectra._size == 0
    good = _random_graph(10, 3)
    from_list = laplacian_spectrum(good.tolist())  # checked first, then kept by its checked copy
    assert laplacian_spectrum(good.tolist()).evecs is from_list.evecs
    np.testing.assert_allclose(
        _reconstruct(from_list), np.diag(good.sum(axis=1)) - good, atol=ATOL
    )  # fmt: skip
