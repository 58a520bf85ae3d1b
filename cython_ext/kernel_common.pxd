# Shared by every network kernel (cimported; everything here is inline, so no module is
# imported at run time): BLAS through scipy.linalg.cython_blas, short-row loops, the
# log-normaliser, a softmax row and its exponentials, a vectorisable tanh, and the check of
# a chunk's schedule. Importance sampling's draws and weights are
# nplmtk/_ext/sampling_kernels.pxd.
from libc.math cimport exp, expf, log, logf
from libc.stdlib cimport free, malloc
from libc.string cimport memcpy, memset
from scipy.linalg.cython_blas cimport saxpy, sdot, sgemm, sgemv, sger, sscal


cdef extern from *:
    """
    /* The loops of softmax_terms and softmax_row, written once: the row's maximum, then its
       exponentials in place (y - max y) summed into `total`. A macro, so that each function
       keeps its own loops (vectorised in each clone as before, the sums in the same order).
       They vectorise (the exponentials by libmvec's expf), in a clone for each of AVX-512,
       AVX2 and the baseline, picked at load time for the CPU: code built without -march gets
       4-wide SSE, and long rows (the MLP's |V|) are its hot loops. */
    #define NPLM_EXPONENTIALS(y, size, total) \
        float top = y[0]; \
        for (int j = 1; j < size; j++) \
            top = y[j] > top ? y[j] : top; \
        for (int j = 0; j < size; j++) { \
            y[j] = expf(y[j] - top); \
            total += y[j]; \
        }

    /* Scores y in, probabilities out, with max-subtraction; returns log p(target) in double,
       from the target's score itself when its exponential underflows (p below 1e-38 in
       float: log 0 would make a training epoch's perplexity infinite). */
    __attribute__((target_clones("avx512f", "avx2", "default"), unused))
    static double nplm_softmax_row(float *restrict y, int size, int target) {
        float total = 0, score = y[target];
        NPLM_EXPONENTIALS(y, size, total)
        double logp = y[target] > 0 ? log((double) y[target] / total) : (double) (score - top) - log((double) total);
        float inverse = 1 / total;
        for (int j = 0; j < size; j++)
            y[j] *= inverse;
        return logp;
    }

    /* softmax_row's exponentials in place (y - max y), returning their sum: log p of any
       entry t is then log((double) y[t] / sum), softmax_row's value, for several targets
       of one row (the same loops, so that they sum in the same order). */
    __attribute__((target_clones("avx512f", "avx2", "default"), unused))
    static float nplm_softmax_terms(float *restrict y, int size) {
        float total = 0;
        NPLM_EXPONENTIALS(y, size, total)
        return total;
    }

    /* log p(target) of a row of scores, the row read twice and left as it is: scoring
       needs no probabilities. Summed in float as softmax_row sums (its last bits may differ). */
    __attribute__((target_clones("avx512f", "avx2", "default"), unused))
    static double nplm_log_softmax_at(const float *restrict y, int size, int target) {
        float top = y[0], total = 0;
        for (int j = 1; j < size; j++)
            top = y[j] > top ? y[j] : top;
        for (int j = 0; j < size; j++)
            total += expf(y[j] - top);
        float e = expf(y[target] - top);  /* as softmax_row, from the score when it underflows */
        return e > 0 ? log((double) e / total) : (double) (y[target] - top) - log((double) total);
    }
    """
    double softmax_row "nplm_softmax_row"(float *y, int size, int target) noexcept nogil
    double log_softmax_at "nplm_log_softmax_at"(const float *y, int size, int target) noexcept nogil
    float softmax_terms "nplm_softmax_terms"(float *y, int size) noexcept nogil


