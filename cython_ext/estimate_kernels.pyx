# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""The estimate's sums over n-grams grouped by context (nplmtk/ngram/estimate.py), each
one pass over the rows instead of numpy's chain of temporaries, with the arithmetic
numpy does, in its order: a context's sum runs over its n-grams in row order from 0.0,
as np.bincount's does, so the values are the same to the bit. `group[i]`: the context of
row i among `size`; any order of rows works (they usually come sorted)."""
import numpy as np
from libc.stdint cimport int64_t


# each loop checks a row's context as it reads it, and stops at the first out of range
# (its row; -1: none): no pass of its own over `group`

cdef int check_rows(const int64_t[::1] group, Py_ssize_t rows) except -1:
    if group.shape[0] != rows:
        raise ValueError(f"group has {group.shape[0]} rows, the values {rows}")
    return 0


cdef int check_outside(const int64_t[::1] group, Py_ssize_t bad, Py_ssize_t size) except -1:
    if bad >= 0:
        raise ValueError(f"group {group[bad]} of row {bad} outside 0..{size - 1}")
    return 0


def context_sums(const double[::1] values, const unsigned char[::1] mask, const int64_t[::1] group, Py_ssize_t size):
    """Each context's sum of the values of its rows where `mask` (None: every row):
    np.bincount(group, np.where(mask, values, 0.0), minlength=size)."""
    cdef Py_ssize_t i, bad = -1, rows = values.shape[0]
    cdef int64_t g
    cdef bint masked = mask is not None
    if masked and mask.shape[0] != rows:
        raise ValueError(f"mask has {mask.shape[0]} rows, the values {rows}")
    check_rows(group, rows)
    sums = np.zeros(size, dtype=np.float64)
    cdef double[::1] out = sums
    with nogil:
        for i in range(rows):
            g = group[i]
            if g < 0 or g >= size:
                bad = i
                break
            if not masked or mask[i]:
                out[g] += values[i]
    check_outside(group, bad, size)
    return sums


def context_counts(const int64_t[::1] count, const unsigned char[::1] eligible, const int64_t[::1] group,
                   Py_ssize_t size):
    """Each context's sum of its eligible rows' counts, and how many of them have counts of
    at least 1, 2 and 3 (the rows' observed, N2+ and N3+; float64, as bincount gives)."""
    cdef Py_ssize_t i, bad = -1, rows = count.shape[0]
    cdef int64_t g
    if eligible.shape[0] != rows:
        raise ValueError(f"eligible has {eligible.shape[0]} rows, count {rows}")
    check_rows(group, rows)
    arrays = [np.zeros(size, dtype=np.float64) for _ in range(4)]
    cdef double[::1] total = arrays[0], observed = arrays[1], min2 = arrays[2], min3 = arrays[3]
    with nogil:
        for i in range(rows):
            g = group[i]
            if g < 0 or g >= size:
                bad = i
                break
            if eligible[i]:
                total[g] += <double> count[i]
                observed[g] += 1
                if count[i] >= 2:
                    min2[g] += 1
                    if count[i] >= 3:
                        min3[g] += 1
    check_outside(group, bad, size)
    return arrays


def interpolated_probabilities(const double[::1] factor, const int64_t[::1] count, const double[::1] lower,
                               const int64_t[::1] group, const double[::1] denominator, const double[::1] gamma,
                               const unsigned char[::1] interpolating, const unsigned char[::1] counted):
    """p(w | h) = factor * c(hw) / c(h), plus gamma(h) p(w | h') where the context
    interpolates, for each row; and each context's sum of its `counted` rows' p."""
    cdef Py_ssize_t i, bad = -1, rows = count.shape[0], size = denominator.shape[0]
    cdef int64_t g
    cdef double p
    if factor.shape[0] != rows or lower.shape[0] != rows or counted.shape[0] != rows:
        raise ValueError("factor, count, lower and counted differ in rows")
    if gamma.shape[0] != size or interpolating.shape[0] != size:
        raise ValueError("denominator, gamma and interpolating differ in contexts")
    check_rows(group, rows)
    prob = np.empty(rows, dtype=np.float64)
    total = np.zeros(size, dtype=np.float64)
    cdef double[::1] out = prob, sums = total
    with nogil:
        for i in range(rows):
            g = group[i]
            if g < 0 or g >= size:
                bad = i
                break
            p = factor[i] * <double> count[i] / denominator[g]
            if interpolating[g]:
                p = p + gamma[g] * lower[i]
            out[i] = p
            if counted[i]:
                sums[g] += p
    check_outside(group, bad, size)
    return prob, total
