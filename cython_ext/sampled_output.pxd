# The importance-sampled softmax output layer (Bengio & Senecal 2003, Algorithm 3) over any
# network's top layer, inline (cimported by the MLP's and the recurrent kernel): K rows (a
# batch of windows, a segment's steps) share the N draws of the sampler
# (nplmtk/_ext/sampling_kernels.pxd: drawn and merged by the caller). The scores are
#
#     y_w = b_w + U_w . a + W_w . x      (a: the top layer, x: the direct inputs, if any)
#
# and a row's gradient estimate pulls its target's output row up and pushes the sampled
# rows down with the self-normalised weights r_j / sum r, r_j = c_j exp(y_j) / Q(w_j): the
# gradient of -(y_target - log Z^), Z^ = (1/N) sum_j c_j exp(y_j) / Q(w_j). Only those rows
# of U, W and b are read or written. A row whose target is negative (padding) has no loss.
# U, W or b NULL: that term is absent.
from libc.string cimport memcpy, memset

from kernel_common cimport axpy_row, dot_row, gemm
from nplmtk._ext.sampling_kernels cimport Sampling, importance_weights


cdef inline float target_score(int t, const float *a, int h, const float *U, const float *x, int I, const float *W,
                               const float *b) noexcept nogil:
    """y_t of one row."""
    cdef float y = b[t] if b != NULL else 0
    if U != NULL:
        y += dot_row(h, U + <Py_ssize_t> t * h, a)
    if W != NULL:
        y += dot_row(I, W + <Py_ssize_t> t * I, x)
    return y


cdef inline double sampled_scores(Sampling *sp, int K, const int *targets, int stride, const float *A, int h,
                                  const float *U, const float *X, int I, const float *W, const float *b,
                                  double *ess) noexcept nogil:
    """The distinct samples' rows of U and W gathered (sp.U_rows, sp.W_rows), their scores
    for the K rows of A (K x h) and X (K x I) by sgemm, then in sp.weights (K x distinct)
    each row's normalised importance weights (0 for a row whose target, targets[i * stride],
    is negative). Returns the sum of the rows' estimated log p(target), y_t - log Z^; adds
    their effective sample sizes to `ess`."""
    cdef int M = sp.distinct, i, j, t
    cdef double estimate = 0
    for j in range(M):
        if U != NULL:
            memcpy(sp.U_rows + j * h, U + <Py_ssize_t> sp.words[j] * h, h * sizeof(float))
        if W != NULL:
            memcpy(sp.W_rows + j * I, W + <Py_ssize_t> sp.words[j] * I, I * sizeof(float))
    for i in range(K):
        for j in range(M):
            sp.weights[<Py_ssize_t> i * M + j] = b[sp.words[j]] if b != NULL else 0
    if U != NULL:
        gemm(b'N', b'T', K, M, h, 1.0, A, h, sp.U_rows, h, 1.0, sp.weights, M)
    if W != NULL:
        gemm(b'N', b'T', K, M, I, 1.0, X, I, sp.W_rows, I, 1.0, sp.weights, M)
    for i in range(K):
        t = targets[<Py_ssize_t> i * stride]
        if t < 0:
            memset(sp.weights + <Py_ssize_t> i * M, 0, M * sizeof(float))
            continue
        estimate += (target_score(t, A + <Py_ssize_t> i * h, h, U, X + <Py_ssize_t> i * I, I, W, b)
                     - importance_weights(sp, sp.weights + <Py_ssize_t> i * M, ess))
    return estimate


cdef inline void sampled_backward(Sampling *sp, int K, const int *targets, int stride, int h, const float *U, int I,
                                  const float *W, float *dA, float *dX) noexcept nogil:
    """After sampled_scores: dL/da = sum_j g_j U_j - U_t into dA (K x h, when U), and the
    direct connections' dL/dx = sum_j g_j W_j - W_t into dX (K x I; 0 without W), with the
    rows as they are now (before any step moves them)."""
    cdef int M = sp.distinct, i, t
    if U != NULL:
        gemm(b'N', b'N', K, h, M, 1.0, sp.weights, M, sp.U_rows, h, 0.0, dA, h)
    if W != NULL:
        gemm(b'N', b'N', K, I, M, 1.0, sp.weights, M, sp.W_rows, I, 0.0, dX, I)
    else:
        memset(dX, 0, <Py_ssize_t> K * I * sizeof(float))
    for i in range(K):
        t = targets[<Py_ssize_t> i * stride]
        if t < 0:
            continue
        if U != NULL:
            axpy_row(h, -1, U + <Py_ssize_t> t * h, dA + <Py_ssize_t> i * h)
        if W != NULL:
            axpy_row(I, -1, W + <Py_ssize_t> t * I, dX + <Py_ssize_t> i * I)


cdef inline void sampled_rows_gradient(Sampling *sp, int K, const int *targets, int stride, const float *A, int h,
                                       const float *X, int I, float scale, float *gU, float *gW,
                                       float *gb) noexcept nogil:
    """After sampled_scores: `scale` times the gradient of the sampled rows and the targets'
    rows of U, W and b added to gU, gW and gb (NULL: not wanted). With gU = U, gW = W,
    gb = b and scale = -rate: the SGD step in place (after sampled_backward read the rows)."""
    cdef int M = sp.distinct, i, j, t
    if gU != NULL:  # sampled rows: sum_i g_ij a_i
        gemm(b'T', b'N', M, h, K, 1.0, sp.weights, M, A, h, 0.0, sp.row_grads, h)
        for j in range(M):
            axpy_row(h, scale, sp.row_grads + j * h, gU + <Py_ssize_t> sp.words[j] * h)
    if gW != NULL:
        gemm(b'T', b'N', M, I, K, 1.0, sp.weights, M, X, I, 0.0, sp.row_grads, I)
        for j in range(M):
            axpy_row(I, scale, sp.row_grads + j * I, gW + <Py_ssize_t> sp.words[j] * I)
    for i in range(K):
        t = targets[<Py_ssize_t> i * stride]
        if t >= 0:
            target_gradient(sp, t, A + <Py_ssize_t> i * h, h, X + <Py_ssize_t> i * I, I,
                            sp.weights + <Py_ssize_t> i * sp.distinct, scale, gU, gW, gb)


cdef inline void target_gradient(Sampling *sp, int t, const float *a, int h, const float *x, int I, const float *g,
                                 float scale, float *gU, float *gW, float *gb) noexcept nogil:
    """`scale` times one row's gradient of its target's rows (-a, -x, -1) and of the samples'
    biases (its weights g), added to gU, gW and gb (NULL: not wanted)."""
    cdef int j
    if gU != NULL:
        axpy_row(h, -scale, a, gU + <Py_ssize_t> t * h)
    if gW != NULL:
        axpy_row(I, -scale, x, gW + <Py_ssize_t> t * I)
    if gb != NULL:
        gb[t] -= scale
        for j in range(sp.distinct):
            gb[sp.words[j]] += scale * g[j]
