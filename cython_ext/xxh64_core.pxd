# XXH64 (Yann Collet's xxHash, 64-bit, as its specification doc/xxhash_spec.md gives it),
# a piece at a time: checksum_kernels.pyx's xxh64 and Xxh64, and the one pass over a binary
# model's tables of ngram_fast_score.pyx. Inline: cimported, no module imported at run time.
from libc.stdint cimport uint32_t, uint64_t
from libc.string cimport memcpy

cdef enum:
    STRIPE = 32  # four lanes of 8 bytes

# the specification's primes (a .pxd holds no initialised globals)
cdef extern from *:
    """
    #define XXH_PRIME1 0x9E3779B185EBCA87ULL
    #define XXH_PRIME2 0xC2B2AE3D27D4EB4FULL
    #define XXH_PRIME3 0x165667B19E3779F9ULL
    #define XXH_PRIME4 0x85EBCA77C2B2AE63ULL
    #define XXH_PRIME5 0x27D4EB2F165667C5ULL
    """
    const uint64_t PRIME1 "XXH_PRIME1"
    const uint64_t PRIME2 "XXH_PRIME2"
    const uint64_t PRIME3 "XXH_PRIME3"
    const uint64_t PRIME4 "XXH_PRIME4"
    const uint64_t PRIME5 "XXH_PRIME5"


cdef inline uint64_t rotl(uint64_t x, int r) noexcept nogil:
    return (x << r) | (x >> (64 - r))


cdef inline uint64_t read64(const unsigned char *p) noexcept nogil:
    cdef uint64_t value
    memcpy(&value, p, 8)  # any alignment; little-endian machines only (as the container)
    return value


cdef inline uint64_t lane_round(uint64_t lane, uint64_t word) noexcept nogil:
    return rotl(lane + word * PRIME2, 31) * PRIME1


cdef inline uint64_t merge_lane(uint64_t h, uint64_t lane) noexcept nogil:
    return (h ^ lane_round(0, lane)) * PRIME1 + PRIME4


cdef struct State:
    uint64_t v1, v2, v3, v4, seed, total
    unsigned char held[STRIPE]  # the bytes of a stripe not yet complete
    Py_ssize_t held_bytes


cdef inline void state_init(State *s, uint64_t seed) noexcept nogil:
    s.v1, s.v2, s.v3, s.v4 = seed + PRIME1 + PRIME2, seed + PRIME2, seed, seed - PRIME1
    s.seed, s.total, s.held_bytes = seed, 0, 0


cdef inline void state_stripe(State *s, const unsigned char *p) noexcept nogil:
    s.v1 = lane_round(s.v1, read64(p))
    s.v2 = lane_round(s.v2, read64(p + 8))
    s.v3 = lane_round(s.v3, read64(p + 16))
    s.v4 = lane_round(s.v4, read64(p + 24))


cdef inline void state_update(State *s, const unsigned char *p, Py_ssize_t n) noexcept nogil:
    cdef const unsigned char *end = p + n
    cdef Py_ssize_t fill
    cdef uint64_t v1, v2, v3, v4
    s.total += <uint64_t> n
    if s.held_bytes:
        fill = STRIPE - s.held_bytes
        if n < fill:
            memcpy(s.held + s.held_bytes, p, n)
            s.held_bytes += n
            return
        memcpy(s.held + s.held_bytes, p, fill)
        state_stripe(s, s.held)
        p += fill
        s.held_bytes = 0
    # the lanes in locals: stored through `s`, which a byte pointer may alias, each stripe
    # would write them back to memory (a third of the speed)
    v1, v2, v3, v4 = s.v1, s.v2, s.v3, s.v4
    while p + STRIPE <= end:
        v1 = lane_round(v1, read64(p))
        v2 = lane_round(v2, read64(p + 8))
        v3 = lane_round(v3, read64(p + 16))
        v4 = lane_round(v4, read64(p + 24))
        p += STRIPE
    s.v1, s.v2, s.v3, s.v4 = v1, v2, v3, v4
    memcpy(s.held, p, end - p)
    s.held_bytes = end - p


cdef inline uint64_t state_digest(State *s) noexcept nogil:
    cdef const unsigned char *p = s.held
    cdef const unsigned char *end = p + s.held_bytes
    cdef uint64_t h
    cdef uint32_t word32
    if s.total >= STRIPE:
        h = rotl(s.v1, 1) + rotl(s.v2, 7) + rotl(s.v3, 12) + rotl(s.v4, 18)
        h = merge_lane(merge_lane(merge_lane(merge_lane(h, s.v1), s.v2), s.v3), s.v4)
    else:
        h = s.seed + PRIME5
    h += s.total
    while p + 8 <= end:
        h = rotl(h ^ lane_round(0, read64(p)), 27) * PRIME1 + PRIME4
        p += 8
    if p + 4 <= end:
        memcpy(&word32, p, 4)
        h = rotl(h ^ (<uint64_t> word32 * PRIME1), 23) * PRIME2 + PRIME3
        p += 4
    while p < end:
        h = rotl(h ^ (<uint64_t> p[0] * PRIME5), 11) * PRIME1
        p += 1
    h ^= h >> 33
    h *= PRIME2
    h ^= h >> 29
    h *= PRIME3
    h ^= h >> 32
    return h


