/* What a statistics pass accumulates of float values: stats.c's loops and
 * the vector pass of stats_simd.c fold into it, stats.c's accumulator holds
 * one (stats.h). */
#ifndef MSP_FLOAT_ACC_H
#define MSP_FLOAT_ACC_H

#include <stdint.h>

/* max/min cover the non-NaN elements (`seen`). */
struct msp_float_acc {
    uint64_t nan, pinf, ninf, zero;
    int seen;
    double max, min, sum, sumsq;
};

#endif
