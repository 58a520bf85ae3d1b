# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""The lattice decoder's search (nplmtk/lattice/decode.py's `viterbi`) over SRILM's graph
of a lattice as arrays, with a back-off n-gram model's scores from its BackoffTables
(SRILM's Lattice::decode, LatticeDecode.cc), in the same float32 arithmetic, step for
step, and the same order of states.

The graph is given by its nodes (each its word id: -1 for a null node, an id at or past
the model's vocabulary size for a word the model lacks, each such word its own id),
their transitions in (CSR: into node n, in_first[n] .. in_first[n + 1]) and the nodes
to visit in topological order. A path's context is its last words, recent first, kept
as an id (`Contexts`, interned); the states of one node are numbered in the order they
were made and found by their context through a stamp per context. The inputs are
checked by the caller (nplmtk/lattice/search.py): nothing here checks them again.
"""
import numpy as np
from libc.math cimport INFINITY
from libc.stdlib cimport free, malloc, realloc
from libc.string cimport memcpy, memset
from nplmtk._ext.backoff_kernels cimport BackoffTables, MAX_LEVELS


cdef struct Contexts:
    # context c: words[c * width .. + length[c]] (recent first), padded with -2
    int width          # the decoder's order - 1 (0: one empty context)
    int count, capacity
    int *words
    int *length
    int *stamp          # the node whose state has this context, -1 for none yet
    int *state          # that state
    int *table          # open addressing: context ids, -1 empty
    int table_size      # a power of two


cdef int contexts_init(Contexts *c, int width) noexcept nogil:
    c.width, c.count, c.capacity, c.table_size = width, 0, 64, 256
    c.words = <int *> malloc(c.capacity * max(width, 1) * sizeof(int))
    c.length = <int *> malloc(c.capacity * sizeof(int))
    c.stamp = <int *> malloc(c.capacity * sizeof(int))
    c.state = <int *> malloc(c.capacity * sizeof(int))
    c.table = <int *> malloc(c.table_size * sizeof(int))
    if not (c.words and c.length and c.stamp and c.state and c.table):
        return -1
    memset(c.table, -1, c.table_size * sizeof(int))
    return 0


cdef void contexts_free(Contexts *c) noexcept nogil:
    free(c.words)
    free(c.length)
    free(c.stamp)
    free(c.state)
    free(c.table)


cdef inline unsigned long long context_hash(const int *words, int width) noexcept nogil:
    cdef unsigned long long h = 14695981039346656037ULL
    cdef int i
    for i in range(width):
        h = (h ^ <unsigned int> words[i]) * 1099511628211ULL
    return h ^ (h >> 29)


cdef int contexts_grow(Contexts *c) noexcept nogil:
    cdef int i, slot, size = c.table_size * 2
    cdef int *table = <int *> malloc(size * sizeof(int))
    if table == NULL:
        return -1
    memset(table, -1, size * sizeof(int))
    for i in range(c.count):
        slot = context_hash(&c.words[i * c.width], c.width) & (size - 1)
        while table[slot] >= 0:
            slot = (slot + 1) & (size - 1)
        table[slot] = i
    free(c.table)
    c.table, c.table_size = table, size
    return 0


cdef int context_id(Contexts *c, const int *words) noexcept nogil:
    """The id of the context words[0:width] (padded with -2), made if new; -1: no memory."""
    cdef int slot, i, id, length = 0
    slot = context_hash(words, c.width) & (c.table_size - 1) if c.width else 0
    while c.table[slot] >= 0:
        id = c.table[slot]
        i = 0
        while i < c.width and c.words[id * c.width + i] == words[i]:
            i += 1
        if i == c.width:
            return id
        slot = (slot + 1) & (c.table_size - 1)
    if c.count == c.capacity:
        c.capacity *= 2
        c.words = <int *> realloc(c.words, c.capacity * max(c.width, 1) * sizeof(int))
        c.length = <int *> realloc(c.length, c.capacity * sizeof(int))
        c.stamp = <int *> realloc(c.stamp, c.capacity * sizeof(int))
        c.state = <int *> realloc(c.state, c.capacity * sizeof(int))
        if not (c.words and c.length and c.stamp and c.state):
            return -1
    id = c.count
    c.count += 1
    for i in range(c.width):
        c.words[id * c.width + i] = words[i]
        length += words[i] != -2
    c.length[id] = length
    c.stamp[id] = -1
    c.table[slot] = id
    if 2 * c.count > c.table_size and contexts_grow(c) < 0:
        return -1
    return id


cdef struct States:
    # state k: its node, context, log10 score, sum of language scores, best predecessor
    # (-1: none), and the head of its merged predecessors (Preds, newest first; -1: none)
    int count, capacity
    int *node
    int *context
    int *prev
    int *preds
    float *prob
    float *gprob


cdef struct Preds:
    # predecessor entry i: the state it comes from, the next entry of the same state,
    # the score difference along the transition and the language score on it
    int count, capacity
    int *state
    int *next
    float *diff
    float *gprob


cdef int states_reserve(States *s) noexcept nogil:
    if s.count < s.capacity:
        return 0
    s.capacity = max(64, 2 * s.capacity)
    s.node = <int *> realloc(s.node, s.capacity * sizeof(int))
    s.context = <int *> realloc(s.context, s.capacity * sizeof(int))
    s.prev = <int *> realloc(s.prev, s.capacity * sizeof(int))
    s.preds = <int *> realloc(s.preds, s.capacity * sizeof(int))
    s.prob = <float *> realloc(s.prob, s.capacity * sizeof(float))
    s.gprob = <float *> realloc(s.gprob, s.capacity * sizeof(float))
    return 0 if s.node and s.context and s.prev and s.preds and s.prob and s.gprob else -1


cdef int preds_push(Preds *p, int head, int state, float diff, float gprob) noexcept nogil:
    """A new entry before `head`: its index (-1: no memory)."""
    if p.count == p.capacity:
        p.capacity = max(64, 2 * p.capacity)
        p.state = <int *> realloc(p.state, p.capacity * sizeof(int))
        p.next = <int *> realloc(p.next, p.capacity * sizeof(int))
        p.diff = <float *> realloc(p.diff, p.capacity * sizeof(float))
        p.gprob = <float *> realloc(p.gprob, p.capacity * sizeof(float))
        if not (p.state and p.next and p.diff and p.gprob):
            return -1
    p.state[p.count], p.next[p.count], p.diff[p.count], p.gprob[p.count] = state, head, diff, gprob
    p.count += 1
    return p.count - 1


cdef float word_logprob(BackoffTables tables, const int *context, int length, int word, long long *tokens,
                        long long *chain) noexcept:
    """log10 p(word | context) (recent first) as BackoffScores.word_logprob: -inf for a
    word the model lacks; a context word it lacks ends the context."""
    cdef int kept = 0, width, used, a, r
    cdef float score
    cdef signed char order_used
    if word >= tables.vocab_size:
        return -INFINITY
    while kept < length and context[kept] < tables.vocab_size:
        kept += 1
    width = kept + 1
    used = min(width, tables.order)
    for a in range(used):  # the row (context oldest first, word): its last `used` ids
        r = width - used + a
        tokens[a] = word if r == kept else context[kept - 1 - r]
    tables.walk_stream(tokens, used, used - 1, chain, &score, &order_used)
    return score


def viterbi_states(BackoffTables tables, const int[::1] words, const float[::1] old, const float[::1] language,
                   const int[::1] in_first, const int[::1] in_source, const float[::1] in_weight,
                   const int[::1] visit, int start, int end, int context_len, float lmscale, int bos, bint nbest):
    """decode.viterbi's search: `tables` None scores each word by `language` (the
    lattice's own scores; context_len 1), else by the model. Returns the states' arrays
    (node, prob, gprob, prev) in the order they were made, the end node's states (first,
    count) and, with `nbest`, every merged predecessor (preds head of each state; each
    entry's state, next, diff, gprob)."""
    cdef int nodes = words.shape[0], width = max(context_len - 1, 0), i, n, w, e, k, q, ctx, last, head
    cdef float prob, g
    cdef bint use_lm = tables is not None
    cdef Contexts c
    cdef States s
    cdef Preds p
    cdef long long tokens[MAX_LEVELS]
    cdef long long chain[MAX_LEVELS * MAX_LEVELS]
    cdef int buffer[MAX_LEVELS]
    first_array = np.zeros(nodes, dtype=np.int32)
    count_array = np.zeros(nodes, dtype=np.int32)
    cdef int[::1] node_first = first_array
    cdef int[::1] node_count = count_array
    memset(&c, 0, sizeof(Contexts))
    memset(&s, 0, sizeof(States))
    memset(&p, 0, sizeof(Preds))
    try:
        if contexts_init(&c, width) < 0 or states_reserve(&s) < 0:
            raise MemoryError()
        for i in range(width):
            buffer[i] = -2
        if width:
            buffer[0] = bos
        ctx = context_id(&c, buffer)
        if ctx < 0:
            raise MemoryError()
        s.node[0], s.context[0], s.prev[0], s.preds[0], s.prob[0], s.gprob[0] = start, ctx, -1, -1, 0, 0
        s.count = 1
        node_first[start], node_count[start] = 0, 1
        for i in range(visit.shape[0]):
            n = visit[i]
            w = words[n]
            node_first[n] = s.count
            for e in range(in_first[n], in_first[n + 1]):
                last = node_first[in_source[e]] + node_count[in_source[e]]
                for k in range(node_first[in_source[e]], last):
                    prob = s.prob[k] + in_weight[e]
                    prob = prob - old[n]
                    if not use_lm:
                        g = language[n]
                    elif w >= 0:
                        g = word_logprob(tables, &c.words[s.context[k] * width], c.length[s.context[k]], w, tokens,
                                         chain)
                        prob = prob + g * lmscale
                    else:
                        g = 0
                    ctx = s.context[k]
                    if w >= 0 and width:
                        buffer[0] = w
                        for q in range(1, width):
                            buffer[q] = c.words[ctx * width + q - 1]
                        ctx = context_id(&c, buffer)
                        if ctx < 0:
                            raise MemoryError()
                    if c.stamp[ctx] == n:
                        q = c.state[ctx]
                        if s.prob[q] < prob:
                            s.prob[q], s.gprob[q], s.prev[q] = prob, s.gprob[k] + g, k
                        if nbest:
                            head = preds_push(&p, s.preds[q], k, prob - s.prob[k], g)
                            if head < 0:
                                raise MemoryError()
                            s.preds[q] = head
                    else:
                        if states_reserve(&s) < 0:
                            raise MemoryError()
                        q = s.count
                        s.count += 1
                        s.node[q], s.context[q], s.prob[q], s.gprob[q], s.prev[q], s.preds[q] = \
                            n, ctx, prob, s.gprob[k] + g, k, -1
                        if nbest:
                            head = preds_push(&p, -1, k, prob - s.prob[k], g)
                            if head < 0:
                                raise MemoryError()
                            s.preds[q] = head
                        c.stamp[ctx], c.state[ctx] = n, q
            node_count[n] = s.count - node_first[n]
            if n == end:
                break
        states = (_ints(s.node, s.count), _floats(s.prob, s.count), _floats(s.gprob, s.count),
                  _ints(s.prev, s.count))
        ends = (int(node_first[end]), int(node_count[end]))
        preds = (_ints(s.preds, s.count), _ints(p.state, p.count), _ints(p.next, p.count),
                 _floats(p.diff, p.count), _floats(p.gprob, p.count)) if nbest else None
        return states, ends, preds
    finally:
        contexts_free(&c)
        free(s.node)
        free(s.context)
        free(s.prev)
        free(s.preds)
        free(s.prob)
        free(s.gprob)
        free(p.state)
        free(p.next)
        free(p.diff)
        free(p.gprob)


cdef object _ints(const int *values, int count):
    out = np.empty(count, dtype=np.int32)
    cdef int[::1] view = out
    if count:
        memcpy(&view[0], values, count * sizeof(int))
    return out


cdef object _floats(const float *values, int count):
    out = np.empty(count, dtype=np.float32)
    cdef float[::1] view = out
    if count:
        memcpy(&view[0], values, count * sizeof(float))
    return out
