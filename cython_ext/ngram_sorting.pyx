# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""Ordering the n-grams of one order: counted entries into lexicographic order, and a
table into the order SRILM writes an ARPA section in. Each n-gram's sort key is packed in
one int64 by a loop here (the place of its prefix or context among the order below's
n-grams, then its last word), numpy's SIMD sort orders the keys (key_order; a radix sort
of ours on CPUs where numpy's is slow), and one more loop gathers the sorted tables.
Sorted runs of one order (counted in pieces of a text) are merged on a heap of the runs'
next rows. A table read from an ARPA file is sorted in place instead (sort_keys_carrying):
no permutation and no gathered copies where the memory is the model's."""
import numpy as np
from libc.stdint cimport INT64_MAX, INT64_MIN, int64_t
from libc.stdlib cimport free, malloc
from cython.parallel cimport prange
from libc.string cimport memcpy


def sort_counted(const int64_t[::1] entry_keys, const int64_t[::1] entry_counts, const int[::1] entry_suffixes,
                 const int64_t[::1] lower_rank, const int[:, ::1] lower_rows, int64_t vocab_size,
                 bint want_keys=True, bint want_rank=True):
    """One order of a hash counter's entries (key: prefix entry * vocab_size + word, in
    order of first occurrence) sorted by their words. `lower_rank[e]` is the sorted place
    of the order below's entry e, `lower_rows` its sorted rows (both None for 1-grams).
    Returns the sorted rows (n, k) int32, keys (sorted place of the prefix * vocab_size +
    word), counts, each entry's sorted place, and the sorted place of each row's suffix
    among the order below's rows (None for 1-grams, or without `entry_suffixes`). Without
    `want_keys` or `want_rank` those are None: arrays not written (a spill to disk writes
    only rows and counts, and needs no rank after its highest order)."""
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
    order_array = key_order(sort_keys_array)
    rank_array, keys_array = np.empty(n if want_rank else 0, np.int64), np.empty(n if want_keys else 0, np.int64)
    rows_array, counts_array = np.empty((n, width), np.int32), np.empty(n, np.int64)
    suffix_array = np.empty(n if with_suffix else 0, np.int64)
    cdef const int64_t[::1] order = order_array
    cdef int64_t[::1] rank = rank_array, keys = keys_array, counts = counts_array, suffix = suffix_array
    cdef int[:, ::1] rows = rows_array
    with nogil:
        for i in range(n):
            e = order[i]
            if want_rank:
                rank[e] = i
            if want_keys:
                keys[i] = sort_keys[e]
            counts[i] = entry_counts[e]
            prefix = sort_keys[e] // vocab_size
            for j in range(width - 1):
                rows[i, j] = lower_rows[prefix, j]
            rows[i, width - 1] = <int> (sort_keys[e] % vocab_size)
            if with_suffix:
                suffix[i] = lower_rank[entry_suffixes[e]]
    return (rows_array, keys_array if want_keys else None, counts_array, rank_array if want_rank else None,
            suffix_array if with_suffix else None)


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
    order = key_order(forward_array)
    if not want_reversed:
        return order, None
    cdef const int64_t[::1] backward_order = key_order(backward_array)
    with nogil:
        for i in range(n):
            backward[backward_order[i]] = i
    return order, backward_array


DEF MAX_DIGIT_BITS = 10  # 1024 buckets a pass: 11 bits took 1.5-1.9x the time a pass (more write streams)

cdef extern from *:
    """
    #if defined(__x86_64__) && defined(__GNUC__)
    #include <cpuid.h>
    /* AMD's family 0x19 with AVX-512 (Zen 4) executes vpcompressq to memory as microcode:
       numpy's AVX-512 sort (x86-simd-sort) stores by it and takes 4-6x its AVX2 sort's time */
    static int nplm_slow_compress_stores(void) {
        unsigned int eax, ebx, ecx, edx;
        if (!__get_cpuid(0, &eax, &ebx, &ecx, &edx) || ebx != 0x68747541 || edx != 0x69746e65
                || ecx != 0x444d4163)  /* "AuthenticAMD" */
            return 0;
        if (!__get_cpuid(1, &eax, &ebx, &ecx, &edx))
            return 0;
        return ((eax >> 8) & 0xf) + ((eax >> 20) & 0xff) == 0x19 && __builtin_cpu_supports("avx512f");
    }
    #else
    static int nplm_slow_compress_stores(void) { return 0; }
    #endif
    """
    int nplm_slow_compress_stores() nogil

