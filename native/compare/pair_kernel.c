/* Fused per-pair compare metrics: see pair_kernel.h.
 *
 * Built with -O3 -ffp-contract=off (no FMA contraction: the tolerance test
 * must round like numpy's separate multiply and add). On x86-64 the block
 * functions are cloned for x86-64-v3 (AVX2 + F16C) and chosen at load time;
 * the lane loops below are written so the compiler vectorizes them without
 * reassociating any sum. */
#include "pair_kernel.h"

#include <float.h>
#include <math.h>
#include <string.h>

#define BLOCK 2048 /* elements converted to double at a time (32 KiB for both sides); a
                    * multiple of the vector width, the tail is padded with zeros */

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define PK_CLONES __attribute__((target_clones("arch=x86-64-v3", "default")))
#define PK_F16C 1
#include <immintrin.h>

/* fp16 -> double with the F16C instruction, 8 at a time; returns how many it did. */
__attribute__((target("avx2,f16c"))) static int64_t f16_f16c(double *out, const uint16_t *s,
                                                             int64_t n)
{
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 f = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)(s + i)));
        _mm256_storeu_pd(out + i, _mm256_cvtps_pd(_mm256_castps256_ps128(f)));
        _mm256_storeu_pd(out + i + 4, _mm256_cvtps_pd(_mm256_extractf128_ps(f, 1)));
    }
    return i;
}
#else
#define PK_CLONES
#define PK_F16C 0
#endif

PK_CLONES
static void to_double(double *out, const void *src, int type, int64_t n)
{
    switch (type) {
    case PK_F64:
        memcpy(out, src, (size_t)n * sizeof(double));
        break;
    case PK_F32: {
        const float *s = src;
        for (int64_t i = 0; i < n; i++)
            out[i] = (double)s[i];
        break;
    }
    case PK_F16: {
        /* Exact: the magnitude bits shifted into a float32 are the value times
         * 2^-112 (normal or subnormal alike); the multiply restores it. The
         * all-ones exponent (Inf/NaN) maps to float32's. */
        const uint16_t *s = src;
        int64_t i = 0;
#if PK_F16C
        if (__builtin_cpu_supports("f16c") && __builtin_cpu_supports("avx2"))
            i = f16_f16c(out, s, n);
#endif
        for (; i < n; i++) {
            uint32_t h = s[i], mag = (h & 0x7fffu) << 13;
            uint32_t special = -(uint32_t)((h & 0x7c00u) == 0x7c00u);
            float f;
            memcpy(&f, &mag, sizeof f);
            f *= 0x1p112f;
            uint32_t bits;
            memcpy(&bits, &f, sizeof bits);
            bits = ((bits & ~special) | ((0x7f800000u | mag) & special)) | ((h & 0x8000u) << 16);
            memcpy(&f, &bits, sizeof f);
            out[i] = (double)f;
        }
        break;
    }
    default: { /* PK_BF16: the high half of a float32 */
        const uint16_t *s = src;
        for (int64_t i = 0; i < n; i++) {
            uint32_t bits = (uint32_t)s[i] << 16;
            float f;
            memcpy(&f, &bits, sizeof f);
            out[i] = (double)f;
        }
        break;
    }
    }
}

/* GCC/Clang vector extensions: 4 doubles per vector (two SSE2 registers on
 * baseline x86-64, one AVX2 register in the v3 clone, two NEON on arm64).
 * Comparisons give all-ones masks, so counts subtract masks and selections
 * are bitwise ands. */
typedef double vd __attribute__((vector_size(32)));
typedef int64_t vi __attribute__((vector_size(32)));
#define LANES 4
/* the same 4 lanes in float32, for msProbe's relative error */
typedef float vf4 __attribute__((vector_size(16)));
typedef int32_t vi4 __attribute__((vector_size(16)));

typedef struct {
    vi both, ok, same, diff, gn, gp, gm, tn, tp, tm;
    vd gg, tt, gt, dd, mx, mr;
    /* msProbe's relative error per lane: in float32, the fraction rn / rd with the largest
     * exact value so far (0 / 1 to start); in float64, the largest quotient itself in rn */
    vd rn, rd;
} lanes;

