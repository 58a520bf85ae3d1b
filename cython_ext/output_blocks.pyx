# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""One rank's block of the parameter-parallel output layer (Bengio et al. 2003, sec. 3.2):
the feed-forward network's rows lo..hi-1 of b, U and W, driven phase by phase while the
caller (nplmtk.neural.parallel) sums each phase's results across the blocks with MPI.
Exact softmax (block_scores, block_exponentials, block_backward) or importance sampling
(block_sampled_*); then the shared layers' step (block_input_backward)."""
import numpy as np
cimport numpy as cnp
from libc.math cimport expf
from libc.string cimport memcpy, memset
from scipy.linalg.cython_blas cimport saxpy

from kernel_common cimport block_exponentials, block_output_gradient, dot, gemm, row_maxima
from nplmtk._ext.sampling_kernels cimport (Sampling, block_sums, draw_samples, held_maxima, hold_block_samples,
                                           merge_duplicates, sampling_free, sampling_start)
from feedforward cimport (Net, Work, decay_dense, hidden_layer, input_backward, net_attach, output_backward, scores,
                          work_alloc, work_free)

cnp.import_array()


cdef class OutputBlock:
    """Views of the parameter arrays with output rows lo..hi-1 (of b, U and W) and the
    work buffers for batches of up to `capacity` windows. `exchange_width`: the floats
    of dL/da and dL/dx per window that the ranks sum (hidden units + inputs)."""
    cdef Net net
    cdef Work work
    cdef object keep_alive
    cdef int lo
    cdef Sampling sampling  # the block's importance sampling (block_sampled_*)
    cdef object proposal
    cdef readonly int exchange_width

    def __init__(self, params, int context, int activation, int capacity, bint bias, int lo, int hi):
        self.keep_alive = params
        net_attach(&self.net, params, context, activation, bias, lo, hi)
        work_alloc(&self.work, &self.net, capacity)
        self.lo = lo
        self.exchange_width = self.net.hidden + self.net.inputs

    def __dealloc__(self):
        work_free(&self.work)
        sampling_free(&self.sampling)

    def block_scores(self, const int[:, ::1] windows, float[::1] top):
        """Scores of this block's words for each window; `top` gets their maxima."""
        cdef int K = windows.shape[0], V = self.net.vocab
        self._check_block(windows)
        with nogil:
            scores(&self.net, &self.work, &windows[0, 0], K)
            row_maxima(self.work.Y, K, V, &top[0])
        
    def block_exponentials(self, const int[:, ::1] windows, const float[::1] top, double[::1] out):
        """With the maxima over all blocks: out[i] = sum of this block's exp(y - top), and
        out[K + i] = y(target) - top when this block holds the target, else 0."""
        with nogil:
            block_exponentials(self.work.Y, windows.shape[0], self.net.vocab, &windows[0, 0], self.net.context + 1,
                               self.lo, &top[0], &out[0])

    def block_backward(self, const int[:, ::1] windows, const double[::1] sums, float rate, float[::1] partial):
        """With the normalisers over all blocks: dL/dy of this block, this block's share of
        dL/da and of the direct dL/dx into `partial` (K x hidden, then K x inputs), and the
        steps on the block's rows of U, W and b."""
        cdef int K = windows.shape[0]
        cdef Py_ssize_t hidden_part = <Py_ssize_t> K * self.net.hidden
        with nogil:
            block_output_gradient(self.work.Y, K, self.net.vocab, &windows[0, 0], self.net.context + 1, self.lo,
                                  &sums[0])
            output_backward(&self.net, &self.work, K, rate)
            memcpy(&partial[0], self.work.dA, hidden_part * sizeof(float))
            memcpy(&partial[hidden_part], self.work.dX, <Py_ssize_t> K * self.net.inputs * sizeof(float))

    def block_input_backward(self, const int[:, ::1] windows, const float[::1] total, float rate, float keep_c):
        """With block_backward's partials summed over all blocks: the steps on the shared
        layers (H, d, the rows of C), the same on every block."""
        cdef int K = windows.shape[0]
        cdef Py_ssize_t hidden_part = <Py_ssize_t> K * self.net.hidden
        with nogil:
            memcpy(self.work.dA, &total[0], hidden_part * sizeof(float))
            memcpy(self.work.dX, &total[hidden_part], <Py_ssize_t> K * self.net.inputs * sizeof(float))
            input_backward(&self.net, &self.work, &windows[0, 0], K, rate, keep_c)

    def block_sampled_begin(self, int samples, proposal, unsigned long long seed):
        """Start a chunk of importance-sampled batches: every block draws the same words
        (same proposal, same seed) and scores those it holds."""
        if samples < 1 or proposal.vocab_size < self.lo + self.net.vocab:
            raise ValueError("no samples, or a proposal of the wrong size")
        sampling_start(&self.sampling, proposal, samples, self.work.capacity, self.net.hidden, self.net.inputs, seed)
        self.proposal = proposal

    def block_sampled_scores(self, const int[:, ::1] windows, float[::1] top):
        """Draw the batch's samples; score the held ones (y - log Q) and the targets held;
        `top` gets each window's maximum over the held samples."""
        cdef Sampling *sp = &self.sampling
        cdef int K = windows.shape[0], n = self.net.context + 1, i, m, t, word
        cdef int h = self.net.hidden, I = self.net.inputs, V = self.net.vocab
        self._check_block(windows)
        if sp.count == 0:
            raise ValueError("block_sampled_begin first")
        with nogil:
            hidden_layer(&self.net, &self.work, &windows[0, 0], K)
            draw_samples(sp, &windows[0, 0], K, n)
            merge_duplicates(sp)
            hold_block_samples(sp, self.lo, self.lo + V)
            for m in range(sp.held):
                word = sp.words[sp.owned[m]] - self.lo
                if h > 0:
                    memcpy(sp.U_rows + m * h, self.net.U + <Py_ssize_t> word * h, h * sizeof(float))
                if self.net.direct:
                    memcpy(sp.W_rows + m * I, self.net.W + <Py_ssize_t> word * I, I * sizeof(float))
            for i in range(K):
                for m in range(sp.held):
                    sp.weights[i * sp.held + m] = self.net.b[sp.words[sp.owned[m]] - self.lo]
            if h > 0:
                gemm(b'N', b'T', K, sp.held, h, 1.0, self.work.A, h, sp.U_rows, h, 1.0, sp.weights, sp.held)
            if self.net.direct:
                gemm(b'N', b'T', K, sp.held, I, 1.0, self.work.X, I, sp.W_rows, I, 1.0, sp.weights, sp.held)
            held_maxima(sp, K, &top[0])
            for i in range(K):
                t = windows[i, n - 1] - self.lo
                sp.targets[i] = 0
                if 0 <= t < V:
                    sp.targets[i] = self.net.b[t]
                    if h > 0:
                        sp.targets[i] += dot(h, self.net.U + <Py_ssize_t> t * h, self.work.A + i * h)
                    if self.net.direct:
                        sp.targets[i] += dot(I, self.net.W + <Py_ssize_t> t * I, self.work.X + i * I)

    def block_sampled_sums(self, const int[:, ::1] windows, const float[::1] top, double[::1] out):
        """With the maxima over all blocks: out[i] = sum of this block's r, out[K + i] = sum
        of r^2, out[2K + i] = the target's score where this block holds it (else 0)."""
        with nogil:
            block_sums(&self.sampling, windows.shape[0], &top[0], &out[0])

    def block_sampled_backward(self, const int[:, ::1] windows, const double[::1] sums, float rate,
                               float[::1] partial):
        """With the sums of r over all blocks: this block's share of dL/da and of the direct
        dL/dx into `partial`, then the steps on the held sampled rows and held targets."""
        cdef Sampling *sp = &self.sampling
        cdef int K = windows.shape[0], n = self.net.context + 1, i, m, t, one = 1
        cdef int h = self.net.hidden, I = self.net.inputs, V = self.net.vocab, M
        cdef float value, minus = -rate
        with nogil:
            M = sp.held
            for i in range(K):
                value = <float> (1 / sums[i])
                for m in range(M):
                    sp.weights[i * M + m] *= value
            if h > 0:
                gemm(b'N', b'N', K, h, M, 1.0, sp.weights, M, sp.U_rows, h, 0.0, self.work.dA, h)
                if M == 0:
                    memset(self.work.dA, 0, <Py_ssize_t> K * h * sizeof(float))
            if self.net.direct:
                gemm(b'N', b'N', K, I, M, 1.0, sp.weights, M, sp.W_rows, I, 0.0, self.work.dX, I)
            if not self.net.direct or M == 0:
                memset(self.work.dX, 0, <Py_ssize_t> K * I * sizeof(float))
            value = -1
            for i in range(K):
                t = windows[i, n - 1] - self.lo
                if 0 <= t < V:
                    if h > 0:
                        saxpy(&h, &value, self.net.U + <Py_ssize_t> t * h, &one, self.work.dA + i * h, &one)
                    if self.net.direct:
                        saxpy(&I, &value, self.net.W + <Py_ssize_t> t * I, &one, self.work.dX + i * I, &one)
            memcpy(&partial[0], self.work.dA, <Py_ssize_t> K * h * sizeof(float))
            memcpy(&partial[<Py_ssize_t> K * h], self.work.dX, <Py_ssize_t> K * I * sizeof(float))
            if h > 0 and M > 0:
                gemm(b'T', b'N', M, h, K, 1.0, sp.weights, M, self.work.A, h, 0.0, sp.row_grads, h)
                for m in range(M):
                    saxpy(&h, &minus, sp.row_grads + m * h, &one,
                          self.net.U + <Py_ssize_t> (sp.words[sp.owned[m]] - self.lo) * h, &one)
            if self.net.direct and M > 0:
                gemm(b'T', b'N', M, I, K, 1.0, sp.weights, M, self.work.X, I, 0.0, sp.row_grads, I)
                for m in range(M):
                    saxpy(&I, &minus, sp.row_grads + m * I, &one,
                          self.net.W + <Py_ssize_t> (sp.words[sp.owned[m]] - self.lo) * I, &one)
            for i in range(K):
                t = windows[i, n - 1] - self.lo
                if 0 <= t < V:
                    if h > 0:
                        saxpy(&h, &rate, self.work.A + i * h, &one, self.net.U + <Py_ssize_t> t * h, &one)
                    if self.net.direct:
                        saxpy(&I, &rate, self.work.X + i * I, &one, self.net.W + <Py_ssize_t> t * I, &one)
                    if self.net.bias:
                        self.net.b[t] += rate
                if self.net.bias:
                    for m in range(M):
                        self.net.b[sp.words[sp.owned[m]] - self.lo] -= rate * sp.weights[i * M + m]

    def block_decay(self, float factor):
        """Weight decay in bulk on this block's rows of U and W, and on H."""
        decay_dense(&self.net, factor, True)

    def _check_block(self, const int[:, ::1] windows):
        if windows.shape[0] > self.work.capacity or windows.shape[1] != self.net.context + 1:
            raise ValueError("batch larger than the work buffers, or windows of the wrong order")
        if self.work.pending:
            raise ValueError("deferred updates pending")
