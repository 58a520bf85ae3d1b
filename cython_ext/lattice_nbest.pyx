# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""The N-best search of nplmtk/lattice/decode.py's `nbest_paths` (SRILM's A*,
LatticeDecode.cc's decodeNBest) over the states that lattice_kernels.viterbi_states made:
from the end node's states back along every merged predecessor, best first, each word
string (from the end) kept once per state unless it comes back better. The queue is
Python's heapq step for step (the same sift-down and sift-up over the same keys: -score,
-depth, the push's number), so ties come out in the same order. A word string is an id
(a trie of (string, word) numbers); the states' arrays are checked by the caller
(nplmtk/lattice/search.py)."""
import numpy as np
from libc.math cimport isnan
from libc.stdlib cimport free
from libc.string cimport memcpy, memset
from lattice_tables cimport Floats, Ints, Numbers, floats_push, ints_push, numbers_find, numbers_init

cdef double NO_THRESHOLD = -1e30  # decode.NO_THRESHOLD


cdef struct Entries:
    # a push of the queue: its state, the entry popped before it (the path's rest, -1:
    # none), its word string, depth (negative), -score and the score after the state
    Ints state, after, feature, depth
    Floats key, backward


cdef inline bint before(Entries *e, int a, int b) noexcept nogil:
    """Python's tuple order of (-score, -depth, number): `a` < `b`."""
    if not e.key.data[a] == e.key.data[b]:
        return e.key.data[a] < e.key.data[b]
    if e.depth.data[a] != e.depth.data[b]:
        return e.depth.data[a] < e.depth.data[b]
    return a < b


cdef void sift_down(Entries *e, int *heap, int start, int pos) noexcept nogil:
    """heapq._siftdown."""
    cdef int item = heap[pos], parent
    while pos > start:
        parent = (pos - 1) >> 1
        if before(e, item, heap[parent]):
            heap[pos] = heap[parent]
            pos = parent
            continue
        break
    heap[pos] = item


cdef void sift_up(Entries *e, int *heap, int end, int pos) noexcept nogil:
    """heapq._siftup."""
    cdef int start = pos, item = heap[pos], child = 2 * pos + 1
    while child < end:
        if child + 1 < end and not before(e, heap[child], heap[child + 1]):
            child += 1
        heap[pos] = heap[child]
        pos = child
        child = 2 * pos + 1
    heap[pos] = item
    sift_down(e, heap, start, pos)


cdef int push(Entries *e, Ints *heap, int state, int after, int feature, int depth, float key,
              float backward) noexcept nogil:
    """heapq.heappush of a new entry; -1: no memory."""
    if ints_push(&e.state, state) < 0 or ints_push(&e.after, after) < 0 or ints_push(&e.feature, feature) < 0 \
            or ints_push(&e.depth, depth) < 0 or floats_push(&e.key, key) < 0 \
            or floats_push(&e.backward, backward) < 0 or ints_push(heap, e.state.count - 1) < 0:
        return -1
    sift_down(e, heap.data, 0, heap.count - 1)
    return 0


cdef int pop(Entries *e, Ints *heap) noexcept nogil:
    """heapq.heappop."""
    cdef int last = heap.data[heap.count - 1], first
    heap.count -= 1
    if heap.count == 0:
        return last
    first = heap.data[0]
    heap.data[0] = last
    sift_up(e, heap.data, heap.count, 0)
    return first


