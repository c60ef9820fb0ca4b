/* Shortest round-trip digits of a double and their layouts (shortest.h). The
 * digit search follows Ryu: the interval of decimals that round to v is scaled
 * by 10^-e10 with 125-bit approximations of 5^i and 2^k/5^i that are exact
 * enough for every double, then digits are removed while the interval still
 * holds a shorter number. */
#include "shortest.h"

#include <stdint.h>
#include <string.h>

#include "bytes.h"
#include "ing_pow5.h" /* ING_POW5_INV_SPLIT[342][2], ING_POW5_SPLIT[326][2], low word first */

#define MANTISSA_BITS 52
#define EXPONENT_BITS 11
#define BIAS 1023
#define POW5_INV_BITCOUNT 125
#define POW5_BITCOUNT 125

/* ceil(log2(5^e)) for 0 < e <= 3528, and 1 for e = 0 */
static inline int32_t pow5bits(int32_t e)
{
    return (int32_t)(((uint32_t)e * 1217359) >> 19) + 1;
}

/* floor(log10(2^e)) for 0 <= e <= 1650 */
static inline int32_t log10_pow2(int32_t e)
{
    return (int32_t)(((uint32_t)e * 78913) >> 18);
}

/* floor(log10(5^e)) for 0 <= e <= 2620 */
static inline int32_t log10_pow5(int32_t e)
{
    return (int32_t)(((uint32_t)e * 732923) >> 20);
}

static inline int pow5_factor(uint64_t v)
{
    int count = 0;
    while (v % 5 == 0) {
        v /= 5;
        count++;
    }
    return count;
}

static inline int multiple_of_pow5(uint64_t v, int32_t p)
{
    return pow5_factor(v) >= p;
}

static inline int multiple_of_pow2(uint64_t v, int32_t p)
{
    return (v & ((UINT64_C(1) << p) - 1)) == 0;
}

/* (m * mul) >> j, mul a 128-bit constant (low word first), j >= 64 */
static inline uint64_t mul_shift(uint64_t m, const uint64_t *mul, int32_t j)
{
    unsigned __int128 b0 = (unsigned __int128)m * mul[0];
    unsigned __int128 b2 = (unsigned __int128)m * mul[1];
    return (uint64_t)(((b0 >> 64) + b2) >> (j - 64));
}

/* The shortest digits of a positive finite double: v = *digits x 10^*exp10. */
static void shortest(uint64_t ieee_mantissa, uint32_t ieee_exponent, uint64_t *digits,
                     int32_t *exp10)
{
    int32_t e2;
    uint64_t m2;
    if (ieee_exponent == 0) {
        e2 = 1 - BIAS - MANTISSA_BITS - 2;
        m2 = ieee_mantissa;
    } else {
        e2 = (int32_t)ieee_exponent - BIAS - MANTISSA_BITS - 2;
        m2 = (UINT64_C(1) << MANTISSA_BITS) | ieee_mantissa;
    }
    const int even = (m2 & 1) == 0;
    const int accept_bounds = even;
    /* the interval [mm, mp] of the reals that round to v, times 4 */
    const uint64_t mv = 4 * m2;
    const uint32_t mm_shift = ieee_mantissa != 0 || ieee_exponent <= 1;
    uint64_t vr, vp, vm;
    int32_t e10;
    int vm_trailing_zeros = 0, vr_trailing_zeros = 0;
    if (e2 >= 0) {
        const int32_t q = log10_pow2(e2) - (e2 > 3);
        e10 = q;
        const int32_t k = POW5_INV_BITCOUNT + pow5bits(q) - 1;
        const int32_t i = -e2 + q + k;
        vr = mul_shift(4 * m2, ING_POW5_INV_SPLIT[q], i);
        vp = mul_shift(4 * m2 + 2, ING_POW5_INV_SPLIT[q], i);
        vm = mul_shift(4 * m2 - 1 - mm_shift, ING_POW5_INV_SPLIT[q], i);
        if (q <= 21) {
            /* only here can the scaled bounds be exact integers */
            if (mv % 5 == 0)
                vr_trailing_zeros = multiple_of_pow5(mv, q);
            else if (accept_bounds)
                vm_trailing_zeros = multiple_of_pow5(mv - 1 - mm_shift, q);
            else
                vp -= multiple_of_pow5(mv + 2, q);
        }
    } else {
        const int32_t q = log10_pow5(-e2) - (-e2 > 1);
        e10 = q + e2;
        const int32_t i = -e2 - q;
        const int32_t k = pow5bits(i) - POW5_BITCOUNT;
        const int32_t j = q - k;
        vr = mul_shift(4 * m2, ING_POW5_SPLIT[i], j);
        vp = mul_shift(4 * m2 + 2, ING_POW5_SPLIT[i], j);
        vm = mul_shift(4 * m2 - 1 - mm_shift, ING_POW5_SPLIT[i], j);
        if (q <= 1) {
            /* mv has at least q trailing zero bits here: vr is exact */
            vr_trailing_zeros = 1;
            if (accept_bounds)
                vm_trailing_zeros = mm_shift == 1;
            else
                --vp;
        } else if (q < 63) {
            vr_trailing_zeros = multiple_of_pow2(mv, q);
        }
    }
    int32_t removed = 0;
    uint8_t last_removed = 0;
    uint64_t out;
    if (vm_trailing_zeros || vr_trailing_zeros) {
        /* the rare exact cases: ties and bounds that are themselves decimals */
        while (vp / 10 > vm / 10) {
            vm_trailing_zeros &= vm % 10 == 0;
            vr_trailing_zeros &= last_removed == 0;
            last_removed = (uint8_t)(vr % 10);
            vr /= 10;
            vp /= 10;
            vm /= 10;
            removed++;
        }
        if (vm_trailing_zeros) {
            while (vm % 10 == 0) {
                vr_trailing_zeros &= last_removed == 0;
                last_removed = (uint8_t)(vr % 10);
                vr /= 10;
                vp /= 10;
                vm /= 10;
                removed++;
            }
        }
        if (vr_trailing_zeros && last_removed == 5 && vr % 2 == 0)
            last_removed = 4; /* round half to even */
        out = vr + ((vr == vm && (!accept_bounds || !vm_trailing_zeros)) || last_removed >= 5);
    } else {
        /* the digits removed decide only through the first of them: several at a time */
        int round_up = 0;
        while (vp / 10000 > vm / 10000) {
            round_up = vr % 10000 >= 5000;
            vr /= 10000;
            vp /= 10000;
            vm /= 10000;
            removed += 4;
        }
        if (vp / 100 > vm / 100) {
            round_up = vr % 100 >= 50;
            vr /= 100;
            vp /= 100;
            vm /= 100;
            removed += 2;
        }
        while (vp / 10 > vm / 10) {
            round_up = vr % 10 >= 5;
            vr /= 10;
            vp /= 10;
            vm /= 10;
            removed++;
        }
        out = vr + (vr == vm || round_up);
    }
    *exp10 = e10 + removed;
    while (out % 10 == 0) { /* repr prints no trailing zeros of the digits */
        out /= 10;
        ++*exp10;
    }
    *digits = out;
}

