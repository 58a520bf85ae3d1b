# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""The Transformer's stack a position at a time, for generation (nplmtk/neural/transformer.py's
TransformerStreams): each block's keys and values of every position a stream has read are
kept (a cache per block and stream), so that a step costs one position's products and its
attention over the cached keys, not the whole context again. The same arithmetic as
transformer_kernels.TransformerStack's forward pass without dropout: pre-LayerNorm blocks,
causal multi-head attention (absolute positions, or Transformer-XL's relative ones:
S_j = scale ((q + u) . k_j + (q + v) . W_R R_(n-j)) for the query at position n), the exact
GELU, the final LayerNorm."""
import numpy as np
from libc.math cimport expf, sqrtf
from libc.string cimport memcpy

from attention_layers cimport gelu_rows, layer_norm
from kernel_common cimport axpy_row, dot_row, gemm

from nplmtk._ext.transformer_kernels import BLOCK_PARAMETERS, RELATIVE_PARAMETERS, relative_positions

cdef enum:
    MAX_BLOCKS = 64
    ARRAYS = 15


cdef float *pointer(array) except? NULL:
    if array.dtype != np.float32 or not array.flags.c_contiguous:
        raise ValueError("transformer arrays must be C-contiguous float32")
    cdef float[::1] flat = array.reshape(-1)
    return &flat[0]


cdef class TransformerSteps:
    """`streams` streams of up to `capacity` positions each; `lengths` (int32, public):
    the positions each stream has read. params: the stack's arrays (BLOCK_PARAMETERS and,
    relative, RELATIVE_PARAMETERS, with the block's number; final_gain, final_bias)."""
    cdef float *param[MAX_BLOCKS][ARRAYS]
    cdef float *keys[MAX_BLOCKS]      # streams x capacity x d: each block's keys
    cdef float *values[MAX_BLOCKS]
    cdef float *Rk[MAX_BLOCKS]        # capacity x d: W_R R_delta for each distance (relative)
    cdef float *final_gain
    cdef float *final_bias
    cdef int blocks, heads, d, ff, streams, capacity
    cdef bint relative
    cdef list arrays
    cdef readonly object lengths
    cdef int *length_of

    def __init__(self, params, int blocks, int heads, int streams, int capacity, bint relative):
        d, ff = params["final_gain"].shape[0], params["ff1_bias0"].shape[0]
        if not 0 < blocks <= MAX_BLOCKS or heads < 1 or d % heads or streams < 1 or capacity < 1:
            raise ValueError("transformer steps settings out of range")
        self.blocks, self.heads, self.d, self.ff = blocks, heads, d, ff
        self.streams, self.capacity, self.relative = streams, capacity, relative
        self.arrays = [params]
        sizes = {"d": d, "3d": 3 * d, "f": ff}
        names = BLOCK_PARAMETERS + (RELATIVE_PARAMETERS if relative else ())
        for b in range(blocks):
            for index, (name, shape) in enumerate(names):
                array = params[f"{name}{b}"]
                if array.shape != tuple(sizes[s] for s in shape):
                    raise ValueError(f"{name}{b}: shape {array.shape}")
                self.param[b][index] = pointer(array)
            self.keys[b] = self._buffer(streams * capacity * d)
            self.values[b] = self._buffer(streams * capacity * d)
            if relative:
                self.Rk[b] = self._keep(relative_positions(capacity, d) @ params[f"rel{b}"])
        self.final_gain, self.final_bias = pointer(params["final_gain"]), pointer(params["final_bias"])
        self.lengths = np.zeros(streams, dtype=np.int32)
        cdef int[::1] view = self.lengths
        self.length_of = &view[0]

    cdef float *_keep(self, array) except? NULL:
        array = np.ascontiguousarray(array, dtype=np.float32)
        self.arrays.append(array)
        return pointer(array)

    cdef float *_buffer(self, Py_ssize_t size) except? NULL:
        return self._keep(np.zeros(max(size, 1), dtype=np.float32))

    def copy_streams(self, const int[::1] sources, const int[::1] targets):
        """Stream targets[k] takes the cache and length of stream sources[k]."""
        cdef int k, b, n
        cdef int[::1] lengths = self.lengths
        cdef Py_ssize_t row = <Py_ssize_t> self.capacity * self.d
        for k in range(sources.shape[0]):
            n = lengths[sources[k]]
            for b in range(self.blocks):
                memcpy(self.keys[b] + targets[k] * row, self.keys[b] + sources[k] * row, n * self.d * sizeof(float))
                memcpy(self.values[b] + targets[k] * row, self.values[b] + sources[k] * row,
                       n * self.d * sizeof(float))
            lengths[targets[k]] = n

    def step(self, const int[::1] rows, float[:, ::1] x):
        """The streams `rows` each read one more position, whose input row is x's row of
        the same index (replaced by the top state there)."""
        cdef int S = rows.shape[0], d = self.d, f = self.ff, b, k
        cdef int[::1] lengths = self.lengths
        if x.shape[0] != S or x.shape[1] != d:
            raise ValueError("an input row per stream stepped")
        for k in range(S):
            if not 0 <= rows[k] < self.streams or lengths[rows[k]] >= self.capacity:
                raise ValueError(f"stream {rows[k]}: not one of the streams, or its cache is full")
        if len(set(np.asarray(rows).tolist())) != S:
            raise ValueError("a stream stepped twice at once")
        if S == 0:
            return
        scratch = np.zeros((8, S, max(3 * d, f)), dtype=np.float32)
        cdef float[:, :, ::1] w = scratch
        cdef float[::1] inverse = np.zeros(S, dtype=np.float32)
        cdef float[::1] scores = np.zeros(self.capacity, dtype=np.float32)
        with nogil:
            for b in range(self.blocks):
                self._block(b, &rows[0], S, &x[0, 0], &w[0, 0, 0], &w[1, 0, 0], &w[2, 0, 0], &w[3, 0, 0],
                            &w[4, 0, 0], &inverse[0], &scores[0])
            layer_norm(&x[0, 0], self.final_gain, self.final_bias, &w[0, 0, 0], &inverse[0], &w[1, 0, 0], S, d)
            memcpy(&x[0, 0], &w[1, 0, 0], S * d * sizeof(float))
        for k in range(S):
            lengths[rows[k]] += 1

    cdef void _block(self, int b, const int *rows, int S, float *x, float *xhat, float *h, float *qkv,
                     float *branch, float *attention, float *inverse, float *scores) noexcept nogil:
        """One block for S streams' new positions: x (S x d) becomes the block's output.
        The scratch rows are max(3d, f) wide."""
        cdef int d = self.d, f = self.ff, dh = self.d // self.heads, wide = max(3 * self.d, self.ff)
        cdef int k, head, j, n, c
        cdef float scale = 1 / sqrtf(dh), top, total
        cdef float **p = self.param[b]
        cdef Py_ssize_t at
        cdef float *K
        cdef float *V
        cdef float *q
        cdef float *out
        cdef const float *Rk = self.Rk[b]
        for k in range(S):  # rows of stride `wide`: pack x's rows there for the products
            layer_norm(x + <Py_ssize_t> k * d, p[0], p[1], xhat, inverse, h + <Py_ssize_t> k * wide, 1, d)
            memcpy(qkv + <Py_ssize_t> k * wide, p[3], 3 * d * sizeof(float))
        gemm(b'N', b'N', S, 3 * d, d, 1, h, wide, p[2], 3 * d, 1, qkv, wide)
        for k in range(S):
            n = self.length_of[rows[k]]
            at = (<Py_ssize_t> rows[k] * self.capacity + n) * d
            memcpy(self.keys[b] + at, qkv + <Py_ssize_t> k * wide + d, d * sizeof(float))
            memcpy(self.values[b] + at, qkv + <Py_ssize_t> k * wide + 2 * d, d * sizeof(float))
            K = self.keys[b] + <Py_ssize_t> rows[k] * self.capacity * d
            V = self.values[b] + <Py_ssize_t> rows[k] * self.capacity * d
            out = attention + <Py_ssize_t> k * wide
            for head in range(self.heads):
                q = qkv + <Py_ssize_t> k * wide + head * dh
                for j in range(n + 1):
                    if self.relative:
                        scores[j] = 0
                        for c in range(dh):
                            scores[j] += (q[c] + p[13][head * dh + c]) * K[<Py_ssize_t> j * d + head * dh + c] \
                                + (q[c] + p[14][head * dh + c]) * Rk[<Py_ssize_t> (n - j) * d + head * dh + c]
                        scores[j] *= scale
                    else:
                        scores[j] = scale * dot_row(dh, q, K + <Py_ssize_t> j * d + head * dh)
                top = scores[0]
                for j in range(1, n + 1):
                    if scores[j] > top:
                        top = scores[j]
                total = 0
                for j in range(n + 1):
                    scores[j] = expf(scores[j] - top)
                    total += scores[j]
                for c in range(dh):
                    out[head * dh + c] = 0
                for j in range(n + 1):
                    axpy_row(dh, scores[j] / total, V + <Py_ssize_t> j * d + head * dh, out + head * dh)
        for k in range(S):
            memcpy(branch + <Py_ssize_t> k * wide, p[5], d * sizeof(float))
        gemm(b'N', b'N', S, d, d, 1, attention, wide, p[4], d, 1, branch, wide)
        for k in range(S):
            axpy_row(d, 1, branch + <Py_ssize_t> k * wide, x + <Py_ssize_t> k * d)
            layer_norm(x + <Py_ssize_t> k * d, p[6], p[7], xhat, inverse, h + <Py_ssize_t> k * wide, 1, d)
        gemm(b'N', b'N', S, f, d, 1, h, wide, p[8], f, 0, qkv, wide)
        for k in range(S):
            gelu_rows(attention + <Py_ssize_t> k * wide, qkv + <Py_ssize_t> k * wide, p[9], 1, f, 0)
            memcpy(branch + <Py_ssize_t> k * wide, p[11], d * sizeof(float))
        gemm(b'N', b'N', S, d, f, 1, attention, wide, p[10], d, 1, branch, wide)
        for k in range(S):
            axpy_row(d, 1, branch + <Py_ssize_t> k * wide, x + <Py_ssize_t> k * d)
