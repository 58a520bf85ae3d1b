# The Transformer's stack of blocks (attention_layers.pxd): N pre-LayerNorm blocks of causal
# multi-head self-attention and a GELU feed-forward layer, then a final LayerNorm, over a
# segment of T positions of B streams, forward and back-propagation (Vaswani et al. 2017;
# Radford et al. 2019's block order); optionally Transformer-XL's memory of the previous
# segment and relative positions (Dai et al. 2019, sec. 3.2-3.3). Parameters and buffers are
# arrays Python allocated; set_threads shares each pass among OpenMP threads.
import numpy as np

from cython.parallel cimport prange, threadid
from libc.math cimport sqrtf
from libc.string cimport memcpy, memset

from attention_layers cimport Head, attention_head, attention_head_backward, gelu_backward, gelu_rows, layer_norm, \
    layer_norm_backward
from elementwise cimport column_sums, draw_key, dropout_at
from transformer_parts cimport part_start, split_gemm, split_gradient_transposed

cdef enum:
    MAX_BLOCKS = 64
    MAX_THREADS = 64
    PARAMETERS = 15
    LN1_GAIN = 0
    LN1_BIAS = 1
    QKV = 2
    QKV_BIAS = 3
    OUT = 4
    OUT_BIAS = 5
    LN2_GAIN = 6
    LN2_BIAS = 7
    FF1 = 8
    FF1_BIAS = 9
    FF2 = 10
    FF2_BIAS = 11
    REL = 12         # relative positions: W_R (d x d), and the biases u and v (d each)
    REL_U = 13
    REL_V = 14

# Each block's parameters in order, with their shapes in d (the width) and f (the
# feed-forward width): the names of `params` are these with the block's number appended.
BLOCK_PARAMETERS = (("ln1_gain", ("d",)), ("ln1_bias", ("d",)), ("qkv", ("d", "3d")), ("qkv_bias", ("3d",)),
                    ("out", ("d", "d")), ("out_bias", ("d",)), ("ln2_gain", ("d",)), ("ln2_bias", ("d",)),
                    ("ff1", ("d", "f")), ("ff1_bias", ("f",)), ("ff2", ("f", "d")), ("ff2_bias", ("d",)))
RELATIVE_PARAMETERS = (("rel", ("d", "d")), ("rel_u", ("d",)), ("rel_v", ("d",)))


def relative_positions(keys, d):
    """R (keys x d): row delta the sinusoid of distance delta, sines then cosines
    (Transformer-XL's PositionalEmbedding)."""
    inverse = 1 / 10000 ** (np.arange(0, d, 2, dtype=np.float64) / d)
    angles = np.arange(keys, dtype=np.float64)[:, None] * inverse[None, :]
    return np.concatenate([np.sin(angles), np.cos(angles)], axis=1).astype(np.float32)


cdef struct Block:
    float *param[PARAMETERS]
    float *grad[PARAMETERS]
    float *memory       # B x M x d: the block's inputs of the last M positions before the segment
    float *joined       # B x (M + T) x d: the memory's rows then the segment's, per stream (M > 0)
    float *xhat1        # B (M + T) x d: LayerNorm 1's normalised input, and its inverse deviations
    float *inverse1
    float *h1           # B (M + T) x d: the attention's input
    float *qkv          # B (M + T) x 3d: queries, keys and values
    float *Rk           # (M + T) x d: W_R R_delta (relative positions)
    float *weights      # B x H x T x (M + T): the attention weights (after the causal softmax)
    float *weight_mask  # the same: dropout's scale on them (NULL without dropout)
    float *attention    # N x d: the heads' outputs side by side
    float *x2           # N x d: the residual stream after the attention
    float *xhat2
    float *inverse2
    float *h2           # N x d: the feed-forward layer's input
    float *pre          # N x f: its pre-activations (bias added)
    float *activation   # N x f: GELU of them
    float *out_mask     # N x d: dropout's scale on the attention's output (NULL: none)
    float *ff_mask      # N x d: on the feed-forward output


