# An output layer over N rows of any network's top states (width wide), inline: the full
# softmax (scores by sgemm), Mikolov's class-factored softmax (class_output.pxd) or the
# hierarchical softmax (hs_output.pxd), forward (log p of each row's target) and back (the
# layer's gradients and dL/d(top)). recurrent_output.pxi is the recurrent kernel's own
# (with its direct connections, over its Rnn struct); this one is the Transformer's
# (transformer_network.pyx), over a struct of its own. The full softmax's passes are shared
# among `parts` threads (transformer_parts.pxd: each on a single-threaded BLAS); the class
# and hierarchical ones run on one.
from cython.parallel cimport prange
from libc.math cimport log
from libc.string cimport memcpy, memset

from class_output cimport Classes, class_backward, class_distribution, class_forward, class_pairs
from hs_output cimport Tree, tree_backward, tree_distribution, tree_forward
from kernel_common cimport gemm, softmax_row, softmax_terms
from transformer_parts cimport part_start, split_gemm, split_gradient_transposed


cdef struct Output:
    int vocab, width
    const float *V      # |V| x width (the input embeddings when tied)
    const float *d      # |V| biases
    Classes classes     # classes.count 0: not class-factored
    const float *Vc     # classes x width, and their biases
    const float *bc
    Tree tree           # tree.nodes 0: not hierarchical
    const float *Vn     # (|V| - 1) x width, and their biases
    const float *bn
    float *Y            # N x |V| (full), N x classes (class): the scores, then probabilities
    float *U            # N x largest class: the probabilities within each target's class
    float *G            # N x longest path: dL/dz at each node (hs)
    float *gV           # the gradients (NULL: not trained); gV adds to the tied embeddings' gradient
    float *gVt          # width x |V|: gV's product transposed (full softmax, trained, not direct)
    bint direct         # gV's product as it is (split_gradient_transposed)
    float *gd
    float *gd_parts     # parts x |V|: each thread's sums of the probabilities of its rows (full, gd: required)
    float *gVc
    float *gbc
    float *gVn
    float *gbn
    int parts           # threads sharing the full softmax's passes
    double *sums        # `parts` partial sums of log p


cdef inline double output_forward(Output *o, const float *top, Py_ssize_t N, const int *targets, double *logp,
                                  bint probabilities=True) noexcept nogil:
    """The sum of log p of targets[r] (those >= 0) after the rows of top (N x width), each
    also in logp[r] when logp is given; keeps what output_backward needs, unless not
    `probabilities` (scoring: the full softmax's scores are then left as they are)."""
    cdef int p
    cdef Py_ssize_t lo, hi
    cdef double total = 0
    if o.tree.nodes:
        return tree_forward(&o.tree, top, N, o.width, o.Vn, o.bn, targets, 1, o.G, logp)
    if o.classes.count:
        return class_forward(&o.classes, top, N, o.width, o.Vc, o.bc, o.V, o.d, targets, o.Y, o.U, logp)
    if o.parts == 1:
        return full_softmax_rows(o, top, 0, N, targets, logp, probabilities, 0)
    for p in prange(o.parts, num_threads=o.parts, schedule="static", chunksize=1, nogil=True):
        lo, hi = part_start(N, o.parts, p), part_start(N, o.parts, p + 1)
        o.sums[p] = full_softmax_rows(o, top, lo, hi, targets, logp, probabilities, p)
    for p in range(o.parts):
        total += o.sums[p]
    return total


cdef inline double full_softmax_rows(Output *o, const float *top, Py_ssize_t lo, Py_ssize_t hi, const int *targets,
                                     double *logp, bint probabilities, int part) noexcept nogil:
    """output_forward's full softmax of rows lo .. hi - 1 (o.Y's rows the same), by thread
    `part`, which sums the probabilities of its rows into its o.gd_parts row (when there is
    one): the bias's gradient, from rows just written, not from all of o.Y read again."""
    cdef int V = o.vocab, target, j
    cdef Py_ssize_t r
    cdef double total = 0, value
    cdef float terms
    cdef float *sums = o.gd_parts + <Py_ssize_t> part * V if o.gd_parts != NULL and probabilities else NULL
    if sums != NULL:
        memset(sums, 0, V * sizeof(float))
    for r in range(lo, hi):
        if o.d != NULL:
            memcpy(o.Y + r * V, o.d, V * sizeof(float))
        else:
            memset(o.Y + r * V, 0, V * sizeof(float))
    gemm(b'N', b'T', <int> (hi - lo), V, o.width, 1.0, top + lo * o.width, o.width, o.V, o.width, 1.0, o.Y + lo * V,
         V)
    for r in range(lo, hi):
        target = targets[r]
        if target >= 0:
            if probabilities:
                value = softmax_row(o.Y + r * V, V, target)
                if sums != NULL:
                    for j in range(V):
                        sums[j] += o.Y[r * V + j]
            else:  # softmax_row's log p to the bit, without its pass writing the probabilities
                terms = softmax_terms(o.Y + r * V, V)
                value = log(<double> o.Y[r * V + target] / terms)
            total += value
            if logp != NULL:
                logp[r] = value
    return total


