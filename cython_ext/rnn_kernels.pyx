# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""The hot loops of the recurrent models (survey, paper 002, sec. 2.2-2.3), over B
parallel word streams and segments of T steps (truncated BPTT), without the GIL:

    RNN:   s_t = f(U x_t + W s_t-1 + b)
    LSTM:  i, f, o = logistic(U_. x_t + W_. s_t-1 + P_. * c_t-1 + b_.),  g = f(U_g x_t + W_g s_t-1 + b_g)
           c_t = f * c_t-1 + i * g,  s_t = o * f(c_t)
    both:  y_t = V s_t + M x_t + d,  p = softmax(y_t)

x_t the features C(w_t) of the input word (the output layer reads C itself when tied), L
stacked layers, dropout on the non-recurrent connections (a mask per step, or locked: one
per segment) and AWD-LSTM's other regularisers (nplmtk/neural/regularisation.py). The
state s (and c) of every stream is carried from one segment to the next; a step whose
input is <s> starts from a zero state when the model resets at sentences. A segment's
gradient is summed over its words, clipped to a norm of `clip` per word (PyTorch's
clip_grad_norm_ of the mean loss), then stepped by SGD or Adam with the trainer's numbers.
Structs and layers: recurrent_layers.pxd; full softmax: recurrent_output.pxi; update: recurrent_updates.pxd."""
import numpy as np
cimport numpy as cnp
from libc.math cimport log
from libc.string cimport memcpy, memset

from class_output cimport class_attach, class_backward, class_distribution, class_forward, class_pairs
from hs_output cimport tree_attach, tree_backward, tree_distribution, tree_forward
from batch_driver cimport Schedule, Update, drive, schedule_of
from elementwise cimport column_sums
from kernel_common cimport gemm, scale, softmax_row
from nplmtk._ext.sampling_kernels cimport Sampling, draw_samples, merge_duplicates, sampling_free, sampling_start
from recurrent_layers cimport MAX_LAYERS, Layer, Mixture, Regularisers, Rnn, layer_backward, layer_forward
from recurrent_updates cimport carry_state, decay_weights, load_segment, step
from recurrent_regularisers cimport (activation_gradient, drop, drop_weights, drop_words, temporal_gradient,
                                     weight_drop_gradient)
from sampled_output cimport sampled_backward, sampled_rows_gradient, sampled_scores

cnp.import_array()


cdef float *layers_forward(Rnn *net, int T, bint train) noexcept nogil:
    """The input features and the layers of a segment of T steps (net.inputs), with
    dropout when training; returns the top layer's output (T x B x its width)."""
    cdef int B = net.streams, m = net.m, l
    cdef Py_ssize_t N = <Py_ssize_t> T * B, r
    cdef float *top
    cdef Layer *L
    cdef bint words = train and net.drop_words > 0
    if words:
        drop_words(net)
    for r in range(N):
        memcpy(net.X + r * m, net.C + <Py_ssize_t> net.inputs[r] * m, m * sizeof(float))
        if words:
            scale(m, net.word_scale[net.inputs[r]], net.X + r * m)
        net.keep[r] = 0 if net.reset and net.inputs[r] == net.bos else 1
    if train and net.drop_input > 0:
        drop(net.X, net.Xmask, T, <Py_ssize_t> B * m, net.drop_input, net.locked, net.rng)
    top = net.X
    for l in range(net.layers):
        L = &net.layer[l]
        L.Wf = L.W
        if train and net.drop_weight > 0:
            drop_weights(net, L)
        layer_forward(net, L, top, T)
        if L.out != L.S + B * L.hidden:  # without dropout the output is the states themselves
            memcpy(L.out, L.S + B * L.hidden, N * L.hidden * sizeof(float))
        if train and L.drop > 0:
            drop(L.out, L.mask, T, <Py_ssize_t> B * L.hidden, L.drop, net.locked, net.rng)
        top = L.out
    return top


