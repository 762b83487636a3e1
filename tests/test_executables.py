"""The executables kept on disk (``bayesrank.executables``).

References: a fresh process (the only place where a trace skipped shows), JAX's trace events
(``fun_name``) for what was traced, this process's own fit for the program's value, and the
bits of the first process's result for every later one.
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
from bayesrank.inference.engines import EP
from bayesrank.inference.problem import fit_covariance

#: A fresh process on the cache directory argv[1]: EP through ``inference.problem
#: .fit_covariance`` (its kept program, ``_fit_covariance_jit``: an engine pytree, LAPACK's
#: Cholesky, whose kernels jaxlib binds only while lowering), with the engine argv[2]:
#: ``ep``, ``sequential`` (another static setting) or ``mine`` (a subclass defined here).
SCRIPT = """
import json, sys
import jax, numpy as np
jax.config.update("jax_enable_x64", True)
from bayesrank.runtime import enable_compilation_cache
enable_compilation_cache(sys.argv[1])
from bayesrank.inference.engines import EP
from bayesrank.inference.problem import fit_covariance
traced = []
jax.monitoring.register_event_duration_secs_listener(
    lambda name, _, **kw: traced.append(kw.get("fun_name"))
    if name == "/jax/core/compile/jaxpr_trace_duration" else None)

class Mine(EP):
    pass

engine = {"ep": EP(), "sequential": EP(schedule="sequential"), "mine": Mine()}[sys.argv[2]]
rng = np.random.default_rng(0)
X = rng.normal(size=(12, 2))
K = np.exp(-0.5 * ((X[:, None] - X[None]) ** 2).sum(-1)) + 1e-6 * np.eye(12)
rows = np.array([[i, j] for i in range(12) for j in range(i + 1, 12) if (i + j) % 3 == 0])
post = fit_covariance(engine, K, rows)
print(json.dumps({"mean": np.asarray(post.mean).tobytes().hex(),
                  "traced": "_fit_covariance_jit" in traced}))
"""


def _run(script, cache, engine="ep") -> dict:
    done = subprocess.run([sys.executable, str(script), str(cache), engine],
                          capture_output=True, text=True, timeout=300)  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def _kept(cache) -> int:
    return len(list((cache / FOLDER).glob("*.pkl")))


@pytest.mark.slow  # five fresh processes
def test_a_kept_program_serves_a_fresh_process_without_a_trace(tmp_path):
    script, cache = tmp_path / "fit.py", tmp_path / "cache"
    script.write_text(SCRIPT)

    first = _run(script, cache)  # compiled and kept
    assert first["traced"] and _kept(cache) == 1
    rng = np.random.default_rng(0)  # the script's problem, fitted here by this process's jit
    X = rng.normal(size=(12, 2))
    K = np.exp(-0.5 * ((X[:, None] - X[None]) ** 2).sum(-1)) + 1e-6 * np.eye(12)
    rows = np.array([[i, j] for i in range(12) for j in range(i + 1, 12) if (i + j) % 3 == 0])
    here = fit_covariance(EP(), K, rows).mean
    np.testing.assert_allclose(np.frombuffer(bytes.fromhex(first["mean"])), here, rtol=1e-12)
    second = _run(script, cache)  # loaded: no trace, the same bits
    assert not second["traced"] and second["mean"] == first["mean"]

    # another static setting is another program: traced and kept beside the first
    sequential = _run(script, cache, "sequential")
    assert sequential["traced"] and _kept(cache) == 2
    # an engine whose code is not bayesrank's (a script's subclass) is never kept
    mine = _run(script, cache, "mine")
    assert mine["traced"] and _kept(cache) == 2

    # an unreadable file is removed and the program traced again; JAX's own cache serves it,
    # and such a program is not kept (it would not reload: the module docstring)
    for path in (cache / FOLDER).glob("*.pkl"):
        path.write_bytes(b"torn")
    third = _run(script, cache)
    assert third["traced"] and third["mean"] == first["mean"]
    assert _kept(cache) == 1  # the sequential one's torn file, which nothing read


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
    assert program.pending(x, k=2) is None  # a program outside bayesrank is never kept
