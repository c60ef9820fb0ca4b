/* The vectorised statistics pass for fp32, fp16 and bf16 (AVX2, F16C, FMA when
 * the CPU has them; stats_simd.h).
 *
 * Each 32 bytes are read twice: as integers, 16 or 32 bits a lane, for the
 * zero count and max/min, and converted to double for the sums (the float to
 * double conversion is what bounds the pass). max/min run on the raw bit
 * patterns: a lane's largest signed pattern is the largest value when the lane
 * saw a non-negative one, its smallest unsigned pattern the smallest
 * non-negative value or else the largest negative one, its largest unsigned
 * pattern the smallest negative value, when it saw one. NaN and infinities are
 * rare, so they are looked for once a chunk in those patterns, and only a chunk
 * holding one is read a third time, to count them and to keep NaN out of
 * max/min. The last n % 8 (fp32) or 16 elements make one more, padded vector.
 *
 * With XXH64's lanes, each vector is also one stripe of the content hash,
 * folded in the same loop: its scalar multiplies run beside the conversions on
 * other ports. On the 2-core EPYC (Zen 4) of `make bench`, 24 MiB, one
 * thread's CPU time: fp16 statistics then hash 6.8 GB/s, one loop 9.2 GB/s
 * (bf16 6.8 -> 9.4, fp32 9.2 -> 13.0); the lanes in AVX-512 vectors made it
 * 6.9 GB/s (their multiplies take the vector ports). */
#include "stats_simd.h"

static int g_simd; /* 0 unknown, 1 no, 2 yes; every thread finds the same */

void msp_stats_simd_off(int off)
{
    __atomic_store_n(&g_simd, off ? 1 : 0, __ATOMIC_RELAXED);
}

/* Elsewhere (aarch64: Kunpeng hosts) stats.c's scalar loop does all. */
#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#include <string.h>

#include "dtype.h"
#include "hash_lane.h"

/* (the vectors here are written by hand: the compiler's own would take the
 * hash's lanes, see stripe) */
#define SIMD __attribute__((target("avx2,fma,f16c"), optimize("no-tree-vectorize")))
/* inlined with a constant dtype, so each pass is compiled for one format */
#define INLINE SIMD static inline __attribute__((always_inline))
#define VEC 32 /* bytes of one vector */
/* Vectors a chunk: NaN and infinities are looked for once a chunk. */
#define CHUNK 4
/* Vectors a block of lane counters: a 16-bit lane counts at most one element
 * a vector, so stays below 2^15; a multiple of CHUNK. */
#define BLOCK (1 << 14)
/* Bytes a chunk asks the cache for ahead of what it reads. The pass converts
 * and adds while the next lines arrive; the hardware's own prefetch did not
 * keep up on the 2-core EPYC (Zen 2) of `make bench`: 32 MiB from memory, one
 * thread's CPU time, medians of 6 in turn, fp16 6.5-7.0 -> 8.2-8.3 GB/s, fp32
 * 7.7-8.6 -> 11.2-11.8 (1 KiB ahead: 7.9, 10.6; 8 KiB: as 4). A prefetch past
 * the data's end is only a hint: it never faults. */
#define PREFETCH_AHEAD 4096

/* ---- one format's lanes: 16 bits (fp16, bf16) or 32 (fp32) ---- */

INLINE int narrow(int dt) { return dt != MSP_DT_FLOAT; }

INLINE uint32_t sign_bit(int dt) { return narrow(dt) ? 0x8000 : 0x80000000u; }

INLINE uint32_t inf_bits(int dt)
{
    return dt == MSP_DT_FLOAT ? 0x7f800000u : dt == MSP_DT_FLOAT16 ? 0x7c00 : 0x7f80;
}

INLINE __m256i splat(int dt, uint32_t x)
{
    return narrow(dt) ? _mm256_set1_epi16((short)x) : _mm256_set1_epi32((int)x);
}

INLINE __m256i eq(int dt, __m256i a, __m256i b)
{
    return narrow(dt) ? _mm256_cmpeq_epi16(a, b) : _mm256_cmpeq_epi32(a, b);
}

