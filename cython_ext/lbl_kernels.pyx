# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""The log-bilinear family of Zhang, Mnih & Hinton (Model 0 is Mnih & Hinton 2007, with
the biases of its footnote 1). Over the context features f = (r(w_1), ..., r(w_n-1)):

    Model 0 (eq. 1)  p = d + sum_i C_i^T r(w_i)
    hidden layer     h = logistic(A^T f + a)                     (Models 1-3)
    Model 1 (eq. 3)  p = d + sum_i s_i C_i^T r(w_i),  s = 2 logistic(B^T h + gate_bias)
    Model 2 (eq. 4)  p = d + sum_i C_i^T r(w_i) + S^T h
    Model 3 (eq. 5)  both
    y_w = b_w + r(w) . p,   P(w | context) = softmax(y)

One feature matrix R (|V| x m) serves the context words and the next word; C holds one
m x m matrix per context position (rows i*m .. (i+1)*m - 1 of a (n-1)m x m array). The
parameters form the blocks of BLOCKS; the trainer gives each block its own rate and
bulk weight decay per update, and a momentum (a block of rate 0 is not trained: with R
frozen its gradient is not even computed). Exact softmax gradient over a mini-batch, or
the importance-sampling estimate of Bengio & Senecal (2003, Algorithm 3)."""
import numpy as np
cimport numpy as cnp
from libc.string cimport memcpy, memset
from scipy.linalg.cython_blas cimport saxpy

from batch_driver cimport Schedule, Update, drive, schedule_of
from elementwise cimport column_sums
from kernel_common cimport (block_exponentials, block_output_gradient, dot_row, gemm, log_softmax_at, row_maxima, scale,
                            softmax_row)
from lbl_layers cimport (B_OUT, C_, LBL, NBLOCKS, R_, Buffers, broadcast, buffers_alloc, buffers_free, check_batch,
                         context_backward, decay_blocks, lbl_attach, predict, step_block, step_blocks, trained)
from nplmtk._ext.sampling_kernels cimport (Sampling, block_sums, draw_samples, held_maxima, hold_block_samples,
                                           importance_weights, merge_duplicates, sampling_free, sampling_start)

cnp.import_array()

BLOCKS = ("R", "C", "d", "b", "A", "a", "B", "gate_bias", "S", "Vn", "bn", "Vc", "bc")  # lbl_layers.pxd's enum


cdef double forward(LBL *net, Buffers *w, const int *rows, int K, double *logp) noexcept nogil:
    """predict, then Y as probabilities; returns the sum of log p(target). Scoring (logp:
    each window's log p(target)) leaves Y as scores."""
    cdef int n = net.context + 1, i
    cdef double total = 0
    predict(net, w, rows, K)
    broadcast(K, net.vocab, net.param[B_OUT], w.Y)
    gemm(b'N', b'T', K, net.vocab, net.m, 1.0, w.P, net.m, net.param[R_], net.m, 1.0, w.Y, net.vocab)
    for i in range(K):
        if logp != NULL:
            logp[i] = log_softmax_at(w.Y + <Py_ssize_t> i * net.vocab, net.vocab, rows[i * n + net.context])
            total += logp[i]
        else:
            total += softmax_row(w.Y + <Py_ssize_t> i * net.vocab, net.vocab, rows[i * n + net.context])
    return total


cdef void gradients(LBL *net, Buffers *w, const int *rows, int K, bint features) noexcept nogil:
    """After forward: the gradients of -sum log p(target) of every block (R's only with
    `features`: its output part dL/dy^T P and, on the context words' rows, dL/df)."""
    cdef int n = net.context + 1, i, k, m = net.m, V = net.vocab, one = 1
    cdef float unit = 1
    for i in range(K):
        w.Y[<Py_ssize_t> i * V + rows[i * n + net.context]] -= 1
    gemm(b'N', b'N', K, m, V, 1.0, w.Y, V, net.param[R_], m, 0.0, w.dP, m)
    column_sums(w.Y, K, V, w.grad[B_OUT])
    context_backward(net, w, K)
    if not features:
        return
    gemm(b'T', b'N', V, m, K, 1.0, w.Y, V, w.P, m, 0.0, w.grad[R_], m)
    for i in range(K):
        for k in range(net.context):
            saxpy(&m, &unit, w.dX + i * net.inputs + k * m, &one, w.grad[R_] + <Py_ssize_t> rows[i * n + k] * m, &one)


cdef double sampled_step(LBL *net, Buffers *w, Sampling *sp, const int *rows, int K, const double *rates,
                         Py_ssize_t stride, double *ess) noexcept nogil:
    """One update with the importance-sampling gradient: each target's row and bias pulled
    up, the N sampled words' pushed down with weights r_j / sum r (r_j = exp(y_j) / Q(w_j)),
    the context side along the estimated dL/dp (every gradient taken before any step).
    rates[block * stride]: this update's rates. Returns the
    estimated sum of log p(target) and adds the effective sample sizes to `ess`."""
    cdef int n = net.context + 1, i, j, k, t, M, m = net.m, one = 1, block
    cdef float rate_R = rates[R_ * stride], rate_b = rates[B_OUT * stride], minus, value
    cdef double estimate = 0
    cdef float *g
    predict(net, w, rows, K)
    draw_samples(sp, rows, K, n)
    merge_duplicates(sp)
    M = sp.distinct
    for j in range(M):
        memcpy(sp.U_rows + j * m, net.param[R_] + <Py_ssize_t> sp.words[j] * m, m * sizeof(float))
    for i in range(K):
        for j in range(M):
            sp.weights[i * M + j] = net.param[B_OUT][sp.words[j]]
    gemm(b'N', b'T', K, M, m, 1.0, w.P, m, sp.U_rows, m, 1.0, sp.weights, M)
    for i in range(K):
        t = rows[i * n + net.context]
        estimate += net.param[B_OUT][t] + dot_row(m, net.param[R_] + <Py_ssize_t> t * m, w.P + i * m)
        estimate -= importance_weights(sp, sp.weights + i * M, ess)
    # dL/dp = sum_j g_j r(w_j) - r(target), then the context side, all before any step
    gemm(b'N', b'N', K, m, M, 1.0, sp.weights, M, sp.U_rows, m, 0.0, w.dP, m)
    value = -1
    for i in range(K):
        saxpy(&m, &value, net.param[R_] + <Py_ssize_t> rows[i * n + net.context] * m, &one, w.dP + i * m, &one)
    context_backward(net, w, K)
    gemm(b'T', b'N', M, m, K, 1.0, sp.weights, M, w.P, m, 0.0, sp.row_grads, m)
    # the steps: sampled rows down, targets up, the context words' rows, then the dense blocks
    if rate_R != 0:
        minus = -rate_R
        for j in range(M):
            saxpy(&m, &minus, sp.row_grads + j * m, &one, net.param[R_] + <Py_ssize_t> sp.words[j] * m, &one)
        for i in range(K):
            saxpy(&m, &rate_R, w.P + i * m, &one, net.param[R_] + <Py_ssize_t> rows[i * n + net.context] * m, &one)
            for k in range(net.context):
                saxpy(&m, &minus, w.dX + i * net.inputs + k * m, &one,
                      net.param[R_] + <Py_ssize_t> rows[i * n + k] * m, &one)
    if trained(net, B_OUT, rate_b):
        for i in range(K):
            net.param[B_OUT][rows[i * n + net.context]] += rate_b
            g = sp.weights + i * M
            for j in range(M):
                net.param[B_OUT][sp.words[j]] -= rate_b * g[j]
    for block in range(C_, NBLOCKS):
        if block != B_OUT and trained(net, block, rates[block * stride]):
            step_block(net, w, block, rates[block * stride], 0, 1)
    return estimate


# -- the steps the batch driver (batch_driver.pxd) calls for each update ----------------

cdef struct Run:
    LBL *net
    Buffers *work
    Sampling *sp
    const float *momentum
    double ess


cdef double exact_update(void *run, Update *up) noexcept nogil:
    cdef Run *r = <Run *> run
    cdef double total = forward(r.net, r.work, up.rows, up.K, NULL)
    gradients(r.net, r.work, up.rows, up.K, up.rates[R_ * up.stride] != 0)
    step_blocks(r.net, r.work, up.rates, up.stride, r.momentum)
    return total


cdef double sampled_update(void *run, Update *up) noexcept nogil:
    cdef Run *r = <Run *> run
    return sampled_step(r.net, r.work, r.sp, up.rows, up.K, up.rates, up.stride, &r.ess)


cdef void blocks_decay(void *run, Update *up) noexcept nogil:
    decay_blocks((<Run *> run).net, up.dense_keep, up.stride)


cdef class LBLNetwork:
    """Views of a log-bilinear model's arrays (float32, C-contiguous, owned by Python; the
    names of BLOCKS, those of Models 1-3 optional) and one worker's buffers for batches of
    up to `capacity` windows. `carried`: momentum's state, "velocity.NAME" per block."""
    cdef LBL net
    cdef Buffers work
    cdef object keep_alive
    cdef public dict carried

    def __init__(self, params, int capacity, bint bias=True):
        if "b" not in params or "Vn" in params or "Vc" in params:
            raise ValueError("not the arrays of a log-bilinear network over the full softmax")
        self.carried = {}
        lbl_attach(&self.net, params, BLOCKS, bias, self.carried)
        self.keep_alive = params
        buffers_alloc(&self.work, &self.net, capacity, self.net.vocab)

    def __dealloc__(self):
        buffers_free(&self.work)

    def _check(self, const int[:, ::1] windows, int batch=1):
        check_batch(&self.net, self.work.capacity, windows, batch)

    def train(self, const int[:, ::1] windows, steps):
        """Mini-batch steepest descent over `windows` with the chunk's Steps: at update u
        block j steps by rates[j, u] (with momentum[j]), then decays by dense_keep[j, u];
        with steps.sampling, the importance-sampling gradient of its N words drawn from its
        proposal (nplmtk.neural.sampling.Proposal), shared by the windows of a batch, and
        no momentum. Returns (sum of log p(target), estimated with sampling; updates; sum of
        effective sample sizes)."""
        cdef Py_ssize_t count = windows.shape[0]
        cdef int block
        cdef double total
        cdef Schedule s
        cdef Run run
        cdef Sampling sp
        schedule_of(&s, steps, count, self.work.capacity, NBLOCKS)
        self._check(windows, s.batch)
        memset(&run, 0, sizeof(Run))
        run.net, run.work, run.momentum = &self.net, &self.work, s.momentum
        if count == 0:
            return 0.0, 0, 0.0
        if steps.sampling is None:
            with nogil:
                total = drive(&run, exact_update, blocks_decay, &s, &windows[0, 0], count, windows.shape[1])
            return total, s.updates, 0.0
        draws = steps.sampling
        if draws.samples < 1 or draws.proposal.vocab_size != self.net.vocab:
            raise ValueError("no samples, or a proposal of the wrong size")
        for block in range(NBLOCKS):
            if s.momentum[block] != 0:
                raise ValueError("no momentum with the sampled gradient")
        memset(&sp, 0, sizeof(Sampling))
        run.sp = &sp
        try:
            sampling_start(&sp, draws.proposal, draws.samples, s.batch, self.net.m, self.net.m, draws.seed)
            with nogil:
                total = drive(&run, sampled_update, blocks_decay, &s, &windows[0, 0], count, windows.shape[1])
        finally:
            sampling_free(&sp)
        return total, s.updates, run.ess

    def logprobs(self, const int[:, ::1] windows, double[::1] out):
        """Natural-log probability of each window's target."""
        cdef Py_ssize_t start = 0, count = windows.shape[0]
        cdef int K
        self._check(windows)
        with nogil:
            while start < count:
                K = <int> min(<Py_ssize_t> self.work.capacity, count - start)
                forward(&self.net, &self.work, &windows[start, 0], K, &out[start])
                start += K

    def gradients(self, const int[:, ::1] windows, grads):
        """Sum over the windows of the gradients of -log p(target) into `grads` (arrays
        shaped like the parameters); returns the sum of log p. For tests."""
        cdef int K = windows.shape[0], block
        cdef double total
        self._check(windows)
        if K > self.work.capacity:
            raise ValueError("more windows than the work buffers hold")
        total = forward(&self.net, &self.work, &windows[0, 0], K, NULL)
        gradients(&self.net, &self.work, &windows[0, 0], K, True)
        for block, name in enumerate(BLOCKS):
            if name in grads:
                grads[name][...] = np.asarray(<float[:self.net.size[block]]> self.work.grad[block]).reshape(
                    grads[name].shape)
        return total


cdef class LBLOutputBlock(LBLNetwork):
    """One rank's block of -mpi param: the output rows lo..hi-1 (the rows of R that score
    words there, and of b), driven phase by phase while nplmtk.neural.parallel sums each
    phase's results across the blocks: the exact softmax (block_scores, ...) or importance
    sampling (block_sampled_*, every rank drawing the same words). Every rank holds all of
    R for the context and computes the shared blocks identically; when R is trained, its
    rows' output steps are the owner's and the caller gathers R after each update."""
    cdef int lo, hi
    cdef readonly int exchange_width
    cdef Sampling sampling
    cdef object proposal
    cdef bint sampled  # the update under way is a sampled one: R and b already stepped row by row

    def __dealloc__(self):
        sampling_free(&self.sampling)

    def __init__(self, params, int capacity, bint bias, int lo, int hi):
        LBLNetwork.__init__(self, params, capacity, bias)
        if not 0 <= lo <= hi <= self.net.vocab:
            raise ValueError("output rows outside the vocabulary")
        self.lo, self.hi = lo, hi
        self.exchange_width = self.net.m

    def block_scores(self, const int[:, ::1] windows, float[::1] top):
        """Predict; score this block's words for each window; `top` gets their maxima."""
        cdef int K = windows.shape[0], V = self.hi - self.lo, m = self.net.m
        self._check(windows, K)
        with nogil:
            predict(&self.net, &self.work, &windows[0, 0], K)
            broadcast(K, V, self.net.param[B_OUT] + self.lo, self.work.Y)
            gemm(b'N', b'T', K, V, m, 1.0, self.work.P, m, self.net.param[R_] + <Py_ssize_t> self.lo * m, m, 1.0,
                 self.work.Y, V)
            row_maxima(self.work.Y, K, V, &top[0])

    def block_exponentials(self, const int[:, ::1] windows, const float[::1] top, double[::1] out):
        """With the maxima over all blocks: out[i] = sum of this block's exp(y - top), and
        out[K + i] = y(target) - top when this block holds the target, else 0."""
        with nogil:
            block_exponentials(self.work.Y, windows.shape[0], self.hi - self.lo, &windows[0, 0], self.net.context + 1,
                               self.lo, &top[0], &out[0])

    def block_backward(self, const int[:, ::1] windows, const double[::1] sums, const double[::1] rates,
                       float[::1] partial):
        """With the normalisers over all blocks: dL/dy of this block, its share of dL/dp
        into `partial` (K x m), the gradient of its rows of b and (when R is trained) the
        output part of its rows of R."""
        cdef int K = windows.shape[0], V = self.hi - self.lo, m = self.net.m
        with nogil:
            block_output_gradient(self.work.Y, K, V, &windows[0, 0], self.net.context + 1, self.lo, &sums[0])
            memset(&partial[0], 0, <Py_ssize_t> K * m * sizeof(float))
            gemm(b'N', b'N', K, m, V, 1.0, self.work.Y, V, self.net.param[R_] + <Py_ssize_t> self.lo * m, m, 0.0,
                 &partial[0], m)
            memset(self.work.grad[B_OUT], 0, self.net.vocab * sizeof(float))
            column_sums(self.work.Y, K, V, self.work.grad[B_OUT] + self.lo)
            if rates[R_] != 0:
                memset(self.work.grad[R_], 0, <Py_ssize_t> self.net.vocab * m * sizeof(float))
                gemm(b'T', b'N', V, m, K, 1.0, self.work.Y, V, self.work.P, m, 0.0,
                     self.work.grad[R_] + <Py_ssize_t> self.lo * m, m)

    def block_sampled_begin(self, int samples, proposal, unsigned long long seed):
        """Start a chunk of importance-sampled batches (same proposal and seed on every rank)."""
        if samples < 1 or proposal.vocab_size != self.net.vocab:
            raise ValueError("no samples, or a proposal of the wrong size")
        sampling_start(&self.sampling, proposal, samples, self.work.capacity, self.net.m, self.net.m, seed)
        self.proposal = proposal

    def block_sampled_scores(self, const int[:, ::1] windows, float[::1] top):
        """Predict; draw the batch's samples; score the held ones (y - log Q) and the targets
        held; `top` gets each window's maximum over the held samples."""
        cdef Sampling *sp = &self.sampling
        cdef int K = windows.shape[0], n = self.net.context + 1, i, h, t, M, m = self.net.m
        self._check(windows, K)
        if sp.count == 0:
            raise ValueError("block_sampled_begin first")
        with nogil:
            predict(&self.net, &self.work, &windows[0, 0], K)
            draw_samples(sp, &windows[0, 0], K, n)
            merge_duplicates(sp)
            hold_block_samples(sp, self.lo, self.hi)
            M = sp.held
            for h in range(M):
                memcpy(sp.U_rows + h * m, self.net.param[R_] + <Py_ssize_t> sp.words[sp.owned[h]] * m,
                       m * sizeof(float))
            for i in range(K):
                for h in range(M):
                    sp.weights[i * M + h] = self.net.param[B_OUT][sp.words[sp.owned[h]]]
            gemm(b'N', b'T', K, M, m, 1.0, self.work.P, m, sp.U_rows, m, 1.0, sp.weights, M)
            held_maxima(sp, K, &top[0])
            for i in range(K):
                t = windows[i, n - 1]
                sp.targets[i] = 0
                if self.lo <= t < self.hi:
                    sp.targets[i] = self.net.param[B_OUT][t] + dot_row(m, self.net.param[R_] + <Py_ssize_t> t * m,
                                                                       self.work.P + i * m)

    def block_sampled_sums(self, const int[:, ::1] windows, const float[::1] top, double[::1] out):
        """With the maxima over all blocks: out[i] = sum of this block's r, out[K + i] = sum
        of r^2, out[2K + i] = the target's score where this block holds it (else 0)."""
        with nogil:
            block_sums(&self.sampling, windows.shape[0], &top[0], &out[0])

    def block_sampled_backward(self, const int[:, ::1] windows, const double[::1] sums, const double[::1] rates,
                               float[::1] partial):
        """With the sums of r over all blocks: this block's share of the estimated dL/dp into
        `partial`, then the steps on the held sampled words' and targets' rows of R and b."""
        cdef Sampling *sp = &self.sampling
        cdef int K = windows.shape[0], n = self.net.context + 1, i, h, t, M = sp.held, m = self.net.m, one = 1
        cdef float value, rate_R = <float> rates[R_], rate_b = <float> rates[B_OUT], minus = -rate_R
        with nogil:
            for i in range(K):
                value = <float> (1 / sums[i])
                for h in range(M):
                    sp.weights[i * M + h] *= value
            memset(&partial[0], 0, <Py_ssize_t> K * m * sizeof(float))
            gemm(b'N', b'N', K, m, M, 1.0, sp.weights, M, sp.U_rows, m, 0.0, &partial[0], m)
            value = -1
            for i in range(K):
                t = windows[i, n - 1]
                if self.lo <= t < self.hi:
                    saxpy(&m, &value, self.net.param[R_] + <Py_ssize_t> t * m, &one, &partial[i * m], &one)
            if rate_R != 0 and M > 0:
                gemm(b'T', b'N', M, m, K, 1.0, sp.weights, M, self.work.P, m, 0.0, sp.row_grads, m)
                for h in range(M):
                    saxpy(&m, &minus, sp.row_grads + h * m, &one,
                          self.net.param[R_] + <Py_ssize_t> sp.words[sp.owned[h]] * m, &one)
            for i in range(K):
                t = windows[i, n - 1]
                if self.lo <= t < self.hi and rate_R != 0:
                    saxpy(&m, &rate_R, self.work.P + i * m, &one, self.net.param[R_] + <Py_ssize_t> t * m, &one)
                if trained(&self.net, B_OUT, rate_b):
                    if self.lo <= t < self.hi:
                        self.net.param[B_OUT][t] += rate_b
                    for h in range(M):
                        self.net.param[B_OUT][sp.words[sp.owned[h]]] -= rate_b * sp.weights[i * M + h]
        self.sampled = True

    def block_input_backward(self, const int[:, ::1] windows, const float[::1] total, const double[::1] rates,
                             const float[::1] keep, const float[::1] momentum):
        """With block_backward's partials summed over all blocks (dL/dp): the shared blocks'
        gradients, the same on every rank, then every block's step and decay. Returns the
        arrays whose blocks the ranks must gather now: ("R",) when R is trained."""
        cdef int K = windows.shape[0], n = self.net.context + 1, i, k, m = self.net.m, one = 1
        cdef float unit = 1
        cdef float minus = -rates[R_]
        cdef int block
        cdef bint sampled = self.sampled
        self.sampled = False
        with nogil:
            memcpy(self.work.dP, &total[0], <Py_ssize_t> K * m * sizeof(float))
            context_backward(&self.net, &self.work, K)
            if sampled:  # R's and b's rows have had their output steps: the context rows, the rest
                for i in range(K):
                    for k in range(self.net.context):
                        if rates[R_] != 0:
                            saxpy(&m, &minus, self.work.dX + i * self.net.inputs + k * m, &one,
                                  self.net.param[R_] + <Py_ssize_t> windows[i, k] * m, &one)
                for block in range(NBLOCKS):
                    if block != R_ and block != B_OUT and trained(&self.net, block, <float> rates[block]):
                        step_block(&self.net, &self.work, block, <float> rates[block], 0, keep[block])
                    elif self.net.param[block] != NULL and keep[block] != 1:
                        scale(<int> self.net.size[block], keep[block], self.net.param[block])
            else:
                if rates[R_] != 0:
                    for i in range(K):
                        for k in range(self.net.context):
                            saxpy(&m, &unit, self.work.dX + i * self.net.inputs + k * m, &one,
                                  self.work.grad[R_] + <Py_ssize_t> windows[i, k] * m, &one)
                step_blocks(&self.net, &self.work, &rates[0], 1, &momentum[0])
                decay_blocks(&self.net, &keep[0], 1)
        return ("R",) if rates[R_] != 0 else ()