cdef void split_layer_norm(int parts, const float *x, const float *gamma, const float *beta, float *xhat,
                           float *inverse, float *y, Py_ssize_t rows, int d) noexcept nogil:
    cdef int p
    cdef Py_ssize_t lo, hi
    for p in prange(parts, num_threads=parts, schedule="static", chunksize=1, nogil=True):
        lo, hi = part_start(rows, parts, p), part_start(rows, parts, p + 1)
        layer_norm(x + lo * d, gamma, beta, xhat + lo * d if xhat != NULL else NULL, inverse + lo, y + lo * d, hi - lo,
                   d)


cdef void split_layer_norm_backward(int parts, float *partial, Py_ssize_t stride, const float *dy, const float *xhat,
                                    const float *inverse, const float *gamma, float *dx, float *dgamma, float *dbeta,
                                    Py_ssize_t rows, int d) noexcept nogil:
    """layer_norm_backward by slices of rows; each thread sums its dgamma and dbeta in its
    `partial` (2d floats, `stride` apart), added to them after."""
    cdef int p, c
    cdef Py_ssize_t lo, hi
    for p in prange(parts, num_threads=parts, schedule="static", chunksize=1, nogil=True):
        lo, hi = part_start(rows, parts, p), part_start(rows, parts, p + 1)
        memset(partial + p * stride, 0, 2 * d * sizeof(float))
        layer_norm_backward(dy + lo * d, xhat + lo * d, inverse + lo, gamma, dx + lo * d, partial + p * stride,
                            partial + p * stride + d, hi - lo, d)
    for p in range(parts):
        for c in range(d):
            dgamma[c] += partial[p * stride + c]
            dbeta[c] += partial[p * stride + d + c]


cdef void split_column_sums(int parts, float *partial, Py_ssize_t stride, const float *A, Py_ssize_t rows, int cols,
                            float *out) noexcept nogil:
    """out = A's column sums, each thread's slice of rows summed in its `partial`."""
    cdef int p, c
    cdef Py_ssize_t lo, hi
    if parts == 1:
        column_sums(A, rows, cols, out)
        return
    for p in prange(parts, num_threads=parts, schedule="static", chunksize=1, nogil=True):
        lo, hi = part_start(rows, parts, p), part_start(rows, parts, p + 1)
        column_sums(A + lo * cols, hi - lo, cols, partial + p * stride)
    memset(out, 0, cols * sizeof(float))
    for p in range(parts):
        for c in range(cols):
            out[c] += partial[p * stride + c]


cdef void split_gelu(int parts, float *out, float *pre, const float *c, Py_ssize_t rows, int width,
                     bint keep) noexcept nogil:
    cdef int p
    cdef Py_ssize_t lo, hi
    for p in prange(parts, num_threads=parts, schedule="static", chunksize=1, nogil=True):
        lo, hi = part_start(rows, parts, p), part_start(rows, parts, p + 1)
        gelu_rows(out + lo * width, pre + lo * width, c, hi - lo, width, keep)


cdef void split_gelu_backward(int parts, float *grad, const float *x, Py_ssize_t size) noexcept nogil:
    cdef int p
    cdef Py_ssize_t lo, hi
    for p in prange(parts, num_threads=parts, schedule="static", chunksize=1, nogil=True):
        lo, hi = part_start(size, parts, p), part_start(size, parts, p + 1)
        gelu_backward(grad + lo, x + lo, hi - lo)


cdef void residual_branch(int parts, float *branch, float *mask, const float *x, float *out, Py_ssize_t size, float p,
                          unsigned long long *rng) noexcept nogil:
    """out = x + dropout(branch) (mask NULL: no dropout), the mask drawn by index."""
    cdef int part
    cdef Py_ssize_t lo, hi, i
    cdef unsigned long long key = draw_key(rng) if mask != NULL else 0
    for part in prange(parts, num_threads=parts, schedule="static", chunksize=1, nogil=True):
        lo, hi = part_start(size, parts, part), part_start(size, parts, part + 1)
        if mask != NULL:
            dropout_at(branch, mask, lo, hi, p, key)
        for i in range(lo, hi):
            out[i] = x[i] + branch[i]


