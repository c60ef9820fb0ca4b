/* Runner setups seen (UpdateConfig calls): per-thread counters, summed by
 * the monitor, so the hot path never writes a shared cache line. */
#ifndef MSP_OPCOUNT_H
#define MSP_OPCOUNT_H

#include <stdint.h>

void msp_count_op(void);
uint64_t msp_ops_total(void);
/* Zeroes every counter (a forked child counts its own ops). */
void msp_ops_reset(void);

#endif
