# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""Tokenising UTF-8 text (one sentence per line, ASCII whitespace between words, as
SRILM splits) straight from bytes: word counts, and word ids through a hash table of
the vocabulary, without a Python object per token. A line's leading `<s>` and trailing
`</s>` are implied by the sentence and dropped; lines without words are not sentences."""
import numpy as np
cimport numpy as cnp
from libc.stdint cimport int64_t, uint64_t
from libc.stdlib cimport free, malloc, realloc
from libc.string cimport memcmp

cnp.import_array()


cdef inline bint is_space(unsigned char c) noexcept nogil:
    return c == 32 or (9 <= c <= 13)


cdef inline bint next_word(const unsigned char *base, Py_ssize_t n, Py_ssize_t *pos,
                           Py_ssize_t *start) noexcept nogil:
    """Move *pos past blanks to the next word of this line and past that word, setting
    *start to its beginning; False at the end of the line (pos then at its newline)."""
    while pos[0] < n and base[pos[0]] != 10 and is_space(base[pos[0]]):
        pos[0] += 1
    if pos[0] >= n or base[pos[0]] == 10:
        return False
    start[0] = pos[0]
    while pos[0] < n and not is_space(base[pos[0]]):
        pos[0] += 1
    return True


cdef class WordTable:
    """Open-addressing map from byte strings (kept alive by the caller) to int64 (its
    fields and the Entry struct: nplmtk/_ext/text_kernels.pxd)."""

    def __cinit__(self):
        self.capacity = 1 << 12
        self.size = 0
        self.entries = <Entry *> malloc(self.capacity * sizeof(Entry))
        if not self.entries:
            raise MemoryError()
        for i in range(self.capacity):
            self.entries[i].text = NULL

    def __dealloc__(self):
        free(self.entries)

    cdef Entry *slot(self, const unsigned char *text, Py_ssize_t length, uint64_t h) noexcept nogil:
        cdef Py_ssize_t mask = self.capacity - 1, i = h & mask
        while self.entries[i].text != NULL:
            if (self.entries[i].hash == h and self.entries[i].length == length
                    and memcmp(self.entries[i].text, text, length) == 0):
                return &self.entries[i]
            i = (i + 1) & mask
        return &self.entries[i]

    cdef int grow(self) except -1 nogil:
        cdef Entry *old = self.entries
        cdef Py_ssize_t old_capacity = self.capacity, i
        cdef Entry *target
        self.capacity *= 2
        self.entries = <Entry *> malloc(self.capacity * sizeof(Entry))
        if not self.entries:
            with gil:
                raise MemoryError()
        for i in range(self.capacity):
            self.entries[i].text = NULL
        for i in range(old_capacity):
            if old[i].text != NULL:
                target = self.slot(old[i].text, old[i].length, old[i].hash)
                target[0] = old[i]
        free(old)
        return 0

    cdef Entry *insert(self, const unsigned char *text, Py_ssize_t length, int64_t value) except NULL nogil:
        cdef uint64_t h = fnv1a(text, length)
        cdef Entry *e = self.slot(text, length, h)
        if e.text == NULL:
            if 2 * (self.size + 1) > self.capacity:
                self.grow()
                e = self.slot(text, length, h)
            e.hash = h
            e.text = text
            e.length = length
            e.value = value
            self.size += 1
        return e


def count_words(const unsigned char[::1] data):
    """({word bytes: count}, number of sentences) of a text."""
    cdef WordTable table = WordTable()
    cdef Py_ssize_t n = data.shape[0], pos = 0, start, line_tokens, sentences = 0
    cdef const unsigned char *base = &data[0] if n else NULL
    cdef const unsigned char *first_text = NULL
    cdef const unsigned char *last_text = NULL
    cdef Py_ssize_t first_length = 0, last_length = 0
    cdef Entry *e
    with nogil:
        while pos < n:
            line_tokens = 0
            while next_word(base, n, &pos, &start):
                e = table.insert(base + start, pos - start, 0)
                e.value += 1
                if line_tokens == 0:
                    first_text = base + start
                    first_length = pos - start
                last_text = base + start
                last_length = pos - start
                line_tokens += 1
            pos += 1
            if line_tokens == 0:
                continue
            if first_length == 3 and memcmp(first_text, b"<s>", 3) == 0:
                e = table.insert(first_text, 3, 0)
                e.value -= 1
                line_tokens -= 1
            if line_tokens > 0 and last_length == 4 and memcmp(last_text, b"</s>", 4) == 0:
                e = table.insert(last_text, 4, 0)
                e.value -= 1
                line_tokens -= 1
            if line_tokens > 0:
                sentences += 1
    counts = {}
    cdef Py_ssize_t i
    for i in range(table.capacity):
        e = &table.entries[i]
        if e.text != NULL and e.value > 0:
            counts[e.text[:e.length]] = e.value
    return counts, sentences


def encode_words(const unsigned char[::1] data, list words, int missing, int bos, int eos):
    """Word ids (int32; `missing` for words not in `words`, a list of utf-8 bytes whose
    positions are the ids) and the number of words of each sentence (int64)."""
    cdef WordTable table = WordTable()
    cdef Py_ssize_t i, n = data.shape[0], pos = 0, start, line_start, count = 0, lines = 0
    cdef Py_ssize_t capacity = 1 << 16, line_capacity = 1 << 12
    cdef bytes word
    for i, word in enumerate(words):
        table.insert(<const unsigned char *> word, len(word), i)
    cdef int *ids = <int *> malloc(capacity * sizeof(int))
    cdef int64_t *lengths = <int64_t *> malloc(line_capacity * sizeof(int64_t))
    cdef const unsigned char *base = &data[0] if n else NULL
    cdef Entry *e
    cdef int value
    if not ids or not lengths:
        raise MemoryError()
    with nogil:
        while pos < n:
            line_start = count
            while next_word(base, n, &pos, &start):
                e = table.slot(base + start, pos - start, fnv1a(base + start, pos - start))
                value = <int> e.value if e.text != NULL else missing
                if count == capacity:
                    capacity *= 2
                    ids = <int *> realloc(ids, capacity * sizeof(int))
                ids[count] = value
                count += 1
            pos += 1
            if count > line_start and ids[line_start] == bos:
                for i in range(line_start, count - 1):
                    ids[i] = ids[i + 1]
                count -= 1
            if count > line_start and ids[count - 1] == eos:
                count -= 1
            if count > line_start:
                if lines == line_capacity:
                    line_capacity *= 2
                    lengths = <int64_t *> realloc(lengths, line_capacity * sizeof(int64_t))
                lengths[lines] = count - line_start
                lines += 1
    ids_array = np.empty(count, dtype=np.int32)
    lengths_array = np.empty(lines, dtype=np.int64)
    cdef int[::1] ids_out = ids_array
    cdef int64_t[::1] lengths_out = lengths_array
    for i in range(count):
        ids_out[i] = ids[i]
    for i in range(lines):
        lengths_out[i] = lengths[i]
    free(ids)
    free(lengths)
    return ids_array, lengths_array
