# Elementwise helpers of the recurrent kernel (rnn_kernels.pyx), inline: activations and
# their slopes, an LSTM step's cells, dropout with a xorshift generator (or drawn by index,
# for threads), column sums, and the SGD or Adam step of one parameter array.
from libc.math cimport sqrtf, tanhf
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


cdef inline unsigned long long draw_key(unsigned long long *state) noexcept nogil:
    """The key of one draw of many (dropout_at): the generator moves on once a draw."""
    uniform(state)
    return state[0] * 2685821657736338717ULL


cdef extern from *:
    """
    #include <stdint.h>
    /* lowbias32 (C. Wellons's hash prospector): a bijection of 32 bits that mixes well. */
    static inline uint32_t nplm_mix32(uint32_t x) {
        x ^= x >> 16;
        x *= 0x7feb352dU;
        x ^= x >> 15;
        x *= 0x846ca68bU;
        x ^= x >> 16;
        return x;
    }

    /* Dropout by index: entry i of a draw of `key` is 0 with probability p, else 1 / (1 - p),
       from a hash of (key, i) alone, so that threads share a draw in any slices and it is the
       same whatever their number (a draw has fewer than 2^32 entries). Entries lo .. hi - 1;
       values *= mask unless values is NULL. 32-bit products, so that it vectorises. */
    __attribute__((target_clones("avx512f", "avx2", "default"), unused))
    static void nplm_dropout_at(float *restrict values, float *restrict mask, long lo, long hi, float p,
                                unsigned long long key) {
        const float kept = 1 / (1 - p);
        const uint32_t low = (uint32_t) key, high = (uint32_t) (key >> 32);
        for (long i = lo; i < hi; i++) {
            uint32_t h = nplm_mix32(nplm_mix32((uint32_t) i + low) ^ high);
            mask[i] = (float) (h >> 8) * (1.0f / 16777216.0f) < p ? 0.0f : kept;
        }
        if (values != NULL)
            for (long i = lo; i < hi; i++)
                values[i] *= mask[i];
    }
    """
    void dropout_at "nplm_dropout_at"(float *values, float *mask, Py_ssize_t lo, Py_ssize_t hi, float p,
                                      unsigned long long key) noexcept nogil


