# The feed-forward network of Bengio et al. (2003), eq. 1, as layers over a mini-batch of
# windows, shared by the serial network (mlp_kernels) and the output blocks of the
# parameter-parallel layer (output_blocks):
#
#     y = b + W x + U act(d + H x),   x = (C(w_t-1), ..., C(w_t-n+1)),   p = softmax(y)
#
# Softmax with max-subtraction, in-place SGD steps (sparse on the rows of C that occur).
# One-window SGD makes one pass over the output rows (window_step) and defers its dense
# updates (see Work).
from libc.math cimport INFINITY, expf, log
from libc.stdlib cimport free, malloc
from libc.string cimport memcpy, memset
from scipy.linalg.cython_blas cimport saxpy

from kernel_common cimport (add_column_sums, axpy_row, dot, exp_shifted, gemm, log_softmax_at, matvec, matvec_t,
                            rational_tanh, rows_dot, rows_weighted_sum, scale, softmax_block, softmax_row)


cdef struct Net:
    int vocab, context, m, inputs, hidden, direct, activation, bias
    float *C
    float *H
    float *d
    float *U
    float *b
    float *W


cdef struct Work:
    int capacity
    float *X
    float *A
    float *Y
    float *dA
    float *dX
    # One-window SGD defers its updates of the dense parameters (b, U, W, d, H): `pending`
    # windows wait in rows 0.. of X, A, Y (holding dL/dy) and G (dL/d hidden input), with
    # their steps -rate, and are applied by sgemm every DEFER windows. Forward and backward
    # add the pending updates' effect, so the result is plain SGD, but the dense arrays are
    # written once per DEFER windows: less memory traffic, and lock-free threads no longer
    # fight over their cache lines at every window. Only the rows of C are written at once.
    int pending
    float *G
    float *steps
    float *coef
    float *coef_in
    float *xdot
    float *E          # window_step: one block's exp(y - top)


cdef enum:
    DEFER = 16  # one-window updates deferred at most this many windows
    ROWS = 256  # output rows per block of a batch's backward pass (U and the batch's dL/dy in cache)
    WINDOW_ROWS = 64  # output rows per block of window_scores (read twice while in L1)
    MAX_PARTS = 64  # threads sharing a window's output rows


cdef inline void activate(float *a, Py_ssize_t size, int kind) noexcept nogil:
    cdef Py_ssize_t i
    if kind == 0:
        for i in range(size):
            a[i] = rational_tanh(a[i])
    elif kind == 1:
        for i in range(size):
            a[i] = 1.0 / (1.0 + expf(-a[i]))
    elif kind == 2:
        for i in range(size):
            if a[i] < 0:
                a[i] = 0


cdef inline void activation_slope(float *grad, const float *a, Py_ssize_t size, int kind) noexcept nogil:
    """grad *= act'(.) expressed through the activation's output a."""
    cdef Py_ssize_t i
    if kind == 0:
        for i in range(size):
            grad[i] *= 1 - a[i] * a[i]
    elif kind == 1:
        for i in range(size):
            grad[i] *= a[i] * (1 - a[i])
    elif kind == 2:
        for i in range(size):
            if a[i] <= 0:
                grad[i] = 0

cdef inline void hidden_layer(Net *net, Work *w, const int *rows, int K) noexcept nogil:
    """Fill X (the context's feature vectors) and A (the hidden layer) from row
    `w.pending` on. Pending deferred updates count as applied."""
    cdef int n = net.context + 1, i, k, j, p = w.pending
    cdef float *X = w.X + <Py_ssize_t> p * net.inputs
    cdef float *A = w.A + <Py_ssize_t> p * net.hidden
    for i in range(K):
        for k in range(net.context):
            memcpy(X + i * net.inputs + k * net.m, net.C + <Py_ssize_t> rows[i * n + k] * net.m,
                   net.m * sizeof(float))
    for j in range(p):  # pending windows: x_j . x
        w.xdot[j] = dot(net.inputs, w.X + j * net.inputs, X)
    if net.hidden > 0:
        for i in range(K):
            memcpy(A + i * net.hidden, net.d, net.hidden * sizeof(float))
        gemm(b'N', b'T', K, net.hidden, net.inputs, 1.0, X, net.inputs, net.H, net.inputs, 1.0, A, net.hidden)
        if p > 0:  # += sum_j steps_j g_j (x_j . x + 1): the pending updates of H and d
            for j in range(p):
                w.coef_in[j] = w.steps[j] * (w.xdot[j] + net.bias)
            matvec_t(p, net.hidden, 1.0, w.G, w.coef_in, 1.0, A)
        activate(A, <Py_ssize_t> K * net.hidden, net.activation)


