# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""The back-off walk of SRILM's Ngram::wordProbBO over the sorted n-gram tables of
nplmtk/ngram/index.py, one token at a time (the walk itself: backoff_walk.pxd).

The k-grams are sorted by key `row of the (k-1)-word prefix * V + word`, so the
children of a (k-1)-gram (the k-grams extending it) are one contiguous run of the
k-gram table, found by a binary search inside that run (KenLM's trie does the same).
The tables must have been checked by the caller (keys sorted and in range): nothing
here checks them again.
"""
import numpy as np
from cython.parallel cimport prange, threadid
from libc.math cimport INFINITY
from libc.stdlib cimport free, malloc
from openmp cimport omp_get_max_threads
from backoff_walk cimport MAX_LEVELS, walk_find, walk_stream
from ngram_tables cimport find_key
# BackoffTables' attributes: nplmtk/_ext/backoff_kernels.pxd


def children_runs(Py_ssize_t parents, const long long[::1] keys, long long vocab_size):
    """runs[i] .. runs[i + 1]: the rows of `keys` (one order's sorted keys) that extend
    row i of the order below (of `parents` rows). None unless the keys are increasing,
    from 0 and below parents * vocab_size: a model read from a file gets its check here.
    Three straight passes, not a merge of rows and keys: the check; each key's row from a
    float product (exact below 2^53 after one correction; past it, integer division),
    where it writes the end of its run; then rows without children take the end of the
    run before."""
    if vocab_size <= 0:
        return None
    runs = np.zeros(parents + 1, dtype=np.int64)
    cdef long long[::1] out = runs
    cdef Py_ssize_t i, count = keys.shape[0]
    cdef long long previous = -1, row, run_end = 0
    cdef bint increasing = True
    cdef double inverse = 1.0 / vocab_size
    with nogil:
        for i in range(count):
            increasing &= keys[i] > previous
            previous = keys[i]
        # every key from 0 up and its row below parents: the rows below index `out`
        if not increasing or (count and (parents == 0 or keys[count - 1] // vocab_size >= parents)):
            increasing = False
        elif count == 0 or keys[count - 1] < (1LL << 53):
            for i in range(count):
                row = <long long>(<double>keys[i] * inverse)
                row -= row * vocab_size > keys[i]
                row += (row + 1) * vocab_size <= keys[i]
                out[row + 1] = i + 1
        else:
            for i in range(count):
                out[keys[i] // vocab_size + 1] = i + 1
        if increasing:
            for i in range(1, parents + 1):
                run_end = out[i] if out[i] > run_end else run_end
                out[i] = run_end
    return runs if increasing else None


def checked_log10s(const float[::1] values, float lowest, float highest, float pseudo_zero):
    """(valid, holds pseudo_zero) of one table of a model read from a file, in one pass:
    valid when every value lies in [lowest, highest] (NaN and infinities do not)."""
    cdef Py_ssize_t i
    cdef bint inside = True, zero = False
    with nogil:
        for i in range(values.shape[0]):
            inside &= (values[i] >= lowest) & (values[i] <= highest)
            zero |= values[i] == pseudo_zero
    return inside, zero


def unigram_rows(keys, long long vocab_size):
    """word id -> its row among the 1-gram keys, -1 if it has none (one spare entry)."""
    rows = np.full(vocab_size + 1, -1, dtype=np.int64)
    rows[np.asarray(keys, dtype=np.int64)] = np.arange(len(keys))
    return rows


cdef struct Levels:
    long long vocab_size
    const long long *keys[MAX_LEVELS]
    const long long *children[MAX_LEVELS]  # children[j]: the runs of table j's rows in table j + 1
    const long long *unigram_row


cdef int suffixes_of(const Levels *t, int level, const long long *rows, Py_ssize_t count,
                     long long *out) noexcept nogil:
    """out[i]: the row in table level - 1 of row rows[i] of table `level` (>= 1) without its
    first word, -1 if there is none; `rows` increasing. Found from the suffixes of their
    prefixes, themselves found so, down to the 1-grams: no table of suffixes is held.
    -1 when memory runs out."""
    cdef Py_ssize_t i, distinct = 0
    cdef long long key, parent, prefix, vocab_size = t.vocab_size
    cdef long long *prefixes
    cdef long long *prefix_suffixes
    if level == 1:
        for i in range(count):
            out[i] = t.unigram_row[t.keys[1][rows[i]] % vocab_size]
        return 0
    prefixes = <long long *> malloc(2 * max(count, 1) * sizeof(long long))
    if prefixes == NULL:
        return -1
    prefix_suffixes = prefixes + count
    for i in range(count):  # the rows' prefixes, increasing with them: each kept once
        prefix = t.keys[level][rows[i]] // vocab_size
        if distinct == 0 or prefixes[distinct - 1] != prefix:
            prefixes[distinct] = prefix
            distinct += 1
    if suffixes_of(t, level - 1, prefixes, distinct, prefix_suffixes) < 0:
        free(prefixes)
        return -1
    distinct = 0
    for i in range(count):
        key = t.keys[level][rows[i]]
        while prefixes[distinct] != key // vocab_size:
            distinct += 1
        parent = prefix_suffixes[distinct]
        out[i] = -1 if parent < 0 else find_key(t.keys[level - 1], t.children[level - 2][parent],
                                                t.children[level - 2][parent + 1], parent * vocab_size + key % vocab_size)
    free(prefixes)
    return 0


cdef enum:
    NODE_CHUNK = 1 << 16  # rows of one table searched at a time by one thread


def context_nodes(list keys, list has_bow, list children, long long vocab_size):
    """The contexts the back-off walk may pass, as SRILM's context trie holds them:
    n-grams with a back-off weight, prefixes of longer n-grams, and every suffix of
    those, marked from the longest contexts down, a chunk of rows at a time side by side.
    Each chunk's suffixes are found afresh (suffixes_of), not kept for the whole table: a
    large model read from an ARPA file needs no more memory than its marks. A table with no
    back-off weight and no longer n-grams (the highest) gets untouched zeros."""
    cdef int order = len(keys), j, level
    cdef Levels t
    cdef Py_ssize_t chunk, chunks, first, end, r, count
    cdef long long *rows
    cdef long long *found
    cdef unsigned char *marks
    cdef const unsigned char *nodes
    cdef Py_ssize_t failures = 0
    cdef const long long[::1] key_view
    cdef const long long[::1] run_view
    cdef const unsigned char[::1] flag_view
    cdef unsigned char[::1] node_view
    if not 1 <= order <= MAX_LEVELS:
        raise ValueError(f"order {order} outside 1..{MAX_LEVELS}")
    node = []
    for j in range(order):
        flags = np.asarray(has_bow[j], dtype=bool)
        if j == order - 1:
            node.append(flags.copy() if flags.any() else np.zeros(len(flags), dtype=bool))
            break
        marked = np.empty(len(flags), dtype=bool)
        node_view, flag_view, run_view = marked.view(np.uint8), flags.view(np.uint8), children[j]
        with nogil:
            for r in range(node_view.shape[0]):  # a weight, or a prefix of longer n-grams
                node_view[r] = flag_view[r] | (run_view[r + 1] > run_view[r])
        node.append(marked)
    if order < 3:  # no context is shorter than a 2-gram's prefix: nothing more to mark
        return node
    unigram = unigram_rows(keys[0], vocab_size)
    owners = [unigram]
    run_view = unigram
    t.vocab_size, t.unigram_row = vocab_size, &run_view[0]
    for j in range(order):
        table = np.ascontiguousarray(keys[j], dtype=np.int64) if len(keys[j]) else np.zeros(1, dtype=np.int64)
        owners.append(table)
        key_view = table
        t.keys[j] = &key_view[0]
        if j < order - 1:
            table = np.ascontiguousarray(children[j], dtype=np.int64)
            owners.append(table)
            run_view = table
            t.children[j] = &run_view[0]
    for level in range(order - 2, 0, -1):  # a suffix's suffix is marked when its own table's turn comes
        node_view, flag_view = node[level - 1].view(np.uint8), node[level].view(np.uint8)
        marks, nodes = &node_view[0] if node_view.shape[0] else NULL, &flag_view[0] if flag_view.shape[0] else NULL
        chunks = (flag_view.shape[0] + NODE_CHUNK - 1) // NODE_CHUNK
        for chunk in prange(chunks, nogil=True, schedule="dynamic", chunksize=1):
            first = chunk * NODE_CHUNK
            end = min(first + NODE_CHUNK, flag_view.shape[0])
            rows = <long long *> malloc(2 * NODE_CHUNK * sizeof(long long))
            if rows == NULL:
                failures += 1
            else:
                found = rows + NODE_CHUNK
                count = 0
                for r in range(first, end):
                    if nodes[r]:
                        rows[count] = r
                        count = count + 1
                if suffixes_of(&t, level, rows, count, found) < 0:
                    failures += 1
                else:
                    for r in range(count):
                        if found[r] >= 0:
                            marks[found[r]] = 1  # only ever set: threads may mark the same row
                free(rows)
        if failures:
            raise MemoryError()
    return node


cdef class BackoffTables:
    """Read-only views of one model's tables and the children runs built from them (their
    attributes in nplmtk/_ext/backoff_kernels.pxd)."""

    def __init__(self, long long vocab_size, keys, logp, bow, node, children):
        """`children[j]`: children_runs of the tables of orders j + 1 and j + 2."""
        cdef const long long[::1] key_view
        cdef const float[::1] float_view
        cdef const unsigned char[::1] byte_view
        cdef long long[::1] out
        cdef Py_ssize_t j
        self.order = len(keys)
        if not 1 <= self.order <= MAX_LEVELS:
            raise ValueError(f"order {self.order} outside 1..{MAX_LEVELS}")
        self.vocab_size = vocab_size
        self.owners = []
        for j in range(self.order):
            arrays = (np.ascontiguousarray(keys[j], dtype=np.int64), np.ascontiguousarray(logp[j], dtype=np.float32),
                      np.ascontiguousarray(bow[j], dtype=np.float32),
                      np.ascontiguousarray(node[j], dtype=bool).view(np.uint8))
            if not len(arrays[0]) == len(arrays[1]) == len(arrays[2]) == len(arrays[3]):
                raise ValueError(f"the tables of order {j + 1} differ in length")
            padded = [a if len(a) else np.zeros(1, dtype=a.dtype) for a in arrays]  # a pointer even when empty
            self.owners.extend(padded)
            key_view = padded[0]
            self.keys[j] = &key_view[0]
            float_view = padded[1]
            self.logp[j] = &float_view[0]
            float_view = padded[2]
            self.bow[j] = &float_view[0]
            byte_view = padded[3]
            self.node[j] = &byte_view[0]
            if j + 1 < self.order:
                runs = np.ascontiguousarray(children[j], dtype=np.int64)
                if len(runs) != len(arrays[0]) + 1:
                    raise ValueError(f"the children of order {j + 1} do not match its table")
                self.owners.append(runs)
                key_view = runs
                self.children[j] = &key_view[0]
        unigram_row = unigram_rows(keys[0], vocab_size)
        self.owners.append(unigram_row)
        out = unigram_row
        self.unigram_row = &out[0]
        self.walk.order, self.walk.vocab_size, self.walk.unigram_row = self.order, vocab_size, self.unigram_row
        self.walk.keys, self.walk.logp, self.walk.bow = self.keys, self.logp, self.bow
        self.walk.node, self.walk.children = self.node, self.children

    def score_sentences(self, const int[::1] ids, const long long[::1] offsets, int bos, int eos):
        """log10 p of every word and `</s>` of each sentence ids[offsets[s]:offsets[s+1]]
        after `<s>` (float32), and the order of the n-gram that gave it (0: none). The
        sentences are independent: OpenMP threads share them, each with its buffers."""
        cdef Py_ssize_t sentences = offsets.shape[0] - 1, s, t, length, longest = 0, predicted = 0
        for s in range(sentences):
            length = offsets[s + 1] - offsets[s]
            longest = max(longest, length)
            predicted += length + 1
        scores = np.empty(predicted, dtype=np.float32)
        orders = np.empty(predicted, dtype=np.int8)
        cdef int threads = max(1, min(omp_get_max_threads(), sentences // 256))  # short texts: one thread
        tokens_array = np.empty((threads, longest + 2), dtype=np.int64)
        chain_array = np.empty((threads, (longest + 2) * self.order), dtype=np.int64)
        cdef float[::1] score_view = scores
        cdef signed char[::1] order_view = orders
        cdef long long[:, ::1] tokens = tokens_array
        cdef long long[:, ::1] chain = chain_array
        cdef Py_ssize_t out
        cdef int thread
        for s in prange(sentences, nogil=True, num_threads=threads, schedule="dynamic", chunksize=64):
            thread = threadid()
            length = offsets[s + 1] - offsets[s]
            out = offsets[s] + s
            tokens[thread, 0] = bos
            for t in range(length):
                tokens[thread, t + 1] = ids[offsets[s] + t]
            tokens[thread, length + 1] = eos
            self.walk_stream(&tokens[thread, 0], length + 2, 1, &chain[thread, 0], &score_view[out],
                             &order_view[out])
        return scores, orders

    def score_rows(self, const int[:, :] rows):
        """log10 p(w | h) (float32) of each row (h..., w) and the order of the n-gram used."""
        cdef Py_ssize_t count = rows.shape[0], width = rows.shape[1], r, a
        cdef Py_ssize_t used = min(width, self.order)
        scores = np.empty(count, dtype=np.float32)
        orders = np.empty(count, dtype=np.int8)
        tokens_array = np.empty(max(used, 1), dtype=np.int64)
        chain_array = np.empty(max(used, 1) * self.order, dtype=np.int64)
        cdef float[::1] score_view = scores
        cdef signed char[::1] order_view = orders
        cdef long long[::1] tokens = tokens_array
        cdef long long[::1] chain = chain_array
        if width == 0:
            raise ValueError("rows need at least the predicted word")
        with nogil:
            for r in range(count):
                for a in range(used):
                    tokens[a] = rows[r, width - used + a]
                self.walk_stream(&tokens[0], used, used - 1, &chain[0], &score_view[r], &order_view[r])
        return scores, orders

    def score_steps(self, const int[:, :] rows):
        """The incremental scoring API's step (nplmtk/incremental.py) for each row (h..., w),
        the context h right-aligned and padded on the left with -1: log10 p(w | h) (float32)
        and the length of the state after w, the longest suffix of (h..., w) (at most
        order - 1 words) that is a context the walk passes, its shorter suffixes too, and
        that changes a later score (it has n-grams extending it, or a back-off weight other
        than 0): a longer one gives the same scores ever after."""
        cdef Py_ssize_t count = rows.shape[0], width = rows.shape[1], r
        if width == 0:
            raise ValueError("rows need at least the predicted word")
        cdef Py_ssize_t used = min(width, self.order)
        scores = np.empty(count, dtype=np.float32)
        lengths = np.empty(count, dtype=np.int8)
        tokens_array = np.empty(used, dtype=np.int64)
        chain_array = np.empty(used * self.order, dtype=np.int64)
        cdef float[::1] score_view = scores
        cdef signed char[::1] length_view = lengths
        cdef long long[::1] tokens = tokens_array
        cdef long long[::1] chain = chain_array
        with nogil:
            for r in range(count):
                length_view[r] = self.step(&rows[r, width - used], rows.strides[1] // sizeof(int), used,
                                           &tokens[0], &chain[0], &score_view[r])
        return scores, lengths

    def score_context(self, tuple context, long long word):
        """score_steps of one row, the context a tuple of word ids: (log10 p, state length)."""
        cdef Py_ssize_t given = len(context), used = min(given + 1, self.order), a
        cdef long long tokens[MAX_LEVELS]
        cdef long long chain[MAX_LEVELS * MAX_LEVELS]
        cdef int words[MAX_LEVELS]
        cdef float score
        cdef signed char length
        for a in range(used - 1):
            words[a] = context[given - (used - 1) + a]
        words[used - 1] = word if 0 <= word < self.vocab_size else -1
        length = self.step(words, 1, used, tokens, chain, &score)
        return score, length

    cdef signed char step(self, const int *words, Py_ssize_t stride, Py_ssize_t used, long long *tokens,
                          long long *chain, float *score) noexcept nogil:
        """score_steps of the `used` words at words[0], words[stride], ..."""
        cdef Py_ssize_t a, j, last = used - 1
        cdef long long row
        cdef signed char order_used, length = 0
        for a in range(used):
            tokens[a] = words[a * stride]
        self.walk_stream(tokens, used, last, chain, score, &order_used)
        for j in range(min(used, self.order - 1)):
            row = chain[(last - j) * self.order + j]
            if row < 0 or not self.node[j][row]:
                break
            if self.children[j][row + 1] > self.children[j][row] or self.bow[j][row] != 0:
                length = j + 1
        return length

    cdef long long find(self, int level, long long parent, long long word) noexcept nogil:
        return walk_find(&self.walk, level, parent, word)

    cdef void walk_stream(self, const long long *tokens, Py_ssize_t length, Py_ssize_t first,
                          long long *chain, float *scores, signed char *orders) noexcept nogil:
        """Score tokens[first:length], each after the tokens before it (backoff_walk.pxd)."""
        walk_stream(&self.walk, tokens, length, first, chain, scores, orders)
