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
from lattice_tables cimport Floats, Ints, Numbers, floats_push, ints_push, numbers_find, numbers_init


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


cdef int trie_rows(BackoffTables tables, const int *used, int length, long long *rows) noexcept:
    """BackoffContexts._trie: rows[i - 1] the row of the i-gram used[i-1] .. used[0] (a
    context of the model), for i = 1, 2, ... while there is one; their count."""
    cdef int i, m
    cdef long long row
    for i in range(1, length + 1):
        row = -1
        for m in range(i):
            row = tables.find(m, row, used[i - 1 - m])
        if row < 0 or not tables.node[i - 1][row]:
            return i - 1
        rows[i - 1] = row
    return length


cdef int follow_words(const int *words, const int[::1] out_first, const int[::1] out_target, int node, int *stamp,
                      int mark, Ints *stack, Ints *found) noexcept:
    """expand._follow_words: the words after `node` past null nodes, pushed on `found`
    (each once); -1: no memory."""
    cdef int e, n, k, start = found.count
    stack.count = 0
    for e in range(out_first[node], out_first[node + 1]):
        if ints_push(stack, out_target[e]) < 0:
            return -1
    while stack.count:
        stack.count -= 1
        n = stack.data[stack.count]
        if stamp[n] == mark:
            continue
        stamp[n] = mark
        if words[n] < 0:
            for e in range(out_first[n], out_first[n + 1]):
                if ints_push(stack, out_target[e]) < 0:
                    return -1
        else:
            k = start
            while k < found.count and found.data[k] != words[n]:
                k += 1
            if k == found.count and ints_push(found, words[n]) < 0:
                return -1
    return 0


