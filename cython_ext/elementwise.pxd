# Elementwise helpers of the recurrent kernel (rnn_kernels.pyx), inline: activations and
# their slopes, dropout with a xorshift generator, column sums, and the SGD or Adam step
# of one parameter array.
from libc.math cimport expf, sqrtf, tanhf
from libc.string cimport memset

cdef inline float uniform(unsigned long long *state) noexcept nogil:
    """xorshift64*: a float in [0, 1)."""
    cdef unsigned long long x = state[0]
    x ^= x >> 12
    x ^= x << 25
    x ^= x >> 27
    state[0] = x
    return <float> ((x * 2685821657736338717ULL) >> 40) / 16777216.0


cdef inline void dropout(float *values, float *mask, Py_ssize_t size, float p, unsigned long long *rng) noexcept nogil:
    cdef Py_ssize_t i
    cdef float kept = 1 / (1 - p)
    for i in range(size):
        mask[i] = 0 if uniform(rng) < p else kept
        values[i] *= mask[i]


cdef inline float logistic(float z) noexcept nogil:
    return 1 / (1 + expf(-z))


cdef inline float act(float z, int kind) noexcept nogil:
    if kind == 0:
        return tanhf(z)
    if kind == 1:
        return logistic(z)
    if kind == 2:
        return z if z > 0 else 0
    return z


cdef inline float slope(float a, int kind) noexcept nogil:
    """act'(z) through a = act(z)."""
    if kind == 0:
        return 1 - a * a
    if kind == 1:
        return a * (1 - a)
    if kind == 2:
        return 1 if a > 0 else 0
    return 1


cdef inline void column_sums(const float *A, Py_ssize_t rows, int cols, float *out) noexcept nogil:
    cdef Py_ssize_t r
    cdef int j
    memset(out, 0, cols * sizeof(float))
    for r in range(rows):
        for j in range(cols):
            out[j] += A[r * cols + j]


cdef inline double squares(const float *v, Py_ssize_t size) noexcept nogil:
    cdef Py_ssize_t i
    cdef double total = 0
    for i in range(size):
        total += v[i] * v[i]
    return total


cdef inline void update(float *param, const float *grad, float *m, float *v, Py_ssize_t size, float rate,
                        float clipped, float c1, float c2) noexcept nogil:
    """param -= rate g for g = clipped grad, or with Adam's moments m and v (given) and
    their bias corrections c1, c2: param -= rate m / c1 / (sqrt(v / c2) + epsilon)."""
    cdef Py_ssize_t i
    cdef float g
    if m == NULL:
        for i in range(size):
            param[i] -= rate * clipped * grad[i]
        return
    for i in range(size):
        g = clipped * grad[i]
        m[i] = 0.9 * m[i] + 0.1 * g  # Kingma & Ba's defaults: beta1 0.9, beta2 0.999, epsilon 1e-8
        v[i] = 0.999 * v[i] + 0.001 * g * g
        param[i] -= rate * (m[i] / c1) / (sqrtf(v[i] / c2) + 1e-8)


cdef inline void adam_corrections(double steps, float *c1, float *c2) noexcept nogil:
    """Adam's bias corrections after `steps` steps: 1 - beta1^t and 1 - beta2^t."""
    c1[0] = <float> (1 - 0.9 ** steps)
    c2[0] = <float> (1 - 0.999 ** steps)
