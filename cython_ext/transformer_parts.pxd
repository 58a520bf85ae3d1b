# The Transformer's passes shared among OpenMP threads (transformer_kernels.pyx's stack,
# transformer_network.pyx's output layer and update): a pass cut in slices of rows (or of
# columns), one a thread, each thread calling a single-threaded BLAS on its own slice.
from cython.parallel cimport prange
from libc.string cimport memcpy, memset

from kernel_common cimport gemm


cdef inline Py_ssize_t part_start(Py_ssize_t total, int parts, int p) noexcept nogil:
    """Where part p of `parts` slices of 0 .. total starts (slices of whole 16s, the last shorter)."""
    cdef Py_ssize_t chunk = ((total + parts - 1) // parts + 15) // 16 * 16
    return min(total, p * chunk)


cdef inline void split_zero(int parts, float *values, Py_ssize_t size) noexcept nogil:
    """values[0 .. size - 1] = 0, in `parts` slices."""
    cdef int p
    cdef Py_ssize_t lo, hi
    for p in prange(parts, num_threads=parts, schedule="static", chunksize=1, nogil=True):
        lo, hi = part_start(size, parts, p), part_start(size, parts, p + 1)
        memset(values + lo, 0, (hi - lo) * sizeof(float))


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


cdef inline void split_gradient_transposed(int parts, int M, int N, int K, const float *A, int lda, const float *B,
                                           int ldb, float beta, float *C, int ldc, float *scratch,
                                           bint direct) noexcept nogil:
    """C (M x N) = beta C + A^T B for A (K x M) and B (K x N) of many rows K, with M > N:
    `direct` (nplmtk.neural.blas.transposed_products_direct: the BLAS packs the long
    transposed operand fast) as it is, else as its transpose B^T A (N x M, in scratch)
    then added transposed, which OpenBLAS's AVX2 kernels pack 1.3-1.6x faster (AMD EPYC,
    2048 rows, 1 thread: 14,119 x 256 at 36 GFLOP/s against 58 as its transpose; 1024 x 256
    at 43 against 55) and its AVX-512 ones slower (Intel Xeon, 1024 rows: 82 against 71)."""
    cdef int p, i, j, i0, j0, lo, hi
    cdef float *row
    if direct:
        split_gemm(parts, NULL, b'T', b'N', M, N, K, 1, A, lda, B, ldb, beta, C, ldc)
        return
    split_gemm(parts, NULL, b'T', b'N', N, M, K, 1, B, ldb, A, lda, 0, scratch, M)
    for p in prange(parts, num_threads=parts, schedule="static", chunksize=1, nogil=True):
        lo, hi = part_start(M, parts, p), part_start(M, parts, p + 1)
        for i0 in range(lo, hi, 16):  # tiles of 16 x 16: both sides read in cache lines
            for j0 in range(0, N, 16):
                for i in range(i0, min(i0 + 16, hi)):
                    row = C + <Py_ssize_t> i * ldc
                    for j in range(j0, min(j0 + 16, N)):
                        row[j] = scratch[<Py_ssize_t> j * M + i] + (beta * row[j] if beta != 0 else 0)
