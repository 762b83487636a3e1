"""bayesrank.compiler: the package's programs compile with its XLA options, on the jaxlib versions
where they were checked, and give what XLA's defaults give.

The reference is ``jax.jit`` itself, with XLA's default options: the same core (EP's
``fit_core``) compiled both ways must agree. A fresh process shows the switch back to XLA's
defaults (``BAYESRANK_XLA_OPTIONS=default``) and that a package program is lowered with the
options (JAX's lowering holds them for its compile; a private attribute of jax 0.10)."""

import json
import os
import subprocess
import sys

import jax
import numpy as np
import pytest

from bayesrank import compiler
from bayesrank.inference.ep.fit import fit_core


def test_the_options_are_given_only_to_the_checked_jaxlib_versions(monkeypatch):
    checked = {"0.6.0": True, "0.10.2": True, "0.10.3.dev20261201": True, "0.11.0": False,
               "0.5.0": False, "0.4.38": False, "1.0.0": False}  # fmt: skip
    for version, given in checked.items():
        monkeypatch.setattr(compiler, "version", lambda _, v=version: v)
        assert bool(compiler._options()) is given, version
    monkeypatch.setattr(compiler, "version", lambda _: "0.10.2")
    monkeypatch.setenv("BAYESRANK_XLA_OPTIONS", "default")
    assert compiler._options() == {}


def test_the_installed_jaxlib_compiles_with_the_options():
    """Where options are given, this jaxlib knows every one (an unknown one fails every
    compile): a program compiles and runs with them."""
    f = jax.jit(lambda x: x * 2.0 + 1.0, compiler_options=compiler.COMPILER_OPTIONS or None)
    np.testing.assert_array_equal(f(np.arange(3.0)), [1.0, 3.0, 5.0])


def _ep(jit):
    rng = np.random.default_rng(3)
    n, m = 30, 60
    X = rng.normal(size=(n, 3))
    K = np.exp(-0.5 * ((X[:, None] - X[None]) ** 2).sum(-1)) + 1e-6 * np.eye(n)
    pairs = np.array([rng.choice(n, 2, replace=False) for _ in range(m)])
    post = jit(lambda K, pairs: fit_core(K, pairs, max_iter=200))(K, pairs)
    return post


def test_ep_compiled_with_the_options_equals_xlas_defaults():
    ours, plain = _ep(compiler.jit), _ep(jax.jit)
    assert bool(ours.converged) and bool(plain.converged)
    np.testing.assert_allclose(ours.mean, plain.mean, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(ours.cov, plain.cov, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(ours.log_evidence, plain.log_evidence, rtol=1e-12)
    np.testing.assert_allclose(ours.sites, plain.sites, rtol=1e-10, atol=1e-12)


_CHILD = """
import json
import numpy as np
from bayesrank import compiler
from bayesrank.inference import problem
K = np.eye(4) + 0.5
lowered = problem._fit_covariance_jit.lower(
    K, np.array([[0, 1]]), np.array([True]), None, None, __import__("bayesrank").EP())
print(json.dumps({"options": compiler.COMPILER_OPTIONS,
                  "kvs": [list(kv) for kv in lowered._lowering._compiler_options_kvs]}))
"""


@pytest.mark.parametrize("setting", ["package", "default"])
def test_a_package_program_carries_the_options_and_the_switch_drops_them(setting):
    env = {k: v for k, v in os.environ.items() if k != "BAYESRANK_XLA_OPTIONS"}
    if setting == "default":
        env["BAYESRANK_XLA_OPTIONS"] = "default"
    done = subprocess.run(
        [sys.executable, "-c", _CHILD], capture_output=True, text=True, env=env, timeout=300
    )
    assert done.returncode == 0, done.stderr[-3000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    if setting == "default":
        assert out["options"] == {} and out["kvs"] == []
    else:
        assert out["options"] == compiler._options()
        assert dict(map(tuple, out["kvs"])) == out["options"]


def test_a_program_runs_inside_a_users_jit_vmap_and_grad():
    """JAX refuses compiler options on a jit staged inside a trace: ``jit``'s program runs its
    plain twin there, with the same value."""

    @compiler.jit
    def g(x):
        return jax.numpy.sin(x) * 2.0

    x = np.linspace(0.0, 1.0, 4)
    np.testing.assert_allclose(jax.jit(lambda x: g(x) + 1.0)(x), 2 * np.sin(x) + 1, rtol=1e-14)
    np.testing.assert_allclose(jax.vmap(g)(x), 2 * np.sin(x), rtol=1e-14)
    np.testing.assert_allclose(jax.grad(lambda x: g(x).sum())(x), 2 * np.cos(x), rtol=1e-14)
    np.testing.assert_allclose(g(x), 2 * np.sin(x), rtol=1e-14)
    assert g.__name__ == "g" and callable(g.lower)
