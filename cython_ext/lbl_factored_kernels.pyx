# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""The log-bilinear family (lbl_kernels.pyx, lbl_layers.pxd) with a factored output layer
over the predicted features p in place of the softmax over b_w + r(w) . p:

    hs      p(w | context) = prod over the nodes n of w's path of sigma(+-(q_n . p + bn_n))
            (hs_output.pxd: node rows Vn and biases bn over the Huffman tree of the
            training counts: the hierarchical log-bilinear model of Mnih & Hinton 2009)
    class   p(w | context) = softmax(Vc p + bc)[c(w)]
                             * softmax over the words v of c(w) of (b_v + r(v) . p)
            (class_output.pxd: the words' output rows stay R's, as in Model 0)

Both stay exactly normalised. An update reads and steps the output rows of its targets'
paths or classes only, and the rows of R of its context words, in place and without
momentum; every other block (C, d, A, a, B, gate_bias, S; Vc and bc) steps whole, with its
momentum, as in lbl_kernels.pyx."""
import numpy as np

from libc.string cimport memset
from scipy.linalg.cython_blas cimport saxpy

from batch_driver cimport Schedule, Update, drive, schedule_of
from class_output cimport Classes, class_attach, class_backward, class_forward
from hs_output cimport Tree, tree_attach, tree_backward, tree_forward
from lbl_layers cimport (B_OUT, BC_, BN_, LBL, NBLOCKS, R_, VC_, VN_, Buffers, bias_of, buffers_alloc, buffers_free,
                         check_batch, context_backward, decay_blocks, lbl_attach, predict, step_block, trained)

from nplmtk._ext.lbl_kernels import BLOCKS


cdef struct Output:
    Tree tree        # tree.nodes > 0: the hierarchical softmax; else the classes
    Classes classes
    float *Z         # tree: dL/dz at the nodes of each window's path; classes: the class probabilities
    float *U         # classes: the probabilities within each window's target class
    int *targets     # the batch's targets, contiguous


cdef inline bint stepped_in_place(int block) noexcept nogil:
    """The blocks an update touches a few rows of: R (context and class words), b, Vn, bn."""
    return block == R_ or block == B_OUT or block == VN_ or block == BN_


cdef double output_forward(LBL *net, Buffers *w, Output *o, const int *rows, int K, double *logp) noexcept nogil:
    """The predicted features, then log p of each window's target: summed, and in logp[i]
    when logp is given."""
    cdef int i, n = net.context + 1
    predict(net, w, rows, K)
    for i in range(K):
        o.targets[i] = rows[i * n + net.context]
    if o.tree.nodes:
        return tree_forward(&o.tree, w.P, K, net.m, net.param[VN_], bias_of(net, BN_), o.targets, 1, o.Z, logp)
    return class_forward(&o.classes, w.P, K, net.m, net.param[VC_], bias_of(net, BC_), net.param[R_],
                         bias_of(net, B_OUT), o.targets, o.Z, o.U, logp)


cdef void output_backward(LBL *net, Buffers *w, Output *o, int K, float *rows, float rows_scale, float *biases,
                          float bias_scale) noexcept nogil:
    """From output_forward: dL/dp in w.dP (with the old rows), the class rows' gradients in
    w.grad[VC_] and w.grad[BC_], then rows_scale times the gradients of the output rows (Vn,
    or R's rows of the targets' classes) added to `rows`, bias_scale times their biases' to
    `biases` (NULL: not wanted). With rows = the parameters and -rate: SGD steps in place."""
    cdef int m = net.m
    if o.tree.nodes:
        memset(w.dP, 0, <Py_ssize_t> K * m * sizeof(float))
        tree_backward(&o.tree, w.P, K, m, net.param[VN_], o.targets, 1, o.Z, 0, NULL, NULL, w.dP)
        if rows != NULL:
            tree_backward(&o.tree, w.P, K, m, net.param[VN_], o.targets, 1, o.Z, rows_scale, rows, NULL, NULL)
        if biases != NULL:
            tree_backward(&o.tree, w.P, K, m, net.param[VN_], o.targets, 1, o.Z, bias_scale, NULL, biases, NULL)
    else:
        class_backward(&o.classes, w.P, K, m, net.param[VC_], net.param[R_], o.targets, o.Z, o.U, w.grad[VC_],
                       w.grad[BC_] if net.bias else NULL, rows_scale, rows, bias_scale, biases, w.dP)


cdef double output_step(LBL *net, Buffers *w, Output *o, const int *rows, int K, const double *rates,
                        Py_ssize_t stride, const float *momentum) noexcept nogil:
    """One update of K windows at rates[block * stride]; returns the sum of log p(target)."""
    cdef int n = net.context + 1, i, k, m = net.m, one = 1, block
    cdef int row_block = VN_ if o.tree.nodes else R_, bias_block = BN_ if o.tree.nodes else B_OUT
    cdef float rate, minus = -rates[R_ * stride]
    cdef double total = output_forward(net, w, o, rows, K, NULL)
    output_backward(net, w, o, K,
                    net.param[row_block] if trained(net, row_block, rates[row_block * stride]) else NULL,
                    -rates[row_block * stride],
                    net.param[bias_block] if trained(net, bias_block, rates[bias_block * stride]) else NULL,
                    -rates[bias_block * stride])
    context_backward(net, w, K)
    if trained(net, R_, rates[R_ * stride]):
        for i in range(K):
            for k in range(net.context):
                saxpy(&m, &minus, w.dX + i * net.inputs + k * m, &one,
                      net.param[R_] + <Py_ssize_t> rows[i * n + k] * m, &one)
    for block in range(NBLOCKS):
        rate = <float> rates[block * stride]
        if not stepped_in_place(block) and trained(net, block, rate):
            step_block(net, w, block, rate, momentum[block], 1)
    return total


cdef struct Run:
    LBL *net
    Buffers *work
    Output *out
    const float *momentum


cdef double output_update(void *run, Update *up) noexcept nogil:
    """The batch driver's step (batch_driver.pxd)."""
    cdef Run *r = <Run *> run
    return output_step(r.net, r.work, r.out, up.rows, up.K, up.rates, up.stride, r.momentum)


