"""``one_blas_thread``: BLAS limited to one thread inside, the previous limits restored after.

Reference: ``threadpoolctl.threadpool_info()``, which reads each loaded BLAS library's own count.
"""

import os
import subprocess
import sys

import pytest

from bayesrank.runtime import one_blas_thread

threadpoolctl = pytest.importorskip("threadpoolctl")


def blas_threads():
    return {
        lib["filepath"]: lib["num_threads"]
        for lib in threadpoolctl.threadpool_info()
        if lib["user_api"] == "blas"
    }


def test_one_blas_thread_inside_and_restored_after(monkeypatch):
    with one_blas_thread():
        pass  # loads the BLAS behind jaxlib's LAPACK calls, as the first fit would
    before = blas_threads()
    assert before  # numpy's and scipy's BLAS at least
    with one_blas_thread():
        assert set(blas_threads().values()) == {1}

    @one_blas_thread()
    def inside():
        return blas_threads()

    assert set(inside().values()) == {1}
    assert blas_threads() == before
    monkeypatch.setenv("BAYESRANK_BLAS_THREADS", "keep")
    with one_blas_thread():
        assert blas_threads() == before


@pytest.mark.slow  # a child process
def test_no_device_constant_is_built_at_import():
    """x64 turned on after ``import bayesrank``: the probit's inverse Mills ratio is accurate in
    float64 (a constant built at import would carry float32, 1.6e-8 relative error), against
    scipy's log-space reference."""
    import subprocess
    import sys

    code = (
        "import bayesrank, jax, numpy as np\n"
        "jax.config.update('jax_enable_x64', True)\n"
        "from scipy import special, stats\n"
        "from bayesrank.likelihoods import inverse_mills\n"
        "z = np.linspace(-10, 30, 81)  # where jax log_ndtr matches scipy to 1e-15\n"
        "ref = np.exp(stats.norm.logpdf(z) - special.log_ndtr(z))\n"
        "got = np.asarray(inverse_mills(z))\n"
        "assert got.dtype == np.float64, got.dtype\n"
        "print(float(np.max(np.abs(got / ref - 1))))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert float(out.stdout.strip()) < 1e-13


@pytest.mark.slow  # child processes
@pytest.mark.skipif(not hasattr(os, "sched_setaffinity"), reason="CPU affinity is Linux's")
def test_pin_to_one_cpu_in_a_child_process():
    """``runtime.pin_to_one_cpu``: one CPU unless ``--all-cpus`` (in child processes: the
    affinity is process-wide)."""
    code = (
        "import os, sys\n"
        "from bayesrank.runtime import pin_to_one_cpu\n"
        "cpu = pin_to_one_cpu(sys.argv[1:])\n"
        "print(cpu, len(os.sched_getaffinity(0)))\n"
    )

    def run(*args):
        out = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True)
        return out.stdout.split()

    cpu, count = run()
    assert int(count) == 1 and int(cpu) in os.sched_getaffinity(0)
    assert run("--all-cpus") == ["None", str(len(os.sched_getaffinity(0)))]