INLINE __m256i gt(int dt, __m256i a, __m256i b) /* signed */
{
    return narrow(dt) ? _mm256_cmpgt_epi16(a, b) : _mm256_cmpgt_epi32(a, b);
}

/* A compare mask is -1 a lane, so subtracting it counts. */
INLINE __m256i count_in(int dt, __m256i counter, __m256i mask)
{
    return narrow(dt) ? _mm256_sub_epi16(counter, mask) : _mm256_sub_epi32(counter, mask);
}

INLINE __m256i max_s(int dt, __m256i a, __m256i b)
{
    return narrow(dt) ? _mm256_max_epi16(a, b) : _mm256_max_epi32(a, b);
}

INLINE __m256i min_u(int dt, __m256i a, __m256i b)
{
    return narrow(dt) ? _mm256_min_epu16(a, b) : _mm256_min_epu32(a, b);
}

INLINE __m256i max_u(int dt, __m256i a, __m256i b)
{
    return narrow(dt) ? _mm256_max_epu16(a, b) : _mm256_max_epu32(a, b);
}

INLINE __m256i load(const unsigned char *p)
{
    return _mm256_loadu_si256((const __m256i *)(const void *)p);
}

/* ---- the pass's state ---- */

struct sums {
    __m256d s[2], q[4]; /* enough that an add seldom waits for the one before */
};

struct order {
    __m256i smax, umin, umax; /* the patterns of the header comment */
};

struct rare {
    __m256i nan, pinf, ninf; /* per lane, within a block; only specials() counts them */
};

/* XXH64's four lanes, in registers while the pass runs */
struct lanes {
    uint64_t v[4];
};

/* Folds the 32-byte stripe at p into the lanes h (NULL: no hash, compiled
 * away). Four statements, and no auto-vectorisation in this file (SIMD): the
 * lanes then stay in general registers; vectorised, their 64-bit multiplies
 * were emulated on the vector ports and the loop ran at 2.8 GB/s. */
INLINE void stripe(struct lanes *h, const unsigned char *p)
{
    if (!h)
        return;
    h->v[0] = msp_hash_lane(h->v[0], p);
    h->v[1] = msp_hash_lane(h->v[1], p + 8);
    h->v[2] = msp_hash_lane(h->v[2], p + 16);
    h->v[3] = msp_hash_lane(h->v[3], p + 24);
}

/* Adds two vectors of doubles to the sums: to one running sum their sum, so
 * two keep up. */
INLINE void add_pair(struct sums *s, int k, __m256d a, __m256d b)
{
    s->s[k >> 1] = _mm256_add_pd(s->s[k >> 1], _mm256_add_pd(a, b));
    s->q[k] = _mm256_fmadd_pd(a, a, s->q[k]);
    s->q[k + 1] = _mm256_fmadd_pd(b, b, s->q[k + 1]);
}

INLINE __m256d f16x4(const unsigned char *p)
{
    return _mm256_cvtps_pd(_mm_cvtph_ps(_mm_loadl_epi64((const __m128i *)(const void *)p)));
}

INLINE void add_bf16x8(struct sums *s, int k, const unsigned char *p)
{
    /* bf16 is a float's top half: even elements shifted up, odd ones masked */
    __m128i w = _mm_loadu_si128((const __m128i *)(const void *)p);
    add_pair(s, k, _mm256_cvtps_pd(_mm_castsi128_ps(_mm_slli_epi32(w, 16))),
             _mm256_cvtps_pd(_mm_castsi128_ps(_mm_and_si128(w, _mm_set1_epi32(-65536)))));
}

/* Adds the j-th vector of a chunk, in double, to the sums; each 4 elements go
 * from memory straight into a conversion, with no extract. */
