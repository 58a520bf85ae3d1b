# Words (UTF-8 bytes) to ids by open addressing, and text split into words and sentences
# as SRILM splits it: the text kernels (text_kernels.pyx, whose WordTable wraps these)
# and the numpy-free scorer of binary models (ngram_fast_score.pyx) share them. Inline:
# cimported, no module imported at run time.
from libc.stdint cimport int64_t, uint64_t
from libc.stdlib cimport malloc, realloc, free
from libc.string cimport memcpy


cdef inline uint64_t fnv1a(const unsigned char *text, Py_ssize_t length) noexcept nogil:
    cdef uint64_t h = 14695981039346656037ULL
    cdef Py_ssize_t i
    for i in range(length):
        h = (h ^ text[i]) * 1099511628211ULL
    return h


cdef struct Entry:
    uint64_t hash
    const unsigned char *text
    Py_ssize_t length
    int64_t value          # word id, or running count


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


cdef inline Entry *new_entries(Py_ssize_t capacity) noexcept nogil:
    """`capacity` empty entries (a power of two), NULL when memory runs out."""
    cdef Entry *entries = <Entry *> malloc(capacity * sizeof(Entry))
    cdef Py_ssize_t i
    if entries != NULL:
        for i in range(capacity):
            entries[i].text = NULL
    return entries


cdef inline bint same_bytes(const unsigned char *a, const unsigned char *b, Py_ssize_t length) noexcept nogil:
    """memcmp(a, b, length) == 0 inline, 8 bytes at a time: a word's bytes are few, and a
    call of libc's memcmp for each took a sixth of a vocabulary's pass."""
    cdef uint64_t x, y
    while length >= 8:
        memcpy(&x, a, 8)
        memcpy(&y, b, 8)
        if x != y:
            return False
        a += 8
        b += 8
        length -= 8
    while length > 0:
        if a[0] != b[0]:
            return False
        a += 1
        b += 1
        length -= 1
    return True


cdef inline Entry *entry_slot(Entry *entries, Py_ssize_t capacity, const unsigned char *text, Py_ssize_t length,
                              uint64_t h) noexcept nogil:
    """The entry of `text` (hash h), or the empty one where it would go."""
    cdef Py_ssize_t mask = capacity - 1, i = h & mask
    while entries[i].text != NULL:
        if entries[i].hash == h and entries[i].length == length and same_bytes(entries[i].text, text, length):
            return &entries[i]
        i = (i + 1) & mask
    return &entries[i]


cdef inline Entry *entry_insert(Entry **entries, Py_ssize_t *capacity, Py_ssize_t *size, const unsigned char *text,
                                Py_ssize_t length, int64_t value) noexcept nogil:
    """The entry of `text` (kept alive by the caller), made with `value` if it is new (the
    table doubled when half full); NULL when memory runs out."""
    cdef uint64_t h = fnv1a(text, length)
    cdef Entry *e = entry_slot(entries[0], capacity[0], text, length, h)
    cdef Entry *old
    cdef Entry *grown
    cdef Py_ssize_t i
    if e.text != NULL:
        return e
    if 2 * (size[0] + 1) > capacity[0]:
        grown = new_entries(2 * capacity[0])
        if grown == NULL:
            return NULL
        old = entries[0]
        for i in range(capacity[0]):
            if old[i].text != NULL:
                entry_slot(grown, 2 * capacity[0], old[i].text, old[i].length, old[i].hash)[0] = old[i]
        free(old)
        entries[0], capacity[0] = grown, 2 * capacity[0]
        e = entry_slot(entries[0], capacity[0], text, length, h)
    e.hash, e.text, e.length, e.value = h, text, length, value
    size[0] += 1
    return e


cdef struct EncodedText:
    int *ids                # the words' ids, sentence after sentence
    int64_t *lengths        # the words of each sentence
    Py_ssize_t count, lines


cdef inline int encode_text(const unsigned char *base, Py_ssize_t n, Entry *entries, Py_ssize_t capacity,
                            int missing, int bos, int eos, EncodedText *out) noexcept nogil:
    """Each line's words as ids (`missing` for a word not in the table), a leading `<s>`
    (id bos) and a trailing `</s>` (id eos) dropped, lines left without words skipped;
    into out (malloc'ed, the caller frees them). -1 when memory runs out."""
    cdef Py_ssize_t i, pos = 0, start, line_start, count = 0, lines = 0
    cdef Py_ssize_t ids_capacity = 1 << 16, line_capacity = 1 << 12
    cdef int *ids = <int *> malloc(ids_capacity * sizeof(int))
    cdef int64_t *lengths = <int64_t *> malloc(line_capacity * sizeof(int64_t))
    cdef int *grown_ids
    cdef int64_t *grown_lengths
    cdef Entry *e
    out.ids, out.lengths, out.count, out.lines = ids, lengths, 0, 0
    if not ids or not lengths:
        return -1
    while pos < n:
        line_start = count
        while next_word(base, n, &pos, &start):
            e = entry_slot(entries, capacity, base + start, pos - start, fnv1a(base + start, pos - start))
            if count == ids_capacity:
                grown_ids = <int *> realloc(ids, 2 * ids_capacity * sizeof(int))
                if grown_ids == NULL:
                    out.ids = ids
                    return -1
                ids, ids_capacity = grown_ids, 2 * ids_capacity
            ids[count] = <int> e.value if e.text != NULL else missing
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
                grown_lengths = <int64_t *> realloc(lengths, 2 * line_capacity * sizeof(int64_t))
                if grown_lengths == NULL:
                    out.ids, out.lengths = ids, lengths
                    return -1
                lengths, line_capacity = grown_lengths, 2 * line_capacity
            lengths[lines] = count - line_start
            lines += 1
    out.ids, out.lengths, out.count, out.lines = ids, lengths, count, lines
    return 0
