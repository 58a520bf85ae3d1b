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


# OpenBLAS's cores with AVX-512 kernels (openblas_get_corename)
AVX512_CORES = ("skylakex", "cooperlake", "sapphirerapids")


@functools.cache
def transposed_products_direct():
    """Whether a weight's gradient A^T B over many rows (A: rows x |V| or rows x f) is
    faster as it is than as the transpose of B^T A: on OpenBLAS's AVX-512 kernels, whose
    packing of the long transposed operand is fast (measured in cython_ext/
    transformer_parts.pxd's split_gradient_transposed); not on its AVX2 ones."""
    lib = _openblas()
    if lib is None or not hasattr(lib, "scipy_openblas_get_corename"):
        return False
    corename = lib.scipy_openblas_get_corename
    corename.restype = ctypes.c_char_p
    return (corename() or b"").decode("ascii", "replace").lower() in AVX512_CORES


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
