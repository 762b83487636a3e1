"""Tests of bayesrank.data.functions against references that share no code with it.

References: plain-Python loops written from the published formulas (sfu.ca/~ssurjano; Jamil &
Yang 2013 for Alpine-1), the published optima, brute force over random points, and BoTorch's
implementations where torch and botorch are installed.
"""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from bayesrank.data import functions as F

pytestmark = pytest.mark.float32

X64 = jnp.asarray(1.0).dtype == np.float64
# Float64: a few dozen operations on numbers below 100, so agreement is to rounding. Float32
# (BAYESRANK_TEST_X64=0): the same in single precision.
TOL = 1e-10 if X64 else 1e-5

# (name, dim): the default dims and a few others.
CASES = [
    ("ackley", None),
    ("ackley", 1),
    ("ackley", 7),
    ("hartmann6", None),
    ("hartmann6", 6),
    ("levy", None),
    ("levy", 1),
    ("levy", 2),
    ("alpine1", None),
    ("alpine1", 9),
    ("quadratic", None),
    ("quadratic", 3),
]
IDS = [f"{name}-{dim}" for name, dim in CASES]


# --- references: one point (a list of floats in the function's own domain) at a time -----------
def ref_ackley(z):
    d = len(z)
    sum_sq = 0.0
    sum_cos = 0.0
    for zi in z:
        sum_sq += zi * zi
        sum_cos += math.cos(2 * math.pi * zi)
    return -20 * math.exp(-0.2 * math.sqrt(sum_sq / d)) - math.exp(sum_cos / d) + 20 + math.e


HARTMANN_ALPHA = [1.0, 1.2, 3.0, 3.2]
HARTMANN_A = [
    [10, 3, 17, 3.50, 1.7, 8],
    [0.05, 10, 17, 0.1, 8, 14],
    [3, 3.5, 1.7, 10, 17, 8],
    [17, 8, 0.05, 10, 0.1, 14],
]
HARTMANN_P = [
    [1312, 1696, 5569, 124, 8283, 5886],
    [2329, 4135, 8307, 3736, 1004, 9991],
    [2348, 1451, 3522, 2883, 3047, 6650],
    [4047, 8828, 8732, 5743, 1091, 381],
]


def ref_hartmann6(x):
    outer = 0.0
    for i in range(4):
        inner = 0.0
        for j in range(6):
            inner += HARTMANN_A[i][j] * (x[j] - HARTMANN_P[i][j] / 10000) ** 2
        outer += HARTMANN_ALPHA[i] * math.exp(-inner)
    return -outer


def ref_levy(z):
    d = len(z)
    w = [1 + (zi - 1) / 4 for zi in z]
    total = math.sin(math.pi * w[0]) ** 2
    for i in range(d - 1):
        total += (w[i] - 1) ** 2 * (1 + 10 * math.sin(math.pi * w[i] + 1) ** 2)
    total += (w[d - 1] - 1) ** 2 * (1 + math.sin(2 * math.pi * w[d - 1]) ** 2)
    return total


def ref_alpine1(z):
    return sum(abs(zi * math.sin(zi) + 0.1 * zi) for zi in z)


# name -> (reference to minimise, lower bound, upper bound of the domain)
REFERENCES = {
    "ackley": (ref_ackley, -32.768, 32.768),
    "hartmann6": (ref_hartmann6, 0.0, 1.0),
    "levy": (ref_levy, -10.0, 10.0),
    "alpine1": (ref_alpine1, -10.0, 10.0),
    "quadratic": (lambda z: sum((zi - 0.3) ** 2 for zi in z), 0.0, 1.0),
}


def reference_utility(name, u):
    """The negated reference at the unit-cube point ``u`` (a 1-D numpy array)."""
    ref, low, high = REFERENCES[name]
    return -ref([low + (high - low) * float(ui) for ui in u])


# --- tests ------------------------------------------------------------------------------------
@pytest.mark.parametrize(("name", "dim"), CASES, ids=IDS)
def test_value_at_optimizer_is_the_optimum(name, dim):
    f = F.get(name, dim)
    assert len(f.optimizer) == f.dim
    assert all(0.0 <= c <= 1.0 for c in f.optimizer)
    value = float(f(jnp.asarray(f.optimizer)))
    # Hartmann-6: the published optimum (3.32237) and optimiser are rounded.
    tol = 1e-4 if name == "hartmann6" else TOL
    assert abs(value - f.optimum_value) <= tol
    assert abs(reference_utility(name, np.asarray(f.optimizer)) - f.optimum_value) <= tol