INLINE void fold_sums(int dt, const unsigned char *p, int j, struct sums *s)
{
    if (dt == MSP_DT_FLOAT) {
        const float *f = (const float *)(const void *)p;
        add_pair(s, (j & 1) * 2, _mm256_cvtps_pd(_mm_loadu_ps(f)), /* vectors take turns */
                 _mm256_cvtps_pd(_mm_loadu_ps(f + 4)));
    } else if (dt == MSP_DT_FLOAT16) {
        add_pair(s, 0, f16x4(p), f16x4(p + 8));
        add_pair(s, 2, f16x4(p + 16), f16x4(p + 24));
    } else {
        add_bf16x8(s, 0, p);
        add_bf16x8(s, 2, p + 16);
    }
}

/* Folds patterns into the running max/min. */
INLINE void fold_order(int dt, struct order *o, __m256i smax, __m256i umin, __m256i umax)
{
    o->smax = max_s(dt, o->smax, smax);
    o->umin = min_u(dt, o->umin, umin);
    o->umax = max_u(dt, o->umax, umax);
}

/* A chunk that holds NaN or an infinity, read again: counts them, and folds
 * its patterns into max/min with each NaN made -1 (neutral for the signed max
 * and the unsigned min) or 0 (for the unsigned max). Out of line, so that the
 * hot loop keeps its registers. */
SIMD static __attribute__((noinline)) void specials(int dt, const unsigned char *p, int nvec,
                                                    struct order *o, struct rare *c)
{
    const __m256i inf = splat(dt, inf_bits(dt)), ninf = splat(dt, inf_bits(dt) | sign_bit(dt));
    const __m256i magnitude = splat(dt, ~sign_bit(dt));
    for (int j = 0; j < nvec; j++) {
        __m256i r = load(p + j * VEC);
        __m256i nan = gt(dt, _mm256_and_si256(r, magnitude), inf);
        c->nan = count_in(dt, c->nan, nan);
        c->pinf = count_in(dt, c->pinf, eq(dt, r, inf));
        c->ninf = count_in(dt, c->ninf, eq(dt, r, ninf));
        __m256i kept = _mm256_or_si256(r, nan);
        fold_order(dt, o, kept, kept, _mm256_andnot_si256(nan, r));
    }
}

/* nvec (a constant) vectors: zeros and sums as they come, each a stripe of the
 * hash too; max/min from the chunk's patterns unless it holds a NaN or an
 * infinity. The sums read the same bytes at q (the tail: a copy padded otherwise). */
INLINE void chunk(int dt, const unsigned char *p, const unsigned char *q, int nvec,
                  struct sums *s, struct order *o, __m256i *zero, struct rare *c,
                  struct lanes *h)
{
    const __m256i magnitude = splat(dt, ~sign_bit(dt));
    __m256i smax = load(p), umin = smax, umax = smax;
#pragma GCC unroll 4
    for (int j = 0; j < nvec; j++) {
        __m256i r = load(p + j * VEC);
        if (j) {
            smax = max_s(dt, smax, r);
            umin = min_u(dt, umin, r);
            umax = max_u(dt, umax, r);
        }
        *zero = count_in(dt, *zero,
                         eq(dt, _mm256_and_si256(r, magnitude), _mm256_setzero_si256()));
        fold_sums(dt, q + j * VEC, j, s);
        stripe(h, p + j * VEC);
    }
    /* +Inf and positive NaN top the signed patterns, -Inf and negative NaN the unsigned */
    const __m256i ninf = splat(dt, inf_bits(dt) | sign_bit(dt));
    __m256i hot = _mm256_or_si256(gt(dt, smax, splat(dt, inf_bits(dt) - 1)),
                                  eq(dt, max_u(dt, umax, ninf), umax));
    if (_mm256_testz_si256(hot, hot))
        fold_order(dt, o, smax, umin, umax);
    else
        specials(dt, p, nvec, o, c);
}

/* ---- reductions across lanes ---- */

