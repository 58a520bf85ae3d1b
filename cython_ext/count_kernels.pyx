# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""Counting n-grams in one pass over the text with a hash table per order that lives
across chunks (as SRILM's and lmplz's counters do): an n-gram is the id of its prefix in
the table below and its last word, so each position of a sentence walks up the orders
with one lookup each, and no temporary array of keys is ever made. Also the lines of a
counts file (format_count_lines)."""
import numpy as np
cimport numpy as cnp
from libc.stdlib cimport free, malloc, realloc
from libc.string cimport memcpy
from cpython.bytearray cimport PyByteArray_FromStringAndSize
from libc.stdint cimport int64_t, uint64_t

from word_slots cimport WORD_SLOT_BYTES, SlotTable, put_word, slot_table, word_length

cnp.import_array()

DEF MAX_ORDER = 10  # nplmtk.ngram.counts.MAX_ORDER
DEF FIRST_CAPACITY = 1 << 12
DEF AHEAD = 16  # positions ahead whose table slot is fetched early

cdef extern from *:
    """
    #define PREFETCH(address) __builtin_prefetch(address)
    """
    void PREFETCH(const void *address) noexcept nogil


cdef inline uint64_t mix(uint64_t x) noexcept nogil:
    # splitmix64 finaliser: spreads consecutive keys over the table
    x ^= x >> 30
    x *= 0xbf58476d1ce4e5b9ULL
    x ^= x >> 27
    x *= 0x94d049bb133111ebULL
    x ^= x >> 31
    return x


cdef struct Table:
    int64_t *slot_keys  # -1: empty
    int *slot_ids
    Py_ssize_t capacity  # a power of two, at least twice the entries
    int64_t *keys  # per entry, in order of first occurrence: prefix id * V + word
    int64_t *counts
    int *suffixes  # per entry: the id of its last k-1 words among the order below's entries
    Py_ssize_t size, room


cdef int table_init(Table *t, Py_ssize_t capacity) noexcept nogil:
    """An empty table of `capacity` slots (a power of two, at least FIRST_CAPACITY)."""
    cdef Py_ssize_t i
    t.capacity, t.size, t.room = capacity, 0, capacity // 2
    t.slot_keys = <int64_t *> malloc(t.capacity * sizeof(int64_t))
    t.slot_ids = <int *> malloc(t.capacity * sizeof(int))
    t.keys = <int64_t *> malloc(t.room * sizeof(int64_t))
    t.counts = <int64_t *> malloc(t.room * sizeof(int64_t))
    t.suffixes = <int *> malloc(t.room * sizeof(int))
    if not (t.slot_keys and t.slot_ids and t.keys and t.counts and t.suffixes):
        return -1
    for i in range(t.capacity):
        t.slot_keys[i] = -1
    return 0


cdef void table_free(Table *t) noexcept nogil:
    free(t.slot_keys)
    free(t.slot_ids)
    free(t.keys)
    free(t.counts)
    free(t.suffixes)
    t.slot_keys, t.slot_ids, t.keys, t.counts, t.suffixes = NULL, NULL, NULL, NULL, NULL
    t.size, t.capacity, t.room = 0, 0, 0


cdef int table_grow(Table *t) noexcept nogil:
    """Twice the slots (and entries' room), every entry placed again."""
    cdef Py_ssize_t i, capacity = t.capacity * 2
    cdef uint64_t slot, mask = capacity - 1
    cdef int64_t *slot_keys = <int64_t *> malloc(capacity * sizeof(int64_t))
    cdef int *slot_ids = <int *> malloc(capacity * sizeof(int))
    cdef int64_t *keys = <int64_t *> realloc(t.keys, capacity // 2 * sizeof(int64_t))
    if keys:
        t.keys = keys
    cdef int64_t *counts = <int64_t *> realloc(t.counts, capacity // 2 * sizeof(int64_t))
    if counts:
        t.counts = counts
    cdef int *suffixes = <int *> realloc(t.suffixes, capacity // 2 * sizeof(int))
    if suffixes:
        t.suffixes = suffixes
    if not (slot_keys and slot_ids and keys and counts and suffixes):
        free(slot_keys)
        free(slot_ids)
        return -1
    for i in range(capacity):
        slot_keys[i] = -1
    for i in range(t.size):
        slot = mix(<uint64_t> t.keys[i]) & mask
        while slot_keys[slot] != -1:
            slot = (slot + 1) & mask
        slot_keys[slot] = t.keys[i]
        slot_ids[slot] = <int> i
    free(t.slot_keys)
    free(t.slot_ids)
    t.slot_keys, t.slot_ids, t.capacity, t.room = slot_keys, slot_ids, capacity, capacity // 2
    return 0


cdef inline Py_ssize_t table_add(Table *t, int64_t key, int suffix) noexcept nogil:
    """The id of `key` (new ones numbered in order, with `suffix` kept), its count raised
    by one; -1: no memory."""
    cdef uint64_t mask = t.capacity - 1
    cdef uint64_t slot = mix(<uint64_t> key) & mask
    cdef Py_ssize_t found
    while t.slot_keys[slot] != key and t.slot_keys[slot] != -1:
        slot = (slot + 1) & mask
    if t.slot_keys[slot] == key:
        found = t.slot_ids[slot]
        t.counts[found] += 1
        return found
    if t.size == t.room:
        if table_grow(t) != 0:
            return -1
        return table_add(t, key, suffix)
    found = t.size
    t.slot_keys[slot] = key
    t.slot_ids[slot] = <int> found
    t.keys[found] = key
    t.counts[found] = 1
    t.suffixes[found] = suffix
    t.size += 1
    return found


cdef Py_ssize_t SLOT_BYTES = sizeof(int64_t) + sizeof(int)  # a slot: its key and its entry's id
cdef Py_ssize_t ENTRY_BYTES = 2 * sizeof(int64_t) + sizeof(int)  # an entry: key, count and suffix


def tables_bytes(capacities):
    """Memory that tables of these capacities hold: slots, and entries' room for half as many."""
    return sum(capacity * SLOT_BYTES + capacity // 2 * ENTRY_BYTES for capacity in capacities)


cdef class NgramHashCounter:
    """Counts of orders 1..`order` over word ids 0..vocab_size-1, added text by text;
    `tables()` gives each order's (keys, counts) in order of first occurrence, a key being
    (id of its prefix among the order below's entries) * vocab_size + last word (1-grams:
    the word)."""
    cdef Table orders[MAX_ORDER]
    cdef readonly int order
    cdef readonly int64_t vocab_size
    cdef bint spent  # an order taken (take): its table is freed

    def __cinit__(self, int order, int64_t vocab_size, capacities=None):
        """`capacities`: each order's slots to begin with (another counter's `capacities()`,
        so that a counter after a spill does not grow its tables again from the smallest)."""
        if not 1 <= order <= MAX_ORDER or vocab_size < 1:
            raise ValueError("order out of range or empty vocabulary")
        if capacities is not None and len(capacities) != order:
            raise ValueError("capacities: one for each order")
        self.order, self.vocab_size = order, vocab_size
        cdef int k
        cdef Py_ssize_t capacity
        for k in range(order):
            capacity = FIRST_CAPACITY
            while capacities is not None and capacity < capacities[k]:
                capacity *= 2
            if table_init(&self.orders[k], capacity) != 0:
                raise MemoryError()

    def __dealloc__(self):
        cdef int k
        for k in range(self.order):
            table_free(&self.orders[k])

    def add(self, const int[::1] ids, const int64_t[::1] offsets, int bos, int eos, int unk):
        """Every n-gram of each sentence ids[offsets[s]:offsets[s+1]] with one <s> before
        and one </s> after it; ids below 0 count as `unk`. The caller checks that ids lie
        below vocab_size. Order by order over the padded text, each position's id of the
        order below turned into its id of this order in place, so the key AHEAD positions
        on is known and its slot fetched early (the loop waits on memory, not arithmetic)."""
        if self.spent:
            raise ValueError("the counter's tables were taken")
        cdef Py_ssize_t sentences = offsets.shape[0] - 1, n = ids.shape[0] + 2 * sentences
        cdef Py_ssize_t s, i, j, k, position, length
        cdef int *seq = <int *> malloc(max(n, 1) * sizeof(int))
        cdef int *left = <int *> malloc(max(n, 1) * sizeof(int))  # tokens from here to the sentence's end
        cdef int64_t *found = <int64_t *> malloc(max(n, 1) * sizeof(int64_t))  # id at each position, or -1
        cdef int64_t key
        cdef uint64_t slot
        cdef int word, failed = 0
        cdef Table *t
        if not (seq and left and found):
            free(seq)
            free(left)
            free(found)
            raise MemoryError()
        with nogil:
            position = 0
            for s in range(sentences):
                length = offsets[s + 1] - offsets[s] + 2
                for i in range(length):
                    if i == 0:
                        word = bos
                    elif i == length - 1:
                        word = eos
                    else:
                        word = ids[offsets[s] + i - 1]
                        if word < 0:
                            word = unk
                    seq[position] = word
                    left[position] = <int> (length - i)
                    position += 1
            for k in range(1, self.order + 1):
                t = &self.orders[k - 1]
                for i in range(n):
                    j = i + AHEAD
                    if j < n and left[j] >= k and (k == 1 or found[j] >= 0):
                        key = seq[j] if k == 1 else found[j] * self.vocab_size + seq[j + k - 1]
                        slot = mix(<uint64_t> key) & (t.capacity - 1)
                        PREFETCH(&t.slot_keys[slot])
                        PREFETCH(&t.slot_ids[slot])  # a hit reads the id next
                    if left[i] < k or (k > 1 and found[i] < 0):
                        found[i] = -1
                        continue
                    key = seq[i] if k == 1 else found[i] * self.vocab_size + seq[i + k - 1]
                    # found[i + 1] is still the order below's id there: this n-gram's suffix
                    found[i] = table_add(t, key, -1 if k == 1 else <int> found[i + 1])
                    if found[i] < 0:
                        failed = 1
                        break
                if failed:
                    break
        free(seq)
        free(left)
        free(found)
        if failed:
            raise MemoryError()

    def entries(self):
        """How many distinct n-grams are held, all orders together."""
        return sum(self.orders[k].size for k in range(self.order))

    def bytes(self):
        """Memory held by the tables."""
        return tables_bytes(self.capacities())

    def capacities(self):
        """Each order's slots."""
        return [self.orders[k].capacity for k in range(self.order)]

    def bytes_after(self, Py_ssize_t new_entries):
        """The most memory the tables hold while each order takes up to `new_entries` more
        entries: their slots and entries grown as table_grow grows them, and the old slots
        of the largest growth beside its new ones (before they are freed)."""
        cdef Py_ssize_t k, capacity, old_slots = 0
        grown = []
        for k in range(self.order):
            capacity = self.orders[k].capacity
            while capacity // 2 < self.orders[k].size + new_entries:
                capacity *= 2
            grown.append(capacity)
            if capacity > self.orders[k].capacity:
                old_slots = max(old_slots, capacity // 2 * SLOT_BYTES)
        return tables_bytes(grown) + old_slots

    def take(self, int k):
        """Order k's (keys, counts) as tables() gives them, its table then freed: the
        spill of a full counter holds one order's copy at a time. The counter is spent."""
        if not 1 <= k <= self.order:
            raise ValueError("order out of range")
        cdef Table *t = &self.orders[k - 1]
        cdef Py_ssize_t size = t.size
        self.spent = True
        keys, counts = np.empty(size, np.int64), np.empty(size, np.int64)
        if size:
            keys[:] = np.asarray(<int64_t[:size]> t.keys)
            counts[:] = np.asarray(<int64_t[:size]> t.counts)
        table_free(t)
        return keys, counts

    def tables(self):
        """[(keys, counts, suffixes)] per order, copies (int64, int64, int32), entries in
        order of first occurrence; an entry's suffix is the id of its last k-1 words among
        the order below's entries (1-grams: -1)."""
        out = []
        cdef Py_ssize_t k
        for k in range(self.order):
            size = self.orders[k].size
            if size == 0:
                out.append((np.empty(0, np.int64), np.empty(0, np.int64), np.empty(0, np.int32)))
            else:
                out.append((np.asarray(<int64_t[:size]> self.orders[k].keys).copy(),
                            np.asarray(<int64_t[:size]> self.orders[k].counts).copy(),
                            np.asarray(<int[:size]> self.orders[k].suffixes).copy()))
        return out


def format_count_lines(const int[:, ::1] grams, const int64_t[::1] counts, words):
    """Counts lines `w1 ... wk<TAB>count\\n` as UTF-8 bytes: row i's words are grams[i]
    up to its first -1 (`words` a WordSlots)."""
    cdef Py_ssize_t rows = grams.shape[0], width = grams.shape[1]
    cdef Py_ssize_t i, j, w, digits, pos = 0, size = WORD_SLOT_BYTES  # a short word's 16-byte store past the end
    cdef int64_t value
    cdef char number[24]
    cdef SlotTable table = slot_table(words)
    for i in range(rows):
        size += width + 21
        for j in range(width):
            w = grams[i, j]
            if w < 0:
                break
            size += word_length(&table, w)
    out = PyByteArray_FromStringAndSize(NULL, size)
    cdef unsigned char[::1] view = out
    cdef char *base = <char *> &view[0]
    with nogil:
        for i in range(rows):
            for j in range(width):
                w = grams[i, j]
                if w < 0:
                    break
                if j:
                    base[pos] = b' '
                    pos += 1
                pos += put_word(base + pos, &table, w)
            base[pos] = b'\t'
            pos += 1
            value, digits = counts[i], 0
            if value < 0:
                base[pos] = b'-'
                pos += 1
                value = -value
            while True:
                number[digits] = <char> (48 + value % 10)
                digits += 1
                value //= 10
                if value == 0:
                    break
            while digits:
                digits -= 1
                base[pos] = number[digits]
                pos += 1
            base[pos] = b'\n'
            pos += 1
    return memoryview(out)[:pos]