cdef void output_decay(void *run, Update *up) noexcept nogil:
    decay_blocks((<Run *> run).net, up.dense_keep, up.stride)


cdef class FactoredLBLNetwork:
    """A log-bilinear network of Model 0-3 with the hierarchical softmax (`paths`: the
    tree's, from nplmtk.neural.huffman.tree_paths; arrays Vn, bn and no b) or the
    class-factored softmax (`classes`: nplmtk.neural.word_classes.class_lists; arrays Vc,
    bc beside b), and one worker's buffers for batches of up to `capacity` windows. Threads
    share the arrays lock-free. `carried`: momentum's state, "velocity.NAME" per block."""
    cdef LBL net
    cdef Buffers work
    cdef Output out
    cdef object keep_alive
    cdef public dict carried

    def __init__(self, params, int capacity, bint bias=True, paths=None, classes=None):
        cdef int[::1] targets
        cdef float[::1] Z, U
        if (paths is None) == (classes is None) or ("Vn" in params) != (paths is not None) \
                or ("Vc" in params) != (classes is not None) or ("b" in params) != (classes is not None):
            raise ValueError("a factored log-bilinear network has a tree's Vn and bn, or classes' Vc, bc and b")
        self.carried = {}
        lbl_attach(&self.net, params, BLOCKS, bias, self.carried)
        buffers_alloc(&self.work, &self.net, capacity, 0)
        if paths is not None:
            tree_attach(&self.out.tree, paths, self.net.vocab)
            width, within = self.out.tree.longest, 0
        else:
            class_attach(&self.out.classes, classes, self.net.vocab)
            if params["Vc"].shape[0] != self.out.classes.count:
                raise ValueError("class rows that do not match the classes")
            width, within = self.out.classes.count, self.out.classes.largest
        buffers = [np.zeros(capacity * width, np.float32), np.zeros(max(capacity * within, 1), np.float32),
                   np.zeros(capacity, np.int32)]
        Z, U, targets = buffers
        self.out.Z, self.out.U, self.out.targets = &Z[0], &U[0], &targets[0]
        self.keep_alive = [params, paths, classes] + buffers

    def __dealloc__(self):
        buffers_free(&self.work)

    def train(self, const int[:, ::1] windows, steps):
        """As LBLNetwork.train, exact only; the blocks stepped in place (R, b, Vn, bn) take
        no momentum. Returns (sum of log p(target), updates, 0)."""
        cdef Py_ssize_t count = windows.shape[0]
        cdef int block
        cdef double total
        cdef Schedule s
        cdef Run run
        schedule_of(&s, steps, count, self.work.capacity, NBLOCKS)
        check_batch(&self.net, self.work.capacity, windows, s.batch)
        if steps.sampling is not None:
            raise ValueError("the factored output layers train with their exact gradient")
        for block in range(NBLOCKS):
            if stepped_in_place(block) and s.momentum[block] != 0 and self.net.param[block] != NULL:
                raise ValueError(f"no momentum for {BLOCKS[block]}: the factored output layer steps it in place")
        if count == 0:
            return 0.0, 0, 0.0
        run.net, run.work, run.out, run.momentum = &self.net, &self.work, &self.out, s.momentum
        with nogil:
            total = drive(&run, output_update, output_decay, &s, &windows[0, 0], count, windows.shape[1])
        return total, s.updates, 0.0

    def logprobs(self, const int[:, ::1] windows, double[::1] out):
        """Natural-log probability of each window's target (exactly normalised)."""
        cdef Py_ssize_t start = 0, count = windows.shape[0]
        cdef int K
        check_batch(&self.net, self.work.capacity, windows, 1)
        with nogil:
            while start < count:
                K = <int> min(<Py_ssize_t> self.work.capacity, count - start)
                output_forward(&self.net, &self.work, &self.out, &windows[start, 0], K, &out[start])
                start += K

    def gradients(self, const int[:, ::1] windows, grads):
        """Sum over the windows of the gradients of -log p(target) into `grads` (arrays
        shaped like the parameters); returns the sum of log p. For tests."""
        cdef int K = windows.shape[0], n = self.net.context + 1, i, k, m = self.net.m, one = 1, block
        cdef int row_block = VN_ if self.out.tree.nodes else R_, bias_block = BN_ if self.out.tree.nodes else B_OUT
        cdef float unit = 1
        cdef double total
        check_batch(&self.net, self.work.capacity, windows, K)
        for block in range(NBLOCKS):
            if stepped_in_place(block) or block == BC_:
                memset(self.work.grad[block], 0, max(self.net.size[block], 1) * sizeof(float))
        total = output_forward(&self.net, &self.work, &self.out, &windows[0, 0], K, NULL)
        output_backward(&self.net, &self.work, &self.out, K, self.work.grad[row_block], 1,
                        self.work.grad[bias_block] if bias_of(&self.net, bias_block) != NULL else NULL, 1)
        context_backward(&self.net, &self.work, K)
        for i in range(K):
            for k in range(self.net.context):
                saxpy(&m, &unit, self.work.dX + i * self.net.inputs + k * m, &one,
                      self.work.grad[R_] + <Py_ssize_t> windows[i, k] * m, &one)
        for block, name in enumerate(BLOCKS):
            if name in grads:
                grads[name][...] = np.asarray(<float[:self.net.size[block]]> self.work.grad[block]).reshape(
                    grads[name].shape)
        return total
