"""One BLAS thread while bayesrank's compiled programs run on a CPU.

XLA's CPU runtime runs matrix products on its own thread pool; jaxlib's LAPACK calls (the
Cholesky factorisations and triangular solves of every EP sweep) go to the BLAS that scipy
ships (OpenBLAS), with a thread pool of its own. With both pools on the same cores, a chain of
products and factorisations ran slower than its parts: on 2 cores, an EP fit at ``n = 1000``
took 0.85 s with one BLAS thread against 1.03 s with two, and an evidence-maximisation fit
4.2 s against 5.1 s (``docs/learning.md``). The factorisations lose a little (a Cholesky of
order 1000: 13 ms on one thread, 10 ms on two); the products gain more.

:func:`one_blas_thread` limits the BLAS libraries the process has loaded to one thread for the
duration of a ``with`` block (or a decorated call), through ``threadpoolctl``, and restores
them afterwards. It does nothing where ``threadpoolctl`` is missing or the
``BAYESRANK_BLAS_THREADS`` environment variable is set to ``"keep"``. The limit is
process-wide: BLAS calls made by other threads meanwhile also run on one thread.
"""

from __future__ import annotations

import os
from contextlib import contextmanager
from functools import lru_cache

__all__ = ["one_blas_thread"]


@lru_cache(maxsize=1)
def _controller():
    try:
        # loads the BLAS that jaxlib's LAPACK calls use (it is loaded on first use otherwise,
        # after the controller would have looked)
        import scipy.linalg.cython_lapack  # noqa: F401
        from threadpoolctl import ThreadpoolController
    except ImportError:
        return None
    return ThreadpoolController()


@contextmanager
def one_blas_thread():
    """Context manager (and decorator): BLAS limited to one thread inside, restored after.

    Block on the results inside it (``jax.block_until_ready``): JAX dispatches asynchronously,
    and work still running after the block ends runs with the restored limits.
    """
    controller = None if os.environ.get("BAYESRANK_BLAS_THREADS") == "keep" else _controller()
    if controller is None:
        yield
        return
    with controller.limit(limits=1, user_api="blas"):
        yield
