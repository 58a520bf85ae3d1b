# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""The energy network (Bengio et al. 2003 sec. 5.1; Bengio & Senecal 2003 sec. 1.3): scores,
the exact gradient over the vocabulary, and importance-sampling SGD (Algorithm 3). The
trainer hands each chunk its schedule: the rate, the decay of the rows touched, and the
bulk decay of U, H and W after each update."""
import numpy as np
cimport numpy as cnp
from cython.parallel cimport prange, threadid
from libc.string cimport memcpy, memset
from scipy.linalg.cython_blas cimport saxpy

from batch_driver cimport Schedule, Update, drive, schedule_of
from kernel_common cimport (axpy_row, dot, exp_shifted, gemm, log_normaliser, rows_dot, scale,
                           tanh_rows)
from nplmtk._ext.sampling_kernels cimport (Sampling, draw_samples, importance_weights, merge_duplicates,
                                           sampling_free, sampling_start)

cnp.import_array()

cdef extern from *:
    """
    /* The exact gradient's pass over every word's row, dL/dy_j = y[j] given: G_j =
       dL/d(pre-activation) = y_j U_j (1 - A_j^2), from U_j before any step, added to G
       (gU given: a sum over windows) or written (gU NULL), their sum added to dc; U's share
       added to gU or, with gU NULL, stepped in place: U_j <- keep U_j + alpha y_j A_j, each
       U_j read before it is written. Cloned as tanh_rows is: built without -march, this
       loop over |V| x h ran 4-wide. */
    __attribute__((target_clones("avx512f", "avx2", "default"), unused))
    static void nplm_energy_rows_backward(int rows, int h, const float *restrict y, const float *restrict A,
                                          float *restrict U, float *restrict gU, float keep, float alpha,
                                          float *restrict G, float *restrict dc) {
        for (int j = 0; j < rows; j++) {
            const float g = y[j], *a = A + (long) j * h;
            float *u = U + (long) j * h, *grow = G + (long) j * h;
            if (gU) {
                float *gu = gU + (long) j * h;
                for (int k = 0; k < h; k++) {
                    float pre = g * u[k] * (1 - a[k] * a[k]);
                    grow[k] += pre;
                    dc[k] += pre;
                    gu[k] += g * a[k];
                }
            } else {
                for (int k = 0; k < h; k++) {
                    float old = u[k], pre = g * old * (1 - a[k] * a[k]);
                    grow[k] = pre;
                    dc[k] += pre;
                    u[k] = keep * old + alpha * g * a[k];
                }
            }
        }
    }
    """
    void rows_backward "nplm_energy_rows_backward"(int rows, int h, const float *y, const float *A, float *U,
                                                    float *gU, float keep, float alpha, float *G,
                                                    float *dc) noexcept nogil


# Rows of a block: its pre-activations, activations and dL/d(pre-activation) (128 x h floats)
# stay in cache from one stage to the next, and OpenBLAS takes a block's products (M N K
# within 10^6) with its small-matrix kernels, which skip packing (256 rows ran 1.1x slower, 512 1.3x).
DEF SCORE_ROWS = 128


cdef struct Run:
    void *owner       # the EnergyNetwork
    float *x          # the context's features, c, dL/dc, dL/dx
    float *c
    float *dc
    float *dx
    Sampling *sp      # importance sampling: its draws, buffers of N + 1 rows, the ESS summed
    float *Z
    float *old_U
    float *old_W
    float *act
    float *dpre
    float *dZ
    float *y
    float *dH
    double ess


cdef class EnergyNetwork:
    """Score y_w = -E(w, h) = b_w + U_w . tanh(d + H z_w) (+ W_w . z_w with direct
    connections), z_w = (C(w), C(w_t-1), ..., C(w_t-n+1)): the next word's own feature
    vector enters the hidden layer. H's first m columns see C(w) (H_target), the rest the
    context (H_context). Normalised over the vocabulary when scoring; trained with the
    exact gradient (`gradients`, `train`: for small vocabularies) or by importance
    sampling."""
    cdef int V, m, n, width, context_width, h, direct, bias
    cdef float *C
    cdef float *H
    cdef float *d
    cdef float *U
    cdef float *b
    cdef float *W
    cdef object keep_alive
    cdef object buffers
    cdef float *P  # V x h: H_target C(w) for every word
    cdef float *A  # V x h: activations of every word's hidden layer
    cdef float *Y  # V scores, then dL/dy
    cdef float *G  # V x h: dL/d(pre-activation) of every word (summed over a call's windows by `gradients`)
    cdef float *dC  # V x m (direct connections): an exact step's W share of dL/dC
    cdef float *Ht  # m x h: H_target transposed, for an exact step
    cdef int parts  # threads sharing an exact step's blocks
    cdef float *Pb  # per part, SCORE_ROWS x h: a block's pre-activations, then dL/d(pre-activation)
    cdef float *Tp  # per part, h x m: its blocks' share of dL/dH_target in an exact step
    cdef float *dcp  # per part, h: its blocks' share of dc in an exact step
    cdef object batch_arrays  # train at batch > 1: (name, array, gradient, all gradients) of each trained array

    def __init__(self, params, int order, bint bias=True, int parts=1):
        cdef float[:, ::1] C = params["C"], H = params["H"], U = params["U"], W
        cdef float[::1] b = params["b"], d = params["d"]
        self.keep_alive = params
        self.V, self.m = C.shape[0], C.shape[1]
        self.n = order
        self.width = order * self.m
        self.context_width = (order - 1) * self.m
        self.h = H.shape[0]
        if H.shape[1] != self.width or U.shape[1] != self.h:
            raise ValueError("energy network arrays of inconsistent shapes")
        self.bias = bias
        self.C, self.H, self.U = &C[0, 0], &H[0, 0], &U[0, 0]
        self.b, self.d = &b[0], &d[0]
        self.direct = "W" in params
        if self.direct:
            W = params["W"]
            self.W = &W[0, 0]
        cdef float[:, ::1] P = np.empty((self.V, self.h), dtype=np.float32)
        cdef float[:, ::1] A = np.empty((self.V, self.h), dtype=np.float32)
        cdef float[:, ::1] G = np.empty((self.V, self.h), dtype=np.float32)
        cdef float[::1] Y = np.empty(self.V, dtype=np.float32)
        cdef float[:, ::1] dC = np.empty((self.V if self.direct else 1, self.m), dtype=np.float32)
        if parts < 1:
            raise ValueError("parts must be 1 or more")
        self.parts = parts
        cdef float[:, ::1] Pb = np.empty((parts * SCORE_ROWS, self.h), dtype=np.float32)
        cdef float[:, ::1] Tp = np.empty((parts * self.h, self.m), dtype=np.float32)
        cdef float[:, ::1] dcp = np.empty((parts, self.h), dtype=np.float32)
        cdef float[:, ::1] Ht = np.empty((self.m, self.h), dtype=np.float32)
        self.buffers = (P, A, G, Y, dC, Pb, Ht, Tp, dcp)
        self.Pb, self.Ht, self.Tp, self.dcp = &Pb[0, 0], &Ht[0, 0], &Tp[0, 0], &dcp[0, 0]
        self.P, self.A, self.G, self.Y, self.dC = &P[0, 0], &A[0, 0], &G[0, 0], &Y[0], &dC[0, 0]

    cdef void context_part(self, const int *window, float *x, float *c) noexcept nogil:
        """x = the context's feature vectors; c = d + H_context x."""
        cdef int k
        for k in range(self.n - 1):
            memcpy(x + k * self.m, self.C + <Py_ssize_t> window[k] * self.m, self.m * sizeof(float))
        memcpy(c, self.d, self.h * sizeof(float))
        gemm(b'N', b'T', 1, self.h, self.context_width, 1.0, x, self.context_width, self.H + self.m, self.width,
             1.0, c, self.h)

    cdef void all_scores(self, const float *c, const float *x, float *y, bint fresh) noexcept nogil:
        """y_w for every word, their activations in A, block by block: a block's
        pre-activations H_target C(w) (from P, filled by `project`, or with `fresh` computed
        for the block) and activations are still in cache for the next stage."""
        cdef int w, block
        for block in prange((self.V + SCORE_ROWS - 1) // SCORE_ROWS, num_threads=self.parts, schedule="static"):
            self.score_block(block * SCORE_ROWS, c, y, fresh, self.Pb + <Py_ssize_t> threadid() * SCORE_ROWS * self.h)
        if self.direct:
            for w in range(self.V):
                y[w] += dot(self.m, self.W + <Py_ssize_t> w * self.width, self.C + <Py_ssize_t> w * self.m)
            gemm(b'N', b'T', 1, self.V, self.context_width, 1.0, x, self.context_width, self.W + self.m, self.width,
                 1.0, y, self.V)

    cdef void score_block(self, int lo, const float *c, float *y, bint fresh, float *buffer) noexcept nogil:
        """all_scores over the rows of the block from `lo` (buffer: SCORE_ROWS x h floats of
        the thread's own)."""
        cdef int rows = min(SCORE_ROWS, self.V - lo), h = self.h
        cdef const float *pre = self.P + <Py_ssize_t> lo * h
        if fresh:
            gemm(b'N', b'N', rows, h, self.m, 1.0, self.C + <Py_ssize_t> lo * self.m, self.m, self.Ht, h,
                 0.0, buffer, h)
            pre = buffer
        tanh_rows(self.A + <Py_ssize_t> lo * h, pre, c, rows, h)
        memcpy(y + lo, self.b + lo, rows * sizeof(float))
        rows_dot(rows, h, self.U + <Py_ssize_t> lo * h, self.A + <Py_ssize_t> lo * h, h, y + lo)

    cdef void step_block(self, int lo, float alpha, float keep, float *buffer, float *T, float *dc) noexcept nogil:
        """An exact step's backward pass over the rows of the block from `lo`: U's rows
        stepped in place, dL/d(pre-activation) into `buffer`, added to dc and (through the
        block of C before its step) to T = dL/dH_target, then C's rows stepped, keep C +
        alpha G H_target. T, dc and buffer are the thread's own."""
        cdef int rows = min(SCORE_ROWS, self.V - lo), h = self.h, m = self.m
        rows_backward(rows, h, self.Y + lo, self.A + <Py_ssize_t> lo * h, self.U + <Py_ssize_t> lo * h, NULL, keep,
                      alpha, buffer, dc)
        gemm(b'T', b'N', h, m, rows, 1.0, buffer, h, self.C + <Py_ssize_t> lo * m, m, 1.0, T, m)
        gemm(b'N', b'N', rows, m, h, alpha, buffer, h, self.H, self.width, keep, self.C + <Py_ssize_t> lo * m, m)

    cdef void transpose_target(self) noexcept nogil:
        """Ht = H_target^T: OpenBLAS's small-matrix kernels take a block's C H_target^T as N x
        N, not as N x T."""
        cdef int r, k
        for r in range(self.h):
            for k in range(self.m):
                self.Ht[k * self.h + r] = self.H[r * self.width + k]

    cdef void project(self) noexcept nogil:
        gemm(b'N', b'T', self.V, self.h, self.m, 1.0, self.C, self.m, self.H, self.width, 0.0, self.P, self.h)

    cdef double forward(self, const int *window, float *x, float *c, bint fresh) noexcept nogil:
        """Every word's hidden layer (A) and dL/dy = p - 1[target] (Y) for one window
        (see all_scores for `fresh`); returns log p(target)."""
        cdef int t = window[self.n - 1]
        cdef double normaliser, logp
        self.context_part(window, x, c)
        self.all_scores(c, x, self.Y, fresh)
        normaliser = log_normaliser(self.Y, self.V)
        logp = self.Y[t] - normaliser
        exp_shifted(self.Y, self.V, <float> normaliser)
        self.Y[t] -= 1
        return logp

    cdef void backward(self, const float *x, float *dc, float *dx, float *gU, float *gb, float *gW, float *gC,
                       float alpha, float keep) noexcept nogil:
        """The output side of one window's exact gradient (after `forward`): with gU
        given, U's, b's and W's shares added to gU, gb and gW and W's share of dL/dC to gC;
        with gU NULL, U, b (gb = b, or NULL without biases) and W stepped in place (keep x
        + alpha x gradient, every value read before it is written) and W's share of dL/dC,
        times alpha, written to gC; then C stepped too, C <- keep C + alpha G H_target, and
        dL/dH_target = G^T C summed per part into Tp, block by block, each block of C taken
        before its step. Also
        G (summed, with gU given) and dc (see rows_backward) and dx = dL/dx, from the
        parameters before any step."""
        cdef const float *y = self.Y
        cdef float *row
        cdef float *out
        cdef float *outc
        cdef float g, value, c_old
        cdef int j, k, block, part, m = self.m
        memset(dc, 0, self.h * sizeof(float))
        memset(dx, 0, self.context_width * sizeof(float))
        if self.direct:
            gemm(b'N', b'N', 1, self.context_width, self.V, 1.0, y, self.V, self.W + m, self.width,
                 1.0, dx, self.context_width)
            for j in range(self.V):
                g = y[j]
                row = self.W + <Py_ssize_t> j * self.width
                out = row if gU == NULL else gW + <Py_ssize_t> j * self.width
                outc = gC + <Py_ssize_t> j * m
                for k in range(m):
                    value, c_old = row[k], self.C[<Py_ssize_t> j * m + k]
                    outc[k] = (0 if gU == NULL else outc[k]) + alpha * g * value
                    out[k] = keep * out[k] + alpha * g * c_old
                for k in range(self.context_width):
                    out[m + k] = keep * out[m + k] + alpha * g * x[k]
        if gU != NULL:
            rows_backward(self.V, self.h, y, self.A, self.U, gU, keep, alpha, self.G, dc)
        else:  # block by block (step_block), each part's sums of dc then added up (Tp's: by `step`)
            memset(self.Tp, 0, <Py_ssize_t> self.parts * self.h * m * sizeof(float))
            memset(self.dcp, 0, <Py_ssize_t> self.parts * self.h * sizeof(float))
            for block in prange((self.V + SCORE_ROWS - 1) // SCORE_ROWS, num_threads=self.parts, schedule="static"):
                part = threadid()
                self.step_block(block * SCORE_ROWS, alpha, keep, self.Pb + <Py_ssize_t> part * SCORE_ROWS * self.h,
                                self.Tp + <Py_ssize_t> part * self.h * m, self.dcp + part * self.h)
            for part in range(self.parts):
                for k in range(self.h):
                    dc[k] += self.dcp[part * self.h + k]
        if gb != NULL:
            for j in range(self.V):
                gb[j] += alpha * y[j]
        gemm(b'N', b'N', 1, self.context_width, self.h, 1.0, dc, self.h, self.H + m, self.width,
             1.0, dx, self.context_width)

    cdef void context_side(self, const int *window, const float *x, const float *dc, const float *dx,
                           float *outH, float *outd, float *outC, float alpha, float keep) noexcept nogil:
        """H_context's, d's and the context rows' of C share of one window's gradient:
        outH (H_context's columns) <- keep outH + alpha dc x^T, outd += alpha dc (outd NULL:
        none), outC's context rows += alpha dx."""
        cdef int r, k, one = 1
        cdef float *row
        for r in range(self.h):
            row = outH + <Py_ssize_t> r * self.width + self.m
            for k in range(self.context_width):
                row[k] = keep * row[k] + alpha * dc[r] * x[k]
        if outd != NULL:
            for r in range(self.h):
                outd[r] += alpha * dc[r]
        for k in range(self.n - 1):
            saxpy(&self.m, &alpha, dx + k * self.m, &one, outC + <Py_ssize_t> window[k] * self.m, &one)

    cdef double step(self, const int *window, float *x, float *c, float *dc, float *dx, float rate,
                     float keep) noexcept nogil:
        """One window's SGD step with the exact gradient, in place: weights <- keep
        weights - rate gradient, biases <- biases - rate gradient (when trained), the
        gradient taken at the parameters before the step. Nothing of size |V| x h but the
        activations A leaves the cache: a block's pre-activations are computed as its
        scores are (all_scores), and its gradients go to U, C and the parts' dL/dH_target as
        they are made (backward). Returns log p(target)."""
        cdef double logp
        cdef float alpha = -rate, gradient
        cdef int r, k, part, size = self.V * self.m, one = 1
        cdef float unit = 1
        self.transpose_target()
        logp = self.forward(window, x, c, True)
        self.backward(x, dc, dx, NULL, self.b if self.bias else NULL, NULL, self.dC, alpha, keep)
        if self.direct:
            saxpy(&size, &unit, self.dC, &one, self.C, &one)
        self.context_side(window, x, dc, dx, self.H, self.d if self.bias else NULL, self.C, alpha, keep)
        for r in range(self.h):  # H_target's step, its gradient the parts' sums
            for k in range(self.m):
                gradient = 0
                for part in range(self.parts):
                    gradient = gradient + self.Tp[(part * self.h + r) * self.m + k]
                self.H[r * self.width + k] = keep * self.H[r * self.width + k] + alpha * gradient
        return logp

    def logprobs(self, const int[:, ::1] windows, double[::1] out):
        """Natural-log probability of each window's target, normalised over the vocabulary."""
        cdef Py_ssize_t i
        cdef float[::1] x = np.empty(max(self.context_width, 1), dtype=np.float32)
        cdef float[::1] c = np.empty(self.h, dtype=np.float32)
        cdef float *y = self.Y
        if windows.shape[1] != self.n:
            raise ValueError("windows of the wrong order")
        with nogil:
            self.project()
            for i in range(windows.shape[0]):
                self.context_part(&windows[i, 0], &x[0], &c[0])
                self.all_scores(&c[0], &x[0], y, False)
                out[i] = y[windows[i, self.n - 1]] - log_normaliser(y, self.V)

    def gradients(self, const int[:, ::1] windows, grads):
        """Sum over the windows of the exact gradient of -log p(target) (every word's
        energy), into arrays shaped like the parameters; returns the sum of log p. Every
        word's dL/d(pre-activation) is summed over the windows (G), so C and H_target get
        their share in two products per call, not two per window."""
        cdef float[:, ::1] gC = grads["C"], gH = grads["H"], gU = grads["U"], gW
        cdef float[::1] gb = grads["b"], gd = grads["d"]
        cdef float[::1] x = np.empty(max(self.context_width, 1), dtype=np.float32)
        cdef float[::1] c = np.empty(self.h, dtype=np.float32)
        cdef float[::1] dc = np.empty(self.h, dtype=np.float32)
        cdef float[::1] dx = np.empty(max(self.context_width, 1), dtype=np.float32)
        cdef float *gw = NULL
        cdef Py_ssize_t i
        cdef double logp = 0
        if windows.shape[1] != self.n:
            raise ValueError("windows of the wrong order")
        if self.direct:
            gW = grads["W"]
            gw = &gW[0, 0]
        for name in grads:
            grads[name][...] = 0
        with nogil:
            memset(self.G, 0, <Py_ssize_t> self.V * self.h * sizeof(float))
            self.project()
            for i in range(windows.shape[0]):
                logp += self.forward(&windows[i, 0], &x[0], &c[0], False)
                self.backward(&x[0], &dc[0], &dx[0], &gU[0, 0], &gb[0], gw, &gC[0, 0], 1, 1)
                self.context_side(&windows[i, 0], &x[0], &dc[0], &dx[0], &gH[0, 0], &gd[0], &gC[0, 0], 1, 1)
            # H_target and every word's C(w), through the summed dL/d(pre-activation)
            gemm(b'T', b'N', self.h, self.m, self.V, 1.0, self.G, self.h, self.C, self.m, 1.0, &gH[0, 0], self.width)
            gemm(b'N', b'N', self.V, self.m, self.h, 1.0, self.G, self.h, self.H, self.width, 1.0, &gC[0, 0], self.m)
        return logp

    def train(self, const int[:, ::1] windows, steps):
        """SGD over `windows` with the chunk's Steps. The exact gradient (every word's
        energy: for small vocabularies): update u steps by rates[0, u] and decays C, H, U
        and W (not the biases) by row_keep[u]; one window an update steps in place (`step`),
        a batch sums `gradients` first. With steps.sampling, importance sampling, one window
        an update (`sampled_step`), the dense weights decayed in bulk by dense_keep[0, u].
        Returns (sum of log p(target), estimated with sampling; updates done; sum of
        effective sample sizes)."""
        cdef Py_ssize_t count = windows.shape[0]
        cdef Schedule s
        cdef Run run
        cdef Sampling sp
        cdef double total
        sampled = steps.sampling is not None
        if sampled and steps.batch != 1:
            raise ValueError("the sampled energy network trains one window per update")
        schedule_of(&s, steps, count, max(steps.batch, 1), 1)
        if windows.shape[1] != self.n:
            raise ValueError("windows of the wrong order")
        if count == 0:
            return 0.0, 0, 0.0
        arrays = [np.empty(max(self.context_width, 1), dtype=np.float32), np.empty(self.h, dtype=np.float32),
                  np.empty(self.h, dtype=np.float32), np.empty(max(self.context_width, 1), dtype=np.float32)]
        memset(&run, 0, sizeof(Run))
        run.owner = <void *> self
        run.x, run.c, run.dc, run.dx = (self._floats(arrays[0]), self._floats(arrays[1]), self._floats(arrays[2]),
                                        self._floats(arrays[3]))
        if not sampled and s.batch == 1:
            with nogil:
                total = drive(&run, exact_update, NULL, &s, &windows[0, 0], count, self.n)
            return total, s.updates, 0.0
        if not sampled:  # with the GIL: each update's gradients go through arrays of Python's
            grads = {name: np.empty_like(array) for name, array in self.keep_alive.items()}
            self.batch_arrays = [(name, array.reshape(-1), grads[name].reshape(-1), grads)
                                 for name, array in self.keep_alive.items() if self.bias or name not in ("b", "d")]
            try:
                total = drive(&run, batch_update, NULL, &s, &windows[0, 0], count, self.n)
            finally:
                self.batch_arrays = None
            return total, s.updates, 0.0
        draws = steps.sampling
        N = draws.samples
        if N < 1 or draws.proposal.vocab_size != self.V:
            raise ValueError("no samples, or a proposal of the wrong size")
        # rows 0..M-1 the distinct samples, row M the target: their C, U and W rows before
        # the step (Z, old_U, old_W), hidden layers (act), dL/d(pre-activation) (dpre), dL/dz
        arrays += [np.empty((N + 1) * size, dtype=np.float32)
                   for size in (self.m, self.h, self.width if self.direct else 1, self.h, self.h, self.m, 1)]
        arrays.append(np.empty(self.h * self.width, dtype=np.float32))
        run.Z, run.old_U, run.old_W, run.act = (self._floats(arrays[4]), self._floats(arrays[5]),
                                                self._floats(arrays[6]), self._floats(arrays[7]))
        run.dpre, run.dZ, run.y, run.dH = (self._floats(arrays[8]), self._floats(arrays[9]), self._floats(arrays[10]),
                                           self._floats(arrays[11]))
        memset(&sp, 0, sizeof(Sampling))
        run.sp = &sp
        try:
            sampling_start(&sp, draws.proposal, N, 1, 1, 1, draws.seed)
            with nogil:
                total = drive(&run, sampled_update, sampled_decay, &s, &windows[0, 0], count, self.n)
        finally:
            sampling_free(&sp)
        return total, s.updates, run.ess

    cdef float *_floats(self, array) except NULL:
        cdef float[::1] flat = array
        return &flat[0]

    cdef void decay_dense(self, float keep) noexcept nogil:
        """The bulk weight decay of U, H and W."""
        scale(self.V * self.h, keep, self.U)
        scale(self.h * self.width, keep, self.H)
        if self.direct:
            scale(self.V * self.width, keep, self.W)

    cdef double batch_step(self, const int *rows, int K, float rate, float keep) except? -1:
        """An update of K windows (with the GIL): their gradients summed, then the step."""
        cdef float step = -rate
        cdef int size, one = 1
        cdef float[::1] flat, grad
        total = self.gradients(<int[:K, :self.n]> <int *> rows, self.batch_arrays[0][3])
        for name, flat, grad, _ in self.batch_arrays:
            size = flat.shape[0]
            if name not in ("b", "d") and keep != 1:
                scale(size, keep, &flat[0])
            saxpy(&size, &step, &grad[0], &one, &flat[0], &one)
        return total

    cdef double sampled_step(self, Run *b, const int *window, float step, float keep) noexcept nogil:
        """Importance-sampling SGD (Bengio & Senecal 2003, Algorithm 3) on one window: the
        target's energy pushed down, the sampled words' pulled up with weights r_j / sum r,
        each touching its own rows of C, U, W and b. The distinct samples and the target
        are the rows of one matrix, so their hidden layers are one product and their
        gradients two. Returns the estimated log p(target); adds the effective sample size
        to b.ess."""
        cdef Sampling *sp = b.sp
        cdef int j, k, t, word, M, rows, lo, block, one = 1
        cdef int h = self.h, m = self.m, W_width = self.width if self.direct else 1
        cdef double total
        cdef float value, gamma, y_target
        cdef float *z = b.Z
        cdef float *u_rows = b.old_U
        cdef float *old_W = b.old_W
        cdef float *a = b.act
        cdef float *g = b.dpre
        cdef float *dz = b.dZ
        cdef float *row
        cdef float *dz_row
        t = window[self.n - 1]
        self.context_part(window, b.x, b.c)
        draw_samples(sp, window, 1, self.n)
        merge_duplicates(sp)
        M = sp.distinct
        rows = M + 1
        for j in range(rows):
            word = t if j == M else sp.words[j]
            memcpy(z + j * m, self.C + <Py_ssize_t> word * m, m * sizeof(float))
            memcpy(u_rows + j * h, self.U + <Py_ssize_t> word * h, h * sizeof(float))
            if self.direct:
                memcpy(old_W + j * W_width, self.W + <Py_ssize_t> word * self.width, self.width * sizeof(float))
        # every candidate's hidden layer: tanh(c + H_target C(w)), one product (into g,
        # free until the gradients)
        self.transpose_target()
        for lo in range(0, rows, SCORE_ROWS):  # blocks: OpenBLAS's small-matrix kernels
            block = min(SCORE_ROWS, rows - lo)
            gemm(b'N', b'N', block, h, m, 1.0, z + lo * m, m, self.Ht, h, 0.0, g + lo * h, h)
        tanh_rows(a, g, b.c, rows, h)
        for j in range(rows):
            word = t if j == M else sp.words[j]
            value = self.b[word]
            if self.direct:
                value = value + dot(m, old_W + j * W_width, z + j * m)
                value = value + dot(self.context_width, old_W + j * W_width + m, b.x)
            b.y[j] = value
        rows_dot(rows, h, u_rows, a, h, b.y)
        y_target = b.y[M]
        total = y_target - importance_weights(sp, b.y, &b.ess)  # y[:M] become r_j / sum r
        b.y[M] = -1
        # g = dL/d(pre-activation) from the rows' old U (alpha 0: their copies stay), dc its sum
        memset(b.dc, 0, h * sizeof(float))
        rows_backward(rows, h, b.y, a, u_rows, NULL, 1, 0, g, b.dc)
        # dL/dz_w = dpre H_target (+ gamma W_w), dL/dH = dpre^T z
        for lo in range(0, rows, SCORE_ROWS):
            block = min(SCORE_ROWS, rows - lo)
            gemm(b'N', b'N', block, m, h, 1.0, g + lo * h, h, self.H, self.width, 0.0, dz + lo * m, m)
            gemm(b'T', b'N', h, m, block, 1.0, g + lo * h, h, z + lo * m, m, 0.0 if lo == 0 else 1.0,
                 b.dH, self.width)
        gemm(b'T', b'N', h, self.context_width, 1, 1.0, b.dc, h, b.x,
             self.context_width, 0.0, b.dH + m, self.width)
        gemm(b'N', b'N', 1, self.context_width, h, 1.0, b.dc, h, self.H + m,
             self.width, 0.0, b.dx, self.context_width)
        for j in range(rows):
            word = t if j == M else sp.words[j]
            gamma = b.y[j]
            if self.direct:
                axpy_row(m, gamma, old_W + j * W_width, dz + j * m)
                axpy_row(self.context_width, gamma, old_W + j * W_width + m, b.dx)
                row = self.W + <Py_ssize_t> word * self.width
                axpy_row(m, -step * gamma, z + j * m, row)
                axpy_row(self.context_width, -step * gamma, b.x, row + m)
            axpy_row(h, -step * gamma, a + j * h, self.U + <Py_ssize_t> word * h)
            if self.bias:
                self.b[word] -= step * gamma
            row = self.C + <Py_ssize_t> word * m
            dz_row = dz + j * m
            for k in range(m):  # the row's decay, then its step
                row[k] = row[k] * keep - step * dz_row[k]
        value = -step
        k = self.h * self.width
        saxpy(&k, &value, b.dH, &one, self.H, &one)
        if self.bias:
            saxpy(&self.h, &value, b.dc, &one, self.d, &one)
        for k in range(self.n - 1):
            word = window[k]
            if keep != 1:
                scale(self.m, keep, self.C + <Py_ssize_t> word * self.m)
            saxpy(&self.m, &value, b.dx + k * self.m, &one, self.C + <Py_ssize_t> word * self.m, &one)
        return total

    def next_logprobs(self, const int[::1] context, double[::1] out):
        """Natural-log probabilities of every word after `context` (the n-1 previous ids)."""
        cdef int j
        cdef double normaliser
        cdef float[::1] x = np.empty(max(self.context_width, 1), dtype=np.float32)
        cdef float[::1] c = np.empty(self.h, dtype=np.float32)
        if context.shape[0] != self.n - 1 or out.shape[0] != self.V:
            raise ValueError("a context of the wrong order, or an output of the wrong size")
        with nogil:
            self.project()
            self.context_part(&context[0], &x[0], &c[0])
            self.all_scores(&c[0], &x[0], self.Y, False)
            normaliser = log_normaliser(self.Y, self.V)
            for j in range(self.V):
                out[j] = self.Y[j] - normaliser


# -- the steps the batch driver (batch_driver.pxd) calls for each update ----------------

cdef double exact_update(void *run, Update *up) noexcept nogil:
    cdef Run *r = <Run *> run
    return (<EnergyNetwork> r.owner).step(up.rows, r.x, r.c, r.dc, r.dx, up.rate, up.row_keep)


cdef double batch_update(void *run, Update *up) noexcept nogil:
    with gil:
        return (<EnergyNetwork> (<Run *> run).owner).batch_step(up.rows, up.K, up.rate, up.row_keep)


cdef double sampled_update(void *run, Update *up) noexcept nogil:
    cdef Run *r = <Run *> run
    return (<EnergyNetwork> r.owner).sampled_step(r, up.rows, up.rate, up.row_keep)


cdef void sampled_decay(void *run, Update *up) noexcept nogil:
    (<EnergyNetwork> (<Run *> run).owner).decay_dense(up.dense_keep[0])
