/* The pthread_atfork child handler: the child forgets its parent's attachment
 * and attaches again, as a new process, on its first hook call (forkchild.h). */
#include "forkchild.h"

#include <string.h>
#include <unistd.h>

#include "daemon.h"
#include "hold.h"
#include "hot.h"
#include "models.h"
#include "monitor.h"
#include "opcount.h"
#include "pending.h"
#include "record.h"
#include "recorder.h"
#include "snapshot.h"
#include "state.h"
#include "topo.h"
#include "util.h"
#include "datadir.h"

void msp_fork_child(void)
{
    if (__atomic_load_n(&g_msp.attach_state, __ATOMIC_RELAXED) == MSP_ATTACH_NONE)
        return;
    msp_rec_forget();
    if (msp_data_fd >= 0)
        close(msp_data_fd);
    msp_data_fd = -1;
    pthread_mutex_init(&g_msp.attach_mu, NULL);
    pthread_mutex_init(&g_msp.snap_mu, NULL);
    g_msp.snap = NULL;
    msp_slot.ctl = NULL;
    g_msp.active = 0;
    g_msp.awake_seen = 0;
    g_msp.closing = 0;
    msp_seq = 0;
    g_msp.overflow_events = 0;
    msp_slot.index = -1;
    msp_slot.proc = &msp_slot.dummy;
    msp_rounds_init(&msp_pending_rounds); /* the parent's rounds are the parent's */
    msp_hot_forget();
    msp_monitor_reset();
    msp_hold_reset();
    msp_ops_reset();
    msp_recorder_reset();
    msp_daemon_reset();
    msp_topo_reset();
    msp_models_reset();
    msp_log_reset();
    g_msp.attach_state = MSP_ATTACH_NONE;
}
