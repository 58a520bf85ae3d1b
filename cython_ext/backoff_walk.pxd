# SRILM's back-off walk (Ngram::wordProbBO) over the sorted n-gram tables of
# nplmtk/ngram/index.py, given as pointers: the tables of a BackoffTables
# (backoff_kernels.pyx) and those of a binary model mapped without numpy
# (ngram_fast_score.pyx). Inline: cimported, no module imported at run time. The tables
# must have been checked (keys sorted and in range): nothing here checks them again.
from libc.math cimport INFINITY
from ngram_tables cimport find_key

cdef enum:
    MAX_LEVELS = 10  # nplmtk.ngram.counts.MAX_ORDER


cdef struct WalkTables:
    int order
    long long vocab_size
    const long long **keys       # keys[j]: the sorted keys of the (j + 1)-grams
    const float **logp
    const float **bow
    const unsigned char **node   # the contexts the walk may pass
    const long long **children   # children[j][i] .. children[j][i + 1]: the rows of table j + 1 extending row i
    const long long *unigram_row  # word id -> its row among the 1-grams, -1 if absent


cdef inline long long walk_find(const WalkTables *t, int level, long long parent, long long word) noexcept nogil:
    """The row of (the n-gram at row `parent` of table level - 1, word) in table `level`."""
    if word < 0 or word >= t.vocab_size:
        return -1
    if level == 0:
        return t.unigram_row[word]
    if parent < 0:
        return -1
    return find_key(t.keys[level], t.children[level - 1][parent], t.children[level - 1][parent + 1],
                    parent * t.vocab_size + word)


cdef inline void walk_stream(const WalkTables *t, const long long *tokens, Py_ssize_t length, Py_ssize_t first,
                             long long *chain, float *scores, signed char *orders) noexcept nogil:
    """Score tokens[first:length], each after the tokens before it. chain[a * order + m]
    is the row of tokens[a:a+m+1] in table m (-1 if absent): each n-gram of the
    stream is looked up once, by extending the one a word shorter."""
    cdef Py_ssize_t a, m, tok, j, context_length
    cdef long long row, found, context
    cdef float result, weight
    cdef signed char used
    cdef int order = t.order
    for a in range(length):
        row = -1
        for m in range(order):
            if a + m < length and (m == 0 or row >= 0):
                row = walk_find(t, m, row, tokens[a + m])
            else:
                row = -1
            chain[a * order + m] = row
    for tok in range(first, length):
        # as SRILM's Ngram::wordProbBO: the longest n-gram found gives the probability,
        # plus the back-off weights of the longer contexts, while those contexts exist
        context_length = min(tok, order - 1)
        result = -INFINITY
        weight = 0
        used = 0
        for j in range(context_length + 1):
            found = chain[(tok - j) * order + j]
            if found >= 0:
                result = t.logp[j][found]
                weight = 0
                used = j + 1
            if j == context_length:
                break
            context = chain[(tok - j - 1) * order + j]
            if context < 0 or not t.node[j][context]:
                break
            weight += t.bow[j][context]
        scores[tok - first] = result + weight
        orders[tok - first] = used