def expand_contexts(BackoffTables tables, const int[::1] words, const int[::1] out_first, const int[::1] out_target,
                    const int[::1] visit, int start, int end, int bos, int eos):
    """expand.expand_to_lm's walk: the new nodes (each its graph node) and the links
    (from, to, log10 language score), in expand_to_lm's order, and whether each new node
    is a null node (uint8). `visit`: the graph's nodes after the start in topological
    order; the transitions out of each node CSR in `out_first`, `out_target`, in
    expand_to_lm's order."""
    cdef int nodes = words.shape[0], limit = tables.order - 1, i, j, e, n, n2, w, k, ul, length, trie, here, number
    cdef int ctx, ctx2, f
    cdef float language, total
    cdef Contexts c
    cdef Numbers h
    cdef Ints node_of, context_of, next_of, from_, to, stack, follows
    cdef Floats languages
    cdef unsigned char[::1] null
    cdef long long tokens[MAX_LEVELS]
    cdef long long chain[MAX_LEVELS * MAX_LEVELS]
    cdef long long rows[MAX_LEVELS]
    cdef int used[MAX_LEVELS + 1]
    cdef int key[MAX_LEVELS]
    cdef int empty[MAX_LEVELS]
    cdef int *head = <int *> malloc(nodes * sizeof(int))
    cdef int *tail = <int *> malloc(nodes * sizeof(int))
    cdef int *stamp = <int *> malloc(nodes * sizeof(int))
    cdef int *follow_first = <int *> malloc(nodes * sizeof(int))
    cdef int *follow_count = <int *> malloc(nodes * sizeof(int))
    memset(&c, 0, sizeof(Contexts))
    memset(&node_of, 0, sizeof(Ints))
    memset(&context_of, 0, sizeof(Ints))
    memset(&next_of, 0, sizeof(Ints))
    memset(&from_, 0, sizeof(Ints))
    memset(&to, 0, sizeof(Ints))
    memset(&languages, 0, sizeof(Floats))
    memset(&stack, 0, sizeof(Ints))
    memset(&follows, 0, sizeof(Ints))
    memset(&h, 0, sizeof(Numbers))
    try:
        if not (head and tail and stamp and follow_first and follow_count) or numbers_init(&h) < 0 \
                or contexts_init(&c, limit) < 0:
            raise MemoryError()
        for n in range(nodes):
            head[n], tail[n], stamp[n], follow_first[n] = -1, -1, -1, -1
        for j in range(limit):
            key[j] = empty[j] = -2
        if limit:
            key[0] = bos
        for j in range(2):  # node 0: (start, <s>); node 1: (end, nothing)
            n = start if j == 0 else end
            ctx = context_id(&c, &key[0] if j == 0 else &empty[0])
            if ctx < 0 or numbers_find(&h, (<long long> n << 32) | ctx, j) == -1:
                raise MemoryError()
            if ints_push(&node_of, n) < 0 or ints_push(&context_of, ctx) < 0 or ints_push(&next_of, -1) < 0:
                raise MemoryError()
        head[start] = tail[start] = 0
        for i in range(-1, visit.shape[0]):  # the start, then the nodes after it
            n = start if i < 0 else visit[i]
            if n == end:
                continue
            here = head[n]
            while here >= 0:
                ctx = context_of.data[here]
                for e in range(out_first[n], out_first[n + 1]):
                    n2 = out_target[e]
                    w = words[n2]
                    if w < 0:
                        ul, language = c.length[ctx], 0
                        for j in range(ul):
                            used[j] = c.words[ctx * limit + j]
                    else:
                        language = word_logprob(tables, &c.words[ctx * limit], c.length[ctx], w, tokens, chain)
                        ul = c.length[ctx] + 1
                        used[0] = w
                        for j in range(1, ul):
                            used[j] = c.words[ctx * limit + j - 1]
                    if follow_first[n2] < 0:
                        follow_first[n2] = follows.count
                        if follow_words(&words[0], out_first, out_target, n2, stamp, -2 - n2, &stack, &follows) < 0:
                            raise MemoryError()
                        follow_count[n2] = follows.count - follow_first[n2]
                    trie = trie_rows(tables, used, min(ul, limit), rows) if ul and limit else 0
                    length = 0
                    for f in range(follow_first[n2], follow_first[n2] + follow_count[n2]):
                        if length == trie:
                            break
                        j = trie  # Ngram::contextID: the longest with an n-gram (longest first: fewer finds)
                        while j > length and tables.find(j, rows[j - 1], follows.data[f]) < 0:
                            j -= 1
                        length = j
                    if ul == 0 or used[0] != eos:
                        total = 0
                        for j in range(length, trie):
                            total = total + tables.bow[j][rows[j]]
                        language = language + total
                    for j in range(limit):
                        key[j] = used[j] if j < length else -2
                    ctx2 = context_id(&c, key)
                    if ctx2 < 0:
                        raise MemoryError()
                    number = numbers_find(&h, (<long long> n2 << 32) | ctx2, node_of.count)
                    if number == -1:
                        raise MemoryError()
                    if number < -1:
                        number = -2 - number
                        if ints_push(&node_of, n2) < 0 or ints_push(&context_of, ctx2) < 0 \
                                or ints_push(&next_of, -1) < 0:
                            raise MemoryError()
                        if tail[n2] >= 0:
                            next_of.data[tail[n2]] = number
                        else:
                            head[n2] = number
                        tail[n2] = number
                    if ints_push(&from_, here) < 0 or ints_push(&to, number) < 0 \
                            or floats_push(&languages, language) < 0:
                        raise MemoryError()
                here = next_of.data[here]
        null_array = np.empty(node_of.count, dtype=np.uint8)
        null = null_array
        for i in range(node_of.count):
            null[i] = words[node_of.data[i]] < 0
        return (_ints(node_of.data, node_of.count), _ints(from_.data, from_.count), _ints(to.data, to.count),
                _floats(languages.data, languages.count), null_array)
    finally:
        contexts_free(&c)
        free(head)
        free(tail)
        free(stamp)
        free(follow_first)
        free(follow_count)
        free(node_of.data)
        free(context_of.data)
        free(next_of.data)
        free(from_.data)
        free(to.data)
        free(languages.data)
        free(stack.data)
        free(follows.data)
        free(h.keys)
        free(h.values)


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
