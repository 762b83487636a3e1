"""Shared test configuration.

GP and ranking numerics are checked in float64 (tolerances in the tests are chosen for it). The
library itself never flips JAX's global x64 flag; the test suite does, explicitly, here. Set
``BAYESRANK_TEST_X64=0`` to run the suite in float32 (tests that need float64 say so).
"""

import os
import tempfile
from pathlib import Path

import compile_time
import jax
import lapack_order
import pytest

X64 = os.environ.get("BAYESRANK_TEST_X64", "1") != "0"
jax.config.update("jax_enable_x64", X64)

#: Location of the third-party LETOR data beside the repository (CI has it there).
SHARED_DATA = Path(
    os.environ.get(
        "BAYESRANK_SHARED_DATA", Path(__file__).resolve().parents[1] / ".." / "shared" / "data"
    )
).resolve()


@pytest.fixture(autouse=True)
def _x64_as_the_run_set_it():
    """The command line turns float64 on for its process (``cli._common.setup_jax``): a test
    that runs it in-process would leave the rest of its worker in float64, and a float32 run
    would then check float32 tolerances against float64 numbers. Restored after every test."""
    yield
    if jax.config.jax_enable_x64 != X64:
        jax.config.update("jax_enable_x64", X64)


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


def pytest_addoption(parser):
    parser.addoption(
        "--compile-time",
        action="store_true",
        help="report how much of the run's time JAX spent tracing, lowering and compiling, and "
        "the costliest programs and test modules (tests/compile_time.py)",
    )


def pytest_terminal_summary(terminalreporter, config):
    if config.getoption("--compile-time"):
        compile_time.report(Path(os.environ[compile_time.ENV]), terminalreporter)


def pytest_configure(config):
    """The persistent compilation cache, in a directory of this run's own (made by the process
    that starts the run; xdist's workers and every child process a test starts inherit it
    through ``BAYESRANK_CACHE_DIR``): a program compiled once in the run is loaded, not compiled
    again, by another module, worker or child. A fresh directory per run, so the run never
    depends on an earlier one. ``BAYESRANK_CACHE_DIR`` set by the caller is kept (``off``: no
    cache). Compile-counting tests are unaffected: ``helpers.count_compilations`` counts a
    program loaded from disk as one not found in memory, as it counts a compiled one."""
    _run_directory(config, "BAYESRANK_CACHE_DIR", "bayesrank-tests-jax-")
    from bayesrank.runtime import enable_compilation_cache

    enable_compilation_cache()  # BAYESRANK_CACHE_DIR
    lapack_order.install()  # every compiled program: its batched LAPACK calls in one chain
    if config.getoption("--compile-time"):
        compile_time.start(_run_directory(config, compile_time.ENV, "bayesrank-compile-time-"))


def _run_directory(config, env: str, prefix: str) -> Path:
    """A directory of this run's own, named by ``env``: made by the process that starts the run
    (kept where the caller set ``env``), inherited by xdist's workers and by child processes
    through the environment, removed when the run ends (``pytest_unconfigure``)."""
    if env not in os.environ and not hasattr(config, "workerinput"):
        directory = tempfile.TemporaryDirectory(prefix=prefix)
        os.environ[env] = directory.name
        config.__dict__.setdefault("_bayesrank_run_directories", []).append((env, directory))
    return Path(os.environ[env])


def pytest_unconfigure(config):
    for env, directory in getattr(config, "_bayesrank_run_directories", []):
        os.environ.pop(env, None)
        directory.cleanup()


@pytest.fixture(autouse=True, scope="module")
def _fresh_jax_caches():
    """Drop JAX's compiled programs after each test module.

    In one process running the whole suite, jaxlib 0.10's CPU compiler crashed (SIGSEGV, then
    SIGABRT in a second run) compiling a small RankSVM program near the end, after about 1,000
    compilations; each module alone passed. A program another module needs again is loaded from
    the run's compilation cache (:func:`pytest_configure`), not compiled.
    """
    yield
    jax.clear_caches()
