"""``one_blas_thread``: BLAS limited to one thread inside, the previous limits restored after.

Reference: ``threadpoolctl.threadpool_info()``, which reads each loaded BLAS library's own count.
"""

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
