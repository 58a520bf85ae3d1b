# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""Importance sampling's sampler (Bengio & Senecal 2003, Algorithm 3), shared by every
network kernel through nplmtk/_ext/sampling_kernels.pxd: the draws from the proposal
(Walker's alias table for its unigram part), the merging of repeated draws, and the
importance weights with their effective sample size."""
import numpy as np
cimport numpy as cnp
from libc.math cimport exp, expf, log, logf
from libc.stdlib cimport free, malloc
from libc.string cimport memset

cnp.import_array()


cdef int sampling_alloc(Sampling *sp, int samples, int batch, int hidden, int inputs, int vocab) noexcept nogil:
    """Buffers for `samples` draws shared by up to `batch` windows over a vocabulary of
    `vocab` words; 0 when out of memory."""
    cdef int width = max(hidden, inputs), i
    sp.count = samples
    sp.distinct = samples
    sp.words = <int *> malloc(samples * sizeof(int))
    sp.sample_log_q = <float *> malloc(samples * sizeof(float))
    sp.multiplicity = <float *> malloc(samples * sizeof(float))
    sp.slot = <int *> malloc(max(vocab, 1) * sizeof(int))
    sp.owned = <int *> malloc(samples * sizeof(int))
    sp.U_rows = <float *> malloc(<Py_ssize_t> samples * max(hidden, 1) * sizeof(float))
    sp.W_rows = <float *> malloc(<Py_ssize_t> samples * max(inputs, 1) * sizeof(float))
    sp.weights = <float *> malloc(<Py_ssize_t> batch * samples * sizeof(float))
    sp.row_grads = <float *> malloc(<Py_ssize_t> samples * max(width, 1) * sizeof(float))
    sp.targets = <float *> malloc(batch * sizeof(float))
    if sp.slot != NULL:
        for i in range(vocab):
            sp.slot[i] = -1
    return (sp.words != NULL and sp.sample_log_q != NULL and sp.multiplicity != NULL and sp.slot != NULL
            and sp.owned != NULL and sp.U_rows != NULL and sp.W_rows != NULL and sp.weights != NULL
            and sp.row_grads != NULL and sp.targets != NULL)


cdef int sampling_start(Sampling *sp, object proposal, int samples, int batch, int hidden, int inputs,
                        unsigned long long seed) except -1:
    """Ready `sp` (zeroed, or started before) for a chunk: `samples` draws from `proposal`
    shared by batches of up to `batch` windows (sampled rows of widths hidden and inputs),
    from `seed`. Buffers are (re)allocated only when the number of draws changes; the
    caller frees them with sampling_free."""
    if sp.count != samples:
        sampling_free(sp)
        if not sampling_alloc(sp, samples, batch, hidden, inputs, proposal.vocab_size):
            sampling_free(sp)
            raise MemoryError()
    attach_proposal(sp, proposal)
    sp.rng = seed
    return 0


cdef void sampling_free(Sampling *sp) noexcept nogil:
    free(sp.words)
    free(sp.sample_log_q)
    free(sp.multiplicity)
    free(sp.slot)
    free(sp.owned)
    free(sp.U_rows)
    free(sp.W_rows)
    free(sp.weights)
    free(sp.row_grads)
    free(sp.targets)
    sp.words = NULL
    sp.sample_log_q = NULL
    sp.multiplicity = NULL
    sp.slot = NULL
    sp.owned = NULL
    sp.U_rows = NULL
    sp.W_rows = NULL
    sp.weights = NULL
    sp.row_grads = NULL
    sp.targets = NULL
    sp.count = 0
    sp.distinct = 0


cdef inline unsigned long long splitmix64(unsigned long long *state) noexcept nogil:
    cdef unsigned long long z
    state[0] += 0x9E3779B97F4A7C15ULL
    z = state[0]
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL
    return z ^ (z >> 31)


cdef inline double uniform(Sampling *sp) noexcept nogil:
    return (splitmix64(&sp.rng) >> 11) * (1.0 / 9007199254740992.0)


cdef inline int draw_unigram(Sampling *sp) noexcept nogil:
    """One draw from the alias table: a column uniformly, then it or its alias."""
    cdef double u = uniform(sp) * sp.vocab_size
    cdef int column = <int> u
    return column if u - column < sp.alias_keep[column] else sp.alias_other[column]


cdef inline long long first_above(const double *cdf, long long low, long long high, double u) noexcept nogil:
    """The first index in low..high-1 whose cumulative probability exceeds u."""
    cdef long long middle
    high -= 1
    while low < high:
        middle = (low + high) >> 1
        if cdf[middle] > u:
            high = middle
        else:
            low = middle + 1
    return low


cdef inline double bigram_probability(Sampling *sp, int v, int word) noexcept nogil:
    """p(word | v) from the successor rows (0 when unseen)."""
    cdef long long low = sp.row_start[v], high = sp.row_start[v + 1], middle
    while low < high:
        middle = (low + high) >> 1
        if sp.successors[middle] < word:
            low = middle + 1
        else:
            high = middle
    if low < sp.row_start[v + 1] and sp.successors[low] == word:
        return sp.successor_p[low]
    return 0


cdef void draw_samples(Sampling *sp, const int *rows, int K, int n) noexcept nogil:
    """The batch's N samples and their log Q: from the unigram, or (bigram proposal) from
    the mixture over the batch's windows of Q(.|previous word), which is a proposal for
    every window of the batch (it is positive wherever the unigram part is)."""
    cdef int j, i, v
    cdef double q
    for j in range(sp.count):
        if sp.row_start != NULL:
            v = rows[<int> ((splitmix64(&sp.rng) >> 33) % K) * n + n - 2]
            if uniform(sp) < sp.keep[v]:
                sp.words[j] = sp.successors[first_above(sp.successor_cdf, sp.row_start[v], sp.row_start[v + 1],
                                                        uniform(sp))]
                continue
        sp.words[j] = draw_unigram(sp)
    for j in range(sp.count):
        if sp.row_start == NULL:
            sp.sample_log_q[j] = sp.log_q[sp.words[j]]
            continue
        q = 0
        for i in range(K):
            v = rows[i * n + n - 2]
            q += sp.keep[v] * bigram_probability(sp, v, sp.words[j]) + (1 - sp.keep[v]) * exp(sp.log_q[sp.words[j]])
        sp.sample_log_q[j] = <float> log(q / K)


cdef void merge_duplicates(Sampling *sp) noexcept nogil:
    """One entry per distinct word among the N draws: a word drawn c times has ratio
    c exp(y) / Q, so its log Q is lowered by log c (the estimator is unchanged, the work
    shrinks: a unigram proposal draws the frequent words again and again)."""
    cdef int j, u, m = 0
    for j in range(sp.count):
        u = sp.slot[sp.words[j]]
        if u >= 0:
            sp.multiplicity[u] += 1
            continue
        sp.slot[sp.words[j]] = m
        sp.words[m] = sp.words[j]
        sp.sample_log_q[m] = sp.sample_log_q[j]
        sp.multiplicity[m] = 1
        m += 1
    sp.distinct = m
    for u in range(m):
        sp.slot[sp.words[u]] = -1
        sp.sample_log_q[u] -= logf(sp.multiplicity[u])


cdef double importance_weights(Sampling *sp, float *g, double *ess) noexcept nogil:
    """Scores y_j of the distinct samples in, normalised weights r_j / sum r out (log r_j =
    y_j - log Q(w_j), max-subtracted); adds the effective sample size to `ess` and returns
    the estimate of log Z, log(sum r / N)."""
    cdef int j, M = sp.distinct
    cdef float top = -3.4e38, total = 0, squares = 0, value
    for j in range(M):
        g[j] -= sp.sample_log_q[j]
        top = g[j] if g[j] > top else top
    for j in range(M):
        value = expf(g[j] - top)
        g[j] = value
        total += value
        squares += value * value / sp.multiplicity[j]
    ess[0] += <double> total * total / squares
    value = 1 / total
    for j in range(M):
        g[j] *= value
    return top + log(<double> total / sp.count)



cdef void hold_block_samples(Sampling *sp, int lo, int hi) noexcept nogil:
    """-mpi param: the distinct samples among output rows lo..hi-1 (their positions in
    sp.owned, their count in sp.held)."""
    cdef int j
    sp.held = 0
    for j in range(sp.distinct):
        if lo <= sp.words[j] < hi:
            sp.owned[sp.held] = j
            sp.held += 1


cdef void held_maxima(Sampling *sp, int K, float *top) noexcept nogil:
    """-mpi param: the held samples' scores (K x held, in weights) less log Q, and top[i]
    the maximum of window i's (-3.4e38 when the block holds none)."""
    cdef int i, m
    cdef float best
    cdef float *g
    for i in range(K):
        g = sp.weights + i * sp.held
        best = -3.4e38
        for m in range(sp.held):
            g[m] -= sp.sample_log_q[sp.owned[m]]
            best = g[m] if g[m] > best else best
        top[i] = best


cdef void block_sums(Sampling *sp, int K, const float *top, double *out) noexcept nogil:
    """-mpi param: with the maxima over all blocks, the held samples' scores (K x held, in
    weights) become r = exp(y - top); out[i] = their sum, out[K + i] = the sum of r^2 over
    the multiplicities, out[2K + i] = the target's score where this block holds it."""
    cdef int i, m
    cdef float value
    cdef float *g
    for i in range(K):
        g = sp.weights + i * sp.held
        out[i] = 0
        out[K + i] = 0
        for m in range(sp.held):
            value = expf(g[m] - top[i])
            g[m] = value
            out[i] += value
            out[K + i] += value * value / sp.multiplicity[sp.owned[m]]
        out[2 * K + i] = sp.targets[i]


cdef int attach_proposal(Sampling *sp, object proposal) except -1:
    """Point the sampler at a proposal's tables (nplmtk.neural.sampling.Proposal: the alias
    table, log Q and the optional bigram rows); the caller keeps `proposal` alive."""
    cdef const double[::1] alias_keep = proposal.alias_keep
    cdef const int[::1] alias_other = proposal.alias_other
    cdef const float[::1] log_q = proposal.log_q
    cdef const long long[::1] row_start
    cdef const int[::1] successors
    cdef const double[::1] successor_cdf, successor_p, keep
    cdef int size = alias_keep.shape[0]
    if size == 0 or alias_other.shape[0] != size or log_q.shape[0] != size:
        raise ValueError("a proposal's tables must cover the same, non-empty vocabulary")
    sp.alias_keep = &alias_keep[0]
    sp.alias_other = &alias_other[0]
    sp.log_q = &log_q[0]
    sp.vocab_size = size
    sp.row_start = NULL
    if proposal.bigram is None:
        return 0
    row_start, successors, successor_cdf, successor_p, keep = proposal.bigram
    if (row_start.shape[0] != size + 1 or keep.shape[0] != size or successor_cdf.shape[0] != successors.shape[0]
            or successor_p.shape[0] != successors.shape[0] or row_start[size] > successors.shape[0]):
        raise ValueError("bigram tables of the wrong size")
    sp.row_start = &row_start[0]
    sp.successors = &successors[0] if successors.shape[0] else NULL
    sp.successor_cdf = &successor_cdf[0] if successors.shape[0] else NULL
    sp.successor_p = &successor_p[0] if successors.shape[0] else NULL
    sp.keep = &keep[0]
    return 0


def draw(proposal, int count, unsigned long long seed=0, const int[:, ::1] windows=None):
    """`count` words drawn from `proposal` as training draws them (for a batch of
    `windows` when the proposal has a bigram part)."""
    cdef Sampling sp
    cdef int[::1] out = np.empty(max(count, 1), dtype=np.int32)
    cdef float[::1] log_q = np.empty(max(count, 1), dtype=np.float32)
    cdef int K = 1 if windows is None else windows.shape[0], n = 1 if windows is None else windows.shape[1]
    cdef int dummy = 0
    if proposal.bigram is not None and (windows is None or K == 0 or n < 2):
        raise ValueError("the bigram proposal draws for a batch of windows")
    memset(&sp, 0, sizeof(Sampling))
    attach_proposal(&sp, proposal)
    sp.rng = seed
    sp.count = count
    sp.words = &out[0]
    sp.sample_log_q = &log_q[0]
    if count > 0:
        draw_samples(&sp, &dummy if windows is None else &windows[0, 0], K, n)
    return np.asarray(out)[:count]


def alias_table(const double[::1] q):
    """Walker's alias table (Vose's construction) for probabilities q: column i keeps
    itself with probability keep[i], else gives other[i]; every column has mass 1/V."""
    cdef Py_ssize_t V = q.shape[0], i, small_top = 0, large_top = 0, s, l
    cdef double[::1] scaled = np.empty(V)
    cdef double[::1] keep = np.ones(V)
    cdef int[::1] other = np.arange(V, dtype=np.int32)
    cdef Py_ssize_t[::1] small = np.empty(V, dtype=np.intp)
    cdef Py_ssize_t[::1] large = np.empty(V, dtype=np.intp)
    for i in range(V):
        scaled[i] = q[i] * V
        if scaled[i] < 1:
            small[small_top] = i
            small_top += 1
        else:
            large[large_top] = i
            large_top += 1
    while small_top and large_top:
        small_top -= 1
        s = small[small_top]
        l = large[large_top - 1]
        keep[s] = scaled[s]
        other[s] = <int> l
        scaled[l] = (scaled[l] + scaled[s]) - 1
        if scaled[l] < 1:
            large_top -= 1
            small[small_top] = l
            small_top += 1
    return np.asarray(keep), np.asarray(other)

