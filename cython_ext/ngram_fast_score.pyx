# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""A binary back-off model (nplmtk/ngram/binary.py) scored straight from the bytes of its
file (a memory map), without numpy, for `nplm ppl`'s fast path (nplmtk/ngram/mapped.py):
each order's five tables checked in one pass, a block at a time while it is in cache (the
XXH64 of every table, the keys increasing and each of an n-gram of the order below, the
log10 values in their domains) as the children runs are built; the vocabulary's words
hashed and checked; a text's words encoded, walked (backoff_walk.pxd) and totalled as
SRILM's TextStats count them. The caller gives offsets inside the buffer, checked."""
from cpython cimport array
import array
from cython.parallel cimport prange, threadid
from libc.math cimport INFINITY
from libc.stdint cimport int64_t, uint64_t
from libc.stdlib cimport free, malloc
from openmp cimport omp_get_max_threads
from backoff_walk cimport MAX_LEVELS as LEVELS, WalkTables, walk_stream
from word_hash cimport EncodedText, Entry, encode_text, entry_insert, is_space, new_entries
from xxh64_core cimport State, state_digest, state_init, state_update

MAX_LEVELS = LEVELS  # the highest order (nplmtk.ngram.counts.MAX_ORDER)

cdef enum:
    # a table's rows hashed, then checked, while they are in cache (16 KiB)
    KEYS_BLOCK = 1 << 11
    VALUES_BLOCK = 1 << 12


cdef bint hashed_as(const unsigned char *data, Py_ssize_t n, uint64_t digest) noexcept nogil:
    """Whether n bytes have the XXH64 `digest` (a table checked for nothing else)."""
    cdef State state
    cdef unsigned char nothing = 0
    state_init(&state, 0)
    state_update(&state, data if n else &nothing, n)
    return state_digest(&state) == digest


cdef bint checked_keys(const long long *keys, Py_ssize_t count, long long parents, long long vocab_size,
                       uint64_t digest, long long *runs) noexcept nogil:
    """Whether `keys` hash to `digest` and are increasing keys of n-grams (row of the prefix
    * vocab_size + word, the row below `parents`); runs[r] (r = 0 .. parents, or NULL): the
    first key of a row r or later, so that runs[r] .. runs[r + 1] are row r's children."""
    cdef State state
    cdef Py_ssize_t i, block, end
    cdef long long previous = -1, row = 0, boundary = vocab_size
    state_init(&state, 0)
    if runs != NULL:
        runs[0] = 0
    block = 0
    while block < count:
        end = min(block + KEYS_BLOCK, count)
        state_update(&state, <const unsigned char *> (keys + block), (end - block) * 8)
        for i in range(block, end):
            if keys[i] <= previous:
                return False
            previous = keys[i]
            while keys[i] >= boundary:  # the key of a later row
                row += 1
                if row >= parents:
                    return False
                if runs != NULL:
                    runs[row] = i
                boundary += vocab_size
        block = end
    if runs != NULL:
        for i in range(row + 1, parents + 1):
            runs[i] = count
    return state_digest(&state) == digest


cdef int checked_log10s(const float *values, Py_ssize_t count, float lowest, float highest, uint64_t digest
                        ) noexcept nogil:
    """-1 unless `values` hash to `digest` and lie in [lowest, highest] (NaN does not); else
    1 when one of them is `lowest` (log 0, read as -inf), 0 when none is."""
    cdef State state
    cdef Py_ssize_t i, block, end
    cdef bint inside = True, zero = False
    state_init(&state, 0)
    block = 0
    while block < count:
        end = min(block + VALUES_BLOCK, count)
        state_update(&state, <const unsigned char *> (values + block), (end - block) * 4)
        for i in range(block, end):
            inside &= (values[i] >= lowest) & (values[i] <= highest)
            zero |= values[i] == lowest
        if not inside:
            return -1
        block = end
    return zero if state_digest(&state) == digest else -1