cdef inline void scores(Net *net, Work *w, const int *rows, int K) noexcept nogil:
    """Fill X, A and Y (the scores y, before the softmax) from row `w.pending` on.
    Pending deferred updates count as applied."""
    cdef int i, V = net.vocab, p = w.pending
    cdef float *X = w.X + <Py_ssize_t> p * net.inputs
    cdef float *A = w.A + <Py_ssize_t> p * net.hidden
    cdef float *Y = w.Y + <Py_ssize_t> p * V
    hidden_layer(net, w, rows, K)
    for i in range(K):
        memcpy(Y + <Py_ssize_t> i * V, net.b, V * sizeof(float))
    if net.hidden > 0:
        gemm(b'N', b'T', K, V, net.hidden, 1.0, A, net.hidden, net.U, net.hidden, 1.0, Y, V)
    if net.direct:
        gemm(b'N', b'T', K, V, net.inputs, 1.0, X, net.inputs, net.W, net.inputs, 1.0, Y, V)
    pending_scores(net, w, A, Y)


cdef inline void pending_scores(Net *net, Work *w, const float *A, float *Y) noexcept nogil:
    """Y += sum_j steps_j dL/dy_j (a_j . a + x_j . x + 1): the pending updates of U, W and b
    (x_j . x in w.xdot, from hidden_layer), for the window whose hidden layer is A."""
    cdef int j, p = w.pending
    if p == 0:
        return
    for j in range(p):
        w.coef[j] = net.bias
        if net.hidden > 0:
            w.coef[j] += dot(net.hidden, w.A + j * net.hidden, A)
        if net.direct:
            w.coef[j] += w.xdot[j]
        w.coef[j] *= w.steps[j]
    matvec_t(p, net.vocab, 1.0, w.Y, w.coef, 1.0, Y)


cdef inline double forward(Net *net, Work *w, const int *rows, int K, double *logp) noexcept nogil:
    """Fill X, A and Y (probabilities) from row `w.pending` on; return the sum of
    log p(target), in double. Scoring (logp: each window's log p(target)) leaves Y as
    scores."""
    cdef int n = net.context + 1, i, V = net.vocab
    cdef double total = 0
    cdef float *Y = w.Y + <Py_ssize_t> w.pending * V
    scores(net, w, rows, K)
    for i in range(K):  # softmax with max-subtraction (sec. 3.2)
        if logp != NULL:
            logp[i] = log_softmax_at(Y + <Py_ssize_t> i * V, V, rows[i * n + net.context])
            total += logp[i]
        else:
            total += softmax_row(Y + <Py_ssize_t> i * V, V, rows[i * n + net.context])
    return total


cdef inline void backward(Net *net, Work *w, const int *rows, int K, float rate, float keep_c) noexcept nogil:
    """Gradient of -log p through a batch of K > 1 windows (forward's), applied with step
    `rate` (sum over the batch); `keep_c` < 1 decays the rows of C that occur (weight
    decay). One window takes window_step."""
    cdef int n = net.context + 1, i, V = net.vocab
    for i in range(K):  # dL/dy = p - 1[target]
        w.Y[<Py_ssize_t> i * V + rows[i * n + net.context]] -= 1
    output_backward(net, w, K, rate)
    input_backward(net, w, rows, K, rate, keep_c)


cdef struct Exchange:
    # What the threads sharing one window's output rows (a part each; one part: all rows)
    # pass each other between the phases of window_step
    int parts, width       # width: hidden units + inputs
    float *top             # per part: the maximum score over its rows
    float *total           # per part: sum of exp(y - top) over its rows
    float *sums            # per part: U^T e (hidden floats) then W^T e (inputs floats)
    float *pending         # per part: P_j . p over its rows (DEFER floats)
    float *target          # from the target's part: U_t, W_t, P_j[t] (width + DEFER floats)


