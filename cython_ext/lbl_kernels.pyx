# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""The log-bilinear model (Mnih & Hinton 2007; Model 0 of Zhang, Mnih & Hinton, eq. 1, with
the biases of its footnote 1):

    p = d + sum_i C_i^T r(w_i),   y_w = b_w + r(w) . p,   P(w | context) = softmax(y)

One feature matrix R (|V| x m) serves the context words and the next word; C holds one
m x m matrix per context position (C_i is rows i*m .. (i+1)*m - 1 of a (n-1)m x m array).
SGD with the exact softmax gradient over a mini-batch, or with the importance-sampling
estimate of Bengio & Senecal (2003, Algorithm 3; the score is an energy); the trainer hands
each chunk its schedule (rates and the bulk weight decay of R and C)."""
import numpy as np
cimport numpy as cnp
from libc.math cimport log
from libc.stdlib cimport free, malloc
from libc.string cimport memcpy, memset
from scipy.linalg.cython_blas cimport saxpy

from kernel_common cimport check_schedule, dot_row, gemm, scale, softmax_row
from nplmtk._ext.sampling_kernels cimport (Sampling, attach_proposal, draw_samples, importance_weights,
                                           merge_duplicates, sampling_alloc, sampling_free)

cnp.import_array()


cdef struct LBL:
    int vocab, context, m, inputs, bias
    float *R
    float *C
    float *d
    float *b


cdef struct Buffers:
    int capacity
    float *X    # K x inputs: the context's feature vectors
    float *P    # K x m: the predicted feature vectors p
    float *Y    # K x |V|: scores, probabilities, then dL/dy
    float *dP   # K x m
    float *dX   # K x inputs
    float *gR   # |V| x m
    float *gC   # inputs x m
    float *gd   # m
    float *gb   # |V|


cdef double forward(LBL *net, Buffers *w, const int *rows, int K) noexcept nogil:
    """X, P and Y (probabilities) for K windows; returns the sum of log p(target)."""
    cdef int n = net.context + 1, i, k, m = net.m
    cdef double total = 0
    for i in range(K):
        for k in range(net.context):
            memcpy(w.X + i * net.inputs + k * m, net.R + <Py_ssize_t> rows[i * n + k] * m, m * sizeof(float))
        memcpy(w.P + i * m, net.d, m * sizeof(float))
        memcpy(w.Y + <Py_ssize_t> i * net.vocab, net.b, net.vocab * sizeof(float))
    gemm(b'N', b'N', K, m, net.inputs, 1.0, w.X, net.inputs, net.C, m, 1.0, w.P, m)  # eq. 1: p = sum_i r_i C_i
    gemm(b'N', b'T', K, net.vocab, m, 1.0, w.P, m, net.R, m, 1.0, w.Y, net.vocab)
    for i in range(K):
        total += softmax_row(w.Y + <Py_ssize_t> i * net.vocab, net.vocab, rows[i * n + net.context])
    return total


cdef void gradients(LBL *net, Buffers *w, const int *rows, int K) noexcept nogil:
    """After forward: the gradients of -sum log p(target) in gR, gC, gd, gb (R gets its
    output part dL/dy^T P and, on the context words' rows, its input part dL/dx)."""
    cdef int n = net.context + 1, i, k, j, m = net.m, V = net.vocab, one = 1
    cdef float unit = 1
    for i in range(K):
        w.Y[<Py_ssize_t> i * V + rows[i * n + net.context]] -= 1
    gemm(b'N', b'N', K, m, V, 1.0, w.Y, V, net.R, m, 0.0, w.dP, m)
    gemm(b'N', b'T', K, net.inputs, m, 1.0, w.dP, m, net.C, m, 0.0, w.dX, net.inputs)
    gemm(b'T', b'N', V, m, K, 1.0, w.Y, V, w.P, m, 0.0, w.gR, m)
    gemm(b'T', b'N', net.inputs, m, K, 1.0, w.X, net.inputs, w.dP, m, 0.0, w.gC, m)
    memset(w.gd, 0, m * sizeof(float))
    memset(w.gb, 0, V * sizeof(float))
    for i in range(K):
        saxpy(&m, &unit, w.dP + i * m, &one, w.gd, &one)
        saxpy(&V, &unit, w.Y + <Py_ssize_t> i * V, &one, w.gb, &one)
        for k in range(net.context):
            saxpy(&m, &unit, w.dX + i * net.inputs + k * m, &one, w.gR + <Py_ssize_t> rows[i * n + k] * m, &one)


cdef double sampled_step(LBL *net, Buffers *w, Sampling *sp, const int *rows, int K, float rate,
                         double *ess) noexcept nogil:
    """One update with the importance-sampling gradient: each target's row and bias pulled
    up, the N sampled words' pushed down with weights r_j / sum r (r_j = exp(y_j) / Q(w_j)),
    the context side (C, d and the context words' rows of R) along the estimated dL/dp.
    Every gradient is taken before any step. Returns the estimated sum of log p(target)
    and adds the effective sample sizes to `ess`."""
    cdef int n = net.context + 1, i, j, k, t, M, m = net.m, one = 1
    cdef float minus = -rate, value
    cdef double estimate = 0
    cdef float *g
    for i in range(K):
        for k in range(net.context):
            memcpy(w.X + i * net.inputs + k * m, net.R + <Py_ssize_t> rows[i * n + k] * m, m * sizeof(float))
        memcpy(w.P + i * m, net.d, m * sizeof(float))
    gemm(b'N', b'N', K, m, net.inputs, 1.0, w.X, net.inputs, net.C, m, 1.0, w.P, m)
    draw_samples(sp, rows, K, n)
    merge_duplicates(sp)
    M = sp.distinct
    for j in range(M):
        memcpy(sp.U_rows + j * m, net.R + <Py_ssize_t> sp.words[j] * m, m * sizeof(float))
    for i in range(K):
        for j in range(M):
            sp.weights[i * M + j] = net.b[sp.words[j]]
    gemm(b'N', b'T', K, M, m, 1.0, w.P, m, sp.U_rows, m, 1.0, sp.weights, M)
    for i in range(K):
        t = rows[i * n + net.context]
        estimate += net.b[t] + dot_row(m, net.R + <Py_ssize_t> t * m, w.P + i * m)
        estimate -= importance_weights(sp, sp.weights + i * M, ess)
    # dL/dp = sum_j g_j r(w_j) - r(target), then dL/dx, dL/dC and dL/dd, all before any step
    gemm(b'N', b'N', K, m, M, 1.0, sp.weights, M, sp.U_rows, m, 0.0, w.dP, m)
    value = -1
    for i in range(K):
        saxpy(&m, &value, net.R + <Py_ssize_t> rows[i * n + net.context] * m, &one, w.dP + i * m, &one)
    gemm(b'N', b'T', K, net.inputs, m, 1.0, w.dP, m, net.C, m, 0.0, w.dX, net.inputs)
    gemm(b'T', b'N', net.inputs, m, K, 1.0, w.X, net.inputs, w.dP, m, 0.0, w.gC, m)
    gemm(b'T', b'N', M, m, K, 1.0, sp.weights, M, w.P, m, 0.0, sp.row_grads, m)
    # the steps: sampled rows down, targets up, then the context side
    for j in range(M):
        saxpy(&m, &minus, sp.row_grads + j * m, &one, net.R + <Py_ssize_t> sp.words[j] * m, &one)
    for i in range(K):
        t = rows[i * n + net.context]
        saxpy(&m, &rate, w.P + i * m, &one, net.R + <Py_ssize_t> t * m, &one)
        if net.bias:
            net.b[t] += rate
            g = sp.weights + i * M
            for j in range(M):
                net.b[sp.words[j]] -= rate * g[j]
    k = net.inputs * m
    saxpy(&k, &minus, w.gC, &one, net.C, &one)
    for i in range(K):
        if net.bias:
            saxpy(&m, &minus, w.dP + i * m, &one, net.d, &one)
        for k in range(net.context):
            saxpy(&m, &minus, w.dX + i * net.inputs + k * m, &one, net.R + <Py_ssize_t> rows[i * n + k] * m, &one)
    return estimate


cdef void step(LBL *net, Buffers *w, float rate) noexcept nogil:
    """Every parameter one step of `rate` down its gradient (the biases only with bias)."""
    cdef int size, one = 1
    cdef float minus = -rate
    size = net.vocab * net.m
    saxpy(&size, &minus, w.gR, &one, net.R, &one)
    size = net.inputs * net.m
    saxpy(&size, &minus, w.gC, &one, net.C, &one)
    if net.bias:
        saxpy(&net.m, &minus, w.gd, &one, net.d, &one)
        saxpy(&net.vocab, &minus, w.gb, &one, net.b, &one)


cdef class LBLNetwork:
    """Views of a log-bilinear model's arrays (R, C, d, b; float32, C-contiguous, owned by
    Python) and one worker's buffers for batches of up to `capacity` windows."""
    cdef LBL net
    cdef Buffers work
    cdef object keep_alive

    def __init__(self, params, int capacity, bint bias=True):
        cdef float[:, ::1] R = params["R"]
        cdef float[:, :, ::1] C = params["C"]
        cdef float[::1] d = params["d"], b = params["b"]
        if C.shape[1] != R.shape[1] or C.shape[2] != R.shape[1] or d.shape[0] != R.shape[1] \
                or b.shape[0] != R.shape[0] or capacity < 1:
            raise ValueError("log-bilinear arrays of inconsistent shapes")
        self.keep_alive = params
        self.net.vocab, self.net.m, self.net.context = R.shape[0], R.shape[1], C.shape[0]
        self.net.inputs = self.net.context * self.net.m
        self.net.bias = bias
        self.net.R, self.net.C, self.net.d, self.net.b = &R[0, 0], &C[0, 0, 0], &d[0], &b[0]
        cdef Py_ssize_t m = self.net.m, V = self.net.vocab, inputs = self.net.inputs
        self.work.capacity = capacity
        self.work.X = <float *> malloc(capacity * inputs * sizeof(float))
        self.work.P = <float *> malloc(capacity * m * sizeof(float))
        self.work.Y = <float *> malloc(capacity * V * sizeof(float))
        self.work.dP = <float *> malloc(capacity * m * sizeof(float))
        self.work.dX = <float *> malloc(capacity * inputs * sizeof(float))
        self.work.gR = <float *> malloc(V * m * sizeof(float))
        self.work.gC = <float *> malloc(inputs * m * sizeof(float))
        self.work.gd = <float *> malloc(m * sizeof(float))
        self.work.gb = <float *> malloc(V * sizeof(float))
        if not (self.work.X and self.work.P and self.work.Y and self.work.dP and self.work.dX and self.work.gR
                and self.work.gC and self.work.gd and self.work.gb):
            raise MemoryError()

    def __dealloc__(self):
        free(self.work.X)
        free(self.work.P)
        free(self.work.Y)
        free(self.work.dP)
        free(self.work.dX)
        free(self.work.gR)
        free(self.work.gC)
        free(self.work.gd)
        free(self.work.gb)

    def _check(self, const int[:, ::1] windows):
        if windows.shape[1] != self.net.context + 1:
            raise ValueError("windows of the wrong order")

    def train(self, const int[:, ::1] windows, int batch, const double[::1] rates, const float[::1] row_keep,
              const float[::1] dense_keep):
        """SGD over `windows` in batches of `batch`: update u steps by rates[u], then (when
        dense_keep[u] != 1) decays R and C in bulk. Returns (sum of log p(target), updates)."""
        cdef Py_ssize_t start = 0, count = windows.shape[0], u = 0
        cdef int K
        cdef double total = 0
        check_schedule(count, batch, self.work.capacity, rates.shape[0], row_keep.shape[0], dense_keep.shape[0])
        self._check(windows)
        with nogil:
            while start < count:
                K = <int> min(<Py_ssize_t> batch, count - start)
                total += forward(&self.net, &self.work, &windows[start, 0], K)
                gradients(&self.net, &self.work, &windows[start, 0], K)
                step(&self.net, &self.work, <float> rates[u])
                if dense_keep[u] != 1:
                    scale(self.net.vocab * self.net.m, dense_keep[u], self.net.R)
                    scale(self.net.inputs * self.net.m, dense_keep[u], self.net.C)
                start += K
                u += 1
        return total, u

    def train_sampled(self, const int[:, ::1] windows, int batch, const double[::1] rates,
                      const float[::1] row_keep, const float[::1] dense_keep, int samples, proposal,
                      unsigned long long seed):
        """As train, with the importance-sampling gradient of `samples` words drawn from the
        proposal (nplmtk.neural.sampling.Proposal), shared by the windows of a batch.
        Returns (estimated sum of log p(target), updates done, sum of effective sample sizes)."""
        cdef Py_ssize_t start = 0, count = windows.shape[0], u = 0
        cdef int K
        cdef double total = 0, ess = 0
        cdef Sampling sp
        check_schedule(count, batch, self.work.capacity, rates.shape[0], row_keep.shape[0], dense_keep.shape[0])
        self._check(windows)
        if samples < 1 or proposal.vocab_size != self.net.vocab:
            raise ValueError("no samples, or a proposal of the wrong size")
        memset(&sp, 0, sizeof(Sampling))
        attach_proposal(&sp, proposal)
        sp.rng = seed
        try:
            if not sampling_alloc(&sp, samples, batch, self.net.m, self.net.m, self.net.vocab):
                raise MemoryError()
            with nogil:
                while start < count:
                    K = <int> min(<Py_ssize_t> batch, count - start)
                    total += sampled_step(&self.net, &self.work, &sp, &windows[start, 0], K, <float> rates[u], &ess)
                    if dense_keep[u] != 1:
                        scale(self.net.vocab * self.net.m, dense_keep[u], self.net.R)
                        scale(self.net.inputs * self.net.m, dense_keep[u], self.net.C)
                    start += K
                    u += 1
        finally:
            sampling_free(&sp)
        return total, u, ess

    def logprobs(self, const int[:, ::1] windows, double[::1] out):
        """Natural-log probability of each window's target."""
        cdef Py_ssize_t start = 0, count = windows.shape[0], i
        cdef int K, n = self.net.context + 1
        self._check(windows)
        with nogil:
            while start < count:
                K = <int> min(<Py_ssize_t> self.work.capacity, count - start)
                forward(&self.net, &self.work, &windows[start, 0], K)
                for i in range(K):
                    out[start + i] = log(self.work.Y[i * self.net.vocab + windows[start + i, n - 1]])
                start += K

    def gradients(self, const int[:, ::1] windows, grads):
        """Sum over the windows of the gradients of -log p(target) into `grads` (arrays
        shaped like the parameters); returns the sum of log p. For tests."""
        cdef int K = windows.shape[0]
        cdef double total
        self._check(windows)
        if K > self.work.capacity:
            raise ValueError("more windows than the work buffers hold")
        total = forward(&self.net, &self.work, &windows[0, 0], K)
        gradients(&self.net, &self.work, &windows[0, 0], K)
        grads["R"][...] = np.asarray(<float[:self.net.vocab, :self.net.m]> self.work.gR)
        grads["C"][...] = np.asarray(<float[:self.net.inputs, :self.net.m]> self.work.gC).reshape(grads["C"].shape)
        grads["d"][...] = np.asarray(<float[:self.net.m]> self.work.gd)
        grads["b"][...] = np.asarray(<float[:self.net.vocab]> self.work.gb)
        return total
