# Growable arrays and a hash table of numbers for the lattice kernels (lattice_kernels.pyx,
# lattice_nbest.pyx), inline.
from libc.stdlib cimport free, malloc, realloc
from libc.string cimport memset


cdef struct Ints:
    int count, capacity
    int *data


cdef inline int ints_push(Ints *v, int value) noexcept nogil:
    if v.count == v.capacity:
        v.capacity = max(64, 2 * v.capacity)
        v.data = <int *> realloc(v.data, v.capacity * sizeof(int))
        if v.data == NULL:
            return -1
    v.data[v.count] = value
    v.count += 1
    return 0


cdef struct Floats:
    int count, capacity
    float *data


cdef inline int floats_push(Floats *v, float value) noexcept nogil:
    if v.count == v.capacity:
        v.capacity = max(64, 2 * v.capacity)
        v.data = <float *> realloc(v.data, v.capacity * sizeof(float))
        if v.data == NULL:
            return -1
    v.data[v.count] = value
    v.count += 1
    return 0


cdef struct Numbers:
    # numbers by an int64 key >= 0 (expandToLM's new nodes by (graph node, context);
    # the N-best's word strings by (string, word)): open addressing, -1 empty
    int size
    long long *keys
    int *values


cdef inline int numbers_init(Numbers *h) noexcept nogil:
    h.size = 256
    h.keys = <long long *> malloc(h.size * sizeof(long long))
    h.values = <int *> malloc(h.size * sizeof(int))
    if h.keys == NULL or h.values == NULL:
        return -1
    memset(h.keys, -1, h.size * sizeof(long long))
    return 0


cdef inline int numbers_grow(Numbers *h) noexcept nogil:
    cdef long long *keys = h.keys
    cdef int *values = h.values
    cdef int i, size = h.size
    cdef unsigned long long slot
    h.size *= 2
    h.keys = <long long *> malloc(h.size * sizeof(long long))
    h.values = <int *> malloc(h.size * sizeof(int))
    if h.keys == NULL or h.values == NULL:
        free(keys)
        free(values)
        return -1
    memset(h.keys, -1, h.size * sizeof(long long))
    for i in range(size):
        if keys[i] >= 0:
            slot = ((<unsigned long long> keys[i] * 0x9E3779B97F4A7C15ULL) >> 20) & (h.size - 1)
            while h.keys[slot] >= 0:
                slot = (slot + 1) & (h.size - 1)
            h.keys[slot], h.values[slot] = keys[i], values[i]
    free(keys)
    free(values)
    return 0


cdef inline int numbers_find(Numbers *h, long long key, int value_if_new) noexcept nogil:
    """The number of `key` (>= 0), else `key` entered with `value_if_new` and -2 -
    value_if_new returned (the values are 0, 1, 2, ... as entered); -1: no memory."""
    cdef unsigned long long slot = ((<unsigned long long> key * 0x9E3779B97F4A7C15ULL) >> 20) & (h.size - 1)
    while h.keys[slot] >= 0:
        if h.keys[slot] == key:
            return h.values[slot]
        slot = (slot + 1) & (h.size - 1)
    h.keys[slot], h.values[slot] = key, value_if_new
    if 2 * (value_if_new + 1) > h.size and numbers_grow(h) < 0:
        return -1
    return -2 - value_if_new
