# The recurrent kernel's output layer over the top layer's output, included in rnn_kernels.pyx
# where its functions stand, its cimports there (an include, not an inline .pxd: the C, and so
# the arithmetic gcc makes of it under fast-math, stays the kernel's own, bit for bit): the
# full softmax forward (scores by sgemm, each row's softmax; the class-factored and
# hierarchical softmax's through their own pxds, the mixture of softmaxes' through
# mixture_output.pxi) and back (its gradients and dL/d(top); `backward` picks the layer's).


cdef double output_forward(Rnn *net, const float *top, const float *X, Py_ssize_t N, const int *targets,
                           double *logp) noexcept nogil:
    """The output layer on N rows (at most capacity x streams) of the top layer's output
    and of input features X: the sum of log p of targets[r] (those >= 0), each also in
    logp[r] when logp is given."""
    cdef int m = net.m, V = net.vocab, target, width = net.layer[net.layers - 1].hidden
    cdef Py_ssize_t r
    cdef double total = 0, value
    if net.tree.nodes:
        return tree_forward(&net.tree, top, N, width, net.Vn, net.bn, targets, 1, net.G, logp)
    if net.classes.count:
        return class_forward(&net.classes, top, N, width, net.Vc, net.bc, net.V, net.d, targets, net.Y, net.U,
                             logp)
    for r in range(N):
        if net.d != NULL:
            memcpy(net.Y + r * V, net.d, V * sizeof(float))
        else:
            memset(net.Y + r * V, 0, V * sizeof(float))
    gemm(b'N', b'T', <int> N, V, width, 1.0, top, width, net.V, width, 1.0, net.Y, V)
    if net.direct:
        gemm(b'N', b'T', <int> N, V, m, 1.0, X, m, net.M, m, 1.0, net.Y, V)
    for r in range(N):
        target = targets[r]
        if target >= 0:
            value = softmax_row(net.Y + r * V, V, target)
            total += value
            if logp != NULL:
                logp[r] = value
    return total


cdef void full_backward(Rnn *net, Py_ssize_t N, int width) noexcept nogil:
    """The full softmax's gradients from its probabilities in Y: gV (or gC), gd, gM,
    dL/d(top) in dOut, and dL/dx of the direct connections in dX."""
    cdef int m = net.m, V = net.vocab
    cdef Py_ssize_t r
    for r in range(N):  # dL/dy = p - 1[target]; no loss on padding
        if net.targets[r] >= 0:
            net.Y[r * V + net.targets[r]] -= 1
        else:
            memset(net.Y + r * V, 0, V * sizeof(float))
    gemm(b'T', b'N', V, width, <int> N, 1.0, net.Y, V, net.layer[net.layers - 1].out, width, 0.0, net.gV, width)
    if net.gd != NULL:
        column_sums(net.Y, N, V, net.gd)
    if net.direct:
        gemm(b'T', b'N', V, m, <int> N, 1.0, net.Y, V, net.X, m, 0.0, net.gM, m)
        gemm(b'N', b'N', <int> N, m, V, 1.0, net.Y, V, net.M, m, 0.0, net.dX, m)
    else:
        memset(net.dX, 0, N * m * sizeof(float))
    gemm(b'N', b'N', <int> N, width, V, 1.0, net.Y, V, net.V, width, 0.0, net.dOut, width)


cdef int backward(Rnn *net, int T) noexcept nogil:
    """The gradients of -sum log p of the segment just run forward (with train set), in
    the g* arrays; gC only in the rows of the words that occur (listed in net.touched,
    their count returned) unless tied."""
    cdef int m = net.m, V = net.vocab, width = net.layer[net.layers - 1].hidden
    cdef Py_ssize_t N = <Py_ssize_t> T * net.streams
    if net.mos.count:
        mixture_backward(net, N, width)
    elif net.tree.nodes:  # no direct connections with these two (refused by the model)
        memset(net.gVn, 0, <Py_ssize_t> (V - 1) * width * sizeof(float))
        if net.gbn != NULL:
            memset(net.gbn, 0, (V - 1) * sizeof(float))
        memset(net.dOut, 0, N * width * sizeof(float))
        tree_backward(&net.tree, net.layer[net.layers - 1].out, N, width, net.Vn, net.targets, 1, net.G, 1.0,
                      net.gVn, net.gbn, net.dOut)
        memset(net.dX, 0, N * m * sizeof(float))
    elif net.classes.count:
        memset(net.gV, 0, <Py_ssize_t> V * width * sizeof(float))
        if net.gd != NULL:
            memset(net.gd, 0, V * sizeof(float))
        class_backward(&net.classes, net.layer[net.layers - 1].out, N, width, net.Vc, net.V, net.targets, net.Y,
                       net.U, net.gVc, net.gbc, 1.0, net.gV, 1.0, net.gd, net.dOut)
        memset(net.dX, 0, N * m * sizeof(float))
    else:
        full_backward(net, N, width)
    return inputs_backward(net, T)
