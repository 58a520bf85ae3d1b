# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""The Transformer language model's network (nplmtk/neural/transformer.py) over B parallel
word streams and segments of L positions, as the recurrent kernel's: the input rows
x = s C(w) + position (learned rows P, or the fixed sinusoids; none with relative
positions, which the stack's attention reads), dropout on them, the stack of blocks
(transformer_kernels.TransformerStack: its own loops, called once a segment), the output
layer (output_layer.pxd: full, class or hierarchical) and back, then one step of SGD or
Adam of every array from the segment's gradient, capped at `clip` per word, and the
weights' bulk decay, with the trainer's numbers (optimizer.Steps; recurrent_updates.pxd's
steps of whole arrays). `threads` OpenMP threads share the stack's passes, the full
softmax's and the update (on a single-threaded BLAS). Rows of a segment are
stream-major, as the stack's: row b L + t."""
import numpy as np
cimport numpy as cnp
from cython.parallel cimport prange
from libc.math cimport sqrt
from libc.string cimport memcpy, memset

from batch_driver cimport Schedule, schedule_of
from class_output cimport class_attach
from hs_output cimport tree_attach
from elementwise cimport Adam, adam_corrections, draw_key, dropout_at
from kernel_common cimport axpy_row
from output_layer cimport Output, output_backward, output_distribution, output_forward
from recurrent_layers cimport Slot
from recurrent_updates cimport clip_factor, decay_slots, slot_squares, step_slots
from transformer_parts cimport part_start, split_zero

from nplmtk._ext.transformer_kernels import TransformerStack, relative_positions

cnp.import_array()

POSITIONS = ("learned", "sinusoidal", "relative")  # the codes 0, 1, 2 of `positions`


cdef float *pointer(array) except? NULL:
    """The data of a C-contiguous float32 array (kept alive by the caller)."""
    if array.dtype != np.float32 or not array.flags.c_contiguous:
        raise ValueError("transformer network arrays must be C-contiguous float32")
    cdef float[::1] flat = array.reshape(-1)
    return &flat[0] if flat.shape[0] else NULL


cdef class TransformerNetwork:
    """Views of a Transformer model's arrays (float32, C-contiguous, owned by Python: C, P
    with learned positions, the stack's, V unless tied or hierarchical, d, Vc and bc, Vn
    and bn) and one worker's buffers for segments of `length` positions of `streams`
    streams. `carried`: what a worker carries from chunk to chunk (the dropout generators,
    the embeddings' and the stack's, Adam's moments and step count); the stack's memory of the last segment (relative
    positions with a memory) is carried inside the stack and forgotten by reset(). `threads`
    share each pass (call it under a single-threaded BLAS when above 1); `direct_gradients`:
    split_gradient_transposed's choice (nplmtk.neural.blas.transposed_products_direct)."""
    cdef object stack, params, x_array, dtop_array, top_array
    cdef Output out
    cdef Adam adam
    cdef bint use_adam
    cdef int vocab, d, streams, length, positions, bos, threads
    cdef Slot *slot             # every array stepped (trainable), in the order of params
    cdef int slots
    cdef double *partial        # slots x threads: slot_squares' partial sums
    cdef float embed_scale, drop_embedding, clip
    cdef float *C
    cdef float *P
    cdef float *gC
    cdef float *gP
    cdef float *table
    cdef float *X
    cdef float *Xmask
    cdef int *inputs
    cdef int *targets
    cdef unsigned long long *rng
    cdef double *adam_step
    cdef list buffers, slot_names
    cdef public dict carried, grads

    def __init__(self, params, int blocks, int heads, int streams, int length, int positions, int memory, int bos,
                 float drop_embedding=0, float drop_attention=0, float drop_residual=0, unsigned long long seed=1,
                 bint trainable=False, adam=None, classes=None, tree=None, int threads=1, bint direct_gradients=False):
        cdef int V = params["C"].shape[0], d = params["C"].shape[1]
        cdef Py_ssize_t N = <Py_ssize_t> streams * length
        if not 0 <= positions < len(POSITIONS) or streams < 1 or length < 1 or not 0 <= bos < V \
                or not 0 <= drop_embedding < 1 or (memory and positions != 2) or not 1 <= threads <= 64:
            raise ValueError("transformer network settings out of range")
        self.params, self.buffers, self.threads = params, [], threads
        self.vocab, self.d, self.streams, self.length, self.positions, self.bos = V, d, streams, length, positions, bos
        self.embed_scale, self.drop_embedding, self.clip = <float> sqrt(d), drop_embedding, 0
        self.carried = {"rng": np.array([(int(seed) * 0x9E3779B97F4A7C15 | 1) % 2 ** 64], dtype=np.uint64)}
        cdef cnp.uint64_t[::1] rng = self.carried["rng"]
        self.rng = <unsigned long long *> &rng[0]
        self.grads = {name: np.zeros_like(array) for name, array in params.items()} if trainable else {}
        stack_grads = self.grads if trainable else {name: np.zeros_like(array) for name, array in params.items()
                                                    if name not in ("C", "P", "V", "d", "Vc", "bc", "Vn", "bn")}
        self.stack = TransformerStack(params, stack_grads, blocks, heads, streams, length, memory, positions == 2,
                                      drop_attention, drop_residual, seed + 1, direct_gradients)
        self.stack.set_threads(threads)
        self.carried["stack_rng"] = np.array([self.stack.generator()], dtype=np.uint64)
        self.C, self.gC = pointer(params["C"]), self._grad("C")
        self.P, self.gP, self.table = NULL, NULL, NULL
        if positions == 0:
            if params["P"].shape != (length, d):
                raise ValueError("learned positions of the wrong shape")
            self.P, self.gP = pointer(params["P"]), self._grad("P")
        elif positions == 1:
            self.table = self._keep(relative_positions(length, d))
        self.x_array = np.zeros((N, d), dtype=np.float32)
        self.dtop_array = np.zeros((N, d), dtype=np.float32)
        self.X = self._keep(self.x_array)
        self.Xmask = self._keep(np.zeros(N * d if drop_embedding > 0 else 1, dtype=np.float32))
        ints = np.zeros(2 * N, dtype=np.int32)
        self.buffers.append(ints)
        cdef int[::1] view = ints
        self.inputs, self.targets = &view[0], &view[N]
        self._output(params, classes, tree, N, direct_gradients)
        self.use_adam = adam is not None and trainable
        if self.use_adam:
            self.adam.beta1, self.adam.beta2, self.adam.epsilon = adam.beta1, adam.beta2, adam.epsilon
            self.adam.rest1, self.adam.rest2 = adam.rest1, adam.rest2
            for name, array in params.items():
                self.carried[f"adam_m.{name}"] = np.zeros_like(array)
                self.carried[f"adam_v.{name}"] = np.zeros_like(array)
            self.carried["adam_step"] = np.zeros(1)
            self.adam_step = <double *> cnp.PyArray_DATA(self.carried["adam_step"])
        self.slot_names = list(params) if trainable else []
        self._slots()

    cdef _slots(self):
        """A Slot per array of slot_names: its gradient and Adam's moments (roles come with
        each chunk's Steps)."""
        slots = np.zeros(max(1, len(self.slot_names)) * sizeof(Slot), dtype=np.uint8)
        partial = np.zeros(max(1, len(self.slot_names)) * self.threads)
        self.buffers += [slots, partial]
        self.slot = <Slot *> cnp.PyArray_DATA(slots)
        self.partial = <double *> cnp.PyArray_DATA(partial)
        self.slots = len(self.slot_names)
        for k, name in enumerate(self.slot_names):
            self.slot[k].param, self.slot[k].grad = pointer(self.params[name]), pointer(self.grads[name])
            self.slot[k].size = self.params[name].size
            self.slot[k].m = pointer(self.carried[f"adam_m.{name}"]) if self.use_adam else NULL
            self.slot[k].v = pointer(self.carried[f"adam_v.{name}"]) if self.use_adam else NULL

    cdef float *_keep(self, array) except? NULL:
        self.buffers.append(array)
        return pointer(array)

    cdef float *_grad(self, name) except? NULL:
        return pointer(self.grads[name]) if name in self.grads else NULL

    cdef _output(self, params, classes, tree, Py_ssize_t N, bint direct):
        cdef Output *o = &self.out
        cdef int V = self.vocab, d = self.d
        memset(o, 0, sizeof(Output))
        o.vocab, o.width = V, d
        tied = "V" not in params and "Vn" not in params
        o.V = self.C if tied else (pointer(params["V"]) if "V" in params else NULL)
        o.gV = self.gC if tied else self._grad("V")
        if "d" in params:
            o.d, o.gd = pointer(params["d"]), self._grad("d")
        rows = N * V
        o.parts, o.direct = self.threads, direct
        sums = np.zeros(self.threads)
        self.buffers.append(sums)
        o.sums = <double *> cnp.PyArray_DATA(sums)
        if classes is not None:
            class_attach(&o.classes, classes, V)
            self.buffers.append(classes)
            if params["Vc"].shape != (o.classes.count, d):
                raise ValueError("class vectors of the wrong shape")
            o.Vc, o.bc, o.gVc, o.gbc = pointer(params["Vc"]), pointer(params["bc"]), self._grad("Vc"), \
                self._grad("bc")
            o.U = self._keep(np.zeros(N * o.classes.largest, dtype=np.float32))
            rows = N * o.classes.count
        if tree is not None:
            if params["Vn"].shape != (V - 1, d):
                raise ValueError("node vectors of the wrong shape")
            tree_attach(&o.tree, tree, V)
            self.buffers.append(tree)
            o.Vn, o.bn, o.gVn, o.gbn = pointer(params["Vn"]), pointer(params["bn"]), self._grad("Vn"), \
                self._grad("bn")
            o.G = self._keep(np.zeros(N * o.tree.longest, dtype=np.float32))
            rows = 0
        o.Y = self._keep(np.zeros(max(rows, V), dtype=np.float32))
        if o.gV != NULL and classes is None and tree is None and not direct:
            o.gVt = self._keep(np.zeros(<Py_ssize_t> V * d, dtype=np.float32))
        if o.gd != NULL and classes is None and tree is None:
            o.gd_parts = self._keep(np.zeros(<Py_ssize_t> self.threads * V, dtype=np.float32))

    def reset(self):
        """Every stream starts again: the stack's memory forgotten."""
        self.stack.reset()

    def _check_rows(self, rows):
        if rows.ndim != 3 or rows.shape[1] != 2 or rows.shape[2] != self.streams:
            raise ValueError("rows of the wrong shape for this network's streams")
        if rows.size and (rows[:, 0].min() < 0 or rows[:, 0].max() >= self.vocab or rows[:, 1].max() >= self.vocab):
            raise ValueError("word ids outside the vocabulary")

    cdef int _load(self, const int[:, :, ::1] rows, Py_ssize_t start, int T) except -1:
        """T steps of rows from `start` into the segment, stream-major; the positions past T
        read <s> and predict nothing (causal attention: earlier ones do not see them).
        Returns the targets >= 0."""
        cdef int s, t, L = self.length, words = 0
        for s in range(self.streams):
            for t in range(L):
                if t < T:
                    self.inputs[s * L + t] = rows[start + t, 0, s]
                    self.targets[s * L + t] = rows[start + t, 1, s]
                    words += rows[start + t, 1, s] >= 0
                else:
                    self.inputs[s * L + t], self.targets[s * L + t] = self.bos, -1
        return words

    cdef _embed(self, bint train):
        """X = s C(input) + its position's row, dropped out when training (the mask drawn by
        index), the rows shared among the threads."""
        cdef Py_ssize_t r, lo, hi, N = <Py_ssize_t> self.streams * self.length
        cdef int d = self.d, t, p
        cdef bint dropped = train and self.drop_embedding > 0
        cdef unsigned long long key = draw_key(self.rng) if dropped else 0
        for p in prange(self.threads, num_threads=self.threads, schedule="static", chunksize=1, nogil=True):
            lo, hi = part_start(N, self.threads, p), part_start(N, self.threads, p + 1)
            for r in range(lo, hi):
                t = <int> (r % self.length)
                memset(self.X + r * d, 0, d * sizeof(float))
                axpy_row(d, self.embed_scale, self.C + <Py_ssize_t> self.inputs[r] * d, self.X + r * d)
                if self.P != NULL:
                    axpy_row(d, 1, self.P + <Py_ssize_t> t * d, self.X + r * d)
                elif self.table != NULL:
                    axpy_row(d, 1, self.table + <Py_ssize_t> t * d, self.X + r * d)
            if dropped:
                dropout_at(self.X, self.Xmask, lo * d, hi * d, self.drop_embedding, key)

    cdef double _forward(self, bint train, double *logp, bint probabilities=True):
        """The segment loaded: forward through the output layer; the top states kept (and,
        with `probabilities`, what the backward pass needs)."""
        cdef float[:, ::1] top
        cdef double total
        self._embed(train)
        self.top_array = self.stack.forward(self.x_array, train, probabilities)
        top = self.top_array
        with nogil:
            total = output_forward(&self.out, &top[0, 0], <Py_ssize_t> self.streams * self.length, self.targets,
                                   logp, probabilities)
        return total

    cdef _backward(self, bint train):
        """The gradients of -sum log p of the segment just run forward (every array's)."""
        cdef float[:, ::1] top = self.top_array
        cdef float[:, ::1] dtop = self.dtop_array
        cdef float[:, ::1] dx
        cdef float *flat
        cdef Py_ssize_t r, i, N = <Py_ssize_t> self.streams * self.length
        cdef int d = self.d
        with nogil:
            if self.gC != NULL:
                split_zero(self.threads, self.gC, <Py_ssize_t> self.vocab * d)
            if self.gP != NULL:
                split_zero(self.threads, self.gP, <Py_ssize_t> self.length * d)
            if self.out.gV != NULL and self.out.gV != self.gC:
                split_zero(self.threads, self.out.gV, <Py_ssize_t> self.vocab * d)
            output_backward(&self.out, &top[0, 0], N, self.targets, &dtop[0, 0])
        dx = self.stack.backward(self.dtop_array)
        flat = &dx[0, 0]
        with nogil:
            if train and self.drop_embedding > 0:
                for i in range(N * d):
                    flat[i] *= self.Xmask[i]
            for r in range(N):
                axpy_row(d, self.embed_scale, &dx[r, 0], self.gC + <Py_ssize_t> self.inputs[r] * d)
                if self.gP != NULL:
                    axpy_row(d, 1, &dx[r, 0], self.gP + <Py_ssize_t> (r % self.length) * d)

    cdef _step(self, int words, double rate):
        """One update of every array not frozen from the segment's gradient, capped at
        clip * words in norm."""
        cdef float clipped = 1
        cdef double total
        with nogil:
            if self.clip > 0:
                total = slot_squares(self.slot, self.slots, self.threads, self.partial)
                clipped = clip_factor(total, self.clip, words)
            if self.use_adam:
                self.adam_step[0] += 1
                adam_corrections(&self.adam, self.adam_step[0])
            step_slots(self.slot, self.slots, <float> rate, clipped, &self.adam, self.threads)

    def train(self, const int[:, :, ::1] rows, steps):
        """Segments of steps.batch steps (or steps.lengths) of `rows` (steps x (inputs,
        targets) x streams), each forward and back and an update: rates[0, u] (SGD, or Adam
        as the network was built), the gradient's norm capped at steps.clip per word, then
        the bulk decay dense_keep[0, u] of the arrays whose steps.roles say `decayed`.
        Returns (sum of log p of the targets, updates done, 0.0)."""
        cdef Py_ssize_t count = rows.shape[0], start = 0, u = 0
        cdef Schedule s
        cdef int T, words
        cdef double total = 0
        if not self.grads:
            raise ValueError("a scoring network cannot train")
        if steps.sampling is not None:
            raise ValueError("the Transformer trains with its exact gradient")
        schedule_of(&s, steps, count, self.length, 1)
        self._check_rows(np.asarray(rows))
        self.clip = steps.clip
        for k, name in enumerate(self.slot_names):
            self.slot[k].decayed, self.slot[k].frozen = steps.roles[name].decayed, steps.roles[name].frozen
        rates, dense_keep = np.asarray(steps.rates), np.asarray(steps.dense_keep)
        self.stack.generator(int(self.carried["stack_rng"][0]))  # a checkpoint may have replaced it
        while start < count:
            T = <int> min(<Py_ssize_t> (s.lengths[u] if s.lengths != NULL else s.batch), count - start)
            words = self._load(rows, start, T)
            total += self._forward(True, NULL)
            self._backward(True)
            self._step(words, rates[0, u])
            if dense_keep[0, u] != 1:
                decay_slots(self.slot, self.slots, dense_keep[0, u])
            start += T
            u += 1
        self.carried["stack_rng"][0] = self.stack.generator()
        return total, s.updates, 0.0

    def logprobs(self, const int[:, :, ::1] rows, double[::1] out, float[:, ::1] states=None):
        """Natural-log probability of every target >= 0 in out[step * streams + stream]
        (others untouched), without dropout, segment after segment; with `states` (a row
        per step and stream), the top state that predicted each (a neural cache's keys)."""
        cdef Py_ssize_t start = 0, count = rows.shape[0], B = self.streams, N = B * self.length
        cdef int T, t, b, L = self.length
        cdef float[:, ::1] top
        cdef double[::1] logp = np.empty(N)
        if out.shape[0] != count * B:
            raise ValueError("out of the wrong size")
        if states is not None and (states.shape[0] != count * B or states.shape[1] != self.d):
            raise ValueError("states of the wrong shape")
        self._check_rows(np.asarray(rows))
        while start < count:
            T = <int> min(<Py_ssize_t> L, count - start)
            self._load(rows, start, T)
            self._forward(False, &logp[0], False)
            top = self.top_array
            for b in range(B):
                for t in range(T):
                    if self.targets[b * L + t] >= 0:
                        out[(start + t) * B + b] = logp[b * L + t]
                    if states is not None:
                        states[(start + t) * B + b, :] = top[b * L + t, :]
            start += T

    def next_logprobs(self, const int[:, :, ::1] rows, double[::1] out):
        """log p of every word after the steps of `rows` (one stream, at most a segment;
        targets ignored)."""
        cdef int T = rows.shape[0]
        cdef float[:, ::1] top
        if self.streams != 1 or not 1 <= T <= self.length or out.shape[0] != self.vocab:
            raise ValueError("one stream of at most a segment's steps, and a row per word")
        self._check_rows(np.asarray(rows))
        self._load(rows, 0, T)
        self._embed(False)
        self.top_array = self.stack.forward(self.x_array, False, False)
        top = self.top_array
        output_distribution(&self.out, &top[T - 1, 0], &out[0])

    def gradients(self, const int[:, :, ::1] rows, grads, double[::1] logp=None, float[:, ::1] states=None):
        """The gradients of -sum log p over one segment (after the stack's memory), without
        dropout, clipping or a step, written into `grads` (arrays shaped like the
        parameters); returns the sum of log p, and with `logp` (a row per step and stream)
        each target's (>= 0; others untouched), with `states` (the same rows) the top state
        that predicted each step. For tests and dynamic evaluation (with the neural cache)."""
        cdef int T = rows.shape[0], B = self.streams, L = self.length, t, b
        cdef double total
        cdef double[::1] each = np.empty(B * L)
        cdef float[:, ::1] top
        if not 1 <= T <= L or not self.grads:
            raise ValueError("one segment of at most its length, on a trainable network")
        if logp is not None and logp.shape[0] != T * B:
            raise ValueError("logp of the wrong size")
        if states is not None and (states.shape[0] != T * B or states.shape[1] != self.d):
            raise ValueError("states of the wrong shape")
        self._check_rows(np.asarray(rows))
        self._load(rows, 0, T)
        total = self._forward(False, &each[0])
        if logp is not None:
            for b in range(B):
                for t in range(T):
                    if self.targets[b * L + t] >= 0:
                        logp[t * B + b] = each[b * L + t]
        if states is not None:
            top = self.top_array
            for b in range(B):
                for t in range(T):
                    states[t * B + b, :] = top[b * L + t, :]
        self._backward(False)
        for name, array in self.grads.items():
            grads[name][...] = array
        return total
