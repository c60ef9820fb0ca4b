/* The vectorised statistics pass for fp32, fp16 and bf16 (AVX2, F16C, FMA when
 * the CPU has them; stats_simd.h). */
#include "stats_simd.h"

#include <immintrin.h>
#include <math.h>

#include "dtype.h"

#define SIMD __attribute__((target("avx2,fma,f16c")))
/* Elements per round of 32-bit lane counters (each lane counts at most
 * BLOCK/8 per round, far below 2^31). */
#define BLOCK (UINT64_C(1) << 24)

SIMD static inline __m256 load_f32(const unsigned char *p)
{
    return _mm256_loadu_ps((const float *)(const void *)p);
}

SIMD static inline __m256 load_f16(const unsigned char *p)
{
    return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)p));
}

SIMD static inline __m256 load_bf16(const unsigned char *p)
{
    __m256i w = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(const void *)p));
    return _mm256_castsi256_ps(_mm256_slli_epi32(w, 16)); /* bf16 is a float's top half */
}

SIMD static inline uint64_t hsum_i32(__m256i v)
{
    int32_t l[8];
    _mm256_storeu_si256((__m256i *)(void *)l, v);
    uint64_t s = 0;
    for (int i = 0; i < 8; i++)
        s += (uint32_t)l[i];
    return s;
}

SIMD static inline double hsum_pd(__m256d v)
{
    double l[4];
    _mm256_storeu_pd(l, v);
    return (l[0] + l[1]) + (l[2] + l[3]);
}

SIMD static inline float hreduce(__m256 v, int want_max)
{
    float l[8];
    _mm256_storeu_ps(l, v);
    float r = l[0];
    for (int i = 1; i < 8; i++)
        r = want_max ? (l[i] > r ? l[i] : r) : (l[i] < r ? l[i] : r);
    return r;
}

/* One pass: max_ps/min_ps with the new value first keep the running value
 * when the new one is NaN, so NaNs never reach max/min; a NaN or infinity
 * reaches the double sums, as in numpy. A compare mask is -1 per lane, so
 * subtracting it counts. */
#define PASS(NAME, LOAD, ESIZE)                                                                   \
    SIMD static uint64_t NAME(const unsigned char *p, uint64_t n, struct msp_float_acc *a)        \
    {                                                                                             \
        const __m256 pinf = _mm256_set1_ps(INFINITY), ninf = _mm256_set1_ps(-INFINITY);          \
        const __m256 zero = _mm256_setzero_ps();                                                  \
        __m256 vmax = ninf, vmin = pinf;                                                          \
        __m256d s0 = _mm256_setzero_pd(), s1 = s0, q0 = s0, q1 = s0;                              \
        uint64_t nan0 = a->nan;                                                                   \
        uint64_t n8 = n & ~UINT64_C(7);                                                           \
        for (uint64_t done = 0; done < n8;) {                                                     \
            uint64_t end = n8 - done > BLOCK ? done + BLOCK : n8;                                 \
            __m256i cnan = _mm256_setzero_si256(), cpinf = cnan, cninf = cnan, czero = cnan;      \
            for (uint64_t i = done; i < end; i += 8) {                                            \
                __m256 v = LOAD(p + i * (ESIZE));                                                 \
                __m256d lo = _mm256_cvtps_pd(_mm256_castps256_ps128(v));                          \
                __m256d hi = _mm256_cvtps_pd(_mm256_extractf128_ps(v, 1));                        \
                s0 = _mm256_add_pd(s0, lo);                                                       \
                s1 = _mm256_add_pd(s1, hi);                                                       \
                q0 = _mm256_fmadd_pd(lo, lo, q0);                                                 \
                q1 = _mm256_fmadd_pd(hi, hi, q1);                                                 \
                vmax = _mm256_max_ps(v, vmax);                                                    \
                vmin = _mm256_min_ps(v, vmin);                                                    \
                cnan = _mm256_sub_epi32(cnan, _mm256_castps_si256(_mm256_cmp_ps(v, v, _CMP_UNORD_Q))); \
                cpinf = _mm256_sub_epi32(cpinf, _mm256_castps_si256(_mm256_cmp_ps(v, pinf, _CMP_EQ_OQ))); \
                cninf = _mm256_sub_epi32(cninf, _mm256_castps_si256(_mm256_cmp_ps(v, ninf, _CMP_EQ_OQ))); \
                czero = _mm256_sub_epi32(czero, _mm256_castps_si256(_mm256_cmp_ps(v, zero, _CMP_EQ_OQ))); \
            }                                                                                     \
            a->nan += hsum_i32(cnan);                                                             \
            a->pinf += hsum_i32(cpinf);                                                           \
            a->ninf += hsum_i32(cninf);                                                           \
            a->zero += hsum_i32(czero);                                                           \
            done = end;                                                                           \
        }                                                                                         \
        a->sum += hsum_pd(_mm256_add_pd(s0, s1));                                                 \
        a->sumsq += hsum_pd(_mm256_add_pd(q0, q1));                                               \
        if (a->nan - nan0 < n8) {                                                                   \
            double mx = hreduce(vmax, 1), mn = hreduce(vmin, 0);                                  \
            if (!a->seen || mx > a->max)                                                          \
                a->max = mx;                                                                      \
            if (!a->seen || mn < a->min)                                                          \
                a->min = mn;                                                                      \
            a->seen = 1;                                                                          \
        }                                                                                         \
        return n8;                                                                                \
    }

PASS(pass_f32, load_f32, 4)
PASS(pass_f16, load_f16, 2)
PASS(pass_bf16, load_bf16, 2)

uint64_t msp_stats_simd(int dtype, const void *data, uint64_t n, struct msp_float_acc *a)
{
    static int known; /* 0 unknown, 1 no, 2 yes; every thread finds the same */
    int k = __atomic_load_n(&known, __ATOMIC_RELAXED);
    if (!k) {
        __builtin_cpu_init();
        k = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
                    __builtin_cpu_supports("f16c") ? 2 : 1;
        __atomic_store_n(&known, k, __ATOMIC_RELAXED);
    }
    if (k != 2)
        return 0;
    switch (dtype) {
    case MSP_DT_FLOAT: return pass_f32(data, n, a);
    case MSP_DT_FLOAT16: return pass_f16(data, n, a);
    case MSP_DT_BF16: return pass_bf16(data, n, a);
    default: return 0;
    }
}
