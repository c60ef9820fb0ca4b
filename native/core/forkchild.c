/* The pthread_atfork child handler: the child forgets its parent's attachment
 * and attaches again, as a new process, on its first hook call (forkchild.h). */
#include "forkchild.h"

#include <string.h>
#include <unistd.h>

#include "daemon.h"
#include "models.h"
#include "monitor.h"
#include "opcount.h"
#include "recorder.h"
#include "snapshot.h"
#include "state.h"
#include "topo.h"
#include "util.h"

void msp_fork_child(void)
{
    if (__atomic_load_n(&g_msp.attach_state, __ATOMIC_RELAXED) == MSP_ATTACH_NONE)
        return;
    if (g_msp.rec_fd >= 0)
        close(g_msp.rec_fd);
    if (g_msp.data_fd >= 0)
        close(g_msp.data_fd);
    g_msp.rec_fd = g_msp.data_fd = -1;
    pthread_mutex_init(&g_msp.attach_mu, NULL);
    pthread_mutex_init(&g_msp.snap_mu, NULL);
    g_msp.snap = NULL;
    g_msp.ctl = NULL;
    g_msp.active = 0;
    g_msp.awake_seen = 0;
    g_msp.closing = 0;
    g_msp.seq = 0;
    g_msp.overflow_events = 0;
    g_msp.slot = -1;
    g_msp.proc = &g_msp.dummy_proc;
    msp_rounds_init(&g_msp.rounds); /* the parent's rounds are the parent's */
    msp_hot_forget();
    msp_monitor_reset();
    msp_ops_reset();
    msp_rec_reset();
    msp_daemon_reset();
    msp_topo_reset();
    msp_models_reset();
    msp_log_reset();
    g_msp.attach_state = MSP_ATTACH_NONE;
}
