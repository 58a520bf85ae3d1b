# The log-bilinear family's layers (Zhang, Mnih & Hinton; lbl_kernels.pyx has the equations),
# inline, for its kernels over the full softmax (lbl_kernels.pyx) and over the factored output
# layers (lbl_factored_kernels.pyx): the network's blocks and buffers, the predicted features
# p of a batch of windows and the back-propagation from dL/dp to every block but the output's,
# and the per-block steps with momentum and bulk weight decay.
from libc.stdlib cimport calloc, free, malloc
from libc.string cimport memcpy, memset
from scipy.linalg.cython_blas cimport saxpy

from elementwise cimport column_sums, logistic
from kernel_common cimport dot_row, gemm, scale

# the blocks, in the order of lbl_kernels.BLOCKS; the last four are the factored output
# layers' (the tree's node rows and biases, the class rows and biases)
cdef enum:
    R_, C_, D_, B_OUT, A_, A_BIAS, B_GATE, GATE_BIAS, S_, VN_, BN_, VC_, BC_, NBLOCKS


cdef struct LBL:
    int vocab, context, m, inputs, hidden, bias, gated, hidden_term
    float *param[NBLOCKS]       # NULL: the model has no such block
    float *velocity[NBLOCKS]    # momentum's running step of each block
    Py_ssize_t size[NBLOCKS]


cdef struct Buffers:
    int capacity
    float *X    # K x inputs: the context's feature vectors f
    float *Xg   # K x inputs: f with each word's features times its gate s_i (gated models)
    float *H    # K x hidden: h
    float *G    # K x context: the gates s
    float *P    # K x m: the predicted feature vectors p
    float *Y    # K x the output's width: scores, probabilities, then dL/dy
    float *dP   # K x m
    float *dX   # K x inputs
    float *dH   # K x hidden
    float *dG   # K x context
    float *grad[NBLOCKS]


cdef inline void broadcast(int K, int width, const float *row, float *rows) noexcept nogil:
    cdef int i
    for i in range(K):
        memcpy(rows + <Py_ssize_t> i * width, row, width * sizeof(float))


cdef inline void predict(LBL *net, Buffers *w, const int *rows, int K) noexcept nogil:
    """X, H, G, Xg and the predicted features P of K windows."""
    cdef int n = net.context + 1, i, k, j, m = net.m
    cdef const float *inputs = w.X
    for i in range(K):
        for k in range(net.context):
            memcpy(w.X + i * net.inputs + k * m, net.param[R_] + <Py_ssize_t> rows[i * n + k] * m, m * sizeof(float))
    broadcast(K, m, net.param[D_], w.P)
    if net.hidden:
        broadcast(K, net.hidden, net.param[A_BIAS], w.H)
        gemm(b'N', b'N', K, net.hidden, net.inputs, 1.0, w.X, net.inputs, net.param[A_], net.hidden, 1.0, w.H,
             net.hidden)
        for j in range(K * net.hidden):
            w.H[j] = logistic(w.H[j])
    if net.gated:
        broadcast(K, net.context, net.param[GATE_BIAS], w.G)
        gemm(b'N', b'N', K, net.context, net.hidden, 1.0, w.H, net.hidden, net.param[B_GATE], net.context, 1.0,
             w.G, net.context)
        for i in range(K):
            for k in range(net.context):
                w.G[i * net.context + k] = 2 * logistic(w.G[i * net.context + k])
                for j in range(m):
                    w.Xg[i * net.inputs + k * m + j] = w.G[i * net.context + k] * w.X[i * net.inputs + k * m + j]
        inputs = w.Xg
    gemm(b'N', b'N', K, m, net.inputs, 1.0, inputs, net.inputs, net.param[C_], m, 1.0, w.P, m)
    if net.hidden_term:
        gemm(b'N', b'N', K, m, net.hidden, 1.0, w.H, net.hidden, net.param[S_], m, 1.0, w.P, m)


