"""The one warning a float32 run gets: a façade called with JAX's x64 off says, once per
process, that it computes in float32 and names the line that turns float64 on."""

import subprocess
import sys

import pytest

SCRIPT = """
import warnings
import numpy as np
from bayesrank import RBF, XPGP, PreferenceProblem, XPGPModel
from bayesrank.runtime import Float32Warning

problem = PreferenceProblem.create(np.array([[0, 1], [1, 2]]), X=np.eye(3))
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    XPGPModel(XPGP(RBF(1.0, 1.0))).fit(problem)
    XPGPModel(XPGP(RBF(1.0, 1.0))).fit(problem)
said = [w for w in caught if issubclass(w.category, Float32Warning)]
print(len(said))
print(said[0].message if said else "")
"""


def _run(x64: bool) -> list[str]:
    prefix = "import jax; jax.config.update('jax_enable_x64', True)\n" if x64 else ""
    done = subprocess.run(
        [sys.executable, "-c", prefix + SCRIPT], capture_output=True, text=True, check=True
    )
    return done.stdout.splitlines()


@pytest.mark.slow  # child processes
def test_float32_is_said_once_with_the_line_that_turns_x64_on():
    count, message = _run(x64=False)
    assert count == "1"
    assert "XPGPModel.fit runs in float32" in message
    assert 'jax.config.update("jax_enable_x64", True)' in message


@pytest.mark.slow
def test_nothing_is_said_in_float64():
    assert _run(x64=True)[0] == "0"
