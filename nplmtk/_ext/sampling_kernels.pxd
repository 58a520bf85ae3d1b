# The C interface of nplmtk._ext.sampling_kernels (cython_ext/sampling_kernels.pyx):
# importance sampling's state, draws and weights, shared by every network kernel. Real
# functions called across modules, not inlined: each kernel's sampled step stays small.
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


cdef int sampling_alloc(Sampling *sp, int samples, int batch, int hidden, int inputs, int vocab) noexcept nogil
cdef void sampling_free(Sampling *sp) noexcept nogil
cdef int sampling_start(Sampling *sp, object proposal, int samples, int batch, int hidden, int inputs,
                        unsigned long long seed) except -1
cdef int attach_proposal(Sampling *sp, object proposal) except -1
cdef void draw_samples(Sampling *sp, const int *rows, int K, int n) noexcept nogil
cdef void merge_duplicates(Sampling *sp) noexcept nogil
cdef double importance_weights(Sampling *sp, float *g, double *ess) noexcept nogil
cdef void hold_block_samples(Sampling *sp, int lo, int hi) noexcept nogil
cdef void held_maxima(Sampling *sp, int K, float *top) noexcept nogil
cdef void block_sums(Sampling *sp, int K, const float *top, double *out) noexcept nogil
