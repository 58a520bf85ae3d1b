# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""The hot loops of the Bengio et al. (2003) network, eq. 1 (its layers are in
feedforward.pxd): SGD over a chunk of windows without the GIL, with the exact softmax
gradient or the importance-sampling estimate of Bengio & Senecal (2003), Algorithm 3.
Several threads may train the same parameter arrays at once: lock-free asynchronous
updates (sec. 3.1); a thread sees another's dense updates when that one flushes them (at
most DEFER windows late). The trainer hands each chunk its schedule (the rate, the decay
of the rows of C, and the bulk decay of the dense weights after each update): no policy
here."""
import numpy as np
cimport numpy as cnp
from libc.math cimport log
from libc.string cimport memcpy, memset
from scipy.linalg.cython_blas cimport saxpy

from kernel_common cimport axpy_row, check_schedule, dot_row, gemm
from nplmtk._ext.sampling_kernels cimport (Sampling, draw_samples, importance_weights, merge_duplicates,
                                           sampling_free, sampling_start)
from feedforward cimport (DEFER, Net, Work, activation_slope, backward, decay_dense, flush, forward,
                          hidden_layer, input_backward, net_attach, work_alloc, work_free)

cnp.import_array()

# -- the importance-sampling step (Bengio & Senecal 2003, Algorithm 3) -------------------

cdef double sampled_step(Net *net, Work *w, Sampling *sp, const int *rows, int K, float rate, float keep_c,
                         double *ess) noexcept nogil:
    """One update with the importance-sampling gradient: the target's row pulled up, the N
    sampled rows pushed down with weights r_j / sum r, r_j = exp(y_j) / Q(w_j) (the biased,
    self-normalised estimator). Only those rows of U, W and b are read or written. Returns
    the sum of the estimated log p(target) (with Z estimated from the samples); adds the
    effective sample sizes (sum r)^2 / sum r^2 to `ess`."""
    cdef int n = net.context + 1, i, j, t, M, h = net.hidden, I = net.inputs, one = 1
    cdef float minus = -rate, value
    cdef double estimate = 0
    hidden_layer(net, w, rows, K)
    draw_samples(sp, rows, K, n)
    merge_duplicates(sp)
    M = sp.distinct
    if K == 1:
        return sampled_window(net, w, sp, rows, rate, keep_c, ess)
    for j in range(M):
        if h > 0:
            memcpy(sp.U_rows + j * h, net.U + <Py_ssize_t> sp.words[j] * h, h * sizeof(float))
        if net.direct:
            memcpy(sp.W_rows + j * I, net.W + <Py_ssize_t> sp.words[j] * I, I * sizeof(float))
    for i in range(K):
        for j in range(M):
            sp.weights[i * M + j] = net.b[sp.words[j]]
    if h > 0:
        gemm(b'N', b'T', K, M, h, 1.0, w.A, h, sp.U_rows, h, 1.0, sp.weights, M)
    if net.direct:
        gemm(b'N', b'T', K, M, I, 1.0, w.X, I, sp.W_rows, I, 1.0, sp.weights, M)
    for i in range(K):
        t = rows[i * n + net.context]
        estimate += target_score(net, t, w.A + i * h, w.X + i * I) - importance_weights(sp, sp.weights + i * M, ess)
    # dL/da and the direct dL/dx with the old rows: sum_j g_j row_j - row(target)
    if h > 0:
        gemm(b'N', b'N', K, h, M, 1.0, sp.weights, M, sp.U_rows, h, 0.0, w.dA, h)
    if net.direct:
        gemm(b'N', b'N', K, I, M, 1.0, sp.weights, M, sp.W_rows, I, 0.0, w.dX, I)
    else:
        memset(w.dX, 0, <Py_ssize_t> K * I * sizeof(float))
    for i in range(K):
        t = rows[i * n + net.context]
        value = -1
        if h > 0:
            saxpy(&h, &value, net.U + <Py_ssize_t> t * h, &one, w.dA + i * h, &one)
        if net.direct:
            saxpy(&I, &value, net.W + <Py_ssize_t> t * I, &one, w.dX + i * I, &one)
    # Steps on the touched rows: sampled rows down along g^T A, the targets' rows up.
    if h > 0:
        gemm(b'T', b'N', M, h, K, 1.0, sp.weights, M, w.A, h, 0.0, sp.row_grads, h)
        for j in range(M):
            saxpy(&h, &minus, sp.row_grads + j * h, &one, net.U + <Py_ssize_t> sp.words[j] * h, &one)
    if net.direct:
        gemm(b'T', b'N', M, I, K, 1.0, sp.weights, M, w.X, I, 0.0, sp.row_grads, I)
        for j in range(M):
            saxpy(&I, &minus, sp.row_grads + j * I, &one, net.W + <Py_ssize_t> sp.words[j] * I, &one)
    for i in range(K):
        step_target(net, sp, rows[i * n + net.context], w.A + i * h, w.X + i * I, sp.weights + i * M, rate)
    input_backward(net, w, rows, K, rate, keep_c)
    return estimate


cdef inline void read_and_step_row(int size, float weight, float step, const float *x, float *row,
                                   float *grad) noexcept nogil:
    """grad += weight row, then row += step x, in one pass over the row."""
    cdef int i
    cdef float value
    for i in range(size):
        value = row[i]
        grad[i] += weight * value
        row[i] = value + step * x[i]


cdef inline float target_score(Net *net, int t, const float *a, const float *x) noexcept nogil:
    cdef float y = net.b[t]
    if net.hidden > 0:
        y += dot_row(net.hidden, net.U + <Py_ssize_t> t * net.hidden, a)
    if net.direct:
        y += dot_row(net.inputs, net.W + <Py_ssize_t> t * net.inputs, x)
    return y


cdef inline void step_target(Net *net, Sampling *sp, int t, const float *a, const float *x, const float *g,
                             float rate) noexcept nogil:
    """The target's rows up by the rate; the samples' biases down by their weights."""
    cdef int j
    if net.hidden > 0:
        axpy_row(net.hidden, rate, a, net.U + <Py_ssize_t> t * net.hidden)
    if net.direct:
        axpy_row(net.inputs, rate, x, net.W + <Py_ssize_t> t * net.inputs)
    if net.bias:
        net.b[t] += rate
        for j in range(sp.distinct):
            net.b[sp.words[j]] -= rate * g[j]


cdef double sampled_window(Net *net, Work *w, Sampling *sp, const int *rows, float rate, float keep_c,
                           double *ess) noexcept nogil:
    """sampled_step for one window, on the rows in place: each distinct sampled row is read
    for its score, then read for dL/da and moved in one pass (no gathering, no BLAS calls:
    at this size their overhead is the cost)."""
    cdef int j, word, t = rows[net.context], M = sp.distinct, h = net.hidden, I = net.inputs
    cdef float *g = sp.weights
    cdef float *row
    cdef double estimate
    for j in range(M):
        g[j] = target_score(net, sp.words[j], w.A, w.X)
    estimate = target_score(net, t, w.A, w.X) - importance_weights(sp, g, ess)
    # dL/da = sum_j g_j U_j - U_t with the rows before the step (the words are distinct,
    # and the target's row is read before any moves).
    for j in range(h):
        w.dA[j] = -net.U[<Py_ssize_t> t * h + j]
    if net.direct:
        for j in range(I):
            w.dX[j] = -net.W[<Py_ssize_t> t * I + j]
    else:
        memset(w.dX, 0, I * sizeof(float))
    for j in range(M):
        word = sp.words[j]
        if h > 0:
            read_and_step_row(h, g[j], -rate * g[j], w.A, net.U + <Py_ssize_t> word * h, w.dA)
        if net.direct:
            read_and_step_row(I, g[j], -rate * g[j], w.X, net.W + <Py_ssize_t> word * I, w.dX)
    step_target(net, sp, t, w.A, w.X, g, rate)
    input_backward(net, w, rows, 1, rate, keep_c)
    return estimate



cdef class Network:
    """Raw views of a network's parameter arrays (float32, C-contiguous, owned by Python)
    and one thread's work buffers for batches of up to `capacity` windows."""
    cdef Net net
    cdef Work work
    cdef object keep_alive

    def __init__(self, params, int context, int activation, int capacity, bint bias=True):
        self.keep_alive = params
        net_attach(&self.net, params, context, activation, bias, 0, params["b"].shape[0])
        work_alloc(&self.work, &self.net, capacity)

    def __dealloc__(self):
        work_free(&self.work)

    def train(self, const int[:, ::1] windows, int batch, const double[::1] rates, const float[::1] row_keep,
              const float[::1] dense_keep):
        """SGD over `windows` in batches of `batch`: update u steps by rates[u], decays the
        rows of C it touches by row_keep[u], then (when dense_keep[u] != 1) the dense
        weights U, H, W in bulk. Returns (sum of log p(target), updates done)."""
        cdef Py_ssize_t start, count = windows.shape[0], u = 0
        cdef int K
        cdef double total = 0
        check_schedule(count, batch, self.work.capacity, rates.shape[0], row_keep.shape[0], dense_keep.shape[0])
        if count == 0:
            return 0.0, 0
        if windows.shape[1] != self.net.context + 1:
            raise ValueError("windows of the wrong order")
        with nogil:
            start = 0
            while start < count:
                K = <int> min(<Py_ssize_t> batch, count - start)
                if K > 1:
                    flush(&self.net, &self.work)
                total += forward(&self.net, &self.work, &windows[start, 0], K)
                backward(&self.net, &self.work, &windows[start, 0], K, <float> rates[u], row_keep[u])
                if self.work.pending == DEFER or start + K >= count:
                    flush(&self.net, &self.work)
                if dense_keep[u] != 1:
                    flush(&self.net, &self.work)
                    decay_dense(&self.net, dense_keep[u])
                start += K
                u += 1
        return total, u

    def train_sampled(self, const int[:, ::1] windows, int batch, const double[::1] rates,
                      const float[::1] row_keep, const float[::1] dense_keep, int samples, proposal,
                      unsigned long long seed):
        """As train, with the importance-sampling gradient of `samples` words drawn from the
        proposal (nplmtk.neural.sampling.Proposal), shared by the windows of a batch.
        Returns (sum of estimated log p(target), updates done, sum of effective sample sizes)."""
        cdef Py_ssize_t start, count = windows.shape[0], u = 0
        cdef int K
        cdef double total = 0, ess = 0
        cdef Sampling sp
        check_schedule(count, batch, self.work.capacity, rates.shape[0], row_keep.shape[0], dense_keep.shape[0])
        if count == 0:
            return 0.0, 0, 0.0
        if windows.shape[1] != self.net.context + 1:
            raise ValueError("windows of the wrong order")
        if samples < 1 or proposal.vocab_size != self.net.vocab:
            raise ValueError("no samples, or a proposal of the wrong size")
        memset(&sp, 0, sizeof(Sampling))
        try:
            sampling_start(&sp, proposal, samples, batch, self.net.hidden, self.net.inputs, seed)
            with nogil:
                start = 0
                while start < count:
                    K = <int> min(<Py_ssize_t> batch, count - start)
                    total += sampled_step(&self.net, &self.work, &sp, &windows[start, 0], K, <float> rates[u],
                                          row_keep[u], &ess)
                    if dense_keep[u] != 1:
                        decay_dense(&self.net, dense_keep[u])
                    start += K
                    u += 1
        finally:
            sampling_free(&sp)
        return total, u, ess

    def logprobs(self, const int[:, ::1] windows, double[::1] out):
        """Natural-log probability of each window's target (exact softmax)."""
        cdef Py_ssize_t start, count = windows.shape[0], i
        cdef int K, n = self.net.context + 1
        with nogil:
            start = 0
            while start < count:
                K = <int> min(<Py_ssize_t> self.work.capacity, count - start)
                forward(&self.net, &self.work, &windows[start, 0], K)
                for i in range(K):
                    out[start + i] = log(self.work.Y[i * self.net.vocab + windows[start + i, n - 1]])
                start += K

    def gradients(self, const int[:, ::1] windows, grads):
        """Sum over the windows of the gradients of -log p(target), written into `grads`
        (arrays shaped like the parameters); returns the sum of log p. For tests."""
        cdef int K = windows.shape[0], n = self.net.context + 1, i, k, j
        cdef double total
        cdef float[:, ::1] gC = grads["C"], gU, gH, gW
        cdef float[::1] gb = grads["b"], gd
        if K > self.work.capacity:
            raise ValueError("more windows than the work buffers hold")
        total = forward(&self.net, &self.work, &windows[0, 0], K)
        for i in range(K):
            self.work.Y[i * self.net.vocab + windows[i, n - 1]] -= 1
        gC[:, :] = 0
        for j in range(self.net.vocab):
            gb[j] = 0
            for i in range(K):
                gb[j] += self.work.Y[i * self.net.vocab + j]
        if self.net.hidden > 0:
            gU = grads["U"]
            gH = grads["H"]
            gd = grads["d"]
            gemm(b'N', b'N', K, self.net.hidden, self.net.vocab, 1.0, self.work.Y, self.net.vocab,
                 self.net.U, self.net.hidden, 0.0, self.work.dA, self.net.hidden)
            activation_slope(self.work.dA, self.work.A, K * self.net.hidden, self.net.activation)
            gemm(b'N', b'N', K, self.net.inputs, self.net.hidden, 1.0, self.work.dA, self.net.hidden,
                 self.net.H, self.net.inputs, 0.0, self.work.dX, self.net.inputs)
            gemm(b'T', b'N', self.net.vocab, self.net.hidden, K, 1.0, self.work.Y, self.net.vocab,
                 self.work.A, self.net.hidden, 0.0, &gU[0, 0], self.net.hidden)
            gemm(b'T', b'N', self.net.hidden, self.net.inputs, K, 1.0, self.work.dA, self.net.hidden,
                 self.work.X, self.net.inputs, 0.0, &gH[0, 0], self.net.inputs)
            for j in range(self.net.hidden):
                gd[j] = 0
                for i in range(K):
                    gd[j] += self.work.dA[i * self.net.hidden + j]
        else:
            memset(self.work.dX, 0, K * self.net.inputs * sizeof(float))
        if self.net.direct:
            gW = grads["W"]
            gemm(b'N', b'N', K, self.net.inputs, self.net.vocab, 1.0, self.work.Y, self.net.vocab,
                 self.net.W, self.net.inputs, 1.0, self.work.dX, self.net.inputs)
            gemm(b'T', b'N', self.net.vocab, self.net.inputs, K, 1.0, self.work.Y, self.net.vocab,
                 self.work.X, self.net.inputs, 0.0, &gW[0, 0], self.net.inputs)
        for i in range(K):
            for k in range(self.net.context):
                for j in range(self.net.m):
                    gC[windows[i, k], j] += self.work.dX[i * self.net.inputs + k * self.net.m + j]
        return total