cdef extern from *:
    """
    #include <math.h>
    /* The logistic function, kept finite under -ffast-math: below -88 expf(-z) overflows,
       and the vectorised 1 / (1 + inf) is then NaN (libmvec's expf), so one saturated gate
       (after weight drop and dropout scaled the weights up) once turned a whole LSTM into
       NaN mid-training. Below -80 it is 1.8e-35, as good as its true value. */
    #define NPLM_LOGISTIC(z) (1 / (1 + expf(-fmaxf((z), -80.0f))))

    /* Whether x is finite, by its exponent's bits: -ffast-math lets the compiler take
       isfinite() and x == x as always true. */
    #include <stdint.h>
    #include <string.h>
    static inline int nplm_finite(double x) {
        uint64_t bits;
        memcpy(&bits, &x, sizeof bits);
        return (bits & 0x7ff0000000000000ULL) != 0x7ff0000000000000ULL;
    }

    /* One LSTM step's cells for `rows` streams, tanh as the activation: z holds each row's
       pre-activations of the gates i, f, o, g (h each; the peepholes P added when not
       NULL), replaced by the gates; c = f cp + i g and s = o tanh(c). Its loops vectorise
       (libmvec's expf and tanhf), in a clone for each of AVX-512, AVX2 and the baseline,
       picked at load time: the scalar libm calls were an eighth of LSTM training. */
    __attribute__((target_clones("avx512f", "avx2", "default"), unused))
    static void nplm_lstm_cells(float *restrict z, const float *restrict cp, const float *restrict P,
                                float *restrict c, float *restrict s, int rows, int h) {
        for (int r = 0; r < rows; r++) {
            float *restrict zi = z + (long) r * 4 * h;
            float *restrict zf = zi + h, *restrict zo = zi + 2 * h, *restrict zg = zi + 3 * h;
            const float *restrict cr = cp + (long) r * h;
            float *restrict cn = c + (long) r * h, *restrict sn = s + (long) r * h;
            if (P)
                for (int j = 0; j < h; j++) {
                    zi[j] += P[j] * cr[j];
                    zf[j] += P[h + j] * cr[j];
                    zo[j] += P[2 * h + j] * cr[j];
                }
            for (int j = 0; j < h; j++) {
                float gi = NPLM_LOGISTIC(zi[j]), gf = NPLM_LOGISTIC(zf[j]);
                float go = NPLM_LOGISTIC(zo[j]), gg = tanhf(zg[j]);
                zi[j] = gi;
                zf[j] = gf;
                zo[j] = go;
                zg[j] = gg;
                cn[j] = gf * cr[j] + gi * gg;
                sn[j] = go * tanhf(cn[j]);
            }
        }
    }

    /* Back through one LSTM step's cells (tanh; the gates in z, the cells before in cp and
       tanh of the cells after in tanh_c): from dL/ds (ds) and dL/dc carried back (dc,
       replaced by dL/d(cell before), times keep[r], the stream's reset mask), dL/d(gate
       pre-activations) into dz and the peepholes' gradient added to gP (when P is not
       NULL). Vectorised as nplm_lstm_cells is. */
    __attribute__((target_clones("avx512f", "avx2", "default"), unused))
    static void nplm_lstm_cells_backward(const float *restrict z, const float *restrict cp,
                                         const float *restrict tanh_c, const float *restrict ds,
                                         float *restrict dc, const float *restrict keep, const float *restrict P,
                                         float *restrict gP, float *restrict dz, int rows, int h) {
        for (int r = 0; r < rows; r++) {
            const float *restrict zi = z + (long) r * 4 * h;
            const float *restrict zf = zi + h, *restrict zo = zi + 2 * h, *restrict zg = zi + 3 * h;
            float *restrict di = dz + (long) r * 4 * h;
            float *restrict df = di + h, *restrict dout = di + 2 * h, *restrict dg = di + 3 * h;
            const float *restrict cr = cp + (long) r * h, *restrict ac = tanh_c + (long) r * h;
            const float *restrict dsr = ds + (long) r * h;
            float *restrict dcr = dc + (long) r * h;
            float kept = keep[r];
            for (int j = 0; j < h; j++) {
                float gi = zi[j], gf = zf[j], go = zo[j], gg = zg[j];
                float dcell = dcr[j] + dsr[j] * go * (1 - ac[j] * ac[j]);
                di[j] = dcell * gg * gi * (1 - gi);
                df[j] = dcell * cr[j] * gf * (1 - gf);
                dout[j] = dsr[j] * ac[j] * go * (1 - go);
                dg[j] = dcell * gi * (1 - gg * gg);
                dcr[j] = dcell * gf;
            }
            if (P) {
                for (int j = 0; j < h; j++) {
                    dcr[j] += P[j] * di[j] + P[h + j] * df[j] + P[2 * h + j] * dout[j];
                    gP[j] += di[j] * cr[j];
                    gP[h + j] += df[j] * cr[j];
                    gP[2 * h + j] += dout[j] * cr[j];
                }
            }
            for (int j = 0; j < h; j++)
                dcr[j] *= kept;
        }
    }

    /* Adam's step of one parameter array (Kingma & Ba 2015, Algorithm 1) in float, from
       the gradient times `clipped`; c1, c2 the bias corrections. Vectorised as
       nplm_lstm_cells is (it was a double-precision loop of two lanes). */
    __attribute__((target_clones("avx512f", "avx2", "default"), unused))
    static void nplm_adam_step(float *restrict param, const float *restrict grad, float *restrict m,
                               float *restrict v, long size, float rate, float clipped, float beta1, float rest1,
                               float beta2, float rest2, float c1, float c2, float epsilon) {
        for (long i = 0; i < size; i++) {
            float g = clipped * grad[i];
            m[i] = beta1 * m[i] + rest1 * g;
            v[i] = beta2 * v[i] + rest2 * g * g;
            /* v / c2 at least FLT_MIN: -ffast-math's vectorised sqrtf (x rsqrt(x)) is NaN for a
               denormal x, and Adam's v decays into denormals where a gradient stays near 0 (it
               made 6 weights of brown-best's LSTM NaN); below FLT_MIN the step is the same. */
            param[i] -= rate * (m[i] / c1) / (sqrtf(fmaxf(v[i] / c2, 1.17549435e-38f)) + epsilon);
        }
    }

    /* out = tanh(in), vectorised as nplm_lstm_cells is. */
    __attribute__((target_clones("avx512f", "avx2", "default"), unused))
    static void nplm_tanh_into(float *restrict out, const float *restrict in, long size) {
        for (long i = 0; i < size; i++)
            out[i] = tanhf(in[i]);
    }
    """
    void lstm_cells "nplm_lstm_cells"(float *z, const float *cp, const float *P, float *c, float *s, int rows,
                                      int h) noexcept nogil
    void lstm_cells_backward "nplm_lstm_cells_backward"(const float *z, const float *cp, const float *tanh_c,
                                                        const float *ds, float *dc, const float *keep, const float *P,
                                                        float *gP, float *dz, int rows, int h) noexcept nogil
    void adam_step "nplm_adam_step"(float *param, const float *grad, float *m, float *v, long size, float rate,
                                    float clipped, float beta1, float rest1, float beta2, float rest2, float c1,
                                    float c2, float epsilon) noexcept nogil
    void tanh_into "nplm_tanh_into"(float *out, const float *values, long size) noexcept nogil
    float logistic "NPLM_LOGISTIC"(float z) noexcept nogil
    bint finite "nplm_finite"(double x) noexcept nogil


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


cdef struct Adam:
    double beta1, beta2, epsilon   # the trainer's (Kingma & Ba 2015, Algorithm 1)
    double rest1, rest2            # 1 - beta1, 1 - beta2
    float c1, c2                   # the bias corrections of this step


cdef inline void update(float *param, const float *grad, float *m, float *v, Py_ssize_t size, float rate,
                        float clipped, const Adam *adam) noexcept nogil:
    """param -= rate g for g = clipped grad, or with Adam's moments m and v (given) and
    their bias corrections c1, c2: param -= rate m / c1 / (sqrt(v / c2) + epsilon)."""
    cdef Py_ssize_t i
    if m == NULL:
        for i in range(size):
            param[i] -= rate * clipped * grad[i]
        return
    adam_step(param, grad, m, v, size, rate, clipped, adam.beta1, adam.rest1, adam.beta2, adam.rest2, adam.c1,
              adam.c2, adam.epsilon)


cdef inline void adam_corrections(Adam *adam, double steps) noexcept nogil:
    """Adam's bias corrections after `steps` steps: 1 - beta1^t and 1 - beta2^t."""
    adam.c1 = <float> (1 - adam.beta1 ** steps)
    adam.c2 = <float> (1 - adam.beta2 ** steps)
