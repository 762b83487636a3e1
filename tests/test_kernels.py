"""Kernels of the XPGP prior against hand-worked values, scipy, brute force and finite differences.

Tolerances: float64 throughout (conftest enables x64); 1e-12 for closed forms, 1e-6 relative for
central finite differences with step 1e-6 (truncation error O(h^2), rounding O(eps / h)). In
float32 the closed forms' round-off tolerances are scaled to float32's epsilon
(``helpers.assert_close``); the finite differences stay float64's (eps32 / h is 0.1).
"""

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.linalg
from helpers import assert_close, float32_param, float64_only
from hypothesis import given, settings
from hypothesis import strategies as st

from bayesrank.kernels import (
    ARD,
    RBF,
    XPGP,
    Bounded,
    Diffusion,
    Fixed,
    Independent,
    Linear,
    Positive,
    RegularizedLaplacian,
    component_posterior,
    constrain,
    hidden_common_cause,
    laplacian_spectrum,
    unconstrain,
)

X64 = jax.config.jax_enable_x64
#: Why the finite-difference checks are float64's alone.
FINITE_DIFFERENCES = (
    "central differences at step 1e-6 checked to 1e-6: float32 rounds the objective (O(10)) "
    "by ~1e-6, ~0.5 in the difference quotient"
)

PATH3 = np.array([[0, 1, 0], [1, 0, 1], [0, 1, 0]], dtype=float)


def random_graph(rng, n, p=0.4, isolated=1):
    W = np.triu(rng.uniform(0.1, 2.0, (n, n)) * (rng.uniform(size=(n, n)) < p), 1)
    W = W + W.T
    W[:isolated, :] = 0
    W[:, :isolated] = 0
    return W


# --- attribute kernels ------------------------------------------------------------------------


@pytest.mark.float32
def test_rbf_is_eq1_and_ard_generalises_it():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(5, 3))
    kappa, rho = 1.7, 0.6
    expected = np.array(
        [[kappa**2 * np.exp(-(rho**2) / 2 * np.sum((a - b) ** 2)) for b in X] for a in X]
    )
    assert_close(RBF(kappa, rho)(X), expected, rtol=1e-13)
    assert_close(ARD(kappa, jnp.full(3, 1 / rho))(X), expected, rtol=1e-13)
    ell = np.array([0.5, 2.0, 1.0])
    expected_ard = np.array(
        [[kappa**2 * np.exp(-0.5 * np.sum(((a - b) / ell) ** 2)) for b in X] for a in X]
    )
    assert_close(ARD(kappa, jnp.asarray(ell))(X), expected_ard, rtol=1e-13)
    assert_close(Linear(2.0, 0.5)(X), 4 * X @ X.T + 0.25, rtol=1e-13)
    assert_close(Independent(3.0)(jnp.arange(4)), 9 * np.eye(4))
    assert_close(RBF(kappa, rho)(X, X[:2]), expected[:, :2], rtol=1e-13)


# --- graph kernels ----------------------------------------------------------------------------


@pytest.mark.float32
def test_regularized_laplacian_two_nodes_by_hand():
    w, beta, iota = 0.7, 2.0, 1.5
    a = 1 / iota**2
    # [beta (Delta + aI)]^-1 with Delta = [[w, -w], [-w, w]]: adjugate over determinant.
    expected = np.array([[w + a, w], [w, w + a]]) / (beta * a * (2 * w + a))
    spectrum = laplacian_spectrum(np.array([[0, w], [w, 0]]))
    assert_close(RegularizedLaplacian(beta, iota)(spectrum), expected, rtol=1e-12)


@pytest.mark.float32
def test_regularized_laplacian_three_node_path_by_hand():
    # Delta + I = [[2,-1,0],[-1,3,-1],[0,-1,2]], determinant 8, cofactors worked by hand.
    expected = np.array([[5, 2, 1], [2, 4, 2], [1, 2, 5]]) / 8
    K = RegularizedLaplacian(1.0, 1.0)(laplacian_spectrum(PATH3))
    assert_close(K, expected, rtol=1e-12)


