# The Transformer's layers, inline, for transformer_kernels.pyx: LayerNorm, GELU and causal
# multi-head self-attention over a segment of T positions of B streams (Vaswani et al. 2017,
# sec. 3.2; pre-LayerNorm blocks as GPT-2 and fairseq's transformer_lm with normalize_before),
# forward and back-propagation. Rows are position-major within a stream: row b T + t.

from kernel_common cimport gemm


cdef extern from *:
    """
    #include <math.h>
    /* LayerNorm of rows x d (Ba et al. 2016): xhat = (x - mean) / sqrt(var + 1e-5) and
       y = gamma xhat + beta; xhat (unless NULL: scoring) and the inverse deviation kept for
       the backward pass. The statistics in double. */
    __attribute__((target_clones("avx512f", "avx2", "default"), unused))
    static void nplm_layer_norm(const float *restrict x, const float *restrict gamma, const float *restrict beta,
                                float *restrict xhat, float *restrict inverse, float *restrict y, long rows, int d) {
        for (long r = 0; r < rows; r++) {
            const float *restrict xr = x + r * d;
            float *restrict hr = xhat != NULL ? xhat + r * d : NULL, *restrict yr = y + r * d;
            double mean = 0, var = 0;
            for (int k = 0; k < d; k++)
                mean += xr[k];
            mean /= d;
            for (int k = 0; k < d; k++)
                var += (xr[k] - mean) * (xr[k] - mean);
            float s = (float) (1.0 / sqrt(var / d + 1e-5));
            float centre = (float) mean;
            inverse[r] = s;
            if (xhat != NULL)
                for (int k = 0; k < d; k++) {
                    hr[k] = (xr[k] - centre) * s;
                    yr[k] = gamma[k] * hr[k] + beta[k];
                }
            else {  /* through y, so that fast-math computes y as above, to the bit */
                for (int k = 0; k < d; k++)
                    yr[k] = (xr[k] - centre) * s;
                for (int k = 0; k < d; k++)
                    yr[k] = gamma[k] * yr[k] + beta[k];
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

    /* erf in float by a rational function on [-4, 4] (Eigen's generic_fast_erf_float, as
       TensorFlow's): within 4.3e-7 of erf everywhere (libmvec's erff: 5e-8), at half its
       time (2.3 of the stack's 6.5% on the GELU), inline so that the loops vectorise. */
    static inline float nplm_erf(float a) {
        float x = fminf(fmaxf(a, -4.0f), 4.0f), x2 = x * x;
        float p = x2 * -2.72614225801306e-10f + 2.77068142495902e-08f;
        p = x2 * p - 2.10102402082508e-06f;
        p = x2 * p - 5.69250639462346e-05f;
        p = x2 * p - 7.34990630326855e-04f;
        p = x2 * p - 2.95459980854025e-03f;
        p = x2 * p - 1.60960333262415e-02f;
        float q = x2 * -1.45660718464996e-05f - 2.13374055278905e-04f;
        q = x2 * q - 1.68282697438203e-03f;
        q = x2 * q - 7.37332916720468e-03f;
        q = x2 * q - 1.42647390514189e-02f;
        return x * p / q;
    }

    /* out = GELU(pre + c) = x Phi(x) with x = pre + c, Phi the normal CDF (Hendrycks and
       Gimpel 2016, the exact form, as PyTorch's default); pre is replaced by x, which the
       backward pass needs, unless `keep` is 0 (scoring). */
    __attribute__((target_clones("avx512f", "avx2", "default"), unused))
    static void nplm_gelu_rows(float *restrict out, float *restrict pre, const float *restrict c, long rows,
                               int width, int keep) {
        for (long r = 0; r < rows; r++)
            if (keep)
                for (int k = 0; k < width; k++) {
                    float x = pre[r * width + k] + c[k];
                    pre[r * width + k] = x;
                    out[r * width + k] = 0.5f * x * (1.0f + nplm_erf(x * 0.70710678118654752f));
                }
            else {  /* x through out, as above through pre */
                for (int k = 0; k < width; k++)
                    out[r * width + k] = pre[r * width + k] + c[k];
                for (int k = 0; k < width; k++) {
                    float x = out[r * width + k];
                    out[r * width + k] = 0.5f * x * (1.0f + nplm_erf(x * 0.70710678118654752f));
                }
            }
    }

    /* grad *= GELU'(x) = Phi(x) + x phi(x). */
    __attribute__((target_clones("avx512f", "avx2", "default"), unused))
    static void nplm_gelu_backward(float *restrict grad, const float *restrict x, long size) {
        for (long i = 0; i < size; i++) {
            float phi = 0.39894228040143268f * expf(-0.5f * x[i] * x[i]);
            grad[i] *= 0.5f * (1.0f + nplm_erf(x[i] * 0.70710678118654752f)) + x[i] * phi;
        }
    }

    /* Rows of a causal softmax: row r of S (stride ld) becomes the softmax (max subtracted)
       of its entries first .. last + r, the entries before and after them up to `width`
       0. In C, cloned per instruction set, so that the exponentials vectorise (libmvec). */
    __attribute__((target_clones("avx512f", "avx2", "default"), unused))
    static void nplm_causal_softmax(float *restrict S, long ld, int rows, int first, int last, int width) {
        for (int r = 0; r < rows; r++) {
            float *restrict row = S + r * ld;
            int end = last + r + 1;
            float top = row[first], total = 0;
            for (int j = first + 1; j < end; j++)
                top = row[j] > top ? row[j] : top;
            for (int j = first; j < end; j++) {
                row[j] = expf(row[j] - top);
                total += row[j];
            }
            total = 1 / total;
            for (int j = first; j < end; j++)
                row[j] *= total;
            for (int j = 0; j < first; j++)
                row[j] = 0;
            for (int j = end; j < width; j++)
                row[j] = 0;
        }
    }

    /* Its gradient: G (dL/dP on entry) becomes dL/dS, P_ij (G_ij - sum_k P_ik G_ik) where
       key j is seen, 0 elsewhere up to `width`. */
    __attribute__((target_clones("avx512f", "avx2", "default"), unused))
    static void nplm_causal_softmax_backward(const float *restrict P, float *restrict G, long ld, int rows, int first,
                                             int last, int width) {
        for (int r = 0; r < rows; r++) {
            const float *restrict p = P + r * ld;
            float *restrict row = G + r * ld;
            int end = last + r + 1;
            float inner = 0;
            for (int j = first; j < end; j++)
                inner += p[j] * row[j];
            for (int j = first; j < end; j++)
                row[j] = p[j] * (row[j] - inner);
            for (int j = 0; j < first; j++)
                row[j] = 0;
            for (int j = end; j < width; j++)
                row[j] = 0;
        }
    }
    """
    void layer_norm "nplm_layer_norm"(const float *x, const float *gamma, const float *beta, float *xhat,
                                      float *inverse, float *y, long rows, int d) noexcept nogil
    void layer_norm_backward "nplm_layer_norm_backward"(const float *dy, const float *xhat, const float *inverse,
                                                        const float *gamma, float *dx, float *dgamma, float *dbeta,
                                                        long rows, int d) noexcept nogil
    void gelu_rows "nplm_gelu_rows"(float *out, float *pre, const float *c, long rows, int width,
                                    int keep) noexcept nogil
    void gelu_backward "nplm_gelu_backward"(float *grad, const float *x, long size) noexcept nogil
    void causal_softmax "nplm_causal_softmax"(float *S, long ld, int rows, int first, int last,
                                              int width) noexcept nogil
    void causal_softmax_backward "nplm_causal_softmax_backward"(const float *P, float *G, long ld, int rows, int first,
                                                                int last, int width) noexcept nogil


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


