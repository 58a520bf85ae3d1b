# The C interface of nplmtk._ext.text_kernels (cython_ext/text_kernels.pyx): the hash
# table from words (UTF-8 bytes) to ids, shared with the ARPA reader (arpa_parse).
from libc.stdint cimport int64_t, uint64_t
# the hash and the entry (cython_ext/word_hash.pxd), here too for the ARPA reader
from word_hash cimport Entry, fnv1a


cdef class WordTable:
    cdef Entry *entries
    cdef Py_ssize_t capacity, size
    cdef Entry *slot(self, const unsigned char *text, Py_ssize_t length, uint64_t h) noexcept nogil
    cdef int grow(self) except -1 nogil
    cdef Entry *insert(self, const unsigned char *text, Py_ssize_t length, int64_t value) except NULL nogil
