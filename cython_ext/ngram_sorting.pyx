# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""Ordering the n-grams of one order by two stable counting sorts (least significant key
first) instead of a comparison sort: both keys of an n-gram are small integers, the place
of its prefix (or context) among the order below's n-grams and its last word, so each
pass is linear in the n-grams plus the keys' range. Used to sort counted entries
lexicographically and to find the order SRILM writes an ARPA section in."""
import numpy as np
from libc.stdint cimport int64_t
from libc.stdlib cimport free, malloc
from libc.string cimport memset


cdef int counting_sort(const int64_t *bucket_of, Py_ssize_t n, Py_ssize_t buckets, const int64_t *order_in,
                       int64_t *order_out) noexcept nogil:
    """order_out: the items 0..n-1 listed by bucket_of[item], in order_in's order within a
    bucket (order_in NULL: 0..n-1). -1: no memory."""
    cdef int64_t *starts = <int64_t *> malloc((buckets + 1) * sizeof(int64_t))
    cdef Py_ssize_t i, b
    cdef int64_t item
    if starts == NULL:
        return -1
    memset(starts, 0, (buckets + 1) * sizeof(int64_t))
    for i in range(n):
        starts[bucket_of[i] + 1] += 1
    for b in range(buckets):
        starts[b + 1] += starts[b]
    for i in range(n):
        item = i if order_in == NULL else order_in[i]
        order_out[starts[bucket_of[item]]] = item
        starts[bucket_of[item]] += 1
    free(starts)
    return 0


cdef int sort_by_pair(const int64_t *major, Py_ssize_t major_range, const int64_t *minor, Py_ssize_t minor_range,
                      Py_ssize_t n, int64_t *order) noexcept nogil:
    """order: the items 0..n-1 sorted by (major[item], minor[item]). -1: no memory."""
    cdef int64_t *by_minor = <int64_t *> malloc(max(n, 1) * sizeof(int64_t))
    cdef int failed
    if by_minor == NULL:
        return -1
    failed = counting_sort(minor, n, minor_range, NULL, by_minor)
    if not failed:
        failed = counting_sort(major, n, major_range, by_minor, order)
    free(by_minor)
    return failed


def sort_counted(const int64_t[::1] entry_keys, const int64_t[::1] entry_counts, const int[::1] entry_suffixes,
                 const int64_t[::1] lower_rank, const int[:, ::1] lower_rows, int64_t vocab_size):
    """One order of a hash counter's entries (key: prefix entry * vocab_size + word, in
    order of first occurrence) sorted by their words. `lower_rank[e]` is the sorted place
    of the order below's entry e, `lower_rows` its sorted rows (both None for 1-grams).
    Returns the sorted rows (n, k) int32, keys (sorted place of the prefix * vocab_size +
    word), counts, each entry's sorted place, and the sorted place of each row's suffix
    among the order below's rows (None for 1-grams, or without `entry_suffixes`)."""
    cdef Py_ssize_t n = entry_keys.shape[0], i, j, e
    cdef bint unigrams = lower_rank is None
    cdef Py_ssize_t width = 1 if unigrams else lower_rows.shape[1] + 1
    cdef Py_ssize_t lower_size = 1 if unigrams else lower_rank.shape[0]
    cdef bint with_suffix = not unigrams and entry_suffixes is not None
    prefix_array, word_array = np.zeros(n, np.int64), np.empty(n, np.int64)
    order_array, rank_array = np.empty(n, np.int64), np.empty(n, np.int64)
    rows_array, keys_array = np.empty((n, width), np.int32), np.empty(n, np.int64)
    counts_array = np.empty(n, np.int64)
    suffix_array = np.empty(n if with_suffix else 0, np.int64)
    cdef int64_t[::1] prefix = prefix_array, word = word_array, order = order_array, rank = rank_array
    cdef int64_t[::1] keys = keys_array, counts = counts_array, suffix = suffix_array
    cdef int[:, ::1] rows = rows_array
    cdef int failed = 0
    with nogil:
        for e in range(n):
            word[e] = entry_keys[e] % vocab_size
            if not unigrams:
                prefix[e] = lower_rank[entry_keys[e] // vocab_size]
        if n:
            failed = sort_by_pair(&prefix[0], lower_size, &word[0], vocab_size, n, &order[0])
        if not failed:
            for i in range(n):
                e = order[i]
                rank[e] = i
                keys[i] = prefix[e] * vocab_size + word[e]
                counts[i] = entry_counts[e]
                for j in range(width - 1):
                    rows[i, j] = lower_rows[prefix[e], j]
                rows[i, width - 1] = <int> word[e]
                if with_suffix:
                    suffix[i] = lower_rank[entry_suffixes[e]]
    if failed:
        raise MemoryError()
    return rows_array, keys_array, counts_array, rank_array, suffix_array if with_suffix else None


def srilm_order(const int64_t[::1] keys, int64_t vocab_size, const int[::1] word_rank,
                const int64_t[::1] lower_reversed, bint want_reversed):
    """The order SRILM writes one order's n-grams in: by the context read from its most
    recent word back, then by the word, words compared by `word_rank` (their byte order).
    `keys` are an NgramIndex's (prefix row * vocab_size + word, 1-grams: the word),
    `lower_reversed[r]` the place of the order below's row r among those rows read
    backwards (None for 1-grams). Returns the order, and with `want_reversed` the same
    places for this order's rows (for the order above)."""
    cdef Py_ssize_t n = keys.shape[0], i
    cdef bint unigrams = lower_reversed is None
    cdef Py_ssize_t context_range = 1 if unigrams else lower_reversed.shape[0]
    context_array, word_array = np.zeros(n, np.int64), np.empty(n, np.int64)
    order_array = np.empty(n, np.int64)
    reversed_array = np.empty(n if want_reversed else 0, np.int64)
    cdef int64_t[::1] context = context_array, word = word_array, order = order_array, backwards = reversed_array
    cdef int failed = 0
    with nogil:
        for i in range(n):
            word[i] = word_rank[keys[i] % vocab_size]
            if not unigrams:
                context[i] = lower_reversed[keys[i] // vocab_size]
        if n:
            failed = sort_by_pair(&context[0], context_range, &word[0], word_rank.shape[0], n, &order[0])
        if n and want_reversed and not failed:
            # read backwards, the row is its last word, then its prefix read backwards
            failed = sort_by_pair(&word[0], word_rank.shape[0], &context[0], context_range, n, &backwards[0])
            if not failed:
                # backwards holds the rows in that order: turn it into each row's place
                for i in range(n):
                    word[backwards[i]] = i
                for i in range(n):
                    backwards[i] = word[i]
    if failed:
        raise MemoryError()
    return order_array, reversed_array if want_reversed else None