@pytest.mark.float32
@pytest.mark.parametrize("normalized", [False, True])
def test_diffusion_against_scipy_expm(normalized):
    rng = np.random.default_rng(1)
    W = random_graph(rng, 7)
    d = W.sum(1)
    if normalized:
        s = np.where(d > 0, 1 / np.sqrt(np.where(d > 0, d, 1)), 0)
        L = np.diag((d > 0).astype(float)) - s[:, None] * W * s[None, :]
    else:
        L = np.diag(d) - W
    spectrum = laplacian_spectrum(W, normalized=normalized)
    assert_close(Diffusion(0.8)(spectrum), scipy.linalg.expm(-0.8 * L), atol=1e-12)
    reg = RegularizedLaplacian(1.3, 0.9)(spectrum)
    assert_close(reg, np.linalg.inv(1.3 * (L + np.eye(7) / 0.81)), atol=1e-12)


@pytest.mark.float32
def test_isolated_nodes_and_components():
    W = np.zeros((4, 4))
    W[0, 1] = W[1, 0] = 1.0  # components {0, 1}, {2}, {3}
    K = RegularizedLaplacian(2.0, 0.5)(laplacian_spectrum(W))
    assert_close(K[2:, 2:], np.eye(2) * 0.25 / 2.0, atol=1e-14)  # iota^2 / beta
    assert_close(K[:2, 2:], 0, atol=1e-14)
    # Gradients stay finite although the Laplacian has a repeated eigenvalue 0.
    g = jax.grad(lambda b: RegularizedLaplacian(b, 0.5)(laplacian_spectrum(W)).sum())(2.0)
    assert np.isfinite(g)


def latent_cause_edge_reference(W):
    """K = A A^T with one latent cause per edge, a_ic = sqrt(W_ij / d_i): a loop over edges."""
    n = len(W)
    d = W.sum(1)
    edges = [(i, j) for i in range(n) for j in range(i + 1, n) if W[i, j] > 0]
    A = np.zeros((n, len(edges)))
    for c, (i, j) in enumerate(edges):
        A[i, c] = np.sqrt(W[i, j] / d[i])
        A[j, c] = np.sqrt(W[i, j] / d[j])
    return A @ A.T


def test_hidden_common_cause_edge():
    np.testing.assert_allclose(
        hidden_common_cause(PATH3, "edge"),
        [[1, 2**-0.5, 0], [2**-0.5, 1, 2**-0.5], [0, 2**-0.5, 1]],
        atol=1e-15,
    )
    rng = np.random.default_rng(3)
    W = random_graph(rng, 8, isolated=2)
    np.testing.assert_allclose(
        hidden_common_cause(W, "edge"), latent_cause_edge_reference(W), atol=1e-14
    )


def test_hidden_common_cause_clique():
    # Triangle {0,1,2} plus pendant edge {2,3} is chordal: cliques {0,1,2}, {2,3}.
    W = np.zeros((4, 4))
    for i, j in [(0, 1), (0, 2), (1, 2), (2, 3)]:
        W[i, j] = W[j, i] = 1.0
    r = 2**-0.5
    expected = [[1, 1, r, 0], [1, 1, r, 0], [r, r, 1, r], [0, 0, r, 1]]
    np.testing.assert_allclose(hidden_common_cause(W, "clique"), expected, atol=1e-15)
    # A 4-cycle needs one chord: two triangles; the chord's ends share both, opposite nodes none.
    C4 = np.roll(np.eye(4), 1, axis=1) + np.roll(np.eye(4), -1, axis=1)
    K = hidden_common_cause(C4, "clique")
    off = K[~np.eye(4, dtype=bool)].reshape(4, 3)
    assert np.isclose(off, 1).sum() == 2  # one chord, counted twice
    assert np.isclose(off, 0).sum() == 2  # the other diagonal pair
    with pytest.raises(ValueError, match="construction"):
        hidden_common_cause(C4, "star")


