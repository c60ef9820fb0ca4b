/* Joining a control block: our slot in it and the record that opens our
 * record log. At the first attach and after a re-attach to a fresh tree. */
#ifndef MSP_JOIN_H
#define MSP_JOIN_H

#include "state.h"

/* Claims a slot in ctl and fills what `status` shows of us from the start
 * (ABI, device, an ABI mismatch); the private dummy if the table is full.
 * *slot: its index, -1 for the dummy. */
struct msp_proc *msp_join_slot(struct msp_control *ctl, int *slot);
/* Appends the `attach` record that begins a record log. */
void msp_join_record(void);

#endif
