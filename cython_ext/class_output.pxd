# Mikolov's class-factored output layer (RNNLM, faster-rnnlm's "class" output): with the
# vocabulary cut into K classes,
#
#     p(w | s) = softmax(Vc s + bc)[c(w)] * softmax over the words v of c(w) of (V_v s + d_v)
#
# so a row reads the K class rows and the rows of its target's class only: O((K + |c|) h)
# per word instead of O(|V| h), and the distribution is still exactly normalised. Inline
# functions over a segment's N rows (cimported by the recurrent kernel).
from libc.math cimport exp, log
from libc.string cimport memcpy, memset

from kernel_common cimport axpy_row, dot_row, gemm, softmax_row, softmax_terms


cdef struct Classes:
    int count, largest
    int *words       # the words of class 0, then of class 1, ... (each class in id order)
    int *starts      # count + 1 offsets into words
    int *class_of    # word -> class
    int *slot_of     # word -> its place within its class


cdef inline void class_scores(const Classes *k, int c, const float *s, int width, const float *V, const float *d,
                              float *u) noexcept nogil:
    """u[j] = V_w . s + d_w for the words w of class c."""
    cdef int j, w
    for j in range(k.starts[c + 1] - k.starts[c]):
        w = k.words[k.starts[c] + j]
        u[j] = dot_row(width, V + <Py_ssize_t> w * width, s) + (d[w] if d != NULL else 0)


cdef inline double class_forward(const Classes *k, const float *top, Py_ssize_t N, int width, const float *Vc,
                                 const float *bc, const float *V, const float *d, const int *targets, float *Z,
                                 float *U, double *logp) noexcept nogil:
    """Z (N x K): each row's class probabilities; U (N x largest): the probabilities within
    its target's class. Returns the sum of log p of the targets >= 0, each also in logp[r]."""
    cdef Py_ssize_t r
    cdef int K = k.count, c, t
    cdef double total = 0, value
    for r in range(N):
        if bc != NULL:
            memcpy(Z + r * K, bc, K * sizeof(float))
        else:
            memset(Z + r * K, 0, K * sizeof(float))
    gemm(b'N', b'T', <int> N, K, width, 1.0, top, width, Vc, width, 1.0, Z, K)
    for r in range(N):
        t = targets[r]
        if t < 0:
            continue
        c = k.class_of[t]
        value = softmax_row(Z + r * K, K, c)
        class_scores(k, c, top + r * width, width, V, d, U + r * k.largest)
        value += softmax_row(U + r * k.largest, k.starts[c + 1] - k.starts[c], k.slot_of[t])
        total += value
        if logp != NULL:
            logp[r] = value
    return total


cdef inline void class_pairs(const Classes *k, const float *top, int B, int width, const float *Vc, const float *bc,
                             const float *V, const float *d, const int *rows, const int *targets, Py_ssize_t P,
                             float *Z, float *totals, float *u, double *logp) noexcept nogil:
    """class_forward's log p of each pair's target (targets[p] >= 0) after the row
    rows[p] of top (B rows) in logp[p]: the class softmax once per row (Z: B x K, totals:
    B), the softmax within a class once per run of pairs of the same row and class (u:
    largest floats), so that a row's several targets share them."""
    cdef Py_ssize_t p
    cdef int K = k.count, b, c, t, last_row = -1, last_class = -1
    cdef float within = 1
    for b in range(B):
        if bc != NULL:
            memcpy(Z + <Py_ssize_t> b * K, bc, K * sizeof(float))
        else:
            memset(Z + <Py_ssize_t> b * K, 0, K * sizeof(float))
    gemm(b'N', b'T', B, K, width, 1.0, top, width, Vc, width, 1.0, Z, K)
    for b in range(B):
        totals[b] = softmax_terms(Z + <Py_ssize_t> b * K, K)
    for p in range(P):
        t = targets[p]
        if t < 0:
            continue
        b, c = rows[p], k.class_of[t]
        if b != last_row or c != last_class:
            class_scores(k, c, top + <Py_ssize_t> b * width, width, V, d, u)
            within = softmax_terms(u, k.starts[c + 1] - k.starts[c])
            last_row, last_class = b, c
        logp[p] = log(<double> Z[<Py_ssize_t> b * K + c] / totals[b]) + log(<double> u[k.slot_of[t]] / within)


