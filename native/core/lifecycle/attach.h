/* Lazy attach on the first hook call. Loading the library only registers
 * the hooks' answerers (hooks.c); the first hook after that attaches. */
#ifndef MSP_ATTACH_H
#define MSP_ATTACH_H

#include "state.h"

void msp_attach_slow(void);

static inline void msp_ensure_attached(void)
{
    if (__builtin_expect(__atomic_load_n(&g_msp.attach_state, __ATOMIC_ACQUIRE) != MSP_ATTACH_DONE,
                         0))
        msp_attach_slow();
}

#endif