cdef inline double window_step(Net *net, Work *w, Exchange *x, const int *rows, float rate,
                               float keep_c) noexcept nogil:
    """One window's SGD update on all the output rows (one part): window_scores,
    window_probabilities and window_backward in turn. Returns log p(target)."""
    cdef double logp
    window_scores(net, w, rows, x, 0)
    logp = window_probabilities(net, w, rows, x, 0, 0)
    window_backward(net, w, rows, x, rate, keep_c, True)
    return logp


cdef inline void window_scores(Net *net, Work *w, const int *rows, Exchange *x, int part) noexcept nogil:
    """Phase 1 of a window's update, on this part's output rows: the hidden layer, the
    scores y (with the pending updates' share), and in one pass over the rows, block by
    block of WINDOW_ROWS, the softmax's running maximum and sum and, the block still in
    cache, its rows weighted by e = exp(y - maximum): U^T e and W^T e, into x's slots of
    `part`. Divided by the sum over all parts they are U^T p and W^T p, so dL/da = U^T p -
    U_t needs no second pass over U."""
    cdef int V = net.vocab, h = net.hidden, I = net.inputs, p = w.pending, lo, R
    cdef float top = -INFINITY, total = 0, rescale
    cdef float *X = w.X + <Py_ssize_t> p * I
    cdef float *A = w.A + <Py_ssize_t> p * h
    cdef float *Y = w.Y + <Py_ssize_t> p * V
    cdef float *sums = x.sums + <Py_ssize_t> part * x.width
    hidden_layer(net, w, rows, 1)
    memcpy(Y, net.b, V * sizeof(float))
    pending_scores(net, w, A, Y)
    if V == 0:
        memset(sums, 0, x.width * sizeof(float))
    lo = 0
    while lo < V:
        R = min(<int> WINDOW_ROWS, V - lo)
        if h > 0:
            rows_dot(R, h, net.U + <Py_ssize_t> lo * h, A, 0, Y + lo)
        if net.direct:
            rows_dot(R, I, net.W + <Py_ssize_t> lo * I, X, 0, Y + lo)
        rescale = softmax_block(Y + lo, w.E, R, &top, &total)
        if h > 0:
            rows_weighted_sum(R, h, net.U + <Py_ssize_t> lo * h, w.E, 0 if lo == 0 else rescale, sums)
        if net.direct:
            rows_weighted_sum(R, I, net.W + <Py_ssize_t> lo * I, w.E, 0 if lo == 0 else rescale, sums + h)
        lo += R
    x.top[part] = top
    x.total[part] = total


cdef inline double log_normaliser_of_parts(Exchange *x, float *factor) noexcept nogil:
    """log sum exp(y) over every part's rows; factor[q] (if given) = exp(top_q - top) / sum,
    which turns part q's weighted sums into its share of U^T p."""
    cdef int q
    cdef float top = -INFINITY, total = 0
    for q in range(x.parts):
        top = x.top[q] if x.top[q] > top else top
    for q in range(x.parts):
        total += x.total[q] * expf(x.top[q] - top)
    if factor != NULL:
        for q in range(x.parts):
            factor[q] = expf(x.top[q] - top) / total
    return top + log(total)


cdef inline double window_probabilities(Net *net, Work *w, const int *rows, Exchange *x, int part,
                                        int lo) noexcept nogil:
    """Phase 2, once every part's phase 1 is done: this part's scores (its rows lo..) become
    probabilities and P_j . p over them goes to x.pending; the part holding the target
    sends U_t, W_t and P_j[t] through x.target, keeps dL/dy = p - 1 at t and returns log
    p(target) (the other parts 0)."""
    cdef int V = net.vocab, h = net.hidden, I = net.inputs, p = w.pending, j
    cdef int t = rows[net.context] - lo
    cdef float *Y = w.Y + <Py_ssize_t> p * V
    cdef double log_z = log_normaliser_of_parts(x, NULL), logp = 0
    cdef bint holds_target = 0 <= t < V
    if holds_target:
        logp = Y[t] - log_z
        if h > 0:
            memcpy(x.target, net.U + <Py_ssize_t> t * h, h * sizeof(float))
        if net.direct:
            memcpy(x.target + h, net.W + <Py_ssize_t> t * I, I * sizeof(float))
        for j in range(p):
            x.target[x.width + j] = w.Y[<Py_ssize_t> j * V + t]
    exp_shifted(Y, V, <float> log_z)
    if p > 0:
        matvec(p, V, 1.0, w.Y, Y, 0.0, x.pending + part * DEFER)
    if holds_target:
        Y[t] -= 1  # dL/dy = p - 1[target], kept for the deferred update
    return logp


