# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""Formatting ARPA n-gram lines: `logp<TAB>w1 ... wk[<TAB>bow]\\n`, values as %.7g
(arpa_parse.pyx reads them)."""
import numpy as np
from libc.string cimport memcpy
from libc.stdlib cimport strtod
from libc.math cimport isinf
from libc.stdint cimport int64_t, uint32_t
from cython.parallel cimport prange
from cpython.bytearray cimport PyByteArray_AS_STRING, PyByteArray_FromStringAndSize, PyByteArray_Resize

from word_slots cimport WORD_SLOT_BYTES, SlotTable, prefetch_word, put_word, slot_table, word_length

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


cdef Py_ssize_t PREFETCH_ROWS = 4  # how many rows ahead a row's word slots are prefetched (2 to 16 alike)

# the room a row's line may need beyond its words' bytes: two values as snprintf writes
# them (32 bytes each at most), k + 1 separators and the newline, and a short word's
# 16-byte store past the line's end
cdef Py_ssize_t row_room(Py_ssize_t k) noexcept nogil:
    return 2 * 32 + k + 2 + WORD_SLOT_BYTES


cdef Py_ssize_t format_rows(char *base, Py_ssize_t capacity, Py_ssize_t *next_row, Py_ssize_t end,
                            Py_ssize_t longest, const int[:, :] grams, const float[:] logp, const float[:] bow,
                            const unsigned char[:] has_bow, bint with_bow, bint bow_flags, const int64_t[:] order,
                            bint ordered, const SlotTable *words) noexcept nogil:
    """Rows order[i] (row i unless `ordered`) for i from *next_row to end-1 as ARPA lines
    at `base`, as many as fit in `capacity` bytes (*next_row is left at the first not
    written); a row has a back-off weight where has_bow says so (`bow_flags`), else where
    its weight is not NO_WEIGHT (none at all without `with_bow`); returns the bytes
    written. `longest`: the longest word's bytes."""
    cdef Py_ssize_t i, r, j, need, k = grams.shape[1], pos = 0
    cdef Py_ssize_t sure = row_room(k) + k * longest  # a row fits in this much, whatever its words
    cdef uint32_t bits
    cdef bint weighted
    for i in range(next_row[0], end):
        if i + PREFETCH_ROWS < end:  # the words' slots of a row ahead: read from cache when its turn comes
            r = order[i + PREFETCH_ROWS] if ordered else i + PREFETCH_ROWS
            for j in range(k):
                prefetch_word(words, grams[r, j])
        r = order[i] if ordered else i
        if capacity - pos < sure:
            need = row_room(k)
            for j in range(k):
                need += word_length(words, grams[r, j])
            if capacity - pos < need:
                next_row[0] = i
                return pos
        pos += put_value(base + pos, logp[r])
        base[pos] = b'\t'
        pos += 1
        for j in range(k):
            pos += put_word(base + pos, words, grams[r, j])
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
    next_row[0] = end
    return pos


def format_section(const int[:, :] grams, const float[:] logp, const float[:] bow, const unsigned char[:] has_bow,
                   const int64_t[:] order, words):
    """The lines of one order's rows taken in `order` (None: as they are; the tables need
    no sorted copies), as UTF-8 bytes in consecutive pieces (formatted by two threads when
    there are many); `words` a WordSlots. The tables may be strided (fields of records).
    has_bow None: a row has a weight where bow is not NO_WEIGHT's bits; bow None: no row
    has one."""
    cdef bint with_bow = bow is not None, bow_flags = has_bow is not None, ordered = order is not None
    cdef Py_ssize_t rows = order.shape[0] if ordered else grams.shape[0], k = grams.shape[1]
    cdef Py_ssize_t p, parts = 2 if rows >= 100000 else 1, longest = words.longest
    cdef Py_ssize_t bounds[3]
    cdef Py_ssize_t next_row[2]
    cdef Py_ssize_t capacity[2]
    cdef Py_ssize_t lengths[2]
    cdef char *bases[2]
    cdef SlotTable table = slot_table(words)
    if logp.shape[0] != grams.shape[0] or (with_bow and bow.shape[0] != grams.shape[0]) or \
            (bow_flags and has_bow.shape[0] != grams.shape[0]):
        raise ValueError("grams, logp, bow and has_bow differ in rows")
    # each part's room guessed from the words' mean length, and doubled where it runs out;
    # not zero-filled: the room never written is never touched (nor resident)
    cdef double mean_length = words.start[len(words)] / max(1, len(words))
    bounds[0], bounds[1], bounds[parts] = 0, rows // parts, rows
    buffers = []
    for p in range(parts):
        next_row[p], lengths[p] = bounds[p], 0
        capacity[p] = <Py_ssize_t> ((bounds[p + 1] - bounds[p]) * (row_room(k) + k * mean_length)) + row_room(k)
        buffers.append(PyByteArray_FromStringAndSize(NULL, capacity[p]))
    while True:
        for p in range(parts):
            bases[p] = PyByteArray_AS_STRING(buffers[p])
        for p in prange(parts, nogil=True, num_threads=parts, schedule="static", chunksize=1):
            lengths[p] += format_rows(bases[p] + lengths[p], capacity[p] - lengths[p], &next_row[p], bounds[p + 1],
                                      longest, grams, logp, bow, has_bow, with_bow, bow_flags, order, ordered, &table)
        if next_row[0] == bounds[1] and next_row[parts - 1] == bounds[parts]:
            return [memoryview(buffers[p])[:lengths[p]] for p in range(parts)]
        for p in range(parts):
            if next_row[p] < bounds[p + 1]:
                capacity[p] = 2 * capacity[p] + row_room(k) + k * longest
                PyByteArray_Resize(buffers[p], capacity[p])


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