cdef void masked_copy(int parts, const float *grad, const float *mask, float *out, Py_ssize_t size) noexcept nogil:
    cdef int part
    cdef Py_ssize_t lo, hi, i
    for part in prange(parts, num_threads=parts, schedule="static", chunksize=1, nogil=True):
        lo, hi = part_start(size, parts, part), part_start(size, parts, part + 1)
        if mask == NULL:
            memcpy(out + lo, grad + lo, (hi - lo) * sizeof(float))
        else:
            for i in range(lo, hi):
                out[i] = grad[i] * mask[i]


cdef class TransformerStack:
    """The blocks and the final LayerNorm of one network for segments of `streams` x
    `length` positions. params holds each block's arrays (BLOCK_PARAMETERS, named with the
    block's number: "qkv0") and "final_gain", "final_bias"; grads the same names, set by
    backward(). `direct_gradients`: split_gradient_transposed's choice for the feed-forward
    layer's (nplmtk.neural.blas.transposed_products_direct)."""
    cdef Block block[MAX_BLOCKS]
    cdef int blocks, d, heads, ff, streams, length, memory, keys
    cdef int filled             # the memory's rows with content (0 after reset())
    cdef int first              # the first key with content in the last forward()
    cdef bint relative
    cdef bint direct            # weights' gradients over the rows as they are (split_gradient_transposed)
    cdef float *positions       # keys x d: R
    cdef float drop_attention, drop_residual
    cdef bint masked            # the last forward() drew dropout's masks
    cdef bint kept              # the last forward() kept what backward() reads
    cdef unsigned long long rng
    cdef float *final_gain
    cdef float *final_bias
    cdef float *final_gain_grad
    cdef float *final_bias_grad
    cdef float *xhat_final
    cdef float *inverse_final
    cdef float *top
    cdef float *residual[2]     # N x d: the residual stream between blocks
    cdef float *scratch_d[4]    # N x d each
    cdef float *scratch_f       # N x f
    cdef float *scratch_weights  # f x d: a weight's gradient transposed
    cdef float *scratch_qkv     # B (M + T) x 3d
    cdef float *scratch_joined[2]  # B (M + T) x d each
    cdef int threads            # the threads sharing each pass (set_threads)
    cdef float *thread_scratch  # each thread's: 3 T x (M + T), 2 T x dh, then dL/d(Rk, u, v) (M + T + 2) x d,
    cdef Py_ssize_t thread_stride  # then column sums of up to max(3d, f)
    cdef object arrays          # every array whose memory the pointers above use
    cdef object top_array, input_grad_array, thread_scratch_array
    cdef dict mask_arrays

    def __init__(self, params, grads, int blocks, int heads, int streams, int length, int memory=0,
                 bint relative=False, float drop_attention=0, float drop_residual=0, unsigned long long seed=1,
                 bint direct_gradients=False):
        d = np.asarray(params["final_gain"]).shape[0]
        ff = np.asarray(params["ff1_bias0"]).shape[0] if blocks else 0
        if not 0 < blocks <= MAX_BLOCKS:
            raise ValueError(f"blocks: {blocks} is not in 1..{MAX_BLOCKS}")
        if heads <= 0 or d % heads:
            raise ValueError(f"heads: {heads} does not divide the width {d}")
        if streams <= 0 or length <= 0:
            raise ValueError(f"streams x length: {streams} x {length} is not a segment")
        if memory < 0 or (memory and not relative):
            raise ValueError(f"memory: {memory} rows need relative positions (absolute ones would repeat)")
        if relative and d % 2:
            raise ValueError(f"relative: the width {d} must be even (sines, then cosines)")
        if not (0 <= drop_attention < 1 and 0 <= drop_residual < 1):
            raise ValueError("drop_attention, drop_residual: a dropout probability is in [0, 1)")
        self.blocks, self.d, self.heads, self.ff = blocks, d, heads, ff
        self.streams, self.length, self.memory, self.keys = streams, length, memory, memory + length
        self.relative, self.filled = relative, 0
        self.direct = direct_gradients
        self.drop_attention, self.drop_residual = drop_attention, drop_residual
        self.rng = seed or 1
        self.arrays = []
        self.mask_arrays = {}
        sizes = {"d": d, "3d": 3 * d, "f": ff}
        for name, source in (("params", params), ("grads", grads)):
            for b in range(blocks):
                for index, (base, shape) in enumerate(BLOCK_PARAMETERS + (RELATIVE_PARAMETERS if relative else ())):
                    array = self._checked(source, f"{base}{b}", tuple(sizes[s] for s in shape), name)
                    if name == "params":
                        self.block[b].param[index] = self._pointer(array)
                    else:
                        self.block[b].grad[index] = self._pointer(array)
        self.final_gain = self._pointer(self._checked(params, "final_gain", (d,), "params"))
        self.final_bias = self._pointer(self._checked(params, "final_bias", (d,), "params"))
        self.final_gain_grad = self._pointer(self._checked(grads, "final_gain", (d,), "grads"))
        self.final_bias_grad = self._pointer(self._checked(grads, "final_bias", (d,), "grads"))
        self._allocate()
        self.set_threads(1)
        if relative:
            self.positions = self._pointer(relative_positions(self.keys, d))

    def _checked(self, source, name, shape, what):
        array = source.get(name)
        if not isinstance(array, np.ndarray) or array.dtype != np.float32 or array.shape != shape \
                or not array.flags.c_contiguous or not array.flags.writeable:
            raise ValueError(f"{what}[{name!r}]: not a writable C-contiguous float32 array of shape {shape}")
        return array

    cdef float *_pointer(self, array):
        cdef float[::1] flat = array.reshape(-1)
        self.arrays.append(array)
        return &flat[0]

    cdef float *_buffer(self, Py_ssize_t size, key=None):
        array = np.zeros(max(size, 1), dtype=np.float32)
        if key is not None:
            self.mask_arrays[key] = array
        return self._pointer(array)

    def masks(self):
        """The last training forward()'s dropout scales: {(block, "weights"): streams x heads
        x T x T, (block, "out") and (block, "ff"): N x d}, those the network has."""
        shapes = {"weights": (self.streams, self.heads, self.length, self.keys),
                  "out": (self.streams * self.length, self.d), "ff": (self.streams * self.length, self.d)}
        return {key: array.reshape(shapes[key[1]]) for key, array in self.mask_arrays.items()}

    def _allocate(self):
        cdef Py_ssize_t N = <Py_ssize_t> self.streams * self.length, d = self.d, f = self.ff
        cdef Py_ssize_t joined = <Py_ssize_t> self.streams * self.keys, square = <Py_ssize_t> self.length * self.keys
        cdef Py_ssize_t squares = <Py_ssize_t> self.streams * self.heads * square
        cdef Block *k
        cdef float[:, ::1] view
        for b in range(self.blocks):
            k = &self.block[b]
            k.memory = self._buffer(<Py_ssize_t> self.streams * self.memory * d) if self.memory else NULL
            k.joined = self._buffer(joined * d) if self.memory else NULL
            k.Rk = self._buffer(self.keys * d) if self.relative else NULL
            k.xhat1, k.inverse1, k.h1 = self._buffer(joined * d), self._buffer(joined), self._buffer(joined * d)
            k.qkv, k.weights, k.attention = self._buffer(joined * 3 * d), self._buffer(squares), self._buffer(N * d)
            k.weight_mask = self._buffer(squares, (b, "weights")) if self.drop_attention > 0 else NULL
            k.x2, k.xhat2, k.inverse2, k.h2 = self._buffer(N * d), self._buffer(N * d), self._buffer(N), \
                self._buffer(N * d)
            k.pre, k.activation = self._buffer(N * f), self._buffer(N * f)
            k.out_mask = self._buffer(N * d, (b, "out")) if self.drop_residual > 0 else NULL
            k.ff_mask = self._buffer(N * d, (b, "ff")) if self.drop_residual > 0 else NULL
        self.xhat_final, self.inverse_final = self._buffer(N * d), self._buffer(N)
        for i in range(2):
            self.residual[i] = self._buffer(N * d)
            self.scratch_joined[i] = self._buffer(joined * d)
        for i in range(4):
            self.scratch_d[i] = self._buffer(N * d)
        self.scratch_f, self.scratch_qkv = self._buffer(N * f), self._buffer(joined * 3 * d)
        self.scratch_weights = self._buffer(f * d)
        self.top_array = np.zeros((N, d), dtype=np.float32)
        self.input_grad_array = np.zeros((N, d), dtype=np.float32)
        view = self.top_array
        self.top = &view[0, 0]
        self.arrays += [self.top_array, self.input_grad_array]

    def _check_rows(self, array, name):
        shape = (self.streams * self.length, self.d)
        if array.shape[0] != shape[0] or array.shape[1] != shape[1]:
            raise ValueError(f"{name}: shape {tuple(array.shape)}, the segment's is {shape}")

    def reset(self):
        """Forget the memory: the next segment starts the streams."""
        self.filled = 0

    def set_threads(self, int count):
        """`count` threads (OpenMP) share each forward() and backward(): the big products by
        slices of rows, the attention by (stream, head), the rest by rows. Above 1, call
        them under a single-threaded BLAS (nplmtk.neural.blas.blas_threads(1)): each thread
        calls BLAS on its own slice. The results differ from one thread's in the order of
        the sums over rows only."""
        if not 0 < count <= MAX_THREADS:
            raise ValueError(f"threads: {count} is not in 1..{MAX_THREADS}")
        cdef Py_ssize_t T = self.length, K = self.keys, d = self.d
        self.thread_stride = 3 * T * K + 2 * T * (d // self.heads) + (K + 2) * d + max(3 * d, self.ff)
        self.thread_stride = (self.thread_stride + 15) // 16 * 16  # each thread's on cache lines of its own
        self.thread_scratch_array = np.zeros(count * self.thread_stride, dtype=np.float32)
        cdef float[::1] view = self.thread_scratch_array
        self.thread_scratch = &view[0]
        self.threads = count

    def forward(self, const float[:, ::1] x, bint train=False, bint keep=True):
        """The top states (an N x d array this object owns, N = streams x length, rows
        b length + t) of the input rows x; train draws dropout's masks; keep=False (scoring)
        keeps nothing for backward(), which then refuses. With a memory, the segment follows
        the last one forward() saw (since reset())."""
        self._check_rows(x, "x")
        cdef Py_ssize_t N = <Py_ssize_t> self.streams * self.length
        cdef const float *current = &x[0, 0]
        cdef int b
        self.masked = train and (self.drop_attention > 0 or self.drop_residual > 0)
        self.first = self.memory - self.filled
        self.kept = keep
        with nogil:
            for b in range(self.blocks):
                self._block_forward(&self.block[b], current, self.residual[b % 2], train)
                current = self.residual[b % 2]
        self.filled = min(self.memory, self.filled + self.length)
        with nogil:
            split_layer_norm(self.threads, current, self.final_gain, self.final_bias,
                             self.xhat_final if keep else NULL, self.inverse_final, self.top, N, self.d)
        return self.top_array

    def backward(self, const float[:, ::1] top_grad):
        """From dL/d(top states) of the last forward(), set grads and return dL/dx (an
        array this object owns)."""
        self._check_rows(top_grad, "top_grad")
        if not self.kept:
            raise ValueError("backward() after a forward() that kept nothing (keep=False)")
        cdef Py_ssize_t N = <Py_ssize_t> self.streams * self.length
        cdef float[:, ::1] result = self.input_grad_array
        cdef float *grad = self.residual[0]
        cdef float *below
        cdef int b, spare = 1
        with nogil:
            memset(grad, 0, N * self.d * sizeof(float))
            memset(self.final_gain_grad, 0, self.d * sizeof(float))
            memset(self.final_bias_grad, 0, self.d * sizeof(float))
            split_layer_norm_backward(self.threads, self.thread_scratch, self.thread_stride, &top_grad[0, 0],
                                      self.xhat_final, self.inverse_final, self.final_gain, grad, self.final_gain_grad,
                                      self.final_bias_grad, N, self.d)
            for b in range(self.blocks - 1, -1, -1):
                below = &result[0, 0] if b == 0 else self.residual[spare]
                self._block_backward(&self.block[b], grad, below)
                grad, spare = below, 1 - spare
        return self.input_grad_array

    cdef Head _head(self, Block *k, int h) noexcept nogil:
        cdef Head g
        g.T, g.keys, g.memory, g.first = self.length, self.keys, self.memory, self.first
        g.d, g.dh = self.d, self.d // self.heads
        g.scale = 1 / sqrtf(g.dh)
        g.u = k.param[REL_U] + h * g.dh if self.relative else NULL
        g.v = k.param[REL_V] + h * g.dh if self.relative else NULL
        g.Rk = k.Rk + h * g.dh if self.relative else NULL
        return g

    cdef const float *_joined_input(self, Block *k, const float *x) noexcept nogil:
        """The attention's input rows: the memory's then the segment's, per stream; the
        memory then moves on to the last M rows of them."""
        cdef int s, M = self.memory, T = self.length, d = self.d
        if M == 0:
            return x
        for s in range(self.streams):
            memcpy(k.joined + <Py_ssize_t> s * self.keys * d, k.memory + <Py_ssize_t> s * M * d,
                   M * d * sizeof(float))
            memcpy(k.joined + (<Py_ssize_t> s * self.keys + M) * d, x + <Py_ssize_t> s * T * d, T * d * sizeof(float))
            memcpy(k.memory + <Py_ssize_t> s * M * d, k.joined + (<Py_ssize_t> s * self.keys + T) * d,
                   M * d * sizeof(float))
        return k.joined

    cdef void _attention(self, Block *k, bint train) noexcept nogil:
        """Every (stream, head)'s attention_head, shared among the threads."""
        cdef int d = self.d, H = self.heads, T = self.length, K = self.keys, dh = self.d // self.heads
        cdef int unit, s, h
        cdef Py_ssize_t square = <Py_ssize_t> T * K
        cdef float *mine
        cdef Head g
        cdef bint masked = train and k.weight_mask != NULL
        cdef unsigned long long key = draw_key(&self.rng) if masked else 0
        for unit in prange(self.streams * H, num_threads=self.threads, schedule="dynamic", nogil=True):
            s, h = unit // H, unit % H
            g = self._head(k, h)
            mine = self.thread_scratch + threadid() * self.thread_stride
            if masked:  # dropout's scales on the unit's weights, drawn by index
                dropout_at(NULL, k.weight_mask, unit * square, (unit + 1) * square, self.drop_attention, key)
            attention_head(&g, k.qkv + <Py_ssize_t> s * K * 3 * d + h * dh, k.weights + unit * square,
                           k.weight_mask + unit * square if masked else NULL, mine, mine + square,
                           mine + 3 * square, k.attention + <Py_ssize_t> s * T * d + h * dh)

    cdef void _block_forward(self, Block *k, const float *x, float *y, bint train) noexcept nogil:
        cdef int d = self.d, f = self.ff, K = self.keys, P = self.threads
        cdef Py_ssize_t N = <Py_ssize_t> self.streams * self.length, rows = <Py_ssize_t> self.streams * K
        cdef float *branch = self.scratch_d[0]
        cdef const float *joined = self._joined_input(k, x)
        split_layer_norm(P, joined, k.param[LN1_GAIN], k.param[LN1_BIAS], k.xhat1 if self.kept else NULL, k.inverse1,
                         k.h1, rows, d)
        split_gemm(P, k.param[QKV_BIAS], b'N', b'N', rows, 3 * d, d, 1, k.h1, d, k.param[QKV], 3 * d, 1, k.qkv, 3 * d)
        if self.relative:
            split_gemm(P, NULL, b'N', b'N', K, d, d, 1, self.positions, d, k.param[REL], d, 0, k.Rk, d)
        self._attention(k, train)
        split_gemm(P, k.param[OUT_BIAS], b'N', b'N', N, d, d, 1, k.attention, d, k.param[OUT], d, 1, branch, d)
        residual_branch(P, branch, k.out_mask if train else NULL, x, k.x2, N * d, self.drop_residual, &self.rng)
        split_layer_norm(P, k.x2, k.param[LN2_GAIN], k.param[LN2_BIAS], k.xhat2 if self.kept else NULL, k.inverse2,
                         k.h2, N, d)
        split_gemm(P, NULL, b'N', b'N', N, f, d, 1, k.h2, d, k.param[FF1], f, 0, k.pre, f)
        split_gelu(P, k.activation, k.pre, k.param[FF1_BIAS], N, f, self.kept)
        split_gemm(P, k.param[FF2_BIAS], b'N', b'N', N, d, f, 1, k.activation, f, k.param[FF2], d, 1, branch, d)
        residual_branch(P, branch, k.ff_mask if train else NULL, k.x2, y, N * d, self.drop_residual, &self.rng)

    cdef void _attention_backward(self, Block *k, const float *dattention) noexcept nogil:
        """Every (stream, head)'s attention_head_backward into scratch_qkv, shared among the
        threads; with relative positions each thread sums dL/d(Rk, u, v) in its scratch,
        added up after."""
        cdef int d = self.d, H = self.heads, T = self.length, K = self.keys, dh = self.d // self.heads
        cdef int unit, s, h, t
        cdef Py_ssize_t square = <Py_ssize_t> T * K, queries = <Py_ssize_t> T * dh, sums = 3 * square + 2 * queries
        cdef Py_ssize_t i
        cdef float *mine
        cdef float *weight_mask = k.weight_mask if self.masked else NULL
        cdef Head g
        if self.relative:
            for t in range(self.threads):
                memset(self.thread_scratch + t * self.thread_stride + sums, 0, (K + 2) * d * sizeof(float))
        for unit in prange(self.streams * H, num_threads=self.threads, schedule="dynamic", nogil=True):
            s, h = unit // H, unit % H
            g = self._head(k, h)
            mine = self.thread_scratch + threadid() * self.thread_stride
            attention_head_backward(&g, k.qkv + <Py_ssize_t> s * K * 3 * d + h * dh, k.weights + unit * square,
                                    weight_mask + unit * square if weight_mask != NULL else NULL, mine,
                                    dattention + <Py_ssize_t> s * T * d + h * dh,
                                    self.scratch_qkv + <Py_ssize_t> s * K * 3 * d + h * dh, mine + square,
                                    mine + 2 * square, mine + 3 * square, mine + 3 * square + queries,
                                    mine + sums + K * d + h * dh, mine + sums + (K + 1) * d + h * dh,
                                    mine + sums + h * dh)
        if not self.relative:
            return
        memset(k.grad[REL_U], 0, d * sizeof(float))
        memset(k.grad[REL_V], 0, d * sizeof(float))
        for t in range(1, self.threads):  # thread 0's sums gather the others'
            mine = self.thread_scratch + t * self.thread_stride + sums
            for i in range((K + 2) * d):
                self.thread_scratch[sums + i] += mine[i]
        mine = self.thread_scratch + sums
        for i in range(d):
            k.grad[REL_U][i] = mine[K * d + i]
            k.grad[REL_V][i] = mine[(K + 1) * d + i]
        split_gemm(self.threads, NULL, b'T', b'N', d, d, K, 1, self.positions, d, mine, d, 0, k.grad[REL], d)

    cdef void _block_backward(self, Block *k, const float *dy, float *dx) noexcept nogil:
        """dy: dL/d(block output); dx (apart from dy) is set to dL/d(block input). The
        memory's rows pass no gradient back (Transformer-XL's stop-gradient)."""
        cdef int d = self.d, f = self.ff, T = self.length, K = self.keys, M = self.memory, P = self.threads
        cdef int s
        cdef Py_ssize_t N = <Py_ssize_t> self.streams * T, rows = <Py_ssize_t> self.streams * K, r
        cdef float *branch = self.scratch_d[0]
        cdef float *below = self.scratch_d[1]
        cdef float *dx2 = self.scratch_d[2]
        cdef float *dattention = self.scratch_d[3]
        cdef float *joined_grad = self.scratch_joined[0]
        cdef float *ln_grad = self.scratch_joined[1]
        cdef float *partial = self.thread_scratch
        cdef Py_ssize_t stride = self.thread_stride
        cdef float *out_mask = k.out_mask if self.masked else NULL
        cdef float *ff_mask = k.ff_mask if self.masked else NULL
        memset(k.grad[LN1_GAIN], 0, d * sizeof(float))
        memset(k.grad[LN1_BIAS], 0, d * sizeof(float))
        memset(k.grad[LN2_GAIN], 0, d * sizeof(float))
        memset(k.grad[LN2_BIAS], 0, d * sizeof(float))
        # the feed-forward branch
        masked_copy(P, dy, ff_mask, branch, N * d)
        split_gradient_transposed(P, f, d, N, k.activation, f, branch, d, 0, k.grad[FF2], d, self.scratch_weights,
                                  self.direct)
        split_column_sums(P, partial, stride, branch, N, d, k.grad[FF2_BIAS])
        split_gemm(P, NULL, b'N', b'T', N, f, d, 1, branch, d, k.param[FF2], d, 0, self.scratch_f, f)
        split_gelu_backward(P, self.scratch_f, k.pre, N * f)
        split_gemm(P, NULL, b'T', b'N', d, f, N, 1, k.h2, d, self.scratch_f, f, 0, k.grad[FF1], f)
        split_column_sums(P, partial, stride, self.scratch_f, N, f, k.grad[FF1_BIAS])
        split_gemm(P, NULL, b'N', b'T', N, d, f, 1, self.scratch_f, f, k.param[FF1], f, 0, below, d)
        masked_copy(P, dy, NULL, dx2, N * d)
        split_layer_norm_backward(P, partial, stride, below, k.xhat2, k.inverse2, k.param[LN2_GAIN], dx2,
                                  k.grad[LN2_GAIN], k.grad[LN2_BIAS], N, d)
        # the attention branch
        masked_copy(P, dx2, out_mask, branch, N * d)
        split_gemm(P, NULL, b'T', b'N', d, d, N, 1, k.attention, d, branch, d, 0, k.grad[OUT], d)
        split_column_sums(P, partial, stride, branch, N, d, k.grad[OUT_BIAS])
        split_gemm(P, NULL, b'N', b'T', N, d, d, 1, branch, d, k.param[OUT], d, 0, dattention, d)
        memset(self.scratch_qkv, 0, rows * 3 * d * sizeof(float))
        self._attention_backward(k, dattention)
        split_gemm(P, NULL, b'T', b'N', d, 3 * d, rows, 1, k.h1, d, self.scratch_qkv, 3 * d, 0, k.grad[QKV], 3 * d)
        split_column_sums(P, partial, stride, self.scratch_qkv, rows, 3 * d, k.grad[QKV_BIAS])
        split_gemm(P, NULL, b'N', b'T', rows, d, 3 * d, 1, self.scratch_qkv, 3 * d, k.param[QKV], 3 * d, 0, ln_grad, d)
        if M == 0:
            masked_copy(P, dx2, NULL, dx, N * d)
            split_layer_norm_backward(P, partial, stride, ln_grad, k.xhat1, k.inverse1, k.param[LN1_GAIN], dx,
                                      k.grad[LN1_GAIN], k.grad[LN1_BIAS], N, d)
            return
        memset(joined_grad, 0, rows * d * sizeof(float))
        split_layer_norm_backward(P, partial, stride, ln_grad, k.xhat1, k.inverse1, k.param[LN1_GAIN], joined_grad,
                                  k.grad[LN1_GAIN], k.grad[LN1_BIAS], rows, d)
        for s in range(self.streams):
            for r in range(<Py_ssize_t> T * d):
                dx[<Py_ssize_t> s * T * d + r] = dx2[<Py_ssize_t> s * T * d + r] + \
                    joined_grad[(<Py_ssize_t> s * K + M) * d + r]

    def generator(self, state=None):
        """The dropout generator's state (xorshift64*), first set to `state` when given: a
        worker carries it from chunk to chunk, and checkpoints keep it (added for
        transformer_network.pyx)."""
        if state is not None:
            self.rng = int(state) or 1
        return self.rng
