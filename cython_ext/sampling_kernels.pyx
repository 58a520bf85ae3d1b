# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""The proposal's sampler of importance sampling (Bengio & Senecal 2003): Walker's alias
table, and draws made exactly as training makes them (kernel_common.pxd), for tests."""
import numpy as np
cimport numpy as cnp
from libc.string cimport memset

from kernel_common cimport Sampling, attach_proposal, draw_samples

cnp.import_array()


def draw(proposal, int count, unsigned long long seed=0, const int[:, ::1] windows=None):
    """`count` words drawn from `proposal` as training draws them (for a batch of
    `windows` when the proposal has a bigram part)."""
    cdef Sampling sp
    cdef int[::1] out = np.empty(max(count, 1), dtype=np.int32)
    cdef float[::1] log_q = np.empty(max(count, 1), dtype=np.float32)
    cdef int K = 1 if windows is None else windows.shape[0], n = 1 if windows is None else windows.shape[1]
    cdef int dummy = 0
    if proposal.bigram is not None and (windows is None or K == 0 or n < 2):
        raise ValueError("the bigram proposal draws for a batch of windows")
    memset(&sp, 0, sizeof(Sampling))
    attach_proposal(&sp, proposal)
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