cdef extern from *:
    """
    /* A softmax streamed block by block over a row: raises *top to the block's maximum,
       writes e = exp(y - *top) and adds their sum to *total (rescaled first when *top
       rose). Returns exp(old top - new top), 1 when it stayed: the factor by which sums
       weighted with earlier blocks' e must be scaled. Cloned as softmax_row is. */
    __attribute__((target_clones("avx512f", "avx2", "default"), unused))
    static float nplm_softmax_block(const float *restrict y, float *restrict e, int size, float *top,
                                    float *total) {
        float high = *top, rescale = 1, sum = 0;
        for (int j = 0; j < size; j++)
            high = y[j] > high ? y[j] : high;
        if (high > *top) {
            rescale = expf(*top - high);
            *total *= rescale;
            *top = high;
        }
        for (int j = 0; j < size; j++) {
            e[j] = expf(y[j] - high);
            sum += e[j];
        }
        *total += sum;
        return rescale;
    }

    /* y[r] += M_r . x_r over a block of rows of M (rows x width, row-major), x_r = x + r
       x_step (x_step 0: one vector for every row). Written with 16-float vectors folded by
       shuffles: gcc's own reduction of a vectorised dot product (omp simd) spills the
       partial sums to the stack for every row. */
    typedef float nplm_v16 __attribute__((vector_size(64)));
    typedef float nplm_v8 __attribute__((vector_size(32)));
    typedef float nplm_v4 __attribute__((vector_size(16)));

    __attribute__((target_clones("avx512f", "avx2", "default"), unused))
    static void nplm_rows_dot(int rows, int width, const float *restrict M, const float *restrict vectors,
                              long x_step, float *restrict y) {
        int full = width & ~15;
        for (int r = 0; r < rows; r++) {
            const float *row = M + (long) r * width, *x = vectors + r * x_step;
            nplm_v16 sum16 = {0}, odd = {0}, u, v;
            int k = 0;
            for (; k + 32 <= full; k += 32) {  /* two chains */
                __builtin_memcpy(&u, row + k, sizeof u);
                __builtin_memcpy(&v, x + k, sizeof v);
                sum16 += u * v;
                __builtin_memcpy(&u, row + k + 16, sizeof u);
                __builtin_memcpy(&v, x + k + 16, sizeof v);
                odd += u * v;
            }
            if (k < full) {
                __builtin_memcpy(&u, row + k, sizeof u);
                __builtin_memcpy(&v, x + k, sizeof v);
                sum16 += u * v;
            }
            sum16 += odd;
            nplm_v8 sum8 = __builtin_shufflevector(sum16, sum16, 0, 1, 2, 3, 4, 5, 6, 7)
                           + __builtin_shufflevector(sum16, sum16, 8, 9, 10, 11, 12, 13, 14, 15);
            nplm_v4 sum4 = __builtin_shufflevector(sum8, sum8, 0, 1, 2, 3)
                           + __builtin_shufflevector(sum8, sum8, 4, 5, 6, 7);
            for (k = full; k + 4 <= width; k += 4) {
                nplm_v4 u4, v4;
                __builtin_memcpy(&u4, row + k, sizeof u4);
                __builtin_memcpy(&v4, x + k, sizeof v4);
                sum4 += u4 * v4;
            }
            float sum = (sum4[0] + sum4[2]) + (sum4[1] + sum4[3]);
            for (; k < width; k++)
                sum += row[k] * x[k];
            y[r] += sum;
        }
    }

    /* g = beta g + sum_r e[r] M_r over a block of rows of M (g written when beta is 0):
       16 columns at a time down the block, their sums held in a register. */
    __attribute__((target_clones("avx512f", "avx2", "default"), unused))
    static void nplm_rows_weighted_sum(int rows, int width, const float *restrict M, const float *restrict e,
                                       float beta, float *restrict g) {
        int k = 0;
        for (; k + 16 <= width; k += 16) {
            nplm_v16 sum = {0}, u;
            if (beta != 0) {
                __builtin_memcpy(&sum, g + k, sizeof sum);
                sum *= beta;
            }
            nplm_v16 sum1 = {0}, sum2 = {0}, sum3 = {0}, u1, u2, u3;
            int r = 0;
            for (; r + 4 <= rows; r += 4) {  /* four chains: an FMA's latency is four cycles */
                __builtin_memcpy(&u, M + (long) r * width + k, sizeof u);
                __builtin_memcpy(&u1, M + (long) (r + 1) * width + k, sizeof u);
                __builtin_memcpy(&u2, M + (long) (r + 2) * width + k, sizeof u);
                __builtin_memcpy(&u3, M + (long) (r + 3) * width + k, sizeof u);
                sum += e[r] * u;
                sum1 += e[r + 1] * u1;
                sum2 += e[r + 2] * u2;
                sum3 += e[r + 3] * u3;
            }
            for (; r < rows; r++) {
                __builtin_memcpy(&u, M + (long) r * width + k, sizeof u);
                sum += e[r] * u;
            }
            sum += (sum1 + sum2) + sum3;
            __builtin_memcpy(g + k, &sum, sizeof sum);
        }
        for (; k < width; k++) {
            float sum = beta != 0 ? beta * g[k] : 0;
            for (int r = 0; r < rows; r++)
                sum += e[r] * M[(long) r * width + k];
            g[k] = sum;
        }
    }

    /* out[j] += alpha sum_i M[i][j] over rows x cols of M (row stride ld): a batch's
       bias gradient, 16 columns at a time (the Cython loop built without -march ran 4). */
    __attribute__((target_clones("avx512f", "avx2", "default"), unused))
    static void nplm_add_column_sums(int rows, int cols, float alpha, const float *restrict M, long ld,
                                     float *restrict out) {
        for (int i = 0; i < rows; i++)
            for (int j = 0; j < cols; j++)
                out[j] += alpha * M[i * ld + j];
    }

    /* y = exp(y - shift) over a row: scores to probabilities once the log-normaliser is known. */
    __attribute__((target_clones("avx512f", "avx2", "default"), unused))
    static void nplm_exp_shifted(float *restrict y, int size, float shift) {
        for (int j = 0; j < size; j++)
            y[j] = expf(y[j] - shift);
    }
    """
    float softmax_block "nplm_softmax_block"(const float *y, float *e, int size, float *top,
                                             float *total) noexcept nogil
    void exp_shifted "nplm_exp_shifted"(float *y, int size, float shift) noexcept nogil
    void add_column_sums "nplm_add_column_sums"(int rows, int cols, float alpha, const float *M, long ld,
                                                float *out) noexcept nogil
    void rows_dot "nplm_rows_dot"(int rows, int width, const float *M, const float *x, long x_step,
                                  float *y) noexcept nogil
    void rows_weighted_sum "nplm_rows_weighted_sum"(int rows, int width, const float *M, const float *e, float beta,
                                                    float *g) noexcept nogil