cdef class MappedTables:
    """The tables of one binary back-off model inside `data` (the file's bytes, kept
    alive here), given an order at a time by add_order, and its vocabulary (hash_words)."""
    cdef const unsigned char[::1] data
    cdef WalkTables walk
    cdef const long long *keys[LEVELS]
    cdef const float *logp[LEVELS]
    cdef const float *bow[LEVELS]
    cdef const unsigned char *node[LEVELS]
    cdef const long long *children[LEVELS]
    cdef long long *owned_runs[LEVELS]
    cdef float *owned_values[2 * LEVELS]  # logp and bow where log 0 (-99) is read as -inf
    cdef long long *unigram_row
    cdef long long vocab_size, rows_below
    cdef int order
    cdef bytes words  # the vocabulary's words joined by newlines, which the word table points into
    cdef Entry *entries
    cdef Py_ssize_t capacity, size

    def __cinit__(self, const unsigned char[::1] data, long long vocab_size):
        cdef long long i
        self.data, self.vocab_size, self.order, self.rows_below = data, vocab_size, 0, 1
        self.capacity, self.size = 1 << 12, 0
        self.entries = new_entries(self.capacity)
        self.unigram_row = <long long *> malloc((vocab_size + 1) * sizeof(long long))
        if self.entries == NULL or self.unigram_row == NULL:
            raise MemoryError()
        for i in range(vocab_size + 1):
            self.unigram_row[i] = -1

    def __dealloc__(self):
        cdef int j
        for j in range(LEVELS):
            free(self.owned_runs[j])
            free(self.owned_values[2 * j])
            free(self.owned_values[2 * j + 1])
        free(self.unigram_row)
        free(self.entries)

    def hash_words(self, bytes words, Py_ssize_t count, Py_ssize_t longest):
        """Whether `words` (UTF-8, joined by newlines) are `count` words, in id order, that a
        vocabulary holds: none empty, none with white space, none twice, none past the
        first three (the unknown word, <s> and </s>) longer than `longest` bytes."""
        cdef const unsigned char *text = words
        cdef Py_ssize_t n = len(words), start = 0, end, found = 0, i
        cdef Entry *e
        self.words = words
        while start <= n:
            end = start
            while end < n and text[end] != 10:
                if is_space(text[end]):
                    return False
                end += 1
            if end == start or (found >= 3 and end - start > longest):
                return False
            e = entry_insert(&self.entries, &self.capacity, &self.size, text + start, end - start, found)
            if e == NULL:
                raise MemoryError()
            if e.value != found:  # a word seen before
                return False
            found += 1
            start = end + 1
        return found == count

    def add_order(self, Py_ssize_t count, tuple offsets, tuple digests, float pseudo_zero, float highest_bow):
        """Take the next order's tables: their `count` rows at `offsets` (keys 8-byte, logp
        and bow 4-byte aligned; in the order keys, logp, bow, has_bow, node, as
        nplmtk/ngram/layout.py lists them) with their XXH64 `digests`; False, and the model
        unusable, unless every check passes."""
        cdef Py_ssize_t keys_at = offsets[0], logp_at = offsets[1], bow_at = offsets[2]
        cdef Py_ssize_t has_bow_at = offsets[3], node_at = offsets[4], i
        cdef uint64_t keys_digest = digests[0], logp_digest = digests[1], bow_digest = digests[2]
        cdef uint64_t has_bow_digest = digests[3], node_digest = digests[4]
        cdef int j = self.order, logp_zero, bow_zero
        cdef const unsigned char *base = &self.data[0]
        cdef long long *runs = NULL
        cdef const long long *keys = <const long long *> (base + keys_at)
        cdef bint valid
        if j >= LEVELS or self.vocab_size <= 0:
            return False
        if j > 0:
            runs = <long long *> malloc((self.rows_below + 1) * sizeof(long long))
            if runs == NULL:
                raise MemoryError()
            self.owned_runs[j - 1] = runs
        with nogil:
            valid = checked_keys(keys, count, self.rows_below, self.vocab_size, keys_digest, runs)
            logp_zero = checked_log10s(<const float *> (base + logp_at), count, pseudo_zero, 0.0, logp_digest)
            bow_zero = checked_log10s(<const float *> (base + bow_at), count, pseudo_zero, highest_bow, bow_digest)
            valid = (valid and logp_zero >= 0 and bow_zero >= 0 and hashed_as(base + has_bow_at, count, has_bow_digest)
                     and hashed_as(base + node_at, count, node_digest))
        if not valid:
            return False
        self.keys[j], self.node[j] = keys, base + node_at
        self.logp[j] = self.log0_as_minus_infinity(2 * j, <const float *> (base + logp_at), count, logp_zero,
                                                   pseudo_zero)
        self.bow[j] = self.log0_as_minus_infinity(2 * j + 1, <const float *> (base + bow_at), count, bow_zero,
                                                  pseudo_zero)
        if j > 0:
            self.children[j - 1] = runs
        else:
            for i in range(count):
                self.unigram_row[keys[i]] = i
        self.order, self.rows_below = j + 1, count
        self.walk.order, self.walk.vocab_size, self.walk.unigram_row = self.order, self.vocab_size, self.unigram_row
        self.walk.keys, self.walk.logp, self.walk.bow = self.keys, self.logp, self.bow
        self.walk.node, self.walk.children = self.node, self.children
        return True

    cdef const float *log0_as_minus_infinity(self, int slot, const float *values, Py_ssize_t count, bint holds_zero,
                                              float pseudo_zero) except NULL:
        """`values`, or where one is log 0 (pseudo_zero) a copy with -inf there."""
        cdef float *copy
        cdef Py_ssize_t i
        if not holds_zero:
            return values
        copy = <float *> malloc(max(count, 1) * sizeof(float))
        if copy == NULL:
            raise MemoryError()
        for i in range(count):
            copy[i] = -INFINITY if values[i] == pseudo_zero else values[i]
        self.owned_values[slot] = copy
        return copy

    def score_text(self, const unsigned char[::1] text, bint details):
        """The text's sentences (its lines with words, a leading <s> and trailing </s>
        dropped), each word and </s> scored after <s> and the words before it, as SRILM's
        TextStats total them: (sentences, words, OOVs, zeroprobs, log10 total), with
        `details` also per sentence (log10 total, OOVs, zeroprobs, its first token: arrays
        'd', 'q', 'q', 'q', with one more first token past the last) and per token (word id
        or </s>, log10 p float32, order of the n-gram used: 'i', 'f', 'b'); None for a text
        without words."""
        cdef EncodedText encoded
        cdef Py_ssize_t n = text.shape[0], s, t, sentences, words, tokens, longest = 0, at, length
        cdef int status, threads, thread, order = self.order
        cdef int64_t *offsets = NULL
        cdef float *scores = NULL
        cdef signed char *orders = NULL
        cdef long long *stream = NULL
        cdef long long *chain = NULL
        cdef double value, sentence_total, total = 0
        cdef int64_t oovs = 0, zeroprobs = 0, sentence_oovs, sentence_zeroprobs
        cdef array.array sentence_logprob, sentence_oov_counts, sentence_zeroprob_counts, bounds
        cdef array.array token_ids, token_scores, token_orders
        with nogil:
            status = encode_text(&text[0] if n else NULL, n, self.entries, self.capacity, 0, 1, 2, &encoded)
        try:
            if status < 0:
                raise MemoryError()
            sentences, words = encoded.lines, encoded.count
            if words == 0:
                return None
            tokens = words + sentences
            offsets = <int64_t *> malloc((sentences + 1) * sizeof(int64_t))
            scores = <float *> malloc(tokens * sizeof(float))
            orders = <signed char *> malloc(tokens)
            if offsets == NULL or scores == NULL or orders == NULL:
                raise MemoryError()
            offsets[0] = 0
            for s in range(sentences):
                offsets[s + 1] = offsets[s] + encoded.lengths[s]
                longest = max(longest, encoded.lengths[s])
            threads = max(1, min(omp_get_max_threads(), sentences // 256))  # short texts: one thread
            stream = <long long *> malloc(threads * (longest + 2) * sizeof(long long))
            chain = <long long *> malloc(threads * (longest + 2) * order * sizeof(long long))
            if stream == NULL or chain == NULL:
                raise MemoryError()
            for s in prange(sentences, nogil=True, num_threads=threads, schedule="dynamic", chunksize=64):
                thread = threadid()
                length = offsets[s + 1] - offsets[s]
                at = thread * (longest + 2)
                stream[at] = 1  # <s>
                for t in range(length):
                    stream[at + t + 1] = encoded.ids[offsets[s] + t]
                stream[at + length + 1] = 2  # </s>
                walk_stream(&self.walk, &stream[at], length + 2, 1, &chain[at * order], &scores[offsets[s] + s],
                            &orders[offsets[s] + s])
            if details:
                sentence_logprob = array.clone(array.array("d"), sentences, False)
                sentence_oov_counts = array.clone(array.array("q"), sentences, False)
                sentence_zeroprob_counts = array.clone(array.array("q"), sentences, False)
                bounds = array.clone(array.array("q"), sentences + 1, False)
                bounds.data.as_longlongs[sentences] = tokens
                token_ids = array.clone(array.array("i"), tokens, False)
                token_scores = array.clone(array.array("f"), tokens, False)
                token_orders = array.clone(array.array("b"), tokens, False)
            # SRILM's sums: in double, in order; -inf is an OOV where the word is the
            # unknown word (id 0), else a zeroprob, and adds nothing
            for s in range(sentences):
                sentence_total, sentence_oovs, sentence_zeroprobs = 0, 0, 0
                length = offsets[s + 1] - offsets[s]
                for t in range(length + 1):
                    value = scores[offsets[s] + s + t]
                    if value != -INFINITY:
                        sentence_total += value
                    elif t < length and encoded.ids[offsets[s] + t] == 0:
                        sentence_oovs += 1
                    else:
                        sentence_zeroprobs += 1
                total += sentence_total
                oovs += sentence_oovs
                zeroprobs += sentence_zeroprobs
                if details:
                    sentence_logprob.data.as_doubles[s] = sentence_total
                    sentence_oov_counts.data.as_longlongs[s] = sentence_oovs
                    sentence_zeroprob_counts.data.as_longlongs[s] = sentence_zeroprobs
                    bounds.data.as_longlongs[s] = offsets[s] + s
                    for t in range(length + 1):
                        at = offsets[s] + s + t
                        token_ids.data.as_ints[at] = encoded.ids[offsets[s] + t] if t < length else 2
                        token_scores.data.as_floats[at] = scores[at]
                        token_orders.data.as_schars[at] = orders[at]
            totals = (sentences, words, oovs, zeroprobs, total)
            if not details:
                return totals
            return totals + ((sentence_logprob, sentence_oov_counts, sentence_zeroprob_counts, bounds),
                             (token_ids, token_scores, token_orders))
        finally:
            free(encoded.ids)
            free(encoded.lengths)
            free(offsets)
            free(scores)
            free(orders)
            free(stream)
            free(chain)