cdef inline void window_backward(Net *net, Work *w, const int *rows, Exchange *x, float rate, float keep_c,
                                 bint update_c) noexcept nogil:
    """Phase 3, once every part's phase 2 is done, the same in each part (each keeps the
    window's dL/da and dL/dx for its deferred updates): dL/da and dL/dx from the parts'
    sums and the target's rows, the pending updates' share of them, and (update_c: in
    one part) the steps of the rows of C."""
    cdef int h = net.hidden, I = net.inputs, p = w.pending, j, k, q
    cdef float minus = -rate, pending_dot
    cdef float *A = w.A + <Py_ssize_t> p * h
    cdef float factor[MAX_PARTS]
    log_normaliser_of_parts(x, factor)
    for j in range(p):  # P_j . dL/dy, the pending updates' share of U^T g and W^T g
        pending_dot = 0
        for q in range(x.parts):
            pending_dot += x.pending[q * DEFER + j]
        w.coef[j] = w.steps[j] * (pending_dot - x.target[x.width + j])
        w.coef_in[j] = w.coef[j] if net.direct else 0
    for k in range(h + (I if net.direct else 0)):  # U^T p - U_t, W^T p - W_t
        w.dA[k] = -x.target[k]
        for q in range(x.parts):
            w.dA[k] += factor[q] * x.sums[<Py_ssize_t> q * x.width + k]
    if net.direct:
        memcpy(w.dX, w.dA + h, I * sizeof(float))
    else:
        memset(w.dX, 0, I * sizeof(float))
    if h > 0:
        if p > 0:
            matvec_t(p, h, 1.0, w.A, w.coef, 1.0, w.dA)
        activation_slope(w.dA, A, h, net.activation)
        matvec_t(h, I, 1.0, net.H, w.dA, 1.0, w.dX)
        for j in range(p):  # and of H^T g
            w.coef_in[j] += w.steps[j] * dot(h, w.G + j * h, w.dA)
        memcpy(w.G + p * h, w.dA, h * sizeof(float))
    if p > 0:
        matvec_t(p, I, 1.0, w.X, w.coef_in, 1.0, w.dX)
    w.steps[p] = minus
    w.pending = p + 1
    if update_c:
        update_features(net, w, rows, 1, rate, keep_c)


cdef inline int exchange_alloc(Exchange *x, Net *net, int parts) except -1:
    """x's arrays, in one block of memory (x.top's)."""
    if not 1 <= parts <= MAX_PARTS:
        raise ValueError(f"parts must be 1 to {MAX_PARTS}")
    x.parts = parts
    x.width = net.hidden + net.inputs
    x.top = <float *> malloc((<Py_ssize_t> parts * (2 + x.width + DEFER) + x.width + DEFER) * sizeof(float))
    if not x.top:
        raise MemoryError()
    x.total = x.top + parts
    x.sums = x.total + parts
    x.pending = x.sums + <Py_ssize_t> parts * x.width
    x.target = x.pending + parts * DEFER
    return 0


cdef inline void exchange_free(Exchange *x) noexcept nogil:
    free(x.top)
    x.top = x.total = x.sums = x.pending = x.target = NULL


