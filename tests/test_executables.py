"""The executables kept on disk (``bayesrank.executables``).

References: a fresh process (the only place where a trace skipped shows), JAX's trace events
(``fun_name``) for what was traced, NumPy's solve for the program's value, and the bits of the
first process's result for every later one.
"""

import json
import subprocess
import sys
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from bayesrank.executables import FOLDER, program_key, stored

#: A program with a LAPACK call (whose kernels jaxlib binds only while lowering), a static
#: argument and a tree of outputs, run in a fresh process on the cache directory argv[1].
SCRIPT = """
import json, sys
from functools import partial
import jax, jax.numpy as jnp, numpy as np
jax.config.update("jax_enable_x64", True)
from bayesrank.runtime import enable_compilation_cache
enable_compilation_cache(sys.argv[1])
from bayesrank.executables import stored
traced = []
jax.monitoring.register_event_duration_secs_listener(
    lambda name, _, **kw: traced.append(kw.get("fun_name"))
    if name == "/jax/core/compile/jaxpr_trace_duration" else None)

@stored
@partial(jax.jit, static_argnames=("k",))
def solve(A, b, k):
    L = jnp.linalg.cholesky(A)
    x = jax.scipy.linalg.cho_solve((L, True), b)
    return k * x, {"logdet": 2 * jnp.sum(jnp.log(jnp.diag(L)))}

rng = np.random.default_rng(0)
G = rng.normal(size=(6, 6))
A, b = G @ G.T + 6 * np.eye(6), rng.normal(size=6)
x, aux = solve(A, b, k=3)
print(json.dumps({"x": np.asarray(x).tobytes().hex(), "logdet": float(aux["logdet"]),
                  "traced": "solve" in traced}))
"""


def _run(script, cache) -> dict:
    done = subprocess.run([sys.executable, str(script), str(cache)], capture_output=True,
                          text=True, timeout=300)  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.slow  # three fresh processes
def test_a_stored_program_serves_a_fresh_process_without_a_trace(tmp_path):
    script, cache = tmp_path / "solve.py", tmp_path / "cache"
    script.write_text(SCRIPT)
    rng = np.random.default_rng(0)
    G = rng.normal(size=(6, 6))
    A, b = G @ G.T + 6 * np.eye(6), rng.normal(size=6)

    first = _run(script, cache)  # compiled and stored
    assert first["traced"]
    np.testing.assert_allclose(np.frombuffer(bytes.fromhex(first["x"])), 3 * np.linalg.solve(A, b),
                               rtol=1e-12)  # fmt: skip
    assert first["logdet"] == pytest.approx(np.linalg.slogdet(A)[1], rel=1e-12)
    files = list((cache / FOLDER).glob("*.pkl"))
    assert len(files) == 1

    second = _run(script, cache)  # loaded: no trace, the same bits
    assert not second["traced"] and second["x"] == first["x"]

    # an unreadable file is removed, and the program is traced again; JAX's own cache serves
    # it, and such a program is not stored (it would not load: the module docstring)
    files[0].write_bytes(b"torn")
    third = _run(script, cache)
    assert third["traced"] and third["x"] == first["x"]
    assert not list((cache / FOLDER).glob("*.pkl"))


@partial(jax.jit, static_argnames=("k",))
def _scaled(x, k):
    return k * x


def test_the_key_follows_what_the_trace_depends_on():
    x = np.ones(3)
    key = program_key("p", (x,), {"k": 2})
    assert key == program_key("p", (np.zeros(3),), {"k": 2})  # values are not in it
    others = [
        program_key("q", (x,), {"k": 2}),  # another program
        program_key("p", (np.ones(4),), {"k": 2}),  # shape
        program_key("p", (np.ones(3, np.float32),), {"k": 2}),  # dtype
        program_key("p", (1.0,), {"k": 2}),  # a weakly typed scalar
        program_key("p", (np.float64(1.0),), {"k": 2}),
        program_key("p", ([x],), {"k": 2}),  # tree structure
        program_key("p", (x,), {"k": 3}),  # a static argument
    ]
    assert len({key, *others}) == len(others) + 1
    assert program_key("p", (x,), {"k": object()}) is None  # a repr with an address

    seen = []

    @jax.jit
    def under_jit(x):
        seen.append(program_key("p", (x,), {}))
        return x

    under_jit(x)
    assert seen == [None]  # a traced argument: not keyed


def test_a_kept_program_is_the_jit_under_transformations_and_without_a_cache():
    program = stored(_scaled)
    x = jnp.arange(3.0)
    np.testing.assert_array_equal(program(x, k=2), 2 * x)
    np.testing.assert_array_equal(jax.vmap(lambda v: program(v, k=2))(jnp.ones((2, 3))),
                                  2 * jnp.ones((2, 3)))  # fmt: skip
    np.testing.assert_array_equal(jax.grad(lambda v: program(v, k=2).sum())(x), 2 * jnp.ones(3))
    with jax.disable_jit():
        np.testing.assert_array_equal(program(x, k=2), 2 * x)
    np.testing.assert_array_equal(program(x=x, k=2), 2 * x)  # a dynamic argument by keyword