cdef double forward(Rnn *net, int T, bint train, double *logp) noexcept nogil:
    """Scores of a segment of T steps (net.inputs, net.targets): the sum of log p of its
    targets (those >= 0), each also in logp[step * B + stream] when logp is given."""
    cdef const float *top = layers_forward(net, T, train)
    if net.mos.count:
        return mixture_forward(net, top, <Py_ssize_t> T * net.streams, T, train, net.targets, logp)
    return output_forward(net, top, net.X, <Py_ssize_t> T * net.streams, net.targets, logp)


include "recurrent_output.pxi"


cdef double sampled_forward_backward(Rnn *net, Sampling *sp, int T, int *touched, double *ess) noexcept nogil:
    """A segment forward and back with the full softmax's gradient estimated by importance
    sampling (Algorithm 3, sampled_output.pxd): one set of draws shared by all its T x B
    rows, so that the scores stay one sgemm (the bigram proposal's previous word of a row
    is its input). The gradients as backward's (of V, d and M only the sampled and target
    rows are non-zero), the count of touched rows of C in `touched`; returns the sum of
    the estimated log p of the targets, and adds the rows' effective sample sizes to `ess`."""
    cdef int m = net.m, width = net.layer[net.layers - 1].hidden, K = T * net.streams
    cdef float *top = layers_forward(net, T, True)
    cdef const float *M = net.M if net.direct else NULL
    cdef double estimate
    draw_samples(sp, net.inputs + 1, K, 1)  # "windows" of width n = 1: the previous word, at n - 2, is the input
    merge_duplicates(sp)
    estimate = sampled_scores(sp, K, net.targets, 1, top, width, net.V, net.X, m, M, net.d, ess)
    sampled_backward(sp, K, net.targets, 1, width, net.V, m, M, net.dOut, net.dX)
    memset(net.gV, 0, <Py_ssize_t> net.vocab * width * sizeof(float))
    if net.gd != NULL:
        memset(net.gd, 0, net.vocab * sizeof(float))
    if net.direct:
        memset(net.gM, 0, <Py_ssize_t> net.vocab * m * sizeof(float))
    sampled_rows_gradient(sp, K, net.targets, 1, top, width, net.X, m, 1.0, net.gV, net.gM, net.gd)
    touched[0] = inputs_backward(net, T)
    return estimate


cdef int inputs_backward(Rnn *net, int T) noexcept nogil:
    """From dL/d(top) in dOut and the direct connections' dL/dx in dX: AR's and TAR's
    gradients added, back through the layers and time, and into gC's rows of the words
    that occur (as backward says)."""
    cdef int m = net.m, l, w, j, count = 0, top = net.layers - 1
    cdef Py_ssize_t N = <Py_ssize_t> T * net.streams, r
    cdef float factor = 1
    cdef Layer *L = &net.layer[top]
    if net.ar > 0:
        activation_gradient(net, L, N)
    for l in range(top, -1, -1):
        L = &net.layer[l]
        if L.drop > 0:
            for r in range(N * L.hidden):
                net.dOut[r] *= L.mask[r]
        if l == top and net.tar > 0:
            temporal_gradient(net, L, T)
        layer_backward(net, L, net.layer[l - 1].out if l > 0 else net.X, T)
        if L.Wf != L.W:
            weight_drop_gradient(L)
    for r in range(N * m):
        net.dX[r] += net.dOut[r]
        if net.drop_input > 0:
            net.dX[r] *= net.Xmask[r]
    for r in range(N):
        w = net.inputs[r]
        if not net.seen[w]:
            net.seen[w] = 1
            net.touched[count] = w
            count += 1
            if not net.tied:
                memset(net.gC + <Py_ssize_t> w * m, 0, m * sizeof(float))
        if net.drop_words > 0:
            factor = net.word_scale[w]
        for j in range(m):
            net.gC[<Py_ssize_t> w * m + j] += factor * net.dX[r * m + j]
    for r in range(count):
        net.seen[net.touched[r]] = 0
    return 0 if net.tied else count


cdef struct Run:
    Rnn *net
    Sampling *sp
    double ess