cdef inline void output_backward(Net *net, Work *w, int K, float rate) noexcept nogil:
    """From dL/dy in rows 0.. of Y: dA = dL/dy U (before the activation's slope) and
    dX = dL/dy W (or 0), then the steps on U, W and b (after the products that read them).
    U and b go block by block of ROWS output rows: a block's rows add their share to dA
    and are stepped while in cache, one pass over U instead of two."""
    cdef int i, lo, R, V = net.vocab, h = net.hidden
    cdef float minus = -rate
    if net.direct:
        gemm(b'N', b'N', K, net.inputs, V, 1.0, w.Y, V, net.W, net.inputs, 0.0, w.dX, net.inputs)
        gemm(b'T', b'N', V, net.inputs, K, minus, w.Y, V, w.X, net.inputs, 1.0, net.W, net.inputs)
    else:
        memset(w.dX, 0, <Py_ssize_t> K * net.inputs * sizeof(float))
    if h > 0 and V == 0:
        memset(w.dA, 0, <Py_ssize_t> K * h * sizeof(float))
    lo = 0
    while lo < V:
        R = min(<int> ROWS, V - lo)
        if h > 0:
            gemm(b'N', b'N', K, h, R, 1.0, w.Y + lo, V, net.U + <Py_ssize_t> lo * h, h, 0.0 if lo == 0 else 1.0,
                 w.dA, h)
            gemm(b'T', b'N', R, h, K, minus, w.Y + lo, V, w.A, h, 1.0, net.U + <Py_ssize_t> lo * h, h)
        if net.bias:
            add_column_sums(K, R, minus, w.Y + lo, V, net.b + lo)
        lo += R


cdef inline void input_backward(Net *net, Work *w, const int *rows, int K, float rate, float keep_c) noexcept nogil:
    """From dA (before the slope) and dX (the direct part) of output_backward: the slope,
    dX += dA H, and the steps on H, d and the rows of C."""
    cdef int i, one = 1
    cdef float minus = -rate
    if net.hidden > 0:
        activation_slope(w.dA, w.A, <Py_ssize_t> K * net.hidden, net.activation)
        gemm(b'N', b'N', K, net.inputs, net.hidden, 1.0, w.dA, net.hidden, net.H, net.inputs, 1.0,
             w.dX, net.inputs)
        gemm(b'T', b'N', net.hidden, net.inputs, K, minus, w.dA, net.hidden, w.X, net.inputs, 1.0,
             net.H, net.inputs)
        if net.bias:
            for i in range(K):
                saxpy(&net.hidden, &minus, w.dA + i * net.hidden, &one, net.d, &one)
    update_features(net, w, rows, K, rate, keep_c)


cdef inline void update_features(Net *net, Work *w, const int *rows, int K, float rate, float keep_c) noexcept nogil:
    """Step the rows of C that occur along dX; `keep_c` < 1 decays them (weight decay)."""
    cdef int n = net.context + 1, i, k, one = 1
    cdef float minus = -rate
    cdef float *row
    for i in range(K):
        for k in range(net.context):
            row = net.C + <Py_ssize_t> rows[i * n + k] * net.m
            if keep_c != 1:
                scale(net.m, keep_c, row)
            saxpy(&net.m, &minus, w.dX + i * net.inputs + k * net.m, &one, row, &one)


cdef inline void flush(Net *net, Work *w, bint shared_layers) noexcept nogil:
    """Apply the deferred one-window updates: b += sum_j steps_j y_j, U += sum_j steps_j
    y_j a_j^T, and likewise W, and (shared_layers: in one of the parts sharing the
    windows) d and H (y_j = dL/dy of window j, g_j = dL/d its hidden input). The pending
    rows are scaled in place: they are not needed after this."""
    cdef int p = w.pending, j
    if p == 0:
        return
    if net.bias:
        matvec_t(p, net.vocab, 1.0, w.Y, w.steps, 1.0, net.b)
    if net.hidden > 0:
        if net.bias and shared_layers:
            matvec_t(p, net.hidden, 1.0, w.G, w.steps, 1.0, net.d)
        for j in range(p):
            scale(net.hidden, w.steps[j], w.G + j * net.hidden)
            scale(net.hidden, w.steps[j], w.A + j * net.hidden)
        if shared_layers:
            gemm(b'T', b'N', net.hidden, net.inputs, p, 1.0, w.G, net.hidden, w.X, net.inputs, 1.0, net.H,
                 net.inputs)
        gemm(b'T', b'N', net.vocab, net.hidden, p, 1.0, w.Y, net.vocab, w.A, net.hidden, 1.0, net.U,
             net.hidden)
    if net.direct:
        for j in range(p):
            scale(net.inputs, w.steps[j], w.X + j * net.inputs)
        gemm(b'T', b'N', net.vocab, net.inputs, p, 1.0, w.Y, net.vocab, w.X, net.inputs, 1.0, net.W,
             net.inputs)
    w.pending = 0