SLOW_COMPRESS_STORES = bool(nplm_slow_compress_stores())


def key_order(const int64_t[::1] keys, radix=None):
    """The order that sorts `keys` (argsort's, equal keys by place). When the keys' spread
    and their places fit in 63 bits, each key less the least is packed above its place and
    the packed values sorted: by numpy's SIMD sort, or by a radix sort of the spread's bits
    where numpy's is slow (`radix` None: on AMD's Zen 4, where its AVX-512 sort took 50-60
    ns a key and the radix sort 9-14 for 0.5-4M keys of 18-42 bits; numpy's AVX2 sort
    12-14). A stable argsort otherwise."""
    cdef Py_ssize_t n = keys.shape[0], i
    cdef int64_t low = INT64_MAX, high = INT64_MIN, place_mask
    cdef int place_bits = (<object> max(n - 1, 1)).bit_length(), spread_bits
    if n < 2:
        return np.zeros(n, np.int64)
    with nogil:
        for i in range(n):
            low = keys[i] if keys[i] < low else low
            high = keys[i] if keys[i] > high else high
    spread_bits = (<object> high - <object> low).bit_length()
    if spread_bits + place_bits > 63:
        return np.argsort(keys, kind="stable")
    if spread_bits == 0:
        return np.arange(n, dtype=np.int64)
    if SLOW_COMPRESS_STORES if radix is None else radix:
        return radix_order(keys, low, place_bits, spread_bits)
    packed_array = np.empty(n, np.int64)
    cdef int64_t[::1] packed = packed_array
    place_mask = (<int64_t> 1 << place_bits) - 1
    with nogil:
        for i in range(n):
            packed[i] = ((keys[i] - low) << place_bits) | i
    packed_array.sort()
    with nogil:
        for i in range(n):
            packed[i] &= place_mask
    return packed_array


cdef radix_order(const int64_t[::1] keys, int64_t low, int place_bits, int spread_bits):
    """key_order's packed values ordered by their spread's bits alone, least significant
    digit first: each pass is stable, so the places, in order to begin with, stay in order
    among equal keys."""
    cdef Py_ssize_t n = keys.shape[0], i
    cdef int passes = (spread_bits + MAX_DIGIT_BITS - 1) // MAX_DIGIT_BITS, digit_bits, d, last = -1, shift
    digit_bits = (spread_bits + passes - 1) // passes
    cdef int64_t buckets = <int64_t> 1 << digit_bits, digit_mask = buckets - 1
    cdef int64_t place_mask = (<int64_t> 1 << place_bits) - 1, offset, value, total, count, kept
    counts_array = np.zeros((passes, buckets), np.int64)
    packed_array, scratch_array = np.empty(n, np.int64), np.empty(n, np.int64)
    cdef int64_t[:, ::1] counts = counts_array
    cdef int64_t[::1] packed = packed_array, scratch = scratch_array
    cdef int64_t *source = &packed[0]
    cdef int64_t *target = &scratch[0]
    cdef int64_t *starts
    cdef bint moves[7]  # at most 7 passes: 62 bits in digits of up to 10
    cdef bint in_scratch = False
    with nogil:
        for i in range(n):
            offset = keys[i] - low
            source[i] = (offset << place_bits) | i
            for d in range(passes):
                counts[d, (offset >> (d * digit_bits)) & digit_mask] += 1
        for d in range(passes):
            moves[d] = True
            total = 0
            for i in range(buckets):
                count = counts[d, i]
                moves[d] = moves[d] and count != n  # a digit all keys share moves nothing
                counts[d, i] = total
                total += count
            if moves[d]:
                last = d
        for d in range(last + 1):
            if not moves[d]:
                continue
            starts, shift = &counts[d, 0], place_bits + d * digit_bits
            kept = place_mask if d == last else -1  # the last pass keeps the places alone
            for i in range(n):
                value = source[i]
                offset = (value >> shift) & digit_mask
                target[starts[offset]] = value & kept
                starts[offset] += 1
            source, target = target, source
            in_scratch = not in_scratch
    return scratch_array if in_scratch else packed_array


