# The Transformer's layers, inline, for transformer_kernels.pyx: LayerNorm, GELU and causal
# multi-head self-attention over a segment of T positions of B streams (Vaswani et al. 2017,
# sec. 3.2; pre-LayerNorm blocks as GPT-2 and fairseq's transformer_lm with normalize_before),
# forward and back-propagation. Rows are position-major within a stream: row b T + t.
from libc.math cimport expf

from kernel_common cimport gemm


cdef extern from *:
    """
    #include <math.h>
    /* LayerNorm of rows x d (Ba et al. 2016): xhat = (x - mean) / sqrt(var + 1e-5) and
       y = gamma xhat + beta; xhat and the inverse deviation kept for the backward pass.
       The statistics in double: a row's variance is a difference of large sums. */
    __attribute__((target_clones("avx512f", "avx2", "default"), unused))
    static void nplm_layer_norm(const float *restrict x, const float *restrict gamma, const float *restrict beta,
                                float *restrict xhat, float *restrict inverse, float *restrict y, long rows, int d) {
        for (long r = 0; r < rows; r++) {
            const float *restrict xr = x + r * d;
            float *restrict hr = xhat + r * d, *restrict yr = y + r * d;
            double mean = 0, var = 0;
            for (int k = 0; k < d; k++)
                mean += xr[k];
            mean /= d;
            for (int k = 0; k < d; k++)
                var += (xr[k] - mean) * (xr[k] - mean);
            float s = (float) (1.0 / sqrt(var / d + 1e-5));
            float centre = (float) mean;
            inverse[r] = s;
            for (int k = 0; k < d; k++) {
                hr[k] = (xr[k] - centre) * s;
                yr[k] = gamma[k] * hr[k] + beta[k];
            }
        }
    }

    /* Its gradient: with g = dy gamma, dx += s (g - mean(g) - xhat mean(g xhat));
       dgamma += dy xhat and dbeta += dy, summed over the rows. */
    __attribute__((target_clones("avx512f", "avx2", "default"), unused))
    static void nplm_layer_norm_backward(const float *restrict dy, const float *restrict xhat,
                                         const float *restrict inverse, const float *restrict gamma,
                                         float *restrict dx, float *restrict dgamma, float *restrict dbeta,
                                         long rows, int d) {
        for (long r = 0; r < rows; r++) {
            const float *restrict dr = dy + r * d, *restrict hr = xhat + r * d;
            float *restrict xr = dx + r * d;
            float a = 0, b = 0;
            for (int k = 0; k < d; k++) {
                float g = dr[k] * gamma[k];
                a += g;
                b += g * hr[k];
                dgamma[k] += dr[k] * hr[k];
                dbeta[k] += dr[k];
            }
            a /= d;
            b /= d;
            for (int k = 0; k < d; k++)
                xr[k] += inverse[r] * (dr[k] * gamma[k] - a - hr[k] * b);
        }
    }

    /* out = GELU(pre + c) = x Phi(x) with x = pre + c, Phi the normal CDF (Hendrycks and
       Gimpel 2016, the exact form, as PyTorch's default); pre is replaced by x, which the
       backward pass needs. */
    __attribute__((target_clones("avx512f", "avx2", "default"), unused))
    static void nplm_gelu_rows(float *restrict out, float *restrict pre, const float *restrict c, long rows,
                               int width) {
        for (long r = 0; r < rows; r++)
            for (int k = 0; k < width; k++) {
                float x = pre[r * width + k] + c[k];
                pre[r * width + k] = x;
                out[r * width + k] = 0.5f * x * (1.0f + erff(x * 0.70710678118654752f));
            }
    }

    /* grad *= GELU'(x) = Phi(x) + x phi(x). */
    __attribute__((target_clones("avx512f", "avx2", "default"), unused))
    static void nplm_gelu_backward(float *restrict grad, const float *restrict x, long size) {
        for (long i = 0; i < size; i++) {
            float phi = 0.39894228040143268f * expf(-0.5f * x[i] * x[i]);
            grad[i] *= 0.5f * (1.0f + erff(x[i] * 0.70710678118654752f)) + x[i] * phi;
        }
    }
    """
    void layer_norm "nplm_layer_norm"(const float *x, const float *gamma, const float *beta, float *xhat,
                                      float *inverse, float *y, long rows, int d) noexcept nogil
    void layer_norm_backward "nplm_layer_norm_backward"(const float *dy, const float *xhat, const float *inverse,
                                                        const float *gamma, float *dx, float *dgamma, float *dbeta,
                                                        long rows, int d) noexcept nogil
    void gelu_rows "nplm_gelu_rows"(float *out, float *pre, const float *c, long rows, int width) noexcept nogil
    void gelu_backward "nplm_gelu_backward"(float *grad, const float *x, long size) noexcept nogil