/* msProbe's relative error |(t-g)/g| (pk_acc.max_rel_ms) is computed without a division
 * per element: one had halved compare's throughput.
 *
 * rel_frac gives, on 4 lanes with a and b finite, the numerator |t-g| and denominator
 * |g| the formula divides: a zero golden and its target first raised by the machine
 * epsilon, in float32 when f32 is set (every value is then exactly a float; float
 * vectors round each step as numpy's float32 does), else in float64.
 *
 * Rounding is monotonic, so the largest rounded quotient is the rounded largest exact
 * quotient, and an element can raise a maximum m only if num / den > m exactly. In
 * float32, rel_step keeps per lane the fraction with the largest exact value, compared
 * by cross-multiplication in double, where a product of two floats is exact (48 bits,
 * and no float product leaves double's range); rel_of divides once per block. float64
 * has no such exact product and float64 pairs are rare: rel_step divides there.
 *
 * f32 is a constant at every call (always_inline), so each loop has only its path. */
static inline __attribute__((always_inline)) void rel_frac(vd a, vd b, const int f32, vd *num,
                                                           vd *den)
{
    if (f32) {
        const vf4 eps = (vf4){0, 0, 0, 0} + FLT_EPSILON;
        const vi4 absm = (vi4){0, 0, 0, 0} + INT32_MAX;
        vf4 fa = __builtin_convertvector(a, vf4), fb = __builtin_convertvector(b, vf4);
        vi4 z = fa == 0.0f;
        fa = (vf4)(((vi4)eps & z) | ((vi4)fa & ~z));
        fb = fb + (vf4)((vi4)eps & z); /* + 0 elsewhere: b is unchanged (|.| ignores -0) */
        vf4 n4 = (vf4)((vi4)(fb - fa) & absm), d4 = (vf4)((vi4)fa & absm);
        /* element-wise, which GCC 12 turns into one widening convert where
         * __builtin_convertvector went through the stack */
        *num = (vd){n4[0], n4[1], n4[2], n4[3]};
        *den = (vd){d4[0], d4[1], d4[2], d4[3]};
    } else {
        const vd eps = (vd){0, 0, 0, 0} + DBL_EPSILON;
        const vi absmask = (vi){0, 0, 0, 0} + INT64_MAX;
        vi z = a == 0.0;
        a = (vd)(((vi)eps & z) | ((vi)a & ~z));
        b = b + (vd)((vi)eps & z);
        *num = (vd)((vi)(b - a) & absmask);
        *den = (vd)((vi)a & absmask);
    }
}

/* One step of the per-lane maximum (lanes.rn, lanes.rd); a and b finite. */
static inline __attribute__((always_inline)) void rel_step(lanes *L, vd a, vd b, const int f32)
{
    vd num, den;
    rel_frac(a, b, f32, &num, &den);
    if (f32) {
        vi gt = num * L->rd > L->rn * den;
        L->rn = (vd)(((vi)num & gt) | ((vi)L->rn & ~gt));
        L->rd = (vd)(((vi)den & gt) | ((vi)L->rd & ~gt));
    } else {
        vd r = num / den;
        vi gt = r > L->rn;
        L->rn = (vd)(((vi)r & gt) | ((vi)L->rn & ~gt));
    }
}

