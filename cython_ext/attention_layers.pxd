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


cdef struct Head:
    int T              # queries: the segment's positions
    int keys           # keys: the memory's rows, then the segment's
    int memory         # the memory's rows (Transformer-XL's cached states; 0 without)
    int first          # the first key with content (the memory fills over the first segments)
    int d              # the width: qkv rows hold Q, K, V of d each
    int dh             # the head's width
    float scale        # 1 / sqrt(dh)
    const float *u     # relative positions (Dai et al. 2019, sec. 3.3): the head's content bias
    const float *v     # and position bias (dh each), NULL for absolute positions
    const float *Rk    # keys x d: W_R R_delta for each distance delta, at the head's columns


cdef inline void causal_softmax(float *S, const Head *g) noexcept nogil:
    """Each query row i of S (T x keys) becomes the softmax (max subtracted) of its keys
    first .. memory + i; the others, hidden by the causal mask or empty, become 0."""
    cdef int i, j, last
    cdef float top, total
    cdef float *row
    for i in range(g.T):
        row = S + <Py_ssize_t> i * g.keys
        last = g.memory + i
        top = row[g.first]
        for j in range(g.first + 1, last + 1):
            if row[j] > top:
                top = row[j]
        total = 0
        for j in range(g.first, last + 1):
            row[j] = expf(row[j] - top)
            total += row[j]
        total = 1 / total
        for j in range(g.first, last + 1):
            row[j] *= total
        for j in range(g.first):
            row[j] = 0
        for j in range(last + 1, g.keys):
            row[j] = 0


cdef inline void causal_softmax_backward(const float *P, float *G, const Head *g) noexcept nogil:
    """G (dL/dP on entry) becomes dL/dS: P_ij (G_ij - sum_k P_ik G_ik) where key j is seen."""
    cdef int i, j, last
    cdef float inner
    cdef const float *p
    cdef float *row
    for i in range(g.T):
        p = P + <Py_ssize_t> i * g.keys
        row = G + <Py_ssize_t> i * g.keys
        last = g.memory + i
        inner = 0
        for j in range(g.first, last + 1):
            inner += p[j] * row[j]
        for j in range(g.first, last + 1):
            row[j] = p[j] * (row[j] - inner)
        for j in range(g.first):
            row[j] = 0
        for j in range(last + 1, g.keys):
            row[j] = 0


cdef inline void biased_queries(const float *Q, const float *bias, float *out, const Head *g) noexcept nogil:
    """out (T x dh) = the head's queries plus a bias (u or v)."""
    cdef int i, c
    for i in range(g.T):
        for c in range(g.dh):
            out[i * g.dh + c] = Q[<Py_ssize_t> i * 3 * g.d + c] + bias[c]


cdef inline void attention_head(const Head *g, const float *qkv, float *P, const float *mask, float *dropped,
                                float *shifted, float *queries, float *out) noexcept nogil:
    """One stream's head: P = softmax(S) under the causal mask, kept; out = P V, or
    (P * mask) V with dropout on the weights (mask NULL: none). qkv (keys x 3d) holds the
    memory's rows then the segment's, at the head's columns; out is T x d. Absolute
    positions: S = scale Q K^T. Relative (Transformer-XL's eq. for A^rel): S_ij =
    scale ((q_i + u) . k_j + (q_i + v) . W_R R_(i-j)). Scratch: dropped and shifted
    T x keys, queries T x dh."""
    cdef int T = g.T, K = g.keys, d = g.d, dh = g.dh, i, j
    cdef Py_ssize_t k, size = <Py_ssize_t> T * K
    cdef const float *Q = qkv + <Py_ssize_t> g.memory * 3 * d
    cdef const float *weights = P
    if g.u == NULL:
        gemm(b'N', b'T', T, K, dh, g.scale, Q, 3 * d, qkv + d, 3 * d, 0, P, K)
    else:
        biased_queries(Q, g.u, queries, g)
        gemm(b'N', b'T', T, K, dh, g.scale, queries, dh, qkv + d, 3 * d, 0, P, K)
        biased_queries(Q, g.v, queries, g)
        gemm(b'N', b'T', T, K, dh, g.scale, queries, dh, g.Rk, d, 0, shifted, K)
        for i in range(T):  # the score of distance delta = memory + i - j
            for j in range(g.first, g.memory + i + 1):
                P[i * K + j] += shifted[i * K + g.memory + i - j]
    causal_softmax(P, g)
    if mask != NULL:
        for k in range(size):
            dropped[k] = P[k] * mask[k]
        weights = dropped
    gemm(b'N', b'N', T, dh, K, 1, weights, K, qkv + 2 * d, 3 * d, 0, out, d)


cdef inline void attention_head_backward(const Head *g, const float *qkv, const float *P, const float *mask,
                                         float *dropped, const float *dout, float *dqkv, float *G, float *shifted,
                                         float *queries, float *grad_queries, float *du, float *dv,
                                         float *dRk) noexcept nogil:
    """The head's gradient from dout (its columns of T x d): added to its columns of dqkv
    (keys x 3d, zero where nothing is added), and with relative positions to du, dv (dh)
    and dRk (keys x d, at the head's columns). Scratch: dropped, G, shifted T x keys;
    queries and grad_queries T x dh."""
    cdef int T = g.T, K = g.keys, d = g.d, dh = g.dh, i, j, c
    cdef Py_ssize_t k, size = <Py_ssize_t> T * K
    cdef const float *Q = qkv + <Py_ssize_t> g.memory * 3 * d
    cdef float *dQ = dqkv + <Py_ssize_t> g.memory * 3 * d
    cdef const float *weights = P
    if mask != NULL:
        for k in range(size):
            dropped[k] = P[k] * mask[k]
        weights = dropped
    gemm(b'N', b'T', T, K, dh, 1, dout, d, qkv + 2 * d, 3 * d, 0, G, K)
    gemm(b'T', b'N', K, dh, T, 1, weights, K, dout, d, 1, dqkv + 2 * d, 3 * d)
    if mask != NULL:
        for k in range(size):
            G[k] *= mask[k]
    causal_softmax_backward(P, G, g)
    gemm(b'N', b'N', T, dh, K, g.scale, G, K, qkv + d, 3 * d, 0, grad_queries, dh)
    if g.u == NULL:
        gemm(b'T', b'N', K, dh, T, g.scale, G, K, Q, 3 * d, 1, dqkv + d, 3 * d)
    else:
        biased_queries(Q, g.u, queries, g)
        gemm(b'T', b'N', K, dh, T, g.scale, G, K, queries, dh, 1, dqkv + d, 3 * d)
        for i in range(T):
            for c in range(dh):
                du[c] += grad_queries[i * dh + c]
    for i in range(T):
        for c in range(dh):
            dQ[<Py_ssize_t> i * 3 * d + c] += grad_queries[i * dh + c]
    if g.u == NULL:
        return
    for i in range(T):  # dL/d(shifted) from dL/dS: the scores gathered by distance
        for k in range(K):
            shifted[i * K + k] = 0
        for j in range(g.first, g.memory + i + 1):
            shifted[i * K + g.memory + i - j] = G[i * K + j]
    gemm(b'N', b'N', T, dh, K, g.scale, shifted, K, g.Rk, d, 0, grad_queries, dh)
    for i in range(T):
        for c in range(dh):
            dv[c] += grad_queries[i * dh + c]
            dQ[<Py_ssize_t> i * 3 * d + c] += grad_queries[i * dh + c]
    biased_queries(Q, g.v, queries, g)
    gemm(b'T', b'N', K, dh, T, g.scale, shifted, K, queries, dh, 1, dRk, d)