/* Adds the block's counts to a: the four counters' lanes summed together. */
INLINE void add_counts(int dt, struct rare c, __m256i zero, struct msp_float_acc *a)
{
    if (narrow(dt)) { /* pairs of 16-bit counts (each below 2^15) into 32-bit sums */
        const __m256i ones = _mm256_set1_epi16(1);
        c.nan = _mm256_madd_epi16(c.nan, ones);
        c.pinf = _mm256_madd_epi16(c.pinf, ones);
        c.ninf = _mm256_madd_epi16(c.ninf, ones);
        zero = _mm256_madd_epi16(zero, ones);
    }
    /* each half: the sums of nan, pinf, ninf and zero over its four lanes */
    __m256i h = _mm256_hadd_epi32(_mm256_hadd_epi32(c.nan, c.pinf),
                                  _mm256_hadd_epi32(c.ninf, zero));
    uint32_t t[4];
    _mm_storeu_si128((__m128i *)(void *)t, _mm_add_epi32(_mm256_castsi256_si128(h),
                                                         _mm256_extracti128_si256(h, 1)));
    a->nan += t[0];
    a->pinf += t[1];
    a->ninf += t[2];
    a->zero += t[3];
}

INLINE double hsum_pd(__m256d a, __m256d b, __m256d c, __m256d d)
{
    double l[4];
    _mm256_storeu_pd(l, _mm256_add_pd(_mm256_add_pd(a, b), _mm256_add_pd(c, d)));
    return (l[0] + l[1]) + (l[2] + l[3]);
}

enum order_op { SMAX, UMIN, UMAX };

INLINE __m256i apply(int dt, enum order_op f, __m256i a, __m256i b)
{
    return f == SMAX ? max_s(dt, a, b) : f == UMIN ? min_u(dt, a, b) : max_u(dt, a, b);
}

/* The largest or smallest lane of v: halves folded onto each other down to lane 0. */
INLINE uint32_t across(int dt, enum order_op f, __m256i v)
{
    v = apply(dt, f, v, _mm256_permute2x128_si256(v, v, 1));
    v = apply(dt, f, v, _mm256_shuffle_epi32(v, 0x4e));
    v = apply(dt, f, v, _mm256_shuffle_epi32(v, 0xb1));
    if (narrow(dt))
        return (uint32_t)_mm256_cvtsi256_si32(apply(dt, f, v, _mm256_srli_epi32(v, 16))) & 0xffff;
    return (uint32_t)_mm256_cvtsi256_si32(v);
}

/* The value of a pattern. */
INLINE double decode(int dt, uint32_t bits)
{
    float f;
    if (dt == MSP_DT_FLOAT16)
        return _cvtsh_ss((unsigned short)bits);
    if (dt == MSP_DT_BF16)
        bits <<= 16;
    memcpy(&f, &bits, sizeof f);
    return f;
}

/* Reduces the running patterns to the max and min values. */
INLINE void max_min(int dt, const struct order *o, double *mx, double *mn)
{
    uint32_t sign = sign_bit(dt), s = across(dt, SMAX, o->smax), lo = across(dt, UMIN, o->umin),
             hi = across(dt, UMAX, o->umax);
    *mx = decode(dt, s & sign ? lo : s); /* a non-negative value, else the largest negative */
    *mn = decode(dt, hi & sign ? hi : lo);
}

/* ---- the pass ---- */

/* nvec (at most BLOCK) vectors, as chunk() reads them; their counts and sums
 * added to a. Sums too go a block at a time: a running sum takes 2^13 adds,
 * not n/8. */
INLINE void block(int dt, const unsigned char *p, const unsigned char *q, uint64_t nvec,
                  struct order *o, struct msp_float_acc *a, struct lanes *h)
{
    struct rare c = {_mm256_setzero_si256(), _mm256_setzero_si256(), _mm256_setzero_si256()};
    __m256i zero = _mm256_setzero_si256();
    struct sums s;
    s.s[0] = s.s[1] = _mm256_setzero_pd();
    for (int k = 0; k < 4; k++)
        s.q[k] = _mm256_setzero_pd();
    uint64_t v = 0;
    for (; nvec - v >= CHUNK; v += CHUNK) {
        /* whole chunks only: the padded tail is a copy on the stack */
        _mm_prefetch((const char *)(p + v * VEC) + PREFETCH_AHEAD, _MM_HINT_T0); /* two lines */
        _mm_prefetch((const char *)(p + v * VEC) + PREFETCH_AHEAD + 64, _MM_HINT_T0);
        chunk(dt, p + v * VEC, q + v * VEC, CHUNK, &s, o, &zero, &c, h);
    }
    for (; v < nvec; v++)
        chunk(dt, p + v * VEC, q + v * VEC, 1, &s, o, &zero, &c, h);
    add_counts(dt, c, zero, a);
    a->sum += hsum_pd(s.s[0], s.s[1], _mm256_setzero_pd(), _mm256_setzero_pd());
    a->sumsq += hsum_pd(s.q[0], s.q[1], s.q[2], s.q[3]);
}