/* The loop of block(), for a constant f32 (see rel_step). */
static inline __attribute__((always_inline)) void block_body(lanes *out, const double *g,
                                                             const double *t, int64_t n,
                                                             double rtol, double atol,
                                                             double floor, const int f32)
{
    const vi absmask = (vi){0, 0, 0, 0} + INT64_MAX;
    const vd inf = (vd){0, 0, 0, 0} + INFINITY, big = (vd){0, 0, 0, 0} + DBL_MAX;
    const vd vr = (vd){0, 0, 0, 0} + rtol, va = (vd){0, 0, 0, 0} + atol;
    const vd vf = (vd){0, 0, 0, 0} + floor;
    lanes L = *out; /* in registers for the loop: g and t cannot alias it */
    for (int64_t i = 0; i < n; i += LANES) {
        vd a, b;
        memcpy(&a, g + i, sizeof a);
        memcpy(&b, t + i, sizeof b);
        vi an = a != a, bn = b != b;
        vd aa = (vd)((vi)a & absmask);
        vi fa = aa <= big, fb = (vd)((vi)b & absmask) <= big;
        vi bf = fa & fb, nn = ~(fa | fb);
        vd d = (vd)((vi)(b - a) & absmask);
        vd am = (vd)((vi)a & bf), bm = (vd)((vi)b & bf), dm = (vd)((vi)d & bf);
        vi same = nn & ((an & bn) | (a == b));
        L.both -= bf;
        L.ok -= bf & (d <= va + vr * aa);
        L.same -= same;
        L.diff -= (fa ^ fb) | (nn & ~same);
        L.gn -= an;
        L.gp -= a == inf;
        L.gm -= a == -inf;
        L.tn -= bn;
        L.tp -= b == inf;
        L.tm -= b == -inf;
        L.gg += am * am;
        L.tt += bm * bm;
        L.gt += am * bm;
        L.dd += dm * dm;
        vi m1 = dm > L.mx;
        L.mx = (vd)(((vi)dm & m1) | ((vi)L.mx & ~m1));
        vd aam = (vd)((vi)aa & bf);
        vi m2 = aam > vf;
        vd r = dm / (vd)(((vi)aam & m2) | ((vi)vf & ~m2));
        vi m3 = r > L.mr;
        L.mr = (vd)(((vi)r & m3) | ((vi)L.mr & ~m3));
        rel_step(&L, am, bm, f32); /* a non-finite position is 0 on both sides: ratio 0 */
    }
    *out = L;
}

PK_CLONES
static void block(lanes *out, const double *g, const double *t, int64_t n, double rtol,
                  double atol, double floor, int f32)
{
    if (f32)
        block_body(out, g, t, n, rtol, atol, floor, 1);
    else
        block_body(out, g, t, n, rtol, atol, floor, 0);
}

/* The common case, a block with no NaN or Inf on either side: no masks, no
 * non-finite counts. Returns 0 (and leaves *out alone) if the block holds a
 * non-finite value, which the full block() then handles. */
static inline __attribute__((always_inline)) int finite_body(lanes *out, const double *g,
                                                             const double *t, int64_t n,
                                                             double rtol, double atol,
                                                             double floor, double ms,
                                                             const int f32)
{
    const vi absmask = (vi){0, 0, 0, 0} + INT64_MAX;
    const vd vr = (vd){0, 0, 0, 0} + rtol, va = (vd){0, 0, 0, 0} + atol;
    const vd vf = (vd){0, 0, 0, 0} + floor;
    lanes L = *out;
    vd probe = {0, 0, 0, 0}; /* (a - a) + (b - b) is NaN exactly where a or b is not finite */
    /* The relative error's division is the loop's slowest instruction, and only a new
     * maximum needs it: d / den > mr implies d > fl(mr * (1 - 2^-50) * den). The loop
     * only notes whether any element passes that test; if one did, a second pass over
     * the block takes the exact divisions (max is max: the result is bit for bit the
     * same), which after the first blocks of a tensor is rare. */
    const vd mr_lo = L.mr * ((vd){0, 0, 0, 0} + (1.0 - 0x1p-50));
    vi cand = {0, 0, 0, 0};
    /* the same for msProbe's relative error against its maximum so far, ms */
    const vd vms = (vd){0, 0, 0, 0} + ms;
    vi cand_ms = {0, 0, 0, 0};
    for (int64_t i = 0; i < n; i += LANES) {
        vd a, b;
        memcpy(&a, g + i, sizeof a);
        memcpy(&b, t + i, sizeof b);
        probe += (a - a) + (b - b);
        vd aa = (vd)((vi)a & absmask), diff = b - a;
        vd d = (vd)((vi)diff & absmask);
        L.ok -= d <= va + vr * aa;
        L.gg += a * a;
        L.tt += b * b;
        L.gt += a * b;
        L.dd += diff * diff;
        vi m1 = d > L.mx;
        L.mx = (vd)(((vi)d & m1) | ((vi)L.mx & ~m1));
        vi m2 = aa > vf;
        cand |= d > mr_lo * (vd)(((vi)aa & m2) | ((vi)vf & ~m2));
        /* Could it raise ms (msProbe's relative error, rel_frac)? Where g != 0, its
         * quotient is fl(num / |g|) with num = |t-g| rounded to the precision, which
         * d rounded to it is. Rounding being monotonic, the quotient exceeds ms only if
         * num > ms * |g| exactly: in float32 that product of floats is exact, in float64
         * num >= fl(ms * |g|) follows. Where g == 0 the test is num > 0 (or ms is
         * infinite, which nothing exceeds): the target raised by eps may raise ms. So
         * no element that could is missed, and the test is cheap; a tie with ms is no
         * candidate in float32 (frequent when the values are coarse). */
        if (f32) {
            vf4 d4 = __builtin_convertvector(d, vf4);
            vd num = (vd){d4[0], d4[1], d4[2], d4[3]}; /* see rel_frac */
            cand_ms |= num > vms * aa;
        } else {
            cand_ms |= (d >= vms * aa) & (d != 0.0);
        }
    }
    if (probe[0] != probe[0] || probe[1] != probe[1] || probe[2] != probe[2] ||
        probe[3] != probe[3])
        return 0;
    if (cand[0] | cand[1] | cand[2] | cand[3])
        for (int64_t i = 0; i < n; i += LANES) {
            vd a, b;
            memcpy(&a, g + i, sizeof a);
            memcpy(&b, t + i, sizeof b);
            vd aa = (vd)((vi)a & absmask), d = (vd)((vi)(b - a) & absmask);
            vi m2 = aa > vf;
            vd r = d / (vd)(((vi)aa & m2) | ((vi)vf & ~m2));
            vi m3 = r > L.mr;
            L.mr = (vd)(((vi)r & m3) | ((vi)L.mr & ~m3));
        }
    if (cand_ms[0] | cand_ms[1] | cand_ms[2] | cand_ms[3])
        for (int64_t i = 0; i < n; i += LANES) {
            vd a, b;
            memcpy(&a, g + i, sizeof a);
            memcpy(&b, t + i, sizeof b);
            rel_step(&L, a, b, f32);
        }
    L.both -= (vi){0, 0, 0, 0} - n / LANES;
    *out = L;
    return 1;
}