cdef inline void context_backward(LBL *net, Buffers *w, int K) noexcept nogil:
    """From dL/dp (dP): the gradients of d, C, S, B, gate_bias, A and a, and dL/df in dX."""
    cdef int i, k, j, m = net.m
    cdef float s, beta = 0
    column_sums(w.dP, K, m, w.grad[D_])
    gemm(b'T', b'N', net.inputs, m, K, 1.0, w.Xg if net.gated else w.X, net.inputs, w.dP, m, 0.0, w.grad[C_], m)
    gemm(b'N', b'T', K, net.inputs, m, 1.0, w.dP, m, net.param[C_], m, 0.0, w.dX, net.inputs)
    if not net.hidden:
        return
    if net.hidden_term:
        gemm(b'T', b'N', net.hidden, m, K, 1.0, w.H, net.hidden, w.dP, m, 0.0, w.grad[S_], m)
        gemm(b'N', b'T', K, net.hidden, m, 1.0, w.dP, m, net.param[S_], m, 0.0, w.dH, net.hidden)
        beta = 1
    if net.gated:  # dX holds dL/d(s_i r_i): the gates' share, then the features' own
        for i in range(K):
            for k in range(net.context):
                s = w.G[i * net.context + k]
                w.dG[i * net.context + k] = dot_row(m, w.dX + i * net.inputs + k * m,
                                                    w.X + i * net.inputs + k * m) * s * (1 - s / 2)
                for j in range(m):
                    w.dX[i * net.inputs + k * m + j] *= s
        gemm(b'T', b'N', net.hidden, net.context, K, 1.0, w.H, net.hidden, w.dG, net.context, 0.0, w.grad[B_GATE],
             net.context)
        column_sums(w.dG, K, net.context, w.grad[GATE_BIAS])
        gemm(b'N', b'T', K, net.hidden, net.context, 1.0, w.dG, net.context, net.param[B_GATE], net.context, beta,
             w.dH, net.hidden)
    for j in range(K * net.hidden):
        w.dH[j] *= w.H[j] * (1 - w.H[j])
    gemm(b'T', b'N', net.inputs, net.hidden, K, 1.0, w.X, net.inputs, w.dH, net.hidden, 0.0, w.grad[A_], net.hidden)
    column_sums(w.dH, K, net.hidden, w.grad[A_BIAS])
    gemm(b'N', b'T', K, net.inputs, net.hidden, 1.0, w.dH, net.hidden, net.param[A_], net.hidden, 1.0, w.dX,
         net.inputs)


cdef inline void step_block(LBL *net, Buffers *w, int block, float rate, float momentum, float keep) noexcept nogil:
    """One block down its gradient: with momentum, v = momentum v - rate g and the block
    moves by v; then the bulk weight decay `keep` (1: none)."""
    cdef int one = 1, size = <int> net.size[block]
    cdef float minus = -rate, unit = 1
    if momentum != 0:
        scale(size, momentum, net.velocity[block])
        saxpy(&size, &minus, w.grad[block], &one, net.velocity[block], &one)
        saxpy(&size, &unit, net.velocity[block], &one, net.param[block], &one)
    else:
        saxpy(&size, &minus, w.grad[block], &one, net.param[block], &one)
    if keep != 1:
        scale(size, keep, net.param[block])


cdef inline bint is_bias(int block) noexcept nogil:
    return block == D_ or block == B_OUT or block == BN_ or block == BC_


cdef inline bint trained(LBL *net, int block, float rate) noexcept nogil:
    return net.param[block] != NULL and rate != 0 and (net.bias or not is_bias(block))


cdef inline float *bias_of(LBL *net, int block) noexcept nogil:
    """An output bias block, or NULL in a network without biases (they stay zero)."""
    return net.param[block] if net.bias else NULL


cdef inline void step_blocks(LBL *net, Buffers *w, const double *rates, Py_ssize_t stride,
                             const float *momentum) noexcept nogil:
    """Every trained block one step (rates[block * stride], with momentum[block])."""
    cdef int block
    for block in range(NBLOCKS):
        if trained(net, block, <float> rates[block * stride]):
            step_block(net, w, block, <float> rates[block * stride], momentum[block], 1)


cdef inline void decay_blocks(LBL *net, const float *keep, Py_ssize_t stride) noexcept nogil:
    """Every block's bulk weight decay keep[block * stride] (1: none)."""
    cdef int block
    for block in range(NBLOCKS):
        if net.param[block] != NULL and keep[block * stride] != 1:
            scale(<int> net.size[block], keep[block * stride], net.param[block])


