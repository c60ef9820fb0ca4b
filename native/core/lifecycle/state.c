/* The lifecycle's process-wide state: its one instance (state.h). */
#include "state.h"

struct msp_state g_msp = {
    .attach_mu = PTHREAD_MUTEX_INITIALIZER,
    .snap_mu = PTHREAD_MUTEX_INITIALIZER,
    .host_abi = -1,
};
