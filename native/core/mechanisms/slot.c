/* This process's slot in the control block: its one instance, pointing at
 * the private dummy until the lifecycle attaches (slot.h). */
#include "slot.h"

struct msp_slot msp_slot = {
    .proc = &msp_slot.dummy,
    .index = -1,
};
