# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""Corpus kernels: n-gram window extraction over encoded sentences (OpenMP over sentences)."""
import numpy as np
cimport numpy as cnp
from cython.parallel cimport prange

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
