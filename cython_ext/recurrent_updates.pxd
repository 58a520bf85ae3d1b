# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""A recurrent network's update and its segment's bookkeeping (rnn_kernels.pyx): one
step of SGD or Adam from a segment's gradient, clipped; the weights' bulk decay; the
state carried to the next segment; a segment's rows loaded."""
from libc.math cimport sqrt
from libc.string cimport memcpy

from elementwise cimport adam_corrections, squares, update
from kernel_common cimport scale
from recurrent_layers cimport Rnn, Slot


cdef inline void step(Rnn *net, int touched, int words, float rate, float keep_c) noexcept nogil:
    """One update from the segment's gradient (clipped to a norm of clip * words): every
    slot's array by SGD or Adam; the rows of C that occur (unless tied, when C is a slot)
    decayed by keep_c first."""
    cdef int k, m = net.m
    cdef double norm = 0
    cdef float clipped = 1
    cdef Slot *slot
    cdef Py_ssize_t row
    if net.clip > 0:  # the gradient's norm, only to clip it
        for k in range(net.slots):
            norm += squares(net.slot[k].grad, net.slot[k].size)
        for k in range(touched):
            norm += squares(net.gC + <Py_ssize_t> net.touched[k] * m, m)
        norm = sqrt(norm)
        if norm > net.clip * words:
            clipped = <float> (net.clip * words / norm)
    if net.adam:
        net.adam_step[0] += 1
        adam_corrections(&net.settings, net.adam_step[0])
    for k in range(net.slots):
        slot = &net.slot[k]
        if slot.frozen:
            continue
        update(slot.param, slot.grad, slot.m, slot.v, slot.size, rate, clipped, &net.settings)
    for k in range(touched):
        row = <Py_ssize_t> net.touched[k] * m
        if keep_c != 1:
            scale(m, keep_c, net.C + row)
        update(net.C + row, net.gC + row, net.mC + row if net.adam else NULL, net.vC + row if net.adam else NULL,
               m, rate, clipped, &net.settings)


cdef inline void decay_weights(Rnn *net, float keep) noexcept nogil:
    """The bulk decay of the arrays whose role says so (the weights; not C's rows unless tied)."""
    cdef int k
    for k in range(net.slots):
        if net.slot[k].decayed:
            scale(<int> net.slot[k].size, keep, net.slot[k].param)


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