# passes in float32; not in the float32 run (time: 25 examples, a compilation per size)
@pytest.mark.slow
@settings(max_examples=25, deadline=None)
@given(st.integers(2, 9), st.integers(0, 2**31 - 1), st.floats(0.05, 5), st.floats(0.2, 3))
def test_every_kernel_is_psd(n, seed, beta, iota):
    rng = np.random.default_rng(seed)
    W = random_graph(rng, n, p=rng.uniform(0.1, 0.9), isolated=int(rng.integers(0, 2)))
    X = rng.normal(size=(n, 3))
    mats = [
        RBF(1.0, iota)(X),
        ARD(1.0, jnp.asarray(rng.uniform(0.3, 3, 3)))(X),
        Linear(1.0, 0.1)(X),
        hidden_common_cause(W, "edge"),
        hidden_common_cause(W, "clique"),
    ]
    for normalized in (False, True):
        spectrum = laplacian_spectrum(W, normalized=normalized)
        mats += [RegularizedLaplacian(beta, iota)(spectrum), Diffusion(beta)(spectrum)]
    # float32: the kernel's and eigvalsh's round-off, ~n eps |K| (n <= 9): 1e-5 |K|
    floor = 1e-10 if X64 else 1e-5
    for K in mats:
        K = np.asarray(K)
        assert_close(K, K.T, atol=1e-12)
        assert np.linalg.eigvalsh(K).min() >= -floor * max(1.0, np.abs(K).max())


@pytest.mark.parametrize("bad", ["asym", "neg", "nan", "shape"])
def test_graph_validation(bad):
    W = PATH3.copy()
    if bad == "asym":
        W[0, 1] = 2.0
    elif bad == "neg":
        W[0, 1] = W[1, 0] = -1.0
    elif bad == "nan":
        W[0, 1] = W[1, 0] = np.nan
    else:
        W = W[:2]
    with pytest.raises(ValueError):
        laplacian_spectrum(W)
    with pytest.raises(ValueError):
        hidden_common_cause(W)


# --- gradients --------------------------------------------------------------------------------


def central_difference(f, obj, name, h=1e-6):
    value = np.asarray(getattr(obj, name), dtype=float)
    grads = np.zeros_like(value)
    for idx in np.ndindex(value.shape):
        up, down = value.copy(), value.copy()
        up[idx] += h
        down[idx] -= h
        grads[idx] = (
            f(dataclasses.replace(obj, **{name: jnp.asarray(up)}))
            - f(dataclasses.replace(obj, **{name: jnp.asarray(down)}))
        ) / (2 * h)
    return grads


@pytest.mark.parametrize(
    ("make", "names"),
    [
        (lambda: RBF(jnp.asarray(1.3), jnp.asarray(0.7)), ["kappa", "rho"]),
        (lambda: ARD(jnp.asarray(0.9), jnp.asarray([0.5, 1.5, 2.0])), ["kappa", "lengthscales"]),
        (lambda: RegularizedLaplacian(jnp.asarray(1.2), jnp.asarray(0.8)), ["beta", "iota"]),
        (lambda: Diffusion(jnp.asarray(0.6)), ["beta"]),
    ],
)
@float64_only(FINITE_DIFFERENCES)
def test_gradients_against_finite_differences(make, names):
    rng = np.random.default_rng(4)
    X = rng.normal(size=(6, 3))
    spectrum = laplacian_spectrum(random_graph(rng, 6))
    R = rng.normal(size=(6, 6))
    kernel = make()
    data = X if isinstance(kernel, RBF | ARD) else spectrum

    def f(k):
        return jnp.sum(k(data) * R)

    grads = jax.grad(f)(kernel)
    for name in names:
        np.testing.assert_allclose(
            getattr(grads, name), central_difference(f, kernel, name), rtol=1e-6, atol=1e-9
        )


@pytest.mark.slow  # 3 s or more in the fast loop
@float64_only(FINITE_DIFFERENCES)
def test_xpgp_gradient_in_weights_and_sigma():
    rng = np.random.default_rng(5)
    X = rng.normal(size=(5, 2))
    spectrum = laplacian_spectrum(random_graph(rng, 5))
    prior = XPGP(RBF(1.0, 0.5), (RegularizedLaplacian(1.0, 1.0),), jnp.array([0.8, 1.4]), 0.9)
    R = rng.normal(size=(5, 5))

    def f(p):
        return jnp.sum(p.covariance(X, (spectrum,)) * R)

    grads = jax.grad(f)(prior)
    for name in ("weights", "sigma"):
        np.testing.assert_allclose(
            getattr(grads, name), central_difference(f, prior, name), rtol=1e-6
        )


# --- the XPGP prior ---------------------------------------------------------------------------


def make_problem(seed=6, n=6):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 3))
    W1, W2 = random_graph(rng, n), random_graph(rng, n, isolated=0)
    return X, W1, W2


