# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""An expanded lattice as SRILM's Lattice::writeHTK writes it (nplmtk/lattice/expand.py's
written_form and write_expanded) from the compiled expansion's arrays: which nodes are
written as nodes, the links written, and their SLF text with the numbers formatted as
Python's "%.7g" formats them (format_g7.h for the float32 scores, printf for the times).
The arrays come from lattice_kernels.expand_contexts and lattice_graph.graph_arrays;
their indices are checked there (nplmtk/lattice/search.py)."""
import numpy as np
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_GET_SIZE, PyBytes_FromStringAndSize
from libc.math cimport INFINITY, isnan
from libc.stdio cimport snprintf
from libc.stdlib cimport calloc, free, malloc, realloc
from libc.string cimport memcpy

cdef extern from "format_g7.h":
    int format_g7(char *out, float value) noexcept nogil

cdef void reach(int first, const int *begin, const int *target, unsigned char *mark, unsigned char bit,
                int *stack) noexcept nogil:
    """Mark with `bit` the nodes reached from `first` along the edges (CSR)."""
    cdef int top = 1, n, e
    stack[0] = first
    mark[first] |= bit
    while top:
        top -= 1
        n = stack[top]
        for e in range(begin[n], begin[n + 1]):
            if not mark[target[e]] & bit:
                mark[target[e]] |= bit
                stack[top] = target[e]
                top += 1


def written_arrays(const int[::1] sources, const int[::1] targets, const float[::1] languages,
                   const unsigned char[::1] null, int start, int end):
    """expand.written_form of an expansion (its links; `null`: the new nodes without a
    word) as arrays: the nodes written as nodes (ascending), and the written links' from,
    to (their numbers among those nodes), language and carrier (the new node whose word
    and scores the link carries); None if no path is left."""
    cdef int nodes = null.shape[0], links = sources.shape[0]
    cdef int room = max(nodes, links, 1)
    # the scratch arrays in one block (numpy arrays cost about 1 us each, a tenth of a small lattice's call)
    cdef int *block = <int *> calloc(2 * (nodes + 1) + 2 * room + room + 5 * max(nodes, 1), sizeof(int))
    cdef unsigned char *flags = <unsigned char *> calloc(2 * room, 1)
    if not (block and flags):
        free(block)
        free(flags)
        raise MemoryError()
    try:
        return _written_arrays(sources, targets, languages, null, start, end, nodes, links, block, flags, room)
    finally:
        free(block)
        free(flags)


cdef object _written_arrays(const int[::1] sources, const int[::1] targets, const float[::1] languages,
                            const unsigned char[::1] null, int start, int end, int nodes, int links, int *block,
                            unsigned char *flags, int room):
    """written_arrays' work in the zeroed scratch `block` (ints) and `flags` (bytes)."""
    cdef int i, j, n, m, count, after, before, value
    cdef float language
    cdef int *fwd = block
    cdef int *back = fwd + nodes + 1
    cdef int *fwd_to = back + nodes + 1
    cdef int *back_to = fwd_to + room
    cdef int *stack = back_to + room
    cdef int *state = stack + room  # as a link: -1 not known, 0 no, 1 yes
    cdef int *one_in = state + max(nodes, 1)
    cdef int *one_out = one_in + max(nodes, 1)
    cdef int *degree_in = one_out + max(nodes, 1)
    cdef int *degree_out = degree_in + max(nodes, 1)
    cdef unsigned char *alive = flags
    cdef unsigned char *mark = flags + room
    for n in range(nodes):
        state[n] = one_in[n] = one_out[n] = -1
    for i in range(links):  # links of probability 0 left out
        alive[i] = languages[i] > -INFINITY
        if alive[i]:
            fwd[sources[i] + 1] += 1
            back[targets[i] + 1] += 1
    for n in range(nodes):
        fwd[n + 1] += fwd[n]
        back[n + 1] += back[n]
    for i in range(links):
        if alive[i]:
            fwd_to[fwd[sources[i]]] = targets[i]
            fwd[sources[i]] += 1
            back_to[back[targets[i]]] = sources[i]
            back[targets[i]] += 1
    for n in range(nodes, 0, -1):
        fwd[n], back[n] = fwd[n - 1], back[n - 1]
    fwd[0] = back[0] = 0
    reach(start, fwd, fwd_to, mark, 1, stack)
    reach(end, back, back_to, mark, 2, stack)
    if mark[end] != 3:
        return None
    for i in range(links):  # the links between kept nodes: each node's one link in and out, if one
        alive[i] = alive[i] and mark[sources[i]] == 3 and mark[targets[i]] == 3
        if alive[i]:
            degree_out[sources[i]] += 1
            degree_in[targets[i]] += 1
            if degree_out[sources[i]] == 1:
                one_out[sources[i]] = i
            if degree_in[targets[i]] == 1:
                one_in[targets[i]] = i
    for n in range(nodes):  # allowAsTrans along each chain, resolved from its far end back
        if mark[n] != 3 or state[n] >= 0:
            continue
        count, m = 0, n
        while state[m] < 0:
            value = 0
            if degree_in[m] == 1 and degree_out[m] == 1:
                before, after = sources[one_in[m]], targets[one_out[m]]
                if (null[after] or after == end) and (null[before] or before == start):
                    state[m] = 0
                    stack[count] = m
                    count += 1
                    m = after
                    continue
            state[m] = 0
            break
        value = state[m]
        for j in range(count - 1, -1, -1):
            value = 1 - value
            state[stack[j]] = value
    count = 0
    for n in range(nodes):  # the kept nodes' numbers
        stack[n] = -1
        if mark[n] == 3 and state[n] == 0:
            stack[n] = count
            count += 1
    kept_array = np.empty(count, dtype=np.int32)
    cdef int[::1] kept = kept_array
    for n in range(nodes):
        if stack[n] >= 0:
            kept[stack[n]] = n
    count = 0
    for i in range(links):
        if alive[i] and state[sources[i]] != 1:
            count += 1
    from_array, to_array = np.empty(count, dtype=np.int32), np.empty(count, dtype=np.int32)
    language_array, carrier_array = np.empty(count, dtype=np.float32), np.empty(count, dtype=np.int32)
    cdef int[::1] from_ = from_array, to = to_array, carrier = carrier_array
    cdef float[::1] written_language = language_array
    count = 0
    for i in range(links):
        if not alive[i] or state[sources[i]] == 1:
            continue
        n, language = targets[i], languages[i]
        if state[n] == 1:
            language = language + languages[one_out[n]]
            n = targets[one_out[n]]
        from_[count], to[count], written_language[count], carrier[count] = stack[sources[i]], stack[n], language, \
            targets[i]
        count += 1
    return kept_array, from_array, to_array, language_array, carrier_array


