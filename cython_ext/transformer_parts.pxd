# The Transformer's passes shared among OpenMP threads (transformer_kernels.pyx's stack,
# transformer_network.pyx's output layer and update): a pass cut in slices of rows (or of
# columns), one a thread, each thread calling a single-threaded BLAS on its own slice.
from cython.parallel cimport prange
from libc.string cimport memcpy

from kernel_common cimport gemm


cdef inline Py_ssize_t part_start(Py_ssize_t total, int parts, int p) noexcept nogil:
    """Where part p of `parts` slices of 0 .. total starts (slices of whole 16s, the last shorter)."""
    cdef Py_ssize_t chunk = ((total + parts - 1) // parts + 15) // 16 * 16
    return min(total, p * chunk)


cdef inline void split_gemm(int parts, const float *bias, char ta, char tb, int M, int N, int K, float alpha,
                            const float *A, int lda, const float *B, int ldb, float beta, float *C,
                            int ldc) noexcept nogil:
    """gemm (kernel_common) with C cut in `parts` slices of rows (or of columns, when it
    has more columns), one a thread, each on a single-threaded BLAS; with a bias, C's rows
    are set to it first (beta must then be 1)."""
    cdef int p, lo, hi, r
    if parts == 1:
        if bias != NULL:
            for r in range(M):
                memcpy(C + <Py_ssize_t> r * ldc, bias, N * sizeof(float))
        gemm(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc)
    elif M >= N:
        for p in prange(parts, num_threads=parts, schedule="static", chunksize=1, nogil=True):
            lo, hi = part_start(M, parts, p), part_start(M, parts, p + 1)
            if hi > lo:
                if bias != NULL:
                    for r in range(lo, hi):
                        memcpy(C + <Py_ssize_t> r * ldc, bias, N * sizeof(float))
                gemm(ta, tb, hi - lo, N, K, alpha, A + (<Py_ssize_t> lo * lda if ta == b'N' else lo), lda, B, ldb,
                     beta, C + <Py_ssize_t> lo * ldc, ldc)
    else:
        for p in prange(parts, num_threads=parts, schedule="static", chunksize=1, nogil=True):
            lo, hi = part_start(N, parts, p), part_start(N, parts, p + 1)
            if hi > lo:
                if bias != NULL:
                    for r in range(M):
                        memcpy(C + <Py_ssize_t> r * ldc + lo, bias + lo, (hi - lo) * sizeof(float))
                gemm(ta, tb, M, hi - lo, K, alpha, A, lda, B + (lo if tb == b'N' else <Py_ssize_t> lo * ldb), ldb,
                     beta, C + lo, ldc)