def bucket_order(const int64_t[::1] keys, const int64_t[::1] bounds, int64_t[::1] counts):
    """The order that groups `keys` by bucket, keeping their order within each (a stable
    counting sort), bucket b holding the keys from bounds[b-1] (inclusive) up to bounds[b]
    (`bounds` sorted); `counts` (len(bounds) + 1, zeroed) gets each bucket's keys."""
    cdef Py_ssize_t n = keys.shape[0], buckets = bounds.shape[0] + 1, i, low, half, left
    cdef int64_t total = 0, key
    if counts.shape[0] != buckets:
        raise ValueError("counts must have one more entry than bounds")
    bucket_array, order_array = np.empty(n, np.int32), np.empty(n, np.int64)
    cdef int[::1] bucket = bucket_array
    cdef int64_t[::1] order = order_array
    cdef int64_t *starts = <int64_t *> malloc(buckets * sizeof(int64_t))
    if not starts:
        raise MemoryError()
    with nogil:
        for i in range(n):
            # the bounds at or below the key (searchsorted, side="right"), by halves whose sizes
            # are the same for every key and a select, not a branch, on each comparison: the
            # keys' buckets are unpredictable, and a mispredicted branch a level cost 3x the time
            key, low, left = keys[i], 0, buckets - 1
            while left > 1:
                half = left // 2
                low = low + half if bounds[low + half] <= key else low
                left -= half
            if left == 1 and bounds[low] <= key:
                low += 1
            bucket[i] = <int> low
            counts[low] += 1
        for i in range(buckets):
            starts[i], total = total, total + counts[i]
        for i in range(n):
            order[starts[bucket[i]]] = i
            starts[bucket[i]] += 1
    free(starts)
    return order_array


cdef inline int compare_rows(const int *a, const int *b, Py_ssize_t width) noexcept nogil:
    cdef Py_ssize_t j
    for j in range(width):
        if a[j] != b[j]:
            return -1 if a[j] < b[j] else 1
    return 0


cdef struct RunHead:
    const int *row  # the run's next row: compared without looking up the run's block and place
    int run


cdef void sift_down(RunHead *heap, Py_ssize_t size, Py_ssize_t i, Py_ssize_t width) noexcept nogil:
    cdef Py_ssize_t child
    cdef RunHead item = heap[i]
    while 2 * i + 1 < size:
        child = 2 * i + 1
        if child + 1 < size and compare_rows(heap[child + 1].row, heap[child].row, width) < 0:
            child += 1
        if compare_rows(heap[child].row, item.row, width) >= 0:
            break
        heap[i] = heap[child]
        i = child
    heap[i] = item


