# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""A recurrent network's update and its segment's bookkeeping (rnn_kernels.pyx): one
step of SGD or Adam from a segment's gradient, clipped; the weights' bulk decay; the
state carried to the next segment; a segment's rows loaded. The steps of whole arrays
(Slots: slot_squares, clip_factor, step_slots, decay_slots) serve the Transformer's
network too (transformer_network.pyx), there shared among threads."""
from cython.parallel cimport prange
from libc.math cimport sqrt
from libc.string cimport memcpy

from elementwise cimport Adam, adam_corrections, finite, squares, update
from kernel_common cimport scale
from recurrent_layers cimport Rnn, Slot


cdef inline double slot_squares(const Slot *slot, int slots, int parts, double *partial) noexcept nogil:
    """The sum of squares of the slots' gradients (the norm's square, to clip it). With
    `parts` > 1 each slot is cut in that many slices, slice p of every slot summed by
    thread p into partial[k parts + p] (slots x parts doubles), added up in order."""
    cdef int k, unit
    cdef double total = 0
    cdef Py_ssize_t lo, hi
    if parts == 1:
        for k in range(slots):
            total += squares(slot[k].grad, slot[k].size)
        return total
    for unit in prange(slots * parts, num_threads=parts, schedule="static", chunksize=1, nogil=True):
        k = unit // parts
        lo, hi = slot[k].size * (unit % parts) // parts, slot[k].size * (unit % parts + 1) // parts
        partial[unit] = squares(slot[k].grad + lo, hi - lo)
    for unit in range(slots * parts):
        total += partial[unit]
    return total


cdef inline float clip_factor(double squares_sum, float clip, int words) noexcept nogil:
    """The factor capping a gradient of that sum of squares at a norm of clip * words (1:
    within it, or clip 0)."""
    cdef double norm
    if clip <= 0:
        return 1
    norm = sqrt(squares_sum)
    if norm > clip * words:
        return <float> (clip * words / norm)
    return 1


cdef inline void step_slots(Slot *slot, int slots, float rate, float clipped, const Adam *settings,
                            int parts) noexcept nogil:
    """Every slot not frozen, by SGD or by Adam (its moments m and v given), the gradient
    scaled by `clipped`; sliced among `parts` threads as slot_squares."""
    cdef int k, unit
    cdef Py_ssize_t lo, hi
    cdef Slot *s
    if parts == 1:
        for k in range(slots):
            if not slot[k].frozen:
                update(slot[k].param, slot[k].grad, slot[k].m, slot[k].v, slot[k].size, rate, clipped, settings)
        return
    for unit in prange(slots * parts, num_threads=parts, schedule="static", chunksize=1, nogil=True):
        s = &slot[unit // parts]
        lo, hi = s.size * (unit % parts) // parts, s.size * (unit % parts + 1) // parts
        if not s.frozen and hi > lo:
            update(s.param + lo, s.grad + lo, s.m + lo if s.m != NULL else NULL, s.v + lo if s.v != NULL else NULL,
                   hi - lo, rate, clipped, settings)


cdef inline void decay_slots(Slot *slot, int slots, float keep) noexcept nogil:
    """The bulk decay of the slots whose role says so (decayed, not frozen)."""
    cdef int k
    for k in range(slots):
        if slot[k].decayed and not slot[k].frozen:
            scale(<int> slot[k].size, keep, slot[k].param)


cdef inline void step(Rnn *net, int touched, int words, float rate, float keep_c) noexcept nogil:
    """One update from the segment's gradient (clipped to a norm of clip * words): every
    slot's array by SGD or Adam; the rows of C that occur (unless tied, when C is a slot)
    decayed by keep_c first. A gradient that is not finite (BPTT's product through a
    segment overflowed) is skipped, counted in net.skipped, as mixed-precision trainers skip
    an overflowing step: applied, even clipped, it turns every parameter into NaN."""
    cdef int k, m = net.m
    cdef double norm = slot_squares(net.slot, net.slots, 1, NULL)
    cdef float clipped = 1
    cdef Py_ssize_t row
    for k in range(touched):
        norm += squares(net.gC + <Py_ssize_t> net.touched[k] * m, m)
    if not finite(norm):
        net.skipped += 1
        return
    clipped = clip_factor(norm, net.clip, words)
    if net.adam:
        net.adam_step[0] += 1
        adam_corrections(&net.settings, net.adam_step[0])
    step_slots(net.slot, net.slots, rate, clipped, &net.settings, 1)
    for k in range(touched):
        row = <Py_ssize_t> net.touched[k] * m
        if keep_c != 1:
            scale(m, keep_c, net.C + row)
        update(net.C + row, net.gC + row, net.mC + row if net.adam else NULL, net.vC + row if net.adam else NULL,
               m, rate, clipped, &net.settings)


cdef inline void decay_weights(Rnn *net, float keep) noexcept nogil:
    """The bulk decay of the arrays whose role says so (the weights; not C's rows unless tied)."""
    decay_slots(net.slot, net.slots, keep)


cdef inline void carry_state(Rnn *net, int T) noexcept nogil:
    """The last step's state (and cell) becomes the carried one."""
    cdef int l, size
    for l in range(net.layers):
        size = net.streams * net.layer[l].hidden
        memcpy(net.layer[l].S, net.layer[l].S + <Py_ssize_t> T * size, size * sizeof(float))
        if net.lstm:
            memcpy(net.layer[l].cell, net.layer[l].cell + <Py_ssize_t> T * size, size * sizeof(float))


cdef inline void load_segment(Rnn *net, const int *rows, int T) noexcept nogil:
    """T steps of rows (each B inputs, then B targets) into the segment's inputs and targets."""
    cdef int t, b, B = net.streams
    for t in range(T):
        for b in range(B):
            net.inputs[t * B + b] = rows[2 * t * B + b]
            net.targets[t * B + b] = rows[(2 * t + 1) * B + b]
