# The C interface of nplmtk._ext.backoff_kernels (cython_ext/backoff_kernels.pyx): the
# back-off model's tables and SRILM's back-off walk over them, which the lattice kernels
# (lattice_kernels.pyx) call for each word they score.
from backoff_walk cimport MAX_LEVELS, WalkTables  # MAX_LEVELS: nplmtk.ngram.counts.MAX_ORDER


cdef class BackoffTables:
    cdef int order
    cdef long long vocab_size
    cdef const long long *keys[MAX_LEVELS]
    cdef const float *logp[MAX_LEVELS]
    cdef const float *bow[MAX_LEVELS]
    cdef const unsigned char *node[MAX_LEVELS]
    # children[j][i] .. children[j][i + 1]: the rows of table j + 1 that extend row i of table j
    cdef const long long *children[MAX_LEVELS]
    cdef const long long *unigram_row  # word id -> row of the 1-gram table, -1 if absent
    cdef list owners  # the arrays behind the pointers
    cdef WalkTables walk  # the pointers above, as the walk takes them (cython_ext/backoff_walk.pxd)

    cdef signed char step(self, const int *words, Py_ssize_t stride, Py_ssize_t used, long long *tokens,
                          long long *chain, float *score) noexcept nogil
    cdef long long find(self, int level, long long parent, long long word) noexcept nogil
    cdef void walk_stream(self, const long long *tokens, Py_ssize_t length, Py_ssize_t first,
                          long long *chain, float *scores, signed char *orders) noexcept nogil
