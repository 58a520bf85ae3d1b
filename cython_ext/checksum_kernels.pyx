# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""XXH64 (Yann Collet's xxHash, 64-bit, as its specification doc/xxhash_spec.md gives
it): the checksum of a container's arrays, about three times as fast as zlib's CRC32,
so that checking every byte of a large memory-mapped model stays a small part of
opening it."""
from libc.stdint cimport uint64_t
from xxh64_core cimport State, state_digest, state_init, state_update


def xxh64(const unsigned char[::1] data, uint64_t seed=0):
    """The XXH64 of the bytes `data` (bytes, a memoryview of a memory map, ...)."""
    cdef Py_ssize_t n = data.shape[0]
    cdef State state
    cdef unsigned char nothing = 0
    cdef uint64_t h
    with nogil:
        state_init(&state, seed)
        state_update(&state, &data[0] if n else &nothing, n)
        h = state_digest(&state)
    return h


cdef class Xxh64:
    """XXH64 of bytes given piece by piece (`update`), the same as `xxh64` of them whole."""
    cdef State state

    def __cinit__(self, uint64_t seed=0):
        state_init(&self.state, seed)

    def update(self, const unsigned char[::1] data):
        cdef unsigned char nothing = 0
        with nogil:
            state_update(&self.state, &data[0] if data.shape[0] else &nothing, data.shape[0])

    def digest(self):
        return state_digest(&self.state)