@pytest.mark.float32
def test_xpgp_is_eq5():
    X, W1, W2 = make_problem()
    w = np.array([0.7, 1.2, 0.4])
    sigma = 0.8
    spec = laplacian_spectrum(W1)
    hcc = hidden_common_cause(W2, "edge")
    prior = XPGP(
        RBF(1.1, 0.5),
        (RegularizedLaplacian(2.0, 1.5), Fixed()),
        jnp.asarray(w),
        sigma,
        entity=Independent(0.3),
    )
    Ka = RBF(1.1, 0.5)(X)
    L = np.diag(W1.sum(1)) - W1
    Kr = np.linalg.inv(2.0 * (L + np.eye(6) / 1.5**2))
    expected = (w[0] ** 2 * Ka + w[1] ** 2 * Kr + w[2] ** 2 * hcc + 0.09 * np.eye(6)) / (
        2 * sigma**2
    )
    assert_close(prior.covariance(X, (spec, hcc)), expected, rtol=1e-11)
    parts = prior.components(X, (spec, hcc))
    assert parts.shape == (4, 6, 6)
    assert_close(parts.sum(0), expected, rtol=1e-11)
    jitted = jax.jit(lambda p, X, g: p.covariance(X, g))(prior, X, (spec, hcc))
    assert_close(jitted, expected, rtol=1e-11)


def test_xpgp_validation():
    X, W1, _ = make_problem()
    spec = laplacian_spectrum(W1)
    with pytest.raises(ValueError, match="1 relation kernels but 0 graphs"):
        XPGP(RBF(), (Diffusion(),)).covariance(X, ())
    with pytest.raises(ValueError, match=r"weights must have shape \(2,\)"):
        XPGP(RBF(), (Diffusion(),), jnp.ones(3)).covariance(X, (spec,))


@pytest.mark.float32
def test_xpgp_padding_gives_the_unpadded_prior():
    X, W1, _ = make_problem()
    n, pad = 6, 3
    prior = XPGP(RBF(1.0, 0.7), (Diffusion(0.5),), jnp.array([1.0, 0.8]))
    K = prior.covariance(X, (laplacian_spectrum(W1),))
    Xp = np.vstack([X, np.full((pad, 3), 123.0)])
    Wp = np.zeros((n + pad, n + pad))
    Wp[:n, :n] = W1
    mask = np.arange(n + pad) < n
    Kp = prior.covariance(Xp, (laplacian_spectrum(Wp),), mask=jnp.asarray(mask))
    assert_close(Kp[:n, :n], K, rtol=1e-12)
    assert_close(Kp[n:, n:], np.eye(pad))
    assert_close(Kp[:n, n:], 0)


@pytest.mark.float32
def test_xpgp_vmaps_over_queries():
    prior = XPGP(RBF(1.0, 0.7), (Diffusion(0.5),), jnp.array([1.0, 0.8]))
    problems = [make_problem(seed) for seed in range(3)]
    Xs = jnp.stack([p[0] for p in problems])
    spectra = [laplacian_spectrum(p[1]) for p in problems]
    stacked = jax.tree_util.tree_map(lambda *a: jnp.stack(a), *spectra)
    batched = jax.vmap(lambda X, s: prior.covariance(X, (s,)))(Xs, stacked)
    for b in range(3):
        assert_close(batched[b], prior.covariance(Xs[b], (spectra[b],)), rtol=1e-12)


@pytest.mark.float32
def test_component_posterior_against_joint_conditioning():
    """Gaussian observations y = xi + noise: posterior of each part by conditioning the joint."""
    X, W1, _ = make_problem(n=5)
    prior = XPGP(RBF(1.0, 0.6), (RegularizedLaplacian(1.0, 1.0),), jnp.array([1.0, 1.3]))
    comps = np.asarray(prior.components(X, (laplacian_spectrum(W1),)))
    K = comps.sum(0)
    noise = 0.3 * np.eye(5)
    y = np.random.default_rng(7).normal(size=5)
    S = np.linalg.inv(K + noise)
    mu, Sigma = K @ S @ y, K - K @ S @ K  # posterior of xi
    post = component_posterior(jnp.asarray(comps), jnp.asarray(mu), jnp.asarray(Sigma), 0.0)
    # float32: solves with K (condition number 5) and the products after them, entries up to
    # |K| ~ 3: 64 ulps, relative and absolute
    f32 = {"rtol32": 64 * np.finfo(np.float32).eps, "atol32": 64 * np.finfo(np.float32).eps}
    for c, Kc in enumerate(comps):  # Cov(h_c, y) = K_c, so condition h_c on y directly
        assert_close(post.mean[c], Kc @ S @ y, rtol=1e-9, atol=1e-12, **f32)
        assert_close(post.cov[c], Kc - Kc @ S @ Kc, rtol=1e-8, atol=1e-11, **f32)
    assert_close(post.mean.sum(0), mu, rtol=1e-9, atol=1e-12, **f32)


