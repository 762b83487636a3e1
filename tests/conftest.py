"""Shared test configuration.

GP and ranking numerics are checked in float64 (tolerances in the tests are chosen for it). The
library itself never flips JAX's global x64 flag; the test suite does, explicitly, here. Set
``BAYESRANK_TEST_X64=0`` to run the suite in float32 (tests that need float64 say so).
"""

import os
from pathlib import Path

import jax
import pytest

X64 = os.environ.get("BAYESRANK_TEST_X64", "1") != "0"
# The command line turns the persistent compilation cache on; in the tests it would turn
# compilations into cache loads and hide what the compile-count tests count.
os.environ.setdefault("BAYESRANK_CACHE_DIR", "off")
jax.config.update("jax_enable_x64", X64)

#: Location of the third-party LETOR data beside the repository (CI has it there).
SHARED_DATA = Path(
    os.environ.get(
        "BAYESRANK_SHARED_DATA", Path(__file__).resolve().parents[1] / ".." / "shared" / "data"
    )
).resolve()


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """Path to ``../shared/data``; skips the test, saying why, where it is absent."""
    if not (SHARED_DATA / "OHSUMED").is_dir():
        if os.environ.get("BAYESRANK_REQUIRE_SHARED_DATA") == "1":
            pytest.fail(f"BAYESRANK_REQUIRE_SHARED_DATA=1 but {SHARED_DATA} has no OHSUMED data")
        pytest.skip(
            f"needs the LETOR benchmark data at {SHARED_DATA} (../shared/data beside the repo, "
            "or BAYESRANK_SHARED_DATA); it is third-party data that the package does not ship"
        )
    return SHARED_DATA


@pytest.fixture(autouse=True, scope="module")
def _fresh_jax_caches():
    """Drop JAX's compiled programs after each test module.

    Programs are not shared across modules. In one process running the whole suite, jaxlib 0.10's
    CPU compiler crashed (SIGSEGV, then SIGABRT in a second run) compiling a small RankSVM program
    near the end, after about 1,000 compilations; each module alone passed.
    """
    yield
    jax.clear_caches()


@pytest.fixture(scope="module")
def quick_compiles():
    """XLA without most of its optimisations, for a module that tests an interface (the command
    line, the experiments, a study run) rather than numerics against tight references: its
    programs compile in about two thirds of the time. Child processes inherit it through the
    environment. Restored after the module."""
    import os

    before = jax.config.values["jax_disable_most_optimizations"]
    env = os.environ.get("JAX_DISABLE_MOST_OPTIMIZATIONS")
    jax.config.update("jax_disable_most_optimizations", True)
    os.environ["JAX_DISABLE_MOST_OPTIMIZATIONS"] = "1"
    yield
    jax.config.update("jax_disable_most_optimizations", before)
    if env is None:
        os.environ.pop("JAX_DISABLE_MOST_OPTIMIZATIONS", None)
    else:
        os.environ["JAX_DISABLE_MOST_OPTIMIZATIONS"] = env