def merge_sorted_rows(list run_rows, list run_counts, Py_ssize_t[::1] positions, const unsigned char[::1] more,
                      int[:, ::1] out_rows, int64_t[::1] out_counts):
    """One step of a k-way merge of sorted runs of n-gram rows of one order (each run's
    rows distinct): the rows of run_rows[r][positions[r]:] (counts run_counts[r]) merged
    into out_rows / out_counts, equal rows' counts summed, `positions` moved past what was
    taken. Every run with `more` rows to come (on disk) must have rows here; the merge stops
    when the output is full or when such a run's rows here are all taken (its next rows
    may come first). Returns how many rows were written, or -1 when a sum passes 2^63 - 1."""
    cdef Py_ssize_t runs = len(run_rows), width = out_rows.shape[1], capacity = out_rows.shape[0]
    cdef Py_ssize_t r, size = 0, written = 0, j
    cdef const int[:, ::1] rows_view
    cdef const int64_t[::1] counts_view
    cdef const int **rows = <const int **> malloc(max(runs, 1) * sizeof(int *))
    cdef const int64_t **counts = <const int64_t **> malloc(max(runs, 1) * sizeof(int64_t *))
    cdef Py_ssize_t *lengths = <Py_ssize_t *> malloc(max(runs, 1) * sizeof(Py_ssize_t))
    cdef RunHead *heap = <RunHead *> malloc(max(runs, 1) * sizeof(RunHead))
    cdef Py_ssize_t *at = &positions[0]
    cdef int run, overflow = 0, refill = 0
    cdef int64_t total
    cdef const int *row
    if not (rows and counts and lengths and heap):
        free(rows)
        free(counts)
        free(lengths)
        free(heap)
        raise MemoryError()
    for r in range(runs):
        rows_view, counts_view = run_rows[r], run_counts[r]
        lengths[r] = counts_view.shape[0]
        rows[r] = &rows_view[0, 0] if lengths[r] else NULL
        counts[r] = &counts_view[0] if lengths[r] else NULL
        if at[r] < lengths[r]:
            heap[size].row, heap[size].run = rows[r] + at[r] * width, <int> r
            size += 1
    with nogil:
        for j in range(size // 2 - 1, -1, -1):
            sift_down(heap, size, j, width)
        while size and written < capacity and not refill:
            row = heap[0].row
            for j in range(width):
                out_rows[written, j] = row[j]
            total = 0
            # every run whose head is this row: its count added, the run moved on
            while size and compare_rows(heap[0].row, &out_rows[written, 0], width) == 0:
                run = heap[0].run
                if counts[run][at[run]] > INT64_MAX - total:
                    overflow = 1
                    break
                total += counts[run][at[run]]
                at[run] += 1
                heap[0].row += width
                if at[run] == lengths[run]:
                    refill = refill or more[run]
                    size -= 1
                    heap[0] = heap[size]
                if size:
                    sift_down(heap, size, 0, width)
            if overflow:
                break
            out_counts[written] = total
            written += 1
    free(rows)
    free(counts)
    free(lengths)
    free(heap)
    return -1 if overflow else written


def find_sorted_rows(const int[:, ::1] queries, const int[:, ::1] table, int64_t[::1] out):
    """Where each of the sorted `queries` rows is among the sorted `table` rows (compared
    on the queries' width, the table's first columns), found by one merge of the two;
    -1 where absent. Returns how many queries lie at or before the table's last row (the
    rest need the table's next rows)."""
    cdef Py_ssize_t n = queries.shape[0], m = table.shape[0], width = queries.shape[1], i, j = 0, done = n
    cdef int order = 1
    with nogil:
        for i in range(n):
            while j < m:
                order = compare_rows(&table[j, 0], &queries[i, 0], width)
                if order >= 0:
                    break
                j += 1
            if j == m:
                done = i
                break
            out[i] = j if order == 0 else -1
    return done


cdef inline int64_t record_key(const unsigned char *record) noexcept nogil:
    cdef int64_t key
    memcpy(&key, record, sizeof(int64_t))  # records of any size: keys may be unaligned
    return key


cdef void sift_keys(int64_t *keys, int *runs, Py_ssize_t size, Py_ssize_t i) noexcept nogil:
    """The heap of (keys[i], runs[i]) pairs restored below i (ties: the earlier run first)."""
    cdef Py_ssize_t child
    cdef int64_t key = keys[i]
    cdef int run = runs[i]
    while 2 * i + 1 < size:
        child = 2 * i + 1
        if child + 1 < size and (keys[child + 1] < keys[child]
                                 or keys[child + 1] == keys[child] and runs[child + 1] < runs[child]):
            child += 1
        if keys[child] > key or keys[child] == key and runs[child] > run:
            break
        keys[i], runs[i] = keys[child], runs[child]
        i = child
    keys[i], runs[i] = key, run


def merge_records(list pieces, unsigned char[::1] out, Py_ssize_t itemsize):
    """Pieces of records (`itemsize` bytes each, an int64 key in the first 8 bytes), each
    piece sorted by key, merged into `out` in the order of their keys (equal keys in the
    order of the pieces): sorted runs merged without sorting them again."""
    cdef Py_ssize_t count = len(pieces), r, size = 0, written = 0
    cdef const unsigned char **bases = <const unsigned char **> malloc(max(count, 1) * sizeof(char *))
    cdef Py_ssize_t *at = <Py_ssize_t *> malloc(max(count, 1) * sizeof(Py_ssize_t))
    cdef Py_ssize_t *ends = <Py_ssize_t *> malloc(max(count, 1) * sizeof(Py_ssize_t))
    cdef int64_t *keys = <int64_t *> malloc(max(count, 1) * sizeof(int64_t))
    cdef int *runs = <int *> malloc(max(count, 1) * sizeof(int))
    cdef const unsigned char[::1] view
    cdef int run
    if not (bases and at and ends and keys and runs):
        free(bases); free(at); free(ends); free(keys); free(runs)
        raise MemoryError()
    try:
        for r in range(count):
            view = pieces[r]
            ends[r] = view.shape[0] // itemsize
            written += ends[r]
            bases[r] = &view[0] if ends[r] else NULL
            at[r] = 0
            if ends[r]:
                keys[size], runs[size] = record_key(bases[r]), <int> r
                size += 1
        if written * itemsize != out.shape[0]:
            raise ValueError("out holds another number of records")
        written = 0
        with nogil:
            for r in range(size // 2 - 1, -1, -1):
                sift_keys(keys, runs, size, r)
            while size:
                run = runs[0]
                memcpy(&out[written * itemsize], bases[run] + at[run] * itemsize, itemsize)
                written += 1
                at[run] += 1
                if at[run] == ends[run]:
                    size -= 1
                    keys[0], runs[0] = keys[size], runs[size]
                else:
                    keys[0] = record_key(bases[run] + at[run] * itemsize)
                if size:
                    sift_keys(keys, runs, size, 0)
    finally:
        free(bases); free(at); free(ends); free(keys); free(runs)


def search_sorted_forward(const int64_t[::1] keys, const int64_t[::1] queries, int64_t[::1] out):
    """np.searchsorted(keys, queries) (side 'left') for sorted `queries`, into `out`: each
    search gallops forward from the previous one's place, so that a chunk of queries spread
    over many keys reads them mostly in order (a binary search from scratch each time
    waits on memory at every step)."""
    cdef Py_ssize_t n = keys.shape[0], i, lo = 0, hi, mid, step
    cdef int64_t query
    if out.shape[0] != queries.shape[0]:
        raise ValueError("out and queries differ in length")
    with nogil:
        for i in range(queries.shape[0]):
            query = queries[i]
            if i and query < queries[i - 1]:
                lo = 0  # not sorted here: from the start (still correct)
            if lo < n and keys[lo] < query:  # every key before lo is below the query
                step = 1
                while lo + step < n and keys[lo + step] < query:
                    lo += step
                    step *= 2
                hi = min(lo + step, n)
                lo += 1
                while lo < hi:
                    mid = (lo + hi) // 2
                    if keys[mid] < query:
                        lo = mid + 1
                    else:
                        hi = mid
            out[i] = lo


cdef struct Carried:
    int64_t *keys
    float *first     # always carried
    float *second    # NULL: not carried
    unsigned char *flags  # NULL: not carried

cdef enum:
    INSERTION_SORT_BELOW = 24


cdef inline void swap_rows(Carried *c, Py_ssize_t i, Py_ssize_t j) noexcept nogil:
    c.keys[i], c.keys[j] = c.keys[j], c.keys[i]
    c.first[i], c.first[j] = c.first[j], c.first[i]
    if c.second != NULL:
        c.second[i], c.second[j] = c.second[j], c.second[i]
    if c.flags != NULL:
        c.flags[i], c.flags[j] = c.flags[j], c.flags[i]


cdef Py_ssize_t partition(Carried *c, Py_ssize_t lo, Py_ssize_t hi) noexcept nogil:
    """Hoare's partition of rows lo..hi-1 (at least 3) around the median of three keys:
    returns p with every key of lo..p-1 <= every key of p..hi-1, lo < p < hi."""
    cdef Py_ssize_t mid = lo + (hi - lo) // 2, i = lo - 1, j = hi
    cdef int64_t pivot
    if c.keys[mid] < c.keys[lo]:
        swap_rows(c, mid, lo)
    if c.keys[hi - 1] < c.keys[lo]:
        swap_rows(c, hi - 1, lo)
    if c.keys[hi - 1] < c.keys[mid]:
        swap_rows(c, hi - 1, mid)
    pivot = c.keys[mid]
    while True:
        i += 1
        while c.keys[i] < pivot:
            i += 1
        j -= 1
        while c.keys[j] > pivot:
            j -= 1
        if i >= j:
            return j + 1
        swap_rows(c, i, j)


cdef void sift_carried(Carried *c, Py_ssize_t lo, Py_ssize_t size, Py_ssize_t i) noexcept nogil:
    cdef Py_ssize_t child
    while 2 * i + 1 < size:
        child = 2 * i + 1
        if child + 1 < size and c.keys[lo + child + 1] > c.keys[lo + child]:
            child += 1
        if c.keys[lo + child] <= c.keys[lo + i]:
            return
        swap_rows(c, lo + i, lo + child)
        i = child


cdef void introsort(Carried *c, Py_ssize_t lo, Py_ssize_t hi, int depth) noexcept nogil:
    """Rows lo..hi-1 sorted by key: quicksort on the larger part's loop, heapsort past
    `depth` partitions (no quadratic case), insertion sort for short runs."""
    cdef Py_ssize_t p, i, j, size
    while hi - lo >= INSERTION_SORT_BELOW:
        if depth == 0:
            size = hi - lo
            for i in range(size // 2 - 1, -1, -1):
                sift_carried(c, lo, size, i)
            for i in range(size - 1, 0, -1):
                swap_rows(c, lo, lo + i)
                sift_carried(c, lo, i, 0)
            return
        depth -= 1
        p = partition(c, lo, hi)
        if p - lo < hi - p:
            introsort(c, lo, p, depth)
            lo = p
        else:
            introsort(c, p, hi, depth)
            hi = p
    for i in range(lo + 1, hi):
        j = i
        while j > lo and c.keys[j - 1] > c.keys[j]:
            swap_rows(c, j - 1, j)
            j -= 1


def sort_keys_carrying(int64_t[::1] keys, float[::1] first, float[::1] second=None, unsigned char[::1] flags=None,
                       int threads=1):
    """`keys` sorted in place, the rows of `first` (and of `second` and `flags` when given)
    moved with them: a table sorted without the int64 permutation and gathered copies that
    argsort would take. Parts made by partitions are sorted side by side in `threads`."""
    cdef Py_ssize_t n = keys.shape[0], r, largest, count = 1, most
    cdef Carried c
    cdef Py_ssize_t bounds[2 * 64]
    cdef Py_ssize_t p, lo, hi
    cdef int depth = 2 * (<object> n).bit_length()
    if first.shape[0] != n or (second is not None and second.shape[0] != n) or (flags is not None and flags.shape[0] != n):
        raise ValueError("the arrays carried differ in length from the keys")
    if n < 2:
        return
    c.keys, c.first = &keys[0], &first[0]
    c.second = &second[0] if second is not None else NULL
    c.flags = &flags[0] if flags is not None else NULL
    most = min(8 * threads, 64) if threads > 1 else 1
    bounds[0], bounds[1] = 0, n
    with nogil:
        while count < most:  # the largest part split until there are enough to share out
            largest = 0
            for r in range(1, count):
                if bounds[2 * r + 1] - bounds[2 * r] > bounds[2 * largest + 1] - bounds[2 * largest]:
                    largest = r
            lo, hi = bounds[2 * largest], bounds[2 * largest + 1]
            if hi - lo < 65536:
                break
            p = partition(&c, lo, hi)
            bounds[2 * largest + 1] = p
            bounds[2 * count], bounds[2 * count + 1] = p, hi
            count += 1
        for r in prange(count, num_threads=threads, schedule="dynamic", chunksize=1):
            introsort(&c, bounds[2 * r], bounds[2 * r + 1], depth)