@pytest.mark.parametrize(("name", "dim"), CASES, ids=IDS)
def test_random_points_never_exceed_the_optimum(name, dim):
    f = F.get(name, dim)
    u = np.random.default_rng(0).uniform(size=(10_000, f.dim))
    values = np.asarray(f(u))
    assert values.shape == (10_000,)
    assert np.all(np.isfinite(values))
    assert values.max() <= f.optimum_value


@pytest.mark.parametrize(("name", "dim"), CASES, ids=IDS)
def test_matches_loop_reference(name, dim):
    f = F.get(name, dim)
    u = np.random.default_rng(1).uniform(size=(2, 3, f.dim))  # batch axes kept
    got = np.asarray(f(u))
    assert got.shape == (2, 3)
    want = np.array([[reference_utility(name, u[i, j]) for j in range(3)] for i in range(2)])
    np.testing.assert_allclose(got, want, rtol=TOL, atol=TOL)
    # The corners of the cube are the ends of the domain.
    for corner in (np.zeros(f.dim), np.ones(f.dim)):
        np.testing.assert_allclose(
            float(f(corner)), reference_utility(name, corner), rtol=TOL, atol=TOL
        )


@pytest.mark.parametrize("name", F.NAMES)
def test_jit_and_grad(name):
    f = F.get(name)
    u = jnp.asarray(np.random.default_rng(2).uniform(size=(5, f.dim)))
    np.testing.assert_allclose(jax.jit(f)(u), f(u), rtol=TOL, atol=TOL)
    grad = jax.grad(lambda v: f(v))(u[0])
    assert grad.shape == (f.dim,)
    assert np.all(np.isfinite(np.asarray(grad)))


def test_known_values():
    # Hand-checked: quadratic at 0 is -0.09 per coordinate; Ackley at the cube's corner sits at
    # z = 32.768 in every coordinate; Alpine-1 at z = 10: |10 sin 10 + 1|.
    assert float(F.get("quadratic", 2)(jnp.zeros(2))) == pytest.approx(-0.18, abs=TOL)
    assert float(F.get("alpine1", 1)(jnp.ones(1))) == pytest.approx(
        -abs(10 * math.sin(10) + 1), abs=TOL
    )
    assert float(F.hartmann6(jnp.asarray(F.get("hartmann6").optimizer))) == pytest.approx(
        3.32237, abs=1e-4
    )


BOTORCH = {  # name -> (BoTorch class name, dim)
    "ackley": ("Ackley", 4),
    "hartmann6": ("Hartmann", 6),
    "levy": ("Levy", 4),
}


@pytest.mark.parametrize("name", list(BOTORCH))
def test_matches_botorch(name):
    torch = pytest.importorskip("torch")
    synthetic = pytest.importorskip("botorch.test_functions.synthetic")
    cls, dim = BOTORCH[name]
    # BoTorch builds Hartmann's constants in torch's default dtype (1.2 rounded in float32).
    default = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    try:
        problem = getattr(synthetic, cls)(dim=dim, negate=True)  # negate: to be maximised
    finally:
        torch.set_default_dtype(default)
    u = np.random.default_rng(3).uniform(size=(8, dim))
    _, low, high = REFERENCES[name]
    with torch.no_grad():
        want = problem(torch.tensor(low + (high - low) * u, dtype=torch.float64)).numpy()
    f = F.get(name, dim)
    np.testing.assert_allclose(np.asarray(f(u)), want, rtol=TOL, atol=TOL)
    assert f.optimum_value == pytest.approx(problem.optimal_value, abs=1e-12)
    np.testing.assert_allclose(
        low + (high - low) * np.asarray(f.optimizer), problem.optimizers[0].numpy(), atol=1e-12
    )


def test_unknown_name():
    with pytest.raises(ValueError, match=r"'branin'.*ackley, hartmann6, levy, alpine1, quadratic"):
        F.get("branin")


@pytest.mark.parametrize("dim", [2, 5, 7])
def test_hartmann6_other_dim(dim):
    with pytest.raises(ValueError, match=rf"hartmann6.*dim {dim}"):
        F.get("hartmann6", dim)


@pytest.mark.parametrize("dim", [0, -1, 2.0, True, "3"])
def test_bad_dim(dim):
    with pytest.raises(ValueError, match="dim must be"):
        F.get("ackley", dim)


@pytest.mark.parametrize(("name", "dim", "shape"), [("ackley", 4, (5, 3)), ("quadratic", 1, ())])
def test_points_of_the_wrong_dimension(name, dim, shape):
    f = F.get(name, dim)
    with pytest.raises(
        ValueError, match=rf"{name} has dim {dim}.*got \({', '.join(map(str, shape))}"
    ):
        f(np.zeros(shape))
    with pytest.raises(ValueError, match=r"hartmann6.*dimension 6.*\(2, 5\)"):
        F.hartmann6(np.zeros((2, 5)))
