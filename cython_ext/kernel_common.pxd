# Shared by every kernel (cimported; everything here is inline, so no module is imported
# at run time): BLAS through scipy.linalg.cython_blas, short-row loops, the random
# numbers, importance sampling's draws and weights, and the log-normaliser.
from libc.math cimport exp, expf, log, logf
from libc.stdlib cimport free, malloc
from libc.string cimport memcpy, memset
from scipy.linalg.cython_blas cimport saxpy, sdot, sgemm, sgemv, sger, sscal


cdef inline void gemm(char ta, char tb, int M, int N, int K, float alpha, const float *A, int lda,
                      const float *B, int ldb, float beta, float *C, int ldc) noexcept nogil:
    """Row-major C (M x N) = alpha op(A) op(B) + beta C, through column-major sgemm. A
    single row of C (one window) is a matrix-vector product, and a single inner term
    added to C an outer product: BLAS-2, without sgemm's packing of the whole matrix."""
    if M == 0 or N == 0:
        return
    if M == 1 and ta == b'N' and ldc == N and ldb == (K if tb == b'T' else N):
        if tb == b'T':
            matvec(N, K, alpha, B, A, beta, C)
        else:
            matvec_t(K, N, alpha, B, A, beta, C)
        return
    if K == 1 and beta == 1 and ldc == N and ldb == N and tb == b'N' and (ta == b'T' or lda == 1):
        rank1(M, N, alpha, A, B, C)
        return
    sgemm(&tb, &ta, &N, &M, &K, &alpha, <float *> B, &ldb, <float *> A, &lda, &beta, C, &ldc)


cdef inline void matvec(int rows, int cols, float alpha, const float *M, const float *v, float beta,
                        float *out) noexcept nogil:
    """out = alpha M v + beta out for a row-major M (rows x cols): one pass over M, no
    packing (sgemm packs the whole matrix even for a single row)."""
    cdef int one = 1
    sgemv(b'T', &cols, &rows, &alpha, <float *> M, &cols, <float *> v, &one, &beta, out, &one)


cdef inline void matvec_t(int rows, int cols, float alpha, const float *M, const float *u, float beta,
                          float *out) noexcept nogil:
    """out = alpha M^T u + beta out for a row-major M (rows x cols)."""
    cdef int one = 1
    sgemv(b'N', &cols, &rows, &alpha, <float *> M, &cols, <float *> u, &one, &beta, out, &one)


cdef inline float dot(int size, const float *u, const float *v) noexcept nogil:
    cdef int one = 1
    return sdot(&size, <float *> u, &one, <float *> v, &one)


cdef inline void scale(int size, float alpha, float *v) noexcept nogil:
    cdef int one = 1
    sscal(&size, &alpha, v, &one)


cdef inline void rank1(int rows, int cols, float alpha, const float *u, const float *v, float *M) noexcept nogil:
    """M += alpha u v^T for a row-major M (rows x cols)."""
    cdef int one = 1
    sger(&cols, &rows, &alpha, <float *> v, &one, <float *> u, &one, M, &cols)


cdef inline float dot_row(int size, const float *u, const float *v) noexcept nogil:
    """u . v for the short rows of one window (no BLAS call: its overhead is the cost)."""
    cdef float s0 = 0, s1 = 0, s2 = 0, s3 = 0
    cdef int i = 0
    while i + 4 <= size:
        s0 += u[i] * v[i]
        s1 += u[i + 1] * v[i + 1]
        s2 += u[i + 2] * v[i + 2]
        s3 += u[i + 3] * v[i + 3]
        i += 4
    while i < size:
        s0 += u[i] * v[i]
        i += 1
    return (s0 + s1) + (s2 + s3)


cdef inline void axpy_row(int size, float alpha, const float *x, float *y) noexcept nogil:
    cdef int i
    for i in range(size):
        y[i] += alpha * x[i]



cdef inline double log_normaliser(const float *y, int size) noexcept nogil:
    """log sum_j exp(y_j), with max-subtraction."""
    cdef int j
    cdef float top = y[0], total = 0
    for j in range(size):
        top = y[j] if y[j] > top else top
    for j in range(size):
        total += expf(y[j] - top)
    return top + log(total)


# -- importance sampling (Bengio & Senecal 2003, Algorithm 3) ----------------------------

cdef struct Sampling:
    int count              # N draws per batch, shared by the windows of a batch
    int distinct           # after merge_duplicates: the distinct words among them
    int *words             # the sampled word ids (distinct ones first after merging)
    float *sample_log_q    # log Q(w_j) of each sample under the batch's proposal
    float *multiplicity    # after merging: how many of the N draws each distinct word was
    int *slot              # vocabulary-sized scratch for merging, -1 everywhere between calls
    # Unigram proposal: Walker's alias table, so a draw costs one uniform number.
    const double *alias_keep
    const int *alias_other
    const float *log_q     # log Q(w)
    int vocab_size         # entries of the alias table and log_q
    # Bigram proposal (row_start NULL: unigram only): Q(w|v) = keep_v p(w|v) + (1 - keep_v) u(w),
    # v the previous word; rows of successors sorted by id with their cumulative
    # probabilities and p(w|v). A batch samples from the mixture of its windows' Q.
    const long long *row_start
    const int *successors
    const double *successor_cdf
    const double *successor_p
    const double *keep
    unsigned long long rng
    float *U_rows          # N x hidden: the sampled rows of U, gathered
    float *W_rows          # N x inputs: the sampled rows of W
    float *weights         # batch x N: scores, then importance weights
    float *row_grads       # N x max(hidden, inputs)
    int *owned             # (output block) positions of the samples this block holds
    int held               # (output block) how many
    float *targets         # (output block) batch: the target's score where this block holds it


cdef inline int sampling_alloc(Sampling *sp, int samples, int batch, int hidden, int inputs, int vocab) noexcept nogil:
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


cdef inline void sampling_free(Sampling *sp) noexcept nogil:
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


cdef inline void draw_samples(Sampling *sp, const int *rows, int K, int n) noexcept nogil:
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


cdef inline void merge_duplicates(Sampling *sp) noexcept nogil:
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


cdef inline double importance_weights(Sampling *sp, float *g, double *ess) noexcept nogil:
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



cdef inline int attach_proposal(Sampling *sp, object proposal) except -1:
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
