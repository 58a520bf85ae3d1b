# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""The hot loop of the Bengio et al. (2003) network, eq. 1:

    y = b + W x + U act(d + H x),   x = (C(w_t-1), ..., C(w_t-n+1)),   p = softmax(y)

forward and backward over a mini-batch of windows without the GIL, with sgemm from
scipy.linalg.cython_blas, softmax with max-subtraction, and in-place SGD updates (sparse
on the rows of C that occur). One-window SGD runs on matrix-vector products and defers
its dense updates (see Work): still plain SGD, with a fraction of the memory traffic.
Several threads may run `train` on the same parameter arrays at once: lock-free
asynchronous updates (sec. 3.1); a thread sees another's dense updates when that one
flushes them (at most DEFER windows late). Policy lives in Python."""
import numpy as np
cimport numpy as cnp
from libc.math cimport exp, expf, logf, tanhf, log, pow
from libc.stdlib cimport free, malloc
from libc.string cimport memcpy, memset
from scipy.linalg.cython_blas cimport saxpy, sdot, sgemm, sgemv, sger, sscal

cnp.import_array()

ACTIVATIONS = {"tanh": 0, "sigmoid": 1, "relu": 2, "linear": 3}


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


cdef inline void gemm(char ta, char tb, int M, int N, int K, float alpha, const float *A, int lda,
                      const float *B, int ldb, float beta, float *C, int ldc) noexcept nogil:
    """Row-major C (M x N) = alpha op(A) op(B) + beta C, through column-major sgemm. A
    single row of C (one window) is a matrix-vector product, and a single inner term
    added to C an outer product: BLAS-2, without sgemm's packing of the whole matrix."""
    if M == 0 or N == 0:
        return
    if M == 1 and ta == b'N' and ldc == N and ldb == (K if tb == b'T' else N):
        if tb == b'T':
            matvec(N, K, alpha, B, A, beta, C)
        else:
            matvec_t(K, N, alpha, B, A, beta, C)
        return
    if K == 1 and beta == 1 and ldc == N and ldb == N and tb == b'N' and (ta == b'T' or lda == 1):
        rank1(M, N, alpha, A, B, C)
        return
    sgemm(&tb, &ta, &N, &M, &K, &alpha, <float *> B, &ldb, <float *> A, &lda, &beta, C, &ldc)


cdef inline void matvec(int rows, int cols, float alpha, const float *M, const float *v, float beta,
                        float *out) noexcept nogil:
    """out = alpha M v + beta out for a row-major M (rows x cols): one pass over M, no
    packing (sgemm packs the whole matrix even for a single row)."""
    cdef int one = 1
    sgemv(b'T', &cols, &rows, &alpha, <float *> M, &cols, <float *> v, &one, &beta, out, &one)


cdef inline void matvec_t(int rows, int cols, float alpha, const float *M, const float *u, float beta,
                          float *out) noexcept nogil:
    """out = alpha M^T u + beta out for a row-major M (rows x cols)."""
    cdef int one = 1
    sgemv(b'N', &cols, &rows, &alpha, <float *> M, &cols, <float *> u, &one, &beta, out, &one)


cdef inline float dot(int size, const float *u, const float *v) noexcept nogil:
    cdef int one = 1
    return sdot(&size, <float *> u, &one, <float *> v, &one)


cdef inline void scale(int size, float alpha, float *v) noexcept nogil:
    cdef int one = 1
    sscal(&size, &alpha, v, &one)


cdef inline void rank1(int rows, int cols, float alpha, const float *u, const float *v, float *M) noexcept nogil:
    """M += alpha u v^T for a row-major M (rows x cols)."""
    cdef int one = 1
    sger(&cols, &rows, &alpha, <float *> v, &one, <float *> u, &one, M, &cols)


DEF DEFER = 16


cdef inline void activate(float *a, Py_ssize_t size, int kind) noexcept nogil:
    cdef Py_ssize_t i
    if kind == 0:
        for i in range(size):
            a[i] = tanhf(a[i])
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


cdef void hidden_layer(Net *net, Work *w, const int *rows, int K) noexcept nogil:
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


cdef void scores(Net *net, Work *w, const int *rows, int K) noexcept nogil:
    """Fill X, A and Y (the scores y, before the softmax) from row `w.pending` on.
    Pending deferred updates count as applied."""
    cdef int i, j, V = net.vocab, p = w.pending
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
    if p > 0:  # += sum_j steps_j dL/dy_j (a_j . a + x_j . x + 1): pending updates of U, W, b
        for j in range(p):
            w.coef[j] = net.bias
            if net.hidden > 0:
                w.coef[j] += dot(net.hidden, w.A + j * net.hidden, A)
            if net.direct:
                w.coef[j] += w.xdot[j]
            w.coef[j] *= w.steps[j]
        matvec_t(p, V, 1.0, w.Y, w.coef, 1.0, Y)


cdef double forward(Net *net, Work *w, const int *rows, int K) noexcept nogil:
    """Fill X, A and Y (probabilities) from row `w.pending` on; return the sum of
    log p(target), in double."""
    cdef int n = net.context + 1, i, j, V = net.vocab, target
    cdef float top, value, sum_exp
    cdef double total = 0
    cdef float *y
    cdef float *Y = w.Y + <Py_ssize_t> w.pending * V
    scores(net, w, rows, K)
    for i in range(K):  # softmax with max-subtraction (sec. 3.2); loops kept simple to vectorise
        y = Y + <Py_ssize_t> i * V
        target = rows[i * n + net.context]
        top = y[0]
        for j in range(1, V):
            top = y[j] if y[j] > top else top
        for j in range(V):
            y[j] = expf(y[j] - top)
        sum_exp = 0
        for j in range(V):
            sum_exp += y[j]
        total += log(<double> y[target] / sum_exp)
        value = 1 / sum_exp
        for j in range(V):
            y[j] *= value
    return total


