# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""The hot loops of the Bengio et al. (2003) network, eq. 1 (its layers are in
feedforward.pxd): SGD over a chunk of windows without the GIL, with the exact softmax
gradient or the importance-sampling estimate of Bengio & Senecal (2003), Algorithm 3.
Several threads may train the same parameter arrays at once: lock-free asynchronous
updates (sec. 3.1); a thread sees another's dense updates when that one flushes them (at
most DEFER windows late). Or, one window an update, several threads share each window,
each on its own part of the output rows (Network's `parts`): sequential SGD. The trainer
hands each chunk its schedule (the rate, the decay of the rows of C, and the bulk decay
of the dense weights after each update): no policy here."""
import numpy as np
cimport numpy as cnp
from libc.stdlib cimport calloc, free
from libc.string cimport memset
from cython.parallel cimport parallel, threadid
from openmp cimport omp_get_num_threads

from batch_driver cimport Schedule, Update, drive, schedule_of
from class_output cimport Classes, class_attach, class_backward, class_forward
from hs_output cimport Tree, tree_attach, tree_backward, tree_forward
from kernel_common cimport axpy_row, gemm, scale
from nplmtk._ext.sampling_kernels cimport (Sampling, draw_samples, importance_weights, merge_duplicates,
                                           sampling_free, sampling_start)
from sampled_output cimport sampled_backward, sampled_rows_gradient, sampled_scores, target_gradient, target_score
from feedforward cimport (DEFER, MAX_PARTS, Exchange, Net, Work, activation_slope, backward, decay_dense,
                          exchange_alloc, exchange_free, flush, forward, hidden_layer, input_backward, net_attach,
                          window_backward, window_probabilities, window_scores, window_step, work_alloc, work_free)

cdef extern from *:
    """
    static void nplm_barrier(void) {
        #pragma omp barrier
    }
    """
    void barrier "nplm_barrier"() noexcept nogil

cnp.import_array()

# -- the importance-sampling step (Bengio & Senecal 2003, Algorithm 3) -------------------

cdef double sampled_step(Net *net, Work *w, Sampling *sp, const int *rows, int K, float rate, float keep_c,
                         double *ess) noexcept nogil:
    """One update with the importance-sampling gradient (sampled_output.pxd): the target's
    row pulled up, the N sampled rows pushed down with weights r_j / sum r, r_j = exp(y_j) /
    Q(w_j) (the biased, self-normalised estimator). Only those rows of U, W and b are read
    or written. Returns the sum of the estimated log p(target) (with Z estimated from the
    samples); adds the effective sample sizes (sum r)^2 / sum r^2 to `ess`."""
    cdef int n = net.context + 1
    cdef float *U = net.U if net.hidden > 0 else NULL
    cdef float *W = net.W if net.direct else NULL
    cdef double estimate
    hidden_layer(net, w, rows, K)
    draw_samples(sp, rows, K, n)
    merge_duplicates(sp)
    if K == 1:
        return sampled_window(net, w, sp, rows, rate, keep_c, ess)
    estimate = sampled_scores(sp, K, rows + net.context, n, w.A, net.hidden, U, w.X, net.inputs, W, net.b, ess)
    sampled_backward(sp, K, rows + net.context, n, net.hidden, U, net.inputs, W, w.dA, w.dX)
    sampled_rows_gradient(sp, K, rows + net.context, n, w.A, net.hidden, w.X, net.inputs, -rate, U, W,
                          net.b if net.bias else NULL)
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


cdef double sampled_window(Net *net, Work *w, Sampling *sp, const int *rows, float rate, float keep_c,
                           double *ess) noexcept nogil:
    """sampled_step for one window, on the rows in place: each distinct sampled row is read
    for its score, then read for dL/da and moved in one pass (no gathering, no BLAS calls:
    at this size their overhead is the cost)."""
    cdef int j, word, t = rows[net.context], M = sp.distinct, h = net.hidden, I = net.inputs
    cdef float *g = sp.weights
    cdef float *U = net.U if h > 0 else NULL
    cdef float *W = net.W if net.direct else NULL
    cdef double estimate
    for j in range(M):
        g[j] = target_score(sp.words[j], w.A, h, U, w.X, I, W, net.b)
    estimate = target_score(t, w.A, h, U, w.X, I, W, net.b) - importance_weights(sp, g, ess)
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
    target_gradient(sp, t, w.A, h, w.X, I, g, -rate, U, W, net.b if net.bias else NULL)  # the SGD step
    input_backward(net, w, rows, 1, rate, keep_c)
    return estimate



# -- the steps the batch driver (batch_driver.pxd) calls for each update ---------------

cdef struct Run:
    Net *net
    Work *work
    Exchange *exchange
    Sampling *sp
    double ess        # the sampled steps' effective sample sizes
    Net *nets         # train_parts: the parts' networks and buffers, this thread's first and stride
    Work *works
    const int *starts
    int first, stride, mine
    double *logp      # each part's share of the sum of log p(target)


cdef double exact_update(void *run, Update *up) noexcept nogil:
    """A batch's step (after flushing what the single-window steps deferred), or one
    window's; the deferred updates flushed every DEFER windows and at the chunk's end."""
    cdef Run *r = <Run *> run
    cdef double logp
    if up.K > 1:
        flush(r.net, r.work, True)
        logp = forward(r.net, r.work, up.rows, up.K, NULL)
        backward(r.net, r.work, up.rows, up.K, up.rate, up.row_keep)
    else:
        logp = window_step(r.net, r.work, r.exchange, up.rows, up.rate, up.row_keep)
    if r.work.pending == DEFER or up.last:
        flush(r.net, r.work, True)
    return logp


cdef void exact_decay(void *run, Update *up) noexcept nogil:
    cdef Run *r = <Run *> run
    flush(r.net, r.work, True)
    decay_dense(r.net, up.dense_keep[0], True)


cdef double sampled_update(void *run, Update *up) noexcept nogil:
    cdef Run *r = <Run *> run
    return sampled_step(r.net, r.work, r.sp, up.rows, up.K, up.rate, up.row_keep, &r.ess)


cdef void sampled_decay(void *run, Update *up) noexcept nogil:
    decay_dense((<Run *> run).net, up.dense_keep[0], True)


cdef double parts_update(void *run, Update *up) noexcept nogil:
    """One thread of a team training on every window the parts first, first + stride, ...
    of the output rows (nets[q]'s, from row starts[q]; one part a thread unless OpenMP gave
    fewer): the phases of window_step over its parts, with a barrier after each (phase 3
    of part 0 steps the rows of C, its flush the shared H and d). Adds each part's share
    of log p(target) to logp[q]."""
    cdef Run *r = <Run *> run
    cdef int q, k
    for k in range(r.mine):
        q = r.first + k * r.stride
        window_scores(&r.nets[q], &r.works[q], up.rows, r.exchange, q)
    barrier()
    for k in range(r.mine):
        q = r.first + k * r.stride
        r.logp[q] += window_probabilities(&r.nets[q], &r.works[q], up.rows, r.exchange, q, r.starts[q])
    barrier()
    for k in range(r.mine):
        q = r.first + k * r.stride
        window_backward(&r.nets[q], &r.works[q], up.rows, r.exchange, up.rate, up.row_keep, q == 0)
    barrier()
    if r.works[r.first].pending == DEFER or up.last or up.dense_keep[0] != 1:  # the same in every part
        for k in range(r.mine):
            q = r.first + k * r.stride
            flush(&r.nets[q], &r.works[q], q == 0)
        barrier()
    return 0


cdef void parts_decay(void *run, Update *up) noexcept nogil:
    cdef Run *r = <Run *> run
    cdef int q, k
    for k in range(r.mine):
        q = r.first + k * r.stride
        decay_dense(&r.nets[q], up.dense_keep[0], q == 0)
    barrier()


cdef void train_parts(Run run, int first, int stride, const Schedule *s, const int *windows, Py_ssize_t count,
                      int n) noexcept nogil:
    """One thread of the team of Network._train_parts: the driver over its parts."""
    run.first, run.stride = first, stride
    run.mine = (run.exchange.parts - first + stride - 1) // stride
    drive(&run, parts_update, parts_decay, s, windows, count, n)


cdef class Network:
    """Raw views of a network's parameter arrays (float32, C-contiguous, owned by Python)
    and one thread's work buffers for batches of up to `capacity` windows. With `parts` >
    1 (and capacity 1), training runs that many OpenMP threads on each window, each on its
    own share of the output rows: sequential SGD, its work split."""
    cdef Net net
    cdef Work work
    cdef Exchange exchange
    cdef int parts
    cdef int *part_starts
    cdef Net *part_nets
    cdef Work *part_works
    cdef object keep_alive

    def __init__(self, params, int context, int activation, int capacity, bint bias=True, int parts=1):
        cdef int q, V = params["b"].shape[0]
        self.keep_alive = params
        net_attach(&self.net, params, context, activation, bias, 0, V)
        work_alloc(&self.work, &self.net, capacity)
        exchange_alloc(&self.exchange, &self.net, parts)
        self.parts = parts
        if parts > 1:
            if capacity != 1:
                raise ValueError("threads sharing the output rows train one window an update: capacity 1")
            self.part_starts = <int *> calloc(parts, sizeof(int))
            self.part_nets = <Net *> calloc(parts, sizeof(Net))
            self.part_works = <Work *> calloc(parts, sizeof(Work))
            if not (self.part_starts and self.part_nets and self.part_works):
                raise MemoryError()
            for q in range(parts):
                self.part_starts[q] = <int> (<long> V * q // parts)
                net_attach(&self.part_nets[q], params, context, activation, bias, self.part_starts[q],
                           <int> (<long> V * (q + 1) // parts))
                work_alloc(&self.part_works[q], &self.part_nets[q], 1)

    def __dealloc__(self):
        cdef int q
        work_free(&self.work)
        exchange_free(&self.exchange)
        if self.part_works != NULL:
            for q in range(self.parts):
                work_free(&self.part_works[q])
        free(self.part_works)
        free(self.part_nets)
        free(self.part_starts)

    def train(self, const int[:, ::1] windows, steps):
        """SGD over `windows` with the chunk's Steps (nplmtk/neural/optimizer.py): update u
        steps by rates[0, u], decays the rows of C it touches by row_keep[u], then (when
        dense_keep[0, u] != 1) the dense weights U, H, W in bulk; with steps.sampling, the
        importance-sampling gradient of its N words drawn from its proposal
        (nplmtk.neural.sampling.Proposal), shared by the windows of a batch. Returns (sum of
        log p(target), estimated with sampling; updates done; sum of effective sample sizes)."""
        cdef Py_ssize_t count = windows.shape[0]
        cdef Schedule s
        cdef Run run
        cdef Sampling sp
        cdef double total
        schedule_of(&s, steps, count, self.work.capacity, 1)
        if count == 0:
            return 0.0, 0, 0.0
        if windows.shape[1] != self.net.context + 1:
            raise ValueError("windows of the wrong order")
        memset(&run, 0, sizeof(Run))
        run.net, run.work, run.exchange = &self.net, &self.work, &self.exchange
        if steps.sampling is None:
            if self.parts > 1:
                return self._train_parts(windows, &s), s.updates, 0.0
            with nogil:
                total = drive(&run, exact_update, exact_decay, &s, &windows[0, 0], count, windows.shape[1])
            return total, s.updates, 0.0
        draws = steps.sampling
        if draws.samples < 1 or draws.proposal.vocab_size != self.net.vocab:
            raise ValueError("no samples, or a proposal of the wrong size")
        memset(&sp, 0, sizeof(Sampling))
        run.sp = &sp
        try:
            sampling_start(&sp, draws.proposal, draws.samples, s.batch, self.net.hidden, self.net.inputs, draws.seed)
            with nogil:
                total = drive(&run, sampled_update, sampled_decay, &s, &windows[0, 0], count, windows.shape[1])
        finally:
            sampling_free(&sp)
        return total, s.updates, run.ess

    cdef double _train_parts(self, const int[:, ::1] windows, const Schedule *s) except? -1:
        """train at batch 1 with self.parts threads sharing each window (train_parts); a
        team smaller than asked for (OMP_THREAD_LIMIT) takes several parts a thread."""
        cdef double logp[MAX_PARTS]
        cdef int thread, n = windows.shape[1]
        cdef Run run
        for thread in range(self.parts):
            logp[thread] = 0
        memset(&run, 0, sizeof(Run))
        run.exchange, run.nets, run.works, run.starts, run.logp = (&self.exchange, self.part_nets, self.part_works,
                                                                   self.part_starts, logp)
        with nogil, parallel(num_threads=self.parts):
            thread = threadid()
            train_parts(run, thread, omp_get_num_threads(), s, &windows[0, 0], windows.shape[0], n)
        return sum(logp[thread] for thread in range(self.parts))

    def logprobs(self, const int[:, ::1] windows, double[::1] out):
        """Natural-log probability of each window's target (exact softmax)."""
        cdef Py_ssize_t start, count = windows.shape[0]
        cdef int K
        with nogil:
            start = 0
            while start < count:
                K = <int> min(<Py_ssize_t> self.work.capacity, count - start)
                forward(&self.net, &self.work, &windows[start, 0], K, &out[start])
                start += K

    def gradients(self, const int[:, ::1] windows, grads):
        """Sum over the windows of the gradients of -log p(target), written into `grads`
        (arrays shaped like the parameters); returns the sum of log p. For tests."""
        cdef int K = windows.shape[0], n = self.net.context + 1, i, j
        cdef double total
        cdef float[:, ::1] gU, gW
        cdef float[::1] gb = grads["b"]
        if K > self.work.capacity:
            raise ValueError("more windows than the work buffers hold")
        total = forward(&self.net, &self.work, &windows[0, 0], K, NULL)
        for i in range(K):
            self.work.Y[i * self.net.vocab + windows[i, n - 1]] -= 1
        for j in range(self.net.vocab):
            gb[j] = 0
            for i in range(K):
                gb[j] += self.work.Y[i * self.net.vocab + j]
        memset(self.work.dX, 0, K * self.net.inputs * sizeof(float))
        if self.net.hidden > 0:
            gU = grads["U"]
            gemm(b'N', b'N', K, self.net.hidden, self.net.vocab, 1.0, self.work.Y, self.net.vocab,
                 self.net.U, self.net.hidden, 0.0, self.work.dA, self.net.hidden)
            gemm(b'T', b'N', self.net.vocab, self.net.hidden, K, 1.0, self.work.Y, self.net.vocab,
                 self.work.A, self.net.hidden, 0.0, &gU[0, 0], self.net.hidden)
        if self.net.direct:
            gW = grads["W"]
            gemm(b'N', b'N', K, self.net.inputs, self.net.vocab, 1.0, self.work.Y, self.net.vocab,
                 self.net.W, self.net.inputs, 1.0, self.work.dX, self.net.inputs)
            gemm(b'T', b'N', self.net.vocab, self.net.inputs, K, 1.0, self.work.Y, self.net.vocab,
                 self.work.X, self.net.inputs, 0.0, &gW[0, 0], self.net.inputs)
        input_gradients(&self.net, &self.work, windows, grads)
        return total


cdef input_gradients(Net *net, Work *w, const int[:, ::1] windows, grads):
    """From dL/d(hidden output) in dA (before the slope) and the direct connections' share
    of dL/dx in dX: the gradients of H and d and the rows of C, into `grads`. For tests."""
    cdef int K = windows.shape[0], i, k, j
    cdef float[:, ::1] gC = grads["C"], gH
    cdef float[::1] gd
    if net.hidden > 0:
        gH, gd = grads["H"], grads["d"]
        activation_slope(w.dA, w.A, K * net.hidden, net.activation)
        gemm(b'N', b'N', K, net.inputs, net.hidden, 1.0, w.dA, net.hidden, net.H, net.inputs, 1.0, w.dX, net.inputs)
        gemm(b'T', b'N', net.hidden, net.inputs, K, 1.0, w.dA, net.hidden, w.X, net.inputs, 0.0, &gH[0, 0],
             net.inputs)
        for j in range(net.hidden):
            gd[j] = 0
            for i in range(K):
                gd[j] += w.dA[i * net.hidden + j]
    gC[:, :] = 0
    for i in range(K):
        for k in range(net.context):
            for j in range(net.m):
                gC[windows[i, k], j] += w.dX[i * net.inputs + k * net.m + j]


# -- the factored output layers over the hidden layer: the hierarchical softmax (output "hs",
#    hs_output.pxd) or the class-factored softmax (output "class", class_output.pxd) -------

cdef struct Factored:
    Tree tree         # tree.nodes > 0: the hierarchical softmax; else the classes
    Classes classes
    float *rows       # the output rows: the tree's nodes Vn, or the words' U (|V| x h)
    float *bias       # bn, or b; NULL without biases
    int count         # rows
    float *Vc         # the class rows (K x h) and biases (NULL without), their gradient
    float *bc
    float *gVc
    float *gbc
    float *G          # tree: dL/dz at each node of a row's path; classes: the class probabilities
    float *P          # classes: the probabilities within each row's target class
    int *targets      # the batch's targets, contiguous


cdef inline double factored_forward(Factored *f, Net *net, Work *w, const int *rows, int K,
                                    double *logp) noexcept nogil:
    """The hidden layer, then log p of each window's target: summed, and in logp if given."""
    cdef int i, n = net.context + 1
    hidden_layer(net, w, rows, K)
    for i in range(K):
        f.targets[i] = rows[i * n + net.context]
    if f.tree.nodes:
        return tree_forward(&f.tree, w.A, K, net.hidden, f.rows, f.bias, f.targets, 1, f.G, logp)
    return class_forward(&f.classes, w.A, K, net.hidden, f.Vc, f.bc, f.rows, f.bias, f.targets, f.G, f.P, logp)


cdef inline void factored_backward(Factored *f, Net *net, Work *w, int K, float scale, float *grows, float *gbias,
                                   float *gVc, float *gbc) noexcept nogil:
    """From factored_forward: dL/da in w.dA (written, read with the old rows), then scale
    times the gradients of the output rows and biases added to grows and gbias (with
    grows = f.rows and scale = -rate: the SGD step in place), and the class rows' gradient
    written to gVc and gbc."""
    cdef int h = net.hidden
    if f.tree.nodes:
        memset(w.dA, 0, <Py_ssize_t> K * h * sizeof(float))
        tree_backward(&f.tree, w.A, K, h, f.rows, f.targets, 1, f.G, 0, NULL, NULL, w.dA)
        tree_backward(&f.tree, w.A, K, h, f.rows, f.targets, 1, f.G, scale, grows, gbias, NULL)
    else:
        class_backward(&f.classes, w.A, K, h, f.Vc, f.rows, f.targets, f.G, f.P, gVc, gbc, scale, grows, scale,
                       gbias, w.dA)


cdef double factored_step(Factored *f, Net *net, Work *w, const int *rows, int K, float rate,
                          float keep_c) noexcept nogil:
    """One SGD update over K windows; returns the sum of log p."""
    cdef double total = factored_forward(f, net, w, rows, K, NULL)
    factored_backward(f, net, w, K, -rate, f.rows, f.bias, f.gVc, f.gbc)
    if not f.tree.nodes:
        axpy_row(f.classes.count * net.hidden, -rate, f.gVc, f.Vc)
        if f.bc != NULL:
            axpy_row(f.classes.count, -rate, f.gbc, f.bc)
    memset(w.dX, 0, <Py_ssize_t> K * net.inputs * sizeof(float))
    input_backward(net, w, rows, K, rate, keep_c)
    return total


cdef struct FactoredRun:
    Factored *f
    Net *net
    Work *work


cdef double factored_update(void *run, Update *up) noexcept nogil:
    cdef FactoredRun *r = <FactoredRun *> run
    return factored_step(r.f, r.net, r.work, up.rows, up.K, up.rate, up.row_keep)


cdef void factored_decay(void *run, Update *up) noexcept nogil:
    cdef FactoredRun *r = <FactoredRun *> run
    cdef int h = r.net.hidden
    cdef float keep = up.dense_keep[0]
    scale(h * r.net.inputs, keep, r.net.H)
    scale(r.f.count * h, keep, r.f.rows)
    if not r.f.tree.nodes:
        scale(r.f.classes.count * h, keep, r.f.Vc)


cdef class FactoredNetwork:
    """The network of eq. 1 with a factored output layer over its hidden layer in place of
    b + U a (no direct connections): the hierarchical softmax (`paths`: the tree's, from
    nplmtk.neural.huffman.tree_paths; arrays Vn, bn) or the class-factored softmax
    (`classes`: the lists of nplmtk.neural.word_classes.class_lists; arrays U, b, Vc, bc),
    with one thread's work buffers for batches of up to `capacity` windows. An update
    reads and steps the rows of its targets' paths or classes only, so threads share the
    arrays lock-free as Network's do."""
    cdef Net net
    cdef Work work
    cdef Factored f
    cdef object keep_alive

    def __init__(self, params, int context, int activation, int capacity, bint bias=True, paths=None, classes=None):
        cdef int V = params["C"].shape[0], h
        net_attach(&self.net, params, context, activation, bias, 0, V)
        h = self.net.hidden
        buffers = [params, paths, classes]
        self.f.tree.nodes = 0
        if paths is not None:
            tree_attach(&self.f.tree, paths, V)
            rows, biases, self.f.count = params["Vn"], params["bn"], V - 1
            work = capacity * self.f.tree.longest
        else:
            class_attach(&self.f.classes, classes, V)
            rows, biases, self.f.count = params["U"], params["b"], V
            if params["Vc"].shape != (self.f.classes.count, h) or params["bc"].shape != (self.f.classes.count,):
                raise ValueError("class arrays of the wrong shape")
            self.f.Vc, self.f.bc = self._floats(params["Vc"], buffers), self._floats(params["bc"], buffers)
            self.f.gVc = self._floats(np.zeros(self.f.classes.count * h, np.float32), buffers)
            self.f.gbc = self._floats(np.zeros(self.f.classes.count, np.float32), buffers)
            self.f.P = self._floats(np.zeros(capacity * self.f.classes.largest, np.float32), buffers)
            work = capacity * self.f.classes.count
        if h == 0 or rows.shape != (self.f.count, h) or biases.shape != (self.f.count,):
            raise ValueError("output arrays of the wrong shape, or no hidden layer")
        self.f.rows, self.f.bias = self._floats(rows, buffers), self._floats(biases, buffers)
        if not bias:  # the biases stay zero
            self.f.bias = self.f.bc = NULL
        self.f.G = self._floats(np.zeros(work, np.float32), buffers)
        targets = np.zeros(capacity, np.int32)
        cdef int[::1] view = targets
        self.f.targets = &view[0]
        self.keep_alive = buffers + [targets]
        work_alloc(&self.work, &self.net, capacity)

    cdef float *_floats(self, array, list buffers) except NULL:
        cdef float[::1] flat = array.reshape(-1)
        buffers.append(array)
        return &flat[0]

    def __dealloc__(self):
        work_free(&self.work)

    def train(self, const int[:, ::1] windows, steps):
        """As Network.train, exact only: SGD over `windows` with the Steps' rates and
        decays (the dense weights: H, the output rows and the class rows)."""
        cdef Py_ssize_t count = windows.shape[0]
        cdef Schedule s
        cdef FactoredRun run
        cdef double total
        schedule_of(&s, steps, count, self.work.capacity, 1)
        run.f, run.net, run.work = &self.f, &self.net, &self.work
        if steps.sampling is not None:
            raise ValueError("the factored output layers train with their exact gradient")
        if count and windows.shape[1] != self.net.context + 1:
            raise ValueError("windows of the wrong order")
        if count == 0:
            return 0.0, 0, 0.0
        with nogil:
            total = drive(&run, factored_update, factored_decay, &s, &windows[0, 0], count, windows.shape[1])
        return total, s.updates, 0.0

    def logprobs(self, const int[:, ::1] windows, double[::1] out):
        """Natural-log probability of each window's target (exactly normalised)."""
        cdef Py_ssize_t start = 0, count = windows.shape[0]
        cdef int K
        with nogil:
            while start < count:
                K = <int> min(<Py_ssize_t> self.work.capacity, count - start)
                factored_forward(&self.f, &self.net, &self.work, &windows[start, 0], K, &out[start])
                start += K

    def gradients(self, const int[:, ::1] windows, grads):
        """As Network.gradients, for every array of the network. For tests."""
        cdef int K = windows.shape[0]
        cdef double total
        cdef bint tree = self.f.tree.nodes > 0
        names = ("Vn", "bn") if tree else ("U", "b", "Vc", "bc")
        for name in names:
            grads[name][...] = 0
        cdef float *g[4]
        for i, name in enumerate(names):
            g[i] = self._floats(grads[name], [])
        if K > self.work.capacity:
            raise ValueError("more windows than the work buffers hold")
        total = factored_forward(&self.f, &self.net, &self.work, &windows[0, 0], K, NULL)
        factored_backward(&self.f, &self.net, &self.work, K, 1.0, g[0], g[1] if self.f.bias != NULL else NULL,
                          NULL if tree else g[2], NULL if tree or self.f.bc == NULL else g[3])
        memset(self.work.dX, 0, K * self.net.inputs * sizeof(float))
        input_gradients(&self.net, &self.work, windows, grads)
        return total