# --- constraints ------------------------------------------------------------------------------


@pytest.mark.float32
def test_constrain_round_trip_and_bounds():
    prior = XPGP(RBF(1.5, 0.3), (RegularizedLaplacian(2.0, 0.7),), jnp.array([0.5, 2.0]), 0.9)
    u = unconstrain(prior)
    assert_close(u.attribute.kappa, np.log(1.5))
    assert_close(u.weights, np.log([0.5, 2.0]))
    back = constrain(u)
    for a, b in zip(jax.tree_util.tree_leaves(back), jax.tree_util.tree_leaves(prior), strict=True):
        assert_close(a, b, rtol=1e-14)
    big = jax.tree_util.tree_map(lambda x: x - 1e3, u)
    small = constrain(big)
    assert small.attribute.rho == 0.0  # Positive(): no floor in feature units
    assert small.relations[0].iota >= 1e-6  # Positive(1e-6) floor
    b = Bounded(0.1, 10.0)
    for v in (0.1 + 1e-9, 1.0, 9.99):  # float32: a log and a sigmoid's few roundings, 16 ulps
        assert_close(b.forward(b.inverse(v)), v, rtol=1e-7, rtol32=16 * np.finfo(np.float32).eps)
    assert 0.1 <= float(b.forward(-50.0)) and float(b.forward(50.0)) <= 10.0  # closed in floats
    assert float(Positive(2.0).forward(-100.0)) > 2.0 - 1e-12


@pytest.mark.slow
@pytest.mark.parametrize(  # float32 run (time): the scalar lengthscale; both pass in float32
    "lengthscales", [float32_param(0.7), np.array([0.5, 1.3, 2.0])], ids=["scalar", "ard"]
)
def test_weighted_sq_distances_gradient_against_finite_differences(lengthscales):
    """The matrix-product derivative of ``sum_k w_k (X1_ak - X2_bk)^2`` (through an ARD
    kernel), reverse and forward mode, against central differences, for the lengthscales and
    both point sets; a duplicate point's distance is exactly zero. (float32: the duplicate and
    the two modes; not the central differences, ``FINITE_DIFFERENCES``.)"""
    rng = np.random.default_rng(5)
    X1, X2 = rng.normal(size=(7, 3)), rng.normal(size=(4, 3))
    X2[1] = X1[2]  # a duplicate point: distance exactly 0, kernel exactly kappa^2
    G = rng.normal(size=(7, 4))
    kernel = ARD(1.3, jnp.asarray(lengthscales))
    K = kernel(X1, X2)  # kappa^2 computed in K's dtype, as in every compiled program
    kappa = np.asarray(1.3, K.dtype)
    assert float(K[2, 1]) == pytest.approx(float(kappa * kappa), rel=0, abs=0)

    def f(ell, A, B):
        return jnp.sum(G * ARD(1.3, ell)(A, B))

    grads = jax.grad(f, argnums=(0, 1, 2))(jnp.asarray(lengthscales), X1, X2)
    forward = jax.jacfwd(f, argnums=(0, 1, 2))(jnp.asarray(lengthscales), X1, X2)
    for a, b in zip(grads, forward, strict=True):
        assert_close(a, b, rtol=1e-12, atol=1e-12)
    if not X64:
        return  # FINITE_DIFFERENCES
    h = 1e-6
    for arg, analytic in zip((lengthscales, X1, X2), grads, strict=True):
        base = np.array(arg, dtype=float)
        numeric = np.zeros_like(base)
        for idx in np.ndindex(base.shape):
            up, down = base.copy(), base.copy()
            up[idx] += h
            down[idx] -= h
            args = [jnp.asarray(lengthscales), X1, X2]
            k = [a is arg for a in (lengthscales, X1, X2)].index(True)
            args[k] = up
            fu = float(f(*args))
            args[k] = down
            numeric[idx] = (fu - float(f(*args))) / (2 * h)
        np.testing.assert_allclose(analytic, numeric, rtol=1e-6, atol=1e-8)