def nbest_paths(const float[::1] prob, const int[::1] prev, const int[::1] preds, const int[::1] pred_state,
                const int[::1] pred_next, const float[::1] pred_diff, const int[::1] state_word,
                const int[::1] finals, int count):
    """decode.nbest_paths over the states' arrays (their score, best predecessor, merged
    predecessors: the head entry of each state, each entry's state, next entry and score
    difference; the word id of each state's node, -1 for none) from `finals` (the end
    node's states, best first): up to `count` paths, each its states from the start,
    as (offsets, states)."""
    cdef Entries e
    cdef Ints heap, found, out
    cdef Numbers strings, seen
    cdef Floats seen_prob
    cdef int i, k, q, p, f, slot, item, feature, made = 1  # word strings numbered so far
    cdef int[::1] view
    cdef float threshold = 0, score, backward
    memset(&e, 0, sizeof(Entries))
    memset(&heap, 0, sizeof(Ints))
    memset(&found, 0, sizeof(Ints))
    memset(&out, 0, sizeof(Ints))
    memset(&strings, 0, sizeof(Numbers))
    memset(&seen, 0, sizeof(Numbers))
    memset(&seen_prob, 0, sizeof(Floats))
    try:
        if numbers_init(&strings) < 0 or numbers_init(&seen) < 0:
            raise MemoryError()
        if finals.shape[0]:
            threshold = <float> (prob[finals[0]] + NO_THRESHOLD)
        for i in range(finals.shape[0]):  # word string 0: </s>
            if push(&e, &heap, finals[i], -1, 0, 0, -prob[finals[i]], 0) < 0:
                raise MemoryError()
        while heap.count and found.count < count:
            item = pop(&e, &heap)
            k = e.state.data[item]
            if prev[k] < 0:
                if ints_push(&found, item) < 0:
                    raise MemoryError()
                continue
            p = preds[k]
            while p >= 0:
                q = pred_state[p]
                score = prob[q] + pred_diff[p]
                score = score + e.backward.data[item]
                if score > threshold:
                    feature = e.feature.data[item]
                    if state_word[q] >= 0:  # the string one word longer: its number, a new one if new
                        f = numbers_find(&strings, (<long long> feature << 32) | state_word[q], made)
                        if f == -1:
                            raise MemoryError()
                        if f < -1:
                            f = made
                            made += 1
                        feature = f
                    slot = numbers_find(&seen, (<long long> q << 32) | feature, seen_prob.count)
                    if slot == -1:
                        raise MemoryError()
                    if slot >= 0 and score <= seen_prob.data[slot]:
                        p = pred_next[p]
                        continue
                    if slot >= 0:
                        seen_prob.data[slot] = score
                    elif floats_push(&seen_prob, score) < 0:
                        raise MemoryError()
                    backward = e.backward.data[item] + pred_diff[p]
                    if push(&e, &heap, q, item, feature, e.depth.data[item] - 1, -score, backward) < 0:
                        raise MemoryError()
                p = pred_next[p]
        offsets = np.zeros(found.count + 1, dtype=np.int64)
        for i in range(found.count):
            item = found.data[i]
            while item >= 0:
                if ints_push(&out, e.state.data[item]) < 0:
                    raise MemoryError()
                item = e.after.data[item]
            offsets[i + 1] = out.count
        states = np.empty(out.count, dtype=np.int32)
        if out.count:
            view = states
            memcpy(&view[0], out.data, out.count * sizeof(int))
        return offsets, states
    finally:
        free(e.state.data)
        free(e.after.data)
        free(e.feature.data)
        free(e.depth.data)
        free(e.key.data)
        free(e.backward.data)
        free(heap.data)
        free(found.data)
        free(out.data)
        free(strings.keys)
        free(strings.values)
        free(seen.keys)
        free(seen.values)
        free(seen_prob.data)


def path_sums(const long long[::1] offsets, const int[::1] path_nodes, const float[::1] acoustic,
              const float[::1] language):
    """Each path's acoustic score (its nodes' that have one, NaN: none) and language score,
    summed in float32 from the start as decode.hypothesis_line and _lattice_language add
    them. Path i: path_nodes[offsets[i]:offsets[i + 1]], nodes checked by the caller."""
    cdef Py_ssize_t paths = offsets.shape[0] - 1, i, k
    cdef float a, g
    acoustic_sums, language_sums = np.zeros(max(paths, 0), dtype=np.float32), np.zeros(max(paths, 0), dtype=np.float32)
    cdef float[::1] a_out = acoustic_sums, g_out = language_sums
    for i in range(paths):
        a, g = 0, 0
        for k in range(offsets[i], offsets[i + 1]):
            if not isnan(acoustic[path_nodes[k]]):
                a = a + acoustic[path_nodes[k]]
            g = g + language[path_nodes[k]]
        a_out[i], g_out[i] = a, g
    return acoustic_sums, language_sums
