# The mixture of softmaxes (Yang, Dai, Salakhutdinov & Cohen 2018, "Breaking the Softmax
# Bottleneck", their model.py) over the recurrent kernel's top layer, included in
# rnn_kernels.pyx: for the top layer's output h of a row,
#     pi = softmax(Wp h),  h_k = dropout(tanh(Wk_k h + bk_k)),  P(w | h) = sum_k pi_k P_k(w | h_k)
# with P_k the network's own output layer (full softmax, or class-factored: P_k(c(w) | h_k)
# P_k(w | c(w), h_k)) and its weights (V, or C when tied) shared by the K components. The K
# contexts of N rows are one (N K) x w matrix, row r K + k, made by one sgemm; the mixture is
# summed in double in log space, the largest term subtracted first.
from libc.math cimport exp, tanhf


cdef double mixture_forward(Rnn *net, const float *top, Py_ssize_t N, int T, bint train, const int *targets,
                            double *logp) noexcept nogil:
    """The sum of log P(targets[r] | row r of top) over the N rows whose target is >= 0,
    each also in logp[r] when logp is given; with `train` (N = T steps of the streams),
    the contexts dropped. Leaves pi in prior and the posteriors in resp for the backward."""
    cdef Mixture *x = &net.mos
    cdef int K = x.count, w = net.layer[net.layers - 1].hidden, V = net.vocab, k, t
    cdef Py_ssize_t r, i, NK = N * K
    cdef double total = 0, value, most, terms
    cdef float *H = x.A
    cdef float *z
    gemm(b'N', b'T', <int> N, K, w, 1.0, top, w, x.Wp, w, 0.0, x.prior, K)
    for r in range(N):
        memcpy(x.A + r * K * w, x.bk, K * w * sizeof(float))
    gemm(b'N', b'T', <int> N, K * w, w, 1.0, top, w, x.Wk, w, 1.0, x.A, K * w)
    for i in range(NK * w):
        x.A[i] = tanhf(x.A[i])
    if train and x.drop > 0:
        memcpy(x.H, x.A, NK * w * sizeof(float))
        drop(x.H, x.mask, T, <Py_ssize_t> net.streams * K * w, x.drop, net.locked, net.rng)
        H = x.H
    for i in range(NK):
        x.targets[i] = targets[i // K]
    if net.classes.count:
        class_forward(&net.classes, H, NK, w, net.Vc, net.bc, net.V, net.d, x.targets, x.Y, x.U, x.logp)
    else:
        for i in range(NK):
            if net.d != NULL:
                memcpy(x.Y + i * V, net.d, V * sizeof(float))
            else:
                memset(x.Y + i * V, 0, V * sizeof(float))
        gemm(b'N', b'T', <int> NK, V, w, 1.0, H, w, net.V, w, 1.0, x.Y, V)
        for i in range(NK):
            if x.targets[i] >= 0:
                x.logp[i] = softmax_row(x.Y + i * V, V, x.targets[i])
    for r in range(N):
        if targets[r] < 0:
            continue
        z = x.prior + r * K
        softmax_row(z, K, 0)  # pi in place
        most = -1e300
        for k in range(K):
            x.resp[r * K + k] = <float> 0
            if z[k] > 0 and log(<double> z[k]) + x.logp[r * K + k] > most:
                most = log(<double> z[k]) + x.logp[r * K + k]
        terms = 0
        for k in range(K):
            if z[k] > 0:
                terms += exp(log(<double> z[k]) + x.logp[r * K + k] - most)
        value = most + log(terms)
        for k in range(K):
            if z[k] > 0:
                x.resp[r * K + k] = <float> exp(log(<double> z[k]) + x.logp[r * K + k] - value)
        total += value
        if logp != NULL:
            logp[r] = value
    return total


cdef void mixture_backward(Rnn *net, Py_ssize_t N, int w) noexcept nogil:
    """From mixture_forward's values (with train), the gradients of -sum log P: of the
    output layer (each component's row weighted by its posterior), of Wp, Wk and bk, and
    dL/d(top) in dOut."""
    cdef Mixture *x = &net.mos
    cdef int K = x.count, V = net.vocab, t, c, j, k, size
    cdef Py_ssize_t r, i, NK = N * K
    cdef const float *top = net.layer[net.layers - 1].out
    cdef float *H = x.H if x.drop > 0 else x.A
    cdef float *u
    cdef float *z
    cdef float q, a
    if net.classes.count:
        # class_backward subtracts 1 at the target: rows given as q p + (1 - q) 1[target] leave q (p - 1[target])
        for i in range(NK):
            t = x.targets[i]
            if t < 0:
                continue
            q, c = x.resp[i], net.classes.class_of[t]
            z = x.Y + i * net.classes.count
            for j in range(net.classes.count):
                z[j] *= q
            z[c] += 1 - q
            u = x.U + i * net.classes.largest
            size = net.classes.starts[c + 1] - net.classes.starts[c]
            for j in range(size):
                u[j] *= q
            u[net.classes.slot_of[t]] += 1 - q
        memset(net.gV, 0, <Py_ssize_t> V * w * sizeof(float))
        if net.gd != NULL:
            memset(net.gd, 0, V * sizeof(float))
        class_backward(&net.classes, H, NK, w, net.Vc, net.V, x.targets, x.Y, x.U, net.gVc, net.gbc, 1.0, net.gV,
                       1.0, net.gd, x.dH)
    else:
        for i in range(NK):
            t = x.targets[i]
            if t < 0:
                memset(x.Y + i * V, 0, V * sizeof(float))
                continue
            q = x.resp[i]
            for j in range(V):
                x.Y[i * V + j] *= q
            x.Y[i * V + t] -= q
        gemm(b'T', b'N', V, w, <int> NK, 1.0, x.Y, V, H, w, 0.0, net.gV, w)
        if net.gd != NULL:
            column_sums(x.Y, NK, V, net.gd)
        gemm(b'N', b'N', <int> NK, w, V, 1.0, x.Y, V, net.V, w, 0.0, x.dH, w)
    for r in range(N):  # the prior's scores: dL/dz = pi - posterior
        for k in range(K):
            if net.targets[r] >= 0:
                x.prior[r * K + k] -= x.resp[r * K + k]
            else:
                x.prior[r * K + k] = 0
    gemm(b'T', b'N', K, w, <int> N, 1.0, x.prior, K, top, w, 0.0, x.gWp, w)
    gemm(b'N', b'N', <int> N, w, K, 1.0, x.prior, K, x.Wp, w, 0.0, net.dOut, w)
    for i in range(NK * w):  # back through dropout and tanh
        a = x.A[i]
        x.dH[i] *= 1 - a * a
        if x.drop > 0:
            x.dH[i] *= x.mask[i]
    gemm(b'T', b'N', K * w, w, <int> N, 1.0, x.dH, K * w, top, w, 0.0, x.gWk, w)
    column_sums(x.dH, N, K * w, x.gbk)
    gemm(b'N', b'N', <int> N, w, K * w, 1.0, x.dH, K * w, x.Wk, w, 1.0, net.dOut, w)
    memset(net.dX, 0, N * net.m * sizeof(float))


cdef void mixture_distribution(Rnn *net, Py_ssize_t row, double *out, double[::1] work):
    """log P(w | row `row` of the segment just run forward) for every word w, the
    components' distributions mixed in log space (work: |V| doubles)."""
    cdef Mixture *x = &net.mos
    cdef int K = x.count, w = net.layer[net.layers - 1].hidden, V = net.vocab, k, j
    cdef Py_ssize_t i
    cdef double lp, most
    cdef float *z = x.prior + row * K  # pi (the row's target was set)
    cdef float *H = x.A + row * K * w
    for j in range(V):
        out[j] = -1e300
    for k in range(K):
        if z[k] <= 0:
            continue
        i = row * K + k
        if net.classes.count:
            class_distribution(&net.classes, H + k * w, w, net.Vc, net.bc, net.V, net.d, x.Y + i * net.classes.count,
                               x.U + i * net.classes.largest, &work[0])
        else:
            for j in range(V):
                work[j] = log(<double> x.Y[i * V + j])
        lp = log(<double> z[k])
        for j in range(V):  # out = log(exp(out) + pi_k p_k)
            most = out[j] if out[j] > work[j] + lp else work[j] + lp
            out[j] = most + log(exp(out[j] - most) + exp(work[j] + lp - most))


cdef mixture_attach(RecurrentNetwork self, params, Py_ssize_t N, bint trainable, float drop):
    """The mixture's arrays (Wp, Wk, bk: count from Wp) and buffers, or none (no Wp)."""
    cdef Rnn *net = &self.net
    cdef Mixture *x = &net.mos
    cdef int w = net.layer[net.layers - 1].hidden, K
    cdef int[::1] targets
    cdef double[::1] logp
    x.count = 0
    if "Wp" not in params:
        return
    K = params["Wp"].shape[0]
    if K < 1 or params["Wp"].shape != (K, w) or params["Wk"].shape != (K * w, w) or params["bk"].shape != (K * w,) \
            or net.tree.nodes or net.direct or not 0 <= drop < 1:
        raise ValueError("mixture arrays of the wrong shape, or with a tree or direct connections")
    x.count, x.given_drop, x.drop = K, drop, drop
    x.Wp, x.Wk, x.bk = pointer(params["Wp"]), pointer(params["Wk"]), pointer(params["bk"])
    x.gWp, x.gWk, x.gbk = self._grad("Wp", params, trainable), self._grad("Wk", params, trainable), \
        self._grad("bk", params, trainable)
    x.prior, x.resp = self._buffer("mos_prior", N * K), self._buffer("mos_resp", N * K)
    x.A, x.H = self._buffer("mos_A", N * K * w), self._buffer("mos_H", N * K * w if drop else 1)
    x.mask, x.dH = self._buffer("mos_mask", N * K * w if drop else 1), self._buffer("mos_dH", N * K * w)
    x.Y = self._buffer("mos_Y", N * K * (net.classes.count or net.vocab))
    x.U = self._buffer("mos_U", N * K * net.classes.largest if net.classes.count else 1)
    arrays = [np.zeros(N * K, dtype=np.int32), np.zeros(N * K)]
    self.buffers += arrays
    targets, logp = arrays
    x.targets, x.logp = &targets[0], &logp[0]