cdef enum:
    QUERY_BLOCK = 64   # queries a block: block b's rows see keys up to M + 64 (b + 1) only, so
                       # the products skip part of the causal mask's upper triangle (64, not 32:
                       # fewer small products to pack; scoring 0.80x the time at T 128, 1 thread)


cdef inline void biased_queries(const float *Q, const float *bias, float *out, int rows, const Head *g) noexcept nogil:
    """out (rows x dh) = the head's queries (rows of Q, stride 3d) plus a bias (u or v)."""
    cdef int i, c
    for i in range(rows):
        for c in range(g.dh):
            out[i * g.dh + c] = Q[<Py_ssize_t> i * 3 * g.d + c] + bias[c]


cdef inline void add_query_rows(const float *grad_queries, float *dQ, float *dbias, int rows,
                                const Head *g) noexcept nogil:
    """dQ's rows (stride 3d) += grad_queries (rows x dh), and their column sums to dbias
    (NULL: none)."""
    cdef int i, c
    for i in range(rows):
        for c in range(g.dh):
            dQ[<Py_ssize_t> i * 3 * g.d + c] += grad_queries[i * g.dh + c]
    if dbias != NULL:
        for i in range(rows):
            for c in range(g.dh):
                dbias[c] += grad_queries[i * g.dh + c]


cdef inline void masked_weights(const float *P, const float *mask, float *out, int rows, int width,
                                int ld) noexcept nogil:
    cdef int i, j
    for i in range(rows):
        for j in range(width):
            out[i * ld + j] = P[i * ld + j] * mask[i * ld + j]