cdef void backward(Net *net, Work *w, const int *rows, int K, float rate, float keep_c) noexcept nogil:
    """Gradient of -log p through the batch, applied with step `rate` (sum over the
    batch); `keep_c` < 1 decays the rows of C that occur (weight decay)."""
    cdef int n = net.context + 1, i, k, j, V = net.vocab, one = 1, p = w.pending
    cdef float minus = -rate
    cdef float *row
    cdef float *X = w.X + <Py_ssize_t> p * net.inputs
    cdef float *A = w.A + <Py_ssize_t> p * net.hidden
    cdef float *Y = w.Y + <Py_ssize_t> p * V
    for i in range(K):  # dL/dy = p - 1[target]
        Y[<Py_ssize_t> i * V + rows[i * n + net.context]] -= 1
    if K == 1:  # one example: matrix-vector products; dense updates deferred
        if p > 0:  # the pending updates' share of U^T g and W^T g
            matvec(p, V, 1.0, w.Y, Y, 0.0, w.coef)
            for j in range(p):
                w.coef[j] *= w.steps[j]
                w.coef_in[j] = w.coef[j] if net.direct else 0
        if net.hidden > 0:
            matvec_t(V, net.hidden, 1.0, net.U, Y, 0.0, w.dA)
            if p > 0:
                matvec_t(p, net.hidden, 1.0, w.A, w.coef, 1.0, w.dA)
            activation_slope(w.dA, A, net.hidden, net.activation)
            matvec_t(net.hidden, net.inputs, 1.0, net.H, w.dA, 0.0, w.dX)
            if p > 0:  # and of H^T g
                for j in range(p):
                    w.coef_in[j] += w.steps[j] * dot(net.hidden, w.G + j * net.hidden, w.dA)
            memcpy(w.G + p * net.hidden, w.dA, net.hidden * sizeof(float))
        else:
            memset(w.dX, 0, net.inputs * sizeof(float))
        if net.direct:
            matvec_t(V, net.inputs, 1.0, net.W, Y, 1.0, w.dX)
        if p > 0:
            matvec_t(p, net.inputs, 1.0, w.X, w.coef_in, 1.0, w.dX)
        w.steps[p] = minus
        w.pending = p + 1
        update_features(net, w, rows, 1, rate, keep_c)
    else:
        output_backward(net, w, K, rate)
        input_backward(net, w, rows, K, rate, keep_c)


cdef void output_backward(Net *net, Work *w, int K, float rate) noexcept nogil:
    """From dL/dy in rows 0.. of Y: dA = dL/dy U (before the activation's slope) and
    dX = dL/dy W (or 0), then the steps on U, W and b (after the products that read them)."""
    cdef int i, V = net.vocab, one = 1
    cdef float minus = -rate
    if net.hidden > 0:
        gemm(b'N', b'N', K, net.hidden, V, 1.0, w.Y, V, net.U, net.hidden, 0.0, w.dA, net.hidden)
    if net.direct:
        gemm(b'N', b'N', K, net.inputs, V, 1.0, w.Y, V, net.W, net.inputs, 0.0, w.dX, net.inputs)
    else:
        memset(w.dX, 0, <Py_ssize_t> K * net.inputs * sizeof(float))
    if net.hidden > 0:
        gemm(b'T', b'N', V, net.hidden, K, minus, w.Y, V, w.A, net.hidden, 1.0, net.U, net.hidden)
    if net.direct:
        gemm(b'T', b'N', V, net.inputs, K, minus, w.Y, V, w.X, net.inputs, 1.0, net.W, net.inputs)
    if net.bias:
        for i in range(K):
            saxpy(&V, &minus, w.Y + <Py_ssize_t> i * V, &one, net.b, &one)


cdef void input_backward(Net *net, Work *w, const int *rows, int K, float rate, float keep_c) noexcept nogil:
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


cdef void update_features(Net *net, Work *w, const int *rows, int K, float rate, float keep_c) noexcept nogil:
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


cdef void flush(Net *net, Work *w) noexcept nogil:
    """Apply the deferred one-window updates: b += sum_j steps_j y_j, U += sum_j steps_j
    y_j a_j^T, and likewise W, d and H (y_j = dL/dy of window j, g_j = dL/d its hidden
    input). The pending rows are scaled in place: they are not needed after this."""
    cdef int p = w.pending, j
    if p == 0:
        return
    if net.bias:
        matvec_t(p, net.vocab, 1.0, w.Y, w.steps, 1.0, net.b)
    if net.hidden > 0:
        if net.bias:
            matvec_t(p, net.hidden, 1.0, w.G, w.steps, 1.0, net.d)
        for j in range(p):
            scale(net.hidden, w.steps[j], w.G + j * net.hidden)
            scale(net.hidden, w.steps[j], w.A + j * net.hidden)
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


# -- importance sampling (Bengio & Senecal 2003, Algorithm 3) ----------------------------

cdef struct Sampling:
    int count              # N draws per batch, shared by the windows of a batch
    int distinct           # after merge_duplicates: the distinct words among them
    int *words             # the sampled word ids (distinct ones first after merging)
    float *sample_log_q    # log Q(w_j) of each sample under the batch's proposal
    float *multiplicity    # after merging: how many of the N draws each distinct word was
    int *slot              # vocabulary-sized scratch for merging, -1 everywhere between calls
    # Unigram proposal: Walker's alias table, so a draw costs one uniform number.
    const double *alias_keep
    const int *alias_other
    const float *log_q     # log Q(w)
    int vocab_size         # entries of the alias table and log_q
    # Bigram proposal (row_start NULL: unigram only): Q(w|v) = keep_v p(w|v) + (1 - keep_v) u(w),
    # v the previous word; rows of successors sorted by id with their cumulative
    # probabilities and p(w|v). A batch samples from the mixture of its windows' Q.
    const long long *row_start
    const int *successors
    const double *successor_cdf
    const double *successor_p
    const double *keep
    unsigned long long rng
    float *U_rows          # N x hidden: the sampled rows of U, gathered
    float *W_rows          # N x inputs: the sampled rows of W
    float *weights         # batch x N: scores, then importance weights
    float *row_grads       # N x max(hidden, inputs)
    int *owned             # (output block) positions of the samples this block holds
    int held               # (output block) how many
    float *targets         # (output block) batch: the target's score where this block holds it


cdef int sampling_alloc(Sampling *sp, int samples, int batch, int hidden, int inputs, int vocab) noexcept nogil:
    """Buffers for `samples` draws shared by up to `batch` windows over a vocabulary of
    `vocab` words; 0 when out of memory."""
    cdef int width = max(hidden, inputs), i
    sp.count = samples
    sp.distinct = samples
    sp.words = <int *> malloc(samples * sizeof(int))
    sp.sample_log_q = <float *> malloc(samples * sizeof(float))
    sp.multiplicity = <float *> malloc(samples * sizeof(float))
    sp.slot = <int *> malloc(max(vocab, 1) * sizeof(int))
    sp.owned = <int *> malloc(samples * sizeof(int))
    sp.U_rows = <float *> malloc(<Py_ssize_t> samples * max(hidden, 1) * sizeof(float))
    sp.W_rows = <float *> malloc(<Py_ssize_t> samples * max(inputs, 1) * sizeof(float))
    sp.weights = <float *> malloc(<Py_ssize_t> batch * samples * sizeof(float))
    sp.row_grads = <float *> malloc(<Py_ssize_t> samples * max(width, 1) * sizeof(float))
    sp.targets = <float *> malloc(batch * sizeof(float))
    if sp.slot != NULL:
        for i in range(vocab):
            sp.slot[i] = -1
    return (sp.words != NULL and sp.sample_log_q != NULL and sp.multiplicity != NULL and sp.slot != NULL
            and sp.owned != NULL and sp.U_rows != NULL and sp.W_rows != NULL and sp.weights != NULL
            and sp.row_grads != NULL and sp.targets != NULL)


