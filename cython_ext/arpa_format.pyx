# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""Formatting ARPA n-gram lines: `logp<TAB>w1 ... wk[<TAB>bow]\\n`, values as %.7g."""
import numpy as np
from libc.string cimport memcmp, memcpy
from libc.math cimport isinf

cdef extern from "format_g7.h":
    int format_g7(char *out, float value) noexcept nogil


cdef inline Py_ssize_t put_value(char *out, float value) noexcept nogil:
    if isinf(value) and value < 0:
        memcpy(out, b"-99", 3)
        return 3
    return format_g7(out, value)


def format_section(const int[:, ::1] grams, const float[::1] logp, const float[::1] bow,
                   const unsigned char[::1] has_bow, const unsigned char[::1] words,
                   const long long[::1] word_start):
    """The lines of one order as UTF-8 bytes; word w is words[word_start[w]:word_start[w+1]]."""
    cdef Py_ssize_t rows = grams.shape[0], k = grams.shape[1]
    cdef Py_ssize_t i, j, w, length, size = 0
    for i in range(rows):
        for j in range(k):
            w = grams[i, j]
            size += word_start[w + 1] - word_start[w] + 1
    size += rows * 66
    buffer = bytearray(size)
    cdef unsigned char[::1] out = buffer
    cdef char *base = <char *> &out[0] if size > 0 else NULL
    cdef Py_ssize_t pos = 0
    with nogil:
        for i in range(rows):
            pos += put_value(base + pos, logp[i])
            base[pos] = b'\t'
            pos += 1
            for j in range(k):
                w = grams[i, j]
                length = word_start[w + 1] - word_start[w]
                memcpy(base + pos, &words[word_start[w]], length)
                pos += length
                base[pos] = b' ' if j + 1 < k else b'\t'
                pos += 1
            if has_bow[i]:
                pos += put_value(base + pos, bow[i])
            else:
                pos -= 1
            base[pos] = b'\n'
            pos += 1
    return bytes(buffer[:pos])


def format_values(const float[::1] values):
    """Each value as printf("%.7g") would print it, -99 for -inf (for tests and reports)."""
    cdef char buffer[40]
    cdef Py_ssize_t i, n
    out = []
    for i in range(values.shape[0]):
        n = put_value(buffer, values[i])
        out.append(buffer[:n].decode("ascii"))
    return out


from libc.stdlib cimport strtod
from cpython.bytes cimport PyBytes_FromStringAndSize


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


class SectionError(ValueError):
    """(byte offset of the bad line, message)"""


cdef inline bint is_space(unsigned char c) noexcept nogil:
    return c == b' ' or c == b'\t' or c == b'\r' or c == b'\x0b' or c == b'\x0c'  # as nplmtk.text.split_words


cdef double parse_number(const unsigned char *text, Py_ssize_t length, Py_ssize_t line_start,
                         str what) except? -1e300:
    cdef char buffer[64]
    cdef char *end
    cdef double value = 0
    cdef Py_ssize_t i
    cdef bint word = False  # hexadecimal floats, inf and nan are not ARPA numbers
    if length >= 63:
        raise SectionError(line_start, f"bad {what} '{bytes(text[:length]).decode('utf-8', 'replace')[:40]}'")
    memcpy(buffer, text, length)
    buffer[length] = 0
    for i in range(length):
        word = word or buffer[i] == b'x' or buffer[i] == b'X' or buffer[i] == b'n' or buffer[i] == b'N'
    if not word:
        value = strtod(buffer, &end)
    if word or end != buffer + length or not -3.4e38 <= value <= 3.4e38:
        raise SectionError(line_start, f"bad {what} '{bytes(text[:length]).decode('utf-8', 'replace')}'")
    if what == "probability" and value > 0:
        raise SectionError(line_start, f"log10 probability {bytes(text[:length]).decode('utf-8', 'replace')} above 0")
    return value