cdef inline void causal_softmax(float *S, int T) noexcept nogil:
    """Each row i of the T x T scores becomes the softmax of its first i + 1 (max
    subtracted); the positions after i, which the causal mask hides, become 0."""
    cdef int i, j
    cdef float top, total
    cdef float *row
    for i in range(T):
        row = S + <Py_ssize_t> i * T
        top = row[0]
        for j in range(1, i + 1):
            if row[j] > top:
                top = row[j]
        total = 0
        for j in range(i + 1):
            row[j] = expf(row[j] - top)
            total += row[j]
        total = 1 / total
        for j in range(i + 1):
            row[j] *= total
        for j in range(i + 1, T):
            row[j] = 0


cdef inline void causal_softmax_backward(const float *P, float *G, int T) noexcept nogil:
    """G (dL/dP on entry) becomes dL/dS: P_ij (G_ij - sum_k P_ik G_ik) where j <= i."""
    cdef int i, j
    cdef float inner
    cdef const float *p
    cdef float *g
    for i in range(T):
        p = P + <Py_ssize_t> i * T
        g = G + <Py_ssize_t> i * T
        inner = 0
        for j in range(i + 1):
            inner += p[j] * g[j]
        for j in range(i + 1):
            g[j] = p[j] * (g[j] - inner)
        for j in range(i + 1, T):
            g[j] = 0


cdef inline void attention_head(const float *qkv, float *P, const float *mask, float *dropped, float *out, int T,
                                int d, int dh, float scale) noexcept nogil:
    """One stream's head: P = softmax(scale Q K^T) under the causal mask, kept; out = P V,
    or (P * mask) V with dropout on the weights (mask NULL: none; dropped: T x T scratch).
    Q, K and V are the head's dh columns of each third of qkv (T x 3d), out its columns of
    T x d."""
    cdef Py_ssize_t k, size = <Py_ssize_t> T * T
    cdef const float *weights = P
    gemm(b'N', b'T', T, T, dh, scale, qkv, 3 * d, qkv + d, 3 * d, 0, P, T)
    causal_softmax(P, T)
    if mask != NULL:
        for k in range(size):
            dropped[k] = P[k] * mask[k]
        weights = dropped
    gemm(b'N', b'N', T, dh, T, 1, weights, T, qkv + 2 * d, 3 * d, 0, out, d)


cdef inline void attention_head_backward(const float *qkv, const float *P, const float *mask, float *dropped,
                                         const float *dout, float *dqkv, float *G, int T, int d, int dh,
                                         float scale) noexcept nogil:
    """The head's gradient: from dout (its columns of T x d), its columns of dqkv (T x 3d)
    are set. dropped and G are T x T scratch."""
    cdef Py_ssize_t k, size = <Py_ssize_t> T * T
    cdef const float *weights = P
    if mask != NULL:
        for k in range(size):
            dropped[k] = P[k] * mask[k]
        weights = dropped
    gemm(b'N', b'T', T, T, dh, 1, dout, d, qkv + 2 * d, 3 * d, 0, G, T)
    gemm(b'T', b'N', T, dh, T, 1, weights, T, dout, d, 0, dqkv + 2 * d, 3 * d)
    if mask != NULL:
        for k in range(size):
            G[k] *= mask[k]
    causal_softmax_backward(P, G, T)
    gemm(b'N', b'N', T, dh, T, scale, G, T, qkv + d, 3 * d, 0, dqkv, 3 * d)
    gemm(b'T', b'N', T, dh, T, scale, G, T, qkv, 3 * d, 0, dqkv + d, 3 * d)