def written_form(const int[::1] sources, const int[::1] targets, const float[::1] languages,
                 const unsigned char[::1] null, int start, int end):
    """written_arrays as expand.written_form gives it: the kept nodes (a list), their
    numbers (a dict) and the written links (from, to, language, carrier) as tuples."""
    found = written_arrays(sources, targets, languages, null, start, end)
    if found is None:
        return None
    kept, from_, to, language, carrier = found
    kept = kept.tolist()
    return kept, {n: k for k, n in enumerate(kept)}, list(zip(from_.tolist(), to.tolist(), language.tolist(),
                                                                carrier.tolist()))


cdef struct Text:
    char *data
    Py_ssize_t size, capacity


cdef int text_room(Text *t, Py_ssize_t more) noexcept nogil:
    cdef char *grown
    if t.size + more <= t.capacity:
        return 0
    t.capacity = max(2 * t.capacity, t.size + more + 4096)
    grown = <char *> realloc(t.data, t.capacity)
    if grown == NULL:
        return -1
    t.data = grown
    return 0


cdef inline void text_add(Text *t, const char *s, Py_ssize_t n) noexcept nogil:
    memcpy(t.data + t.size, s, n)
    t.size += n


cdef inline void text_int(Text *t, const char *key, long long value) noexcept nogil:
    """key then value in decimal, as printf's %lld (without its cost: most of a line's)."""
    cdef char digits[24]
    cdef int n = 0, k = 0
    cdef unsigned long long v = <unsigned long long> value
    while key[k]:
        t.data[t.size] = key[k]
        t.size += 1
        k += 1
    if value < 0:
        t.data[t.size] = 45  # '-'
        t.size += 1
        v = 0 - v
    while True:
        digits[n] = <char> (48 + v % 10)
        n += 1
        v //= 10
        if v == 0:
            break
    while n:
        n -= 1
        t.data[t.size] = digits[n]
        t.size += 1