def parse_section(const unsigned char[::1] data, Py_ssize_t start, Py_ssize_t end, int k, dict word_ids):
    """Parse the lines data[start:end] of a k-gram section: `logp w1 .. wk [bow]`.

    Returns (ids int32 (n, k), logp float64, bow float64, has_bow uint8, line_starts int64);
    words are looked up in `word_ids` (utf-8 bytes -> id), or, when it is None (the
    1-grams), numbered in order of appearance and returned as a list instead.
    """
    cdef Py_ssize_t pos = start, line_start, line_end, field_start, n = 0, j, fields
    cdef Py_ssize_t capacity = 1024
    cdef Py_ssize_t starts[64]
    cdef Py_ssize_t stops[64]
    cdef Py_ssize_t previous_starts[64]
    cdef Py_ssize_t previous_stops[64]
    cdef int previous_ids[64]
    cdef bint have_previous = False
    ids = np.empty((capacity, k), dtype=np.int32)
    logp = np.empty(capacity, dtype=np.float64)
    bow = np.zeros(capacity, dtype=np.float64)
    has_bow = np.zeros(capacity, dtype=np.uint8)
    line_starts = np.empty(capacity, dtype=np.int64)
    new_words = [] if word_ids is None else None
    cdef int[:, ::1] ids_view = ids
    cdef double[::1] logp_view = logp, bow_view = bow
    cdef unsigned char[::1] has_bow_view = has_bow
    cdef long long[::1] line_view = line_starts
    while pos < end:
        line_start = pos
        while pos < end and data[pos] != b'\n':
            pos += 1
        line_end = pos
        pos += 1
        fields = 0
        j = line_start
        while j < line_end:
            while j < line_end and is_space(data[j]):
                j += 1
            if j >= line_end:
                break
            field_start = j
            while j < line_end and not is_space(data[j]):
                j += 1
            if fields < 64:
                starts[fields] = field_start
                stops[fields] = j
            fields += 1
        if fields == 0:
            continue
        if fields != k + 1 and fields != k + 2:
            raise SectionError(line_start, f"a {k}-gram line needs a probability, {k} words and an "
                                           f"optional back-off weight, got {fields} fields")
        if n == capacity:
            capacity *= 2
            ids = np.resize(ids, (capacity, k)); ids_view = ids
            logp = np.resize(logp, capacity); logp_view = logp
            bow = np.resize(bow, capacity); bow_view = bow
            has_bow = np.resize(has_bow, capacity); has_bow_view = has_bow
            line_starts = np.resize(line_starts, capacity); line_view = line_starts
        logp_view[n] = parse_number(&data[starts[0]], stops[0] - starts[0], line_start, "probability")
        if fields == k + 2:
            bow_view[n] = parse_number(&data[starts[k + 1]], stops[k + 1] - starts[k + 1], line_start,
                                       "back-off weight")
            has_bow_view[n] = 1
        else:
            bow_view[n] = 0.0
            has_bow_view[n] = 0
        for j in range(k):
            # ARPA files group n-grams by context: reuse the id of an unchanged word.
            if (have_previous and new_words is None
                    and stops[j + 1] - starts[j + 1] == previous_stops[j] - previous_starts[j]
                    and memcmp(&data[starts[j + 1]], &data[previous_starts[j]],
                               stops[j + 1] - starts[j + 1]) == 0):
                ids_view[n, j] = previous_ids[j]
                continue
            word = PyBytes_FromStringAndSize(<char *> &data[starts[j + 1]], stops[j + 1] - starts[j + 1])
            if new_words is not None:
                ids_view[n, j] = len(new_words)
                new_words.append(word)
            else:
                found = word_ids.get(word)
                if found is None:
                    raise SectionError(line_start, f"word '{word.decode('utf-8', 'replace')}' is not among the 1-grams")
                ids_view[n, j] = found
        for j in range(k):
            previous_starts[j] = starts[j + 1]
            previous_stops[j] = stops[j + 1]
            previous_ids[j] = ids_view[n, j]
        have_previous = True
        line_view[n] = line_start
        n += 1
    return ids[:n].copy(), logp[:n].copy(), bow[:n].copy(), has_bow[:n].astype(bool), line_starts[:n].copy(), new_words