/* repr's layout (CPython's format_float_short, type 'r', with ".0" added to
 * integral values): exponential when the decimal point would be more than 16
 * places right of the first digit or 4 or more left of it; the positional
 * layout never is. */
size_t ing_shortest(double v, enum ing_layout layout, char *out)
{
    uint64_t bits;
    memcpy(&bits, &v, sizeof bits);
    const int sign = (int)(bits >> 63);
    const uint64_t mantissa = bits & ((UINT64_C(1) << MANTISSA_BITS) - 1);
    const uint32_t exponent = (uint32_t)((bits >> MANTISSA_BITS) & ((1u << EXPONENT_BITS) - 1));
    size_t n = 0;
    if (exponent == (1u << EXPONENT_BITS) - 1) {
        const char *s = mantissa ? "nan" : sign ? "-inf" : "inf";
        n = strlen(s);
        memcpy(out, s, n);
        return n;
    }
    if (sign)
        out[n++] = '-';
    if (exponent == 0 && mantissa == 0) {
        memcpy(out + n, "0.0", 3);
        return n + 3;
    }
    uint64_t digits;
    int32_t e10;
    shortest(mantissa, exponent, &digits, &e10);
    char buf[20];
    const char *d = digits_u64(digits, buf + sizeof buf);
    const int nd = (int)(buf + sizeof buf - d);
    const int32_t decpt = nd + e10; /* v = 0.d1d2... x 10^decpt */
    if (layout == ING_REPR && (decpt > 16 || decpt <= -4)) {
        out[n++] = d[0];
        if (nd > 1) {
            out[n++] = '.';
            memcpy(out + n, d + 1, (size_t)nd - 1);
            n += (size_t)nd - 1;
        }
        int32_t e = decpt - 1;
        out[n++] = 'e';
        out[n++] = e < 0 ? '-' : '+';
        if (e < 0)
            e = -e;
        if (e >= 100)
            out[n++] = (char)('0' + e / 100);
        out[n++] = (char)('0' + e / 10 % 10);
        out[n++] = (char)('0' + e % 10);
    } else if (decpt <= 0) {
        out[n++] = '0';
        out[n++] = '.';
        memset(out + n, '0', (size_t)-decpt);
        n += (size_t)-decpt;
        memcpy(out + n, d, (size_t)nd);
        n += (size_t)nd;
    } else if (decpt < nd) {
        memcpy(out + n, d, (size_t)decpt);
        n += (size_t)decpt;
        out[n++] = '.';
        memcpy(out + n, d + decpt, (size_t)(nd - decpt));
        n += (size_t)(nd - decpt);
    } else {
        memcpy(out + n, d, (size_t)nd);
        n += (size_t)nd;
        memset(out + n, '0', (size_t)(decpt - nd));
        n += (size_t)(decpt - nd);
        out[n++] = '.';
        out[n++] = '0';
    }
    return n;
}
