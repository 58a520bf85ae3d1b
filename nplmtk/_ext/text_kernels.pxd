# The C interface of nplmtk._ext.text_kernels (cython_ext/text_kernels.pyx): the hash
# table from words (UTF-8 bytes) to ids, shared with the ARPA reader (arpa_parse).
from libc.stdint cimport int64_t, uint64_t


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


cdef class WordTable:
    cdef Entry *entries
    cdef Py_ssize_t capacity, size
    cdef Entry *slot(self, const unsigned char *text, Py_ssize_t length, uint64_t h) noexcept nogil
    cdef int grow(self) except -1 nogil
    cdef Entry *insert(self, const unsigned char *text, Py_ssize_t length, int64_t value) except NULL nogil