/* h: the lanes the whole vectors are folded into, or NULL; the padded tail
 * is not. */
INLINE void pass(int dt, const unsigned char *p, uint64_t n, struct msp_float_acc *a,
                 struct lanes *h)
{
    uint64_t per = VEC / (narrow(dt) ? 2 : 4), nvec = n / per, rest = n % per, nan0 = a->nan;
    /* neutral: the smallest signed pattern, the largest and smallest unsigned ones */
    struct order o = {splat(dt, sign_bit(dt)), _mm256_set1_epi32(-1), _mm256_setzero_si256()};
    for (uint64_t v = 0; v < nvec; v += BLOCK)
        block(dt, p + v * VEC, p + v * VEC, nvec - v > BLOCK ? BLOCK : nvec - v, &o, a, h);
    if (rest) {
        /* the last elements, one vector of them: padded with NaN (all bits set)
         * for the counts and max/min, whose NaN count then drops the pads, and
         * with zeros for the sums */
        unsigned char nans[VEC], zeros[VEC] = {0};
        memset(nans, 0xff, VEC);
        memcpy(nans, p + nvec * VEC, rest * (VEC / per));
        memcpy(zeros, p + nvec * VEC, rest * (VEC / per));
        block(dt, nans, zeros, 1, &o, a, NULL);
        a->nan -= per - rest;
    }
    if (a->nan - nan0 < n) {
        double mx, mn;
        max_min(dt, &o, &mx, &mn);
        if (!a->seen || msp_stats_above(mx, a->max))
            a->max = mx;
        if (!a->seen || msp_stats_above(a->min, mn))
            a->min = mn;
        a->seen = 1;
    }
}

/* One pass a format, with the lanes in registers (a local copy) or without them. */
#define PASS(NAME, DT)                                                                            \
    SIMD static void NAME(const void *p, uint64_t n, struct msp_float_acc *a, uint64_t *lanes)    \
    {                                                                                             \
        if (!lanes) {                                                                             \
            pass(DT, p, n, a, NULL);                                                              \
            return;                                                                               \
        }                                                                                         \
        struct lanes h;                                                                           \
        memcpy(h.v, lanes, sizeof h.v);                                                           \
        pass(DT, p, n, a, &h);                                                                    \
        memcpy(lanes, h.v, sizeof h.v);                                                           \
    }
PASS(pass_f32, MSP_DT_FLOAT)
PASS(pass_f16, MSP_DT_FLOAT16)
PASS(pass_bf16, MSP_DT_BF16)

int msp_stats_simd(int dtype, const void *data, uint64_t n, struct msp_float_acc *a,
                   uint64_t *lanes)
{
    int k = __atomic_load_n(&g_simd, __ATOMIC_RELAXED);
    if (!k) {
        __builtin_cpu_init();
        k = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
                    __builtin_cpu_supports("f16c") ? 2 : 1;
        __atomic_store_n(&g_simd, k, __ATOMIC_RELAXED);
    }
    if (k != 2)
        return 0;
    switch (dtype) {
    case MSP_DT_FLOAT: pass_f32(data, n, a, lanes); return 1;
    case MSP_DT_FLOAT16: pass_f16(data, n, a, lanes); return 1;
    case MSP_DT_BF16: pass_bf16(data, n, a, lanes); return 1;
    default: return 0;
    }
}
#else
int msp_stats_simd(int dtype, const void *data, uint64_t n, struct msp_float_acc *a,
                   uint64_t *lanes)
{
    (void)dtype, (void)data, (void)n, (void)a, (void)lanes;
    return 0;
}
#endif