PK_CLONES
static int block_finite(lanes *out, const double *g, const double *t, int64_t n, double rtol,
                        double atol, double floor, double ms, int f32)
{
    return f32 ? finite_body(out, g, t, n, rtol, atol, floor, ms, 1)
               : finite_body(out, g, t, n, rtol, atol, floor, ms, 0);
}

static int64_t isum(vi v) { return v[0] + v[1] + v[2] + v[3]; }
static double dsum(vd v) { return (v[0] + v[1]) + (v[2] + v[3]); }
static double dmax(vd v)
{
    double a = v[0] > v[1] ? v[0] : v[1], b = v[2] > v[3] ? v[2] : v[3];
    return a > b ? a : b;
}

/* Neumaier: *s + *c is the running total. Once the total overflows, it stays
 * the plain IEEE sum (the compensation of an infinite sum would be NaN). */
static void add_comp(double *s, double *c, double x)
{
    double t = *s + x;
    if (fabs(t) <= DBL_MAX) {
        if (fabs(*s) >= fabs(x))
            *c += (*s - t) + x;
        else
            *c += (x - t) + *s;
    }
    *s = t;
}

/* The block's msProbe relative error from its lanes (see rel_step): in float32, the
 * lanes' largest fraction by the same exact comparison, divided once in float; the
 * rounded quotient of the largest exact fraction is the largest rounded quotient. */
static double rel_of(const lanes *L, int f32)
{
    if (!f32)
        return dmax(L->rn);
    double n = L->rn[0], d = L->rd[0];
    for (int j = 1; j < LANES; j++)
        if (L->rn[j] * d > n * L->rd[j]) {
            n = L->rn[j];
            d = L->rd[j];
        }
    return (double)((float)n / (float)d);
}

static int known(int type) { return type >= PK_F64 && type <= PK_BF16; }

static size_t width(int type) { return type == PK_F64 ? 8 : type == PK_F32 ? 4 : 2; }

