/* Tensor statistics computed on the writer threads from the host copy. */
#ifndef MSP_STATS_H
#define MSP_STATS_H

#include <stddef.h>
#include <stdint.h>

#include "jsonw.h"

enum msp_stats_kind { MSP_STATS_FLOAT, MSP_STATS_INT, MSP_STATS_UINT, MSP_STATS_COMPLEX };

struct msp_stats {
    enum msp_stats_kind kind;
    uint64_t count;                       /* elements */
    uint64_t nan, pinf, ninf, zero;
    int has_minmax;                       /* 0: every element was NaN */
    double max, min;                      /* MSP_STATS_FLOAT */
    int64_t imax, imin;                   /* MSP_STATS_INT (and bool) */
    uint64_t umax, umin;                  /* MSP_STATS_UINT */
    double cmax[2], cmin[2], cmean[2];    /* MSP_STATS_COMPLEX: elements of max/min |z| */
    double mean, norm;                    /* over all elements; NaN propagates */
};

/* Computes the statistics of `size` bytes of dtype. Returns 0, or -1 with a
 * note ("unsupported dtype int4", "size 7 is not a multiple of 4 bytes",
 * "empty tensor") when there are none. Never reads past `size`. */
int msp_stats_compute(int dtype, const void *data, uint64_t size, struct msp_stats *out,
                      char *note, size_t notelen);

/* Appends the stats object of docs/contracts.md §4. */
void msp_stats_json(struct jbuf *b, const struct msp_stats *s);

/* Exact decoders, exposed for the unit tests. */
float msp_fp16_to_float(uint16_t h);
float msp_bf16_to_float(uint16_t h);
float msp_fp8_e4m3fn_to_float(uint8_t v);
float msp_fp8_e5m2_to_float(uint8_t v);

#endif