cdef inline void attention_head(const Head *g, const float *qkv, float *P, const float *mask, float *dropped,
                                float *shifted, float *queries, float *out) noexcept nogil:
    """One stream's head: P = softmax(S) under the causal mask, kept; out = P V, or
    (P * mask) V with dropout on the weights (mask NULL: none). qkv (keys x 3d) holds the
    memory's rows then the segment's, at the head's columns; out is T x d. Absolute
    positions: S = scale Q K^T. Relative (Transformer-XL's eq. for A^rel): S_ij =
    scale ((q_i + u) . k_j + (q_i + v) . W_R R_(i-j)). A block of QUERY_BLOCK queries
    computes its keys up to the last it sees; P's entries past them are never read.
    Scratch: dropped and shifted T x keys, queries T x dh."""
    cdef int K = g.keys, d = g.d, dh = g.dh, M = g.memory, i0, rows, width, r, j, i, block
    cdef const float *Q
    cdef const float *weights
    cdef float *S
    for block in range((g.T + QUERY_BLOCK - 1) // QUERY_BLOCK):
        i0 = block * QUERY_BLOCK
        rows = min(QUERY_BLOCK, g.T - i0)
        width = M + i0 + rows  # the keys the block's last query sees
        Q = qkv + <Py_ssize_t> (M + i0) * 3 * d
        S = P + <Py_ssize_t> i0 * K
        if g.u == NULL:
            gemm(b'N', b'T', rows, width, dh, g.scale, Q, 3 * d, qkv + d, 3 * d, 0, S, K)
        else:
            biased_queries(Q, g.u, queries, rows, g)
            gemm(b'N', b'T', rows, width, dh, g.scale, queries, dh, qkv + d, 3 * d, 0, S, K)
            biased_queries(Q, g.v, queries, rows, g)
            gemm(b'N', b'T', rows, width, dh, g.scale, queries, dh, g.Rk, d, 0, shifted, K)
            for r in range(rows):  # the score of distance delta = memory + i - j
                i = i0 + r
                for j in range(g.first, M + i + 1):
                    S[r * K + j] += shifted[r * K + M + i - j]
        causal_softmax(S, K, rows, g.first, M + i0, width)
        weights = S
        if mask != NULL:
            masked_weights(S, mask + <Py_ssize_t> i0 * K, dropped, rows, width, K)
            weights = dropped
        gemm(b'N', b'N', rows, dh, width, 1, weights, K, qkv + 2 * d, 3 * d, 0, out + <Py_ssize_t> i0 * d, d)


cdef inline void attention_head_backward(const Head *g, const float *qkv, const float *P, const float *mask,
                                         float *dropped, const float *dout, float *dqkv, float *G, float *shifted,
                                         float *queries, float *grad_queries, float *du, float *dv,
                                         float *dRk) noexcept nogil:
    """The head's gradient from dout (its columns of T x d): added to its columns of dqkv
    (keys x 3d, zero where nothing is added), and with relative positions to du, dv (dh)
    and dRk (keys x d, at the head's columns). By blocks of queries as attention_head.
    Scratch: dropped, G, shifted T x keys; queries and grad_queries T x dh."""
    cdef int K = g.keys, d = g.d, dh = g.dh, M = g.memory, i0, rows, width, r, j, i, block
    cdef const float *Q
    cdef const float *S
    cdef const float *weights
    cdef const float *dout_rows
    cdef float *dQ
    for block in range((g.T + QUERY_BLOCK - 1) // QUERY_BLOCK):
        i0 = block * QUERY_BLOCK
        rows = min(QUERY_BLOCK, g.T - i0)
        width = M + i0 + rows
        Q = qkv + <Py_ssize_t> (M + i0) * 3 * d
        dQ = dqkv + <Py_ssize_t> (M + i0) * 3 * d
        S = P + <Py_ssize_t> i0 * K
        dout_rows = dout + <Py_ssize_t> i0 * d
        weights = S
        if mask != NULL:
            masked_weights(S, mask + <Py_ssize_t> i0 * K, dropped, rows, width, K)
            weights = dropped
        gemm(b'N', b'T', rows, width, dh, 1, dout_rows, d, qkv + 2 * d, 3 * d, 0, G, K)
        gemm(b'T', b'N', width, dh, rows, 1, weights, K, dout_rows, d, 1, dqkv + 2 * d, 3 * d)
        if mask != NULL:
            masked_weights(G, mask + <Py_ssize_t> i0 * K, G, rows, width, K)
        causal_softmax_backward(S, G, K, rows, g.first, M + i0, width)
        gemm(b'N', b'N', rows, dh, width, g.scale, G, K, qkv + d, 3 * d, 0, grad_queries, dh)
        if g.u == NULL:
            gemm(b'T', b'N', width, dh, rows, g.scale, G, K, Q, 3 * d, 1, dqkv + d, 3 * d)
        else:
            biased_queries(Q, g.u, queries, rows, g)
            gemm(b'T', b'N', width, dh, rows, g.scale, G, K, queries, dh, 1, dqkv + d, 3 * d)
        add_query_rows(grad_queries, dQ, du, rows, g)
        if g.u == NULL:
            continue
        for r in range(rows):  # dL/d(shifted) from dL/dS: the scores gathered by distance
            i = i0 + r
            for j in range(width):
                shifted[r * K + j] = 0
            for j in range(g.first, M + i + 1):
                shifted[r * K + M + i - j] = G[r * K + j]
        gemm(b'N', b'N', rows, dh, width, g.scale, shifted, K, g.Rk, d, 0, grad_queries, dh)
        add_query_rows(grad_queries, dQ, dv, rows, g)
        biased_queries(Q, g.v, queries, rows, g)
        gemm(b'T', b'N', width, dh, rows, g.scale, shifted, K, queries, dh, 1, dRk, d)
