# The vocabulary's UTF-8 bytes as the text writers read them (cimported; inline, so no
# module is imported at run time): a 16-byte slot a word, its bytes then its length in the
# last byte, so that a word costs one cache line's read and one 16-byte copy; words of 16
# bytes or more are read from `data` at `start` (their slot's last byte is LONG_WORD).
# The arrays come from nplmtk.ngram.word_slots.WordSlots.
from libc.string cimport memcpy

cdef enum:
    WORD_SLOT_BYTES = 16
    LONG_WORD = 255


cdef struct SlotTable:
    const unsigned char *slots
    const unsigned char *data
    const long long *start


cdef inline Py_ssize_t word_length(const SlotTable *table, Py_ssize_t w) noexcept nogil:
    cdef Py_ssize_t length = table.slots[w * WORD_SLOT_BYTES + WORD_SLOT_BYTES - 1]
    if length == LONG_WORD:
        return table.start[w + 1] - table.start[w]
    return length


cdef extern from *:
    void __builtin_prefetch(const void *address) noexcept nogil


cdef inline void prefetch_word(const SlotTable *table, Py_ssize_t w) noexcept nogil:
    __builtin_prefetch(table.slots + w * WORD_SLOT_BYTES)


cdef inline Py_ssize_t put_word(char *out, const SlotTable *table, Py_ssize_t w) noexcept nogil:
    """Word w's bytes at `out` (a short word writes all 16 bytes of its slot: room for
    them must follow); returns its length."""
    cdef const unsigned char *slot = table.slots + w * WORD_SLOT_BYTES
    cdef Py_ssize_t length = slot[WORD_SLOT_BYTES - 1]
    if length != LONG_WORD:
        memcpy(out, slot, WORD_SLOT_BYTES)
        return length
    length = table.start[w + 1] - table.start[w]
    memcpy(out, table.data + table.start[w], length)
    return length


cdef inline SlotTable slot_table(table):
    """The pointers of a WordSlots's arrays (which the caller keeps alive)."""
    cdef const unsigned char[:, ::1] slots = table.slots
    cdef const unsigned char[::1] data = table.data
    cdef const long long[::1] start = table.start
    if slots.shape[1] != WORD_SLOT_BYTES or start.shape[0] != slots.shape[0] + 1 \
            or data.shape[0] <= start[start.shape[0] - 1]:
        raise ValueError("a word table's slots, data and start do not agree")
    cdef SlotTable out
    out.slots = &slots[0, 0] if slots.shape[0] else NULL
    out.data = &data[0]
    out.start = &start[0]
    return out