cdef double segment_update(void *run, Update *up) noexcept nogil:
    """The batch driver's step (batch_driver.pxd): a segment of up.K steps forward and back,
    its update, and its last state carried on."""
    cdef Run *r = <Run *> run
    cdef Rnn *net = r.net
    cdef int touched, words = 0, i, T = up.K
    cdef double total
    load_segment(net, up.rows, T)
    if r.sp != NULL:
        total = sampled_forward_backward(net, r.sp, T, &touched, &r.ess)
    else:
        total = forward(net, T, True, NULL)
        touched = backward(net, T)
    for i in range(T * net.streams):
        words += net.targets[i] >= 0
    step(net, touched, words, up.rate, up.row_keep)
    carry_state(net, T)
    return total


cdef void segment_decay(void *run, Update *up) noexcept nogil:
    decay_weights((<Run *> run).net, up.dense_keep[0])


cdef float *pointer(array) except? NULL:
    """The data of a C-contiguous float32 array (kept alive by the caller)."""
    if array.dtype != np.float32 or not array.flags.c_contiguous:
        raise ValueError("recurrent network arrays must be C-contiguous float32")
    cdef float[::1] flat = array.reshape(-1)
    return &flat[0] if flat.shape[0] else NULL


cdef class RecurrentNetwork:
    """Views of a recurrent model's arrays (float32, C-contiguous, owned by Python: C, per
    layer l U{l}, W{l} and optionally b{l}, P{l}; V unless tied, d, M) and one worker's
    buffers for segments of up to `capacity` steps of `streams` streams. `carried`: the
    state each stream carries into the next segment, and the dropout generator's state.
    `regularisers` (nplmtk.neural.regularisation.Regularisers, or None): AWD-LSTM's settings,
    applied when training; `adam` (optimizer.Adam, or None: SGD): Adam's numbers, its moments
    carried. `named`: the buffers by name (the regularisers' masks, read by tests)."""
    cdef Rnn net
    cdef object keep_alive
    cdef Regularisers given
    cdef list buffers, slot_names
    cdef public dict named
    cdef public dict carried
    cdef public dict grads

    def __init__(self, params, int layers, bint lstm, int activation, int streams, int capacity, bint reset,
                 int bos, regularisers=None, unsigned long long seed=1, bint trainable=True, adam=None,
                 classes=None, tree=None, float mixture_drop=0):
        cdef int V = params["C"].shape[0], m = params["C"].shape[1], G = 4 if lstm else 1, l, h, inputs = m
        cdef Py_ssize_t N = <Py_ssize_t> capacity * streams
        cdef Regularisers *g = &self.given
        memset(g, 0, sizeof(Regularisers))
        g.locked = regularisers is None or regularisers.locked
        if regularisers is not None:
            g.dropout_input, g.dropout_hidden = regularisers.dropout_input, regularisers.dropout_hidden
            g.dropout_output, g.dropout_embedding = regularisers.dropout_output, regularisers.dropout_embedding
            g.weight_drop, g.ar, g.tar = regularisers.weight_drop, regularisers.ar, regularisers.tar
        if not 1 <= layers <= MAX_LAYERS or streams < 1 or capacity < 1 or not 0 <= bos < V or g.ar < 0 or g.tar < 0 \
                or not all(0 <= p < 1 for p in (g.dropout_input, g.dropout_hidden, g.dropout_output,
                                                g.dropout_embedding, g.weight_drop)):
            raise ValueError("recurrent network settings out of range")
        self.keep_alive = params
        self.buffers, self.named = [], {}
        self.carried = {"rng": np.array([(int(seed) * 0x9E3779B97F4A7C15 | 1) % 2 ** 64], dtype=np.uint64)}
        self.grads = {}
        cdef Rnn *net = &self.net
        cdef Layer *L
        net.vocab, net.m, net.layers, net.streams, net.capacity = V, m, layers, streams, capacity
        net.lstm, net.activation, net.reset, net.bos = lstm, activation, reset, bos
        net.projected, net.skipped = NULL, 0
        net.clip, net.locked = 0, g.locked
        net.bias, net.direct, net.tied = "d" in params, "M" in params, "V" not in params and "Vn" not in params
        net.C, net.d, net.M = pointer(params["C"]), self._param(params, "d"), self._param(params, "M")
        net.V = net.C if net.tied else self._param(params, "V")
        cdef cnp.uint64_t[::1] rng = self.carried["rng"]
        net.rng = <unsigned long long *> &rng[0]
        for l in range(layers):
            L = &net.layer[l]
            h = params[f"W{l}"].shape[1]
            if params[f"U{l}"].shape != (G * h, inputs) or params[f"W{l}"].shape != (G * h, h):
                raise ValueError("recurrent arrays of inconsistent shapes")
            L.inputs, L.hidden, L.gates = inputs, h, G
            L.U, L.W = pointer(params[f"U{l}"]), pointer(params[f"W{l}"])
            L.b, L.P = self._param(params, f"b{l}"), self._param(params, f"P{l}")
            self.carried[f"state{l}"] = np.zeros((streams, h), dtype=np.float32)
            self.carried[f"cell{l}"] = np.zeros((streams, h), dtype=np.float32)
            L.S = self._buffer(f"S{l}", (capacity + 1) * streams * h)
            L.cell = self._buffer(f"cell{l}", (capacity + 1) * streams * h)
            L.Sp, L.Cp = self._buffer(f"Sp{l}", N * h), self._buffer(f"Cp{l}", N * h)
            L.Z = self._buffer(f"Z{l}", N * G * h if lstm else 1)
            L.drop = g.dropout_hidden if l < layers - 1 else g.dropout_output
            L.out = self._buffer(f"out{l}", N * h) if L.drop else L.S + streams * h
            L.mask = self._buffer(f"mask{l}", N * h if L.drop else 1)
            L.Wf = L.W
            L.Wd = self._buffer(f"Wd{l}", G * h * h if g.weight_drop else 1)
            L.Wmask = self._buffer(f"Wmask{l}", G * h * h if g.weight_drop else 1)
            L.gU, L.gW = self._grad(f"U{l}", params, trainable), self._grad(f"W{l}", params, trainable)
            L.gb, L.gP = self._grad(f"b{l}", params, trainable), self._grad(f"P{l}", params, trainable)
            inputs = h
        if net.tied and inputs != m:
            raise ValueError("a tied output layer needs as many hidden units as features")
        widest = max(m, max(params[f"W{l}"].shape[1] for l in range(layers)))
        net.X, net.Xmask = self._buffer("X", N * m), self._buffer("Xmask", N * m if g.dropout_input else 1)
        net.word_scale = self._buffer("word_scale", V if g.dropout_embedding else 1)
        self._regularise(True)
        net.Y, net.keep = self._buffer("Y", N * V), self._buffer("keep", N)
        net.dOut = self._buffer("dOut", N * widest if trainable else 1)
        net.dX = self._buffer("dX", N * m if trainable else 1)
        net.dZ = self._buffer("dZ", N * 4 * widest if trainable else 1)
        net.dS, net.dC = self._buffer("dS", streams * widest), self._buffer("dC", streams * widest)
        net.gC, net.gd, net.gM = self._grad("C", params, trainable), self._grad("d", params, trainable), \
            self._grad("M", params, trainable)
        net.gV = net.gC if net.tied else self._grad("V", params, trainable)
        self._classes(params, classes, N, trainable)
        self._tree(params, tree, N, trainable)
        mixture_attach(self, params, N, trainable, mixture_drop)
        net.adam, net.slots = adam is not None and trainable, 0
        if net.adam:  # decided once, here: every chunk then steps by Adam with these numbers
            net.settings.beta1, net.settings.beta2, net.settings.epsilon = adam.beta1, adam.beta2, adam.epsilon
            net.settings.rest1, net.settings.rest2 = adam.rest1, adam.rest2
        if trainable:
            self._slots(params, layers)
        ints = np.zeros(3 * N, dtype=np.int32)
        self.buffers.append(ints)
        cdef int[::1] view = ints
        net.inputs, net.targets, net.touched = &view[0], &view[N], &view[2 * N]
        seen = np.zeros(V, dtype=np.int8)
        self.buffers.append(seen)
        cdef cnp.int8_t[::1] flags = seen
        net.seen = <char *> &flags[0]

    cdef _slots(self, params, int layers):
        """What `step` updates: each array but C's rows (unless tied), with Adam's moments;
        their roles (decayed, frozen) come with each chunk's Steps."""
        names = [f"{kind}{l}" for l in range(layers) for kind in "UWbP"] + ["C" if self.net.tied else "V", "d", "M",
                                                                             "Vc", "bc", "Vn", "bn", "Wp", "Wk", "bk"]
        self.slot_names = [name for name in names if name in params]
        for name in self.slot_names:
            slot = &self.net.slot[self.net.slots]
            slot.param, slot.grad, slot.size = pointer(params[name]), pointer(self.grads[name]), params[name].size
            slot.decayed, slot.frozen, slot.m, slot.v = 0, 0, self._moment(name, "m"), self._moment(name, "v")
            self.net.slots += 1
        if not self.net.tied:
            self.net.mC, self.net.vC = self._moment("C", "m"), self._moment("C", "v")
        if self.net.adam:
            self.carried["adam_step"] = np.zeros(1)
            self.net.adam_step = <double *> cnp.PyArray_DATA(self.carried["adam_step"])

    cdef _classes(self, params, lists, Py_ssize_t N, bint trainable):
        """The class-factored output layer's lists (nplmtk.neural.recurrent.class_lists), or none."""
        self.net.classes.count = 0
        if lists is None:
            return
        class_attach(&self.net.classes, lists, self.net.vocab)
        if params["Vc"].shape != (self.net.classes.count, self.net.layer[self.net.layers - 1].hidden):
            raise ValueError("class vectors of the wrong shape")
        self.buffers.append(lists)
        self.net.Vc, self.net.bc = pointer(params["Vc"]), self._param(params, "bc")
        self.net.gVc, self.net.gbc = self._grad("Vc", params, trainable), self._grad("bc", params, trainable)
        self.net.U = self._buffer("U", N * self.net.classes.largest)

    cdef _tree(self, params, paths, Py_ssize_t N, bint trainable):
        """The hierarchical softmax's paths (starts, points, turns), or none."""
        self.net.tree.nodes = 0
        if paths is None:
            return
        if params["Vn"].shape != (self.net.vocab - 1, self.net.layer[self.net.layers - 1].hidden):
            raise ValueError("node vectors of the wrong shape")
        tree_attach(&self.net.tree, paths, self.net.vocab)
        self.buffers.append(paths)
        self.net.Vn, self.net.bn = pointer(params["Vn"]), self._param(params, "bn")
        self.net.gVn, self.net.gbn = self._grad("Vn", params, trainable), self._grad("bn", params, trainable)
        self.net.G = self._buffer("G", N * self.net.tree.longest)

    cdef float *_moment(self, name, kind) except? NULL:
        if not self.net.adam:
            return NULL
        self.carried[f"adam_{kind}.{name}"] = np.zeros(self.keep_alive[name].shape, dtype=np.float32)
        return pointer(self.carried[f"adam_{kind}.{name}"])

    cdef _regularise(self, bint on):
        """The regularisers given in the network, or (off) none: the exact gradient."""
        cdef int l
        cdef Regularisers none
        memset(&none, 0, sizeof(Regularisers))
        cdef Regularisers *g = &self.given if on else &none
        self.net.drop_input, self.net.drop_words, self.net.drop_weight = g.dropout_input, g.dropout_embedding, \
            g.weight_drop
        self.net.ar, self.net.tar = g.ar, g.tar
        self.net.mos.drop = self.net.mos.given_drop if on else 0
        for l in range(self.net.layers):
            self.net.layer[l].drop = g.dropout_hidden if l < self.net.layers - 1 else g.dropout_output

    cdef float *_param(self, params, name) except? NULL:
        return pointer(params[name]) if name in params else NULL

    cdef float *_buffer(self, name, Py_ssize_t size) except? NULL:
        array = np.zeros(max(size, 1), dtype=np.float32)
        self.buffers.append(array)
        self.named[name] = array
        return pointer(array)

    cdef float *_grad(self, name, params, bint trainable) except? NULL:
        if name not in params or not trainable:
            return NULL
        self.grads[name] = np.zeros(params[name].shape, dtype=np.float32)
        return pointer(self.grads[name])

    @property
    def skipped_updates(self):
        """The updates skipped so far: their gradient was not finite."""
        return self.net.skipped

    def reset(self):
        """Every stream starts again from a zero state (Adam's moments and step and the
        dropout generator carry on: a new pass is not a new optimiser)."""
        cdef int l
        for l in range(self.net.layers):
            self.carried[f"state{l}"][...] = 0
            self.carried[f"cell{l}"][...] = 0
        self._restore_state()

    cdef _restore_state(self):
        """carried -> block 0 of the state buffers (a checkpoint may have replaced it)."""
        self._copy_state(True)

    cdef _save_state(self):
        self._copy_state(False)

    cdef _copy_state(self, bint restore):
        cdef int l
        cdef float[::1] state, cell
        cdef Py_ssize_t size
        for l in range(self.net.layers):
            state, cell = self.carried[f"state{l}"].reshape(-1), self.carried[f"cell{l}"].reshape(-1)
            size = state.shape[0] * sizeof(float)
            if restore:
                memcpy(self.net.layer[l].S, &state[0], size)
                memcpy(self.net.layer[l].cell, &cell[0], size)
            else:
                memcpy(&state[0], self.net.layer[l].S, size)
                memcpy(&cell[0], self.net.layer[l].cell, size)

    def _check_rows(self, rows):
        if rows.ndim != 3 or rows.shape[1] != 2 or rows.shape[2] != self.net.streams:
            raise ValueError("rows of the wrong shape for this network's streams")
        if rows.size and (rows[:, 0].min() < 0 or rows[:, 0].max() >= self.net.vocab
                          or rows[:, 1].max() >= self.net.vocab):
            raise ValueError("word ids outside the vocabulary")

    def train(self, const int[:, :, ::1] rows, steps):
        """Truncated BPTT over `rows` (steps x (inputs, targets) x streams) in segments of
        steps.batch steps, the state carried through: segment u steps by rates[0, u] (SGD, or
        Adam as the network was built), its gradient's norm capped at steps.clip per word,
        decays the rows of C it reads by row_keep[u] and the arrays whose steps.roles say
        `decayed` in bulk by dense_keep[0, u] (a `frozen` one is not stepped); with steps.sampling, the
        full softmax's gradient estimated from its N words drawn from its proposal
        (nplmtk.neural.sampling.Proposal), shared by the rows of a segment. Returns (sum of
        log p of the targets, estimated with sampling; updates done; sum of effective
        sample sizes)."""
        cdef Py_ssize_t count = rows.shape[0]
        cdef double total
        cdef Schedule s
        cdef Run run
        cdef Sampling sp
        if not self.grads:
            raise ValueError("a scoring network cannot train")
        schedule_of(&s, steps, count, self.net.capacity, 1)
        for k, name in enumerate(self.slot_names):
            role = steps.roles[name]
            self.net.slot[k].decayed, self.net.slot[k].frozen = role.decayed, role.frozen
        self.net.clip = steps.clip
        self._check_rows(np.asarray(rows))
        memset(&sp, 0, sizeof(Sampling))
        run.net, run.sp, run.ess = &self.net, NULL, 0
        if count == 0:
            return 0.0, 0, 0.0
        try:
            if steps.sampling is not None:
                self._start_sampling(&sp, steps.sampling.samples, steps.sampling.proposal, steps.sampling.seed)
                run.sp = &sp
            self._restore_state()
            with nogil:
                total = drive(&run, segment_update, segment_decay, &s, &rows[0, 0, 0], count, 2 * self.net.streams)
            self._save_state()
        finally:
            sampling_free(&sp)
        return total, s.updates, run.ess

    cdef _start_sampling(self, Sampling *sp, int samples, proposal, unsigned long long seed):
        if samples < 1 or proposal.vocab_size != self.net.vocab:
            raise ValueError("no samples, or a proposal of the wrong size")
        if self.net.tree.nodes or self.net.classes.count or self.net.mos.count or not self.grads:
            raise ValueError("importance sampling estimates the full softmax's gradient, of a trainable network")
        sampling_start(sp, proposal, samples, self.net.capacity * self.net.streams,
                       self.net.layer[self.net.layers - 1].hidden, self.net.m, seed)

    def logprobs(self, const int[:, :, ::1] rows, double[::1] out, float[:, ::1] states=None,
                 const float[:, ::1] projected=None):
        """Natural-log probability of every target >= 0 in out[step * streams + stream]
        (others untouched), without dropout, the state carried through; with `states`
        (a row per step and stream), the top layer's output that predicted each (a neural
        cache's keys); with `projected` (a row per step and stream), the first layer's
        pre-activations from the inputs (U x + b), computed by the caller (once per word)."""
        cdef Py_ssize_t start = 0, count = rows.shape[0], B = self.net.streams
        cdef int T, width = self.net.layer[self.net.layers - 1].hidden
        cdef bint keep_states = states is not None, given = projected is not None
        if out.shape[0] != count * B:
            raise ValueError("out of the wrong size")
        if keep_states and (states.shape[0] != count * B or states.shape[1] != width):
            raise ValueError("states of the wrong shape")
        if given and (projected.shape[0] != count * B
                      or projected.shape[1] != self.net.layer[0].gates * self.net.layer[0].hidden):
            raise ValueError("projected inputs of the wrong shape")
        self._check_rows(np.asarray(rows))
        self._restore_state()
        with nogil:
            while start < count:
                T = <int> min(<Py_ssize_t> self.net.capacity, count - start)
                load_segment(&self.net, &rows[start, 0, 0], T)
                self.net.projected = &projected[start * B, 0] if given else NULL
                forward(&self.net, T, False, &out[start * B])
                if keep_states:
                    memcpy(&states[start * B, 0], self.net.layer[self.net.layers - 1].out, T * B * width * sizeof(float))
                carry_state(&self.net, T)
                start += T
            self.net.projected = NULL
        self._save_state()

    def step_pairs(self, const int[::1] inputs, const int[::1] rows, const int[::1] targets, double[::1] out):
        """One step of every stream from its carried state, reading inputs[stream], and the
        natural-log probability of each targets[k] (>= 0; others untouched) after the new
        state of stream rows[k] in out[k]; the new states carried. A stream's several
        targets share its step (and with the class output, its class softmax)."""
        cdef Py_ssize_t P = rows.shape[0], k
        cdef int B = self.net.streams, width = self.net.layer[self.net.layers - 1].hidden, m = self.net.m
        cdef const float *top
        cdef float[:, ::1] gathered, features
        cdef float[::1] Z, totals, u
        if inputs.shape[0] != B or targets.shape[0] != P or out.shape[0] != P:
            raise ValueError("an input per stream, and a target and an output per pair")
        cdef bint paired = self.net.classes.count and not self.net.mos.count  # class_pairs shares class softmaxes
        if not paired and P > <Py_ssize_t> self.net.capacity * B:
            raise ValueError("more pairs than the network's streams times its capacity")
        self._check_rows(np.stack([np.asarray(inputs), np.full(B, -1, dtype=np.int32)])[None])
        pair_rows, pair_targets = np.asarray(rows), np.asarray(targets)
        if P and (pair_rows.min() < 0 or pair_rows.max() >= B or pair_targets.max() >= self.net.vocab):
            raise ValueError("pairs of streams or words outside the network's")
        if paired:
            Z = np.empty(B * self.net.classes.count, dtype=np.float32)
            totals, u = np.empty(B, dtype=np.float32), np.empty(self.net.classes.largest, dtype=np.float32)
        else:  # the pairs' rows side by side for the output layer
            gathered = np.empty((max(P, 1), width), dtype=np.float32)
            features = np.empty((max(P, 1), m), dtype=np.float32)
        self._restore_state()
        with nogil:
            for k in range(B):
                self.net.inputs[k] = inputs[k]
                self.net.targets[k] = -1
            top = layers_forward(&self.net, 1, False)
            if paired:
                class_pairs(&self.net.classes, top, B, width, self.net.Vc, self.net.bc, self.net.V, self.net.d,
                            &rows[0], &targets[0], P, &Z[0], &totals[0], &u[0], &out[0])
            elif P:
                for k in range(P):
                    memcpy(&gathered[k, 0], top + <Py_ssize_t> rows[k] * width, width * sizeof(float))
                    memcpy(&features[k, 0], self.net.X + <Py_ssize_t> rows[k] * m, m * sizeof(float))
                output_forward(&self.net, &gathered[0, 0], &features[0, 0], P, &targets[0], &out[0])
            carry_state(&self.net, 1)
        self._save_state()

    def next_logprobs(self, const int[:, :, ::1] rows, double[::1] out):
        """log p of every word after the steps of `rows` (one stream; targets ignored)."""
        cdef int T = rows.shape[0], j, width
        if self.net.streams != 1 or not 1 <= T <= self.net.capacity or out.shape[0] != self.net.vocab:
            raise ValueError("one stream of at most capacity steps, and a row per word")
        self._check_rows(np.asarray(rows))
        self._restore_state()
        load_segment(&self.net, &rows[0, 0, 0], T)
        self.net.targets[T - 1] = 0
        forward(&self.net, T, False, NULL)
        width = self.net.layer[self.net.layers - 1].hidden
        if self.net.mos.count:
            mixture_distribution(&self.net, T - 1, &out[0], np.empty(self.net.vocab))
            return
        if self.net.tree.nodes:
            tree_distribution(&self.net.tree, self.net.layer[self.net.layers - 1].out + (T - 1) * width, width,
                              self.net.Vn, self.net.bn, self.net.vocab, self.net.Y, &out[0])
            return
        if self.net.classes.count:
            class_distribution(&self.net.classes, self.net.layer[self.net.layers - 1].out + (T - 1) * width, width,
                               self.net.Vc, self.net.bc, self.net.V, self.net.d, self.net.Y, self.net.U, &out[0])
            return
        for j in range(self.net.vocab):
            out[j] = log(self.net.Y[<Py_ssize_t> (T - 1) * self.net.vocab + j])

    def gradients(self, const int[:, :, ::1] rows, grads, int samples=0, proposal=None, unsigned long long seed=0,
                  bint regularised=False):
        """The gradients of -sum log p over one segment from the carried state, without
        dropout, clipping or a step, written into `grads` (arrays shaped like the
        parameters); returns the sum of log p. `regularised`: of the training objective,
        with the dropouts' masks drawn from the carried generator (`masks` reads them) and
        AR's and TAR's terms added to -sum log p. With `samples`: of the sampled objective,
        -sum (y_target - log Z^), for the draws that train makes from `seed` (steps.sampling) (its
        estimate of sum log p returned). For tests."""
        cdef int T = rows.shape[0], touched
        cdef double total, ess = 0
        cdef Sampling sp
        if not 1 <= T <= self.net.capacity or not self.grads:
            raise ValueError("one segment of at most capacity steps, on a trainable network")
        self._check_rows(np.asarray(rows))
        memset(&sp, 0, sizeof(Sampling))
        if samples:
            self._start_sampling(&sp, samples, proposal, seed)
        self._restore_state()
        self._regularise(regularised)
        load_segment(&self.net, &rows[0, 0, 0], T)
        if samples:
            total = sampled_forward_backward(&self.net, &sp, T, &touched, &ess)
            sampling_free(&sp)
        else:
            total = forward(&self.net, T, True, NULL)
            touched = backward(&self.net, T)
        self._regularise(True)
        for name, array in self.grads.items():
            grads[name][...] = array
        if not self.net.tied:  # gC holds only the rows that occur
            grads["C"][...] = 0
            for w in {int(v) for v in np.asarray(rows)[:, 0].reshape(-1)}:
                grads["C"][w] = self.grads["C"][w]
        return total


include "mixture_output.pxi"