int pk_accumulate(pk_acc *acc, const void *g, int gtype, const void *t, int ttype, int64_t n,
                  double rtol, double atol, double floor)
{
    if (!known(gtype) || !known(ttype))
        return -1;
    double gb[BLOCK] __attribute__((aligned(32))), tb[BLOCK] __attribute__((aligned(32)));
    const char *gp = g, *tp = t;
    /* msProbe's relative error in float32 when neither side is float64 (see pk_acc) */
    const int f32 = gtype != PK_F64 && ttype != PK_F64;
    for (int64_t off = 0; off < n; off += BLOCK) {
        int64_t k = n - off < BLOCK ? n - off : BLOCK;
        int64_t padded = (k + LANES - 1) / LANES * LANES;
        to_double(gb, gp + (size_t)off * width(gtype), gtype, k);
        to_double(tb, tp + (size_t)off * width(ttype), ttype, k);
        for (int64_t i = k; i < padded; i++)
            gb[i] = tb[i] = 0.0;
        lanes L;
        memset(&L, 0, sizeof L);
        /* starting from the running maximum changes no result (max is max) and lets
         * block_finite skip its divisions from the first element */
        L.mr = (vd){0, 0, 0, 0} + acc->max_rel;
        L.rd = (vd){0, 0, 0, 0} + 1.0; /* the float32 path's fractions start at 0 / 1 */
        if (!block_finite(&L, gb, tb, padded, rtol, atol, floor, acc->max_rel_ms, f32))
            block(&L, gb, tb, padded, rtol, atol, floor, f32);
        /* A zero pad element counts only as finite on both sides and within tolerance. */
        acc->n += k;
        acc->both += isum(L.both) - (padded - k);
        acc->ok += isum(L.ok) - (padded - k);
        acc->same_nf += isum(L.same);
        acc->nf_diff += isum(L.diff);
        acc->g_nan += isum(L.gn);
        acc->g_pinf += isum(L.gp);
        acc->g_ninf += isum(L.gm);
        acc->t_nan += isum(L.tn);
        acc->t_pinf += isum(L.tp);
        acc->t_ninf += isum(L.tm);
        add_comp(&acc->gg, &acc->gg_c, dsum(L.gg));
        add_comp(&acc->tt, &acc->tt_c, dsum(L.tt));
        add_comp(&acc->gt, &acc->gt_c, dsum(L.gt));
        add_comp(&acc->dd, &acc->dd_c, dsum(L.dd));
        double mx = dmax(L.mx), mr = dmax(L.mr);
        acc->max_d = mx > acc->max_d ? mx : acc->max_d;
        acc->max_rel = mr > acc->max_rel ? mr : acc->max_rel;
        /* a zero pad element is raised to eps / eps: relative error 0 */
        double rm = rel_of(&L, f32);
        acc->max_rel_ms = rm > acc->max_rel_ms ? rm : acc->max_rel_ms;
    }
    return 0;
}

void pk_merge(pk_acc *into, const pk_acc *from)
{
    into->n += from->n;
    into->both += from->both;
    into->ok += from->ok;
    into->same_nf += from->same_nf;
    into->nf_diff += from->nf_diff;
    into->g_nan += from->g_nan;
    into->g_pinf += from->g_pinf;
    into->g_ninf += from->g_ninf;
    into->t_nan += from->t_nan;
    into->t_pinf += from->t_pinf;
    into->t_ninf += from->t_ninf;
    add_comp(&into->gg, &into->gg_c, from->gg);
    add_comp(&into->gg, &into->gg_c, from->gg_c);
    add_comp(&into->tt, &into->tt_c, from->tt);
    add_comp(&into->tt, &into->tt_c, from->tt_c);
    add_comp(&into->gt, &into->gt_c, from->gt);
    add_comp(&into->gt, &into->gt_c, from->gt_c);
    add_comp(&into->dd, &into->dd_c, from->dd);
    add_comp(&into->dd, &into->dd_c, from->dd_c);
    into->max_d = from->max_d > into->max_d ? from->max_d : into->max_d;
    into->max_rel = from->max_rel > into->max_rel ? from->max_rel : into->max_rel;
    into->max_rel_ms = from->max_rel_ms > into->max_rel_ms ? from->max_rel_ms : into->max_rel_ms;
}