cdef extern from *:
    """
    /* tanh(x) within 4e-7: Eigen's rational approximation, clamped where tanh rounds to
       +-1. Pure arithmetic, so loops calling it vectorise; glibc's 4-wide tanhf (the one
       code built without -march gets) calls the scalar tanhf lane by lane. */
    static inline float nplm_rational_tanh(float x) {
        const float bound = 7.905311107635498f;
        x = x > bound ? bound : (x < -bound ? -bound : x);
        float x2 = x * x;
        float p = -2.76076847742355e-16f * x2 + 2.00018790482477e-13f;
        p = p * x2 - 8.60467152213735e-11f;
        p = p * x2 + 5.12229709037114e-08f;
        p = p * x2 + 1.48572235717979e-05f;
        p = p * x2 + 6.37261928875436e-04f;
        p = p * x2 + 4.89352455891786e-03f;
        float q = 1.19825839466702e-06f * x2 + 1.18534705686654e-04f;
        q = q * x2 + 2.26843463243900e-03f;
        q = q * x2 + 4.89352518554385e-03f;
        return x * p / q;
    }

    /* out[j][k] = tanh(pre[j][k] + c[k]) over rows x width (out and pre apart): its own
       function, cloned for AVX-512, AVX2 and the baseline, since inlined into a long loop
       body gcc may leave it scalar (one divss a value). */
    __attribute__((target_clones("avx512f", "avx2", "default"), unused))
    static void nplm_tanh_rows(float *restrict out, const float *restrict pre, const float *restrict c, int rows,
                               int width) {
        for (int j = 0; j < rows; j++)
            for (int k = 0; k < width; k++)
                out[(long)j * width + k] = nplm_rational_tanh(pre[(long)j * width + k] + c[k]);
    }
    """
    float rational_tanh "nplm_rational_tanh"(float x) noexcept nogil
    void tanh_rows "nplm_tanh_rows"(float *out, const float *pre, const float *c, int rows, int width) noexcept nogil


cdef inline void gemm(char ta, char tb, int M, int N, int K, float alpha, const float *A, int lda,
                      const float *B, int ldb, float beta, float *C, int ldc) noexcept nogil:
    """Row-major C (M x N) = alpha op(A) op(B) + beta C, through column-major sgemm. A
    single row of C (one window) is a matrix-vector product, and a single inner term
    added to C an outer product: BLAS-2, without sgemm's packing of the whole matrix."""
    if M == 0 or N == 0:
        return
    if M == 1 and ta == b'N' and ldc == N and ldb == (K if tb == b'T' else N):
        if tb == b'T':
            matvec(N, K, alpha, B, A, beta, C)
        else:
            matvec_t(K, N, alpha, B, A, beta, C)
        return
    if K == 1 and beta == 1 and ldc == N and ldb == N and tb == b'N' and (ta == b'T' or lda == 1):
        rank1(M, N, alpha, A, B, C)
        return
    sgemm(&tb, &ta, &N, &M, &K, &alpha, <float *> B, &ldb, <float *> A, &lda, &beta, C, &ldc)