cdef void sampling_free(Sampling *sp) noexcept nogil:
    free(sp.words)
    free(sp.sample_log_q)
    free(sp.multiplicity)
    free(sp.slot)
    free(sp.owned)
    free(sp.U_rows)
    free(sp.W_rows)
    free(sp.weights)
    free(sp.row_grads)
    free(sp.targets)
    sp.words = NULL
    sp.sample_log_q = NULL
    sp.multiplicity = NULL
    sp.slot = NULL
    sp.owned = NULL
    sp.U_rows = NULL
    sp.W_rows = NULL
    sp.weights = NULL
    sp.row_grads = NULL
    sp.targets = NULL
    sp.count = 0
    sp.distinct = 0


cdef inline unsigned long long splitmix64(unsigned long long *state) noexcept nogil:
    cdef unsigned long long z
    state[0] += 0x9E3779B97F4A7C15ULL
    z = state[0]
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL
    return z ^ (z >> 31)


cdef inline double uniform(Sampling *sp) noexcept nogil:
    return (splitmix64(&sp.rng) >> 11) * (1.0 / 9007199254740992.0)


cdef inline int draw_unigram(Sampling *sp) noexcept nogil:
    """One draw from the alias table: a column uniformly, then it or its alias."""
    cdef double u = uniform(sp) * sp.vocab_size
    cdef int column = <int> u
    return column if u - column < sp.alias_keep[column] else sp.alias_other[column]


cdef inline long long first_above(const double *cdf, long long low, long long high, double u) noexcept nogil:
    """The first index in low..high-1 whose cumulative probability exceeds u."""
    cdef long long middle
    high -= 1
    while low < high:
        middle = (low + high) >> 1
        if cdf[middle] > u:
            high = middle
        else:
            low = middle + 1
    return low


cdef inline double bigram_probability(Sampling *sp, int v, int word) noexcept nogil:
    """p(word | v) from the successor rows (0 when unseen)."""
    cdef long long low = sp.row_start[v], high = sp.row_start[v + 1], middle
    while low < high:
        middle = (low + high) >> 1
        if sp.successors[middle] < word:
            low = middle + 1
        else:
            high = middle
    if low < sp.row_start[v + 1] and sp.successors[low] == word:
        return sp.successor_p[low]
    return 0


cdef void draw_samples(Sampling *sp, const int *rows, int K, int n) noexcept nogil:
    """The batch's N samples and their log Q: from the unigram, or (bigram proposal) from
    the mixture over the batch's windows of Q(.|previous word), which is a proposal for
    every window of the batch (it is positive wherever the unigram part is)."""
    cdef int j, i, v
    cdef double q
    for j in range(sp.count):
        if sp.row_start != NULL:
            v = rows[<int> ((splitmix64(&sp.rng) >> 33) % K) * n + n - 2]
            if uniform(sp) < sp.keep[v]:
                sp.words[j] = sp.successors[first_above(sp.successor_cdf, sp.row_start[v], sp.row_start[v + 1],
                                                        uniform(sp))]
                continue
        sp.words[j] = draw_unigram(sp)
    for j in range(sp.count):
        if sp.row_start == NULL:
            sp.sample_log_q[j] = sp.log_q[sp.words[j]]
            continue
        q = 0
        for i in range(K):
            v = rows[i * n + n - 2]
            q += sp.keep[v] * bigram_probability(sp, v, sp.words[j]) + (1 - sp.keep[v]) * exp(sp.log_q[sp.words[j]])
        sp.sample_log_q[j] = <float> log(q / K)


cdef void merge_duplicates(Sampling *sp) noexcept nogil:
    """One entry per distinct word among the N draws: a word drawn c times has ratio
    c exp(y) / Q, so its log Q is lowered by log c (the estimator is unchanged, the work
    shrinks: a unigram proposal draws the frequent words again and again)."""
    cdef int j, u, m = 0
    for j in range(sp.count):
        u = sp.slot[sp.words[j]]
        if u >= 0:
            sp.multiplicity[u] += 1
            continue
        sp.slot[sp.words[j]] = m
        sp.words[m] = sp.words[j]
        sp.sample_log_q[m] = sp.sample_log_q[j]
        sp.multiplicity[m] = 1
        m += 1
    sp.distinct = m
    for u in range(m):
        sp.slot[sp.words[u]] = -1
        sp.sample_log_q[u] -= logf(sp.multiplicity[u])


cdef inline float dot_row(int size, const float *u, const float *v) noexcept nogil:
    """u . v for the short rows of one window (no BLAS call: its overhead is the cost)."""
    cdef float s0 = 0, s1 = 0, s2 = 0, s3 = 0
    cdef int i = 0
    while i + 4 <= size:
        s0 += u[i] * v[i]
        s1 += u[i + 1] * v[i + 1]
        s2 += u[i + 2] * v[i + 2]
        s3 += u[i + 3] * v[i + 3]
        i += 4
    while i < size:
        s0 += u[i] * v[i]
        i += 1
    return (s0 + s1) + (s2 + s3)


cdef inline void axpy_row(int size, float alpha, const float *x, float *y) noexcept nogil:
    cdef int i
    for i in range(size):
        y[i] += alpha * x[i]


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


cdef inline float target_score(Net *net, int t, const float *a, const float *x) noexcept nogil:
    cdef float y = net.b[t]
    if net.hidden > 0:
        y += dot_row(net.hidden, net.U + <Py_ssize_t> t * net.hidden, a)
    if net.direct:
        y += dot_row(net.inputs, net.W + <Py_ssize_t> t * net.inputs, x)
    return y


cdef double importance_weights(Sampling *sp, float *g, double *ess) noexcept nogil:
    """Scores y_j of the distinct samples in, normalised weights r_j / sum r out (log r_j =
    y_j - log Q(w_j), max-subtracted); adds the effective sample size to `ess` and returns
    the estimate of log Z, log(sum r / N)."""
    cdef int j, M = sp.distinct
    cdef float top = -3.4e38, total = 0, squares = 0, value
    for j in range(M):
        g[j] -= sp.sample_log_q[j]
        top = g[j] if g[j] > top else top
    for j in range(M):
        value = expf(g[j] - top)
        g[j] = value
        total += value
        squares += value * value / sp.multiplicity[j]
    ess[0] += <double> total * total / squares
    value = 1 / total
    for j in range(M):
        g[j] *= value
    return top + log(<double> total / sp.count)


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
            row = net.U + <Py_ssize_t> word * h
            axpy_row(h, g[j], row, w.dA)
            axpy_row(h, -rate * g[j], w.A, row)
        if net.direct:
            row = net.W + <Py_ssize_t> word * I
            axpy_row(I, g[j], row, w.dX)
            axpy_row(I, -rate * g[j], w.X, row)
    step_target(net, sp, t, w.A, w.X, g, rate)
    input_backward(net, w, rows, 1, rate, keep_c)
    return estimate


