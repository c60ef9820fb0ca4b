/* Tensor statistics computed on the writer threads from the host copy. */
#ifndef MSP_STATS_H
#define MSP_STATS_H

#include <stddef.h>
#include <stdint.h>

#include "float_acc.h"
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

/* The same statistics from a tensor fed in pieces (the writer computes them
 * piece by piece as it writes them): begin as msp_stats_compute checks, feed
 * every byte in order, then end gives what msp_stats_compute gives for the
 * whole. */
struct msp_stats_acc {
    int dtype;
    uint64_t esize, count;                /* element size, elements fed */
    struct msp_float_acc a;
    int64_t imax, imin;
    uint64_t umax, umin;
    double best, worst, sre, sim;         /* complex64: |z|^2 of cmax, cmin; the sums */
    double cmax[2], cmin[2];
};
/* Every feed but the last takes a multiple of MSP_STATS_PIECE bytes (the
 * vector pass sums a block of this size at a time: pieces of it add up to
 * the same doubles). */
#define MSP_STATS_PIECE (UINT64_C(512) << 10)
int msp_stats_begin(struct msp_stats_acc *acc, int dtype, uint64_t size, char *note,
                    size_t notelen);
/* Feeds len bytes. lanes (NULL: none) are XXH64's four lanes
 * (msprobe_atb/content_hash.h): the vector pass folds each whole 32-byte
 * stripe of data into them as it reads it, and returns how many bytes it
 * folded from data's start (0 where there is no vector pass). */
uint64_t msp_stats_feed(struct msp_stats_acc *acc, const void *data, uint64_t len,
                        uint64_t *lanes);
void msp_stats_end(const struct msp_stats_acc *acc, struct msp_stats *out);

/* Appends the stats object of docs/contracts.md §4. */
void msp_stats_json(struct jbuf *b, const struct msp_stats *s);

/* Exact decoders, exposed for the unit tests. */
float msp_fp16_to_float(uint16_t h);
float msp_bf16_to_float(uint16_t h);
float msp_fp8_e4m3fn_to_float(uint8_t v);
float msp_fp8_e5m2_to_float(uint8_t v);

#endif
