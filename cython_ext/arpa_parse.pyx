# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""Parsing the sections of an ARPA file (arpa_format.pyx writes them): each line's
numbers, its words' ids and its n-gram's key, a large section by two threads."""
import numpy as np
from libc.string cimport memchr, memcmp, memcpy
from libc.stdlib cimport strtod
from libc.math cimport INFINITY
from libc.stdint cimport uint64_t
from cython.parallel cimport prange
from cpython.bytes cimport PyBytes_FromStringAndSize
from nplmtk._ext.text_kernels cimport Entry, WordTable, fnv1a
from ngram_tables cimport find_key


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


cdef double *POWERS_OF_TEN = [1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14,
                              1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22]


cdef inline bint fast_number(const unsigned char *text, Py_ssize_t length, double *value) noexcept nogil:
    """`[+-]digits[.digits][e[+-]digits]` in Clinger's fast path: with at most 2^53 as the
    digits' integer and a power of ten within 1e22, one correctly rounded product or
    quotient gives the very double strtod gives. False for anything else (strtod decides)."""
    cdef Py_ssize_t i = 0, digits = 0
    cdef unsigned long long mantissa = 0
    cdef int exponent = 0, written = 0, sign = 1
    cdef bint negative = False
    if i < length and (text[i] == b'-' or text[i] == b'+'):
        negative = text[i] == b'-'
        i += 1
    while i < length and 48 <= text[i] <= 57:
        mantissa = mantissa * 10 + (text[i] - 48)
        digits += 1
        i += 1
    if i < length and text[i] == b'.':
        i += 1
        while i < length and 48 <= text[i] <= 57:
            mantissa = mantissa * 10 + (text[i] - 48)
            digits += 1
            exponent -= 1
            i += 1
    if digits == 0 or digits > 18:
        return False
    if i < length and (text[i] == b'e' or text[i] == b'E'):
        i += 1
        if i < length and (text[i] == b'-' or text[i] == b'+'):
            sign = -1 if text[i] == b'-' else 1
            i += 1
        if i == length:
            return False
        while i < length and 48 <= text[i] <= 57 and written < 1000:
            written = written * 10 + (text[i] - 48)
            i += 1
        exponent += sign * written
    if i != length or mantissa > (1ULL << 53) or not -22 <= exponent <= 22:
        return False
    if exponent < 0:
        value[0] = <double> mantissa / POWERS_OF_TEN[-exponent]
    else:
        value[0] = <double> mantissa * POWERS_OF_TEN[exponent]
    if negative:
        value[0] = -value[0]
    return True


cdef inline double read_value(const unsigned char *text, Py_ssize_t length, Py_ssize_t line_start,
                              bint probability) except? -1e300:
    """A log10 value of a line (-99 is log 0: -inf); a bad one raises SectionError."""
    cdef double value
    if not fast_number(text, length, &value) or (probability and value > 0):
        value = parse_number(text, length, line_start, "probability" if probability else "back-off weight")
    return -INFINITY if value == -99.0 else value


def word_table(list words, ids):
    """The WordTable of `words` (UTF-8 bytes, kept alive by the caller): word -> its id."""
    cdef WordTable table = WordTable()
    cdef bytes word
    for word, i in zip(words, ids):
        table.insert(<const unsigned char *> word, len(word), i)
    return table


cdef inline Py_ssize_t line_fields(const unsigned char *data, Py_ssize_t line_start, Py_ssize_t line_end,
                                   Py_ssize_t *starts, Py_ssize_t *stops) noexcept nogil:
    """The fields of a line split at white space: how many, the first 64 placed."""
    cdef Py_ssize_t j = line_start, field_start, fields = 0
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
    return fields


cdef inline long long context_row(const long long **lower, const long long **runs, const long long *lower_size,
                                  const long long *ids, int k, long long vocab_size) noexcept nogil:
    """The row of the context w1 .. wk-1 (word ids `ids`) among the (k-1)-grams, one order
    after the other, each among the children of the row found; -1 if it is not there."""
    cdef long long row = find_key(lower[0], 0, lower_size[0], ids[0])
    cdef int j
    for j in range(1, k - 1):
        if row >= 0:
            row = find_key(lower[j], runs[j - 1][row], runs[j - 1][row + 1], row * vocab_size + ids[j])
    return row


cdef lower_tables(list lower_keys, list lower_children, int k, const long long **lower, const long long **runs,
                  long long *lower_size):
    """Pointers to the sorted keys of orders 1 .. k-1 and their children runs (the lists
    hold the arrays)."""
    cdef const long long[::1] view
    cdef int j
    for j in range(k - 1):
        view = lower_keys[j]
        lower[j] = &view[0] if view.shape[0] else NULL
        lower_size[j] = view.shape[0]
        if j + 1 < k - 1:
            view = lower_children[j]
            runs[j] = &view[0]


cdef Py_ssize_t filled_lines(const unsigned char *data, Py_ssize_t start, Py_ssize_t end) noexcept nogil:
    """The lines of data[start:end] with a character other than white space (the lines
    parse_section reads)."""
    cdef Py_ssize_t n = 0, pos
    cdef bint filled = False
    for pos in range(start, end):
        if data[pos] == b'\n':
            n += filled
            filled = False
        elif not filled and not is_space(data[pos]):
            filled = True
    return n + filled


cdef extern from *:
    void prefetch "__builtin_prefetch" (const void *address) noexcept nogil


cdef enum:
    LOOKUP_BATCH = 32  # contexts searched side by side, their cache misses overlapping
    MAX_WORDS = 16  # of an n-gram in a batch (MAX_ORDER is 10)


cdef bint context_rows(const long long **lower, const long long **runs, const long long *unigram_row,
                       const long long *ids, Py_ssize_t count, int k, long long vocab_size,
                       long long *rows) noexcept nogil:
    """rows[b]: the row among the (k-1)-grams of the context of n-gram b (its words
    ids[b * MAX_WORDS ..]), for `count` of them at once: level by level, the binary
    searches in lockstep, each step's probes prefetched together (one search at a time
    waited for each cache miss in turn). False if a context is missing."""
    cdef long long low[LOOKUP_BATCH]
    cdef long long high[LOOKUP_BATCH]
    cdef long long stop[LOOKUP_BATCH]
    cdef long long middle[LOOKUP_BATCH]
    cdef long long query[LOOKUP_BATCH]
    cdef Py_ssize_t b
    cdef int j
    cdef bint searching = True
    for b in range(count):
        rows[b] = unigram_row[ids[b * MAX_WORDS]]
        if rows[b] < 0:
            return False
    for j in range(1, k - 1):
        for b in range(count):
            prefetch(&runs[j - 1][rows[b]])
        for b in range(count):
            low[b], high[b] = runs[j - 1][rows[b]], runs[j - 1][rows[b] + 1]
            stop[b] = high[b]
            query[b] = rows[b] * vocab_size + ids[b * MAX_WORDS + j]
        searching = True
        while searching:
            searching = False
            for b in range(count):
                if low[b] < high[b]:
                    middle[b] = (low[b] + high[b]) >> 1
                    prefetch(&lower[j][middle[b]])
                    searching = True
            for b in range(count):
                if low[b] < high[b]:
                    if lower[j][middle[b]] < query[b]:
                        low[b] = middle[b] + 1
                    else:
                        high[b] = middle[b]
        for b in range(count):
            if low[b] >= stop[b] or lower[j][low[b]] != query[b]:
                return False
            rows[b] = low[b]
    return True


cdef bint keyed(const long long **lower, const long long **runs, const long long *unigram_row,
                const long long *ids, const Py_ssize_t *first, Py_ssize_t count, Py_ssize_t stop, int k,
                long long vocab_size, long long *key) noexcept nogil:
    """The keys of the rows first[0] .. stop-1, which hold their last word: the rows from
    first[b] to first[b + 1] share context b, found by context_rows."""
    cdef long long rows[LOOKUP_BATCH]
    cdef Py_ssize_t b, i
    if not context_rows(lower, runs, unigram_row, ids, count, k, vocab_size, rows):
        return False
    for b in range(count):
        for i in range(first[b], first[b + 1] if b + 1 < count else stop):
            key[i] += rows[b] * vocab_size
    return True


cdef Py_ssize_t parse_rows(const unsigned char *data, Py_ssize_t start, Py_ssize_t end, int k, WordTable words,
                           const long long **lower, const long long **runs, const long long *unigram_row,
                           long long vocab_size, long long *key, float *logp, float *bow,
                           unsigned char *has_bow) noexcept nogil:
    """parse_section's loop for k >= 2 without the GIL: the rows of data[start:end] into
    the arrays, their contexts looked up LOOKUP_BATCH at a time (keyed); -1 at the first
    line that is not plainly right (a field count, a value the fast path does not read, a
    word or context not found), which the serial parser then reads again to say what is
    wrong."""
    cdef Py_ssize_t pos = start, line_start, line_end, n = 0, j, fields, pending = 0
    cdef Py_ssize_t starts[64]
    cdef Py_ssize_t stops[64]
    cdef Py_ssize_t previous_starts[64]
    cdef Py_ssize_t previous_stops[64]
    cdef long long ids[64]
    cdef long long previous_ids[64]
    cdef long long contexts[LOOKUP_BATCH * MAX_WORDS]
    cdef Py_ssize_t first[LOOKUP_BATCH]
    cdef uint64_t hashes[64]
    cdef bint reused[64]
    cdef bint have_previous = False, same_context
    cdef double value
    cdef Entry *entry
    while pos < end:
        line_start = pos
        while pos < end and data[pos] != b'\n':
            pos += 1
        line_end = pos
        pos += 1
        fields = line_fields(data, line_start, line_end, starts, stops)
        if fields == 0:
            continue
        if fields != k + 1 and fields != k + 2:
            return -1
        if not fast_number(&data[starts[0]], stops[0] - starts[0], &value) or value > 0:
            return -1
        logp[n] = -INFINITY if value == -99.0 else value
        if fields == k + 2:
            if not fast_number(&data[starts[k + 1]], stops[k + 1] - starts[k + 1], &value):
                return -1
            bow[n] = -INFINITY if value == -99.0 else value
            has_bow[n] = 1
        same_context = have_previous
        for j in range(k):  # the words not on the line before: hashed, their slots prefetched together
            reused[j] = (have_previous and stops[j + 1] - starts[j + 1] == previous_stops[j] - previous_starts[j]
                         and memcmp(&data[starts[j + 1]], &data[previous_starts[j]],
                                    stops[j + 1] - starts[j + 1]) == 0)
            if reused[j]:
                ids[j] = previous_ids[j]
                continue
            if j < k - 1:
                same_context = False
            hashes[j] = fnv1a(&data[starts[j + 1]], stops[j + 1] - starts[j + 1])
            prefetch(&words.entries[hashes[j] & (words.capacity - 1)])
        for j in range(k):
            if not reused[j]:
                entry = words.slot(&data[starts[j + 1]], stops[j + 1] - starts[j + 1], hashes[j])
                if entry.text == NULL:
                    return -1
                ids[j] = entry.value
        if not same_context:  # a new context: batched (the full batch's keys done first)
            if pending == LOOKUP_BATCH:
                if not keyed(lower, runs, unigram_row, contexts, first, pending, n, k, vocab_size, key):
                    return -1
                pending = 0
            for j in range(k - 1):
                contexts[pending * MAX_WORDS + j] = ids[j]
            first[pending] = n
            pending += 1
        key[n] = ids[k - 1]  # its context's row * |V| added by keyed
        for j in range(k):
            previous_starts[j] = starts[j + 1]
            previous_stops[j] = stops[j + 1]
            previous_ids[j] = ids[j]
        have_previous = True
        n += 1
    if pending and not keyed(lower, runs, unigram_row, contexts, first, pending, n, k, vocab_size, key):
        return -1
    return n


PARALLEL_BYTES = 1 << 20  # sections of fewer bytes are parsed by one thread


PARSED_BLOCK = 32 << 20  # bytes of a section parsed (by two threads) before their memory is handed back


def _parse_in_parts(const unsigned char[::1] data, Py_ssize_t start, Py_ssize_t end, int k, Py_ssize_t room,
                    WordTable words, list lower_keys, list lower_children, long long vocab_size, release):
    """parse_section's result for a section of `room` lines, read a block of about
    PARSED_BLOCK bytes at a time, each block by two threads (each half from a line start,
    the rows of the first half counted first), `release(offset)` called after each; None
    when a line needs the serial parser's attention or the section holds more or fewer
    than `room` lines."""
    cdef Py_ssize_t parts = 2, p, j, block_start, block_end, done = 0
    cdef Py_ssize_t bounds[3]
    cdef Py_ssize_t counts[2]
    cdef Py_ssize_t parsed[2]
    cdef Py_ssize_t offsets[2]
    cdef const long long *lower[16]
    cdef const long long *runs[16]
    cdef long long lower_size[16]
    cdef const unsigned char *text = &data[0]
    lower_tables(lower_keys, lower_children, k, lower, runs, lower_size)
    rows_of_words = np.full(vocab_size + 1, -1, dtype=np.int64)  # word id -> its 1-gram's row
    rows_of_words[lower_keys[0]] = np.arange(len(lower_keys[0]))
    cdef const long long[::1] unigram_view = rows_of_words
    cdef const long long *unigram_row = &unigram_view[0]
    keys = np.empty(room, dtype=np.int64)
    logp = np.empty(room, dtype=np.float32)
    bow = np.zeros(room, dtype=np.float32)
    has_bow = np.zeros(room, dtype=np.uint8)
    cdef long long[::1] key_view = keys
    cdef float[::1] logp_view = logp, bow_view = bow
    cdef unsigned char[::1] has_bow_view = has_bow
    cdef long long *key_out = &key_view[0]
    cdef float *logp_out = &logp_view[0]
    cdef float *bow_out = &bow_view[0]
    cdef unsigned char *has_bow_out = &has_bow_view[0]
    block_start = start
    while block_start < end:
        block_end = min(end, block_start + PARSED_BLOCK)
        while block_end < end and data[block_end - 1] != b'\n':
            block_end += 1
        bounds[0], bounds[2] = block_start, block_end
        bounds[1] = block_start + (block_end - block_start) // 2
        while bounds[1] < block_end and data[bounds[1] - 1] != b'\n':
            bounds[1] += 1
        for p in prange(parts, nogil=True, num_threads=parts, schedule="static", chunksize=1):
            counts[p] = filled_lines(text, bounds[p], bounds[p + 1])
        if done + counts[0] + counts[1] > room:
            return None
        offsets[0], offsets[1] = done, done + counts[0]
        for p in prange(parts, nogil=True, num_threads=parts, schedule="static", chunksize=1):
            parsed[p] = parse_rows(text, bounds[p], bounds[p + 1], k, words, lower, runs, unigram_row, vocab_size,
                                   key_out + offsets[p], logp_out + offsets[p], bow_out + offsets[p],
                                   has_bow_out + offsets[p])
        if parsed[0] != counts[0] or parsed[1] != counts[1]:
            return None
        done += counts[0] + counts[1]
        block_start = block_end
        release(block_end)
    if done != room:
        return None
    return room, keys, logp, bow, has_bow.view(bool), None


def row_offset(const unsigned char[::1] data, Py_ssize_t start, Py_ssize_t end, Py_ssize_t row):
    """The offset of the line of row `row` of a section data[start:end] (its row-th line
    that is not blank, from 0), for error messages."""
    cdef Py_ssize_t pos = start, line_start
    cdef bint filled
    while pos < end:
        line_start, filled = pos, False
        while pos < end and data[pos] != b'\n':
            filled = filled or not is_space(data[pos])
            pos += 1
        pos += 1
        if filled:
            if row == 0:
                return line_start
            row -= 1
    return end


def next_header(const unsigned char[::1] data, Py_ssize_t start, Py_ssize_t stop):
    """The offset of the first backslash in data[start:stop] that starts a line (the next
    section's header, or \\end\\), -1 if none: memchr's speed, backslashes being rare."""
    cdef const unsigned char *found
    cdef Py_ssize_t at = start, header = -1
    with nogil:
        while at < stop:
            found = <const unsigned char *> memchr(&data[at], 92, stop - at)
            if found == NULL:
                break
            at = found - &data[0]
            if at > 0 and data[at - 1] == 10:
                header = at
                break
            at += 1
    return header


def parse_section(const unsigned char[::1] data, Py_ssize_t start, Py_ssize_t end, int k, Py_ssize_t room,
                  WordTable words=None, list lower_keys=None, list lower_children=None, long long vocab_size=0,
                  release=None):
    """Parse the lines data[start:end] of a k-gram section: `logp w1 .. wk [bow]`.

    Returns (count, keys int64, logp float32, bow float32, has_bow bool, new_words) for the first `room` lines (`count`: how many there are), -99
    read as -inf. The 1-grams (`words` None) are numbered in order of appearance, their
    bytes returned in `new_words`. Above, `words` gives each word's id, `lower_keys` the
    sorted keys of orders 1 .. k-1 (nplmtk/ngram/index.py) and `lower_children` their
    children runs (nplmtk._ext.backoff_kernels.children_runs), and the key of w1 .. wk is
    `row of w1 .. wk-1 * vocab_size + wk`.
    """
    cdef Py_ssize_t pos = start, line_start, line_end, n = 0, j, fields
    cdef Py_ssize_t starts[64]
    cdef Py_ssize_t stops[64]
    cdef Py_ssize_t previous_starts[64]
    cdef Py_ssize_t previous_stops[64]
    cdef long long ids[64]
    cdef long long previous_ids[64]
    cdef const long long *lower[16]
    cdef const long long *runs[16]
    cdef long long lower_size[16]
    cdef long long previous_row = -1
    cdef bint have_previous = False, same_context
    cdef Entry *entry
    if words is not None and k > 1 and end - start >= PARALLEL_BYTES and room > 0:
        result = _parse_in_parts(data, start, end, k, room, words, lower_keys, lower_children, vocab_size,
                                 release or (lambda offset: None))
        if result is not None:
            return result
    keys = np.empty(room, dtype=np.int64)
    logp = np.empty(room, dtype=np.float32)
    bow = np.zeros(room, dtype=np.float32)
    has_bow = np.zeros(room, dtype=np.uint8)
    new_words = [] if words is None else None
    cdef long long[::1] key_view = keys
    cdef float[::1] logp_view = logp, bow_view = bow
    cdef unsigned char[::1] has_bow_view = has_bow
    lower_tables(lower_keys, lower_children, k, lower, runs, lower_size)
    while pos < end:
        line_start = pos
        while pos < end and data[pos] != b'\n':
            pos += 1
        line_end = pos
        pos += 1
        fields = line_fields(&data[0], line_start, line_end, starts, stops)
        if fields == 0:
            continue
        if fields != k + 1 and fields != k + 2:
            raise SectionError(line_start, f"a {k}-gram line needs a probability, {k} words and an "
                                           f"optional back-off weight, got {fields} fields")
        if n >= room:  # more lines than the header says: only counted
            n += 1
            continue
        logp_view[n] = read_value(&data[starts[0]], stops[0] - starts[0], line_start, True)
        if fields == k + 2:
            bow_view[n] = read_value(&data[starts[k + 1]], stops[k + 1] - starts[k + 1], line_start, False)
            has_bow_view[n] = 1
        same_context = have_previous
        for j in range(k):
            # ARPA files group n-grams by context: reuse the id of an unchanged word.
            if (have_previous and new_words is None
                    and stops[j + 1] - starts[j + 1] == previous_stops[j] - previous_starts[j]
                    and memcmp(&data[starts[j + 1]], &data[previous_starts[j]],
                               stops[j + 1] - starts[j + 1]) == 0):
                ids[j] = previous_ids[j]
                continue
            if j < k - 1:
                same_context = False
            if new_words is not None:
                ids[j] = len(new_words)
                new_words.append(PyBytes_FromStringAndSize(<char *> &data[starts[j + 1]], stops[j + 1] - starts[j + 1]))
                continue
            entry = words.slot(&data[starts[j + 1]], stops[j + 1] - starts[j + 1],
                               fnv1a(&data[starts[j + 1]], stops[j + 1] - starts[j + 1]))
            if entry.text == NULL:
                word = PyBytes_FromStringAndSize(<char *> &data[starts[j + 1]], stops[j + 1] - starts[j + 1])
                raise SectionError(line_start, f"word '{word.decode('utf-8', 'replace')}' is not among the 1-grams")
            ids[j] = entry.value
        if k == 1:
            key_view[n] = ids[0]
        else:
            if not same_context:
                previous_row = context_row(lower, runs, lower_size, ids, k, vocab_size)
                if previous_row < 0:
                    raise SectionError(line_start, f"the context of this {k}-gram is not among the {k - 1}-grams")
            key_view[n] = previous_row * vocab_size + ids[k - 1]
        for j in range(k):
            previous_starts[j] = starts[j + 1]
            previous_stops[j] = stops[j + 1]
            previous_ids[j] = ids[j]
        have_previous = True
        n += 1
    return n, keys, logp, bow, has_bow.view(bool), new_words