cdef inline void output_backward(Output *o, const float *top, Py_ssize_t N, const int *targets,
                                 float *dTop) noexcept nogil:
    """From output_forward's probabilities: the gradients of -sum log p (gV added to, the
    others written) and dL/d(top) in dTop (N x width, written)."""
    cdef int V = o.vocab, width = o.width
    if o.tree.nodes:
        memset(o.gVn, 0, <Py_ssize_t> (V - 1) * width * sizeof(float))
        if o.gbn != NULL:
            memset(o.gbn, 0, (V - 1) * sizeof(float))
        memset(dTop, 0, N * width * sizeof(float))
        tree_backward(&o.tree, top, N, width, o.Vn, targets, 1, o.G, 1.0, o.gVn, o.gbn, dTop)
        return
    if o.gd != NULL:
        memset(o.gd, 0, V * sizeof(float))
    if o.classes.count:
        class_backward(&o.classes, top, N, width, o.Vc, o.V, targets, o.Y, o.U, o.gVc, o.gbc, 1.0, o.gV, 1.0, o.gd,
                       dTop)
        return
    full_softmax_backward(o, top, N, targets, dTop)


cdef inline void full_softmax_backward(Output *o, const float *top, Py_ssize_t N, const int *targets,
                                       float *dTop) noexcept nogil:
    """output_backward's full softmax (o.gd zeroed): dL/dy = p - 1[target] (no loss on
    padding), then gV, gd (from the o.gd_parts the forward pass summed: a full softmax with a
    bias always has them) and dTop from it, the passes shared among o.parts threads."""
    cdef int V = o.vocab, width = o.width, p, c
    cdef Py_ssize_t r, lo, hi
    for p in prange(o.parts, num_threads=o.parts, schedule="static", chunksize=1, nogil=True):
        lo, hi = part_start(N, o.parts, p), part_start(N, o.parts, p + 1)
        for r in range(lo, hi):
            if targets[r] >= 0:
                o.Y[r * V + targets[r]] -= 1
            else:
                memset(o.Y + r * V, 0, V * sizeof(float))
    split_gradient_transposed(o.parts, V, width, <int> N, o.Y, V, top, width, 1.0, o.gV, width, o.gVt, o.direct)
    if o.gd != NULL:  # the probabilities' sums of the forward pass, less the targets
        for p in range(o.parts):
            for c in range(V):
                o.gd[c] += o.gd_parts[<Py_ssize_t> p * V + c]
        for r in range(N):
            if targets[r] >= 0:
                o.gd[targets[r]] -= 1
    split_gemm(o.parts, NULL, b'N', b'N', <int> N, width, V, 1.0, o.Y, V, o.V, width, 0.0, dTop, width)


cdef inline void output_distribution(Output *o, const float *h, double *out) noexcept nogil:
    """log p of every word after the top state h (o.Y and o.U: work space of a row)."""
    cdef int j
    if o.tree.nodes:
        tree_distribution(&o.tree, h, o.width, o.Vn, o.bn, o.vocab, o.Y, out)
    elif o.classes.count:
        class_distribution(&o.classes, h, o.width, o.Vc, o.bc, o.V, o.d, o.Y, o.U, out)
    else:
        if o.d != NULL:
            memcpy(o.Y, o.d, o.vocab * sizeof(float))
        else:
            memset(o.Y, 0, o.vocab * sizeof(float))
        gemm(b'N', b'T', 1, o.vocab, o.width, 1.0, h, o.width, o.V, o.width, 1.0, o.Y, o.vocab)
        softmax_row(o.Y, o.vocab, 0)
        for j in range(o.vocab):
            out[j] = log(<double> o.Y[j])
