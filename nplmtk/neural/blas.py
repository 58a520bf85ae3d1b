"""The thread count of the BLAS behind scipy.linalg.cython_blas (scipy's own OpenBLAS).
Lock-free training threads each call BLAS: they want it single-threaded, or the cores
are oversubscribed."""
import contextlib
import ctypes
import functools
import glob
import os
from concurrent.futures import ThreadPoolExecutor

import scipy


@functools.cache  # the library loaded once; a lookup took 80 us, at every scoring call
def _openblas():
    libs = os.path.join(os.path.dirname(os.path.dirname(scipy.__file__)), "scipy.libs")
    for path in glob.glob(os.path.join(libs, "libscipy_openblas*.so")):
        lib = ctypes.CDLL(path)
        if hasattr(lib, "scipy_openblas_set_num_threads") and hasattr(lib, "scipy_openblas_get_num_threads"):
            return lib
    return None


@contextlib.contextmanager
def blas_threads(count):
    """Within the block, scipy's BLAS uses `count` threads (no-op if it cannot be found)."""
    lib = _openblas()
    if lib is None:
        yield
        return
    before = lib.scipy_openblas_get_num_threads()
    lib.scipy_openblas_set_num_threads(count)
    try:
        yield
    finally:
        lib.scipy_openblas_set_num_threads(before)


def blas_thread_count():
    """The threads scipy's BLAS would use (OPENBLAS_NUM_THREADS, else one a core): the
    number of scoring workers, each then on a single-threaded BLAS."""
    lib = _openblas()
    return max(1, lib.scipy_openblas_get_num_threads() if lib is not None else os.cpu_count() or 1)


def on_workers(work, workers):
    """work(q) for q in 0 .. workers - 1, on that many threads (the kernels release the GIL),
    with scipy's BLAS single-threaded meanwhile."""
    if workers == 1:
        work(0)
        return
    with blas_threads(1), ThreadPoolExecutor(workers) as pool:
        list(pool.map(work, range(workers)))
