# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""An SLF lattice as htk_reader scanned it, made into SRILM's graph without a Python
object per node or link: the structural checks and the topological order of
nplmtk/lattice/htk.py's `_checked` (`lattice_order`), then decode.srilm_graph's nodes,
weights and transitions as arrays (`graph_arrays`), in its float32 arithmetic.

lattice_order checks what the kernels later trust (node and link numbers each defined
once, every link's nodes defined, the start and end nodes, no cycle, the end reached) and
says only whether they hold: where one does not, the caller takes htk.py's Python checks,
which name the problem, file and line."""
import numpy as np
from cpython.bytes cimport PyBytes_FromStringAndSize
from libc.math cimport INFINITY, NAN, isnan, log10
from libc.stdlib cimport calloc, free, malloc
from libc.string cimport memcmp, memset
from lattice_tables cimport Numbers, numbers_find, numbers_init

cdef enum:
    SCORES = 14   # a n l r ds x1 .. x9: htk_reader's columns
    WEIGHED = 5   # a n l r ds: the scores the weight adds


cdef int number_index(Numbers *h, const long long[:, ::1] ints, int rows) noexcept nogil:
    """Enter the numbers ints[:, 0] (each its row); -1: one repeats, -2: no memory."""
    cdef int i, found
    for i in range(rows):
        if ints[i, 0] < 0:
            return -1
        found = numbers_find(h, ints[i, 0], i)
        if found == -1:
            return -2
        if found >= 0:
            return -1
    return 0


def lattice_order(const long long[:, ::1] node_ints, const long long[:, ::1] link_ints, long long start_number,
                  long long end_number):
    """(order, start, end, link_start, link_end), node rows: the nodes in htk._topological's
    order, the start and end nodes (start_number / end_number, -1: the one node without
    links in / out), each link's nodes; None where htk._checked would refuse the lattice."""
    cdef int nodes = node_ints.shape[0], links = link_ints.shape[0], i, j, n, e, top = 0, count = 0, found
    cdef int start = -1, end = -1
    cdef Numbers by_node, by_link
    memset(&by_node, 0, sizeof(Numbers))
    memset(&by_link, 0, sizeof(Numbers))
    order_array = np.empty(nodes, dtype=np.int32)
    link_start_array, link_end_array = np.empty(links, dtype=np.int32), np.empty(links, dtype=np.int32)
    cdef int[::1] order = order_array, link_start = link_start_array, link_end = link_end_array
    # the scratch arrays in one zeroed block (a numpy array costs about 1 us, much of a small lattice's call)
    cdef int *out_first = <int *> calloc(3 * nodes + links + 1, sizeof(int))
    cdef int *out_link = out_first + nodes + 1
    cdef int *remaining = out_link + links
    cdef int *stack = remaining + nodes
    cdef unsigned char *reached = <unsigned char *> calloc(nodes + 1, 1)
    try:
        if not (out_first and reached):
            raise MemoryError()
        if nodes == 0 or numbers_init(&by_node) < 0 or numbers_init(&by_link) < 0:
            return None
        found = number_index(&by_node, node_ints, nodes)
        if found == -2:
            raise MemoryError()
        if found < 0 or number_index(&by_link, link_ints, links) != 0:
            return None
        for j in range(links):
            for e in range(2):
                if link_ints[j, 2 + e] < 0:
                    return None
                n = numbers_find(&by_node, link_ints[j, 2 + e], nodes)
                if n < 0:
                    return None
                if e == 0:
                    link_start[j] = n
                else:
                    link_end[j] = n
            out_first[link_start[j] + 1] += 1
            remaining[link_end[j]] += 1
        for n in range(nodes):
            out_first[n + 1] += out_first[n]
        for n in range(nodes):  # each node's links out, in the file's order
            stack[n] = out_first[n]
        for j in range(links):
            out_link[stack[link_start[j]]] = j
            stack[link_start[j]] += 1
        for e in range(2):  # the start and end nodes: given, else the one node without links in (out)
            i = -1
            if (start_number if e == 0 else end_number) >= 0:
                i = numbers_find(&by_node, start_number if e == 0 else end_number, nodes)
                if i < 0:
                    return None
            else:
                for n in range(nodes):
                    if (remaining[n] if e == 0 else out_first[n + 1] - out_first[n]) == 0:
                        if i >= 0:
                            return None
                        i = n
                if i < 0:
                    return None
            if e == 0:
                start = i
            else:
                end = i
        for n in range(nodes - 1, -1, -1):  # Kahn's, as htk._topological
            if remaining[n] == 0:
                stack[top] = n
                top += 1
        while top:
            top -= 1
            n = stack[top]
            order[count] = n
            count += 1
            for e in range(out_first[n + 1] - 1, out_first[n] - 1, -1):
                j = link_end[out_link[e]]
                remaining[j] -= 1
                if remaining[j] == 0:
                    stack[top] = j
                    top += 1
        if count < nodes:
            return None
        reached[start] = 1
        for i in range(nodes):
            n = order[i]
            if reached[n]:
                for e in range(out_first[n], out_first[n + 1]):
                    reached[link_end[out_link[e]]] = 1
        if not reached[end]:
            return None
        return order_array, start, end, link_start_array, link_end_array
    finally:
        free(out_first)
        free(reached)
        free(by_node.keys)
        free(by_node.values)
        free(by_link.keys)
        free(by_link.values)


cdef inline bint no_word(const unsigned char *p, long long n) noexcept nogil:
    """Whether the word p[:n] is none of a link's: <s>, </s> or !NULL."""
    return ((n == 3 and memcmp(p, b"<s>", 3) == 0) or (n == 4 and memcmp(p, b"</s>", 4) == 0)
            or (n == 5 and memcmp(p, b"!NULL", 5) == 0))


def link_words(const unsigned char[::1] data, const long long[:, ::1] node_ints, const long long[:, ::1] link_ints,
               const int[::1] link_end, dict known, new_word):
    """Each link node's word as decode.srilm_graph takes it (the link's W=, else its end
    node's; <s>, </s>, !NULL: none) and its id: (words, a list, None for none; ids, int32,
    -1 for none). A word's bytes are looked up in `known` (bytes -> (word, id)), else
    given to `new_word(bytes)`, which returns (word, id)."""
    cdef Py_ssize_t links = link_ints.shape[0], j
    cdef long long b, e
    cdef const unsigned char *p = &data[0] if data.shape[0] else NULL
    ids_array = np.empty(links, dtype=np.int32)
    cdef int[::1] ids = ids_array
    words = [None] * links
    for j in range(links):
        ids[j] = -1
        b, e = link_ints[j, 4], link_ints[j, 5]
        if b < 0 or no_word(p + b, e - b):
            b, e = node_ints[link_end[j], 2], node_ints[link_end[j], 3]
            if b < 0 or no_word(p + b, e - b):
                continue
        raw = PyBytes_FromStringAndSize(<const char *> (p + b), e - b)
        found = known.get(raw)
        if found is None:
            found = new_word(raw)
        words[j], ids[j] = found
    return words, ids_array


cdef inline float score_of(double value, double factor, bint probabilities) noexcept nogil:
    """decode._scorer: a score read, in log10, as a float32."""
    if probabilities:
        return -INFINITY if value == 0 else <float> log10(value)
    return <float> (<double> <float> value * factor)


def graph_arrays(const int[::1] order, int start, int end, const long long[:, ::1] node_ints,
                 const double[:, ::1] node_reals, const long long[:, ::1] link_ints, const double[:, ::1] link_reals,
                 const int[::1] link_start, const int[::1] link_end, const int[::1] link_word, int bos, int eos,
                 double factor, bint probabilities, const double[::1] scales, double wdpenalty, float lmscale):
    """decode.srilm_graph and search.GraphArrays at once: graph node k < N is the node
    order[k], node N + j the link j (`link_word`: its word id, -1 none). Returns (words,
    old, language, first, source, weight, visit, acoustic, scores) or the link whose
    weight overflows (an int). `scales`: acscale ngscale lmscale prscale duscale; lmscale
    > 0 gives `old`, else zeros. `acoustic`, `language`: NaN for none; `scores`: each
    link node's scores (its end node's, then its own over them; NaN absent), log10."""
    cdef int nodes = order.shape[0], links = link_ints.shape[0], total = nodes + links, i, j, k
    words_array = np.empty(total, dtype=np.int32)  # filled below: np.full is a Python function, slow
    old_array = np.zeros(total, dtype=np.float32)
    language_array = np.zeros(total, dtype=np.float32)
    acoustic_array = np.empty(total, dtype=np.float32)
    scores_array = np.empty((links, SCORES), dtype=np.float32)
    cdef int[::1] words = words_array
    cdef float[::1] old = old_array, language = language_array, acoustic = acoustic_array
    cdef float[:, ::1] scores = scores_array
    for k in range(total):
        words[k], acoustic[k] = -1, NAN
    for j in range(links):
        for i in range(SCORES):
            scores[j, i] = NAN
    # scratch: each node row's position in `order`, each link's weight
    cdef int *position = <int *> malloc((nodes + 1) * sizeof(int))
    cdef float *weights = <float *> calloc(links + 1, sizeof(float))
    try:
        if not (position and weights):
            raise MemoryError()
        return _graph_arrays(order, start, end, node_reals, link_reals, link_start, link_end, link_word, bos, eos,
                             factor, probabilities, scales, wdpenalty, lmscale, nodes, links, position, weights,
                             words_array, old_array, language_array, acoustic_array, scores_array)
    finally:
        free(position)
        free(weights)


cdef object _graph_arrays(const int[::1] order, int start, int end, const double[:, ::1] node_reals,
                          const double[:, ::1] link_reals, const int[::1] link_start, const int[::1] link_end,
                          const int[::1] link_word, int bos, int eos, double factor, bint probabilities,
                          const double[::1] scales, double wdpenalty, float lmscale, int nodes, int links,
                          int *position, float *weights, words_array, old_array, language_array, acoustic_array,
                          scores_array):
    """graph_arrays' work, its outputs made and its scratch (`position`, `weights`) given."""
    cdef int i, j, k, n, e
    cdef float s
    cdef bint infinite
    cdef int[::1] words = words_array
    cdef float[::1] old = old_array, language = language_array, acoustic = acoustic_array
    cdef float[:, ::1] scores = scores_array
    for k in range(nodes):
        position[order[k]] = k
    words[position[start]], words[position[end]] = bos, eos
    for e in range(2):
        n = start if e == 0 else end
        if not isnan(node_reals[n, 1]):
            acoustic[position[n]] = score_of(node_reals[n, 1], factor, probabilities)
    for j in range(links):  # each link node's scores, its weight and word
        k = nodes + j
        words[k] = link_word[j]
        n = link_end[j]
        for i in range(SCORES):
            if not isnan(link_reals[j, i]):
                scores[j, i] = score_of(link_reals[j, i], factor, probabilities)
            elif not isnan(node_reals[n, 1 + i]):
                scores[j, i] = score_of(node_reals[n, 1 + i], factor, probabilities)
        s, infinite = 0, False
        for i in range(WEIGHED):
            if scales[i] != 0 and not isnan(scores[j, i]):
                s = <float> (<double> s + scales[i] * <double> scores[j, i])
            infinite = infinite or scores[j, i] == -INFINITY
        if link_word[j] >= 0:
            s = <float> (<double> s + wdpenalty)
        for i in range(WEIGHED, SCORES):
            infinite = infinite or scores[j, i] == -INFINITY
        if not -INFINITY < s < INFINITY and not infinite:
            return j
        weights[j] = s
        acoustic[k] = scores[j, 0]
        if not isnan(scores[j, 2]):
            language[k] = scores[j, 2]
            if lmscale > 0:
                old[k] = <float> (<double> scores[j, 2] * <double> lmscale)
    return _transitions(order, start, link_start, link_end, nodes, links, position, words_array, old_array,
                        language_array, acoustic_array, scores_array, weights)


cdef object _transitions(const int[::1] order, int start, const int[::1] link_start, const int[::1] link_end,
                         int nodes, int links, const int *position, words_array, old_array, language_array,
                         acoustic_array, scores_array, const float *link_weight):
    """graph_arrays' transitions into each node (a link node's from its start node, with
    its weight; a lattice node's from its links' nodes, in the file's order) and the
    visiting order (srilm_graph's: each lattice node, then the nodes of its links out in
    the file's order; from the start on)."""
    cdef int total = nodes + links
    cdef int bounds[2]
    first_array = np.zeros(total + 1, dtype=np.int32)
    source_array = np.empty(2 * links, dtype=np.int32)
    weight_array = np.zeros(2 * links, dtype=np.float32)
    visit_array = np.empty(total, dtype=np.int32)
    cdef int[::1] first = first_array, source = source_array, visit = visit_array
    cdef float[::1] weights = weight_array
    cdef int *out_first = <int *> calloc(2 * nodes + links + 2, sizeof(int))  # scratch, zeroed
    cdef int *fill = out_first + nodes + 1
    cdef int *out_link = fill + nodes + 1
    if not out_first:
        raise MemoryError()
    try:
        _transition_loops(order, start, link_start, link_end, nodes, links, position, link_weight, first, source,
                          weights, visit, out_first, fill, out_link, bounds)
    finally:
        free(out_first)
    return (words_array, old_array, language_array, first_array, source_array, weight_array,
            visit_array[bounds[0]:bounds[1]], acoustic_array, scores_array)


cdef void _transition_loops(const int[::1] order, int start, const int[::1] link_start, const int[::1] link_end,
                            int nodes, int links, const int *position, const float *link_weight, int[::1] first,
                            int[::1] source, float[::1] weights, int[::1] visit, int *out_first, int *fill,
                            int *out_link, int *bounds) noexcept:
    """_transitions' loops in its scratch; `bounds`: the visiting order's, from the start."""
    cdef int total = nodes + links, j, k, n, v = 0, e, from_start = 0
    for j in range(links):
        first[position[link_end[j]] + 1] += 1
        first[nodes + j + 1] = 1
        out_first[link_start[j] + 1] += 1
    for k in range(total):
        first[k + 1] += first[k]
    for n in range(nodes):
        out_first[n + 1] += out_first[n]
        fill[n] = out_first[n]
    for j in range(links):
        out_link[fill[link_start[j]]] = j
        fill[link_start[j]] += 1
    for k in range(nodes):
        fill[k] = first[k]
    for j in range(links):
        k = position[link_end[j]]
        source[fill[k]] = nodes + j
        fill[k] += 1
        source[first[nodes + j]], weights[first[nodes + j]] = position[link_start[j]], link_weight[j]
    for k in range(nodes):
        n = order[k]
        if n == start:
            from_start = v + 1
        visit[v] = k
        v += 1
        for e in range(out_first[n], out_first[n + 1]):
            visit[v] = nodes + out_link[e]
            v += 1
    bounds[0], bounds[1] = from_start, v


def outgoing_transitions(const int[::1] first, const int[::1] source):
    """The transitions out of each node (CSR: first, target) of the transitions into each
    (`first`, `source`), each node's listed by target, then as the target lists them (a
    stable counting sort by source). Every source must be a node: 0 <= source < nodes."""
    cdef int nodes = first.shape[0] - 1, count = source.shape[0], n, k, s
    out_first_array = np.zeros(nodes + 1, dtype=np.int32)
    target_array = np.empty(count, dtype=np.int32)
    cdef int[::1] out_first = out_first_array, target = target_array
    cdef int *fill = <int *> malloc(max(nodes, 1) * sizeof(int))
    if not fill:
        raise MemoryError()
    for k in range(count):
        out_first[source[k] + 1] += 1
    for n in range(nodes):
        out_first[n + 1] += out_first[n]
        fill[n] = out_first[n]
    for n in range(nodes):
        for k in range(first[n], first[n + 1]):
            s = source[k]
            target[fill[s]] = n
            fill[s] += 1
    free(fill)
    return out_first_array, target_array