cdef inline int lbl_attach(LBL *net, params, tuple names, bint bias, dict carried) except -1:
    """Point net at the arrays of `params` (float32, C-contiguous, owned by the caller; the
    block names `names` in enum order, those absent NULL), each with a zero velocity in
    `carried` ("velocity.NAME"), after checking their shapes against one another once:
    the loops do not check them."""
    cdef float[:, ::1] R = params["R"]
    cdef int V = R.shape[0], m = R.shape[1], block, context
    cdef float[::1] flat
    if params["C"].ndim != 3 or params["C"].shape[1:] != (m, m):
        raise ValueError("log-bilinear arrays of inconsistent shapes")
    context = params["C"].shape[0]
    hidden = params["A"].shape[1] if "A" in params else 0
    classes = params["Vc"].shape[0] if "Vc" in params else 0
    expected = {"R": (V, m), "C": (context, m, m), "d": (m,), "b": (V,), "A": (context * m, hidden),
                "a": (hidden,), "B": (hidden, context), "gate_bias": (context,), "S": (hidden, m),
                "Vn": (V - 1, m), "bn": (V - 1,), "Vc": (classes, m), "bc": (classes,)}
    consistent = (("B" in params) == ("gate_bias" in params) and ("A" in params) == ("B" in params or "S" in params)
                  and ("Vn" in params) == ("bn" in params) and ("Vc" in params) == ("bc" in params))
    for name, shape in expected.items():  # a loop: an inline function in a .pxd takes no generator
        consistent = consistent and (name not in params or params[name].shape == shape)
    if not consistent:
        raise ValueError("log-bilinear arrays of inconsistent shapes")
    net.vocab, net.m, net.context, net.hidden = V, m, context, hidden
    net.inputs = context * m
    net.bias = bias
    net.gated, net.hidden_term = "B" in params, "S" in params
    for block, name in enumerate(names):
        net.param[block] = NULL
        net.size[block] = 0
        if name in params:
            if params[name].dtype.char != "f" or not params[name].flags.c_contiguous:
                raise ValueError(f"log-bilinear array {name}: not C-contiguous float32")
            flat = params[name].reshape(-1)
            net.param[block] = &flat[0]
            net.size[block] = flat.shape[0]
            velocity = params[name].reshape(-1).copy()
            velocity[...] = 0
            carried[f"velocity.{name}"] = flat = velocity
            net.velocity[block] = &flat[0]
    return 0


cdef inline int buffers_alloc(Buffers *w, LBL *net, int capacity, Py_ssize_t scores) except -1:
    """One worker's buffers for batches of up to `capacity` windows, with `scores` floats
    of Y per window."""
    cdef Py_ssize_t K = capacity
    cdef int block
    if capacity < 1:
        raise ValueError("work buffers for no window")
    w.capacity = capacity
    w.X = <float *> malloc(K * net.inputs * sizeof(float))
    w.Xg = <float *> malloc(K * net.inputs * sizeof(float))
    w.H = <float *> malloc(K * max(net.hidden, 1) * sizeof(float))
    w.G = <float *> malloc(K * net.context * sizeof(float))
    w.P = <float *> malloc(K * net.m * sizeof(float))
    w.Y = <float *> malloc(K * max(scores, 1) * sizeof(float))
    w.dP = <float *> malloc(K * net.m * sizeof(float))
    w.dX = <float *> malloc(K * net.inputs * sizeof(float))
    w.dH = <float *> malloc(K * max(net.hidden, 1) * sizeof(float))
    w.dG = <float *> malloc(K * net.context * sizeof(float))
    ok = (w.X != NULL and w.Xg != NULL and w.H != NULL and w.G != NULL and w.P != NULL and w.Y != NULL
          and w.dP != NULL and w.dX != NULL and w.dH != NULL and w.dG != NULL)
    for block in range(NBLOCKS):
        w.grad[block] = <float *> calloc(max(net.size[block], 1), sizeof(float))
        ok = ok and w.grad[block] != NULL
    if not ok:
        raise MemoryError()
    return 0


cdef inline void buffers_free(Buffers *w) noexcept nogil:
    cdef int block
    free(w.X)
    free(w.Xg)
    free(w.H)
    free(w.G)
    free(w.P)
    free(w.Y)
    free(w.dP)
    free(w.dX)
    free(w.dH)
    free(w.dG)
    for block in range(NBLOCKS):
        free(w.grad[block])


cdef inline int check_batch(LBL *net, int capacity, windows, int batch) except -1:
    """Windows of this order; batches the buffers hold."""
    if windows.shape[1] != net.context + 1:
        raise ValueError("windows of the wrong order")
    if batch < 1 or batch > capacity:
        raise ValueError("batch below 1 or larger than the work buffers")
    return 0