def test_hidden_common_cause_against_talk_formulas():
    """``HiddenCommonCause`` against Silva's recorded formulas, counted independently (the NIPS
    paper's own text was not reachable: ``kernels/graph.py`` docstring). On a 0/1 chordal graph
    both constructions equal them exactly, and an entity with no relation (the formulas' 0/0)
    gets a zero row. On a weighted complete graph, the relation Kersting & Xu feed the kernel on
    OHSUMED, the stated departure: the clique construction is ``11^T`` and the unweighted edge
    formula ``I + (11^T - I) / (n - 1)``, both equal variance for every difference ``g_i - g_j``
    (no relational information), while the weighted edge kernel is ``I + D^-1/2 W D^-1/2``."""
    import itertools

    from bayesrank.kernels import HiddenCommonCause

    def build(construction, W):
        kernel = HiddenCommonCause(construction)
        return np.asarray(kernel(kernel.prepare(W)))

    # Triangles {0,1,2} and {1,2,3} sharing edge 1-2, pendant edge 3-4, node 5 unrelated: chordal.
    n = 6
    W = np.zeros((n, n))
    for i, j in [(0, 1), (0, 2), (1, 2), (1, 3), (2, 3), (3, 4)]:
        W[i, j] = W[j, i] = 1.0
    related = W > 0
    neigh = related.sum(1)
    cliques = [
        set(c)
        for k in range(2, n + 1)
        for c in itertools.combinations(range(n), k)
        if all(related[a, b] for a, b in itertools.combinations(c, 2))
    ]
    maximal = [c for c in cliques if not any(c < other for other in cliques)]
    assert sorted(map(sorted, maximal)) == [[0, 1, 2], [1, 2, 3], [3, 4]]
    count = np.array([sum(i in c for c in maximal) for i in range(n)])
    edge_ref, clique_ref = np.zeros((n, n)), np.zeros((n, n))
    for i, j in itertools.product(range(n), repeat=2):
        if neigh[i] and neigh[j] and (i == j or related[i, j]):
            edge_ref[i, j] = 1.0 if i == j else 1.0 / np.sqrt(neigh[i] * neigh[j])
        if count[i] and count[j]:
            shared = sum(i in c and j in c for c in maximal)
            clique_ref[i, j] = shared / np.sqrt(count[i] * count[j])
    np.testing.assert_allclose(build("edge", W), edge_ref, atol=1e-14)
    np.testing.assert_allclose(build("clique", W), clique_ref, atol=1e-14)
    assert clique_ref[1, 2] == 1.0  # 1 and 2 share both their cliques: perfectly correlated
    np.testing.assert_array_equal(build("edge", W)[5], 0.0)

    # Weighted complete graph (cosine-similarity-like weights).
    m = 5
    rng = np.random.default_rng(11)
    S = rng.uniform(0.1, 1.0, (m, m))
    S = (S + S.T) / 2
    np.fill_diagonal(S, 0.0)
    ones, eye = np.ones((m, m)), np.eye(m)
    unweighted = eye + (ones - eye) / (m - 1)
    np.testing.assert_allclose(build("clique", S), ones, atol=1e-14)
    np.testing.assert_allclose(build("edge", (S > 0).astype(float)), unweighted, atol=1e-14)
    for K in (ones, unweighted):
        var_diff = [K[i, i] + K[j, j] - 2 * K[i, j] for i, j in itertools.combinations(range(m), 2)]
        np.testing.assert_allclose(var_diff, var_diff[0], atol=1e-14)
    inv_sqrt = 1.0 / np.sqrt(S.sum(1))
    weighted = build("edge", S)
    normalized = inv_sqrt[:, None] * S * inv_sqrt[None, :]
    np.testing.assert_allclose(weighted, eye + normalized, atol=1e-14)
    assert np.abs(weighted - unweighted).max() > 1e-2
    np.testing.assert_allclose(build("edge", 7.0 * S), weighted, atol=1e-14)  # scale-free
