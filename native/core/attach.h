/* Lazy attach on the first hook call. Loading the library does nothing at
 * all. */
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

/* Claims a slot in ctl and fills what the first attach sets in it (also
 * used for the fresh block of a re-attach). */
struct msp_proc *msp_attach_claim_slot(struct msp_control *ctl, int *slot);
/* Appends the `attach` record that begins a record log. */
void msp_attach_record(void);

#endif
