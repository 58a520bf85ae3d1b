# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""Counting distinct int64 keys with an open-addressing hash table: one pass, no sort of
the whole array (n-gram keys of a 16M-word corpus have under a million distinct values)."""
import numpy as np
cimport numpy as cnp
from libc.stdlib cimport calloc, free, malloc, realloc
from libc.stdint cimport int64_t, uint64_t

cnp.import_array()

cdef extern from *:
    """
    #define PREFETCH(address) __builtin_prefetch(address)
    """
    void PREFETCH(const void *address) noexcept nogil

DEF AHEAD = 16  # how many keys ahead to prefetch the table slot (the loop is latency bound)


cdef inline uint64_t mix(uint64_t x) noexcept nogil:
    # splitmix64 finaliser: spreads consecutive keys over the table
    x ^= x >> 30
    x *= 0xbf58476d1ce4e5b9ULL
    x ^= x >> 27
    x *= 0x94d049bb133111ebULL
    x ^= x >> 31
    return x


def count_keys(const int64_t[::1] keys):
    """Distinct keys (>= 0) in ascending order, their counts, the position of each
    key's first occurrence, and for every input its rank among the distinct keys."""
    cdef Py_ssize_t n = keys.shape[0], i, capacity = 1 << 16, distinct = 0, limit = 1024
    cdef uint64_t mask = capacity - 1, slot
    cdef int64_t key
    cdef int64_t *table_keys = <int64_t *> malloc(capacity * sizeof(int64_t))
    cdef int *table_ids = <int *> malloc(capacity * sizeof(int))
    cdef int64_t *unique = <int64_t *> malloc(limit * sizeof(int64_t))
    cdef int64_t *counts = <int64_t *> malloc(limit * sizeof(int64_t))
    cdef int64_t *first = <int64_t *> malloc(limit * sizeof(int64_t))
    inverse_array = np.empty(n, dtype=np.int32)
    cdef int[::1] inverse = inverse_array
    cdef Py_ssize_t j, new_capacity
    cdef int64_t *new_keys
    cdef int *new_ids
    cdef int found
    if not (table_keys and table_ids and unique and counts and first):
        raise MemoryError()
    for i in range(capacity):
        table_keys[i] = -1
    with nogil:
        for i in range(n):
            if i + AHEAD < n:
                PREFETCH(&table_keys[mix(<uint64_t> keys[i + AHEAD]) & mask])
            key = keys[i]
            slot = mix(<uint64_t> key) & mask
            while table_keys[slot] != key and table_keys[slot] != -1:
                slot = (slot + 1) & mask
            if table_keys[slot] == key:
                found = table_ids[slot]
                counts[found] += 1
                inverse[i] = found
                continue
            table_keys[slot] = key
            table_ids[slot] = distinct
            if distinct == limit:
                limit *= 2
                unique = <int64_t *> realloc(unique, limit * sizeof(int64_t))
                counts = <int64_t *> realloc(counts, limit * sizeof(int64_t))
                first = <int64_t *> realloc(first, limit * sizeof(int64_t))
            unique[distinct] = key
            counts[distinct] = 1
            first[distinct] = i
            inverse[i] = distinct
            distinct += 1
            if 2 * distinct > capacity:  # keep the load under one half
                new_capacity = capacity * 2
                new_keys = <int64_t *> malloc(new_capacity * sizeof(int64_t))
                new_ids = <int *> malloc(new_capacity * sizeof(int))
                for j in range(new_capacity):
                    new_keys[j] = -1
                mask = new_capacity - 1
                for j in range(distinct):
                    slot = mix(<uint64_t> unique[j]) & mask
                    while new_keys[slot] != -1:
                        slot = (slot + 1) & mask
                    new_keys[slot] = unique[j]
                    new_ids[slot] = <int> j
                free(table_keys)
                free(table_ids)
                table_keys, table_ids, capacity = new_keys, new_ids, new_capacity
    free(table_keys)
    free(table_ids)
    unique_array = np.asarray(<int64_t[:distinct]> unique).copy() if distinct else np.empty(0, np.int64)
    counts_array = np.asarray(<int64_t[:distinct]> counts).copy() if distinct else np.empty(0, np.int64)
    first_array = np.asarray(<int64_t[:distinct]> first).copy() if distinct else np.empty(0, np.int64)
    free(unique)
    free(counts)
    free(first)
    order = np.argsort(unique_array)
    rank = np.empty(distinct, dtype=np.int32)
    rank[order] = np.arange(distinct, dtype=np.int32)
    return unique_array[order], counts_array[order], first_array[order], rank[inverse_array]