cdef inline void class_backward(const Classes *k, const float *top, Py_ssize_t N, int width, const float *Vc,
                                const float *V, const int *targets, float *Z, float *U, float *gVc, float *gbc,
                                float scale, float *gV, float bias_scale, float *gd, float *dTop) noexcept nogil:
    """From class_forward's probabilities, the gradients of -sum log p: gVc and gbc
    (written; gbc NULL without biases) and dL/d(top) in dTop (N x width, written), then
    scale times the gradients of the rows of V of the targets' classes added to gV, and
    bias_scale times those of d to gd (either NULL: not wanted). Called with gV = V, gd = d
    and the scales -rate, that last part is an SGD step in place, after every row has read
    the old V."""
    cdef Py_ssize_t r
    cdef int K = k.count, c, t, j
    cdef float *u
    for r in range(N):
        if targets[r] >= 0:
            Z[r * K + k.class_of[targets[r]]] -= 1
            U[r * k.largest + k.slot_of[targets[r]]] -= 1
        else:
            memset(Z + r * K, 0, K * sizeof(float))
    gemm(b'T', b'N', K, width, <int> N, 1.0, Z, K, top, width, 0.0, gVc, width)
    if gbc != NULL:
        memset(gbc, 0, K * sizeof(float))
        for r in range(N):
            axpy_row(K, 1.0, Z + r * K, gbc)
    gemm(b'N', b'N', <int> N, width, K, 1.0, Z, K, Vc, width, 0.0, dTop, width)
    for r in range(N):
        if targets[r] >= 0:
            c, u = k.class_of[targets[r]], U + r * k.largest
            for j in range(k.starts[c + 1] - k.starts[c]):
                axpy_row(width, u[j], V + <Py_ssize_t> k.words[k.starts[c] + j] * width, dTop + r * width)
    for r in range(N):
        if targets[r] >= 0:
            c, u = k.class_of[targets[r]], U + r * k.largest
            for j in range(k.starts[c + 1] - k.starts[c]):
                t = k.words[k.starts[c] + j]
                if gV != NULL:
                    axpy_row(width, scale * u[j], top + r * width, gV + <Py_ssize_t> t * width)
                if gd != NULL:
                    gd[t] += bias_scale * u[j]


cdef inline void class_distribution(const Classes *k, const float *s, int width, const float *Vc, const float *bc,
                                    const float *V, const float *d, float *z, float *u, double *out) noexcept nogil:
    """log p of every word after state s (z: K floats, u: largest floats of work space)."""
    cdef int K = k.count, c, j
    cdef double class_logp
    for c in range(K):
        z[c] = dot_row(width, Vc + <Py_ssize_t> c * width, s) + (bc[c] if bc != NULL else 0)
    softmax_row(z, K, 0)
    for c in range(K):
        class_logp = log(<double> z[c])
        class_scores(k, c, s, width, V, d, u)
        softmax_row(u, k.starts[c + 1] - k.starts[c], 0)
        for j in range(k.starts[c + 1] - k.starts[c]):
            out[k.words[k.starts[c] + j]] = class_logp + log(<double> u[j])


cdef inline int class_attach(Classes *k, lists, int words) except -1:
    """Point k at the lists (members, starts, class_of, slot_of: int32 arrays that the
    caller keeps alive; nplmtk.neural.recurrent.class_lists), checked here once since the
    loops above do not check them."""
    members, starts, class_of, slot_of = lists
    count = len(starts) - 1
    sizes = starts[1:count + 1] - starts[0:count]
    if (count < 1 or starts[0] != 0 or starts[count] != words or (sizes < 1).any()
            or members.shape != (words,) or class_of.shape != (words,) or slot_of.shape != (words,)
            or members.min() < 0 or members.max() >= words or class_of.min() < 0 or class_of.max() >= count
            or slot_of.min() < 0 or (slot_of >= sizes[class_of]).any()):
        raise ValueError("classes that do not cover the vocabulary")
    cdef int[::1] m = members, s = starts, c = class_of, o = slot_of
    k.words, k.starts, k.class_of, k.slot_of = &m[0], &s[0], &c[0], &o[0]
    k.count, k.largest = count, int(sizes.max())
    return 0
