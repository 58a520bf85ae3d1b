# The hierarchical softmax (Morin & Bengio 2005; word2vec's and faster-rnnlm's "hs"): the
# words are the leaves of a binary Huffman tree of the training counts, node n has a row
# v_n and a bias b_n, and
#
#     p(w | h) = prod over the nodes n on w's path of sigma(+-(v_n . h + b_n))
#
# (+ where the path turns to child 0, - to child 1). A word reads the rows of its path only,
# about log2 |V| of them, and the distribution is still exactly normalised: each node
# splits its mass between its two children. Inline functions over N rows of any network's
# top layer (cimported by the recurrent and the MLP kernels), as class_output.pxd.
from libc.math cimport exp, fabs, log1p

from kernel_common cimport axpy_row, dot_row


cdef struct Tree:
    int nodes         # internal nodes (|V| - 1): the rows of the node weights
    int longest       # the longest path
    int *starts       # |V| + 1 offsets into points and turns: word w's path, from the root
    int *points       # the internal nodes on the paths
    char *turns       # the child (0 or 1) the path takes at each


cdef inline double log_sigmoid(double z) noexcept nogil:
    """log sigma(z), without overflow either way."""
    return -log1p(exp(-z)) if z >= 0 else z - log1p(exp(z))


cdef inline double sigmoid(double z) noexcept nogil:
    cdef double e = exp(-fabs(z))  # in (0, 1]: no overflow either way
    return 1 / (1 + e) if z >= 0 else e / (1 + e)


cdef inline double node_score(const Tree *tree, int k, const float *h, int width, const float *Vn,
                              const float *bn) noexcept nogil:
    cdef int n = tree.points[k]
    return dot_row(width, Vn + <Py_ssize_t> n * width, h) + (bn[n] if bn != NULL else 0)


cdef inline double tree_forward(const Tree *tree, const float *top, Py_ssize_t N, int width, const float *Vn,
                                const float *bn, const int *targets, int stride, float *G,
                                double *logp) noexcept nogil:
    """log p of each row's target (targets[r * stride], those >= 0), summed, and each in
    logp[r] when logp is given; G (N x longest): dL/dz at the nodes of each row's path, the
    loss L = -log p, for tree_backward."""
    cdef Py_ssize_t r
    cdef int t, k, start
    cdef double total = 0, value, z
    for r in range(N):
        t = targets[r * stride]
        if t < 0:
            continue
        value, start = 0, tree.starts[t]
        for k in range(start, tree.starts[t + 1]):
            z = node_score(tree, k, top + r * width, width, Vn, bn)
            value += log_sigmoid(-z if tree.turns[k] else z)
            G[r * tree.longest + k - start] = <float> (sigmoid(z) - (1 - tree.turns[k]))
        total += value
        if logp != NULL:
            logp[r] = value
    return total


cdef inline void tree_backward(const Tree *tree, const float *top, Py_ssize_t N, int width, const float *Vn,
                               const int *targets, int stride, const float *G, float scale, float *gVn, float *gbn,
                               float *dTop) noexcept nogil:
    """From tree_forward's G: adds dL/d(top) to dTop (N x width) unless it is NULL, then
    scale times the gradients of the rows and biases of the nodes on the paths to gVn and
    gbn unless NULL. Called with gVn = Vn and scale = -rate, it is an SGD step in place
    (as word2vec's): call it first for dTop alone, so that every row reads the old nodes."""
    cdef Py_ssize_t r
    cdef int t, k, start
    cdef float g
    for r in range(N):
        t = targets[r * stride]
        if t < 0:
            continue
        start = tree.starts[t]
        for k in range(start, tree.starts[t + 1]):
            g = G[r * tree.longest + k - start]
            if dTop != NULL:
                axpy_row(width, g, Vn + <Py_ssize_t> tree.points[k] * width, dTop + r * width)
            if gVn != NULL:
                axpy_row(width, scale * g, top + r * width, gVn + <Py_ssize_t> tree.points[k] * width)
            if gbn != NULL:
                gbn[tree.points[k]] += scale * g


cdef inline void tree_distribution(const Tree *tree, const float *h, int width, const float *Vn, const float *bn,
                                   int words, float *z, double *out) noexcept nogil:
    """log p of every word after the top layer h (z: one float per node of work space)."""
    cdef int n, w, k
    cdef double value
    for n in range(tree.nodes):
        z[n] = dot_row(width, Vn + <Py_ssize_t> n * width, h) + (bn[n] if bn != NULL else 0)
    for w in range(words):
        value = 0
        for k in range(tree.starts[w], tree.starts[w + 1]):
            value += log_sigmoid(-z[tree.points[k]] if tree.turns[k] else z[tree.points[k]])
        out[w] = value


cdef inline int tree_attach(Tree *tree, paths, int words) except -1:
    """Point `tree` at the paths (starts, points, turns: int32, int32, int8 arrays that the
    caller keeps alive), checked here once since the loops above do not check them."""
    starts, points, turns = paths
    lengths = starts[1:words + 1] - starts[0:words]
    if (starts.shape != (words + 1,) or starts[0] != 0 or (lengths < 1).any()
            or points.shape != (starts[words],) or turns.shape != points.shape
            or points.min() < 0 or points.max() >= words - 1 or turns.min() < 0 or turns.max() > 1):
        raise ValueError("tree paths inconsistent with the vocabulary")
    cdef int[::1] s = starts, p = points
    cdef signed char[::1] b = turns
    tree.starts, tree.points, tree.turns = &s[0], &p[0], <char *> &b[0]
    tree.nodes, tree.longest = words - 1, int(lengths.max())
    return 0