cdef class Proposal:
    """The proposal Q of importance sampling: a unigram `q` (probabilities summing to 1),
    drawn from by Walker's alias method, and optionally a bigram part (see Sampling) mixed
    per previous word."""
    cdef readonly int vocab_size
    cdef object arrays
    cdef const double[::1] alias_keep
    cdef const int[::1] alias_other
    cdef const float[::1] log_q
    cdef const long long[::1] row_start
    cdef const int[::1] successors
    cdef const double[::1] successor_cdf
    cdef const double[::1] successor_p
    cdef const double[::1] keep
    cdef bint bigram

    def __init__(self, q, bigram=None):
        q = np.ascontiguousarray(q, dtype=np.float64)
        if q.ndim != 1 or len(q) == 0 or not np.all(q > 0):
            raise ValueError("a proposal needs a positive probability for every word")
        q = q / q.sum()
        keep, other = alias_table(q)
        log_q = np.log(q).astype(np.float32)
        self.arrays = (keep, other, log_q, bigram)
        self.alias_keep = keep
        self.alias_other = other
        self.log_q = log_q
        self.vocab_size = len(q)
        self.bigram = bigram is not None
        if self.bigram:
            self.row_start, self.successors, self.successor_cdf, self.successor_p, self.keep = bigram
            if len(self.row_start) != self.vocab_size + 1 or len(self.keep) != self.vocab_size:
                raise ValueError("bigram tables of the wrong size")

    cdef void attach(self, Sampling *sp):
        sp.alias_keep = &self.alias_keep[0]
        sp.alias_other = &self.alias_other[0]
        sp.log_q = &self.log_q[0]
        sp.vocab_size = self.vocab_size
        sp.row_start = NULL
        if self.bigram:
            sp.row_start = &self.row_start[0]
            sp.successors = &self.successors[0]
            sp.successor_cdf = &self.successor_cdf[0]
            sp.successor_p = &self.successor_p[0]
            sp.keep = &self.keep[0]

    def draw(self, int count, unsigned long long seed=0, const int[:, ::1] windows=None):
        """`count` words drawn as training draws them (for a batch of `windows` with the
        bigram part): for tests of the sampler."""
        cdef Sampling sp
        cdef int[::1] out = np.empty(max(count, 1), dtype=np.int32)
        cdef float[::1] log_q = np.empty(max(count, 1), dtype=np.float32)
        cdef int K = 1 if windows is None else windows.shape[0], n = 1 if windows is None else windows.shape[1]
        cdef int dummy = 0
        if self.bigram and windows is None:
            raise ValueError("the bigram proposal draws for a batch of windows")
        memset(&sp, 0, sizeof(Sampling))
        self.attach(&sp)
        sp.rng = seed
        sp.count = count
        sp.words = &out[0]
        sp.sample_log_q = &log_q[0]
        if count > 0:
            draw_samples(&sp, &dummy if windows is None else &windows[0, 0], K, n)
        return np.asarray(out)[:count]


def alias_table(const double[::1] q):
    """Walker's alias table (Vose's construction) for probabilities q: column i keeps
    itself with probability keep[i], else gives other[i]; every column has mass 1/V."""
    cdef Py_ssize_t V = q.shape[0], i, small_top = 0, large_top = 0, s, l
    cdef double[::1] scaled = np.empty(V)
    cdef double[::1] keep = np.ones(V)
    cdef int[::1] other = np.arange(V, dtype=np.int32)
    cdef Py_ssize_t[::1] small = np.empty(V, dtype=np.intp)
    cdef Py_ssize_t[::1] large = np.empty(V, dtype=np.intp)
    for i in range(V):
        scaled[i] = q[i] * V
        if scaled[i] < 1:
            small[small_top] = i
            small_top += 1
        else:
            large[large_top] = i
            large_top += 1
    while small_top and large_top:
        small_top -= 1
        s = small[small_top]
        l = large[large_top - 1]
        keep[s] = scaled[s]
        other[s] = <int> l
        scaled[l] = (scaled[l] + scaled[s]) - 1
        if scaled[l] < 1:
            large_top -= 1
            small[small_top] = l
            small_top += 1
    return np.asarray(keep), np.asarray(other)


cdef void decay_dense(Net *net, float factor) noexcept nogil:
    """Weight decay in bulk on U, H and W (the biases and C are not touched here)."""
    if net.hidden > 0:
        scale(net.vocab * net.hidden, factor, net.U)
        scale(net.hidden * net.inputs, factor, net.H)
    if net.direct:
        scale(net.vocab * net.inputs, factor, net.W)


