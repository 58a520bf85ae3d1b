# The one loop over a chunk's updates, shared by every network kernel's train: update u
# takes K = min(batch, remaining) examples (or min(lengths[u], remaining): a recurrent
# model's segments of random lengths), the trainer's numbers for u (nplmtk/neural/
# optimizer.py's Steps: a rate and a bulk decay per block, the decay of the rows an update
# touches), and after it, when any block's bulk decay is not 1, the network's decay. The
# kernels differ in their `step` and `decay` only, reached through two function pointers
# (a call per update: nothing beside an update's arithmetic).

cdef struct Update:
    const int *rows           # the update's first example
    int K                     # its examples
    Py_ssize_t u              # its index in the chunk
    bint last                 # the chunk's last update
    float rate                # rates[0, u]: the rate of a network without blocks
    float row_keep            # 1 - eps_t lambda for the rows the update touches
    const double *rates       # &rates[0, u]: block j's rate is rates[j * stride]
    const float *dense_keep   # &dense_keep[0, u]: block j's bulk decay after the update, likewise
    Py_ssize_t stride         # the chunk's updates

ctypedef double (*step_fn)(void *net, Update *up) noexcept nogil
ctypedef void (*decay_fn)(void *net, Update *up) noexcept nogil


cdef struct Schedule:
    int batch
    int blocks
    Py_ssize_t updates
    const double *rates       # blocks x updates
    const float *row_keep     # updates
    const float *dense_keep   # blocks x updates
    const float *momentum     # blocks
    const int *lengths        # updates: each update's examples, or NULL: batch each


cdef inline int schedule_of(Schedule *s, steps, Py_ssize_t count, int capacity, int blocks) except -1:
    """Point s at the numbers of a Steps object for a chunk of `count` examples, after
    checking them: batches the buffers hold, one column per update, `blocks` rows."""
    cdef const double[:, ::1] rates = steps.rates
    cdef const float[::1] row_keep = steps.row_keep
    cdef const float[:, ::1] dense_keep = steps.dense_keep
    cdef const float[::1] momentum = steps.momentum
    cdef const int[::1] lengths
    cdef int batch = steps.batch
    cdef Py_ssize_t updates = (count + batch - 1) // batch if batch > 0 else -1
    if batch < 1 or batch > capacity:
        raise ValueError("batch below 1 or larger than the work buffers")
    s.lengths = NULL
    if steps.lengths is not None:
        lengths = steps.lengths
        updates = lengths.shape[0]
        given = steps.lengths.tolist()
        if updates and (min(given) < 1 or max(given) > capacity or not sum(given[:-1]) < count <= sum(given)):
            raise ValueError("segment lengths below 1, longer than the work buffers, or not the chunk's")
        if updates:
            s.lengths = &lengths[0]
    if rates.shape[1] != updates or row_keep.shape[0] != updates or dense_keep.shape[1] != updates:
        raise ValueError(f"the schedule covers {rates.shape[1]} updates, the chunk takes {updates}")
    if rates.shape[0] != blocks or dense_keep.shape[0] != blocks or momentum.shape[0] != blocks:
        raise ValueError(f"the schedule has {rates.shape[0]} rows of rates, the network {blocks} blocks")
    s.batch, s.blocks, s.updates = batch, blocks, updates
    s.rates = &rates[0, 0] if updates else NULL
    s.row_keep = &row_keep[0] if updates else NULL
    s.dense_keep = &dense_keep[0, 0] if updates else NULL
    s.momentum = &momentum[0]
    return 0


cdef inline double drive(void *net, step_fn step, decay_fn decay, const Schedule *s, const int *examples,
                         Py_ssize_t count, Py_ssize_t width) noexcept nogil:
    """Every update of a chunk of `count` examples of `width` ints each: step, then (when
    due) decay. Returns the sum of the steps' log-likelihoods."""
    cdef Update up
    cdef Py_ssize_t start = 0
    cdef double total = 0
    cdef bint due
    cdef int j
    up.u = 0
    up.stride = s.updates
    while start < count:
        up.K = <int> min(<Py_ssize_t> (s.lengths[up.u] if s.lengths != NULL else s.batch), count - start)
        up.rows = examples + start * width
        up.last = start + up.K >= count
        up.rates = s.rates + up.u
        up.dense_keep = s.dense_keep + up.u
        up.rate = <float> up.rates[0]
        up.row_keep = s.row_keep[up.u]
        total += step(net, &up)
        due = False
        for j in range(s.blocks):
            due = due or up.dense_keep[j * up.stride] != 1
        if due and decay != NULL:
            decay(net, &up)
        start += up.K
        up.u += 1
    return total
