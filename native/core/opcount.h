/* Runner setups seen (UpdateConfig calls). Each thread counts in its own
 * TLS word (hot.h: msp_hot_count_op, no call, no shared cache line); the
 * words of live threads are registered here so a flush can sum them, and a
 * thread's count is folded in when it exits. */
#ifndef MSP_OPCOUNT_H
#define MSP_OPCOUNT_H

#include <stdint.h>

uint64_t msp_ops_total(void);
/* Forked child: only the calling thread is left, with nothing counted. */
void msp_ops_reset(void);

#endif