cdef class Network:
    """Raw views of a network's parameter arrays (float32, C-contiguous, owned by Python)
    and one thread's work buffers for batches of up to `capacity` windows.

    With `rows=(lo, hi)` the network owns only output rows lo..hi-1 (of b, U and W): the
    block of the parameter-parallel output layer (sec. 3.2), driven phase by phase by the
    block_* methods while the caller sums the phases' results across the blocks."""
    cdef Net net
    cdef Work work
    cdef object keep_alive
    cdef int lo
    cdef Sampling sampling  # the output block's importance sampling (block_sampled_*)
    cdef object proposal

    def __init__(self, params, int context, int activation, int capacity, bint bias=True, rows=None):
        cdef float[:, ::1] C = params["C"], U, H, W
        cdef float[::1] b = params["b"], d
        cdef int lo = 0, hi = b.shape[0]
        if rows is not None:
            lo, hi = rows
            if not 0 <= lo <= hi <= b.shape[0]:
                raise ValueError("output rows outside the vocabulary")
        self.lo = lo
        self.keep_alive = params
        self.net.vocab = hi - lo
        self.net.context = context
        self.net.m = C.shape[1]
        self.net.inputs = context * C.shape[1]
        self.net.activation = activation
        self.net.bias = bias
        self.net.C = &C[0, 0]
        self.net.b = &b[0] + lo
        self.net.hidden = params["U"].shape[1] if "U" in params else 0
        if self.net.hidden:
            U = params["U"]
            H = params["H"]
            d = params["d"]
            self.net.U = &U[0, 0] + <Py_ssize_t> lo * self.net.hidden
            self.net.H = &H[0, 0]
            self.net.d = &d[0]
        self.net.direct = "W" in params
        if self.net.direct:
            W = params["W"]
            self.net.W = &W[0, 0] + <Py_ssize_t> lo * self.net.inputs
        cdef Py_ssize_t slots = max(capacity, DEFER)  # deferred windows wait in X, A and Y
        self.work.capacity = capacity
        self.work.pending = 0
        self.work.X = <float *> malloc(slots * max(self.net.inputs, 1) * sizeof(float))
        self.work.A = <float *> malloc(slots * max(self.net.hidden, 1) * sizeof(float))
        self.work.dA = <float *> malloc(<Py_ssize_t> capacity * max(self.net.hidden, 1) * sizeof(float))
        self.work.dX = <float *> malloc(<Py_ssize_t> capacity * max(self.net.inputs, 1) * sizeof(float))
        self.work.Y = <float *> malloc(slots * self.net.vocab * sizeof(float))
        self.work.G = <float *> malloc(DEFER * max(self.net.hidden, 1) * sizeof(float))
        self.work.steps = <float *> malloc(DEFER * sizeof(float))
        self.work.coef = <float *> malloc(DEFER * sizeof(float))
        self.work.coef_in = <float *> malloc(DEFER * sizeof(float))
        self.work.xdot = <float *> malloc(DEFER * sizeof(float))
        if not (self.work.X and self.work.A and self.work.dA and self.work.dX and self.work.Y
                and self.work.G and self.work.steps and self.work.coef and self.work.coef_in
                and self.work.xdot):
            raise MemoryError()

    def __dealloc__(self):
        free(self.work.X)
        free(self.work.A)
        free(self.work.dA)
        free(self.work.dX)
        free(self.work.Y)
        free(self.work.G)
        free(self.work.steps)
        free(self.work.coef)
        free(self.work.coef_in)
        free(self.work.xdot)
        sampling_free(&self.sampling)

    def train(self, const int[:, ::1] windows, int batch, double lr0, double decay_rate,
              long long updates, long long update_stride, double weight_decay):
        """SGD over `windows` in batches; update t uses lr0 / (1 + decay_rate * t), with t
        = updates, updates + update_stride, ... (threads interleave their counts).
        Returns (sum of log p(target), updates done)."""
        cdef Py_ssize_t start, count = windows.shape[0]
        cdef int K
        cdef double total = 0, rate
        cdef long long done = 0
        cdef float keep
        cdef double pending = 1  # dense decay not yet applied: applied in bulk (cheap at batch 1)
        cdef int since = 0, decay_every = max(1, 64 // batch)
        if count == 0:
            return 0.0, 0
        if batch > self.work.capacity or windows.shape[1] != self.net.context + 1:
            raise ValueError("batch larger than the work buffers, or windows of the wrong order")
        with nogil:
            start = 0
            while start < count:
                K = <int> min(<Py_ssize_t> batch, count - start)
                if K > 1:
                    flush(&self.net, &self.work)
                rate = lr0 / (1 + decay_rate * (updates + done * update_stride))
                total += forward(&self.net, &self.work, &windows[start, 0], K)
                keep = <float> (1 - rate * weight_decay)
                backward(&self.net, &self.work, &windows[start, 0], K, <float> rate, keep)
                if weight_decay > 0:  # decay of the dense weights (not the biases)
                    pending *= pow(1 - rate * weight_decay, K)
                    since += 1
                if self.work.pending == DEFER or start + K >= count:
                    flush(&self.net, &self.work)
                if since and (since >= decay_every or start + K >= count):
                    flush(&self.net, &self.work)
                    decay_dense(&self.net, <float> pending)
                    pending = 1
                    since = 0
                start += K
                done += 1
        return total, done

    def train_sampled(self, const int[:, ::1] windows, int batch, double lr0, double decay_rate,
                      long long updates, long long update_stride, double weight_decay, int samples,
                      Proposal proposal, unsigned long long seed):
        """As train, with the importance-sampling gradient of `samples` words drawn from the
        proposal, shared by the windows of a batch. Returns (sum of estimated log
        p(target), updates done, sum of effective sample sizes)."""
        cdef Py_ssize_t start, count = windows.shape[0]
        cdef int K
        cdef double total = 0, rate, pending = 1, ess = 0
        cdef long long done = 0
        cdef int since = 0, decay_every = max(1, 1024 // batch)  # U and W are touched sparsely
        cdef Sampling sp
        if count == 0:
            return 0.0, 0, 0.0
        if batch > self.work.capacity or windows.shape[1] != self.net.context + 1:
            raise ValueError("batch larger than the work buffers, or windows of the wrong order")
        if samples < 1 or proposal.vocab_size != self.net.vocab:
            raise ValueError("no samples, or a proposal of the wrong size")
        proposal.attach(&sp)
        sp.rng = seed
        try:
            if not sampling_alloc(&sp, samples, batch, self.net.hidden, self.net.inputs, self.net.vocab):
                raise MemoryError()
            with nogil:
                start = 0
                while start < count:
                    K = <int> min(<Py_ssize_t> batch, count - start)
                    rate = lr0 / (1 + decay_rate * (updates + done * update_stride))
                    total += sampled_step(&self.net, &self.work, &sp, &windows[start, 0], K, <float> rate,
                                          <float> (1 - rate * weight_decay), &ess)
                    if weight_decay > 0:
                        pending *= pow(1 - rate * weight_decay, K)
                        since += 1
                    if since and (since >= decay_every or start + K >= count):
                        decay_dense(&self.net, <float> pending)
                        pending = 1
                        since = 0
                    start += K
                    done += 1
        finally:
            sampling_free(&sp)
        return total, done, ess

    # -- the parameter-parallel output layer, one phase at a time -------------------------
    def block_scores(self, const int[:, ::1] windows, float[::1] top):
        """Scores of this block's words for each window; `top` gets their maxima."""
        cdef int K = windows.shape[0], i, j, V = self.net.vocab
        cdef float best
        cdef float *y
        self._check_block(windows)
        with nogil:
            scores(&self.net, &self.work, &windows[0, 0], K)
            for i in range(K):
                y = self.work.Y + <Py_ssize_t> i * V
                best = -3.4e38
                for j in range(V):
                    best = y[j] if y[j] > best else best
                top[i] = best
        
    def block_exponentials(self, const int[:, ::1] windows, const float[::1] top, double[::1] out):
        """With the maxima over all blocks: out[i] = sum of this block's exp(y - top), and
        out[K + i] = y(target) - top when this block holds the target, else 0."""
        cdef int K = windows.shape[0], n = self.net.context + 1, i, j, t, V = self.net.vocab
        cdef float total
        cdef float *y
        with nogil:
            for i in range(K):
                y = self.work.Y + <Py_ssize_t> i * V
                t = windows[i, n - 1] - self.lo
                out[K + i] = y[t] - top[i] if 0 <= t < V else 0
                for j in range(V):
                    y[j] = expf(y[j] - top[i])
                total = 0
                for j in range(V):
                    total += y[j]
                out[i] = total

    def block_backward(self, const int[:, ::1] windows, const double[::1] sums, float rate, float[::1] partial):
        """With the normalisers over all blocks: dL/dy of this block, this block's share of
        dL/da and of the direct dL/dx into `partial` (K x hidden, then K x inputs), and the
        steps on the block's rows of U, W and b."""
        cdef int K = windows.shape[0], n = self.net.context + 1, i, j, t, V = self.net.vocab
        cdef Py_ssize_t hidden_part = <Py_ssize_t> K * self.net.hidden
        cdef float inverse
        cdef float *y
        with nogil:
            for i in range(K):
                y = self.work.Y + <Py_ssize_t> i * V
                inverse = <float> (1 / sums[i])
                for j in range(V):
                    y[j] *= inverse
                t = windows[i, n - 1] - self.lo
                if 0 <= t < V:
                    y[t] -= 1
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

    def block_sampled_begin(self, int samples, Proposal proposal, unsigned long long seed):
        """Start a chunk of importance-sampled batches: every block draws the same words
        (same proposal, same seed) and scores those it holds."""
        if samples < 1 or proposal.vocab_size < self.lo + self.net.vocab:
            raise ValueError("no samples, or a proposal of the wrong size")
        if self.sampling.count != samples:
            sampling_free(&self.sampling)
            if not sampling_alloc(&self.sampling, samples, self.work.capacity, self.net.hidden, self.net.inputs,
                                  proposal.vocab_size):
                raise MemoryError()
        self.proposal = proposal
        proposal.attach(&self.sampling)
        self.sampling.rng = seed

    def block_sampled_scores(self, const int[:, ::1] windows, float[::1] top):
        """Draw the batch's samples; score the held ones (y - log Q) and the targets held;
        `top` gets each window's maximum over the held samples."""
        cdef Sampling *sp = &self.sampling
        cdef int K = windows.shape[0], n = self.net.context + 1, i, j, m, t, word
        cdef int h = self.net.hidden, I = self.net.inputs, V = self.net.vocab
        cdef float best
        cdef float *g
        self._check_block(windows)
        if sp.count == 0:
            raise ValueError("block_sampled_begin first")
        with nogil:
            hidden_layer(&self.net, &self.work, &windows[0, 0], K)
            draw_samples(sp, &windows[0, 0], K, n)
            merge_duplicates(sp)
            sp.held = 0
            for j in range(sp.distinct):
                word = sp.words[j] - self.lo
                if 0 <= word < V:
                    m = sp.held
                    sp.owned[m] = j
                    sp.held += 1
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
            for i in range(K):
                g = sp.weights + i * sp.held
                best = -3.4e38
                for m in range(sp.held):
                    g[m] -= sp.sample_log_q[sp.owned[m]]
                    best = g[m] if g[m] > best else best
                top[i] = best
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
        cdef Sampling *sp = &self.sampling
        cdef int K = windows.shape[0], i, m
        cdef float value
        cdef float *g
        with nogil:
            for i in range(K):
                g = sp.weights + i * sp.held
                out[i] = 0
                out[K + i] = 0
                for m in range(sp.held):
                    value = expf(g[m] - top[i])
                    g[m] = value
                    out[i] += value
                    out[K + i] += value * value / sp.multiplicity[sp.owned[m]]
                out[2 * K + i] = sp.targets[i]

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
        decay_dense(&self.net, factor)

    def _check_block(self, const int[:, ::1] windows):
        if windows.shape[0] > self.work.capacity or windows.shape[1] != self.net.context + 1:
            raise ValueError("batch larger than the work buffers, or windows of the wrong order")
        if self.work.pending:
            raise ValueError("deferred updates pending")

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


# -- the energy network (Bengio et al. 2003 sec. 5.1; Bengio & Senecal 2003 sec. 1.3) -------

cdef class EnergyNetwork:
    """Score y_w = -E(w, h) = b_w + U_w . tanh(d + H z_w) (+ W_w . z_w with direct
    connections), z_w = (C(w), C(w_t-1), ..., C(w_t-n+1)): the next word's own feature
    vector enters the hidden layer. H's first m columns see C(w) (H_target), the rest the
    context (H_context). Normalised over the vocabulary when scoring; trained with the
    exact gradient (`gradients`, for small vocabularies) or by importance sampling."""
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
    cdef float *A  # V x h: activations of every word's hidden layer, then dL/d(pre-activation)
    cdef float *Y  # V scores

    def __init__(self, params, int order, bint bias=True):
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
        cdef float[::1] Y = np.empty(self.V, dtype=np.float32)
        self.buffers = (P, A, Y)
        self.P, self.A, self.Y = &P[0, 0], &A[0, 0], &Y[0]

    cdef void context_part(self, const int *window, float *x, float *c) noexcept nogil:
        """x = the context's feature vectors; c = d + H_context x."""
        cdef int k
        for k in range(self.n - 1):
            memcpy(x + k * self.m, self.C + <Py_ssize_t> window[k] * self.m, self.m * sizeof(float))
        memcpy(c, self.d, self.h * sizeof(float))
        gemm(b'N', b'T', 1, self.h, self.context_width, 1.0, x, self.context_width, self.H + self.m, self.width,
             1.0, c, self.h)

    cdef float score(self, int word, const float *c, const float *x, float *a) noexcept nogil:
        """y_word for the context (c, x); a gets tanh(c + H_target C(word))."""
        cdef int k
        cdef float y
        memcpy(a, c, self.h * sizeof(float))
        gemm(b'N', b'T', 1, self.h, self.m, 1.0, self.C + <Py_ssize_t> word * self.m, self.m, self.H, self.width,
             1.0, a, self.h)
        for k in range(self.h):
            a[k] = tanhf(a[k])
        y = self.b[word] + dot(self.h, self.U + <Py_ssize_t> word * self.h, a)
        if self.direct:
            y += dot(self.m, self.W + <Py_ssize_t> word * self.width, self.C + <Py_ssize_t> word * self.m)
            y += dot(self.context_width, self.W + <Py_ssize_t> word * self.width + self.m, x)
        return y

    cdef void all_scores(self, const float *c, const float *x, float *y) noexcept nogil:
        """y_w for every word (needs P from `project`), their activations in A."""
        cdef int w, k
        cdef float total
        cdef float *a
        cdef float *p
        for w in range(self.V):
            a = self.A + <Py_ssize_t> w * self.h
            p = self.P + <Py_ssize_t> w * self.h
            for k in range(self.h):
                a[k] = tanhf(p[k] + c[k])
            total = self.b[w]
            for k in range(self.h):
                total += self.U[<Py_ssize_t> w * self.h + k] * a[k]
            y[w] = total
        if self.direct:
            for w in range(self.V):
                y[w] += dot(self.m, self.W + <Py_ssize_t> w * self.width, self.C + <Py_ssize_t> w * self.m)
            gemm(b'N', b'T', 1, self.V, self.context_width, 1.0, x, self.context_width, self.W + self.m, self.width,
                 1.0, y, self.V)

    cdef void project(self) noexcept nogil:
        gemm(b'N', b'T', self.V, self.h, self.m, 1.0, self.C, self.m, self.H, self.width, 0.0, self.P, self.h)

    cdef double log_normaliser(self, const float *y) noexcept nogil:
        """log sum_w exp(y_w), with max-subtraction."""
        cdef int j
        cdef float top = y[0], total = 0
        for j in range(self.V):
            top = y[j] if y[j] > top else top
        for j in range(self.V):
            total += expf(y[j] - top)
        return top + log(total)

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
                self.all_scores(&c[0], &x[0], y)
                out[i] = y[windows[i, self.n - 1]] - self.log_normaliser(y)

    def gradients(self, const int[:, ::1] windows, grads):
        """Sum over the windows of the exact gradient of -log p(target) (every word's
        energy), into arrays shaped like the parameters; returns the sum of log p."""
        cdef float[:, ::1] gC = grads["C"], gH = grads["H"], gU = grads["U"], gW
        cdef float[::1] gb = grads["b"], gd = grads["d"]
        cdef float *A = self.A
        cdef float[::1] x = np.empty(max(self.context_width, 1), dtype=np.float32)
        cdef float[::1] c = np.empty(self.h, dtype=np.float32)
        cdef float[::1] dc = np.empty(self.h, dtype=np.float32)
        cdef float[::1] dx = np.empty(max(self.context_width, 1), dtype=np.float32)
        cdef float *y = self.Y
        cdef Py_ssize_t i, at
        cdef int j, k, t, one = 1
        cdef float g, unit = 1
        cdef double normaliser
        cdef double logp = 0
        if self.direct:
            gW = grads["W"]
        for name in grads:
            grads[name][...] = 0
        with nogil:
            self.project()
            for i in range(windows.shape[0]):
                t = windows[i, self.n - 1]
                self.context_part(&windows[i, 0], &x[0], &c[0])
                self.all_scores(&c[0], &x[0], y)
                normaliser = self.log_normaliser(y)
                logp += y[t] - normaliser
                for j in range(self.V):  # y becomes dL/dy = p - 1[target]
                    y[j] = expf(y[j] - normaliser)
                y[t] -= 1
                memset(&dc[0], 0, self.h * sizeof(float))
                memset(&dx[0], 0, max(self.context_width, 1) * sizeof(float))
                for j in range(self.V):
                    g = y[j]
                    gb[j] += g
                    for k in range(self.h):
                        at = <Py_ssize_t> j * self.h + k
                        gU[j, k] += g * A[at]
                        A[at] = g * self.U[at] * (1 - A[at] * A[at])  # dL/d(pre-activation)
                        dc[k] += A[at]
                # H_target and the C(w) of every word, through dpre (now in A)
                gemm(b'T', b'N', self.h, self.m, self.V, 1.0, A, self.h, self.C, self.m, 1.0, &gH[0, 0],
                     self.width)
                gemm(b'N', b'N', self.V, self.m, self.h, 1.0, A, self.h, self.H, self.width, 1.0,
                     &gC[0, 0], self.m)
                if self.direct:
                    for j in range(self.V):
                        g = y[j]
                        for k in range(self.m):
                            gW[j, k] += g * self.C[<Py_ssize_t> j * self.m + k]
                            gC[j, k] += g * self.W[<Py_ssize_t> j * self.width + k]
                    gemm(b'T', b'N', self.V, self.context_width, 1, 1.0, y, self.V, &x[0], self.context_width,
                         1.0, &gW[0, 0] + self.m, self.width)
                    gemm(b'N', b'N', 1, self.context_width, self.V, 1.0, y, self.V, self.W + self.m, self.width,
                         1.0, &dx[0], self.context_width)
                for k in range(self.h):
                    gd[k] += dc[k]
                gemm(b'T', b'N', self.h, self.context_width, 1, 1.0, &dc[0], self.h, &x[0], self.context_width, 1.0,
                     &gH[0, 0] + self.m, self.width)
                gemm(b'N', b'N', 1, self.context_width, self.h, 1.0, &dc[0], self.h, self.H + self.m, self.width,
                     1.0, &dx[0], self.context_width)
                for k in range(self.n - 1):
                    saxpy(&self.m, &unit, &dx[0] + k * self.m, &one, &gC[windows[i, k], 0], &one)
        return logp

    def train(self, const int[:, ::1] windows, int batch, double lr0, double decay_rate,
              long long updates, long long update_stride, double weight_decay):
        """SGD with the exact gradient (every word's energy: for small vocabularies),
        the schedule of Network.train; weight decay on C, H, U, W every update."""
        grads = {name: np.empty_like(array) for name, array in self.keep_alive.items()}
        total, done = 0.0, 0
        for start in range(0, windows.shape[0], batch):
            rate = lr0 / (1 + decay_rate * (updates + done * update_stride))
            total += self.gradients(windows[start:start + batch], grads)
            for name, array in self.keep_alive.items():
                if name not in ("b", "d") and weight_decay > 0:
                    array *= np.float32(1 - rate * weight_decay)
                if self.bias or name not in ("b", "d"):
                    array -= np.float32(rate) * grads[name]
            done += 1
        return total, done

    def train_sampled(self, const int[:, ::1] windows, int batch, double lr0, double decay_rate,
                      long long updates, long long update_stride, double weight_decay, int samples,
                      Proposal proposal, unsigned long long seed):
        """Importance-sampling SGD (Bengio & Senecal 2003, Algorithm 3), one window per
        update: the target's energy pushed down, N sampled words' pulled up with weights
        r_j / sum r, each touching its own rows of C, U, W and b. Returns (sum of
        estimated log p(target), updates done, sum of effective sample sizes)."""
        cdef Sampling sp
        cdef Py_ssize_t i, count = windows.shape[0]
        cdef int j, k, t, word, N = samples, one = 1
        cdef double total = 0, ess = 0, rate, pending = 1
        cdef long long done = 0
        cdef float top, value, r_total, squares, gamma, step, keep
        cdef float[:, ::1] act = np.empty((samples + 1, self.h), dtype=np.float32)
        cdef float[::1] y = np.empty(samples + 1, dtype=np.float32)
        cdef float[::1] x = np.empty(max(self.context_width, 1), dtype=np.float32)
        cdef float[::1] c = np.empty(self.h, dtype=np.float32)
        cdef float[::1] dc = np.empty(self.h, dtype=np.float32)
        cdef float[::1] dx = np.empty(max(self.context_width, 1), dtype=np.float32)
        cdef float[::1] dpre = np.empty(self.h, dtype=np.float32)
        cdef float[::1] dz = np.empty(self.m, dtype=np.float32)
        cdef float[:, ::1] dH = np.empty((self.h, self.width), dtype=np.float32)
        cdef float[:, ::1] old_U = np.empty((samples + 1, self.h), dtype=np.float32)  # the rows before the step
        cdef float[:, ::1] old_C = np.empty((samples + 1, self.m), dtype=np.float32)
        cdef float[:, ::1] old_W = np.empty((samples + 1, self.width if self.direct else 1), dtype=np.float32)
        if batch != 1:
            raise ValueError("the energy network trains one window per update (-batch 1)")
        if samples < 1 or proposal.vocab_size != self.V or windows.shape[1] != self.n:
            raise ValueError("no samples, a proposal of the wrong size, or windows of the wrong order")
        proposal.attach(&sp)
        sp.rng = seed
        if not sampling_alloc(&sp, samples, 1, 1, 1, self.V):
            raise MemoryError()
        try:
            with nogil:
                for i in range(count):
                    rate = lr0 / (1 + decay_rate * (updates + done * update_stride))
                    step = <float> rate
                    keep = <float> (1 - rate * weight_decay)
                    t = windows[i, self.n - 1]
                    self.context_part(&windows[i, 0], &x[0], &c[0])
                    draw_samples(&sp, &windows[i, 0], 1, self.n)
                    for j in range(N + 1):
                        word = t if j == N else sp.words[j]
                        y[j] = self.score(word, &c[0], &x[0], &act[j, 0]) - (0 if j == N else sp.sample_log_q[j])
                        memcpy(&old_U[j, 0], self.U + <Py_ssize_t> word * self.h, self.h * sizeof(float))
                        memcpy(&old_C[j, 0], self.C + <Py_ssize_t> word * self.m, self.m * sizeof(float))
                        if self.direct:
                            memcpy(&old_W[j, 0], self.W + <Py_ssize_t> word * self.width, self.width * sizeof(float))
                    top = y[0]
                    for j in range(N):
                        top = y[j] if y[j] > top else top
                    r_total = 0
                    squares = 0
                    for j in range(N):
                        y[j] = expf(y[j] - top)
                        r_total += y[j]
                        squares += y[j] * y[j]
                    ess += <double> r_total * r_total / squares
                    total += y[N] - (top + log(<double> r_total / N))
                    memset(&dc[0], 0, self.h * sizeof(float))
                    memset(&dx[0], 0, max(self.context_width, 1) * sizeof(float))
                    memset(&dH[0, 0], 0, <Py_ssize_t> self.h * self.width * sizeof(float))
                    for j in range(N + 1):  # each candidate: its coefficient in dL/dy, old rows only
                        word = t if j == N else sp.words[j]
                        gamma = -1 if j == N else y[j] / r_total
                        for k in range(self.h):
                            dpre[k] = gamma * old_U[j, k] * (1 - act[j, k] * act[j, k])
                            dc[k] += dpre[k]
                        # dz = H_target^T dpre (+ gamma W_w)
                        gemm(b'N', b'N', 1, self.m, self.h, 1.0, &dpre[0], self.h, self.H, self.width, 0.0,
                             &dz[0], self.m)
                        gemm(b'T', b'N', self.h, self.m, 1, 1.0, &dpre[0], self.h, &old_C[j, 0], self.m, 1.0,
                             &dH[0, 0], self.width)
                        if self.direct:
                            for k in range(self.m):
                                dz[k] += gamma * old_W[j, k]
                            value = gamma
                            saxpy(&self.context_width, &value, &old_W[j, 0] + self.m, &one, &dx[0], &one)
                            value = -step * gamma
                            saxpy(&self.m, &value, &old_C[j, 0], &one, self.W + <Py_ssize_t> word * self.width, &one)
                            saxpy(&self.context_width, &value, &x[0], &one,
                                  self.W + <Py_ssize_t> word * self.width + self.m, &one)
                        value = -step * gamma
                        saxpy(&self.h, &value, &act[j, 0], &one, self.U + <Py_ssize_t> word * self.h, &one)
                        if self.bias:
                            self.b[word] -= step * gamma
                        if keep != 1:
                            scale(self.m, keep, self.C + <Py_ssize_t> word * self.m)
                        value = -step
                        saxpy(&self.m, &value, &dz[0], &one, self.C + <Py_ssize_t> word * self.m, &one)
                    # the context side, shared by every candidate
                    gemm(b'N', b'N', 1, self.context_width, self.h, 1.0, &dc[0], self.h, self.H + self.m,
                         self.width, 1.0, &dx[0], self.context_width)
                    gemm(b'T', b'N', self.h, self.context_width, 1, 1.0, &dc[0], self.h, &x[0],
                         self.context_width, 1.0, &dH[0, 0] + self.m, self.width)
                    value = -step
                    k = self.h * self.width
                    saxpy(&k, &value, &dH[0, 0], &one, self.H, &one)
                    if self.bias:
                        saxpy(&self.h, &value, &dc[0], &one, self.d, &one)
                    for k in range(self.n - 1):
                        word = windows[i, k]
                        if keep != 1:
                            scale(self.m, keep, self.C + <Py_ssize_t> word * self.m)
                        saxpy(&self.m, &value, &dx[0] + k * self.m, &one, self.C + <Py_ssize_t> word * self.m, &one)
                    pending *= 1 - rate * weight_decay
                    done += 1
                    if weight_decay > 0 and (done % 1024 == 0 or i == count - 1):
                        scale(self.V * self.h, <float> pending, self.U)
                        scale(self.h * self.width, <float> pending, self.H)
                        if self.direct:
                            scale(self.V * self.width, <float> pending, self.W)
                        pending = 1
        finally:
            sampling_free(&sp)
        return total, done, ess

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
            self.all_scores(&c[0], &x[0], self.Y)
            normaliser = self.log_normaliser(self.Y)
            for j in range(self.V):
                out[j] = self.Y[j] - normaliser