cdef inline void matvec(int rows, int cols, float alpha, const float *M, const float *v, float beta,
                        float *out) noexcept nogil:
    """out = alpha M v + beta out for a row-major M (rows x cols): one pass over M, no
    packing (sgemm packs the whole matrix even for a single row)."""
    cdef int one = 1
    sgemv(b'T', &cols, &rows, &alpha, <float *> M, &cols, <float *> v, &one, &beta, out, &one)


cdef inline void matvec_t(int rows, int cols, float alpha, const float *M, const float *u, float beta,
                          float *out) noexcept nogil:
    """out = alpha M^T u + beta out for a row-major M (rows x cols)."""
    cdef int one = 1
    sgemv(b'N', &cols, &rows, &alpha, <float *> M, &cols, <float *> u, &one, &beta, out, &one)


cdef inline float dot(int size, const float *u, const float *v) noexcept nogil:
    cdef int one = 1
    return sdot(&size, <float *> u, &one, <float *> v, &one)


cdef inline void scale(int size, float alpha, float *v) noexcept nogil:
    cdef int one = 1
    sscal(&size, &alpha, v, &one)


cdef inline void rank1(int rows, int cols, float alpha, const float *u, const float *v, float *M) noexcept nogil:
    """M += alpha u v^T for a row-major M (rows x cols)."""
    cdef int one = 1
    sger(&cols, &rows, &alpha, <float *> v, &one, <float *> u, &one, M, &cols)


cdef inline float dot_row(int size, const float *u, const float *v) noexcept nogil:
    """u . v for the short rows of one window (no BLAS call: its overhead is the cost)."""
    cdef float s0 = 0, s1 = 0, s2 = 0, s3 = 0
    cdef int i = 0
    while i + 4 <= size:
        s0 += u[i] * v[i]
        s1 += u[i + 1] * v[i + 1]
        s2 += u[i + 2] * v[i + 2]
        s3 += u[i + 3] * v[i + 3]
        i += 4
    while i < size:
        s0 += u[i] * v[i]
        i += 1
    return (s0 + s1) + (s2 + s3)


cdef inline void axpy_row(int size, float alpha, const float *x, float *y) noexcept nogil:
    cdef int i
    for i in range(size):
        y[i] += alpha * x[i]



cdef inline double log_normaliser(const float *y, int size) noexcept nogil:
    """log sum_j exp(y_j), with max-subtraction."""
    cdef int j
    cdef float top = y[0], total = 0
    for j in range(size):
        top = y[j] if y[j] > top else top
    for j in range(size):
        total += expf(y[j] - top)
    return top + log(total)


cdef inline void row_maxima(const float *Y, int K, int V, float *top) noexcept nogil:
    """-mpi param: the maximum of each of K rows of V scores (-3.4e38 for an empty block)."""
    cdef int i, j
    cdef float best
    cdef const float *y
    for i in range(K):
        y = Y + <Py_ssize_t> i * V
        best = -3.4e38
        for j in range(V):
            best = y[j] if y[j] > best else best
        top[i] = best


cdef inline void block_exponentials(float *Y, int K, int V, const int *windows, int n, int lo, const float *top,
                                    double *out) noexcept nogil:
    """-mpi param: the scores of a block of V output rows (from row lo) of K windows in,
    exp(y - top) out (top: the maxima over all blocks); out[i] = their sum, out[K + i] =
    y(target) - top when the block holds the target, else 0."""
    cdef int i, j, t
    cdef float total
    cdef float *y
    for i in range(K):
        y = Y + <Py_ssize_t> i * V
        t = windows[i * n + n - 1] - lo
        out[K + i] = y[t] - top[i] if 0 <= t < V else 0
        for j in range(V):
            y[j] = expf(y[j] - top[i])
        total = 0
        for j in range(V):
            total += y[j]
        out[i] = total


cdef inline void block_output_gradient(float *Y, int K, int V, const int *windows, int n, int lo,
                                       const double *sums) noexcept nogil:
    """-mpi param: exp(y - top) of a block in, dL/dy = p - [w = target] out (sums: the
    normalisers over all blocks)."""
    cdef int i, j, t
    cdef float inverse
    cdef float *y
    for i in range(K):
        y = Y + <Py_ssize_t> i * V
        inverse = <float> (1 / sums[i])
        for j in range(V):
            y[j] *= inverse
        t = windows[i * n + n - 1] - lo
        if 0 <= t < V:
            y[t] -= 1
