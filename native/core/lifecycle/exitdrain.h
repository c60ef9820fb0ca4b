/* Process exit: drain the copy queue for a bounded time, then record what
 * is left as lost, loudly (under the block policy, items that write no file,
 * statistics, are finished anyway); then wait, bounded, until the control plane has
 * written this process's derived files (statistic.csv, info/, the round
 * markers), so that a script running `model && msprobe-atb compare ...`
 * finds them, as it finds msProbe's. */
#ifndef MSP_EXITDRAIN_H
#define MSP_EXITDRAIN_H

#include <stdint.h>

/* The atexit handler (registered once per address space by attach). */
void msp_exit_drain(void);
/* MSPROBE_ATB_EXIT_DRAIN_S and MSPROBE_ATB_EXIT_BUILD_MS, read at attach. */
void msp_exit_drain_configure(uint64_t seconds, uint64_t build_ms);

#endif
