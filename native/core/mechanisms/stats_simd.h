/* The vectorised pass of the statistics for fp32, fp16 and bf16 (AVX2,
 * F16C, FMA where the CPU has them; stats.c falls back to its scalar loop). */
#ifndef MSP_STATS_SIMD_H
#define MSP_STATS_SIMD_H

#include <math.h>
#include <stdint.h>

#include "float_acc.h"

/* The order of max/min: numeric, and +0 above -0 (IEEE 754-2019's maximum
 * and minimum), so that the vector pass, which compares bit patterns, and the
 * scalar loop pick the same zero. */
static inline int msp_stats_above(double v, double m)
{
    return v > m || (v == m && !signbit(v) && signbit(m));
}

/* Folds the n elements of `data` (of dtype MSP_DT_FLOAT, MSP_DT_FLOAT16 or
 * MSP_DT_BF16) into a and returns 1, or returns 0 when the CPU lacks
 * AVX2/F16C/FMA. Sums are in double, max/min and the counts exact. With
 * lanes (XXH64's, NULL: none), each whole 32-byte stripe of data is folded
 * into them too, in the same loop: the hash's multiplies run beside the
 * statistics' conversions. */
int msp_stats_simd(int dtype, const void *data, uint64_t n, struct msp_float_acc *a,
                   uint64_t *lanes);

/* For the unit tests: 1 makes msp_stats_simd take nothing, so stats.c's scalar
 * loop does all, as on a CPU without AVX2; 0 asks the CPU again. */
void msp_stats_simd_off(int off);

#endif
