# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""Ordering the n-grams of one order: counted entries into lexicographic order, and a
table into the order SRILM writes an ARPA section in. Each n-gram's sort key is packed in
one int64 by a loop here (the place of its prefix or context among the order below's
n-grams, then its last word), numpy's argsort sorts the keys (SIMD: faster than counting
sorts here), and one more loop gathers the sorted tables."""
import numpy as np
from libc.stdint cimport int64_t


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
    cdef bint with_suffix = not unigrams and entry_suffixes is not None
    cdef int64_t prefix, word
    sort_keys_array = np.empty(n, np.int64)
    cdef int64_t[::1] sort_keys = sort_keys_array
    with nogil:
        for e in range(n):
            word = entry_keys[e] % vocab_size
            prefix = 0 if unigrams else lower_rank[entry_keys[e] // vocab_size]
            sort_keys[e] = prefix * vocab_size + word
    order_array = np.argsort(sort_keys_array)
    rank_array, keys_array = np.empty(n, np.int64), np.empty(n, np.int64)
    rows_array, counts_array = np.empty((n, width), np.int32), np.empty(n, np.int64)
    suffix_array = np.empty(n if with_suffix else 0, np.int64)
    cdef const int64_t[::1] order = order_array
    cdef int64_t[::1] rank = rank_array, keys = keys_array, counts = counts_array, suffix = suffix_array
    cdef int[:, ::1] rows = rows_array
    with nogil:
        for i in range(n):
            e = order[i]
            rank[e] = i
            keys[i] = sort_keys[e]
            counts[i] = entry_counts[e]
            prefix = sort_keys[e] // vocab_size
            for j in range(width - 1):
                rows[i, j] = lower_rows[prefix, j]
            rows[i, width - 1] = <int> (sort_keys[e] % vocab_size)
            if with_suffix:
                suffix[i] = lower_rank[entry_suffixes[e]]
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
    cdef int64_t words = word_rank.shape[0], contexts = 1 if unigrams else lower_reversed.shape[0]
    cdef int64_t context, word
    forward_array, backward_array = np.empty(n, np.int64), np.empty(n if want_reversed else 0, np.int64)
    cdef int64_t[::1] forward = forward_array, backward = backward_array
    with nogil:
        for i in range(n):
            word = word_rank[keys[i] % vocab_size]
            context = 0 if unigrams else lower_reversed[keys[i] // vocab_size]
            forward[i] = context * words + word
            if want_reversed:
                # read backwards, the row is its last word, then its prefix read backwards
                backward[i] = word * contexts + context
    order = np.argsort(forward_array)
    if not want_reversed:
        return order, None
    cdef const int64_t[::1] backward_order = np.argsort(backward_array)
    with nogil:
        for i in range(n):
            backward[backward_order[i]] = i
    return order, backward_array
