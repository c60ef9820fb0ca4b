/* The vectorised pass of the statistics for fp32, fp16 and bf16 (AVX2,
 * F16C, FMA where the CPU has them; stats.c falls back to its scalar loop
 * and finishes the tail). */
#ifndef MSP_STATS_SIMD_H
#define MSP_STATS_SIMD_H

#include <stdint.h>

/* What one pass accumulates; max/min cover the non-NaN elements (`seen`). */
struct msp_float_acc {
    uint64_t nan, pinf, ninf, zero;
    int seen;
    double max, min, sum, sumsq;
};

/* Folds the first elements of `data` (n elements of dtype MSP_DT_FLOAT,
 * MSP_DT_FLOAT16 or MSP_DT_BF16) into a, 8 at a time, and returns how many
 * it took: a multiple of 8, or 0 when the CPU lacks AVX2/F16C/FMA. Sums are
 * in double (four lanes per half), max/min and the counts exact. */
uint64_t msp_stats_simd(int dtype, const void *data, uint64_t n, struct msp_float_acc *a);

#endif