cdef inline void text_g7(Text *t, const char *key, float value) noexcept nogil:
    cdef int n = 0
    while key[n]:
        t.data[t.size] = key[n]
        t.size += 1
        n += 1
    t.size += format_g7(t.data + t.size, value)


SCORE_NAMES = (b"\ta=", b"\tn=", b"\tl=", b"\tr=", b"\tds=") + tuple(b"\tx%d=" % i for i in range(1, 10))


def expanded_slf(kept_array, from_array, to_array, language_array, carrier_array, const int[::1] node_of,
                 const double[::1] time, list labels, const long long[::1] end_code, const long long[::1] link_code,
                 const float[:, ::1] scores, int lattice_nodes):
    """write_expanded's node and link lines (bytes) of written_arrays' lattice: graph node
    g of new node n = node_of[n] has the time time[g] (NaN: none) and the word labels[g]
    (bytes, "!NULL" for none); a link node g = lattice_nodes + j the scores scores[j] in
    the order of its end node's keys (end_code[j], htk_reader's code), then its own
    (link_code[j]), "l" left out."""
    cdef const int[::1] kept = kept_array, from_ = from_array, to = to_array, carrier = carrier_array
    cdef const float[::1] language = language_array
    cdef Text t
    cdef int i, g, j, key, pass_, step
    cdef long long code, done
    cdef char number[64]
    cdef bytes label
    cdef const char *names[14]
    for i in range(14):
        names[i] = SCORE_NAMES[i]
    t.data, t.size, t.capacity = NULL, 0, 0
    try:
        for i in range(kept.shape[0]):
            g = node_of[kept[i]]
            if text_room(&t, 96) < 0:
                raise MemoryError()
            text_int(&t, b"I=", i)
            if not isnan(time[g]):
                t.size += snprintf(t.data + t.size, 48, "\tt=%.7g", time[g])
            text_add(&t, b"\n", 1)
        for i in range(from_.shape[0]):
            g = node_of[carrier[i]]
            label = labels[g]
            if text_room(&t, 120 + PyBytes_GET_SIZE(label) + 14 * 40) < 0:
                raise MemoryError()
            text_int(&t, b"J=", i)
            text_int(&t, b"\tS=", from_[i])
            text_int(&t, b"\tE=", to[i])
            text_add(&t, b"\tW=", 3)
            text_add(&t, PyBytes_AS_STRING(label), PyBytes_GET_SIZE(label))
            j = g - lattice_nodes
            if j >= 0:
                done = 0  # the keys written, a bit each
                for pass_ in range(2):
                    code = end_code[j] if pass_ == 0 else link_code[j]
                    while code:
                        key = (code & 15) - 1
                        code >>= 4
                        if key != 2 and not (done >> key) & 1:
                            text_g7(&t, names[key], scores[j, key])
                        done |= 1LL << key
            text_g7(&t, b"\tl=", language[i])
            text_add(&t, b"\n", 1)
        return PyBytes_FromStringAndSize(t.data, t.size)
    finally:
        free(t.data)
