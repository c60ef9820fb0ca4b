/* Process exit: drain the copy queue for a bounded time, then record what
 * is left as lost, loudly. */
#ifndef MSP_EXITDRAIN_H
#define MSP_EXITDRAIN_H

#include <stdint.h>

/* The atexit handler (registered once per address space by attach). */
void msp_exit_drain(void);
/* MSPROBE_ATB_EXIT_DRAIN_S, read at attach. */
void msp_exit_drain_configure(uint64_t seconds);

#endif
