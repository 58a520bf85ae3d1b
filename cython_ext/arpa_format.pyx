# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""Formatting ARPA n-gram lines: `logp<TAB>w1 ... wk[<TAB>bow]\\n`, values as %.7g
(arpa_parse.pyx reads them)."""
import numpy as np
from libc.string cimport memcpy
from libc.stdlib cimport strtod
from libc.math cimport isinf
from libc.stdint cimport int64_t, uint32_t
from cython.parallel cimport prange
from cpython.bytearray cimport PyByteArray_FromStringAndSize

cdef extern from "format_g7.h":
    int format_g7(char *out, float value) noexcept nogil


cdef inline Py_ssize_t put_value(char *out, float value) noexcept nogil:
    if isinf(value) and value < 0:
        memcpy(out, b"-99", 3)
        return 3
    return format_g7(out, value)


# a back-off weight's float32 bits where its row has none (format_section without has_bow):
# a signalling NaN, which no arithmetic makes
NO_WEIGHT = 0x7FA00001
cdef uint32_t NO_WEIGHT_BITS = NO_WEIGHT


cdef Py_ssize_t format_rows(char *base, const int[:, :] grams, const float[:] logp, const float[:] bow,
                            const unsigned char[:] has_bow, bint with_bow, bint bow_flags, const int64_t[:] order,
                            bint ordered, const unsigned char[::1] words, const long long[::1] word_start,
                            Py_ssize_t start, Py_ssize_t end) noexcept nogil:
    """Rows order[start..end-1] (rows start..end-1 unless `ordered`) as ARPA lines at
    `base`; a row has a back-off weight where has_bow says so (`bow_flags`), else where its
    weight is not NO_WEIGHT (none at all without `with_bow`); returns the bytes written."""
    cdef Py_ssize_t i, r, j, w, length, k = grams.shape[1], pos = 0
    cdef uint32_t bits
    cdef bint weighted
    for i in range(start, end):
        r = order[i] if ordered else i
        pos += put_value(base + pos, logp[r])
        base[pos] = b'\t'
        pos += 1
        for j in range(k):
            w = grams[r, j]
            length = word_start[w + 1] - word_start[w]
            memcpy(base + pos, &words[word_start[w]], length)
            pos += length
            base[pos] = b' ' if j + 1 < k else b'\t'
            pos += 1
        weighted = False
        if with_bow:
            if bow_flags:
                weighted = has_bow[r] != 0
            else:
                memcpy(&bits, &bow[r], 4)
                weighted = bits != NO_WEIGHT_BITS
        if weighted:
            pos += put_value(base + pos, bow[r])
        else:
            pos -= 1
        base[pos] = b'\n'
        pos += 1
    return pos


def format_section(const int[:, :] grams, const float[:] logp, const float[:] bow, const unsigned char[:] has_bow,
                   const int64_t[:] order, const unsigned char[::1] words, const long long[::1] word_start):
    """The lines of one order's rows taken in `order` (None: as they are; the tables need
    no sorted copies), as UTF-8 bytes in consecutive pieces (formatted by two threads when
    there are many); word w is words[word_start[w]:word_start[w+1]]. The tables may be
    strided (fields of records). has_bow None: a row has a weight where bow is not
    NO_WEIGHT's bits; bow None: no row has one."""
    cdef bint with_bow = bow is not None, bow_flags = has_bow is not None, ordered = order is not None
    cdef Py_ssize_t rows = order.shape[0] if ordered else grams.shape[0], k = grams.shape[1]
    cdef Py_ssize_t i, j, w, r, p, parts = 2 if rows >= 100000 else 1
    cdef Py_ssize_t bounds[3]
    cdef Py_ssize_t sizes[2]
    cdef Py_ssize_t lengths[2]
    cdef char *bases[2]
    cdef unsigned char[::1] view
    if logp.shape[0] != grams.shape[0] or (with_bow and bow.shape[0] != grams.shape[0]) or \
            (bow_flags and has_bow.shape[0] != grams.shape[0]):
        raise ValueError("grams, logp, bow and has_bow differ in rows")
    bounds[0], bounds[1], bounds[parts] = 0, rows // parts, rows
    for p in range(parts):
        sizes[p] = (bounds[p + 1] - bounds[p]) * (66 + k) + 1  # two values, separators, newline at most
        for i in range(bounds[p], bounds[p + 1]):
            r = order[i] if ordered else i
            for j in range(k):
                w = grams[r, j]
                sizes[p] += word_start[w + 1] - word_start[w]
    # not zero-filled: the room never written is never touched (nor resident)
    buffers = [PyByteArray_FromStringAndSize(NULL, sizes[p]) for p in range(parts)]
    for p in range(parts):
        view = buffers[p]
        bases[p] = <char *> &view[0]
    for p in prange(parts, nogil=True, num_threads=parts, schedule="static", chunksize=1):
        lengths[p] = format_rows(bases[p], grams, logp, bow, has_bow, with_bow, bow_flags, order, ordered, words,
                                 word_start, bounds[p], bounds[p + 1])
    return [memoryview(buffers[p])[:lengths[p]] for p in range(parts)]


def format_values(const float[::1] values):
    """Each value as printf("%.7g") would print it, -99 for -inf (for tests and reports)."""
    cdef char buffer[40]
    cdef Py_ssize_t i, n
    out = []
    for i in range(values.shape[0]):
        n = put_value(buffer, values[i])
        out.append(buffer[:n].decode("ascii"))
    return out


def as_printed(const float[::1] values):
    """Each value as an ARPA file gives it back: printed as %.7g and read again (float32;
    -inf stays -inf), so a binary model holds exactly the values of its ARPA file."""
    cdef char buffer[40]
    cdef Py_ssize_t i, n
    out = np.empty(values.shape[0], dtype=np.float32)
    cdef float[::1] view = out
    with nogil:
        for i in range(values.shape[0]):
            if isinf(values[i]) and values[i] < 0:
                view[i] = values[i]
                continue
            n = format_g7(buffer, values[i])
            buffer[n] = 0
            view[i] = <float> strtod(buffer, NULL)
    return out