cdef inline void decay_dense(Net *net, float factor, bint shared_layers) noexcept nogil:
    """Weight decay in bulk on U, W and (shared_layers) H (the biases and C are not
    touched here)."""
    if net.hidden > 0:
        scale(net.vocab * net.hidden, factor, net.U)
        if shared_layers:
            scale(net.hidden * net.inputs, factor, net.H)
    if net.direct:
        scale(net.vocab * net.inputs, factor, net.W)



cdef inline int net_attach(Net *net, params, int context, int activation, bint bias, int lo, int hi) except -1:
    """Point `net` at the parameter arrays (float32, C-contiguous, kept alive by the
    caller); the output layer is rows lo..hi-1 of b, U and W (all of them: 0..|V|).
    Without b and U (the hierarchical softmax's network), the layers below the output."""
    cdef float[:, ::1] C = params["C"], U, H, W
    cdef float[::1] b, d
    if not 0 <= lo <= hi <= C.shape[0]:
        raise ValueError("output rows outside the vocabulary")
    net.vocab = hi - lo
    net.context = context
    net.m = C.shape[1]
    net.inputs = context * C.shape[1]
    net.activation = activation
    net.bias = bias
    net.C = &C[0, 0]
    net.b = net.U = NULL
    if "b" in params:
        b = params["b"]
        net.b = &b[0] + lo
    net.hidden = params["H"].shape[0] if "H" in params else 0
    if net.hidden:
        H = params["H"]
        d = params["d"]
        net.H = &H[0, 0]
        net.d = &d[0]
    if "U" in params:
        U = params["U"]
        net.U = &U[0, 0] + <Py_ssize_t> lo * net.hidden
    net.direct = "W" in params
    if net.direct:
        W = params["W"]
        net.W = &W[0, 0] + <Py_ssize_t> lo * net.inputs
    return 0


cdef inline int work_alloc(Work *w, Net *net, int capacity) except -1:
    """One thread's buffers for batches of up to `capacity` windows (and DEFER deferred)."""
    cdef Py_ssize_t slots = max(capacity, DEFER)  # deferred windows wait in X, A and Y
    w.capacity = capacity
    w.pending = 0
    w.X = <float *> malloc(slots * max(net.inputs, 1) * sizeof(float))
    w.A = <float *> malloc(slots * max(net.hidden, 1) * sizeof(float))
    w.dA = <float *> malloc(<Py_ssize_t> max(capacity * net.hidden, net.hidden + net.inputs, 1) * sizeof(float))
    w.dX = <float *> malloc(<Py_ssize_t> capacity * max(net.inputs, 1) * sizeof(float))
    w.Y = <float *> malloc(slots * net.vocab * sizeof(float))
    w.G = <float *> malloc(DEFER * max(net.hidden, 1) * sizeof(float))
    w.steps = <float *> malloc(DEFER * sizeof(float))
    w.coef = <float *> malloc(DEFER * sizeof(float))
    w.coef_in = <float *> malloc(DEFER * sizeof(float))
    w.xdot = <float *> malloc(DEFER * sizeof(float))
    w.E = <float *> malloc(WINDOW_ROWS * sizeof(float))
    if not (w.X and w.A and w.dA and w.dX and w.Y and w.G and w.steps and w.coef and w.coef_in and w.xdot and w.E):
        raise MemoryError()
    return 0


cdef inline void work_free(Work *w) noexcept nogil:
    free(w.X)
    free(w.A)
    free(w.dA)
    free(w.dX)
    free(w.Y)
    free(w.G)
    free(w.steps)
    free(w.coef)
    free(w.coef_in)
    free(w.xdot)
    free(w.E)
    w.X = w.A = w.dA = w.dX = w.Y = w.G = w.steps = w.coef = w.coef_in = w.xdot = w.E = NULL
