# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""Corpus kernels over encoded sentences: n-gram window extraction (OpenMP over
sentences), and each sentence's totals of its tokens' scores."""
import numpy as np
cimport numpy as cnp
from cython.parallel cimport prange
from libc.math cimport INFINITY

cnp.import_array()


def ngram_windows(const int[::1] ids, const cnp.int64_t[::1] offsets, int order, int bos, int eos):
    """Rows (context..., target) for every word and every </s> of every sentence.

    Sentence s occupies rows offsets[s] + s .. offsets[s+1] + s; position j of a
    sentence of length L predicts word j (j < L) or </s> (j == L), with <s> padding.
    """
    cdef Py_ssize_t num_sentences = offsets.shape[0] - 1
    cdef Py_ssize_t rows = ids.shape[0] + num_sentences
    out_array = np.empty((rows, order), dtype=np.int32)
    cdef int[:, ::1] out = out_array
    cdef Py_ssize_t s, j, k, start, length, row, pos
    for s in prange(num_sentences, nogil=True, schedule="static"):
        start = offsets[s]
        length = offsets[s + 1] - start
        for j in range(length + 1):
            row = start + s + j
            for k in range(order):
                pos = j - (order - 1) + k
                if pos < 0:
                    out[row, k] = bos
                elif pos == length:
                    out[row, k] = eos
                else:
                    out[row, k] = ids[start + pos]
    return out_array


cdef inline Py_ssize_t sentence_of(const cnp.int64_t[::1] offsets, Py_ssize_t num_sentences,
                                   cnp.int64_t row) noexcept nogil:
    """The sentence holding `row` of the windows' layout (sentence s's rows start at
    offsets[s] + s: its words, then its </s>), by bisection."""
    cdef Py_ssize_t low = 0, high = num_sentences - 1, middle
    while low < high:
        middle = (low + high + 1) // 2
        if offsets[middle] + middle <= row:
            low = middle
        else:
            high = middle - 1
    return low


def gather_windows(const int[::1] ids, const cnp.int64_t[::1] offsets, const cnp.int64_t[::1] rows, int order,
                   int bos, int eos, int unk):
    """Rows `rows` of ngram_windows(ids, offsets, order, bos, eos), ids below 0 as `unk`."""
    cdef Py_ssize_t num_sentences = offsets.shape[0] - 1, n = rows.shape[0]
    out_array = np.empty((n, order), dtype=np.int32)
    cdef int[:, ::1] out = out_array
    cdef Py_ssize_t i, k, s, j, pos, length
    cdef cnp.int64_t row
    cdef int word
    with nogil:
        for i in range(n):
            row = rows[i]
            s = sentence_of(offsets, num_sentences, row)
            j = row - offsets[s] - s
            length = offsets[s + 1] - offsets[s]
            for k in range(order):
                pos = j - (order - 1) + k
                if pos < 0:
                    word = bos
                elif pos == length:
                    word = eos
                else:
                    word = ids[offsets[s] + pos]
                    if word < 0:
                        word = unk
                out[i, k] = word
    return out_array


def gather_stream_steps(const int[::1] ids, const cnp.int64_t[::1] offsets, const cnp.int64_t[::1] bounds,
                        const cnp.int64_t[::1] steps, int streams, int bos, int eos, int unk):
    """Steps `steps` of the text cut into streams: stream b is the tokens bounds[b] ..
    bounds[b+1] of the text as (input, target) pairs, (<s>, w1) .. (wn, </s>) sentence after
    sentence (inputs below 0 as `unk`; targets below 0 kept). Rows (len(steps), 2, streams)
    int32; past a stream's end (and for streams beyond the bounds) <s> and -1."""
    cdef Py_ssize_t num_sentences = offsets.shape[0] - 1, n = steps.shape[0], used = bounds.shape[0] - 1
    out_array = np.empty((n, 2, streams), dtype=np.int32)
    cdef int[:, :, ::1] out = out_array
    cdef Py_ssize_t i, b, s, j, length
    cdef cnp.int64_t t
    cdef int word
    with nogil:
        for i in range(n):
            for b in range(streams):
                t = bounds[b] + steps[i] if b < used else 0
                if b >= used or t >= bounds[b + 1]:
                    out[i, 0, b] = bos
                    out[i, 1, b] = -1
                    continue
                s = sentence_of(offsets, num_sentences, t)
                j = t - offsets[s] - s
                length = offsets[s + 1] - offsets[s]
                if j == 0:
                    word = bos
                else:
                    word = ids[offsets[s] + j - 1]
                    if word < 0:
                        word = unk
                out[i, 0, b] = word
                out[i, 1, b] = eos if j == length else ids[offsets[s] + j]
    return out_array


def sentence_totals(const double[::1] log10, const int[::1] ids, const cnp.int64_t[::1] offsets, int unk):
    """Each sentence's log10 total, OOVs and zeroprobs as SRILM's TextStats counts them,
    from `log10`, the score of each predicted token (a sentence's words, then </s>): a
    score of -inf is an OOV where the word is `unk`, else a zeroprob, and adds nothing.
    Also the text's total, the sentences' totals added in order. Sums in double, in
    order, as SRILM's (no pairwise or compensated summation)."""
    cdef Py_ssize_t num_sentences = offsets.shape[0] - 1, s, t, length, token
    if log10.shape[0] != ids.shape[0] + num_sentences:
        raise ValueError(f"{log10.shape[0]} scores for {ids.shape[0] + num_sentences} predicted tokens")
    logprob_array = np.zeros(num_sentences, dtype=np.float64)
    oovs_array = np.zeros(num_sentences, dtype=np.int64)
    zeroprobs_array = np.zeros(num_sentences, dtype=np.int64)
    cdef double[::1] logprob = logprob_array
    cdef cnp.int64_t[::1] oovs = oovs_array, zeroprobs = zeroprobs_array
    cdef double value, sentence_total, total = 0
    with nogil:
        for s in range(num_sentences):
            length = offsets[s + 1] - offsets[s]
            sentence_total = 0
            for t in range(length + 1):
                token = offsets[s] + s + t
                value = log10[token]
                if value != -INFINITY:
                    sentence_total += value
                elif t < length and ids[offsets[s] + t] == unk:
                    oovs[s] += 1
                else:
                    zeroprobs[s] += 1
            logprob[s] = sentence_total
            total += sentence_total
    return logprob_array, oovs_array, zeroprobs_array, total
