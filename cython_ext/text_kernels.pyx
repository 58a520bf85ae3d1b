# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""Tokenising UTF-8 text (one sentence per line, ASCII whitespace between words, as
SRILM splits) straight from bytes: word counts, and word ids through a hash table of
the vocabulary, without a Python object per token. A line's leading `<s>` and trailing
`</s>` are implied by the sentence and dropped; lines without words are not sentences."""
import numpy as np
cimport numpy as cnp
from libc.stdint cimport int64_t, uint64_t
from libc.stdlib cimport free, malloc, realloc
from libc.string cimport memcmp, memcpy
from word_hash cimport EncodedText, Entry, encode_text, entry_insert, entry_slot, fnv1a, new_entries, next_word

cnp.import_array()


cdef class WordTable:
    """Open-addressing map from byte strings (kept alive by the caller) to int64 (its
    fields: nplmtk/_ext/text_kernels.pxd; the table's functions: cython_ext/word_hash.pxd)."""

    def __cinit__(self):
        self.capacity = 1 << 12
        self.size = 0
        self.entries = new_entries(self.capacity)
        if not self.entries:
            raise MemoryError()

    def __dealloc__(self):
        free(self.entries)

    cdef Entry *slot(self, const unsigned char *text, Py_ssize_t length, uint64_t h) noexcept nogil:
        return entry_slot(self.entries, self.capacity, text, length, h)

    cdef int grow(self) except -1 nogil:
        cdef Entry *grown = new_entries(2 * self.capacity)
        cdef Py_ssize_t i
        if not grown:
            with gil:
                raise MemoryError()
        for i in range(self.capacity):
            if self.entries[i].text != NULL:
                entry_slot(grown, 2 * self.capacity, self.entries[i].text, self.entries[i].length,
                           self.entries[i].hash)[0] = self.entries[i]
        free(self.entries)
        self.entries, self.capacity = grown, 2 * self.capacity
        return 0

    cdef Entry *insert(self, const unsigned char *text, Py_ssize_t length, int64_t value) except NULL nogil:
        cdef Entry *e = entry_insert(&self.entries, &self.capacity, &self.size, text, length, value)
        if e == NULL:
            with gil:
                raise MemoryError()
        return e


cdef WordTable word_table(list words):
    """The table of `words` (utf-8 bytes, kept alive by the caller), each word's value its position."""
    cdef WordTable table = WordTable()
    cdef Py_ssize_t i
    cdef bytes word
    for i, word in enumerate(words):
        table.insert(<const unsigned char *> word, len(word), i)
    return table


cdef object copied_array(const void *values, Py_ssize_t count, object dtype):
    """A numpy array of `dtype` holding `count` values copied from a C buffer."""
    array = np.empty(count, dtype=dtype)
    cdef cnp.ndarray out = array
    if count:
        memcpy(cnp.PyArray_DATA(out), values, count * out.itemsize)
    return array


cdef class WordCounts:
    """Word counts of blocks of text counted one after another into one table (a block's
    words would otherwise come back as a dict of its own, each merged in Python: most of
    the time of a vocabulary's pass over a large text). Each new word's bytes are copied,
    since a block goes once counted."""
    cdef WordTable table
    cdef readonly Py_ssize_t sentences

    def __cinit__(self):
        self.table = WordTable()
        self.sentences = 0

    def __dealloc__(self):
        cdef Py_ssize_t i
        if self.table is not None:
            for i in range(self.table.capacity):
                if self.table.entries[i].text != NULL:
                    free(<void *> self.table.entries[i].text)
                    self.table.entries[i].text = NULL

    cdef Entry *counted(self, const unsigned char *text, Py_ssize_t length) except NULL nogil:
        """The entry of `text`, its bytes copied when it is new."""
        cdef Py_ssize_t before = self.table.size
        cdef Entry *e = self.table.insert(text, length, 0)
        cdef unsigned char *copy
        if self.table.size != before:
            copy = <unsigned char *> malloc(length if length else 1)
            if copy == NULL:
                e.text = NULL  # (the entry freed with the table; its slot left empty)
                with gil:
                    raise MemoryError()
            memcpy(copy, text, length)
            e.text = copy
        return e

    def add(self, const unsigned char[::1] data, Py_ssize_t limit):
        """The words of `data` counted, up to its first word longer than `limit` bytes:
        (that word's offset in `data`, its length), or (-1, 0)."""
        cdef Py_ssize_t n = data.shape[0], pos = 0, start, line_tokens, long_start = -1
        cdef const unsigned char *base = &data[0] if n else NULL
        cdef const unsigned char *first_text = NULL
        cdef const unsigned char *last_text = NULL
        cdef Py_ssize_t first_length = 0, last_length = 0
        cdef Entry *e
        with nogil:
            while pos < n:
                line_tokens = 0
                while next_word(base, n, &pos, &start):
                    if pos - start > limit:
                        long_start = start
                        break
                    e = self.counted(base + start, pos - start)
                    e.value += 1
                    if line_tokens == 0:
                        first_text = base + start
                        first_length = pos - start
                    last_text = base + start
                    last_length = pos - start
                    line_tokens += 1
                if long_start >= 0:
                    break
                pos += 1
                if line_tokens == 0:
                    continue
                if first_length == 3 and memcmp(first_text, b"<s>", 3) == 0:
                    self.counted(first_text, 3).value -= 1
                    line_tokens -= 1
                if line_tokens > 0 and last_length == 4 and memcmp(last_text, b"</s>", 4) == 0:
                    self.counted(last_text, 4).value -= 1
                    line_tokens -= 1
                if line_tokens > 0:
                    self.sentences += 1
        if long_start < 0:
            return -1, 0
        return long_start, pos - long_start

    def counts(self):
        """{word bytes: count} of the words seen (a count above 0)."""
        counts = {}
        cdef Py_ssize_t i
        cdef Entry *e
        for i in range(self.table.capacity):
            e = &self.table.entries[i]
            if e.text != NULL and e.value > 0:
                counts[e.text[:e.length]] = e.value
        return counts


def encode_words(const unsigned char[::1] data, list words, int missing, int bos, int eos):
    """Word ids (int32; `missing` for words not in `words`, a list of utf-8 bytes whose
    positions are the ids) and the number of words of each sentence (int64)."""
    cdef WordTable table = word_table(words)
    cdef Py_ssize_t n = data.shape[0]
    cdef const unsigned char *base = &data[0] if n else NULL
    cdef EncodedText text
    cdef int status
    with nogil:
        status = encode_text(base, n, table.entries, table.capacity, missing, bos, eos, &text)
    if status < 0:
        free(text.ids)
        free(text.lengths)
        raise MemoryError()
    ids_array, lengths_array = copied_array(text.ids, text.count, np.int32), copied_array(text.lengths, text.lines,
                                                                                         np.int64)
    free(text.ids)
    free(text.lengths)
    return ids_array, lengths_array


def checked_utf8(const unsigned char[::1] data, Py_ssize_t start, Py_ssize_t stop, bint final):
    """(offset of the first sequence of data[start:stop] that is not UTF-8, or -1; where
    the next piece's check starts). As strict as Python's decoder (no overlong forms,
    surrogates or code points past U+10FFFF). Unless `final`, a sequence cut at `stop` is
    left to the next piece: its start is returned as the next start."""
    cdef Py_ssize_t i = start, need, j, bad = -1, resume = stop
    cdef unsigned char c, low, high
    cdef uint64_t word
    with nogil:
        while i < stop and bad < 0:
            while i + 8 <= stop:  # ASCII eight bytes at a time
                memcpy(&word, &data[i], 8)
                if word & 0x8080808080808080ULL:
                    break
                i += 8
            if i >= stop:
                break
            c = data[i]
            if c < 0x80:
                i += 1
                continue
            low, high, need = 0x80, 0xBF, 0
            if 0xC2 <= c <= 0xDF:
                need = 1
            elif 0xE0 <= c <= 0xEF:
                need = 2
                if c == 0xE0:
                    low = 0xA0  # shorter forms are overlong
                elif c == 0xED:
                    high = 0x9F  # surrogates
            elif 0xF0 <= c <= 0xF4:
                need = 3
                if c == 0xF0:
                    low = 0x90
                elif c == 0xF4:
                    high = 0x8F  # past U+10FFFF
            else:
                bad = i
                break
            if i + need >= stop and not final:
                for j in range(1, stop - i):  # what is there must fit; the rest comes with the next piece
                    c = data[i + j]
                    if c < (low if j == 1 else 0x80) or c > (high if j == 1 else 0xBF):
                        bad = i
                resume = i
                break
            for j in range(1, need + 1):
                if i + j >= stop:
                    bad = i
                    break
                c = data[i + j]
                if c < (low if j == 1 else 0x80) or c > (high if j == 1 else 0xBF):
                    bad = i
                    break
            i += need + 1
    if bad >= 0:
        return bad, bad
    return -1, resume


cdef inline bint parse_count(const unsigned char *text, Py_ssize_t length, int64_t *count) noexcept nogil:
    """*count from `[+-]digits` (a minus only before zeros); False unless a count below 2^63."""
    cdef Py_ssize_t i = 0
    cdef bint negative = False
    cdef uint64_t value = 0
    if length and (text[0] == 43 or text[0] == 45):  # '+' or '-'
        negative = text[0] == 45
        i = 1
    if i == length:
        return False
    while i < length:
        if not 48 <= text[i] <= 57:
            return False
        value = value * 10 + (text[i] - 48)
        if value > 9223372036854775807ULL:
            return False
        i += 1
    if negative and value:
        return False
    count[0] = <int64_t> value
    return True


def encode_count_lines(const unsigned char[::1] data, list words, int missing, int max_order, Py_ssize_t longest):
    """The lines `w1 ... wk count` of an SRILM counts file: word ids (int32, `missing` for
    words not in `words`, a list of utf-8 bytes whose positions are the ids), each line's
    k (int64) and count (int64), lines without words skipped; and the index among all of
    `data`'s lines of the first line that is not one (no word before the count, more than
    `max_order` words, a word of more than `longest` bytes, a count that is not an
    integer in 0 .. 2^63 - 1), or -1. The lines after a bad one are not read."""
    cdef WordTable table = word_table(words)
    cdef Py_ssize_t n = data.shape[0], pos = 0, start = 0, line_start, count = 0, lines = 0, line = 0
    cdef Py_ssize_t last_start = 0, last_end = 0, bad = -1
    cdef Py_ssize_t capacity = 1 << 16, line_capacity = 1 << 12
    cdef int *ids = <int *> malloc(capacity * sizeof(int))
    cdef int64_t *lengths = <int64_t *> malloc(line_capacity * sizeof(int64_t))
    cdef int64_t *counts = <int64_t *> malloc(line_capacity * sizeof(int64_t))
    cdef const unsigned char *base = &data[0] if n else NULL
    cdef Entry *e
    cdef int64_t value
    if not ids or not lengths or not counts:
        raise MemoryError()
    with nogil:
        while pos < n:
            line_start = count
            while next_word(base, n, &pos, &start):
                if pos - start > longest:
                    bad = line
                    break
                e = table.slot(base + start, pos - start, fnv1a(base + start, pos - start))
                if count == capacity:
                    capacity *= 2
                    ids = <int *> realloc(ids, capacity * sizeof(int))
                ids[count] = <int> e.value if e.text != NULL else missing
                count += 1
                last_start, last_end = start, pos
            if bad >= 0:
                count = line_start
                break
            if count > line_start:  # the last field is the count, not a word
                count -= 1
                if count == line_start or count - line_start > max_order \
                        or not parse_count(base + last_start, last_end - last_start, &value):
                    count = line_start
                    bad = line
                    break
                if lines == line_capacity:
                    line_capacity *= 2
                    lengths = <int64_t *> realloc(lengths, line_capacity * sizeof(int64_t))
                    counts = <int64_t *> realloc(counts, line_capacity * sizeof(int64_t))
                lengths[lines] = count - line_start
                counts[lines] = value
                lines += 1
            pos += 1
            line += 1
    ids_array, lengths_array = copied_array(ids, count, np.int32), copied_array(lengths, lines, np.int64)
    counts_array = copied_array(counts, lines, np.int64)
    free(ids)
    free(lengths)
    free(counts)
    return ids_array, lengths_array, counts_array, bad


def count_line_words(const unsigned char[::1] data, Py_ssize_t longest, list known):
    """The words of the lines `w1 ... wk count` of an SRILM counts file (every field but a
    line's last) that are not in `known` (utf-8 bytes), each once, in the order they first
    come; and the index among `data`'s lines of the first line with a word of more than
    `longest` bytes, or -1 (the lines after it are not read)."""
    cdef WordTable table = word_table(known)
    cdef Py_ssize_t n = data.shape[0], pos = 0, start = 0, line = 0, bad = -1, found = 0, capacity = 1 << 12
    cdef Py_ssize_t last_start = -1, last_end = 0, i
    cdef Py_ssize_t *spans = <Py_ssize_t *> malloc(2 * capacity * sizeof(Py_ssize_t))
    cdef const unsigned char *base = &data[0] if n else NULL
    cdef Entry *e
    if not spans:
        raise MemoryError()
    with nogil:
        while pos < n:
            last_start = -1
            while next_word(base, n, &pos, &start):
                if last_start >= 0:  # the field before this one is a word, not the count
                    if last_end - last_start > longest:
                        bad = line
                        break
                    e = table.slot(base + last_start, last_end - last_start,
                                   fnv1a(base + last_start, last_end - last_start))
                    if e.text == NULL:
                        table.insert(base + last_start, last_end - last_start, found)
                        if found == capacity:
                            capacity *= 2
                            spans = <Py_ssize_t *> realloc(spans, 2 * capacity * sizeof(Py_ssize_t))
                        spans[2 * found] = last_start
                        spans[2 * found + 1] = last_end
                        found += 1
                last_start, last_end = start, pos
            if bad >= 0:
                break
            pos += 1
            line += 1
    words = [bytes(data[spans[2 * i]:spans[2 * i + 1]]) for i in range(found)]
    free(spans)
    return words, bad
