# AWD-LSTM's regularisers (Merity, Keskar & Socher 2018) for the recurrent kernel
# (rnn_kernels.pyx), inline, each a few lines: dropout a mask per step or locked (one per
# stream and segment), embedding dropout (whole words), weight drop (DropConnect on W), and
# the gradients of AR and TAR. Their settings and policy: nplmtk/neural/regularisation.py.
from libc.string cimport memcpy

from elementwise cimport dropout, uniform
from recurrent_layers cimport Layer, Rnn


cdef inline void drop(float *values, float *mask, int T, Py_ssize_t size, float p, bint locked,
                      unsigned long long *rng) noexcept nogil:
    """Dropout on T steps of `size` values each: a mask per value, or (locked) one per
    stream's value for the whole segment, the same at every step (variational dropout,
    Gal & Ghahramani 2016; Merity et al. 2018, sec. 4.1)."""
    cdef int t
    cdef Py_ssize_t i
    if not locked:
        dropout(values, mask, T * size, p, rng)
        return
    dropout(values, mask, size, p, rng)
    for t in range(1, T):
        memcpy(mask + t * size, mask, size * sizeof(float))
        for i in range(t * size, (t + 1) * size):
            values[i] *= mask[i]


cdef inline void drop_weights(Rnn *net, Layer *L) noexcept nogil:
    """Weight drop (DropConnect on W, Merity et al. 2018, sec. 2): the segment's W is
    Wd = W * mask, a mask drawn per segment."""
    cdef Py_ssize_t size = <Py_ssize_t> L.gates * L.hidden * L.hidden
    memcpy(L.Wd, L.W, size * sizeof(float))
    dropout(L.Wd, L.Wmask, size, net.drop_weight, net.rng)
    L.Wf = L.Wd


cdef inline void weight_drop_gradient(Layer *L) noexcept nogil:
    """gW holds dL/dWd: through weight drop's mask, dL/dW."""
    cdef Py_ssize_t r
    for r in range(<Py_ssize_t> L.gates * L.hidden * L.hidden):
        L.gW[r] *= L.Wmask[r]


cdef inline void drop_words(Rnn *net) noexcept nogil:
    """Embedding dropout (sec. 4.2): a scale per word of the vocabulary for the segment,
    0 or 1 / (1 - p), applied to the rows of C the inputs read."""
    cdef int w
    for w in range(net.vocab):
        net.word_scale[w] = 0 if uniform(net.rng) < net.drop_words else 1 / (1 - net.drop_words)


cdef inline void activation_gradient(Rnn *net, Layer *L, Py_ssize_t N) noexcept nogil:
    """AR's gradient (sec. 4.3), ar / h ||dropped output||^2 per step of the top layer L,
    added to dL/d(its dropped output) in dOut."""
    cdef float a = 2 * net.ar / L.hidden
    cdef Py_ssize_t r
    for r in range(N * L.hidden):
        net.dOut[r] += a * L.out[r]


cdef inline void temporal_gradient(Rnn *net, Layer *L, int T) noexcept nogil:
    """TAR's gradient, tar / h ||s_t - s_t-1||^2 over the steps t >= 1 of the segment within
    a sentence (s the top layer's states before dropout), added to dL/ds in dOut."""
    cdef int B = net.streams, h = L.hidden, t, b, j
    cdef float a = 2 * net.tar / h, d
    cdef const float *s
    cdef float *ds
    for t in range(1, T):
        s = L.S + <Py_ssize_t> (t + 1) * B * h
        ds = net.dOut + <Py_ssize_t> t * B * h
        for b in range(B):
            if net.keep[t * B + b] == 0:  # a new sentence: no previous state to stay near
                continue
            for j in range(b * h, (b + 1) * h):
                d = a * (s[j] - s[j - B * h])
                ds[j] += d
                ds[j - B * h] -= d
