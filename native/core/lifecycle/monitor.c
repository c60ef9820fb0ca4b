/* The monitor's periodic duties (every 250 ms): counters to the slot, config
 * follow-up and messages, daemon restarts, dump-root removal, an idle ring given
 * back; on its own thread once awake, from the hooks before (monitor.h). */
#define _GNU_SOURCE
#include "monitor.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <time.h>

#include "daemon.h"
#include "hold.h"
#include "opcount.h"
#include "reattach.h"
#include "recorder.h"
#include "snapshot.h"
#include "state.h"
#include "util.h"

static pthread_mutex_t g_mon_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t g_mon_cv;
static uint64_t g_last_error_seq;
static pthread_mutex_t g_duty_mu = PTHREAD_MUTEX_INITIALIZER;
static int g_running;           /* atomic: the monitor thread exists */
static uint64_t g_last_duty_ns; /* atomic: the last duties run from a hook */
#define PERIOD_NS 250000000L

/* queue_depth/queue_bytes are kept exact by the hooks and writers; only
 * the per-thread op counters need summing. */
void msp_monitor_flush_counters(void)
{
    __atomic_store_n(&msp_slot.proc->ops_seen, msp_ops_total(), __ATOMIC_RELAXED);
}

static void check_config_error(void)
{
    struct msp_control *ctl = msp_slot.ctl;
    uint64_t seq = msp_ctl_get_word(&ctl->error_seq);
    if (seq == g_last_error_seq)
        return;
    char text[MSP_ERROR_LEN];
    memcpy(text, (const char *)ctl->config_error, sizeof text);
    text[sizeof text - 1] = 0;
    if (msp_ctl_get_word(&ctl->error_seq) != seq)
        return; /* changing under us: next tick */
    g_last_error_seq = seq;
    if (text[0]) {
        /* once per process: say which, and wrap the reason (it lists every problem) */
        char who[64], msg[MSP_ERROR_LEN + 128];
        msp_who(who, sizeof who);
        snprintf(msg, sizeof msg, "config rejected (%s), keeping the previous one: %s", who,
                 text);
        msp_log_wrapped(msg);
    }
}

/* One round of the duties, every 250 ms, on the monitor thread or (while
 * there is none) on a hook thread; never both at once. */
static void duties(void)
{
    static unsigned tick;
    if (msp_reattach_if_removed())
        g_last_error_seq = 0; /* the new block's error_seq starts over */
    msp_monitor_flush_counters();
    msp_snap_check(); /* an idle process follows the config too */
    msp_hold_watch();
    check_config_error();
    msp_snap_say_next();
    struct msp_snap *snap = msp_snap_get();
    msp_recorder_tick(snap ? &snap->cfg : NULL, snap && snap->awake);
    if (++tick % 2 == 0)
        msp_ensure_daemon();
    if (tick % (MSP_QUEUE_TRIM_PERIOD_S * (1000000000L / PERIOD_NS)) == 0)
        msp_queue_trim_idle(&g_msp.q);
}

static void *monitor_main(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&g_mon_mu);
    while (!__atomic_load_n(&g_msp.closing, __ATOMIC_ACQUIRE)) {
        struct timespec ts = msp_mono_timespec(msp_mono_ns() + PERIOD_NS);
        pthread_cond_timedwait(&g_mon_cv, &g_mon_mu, &ts);
        if (__atomic_load_n(&g_msp.closing, __ATOMIC_ACQUIRE))
            break;
        pthread_mutex_lock(&g_duty_mu);
        duties();
        pthread_mutex_unlock(&g_duty_mu);
    }
    pthread_mutex_unlock(&g_mon_mu);
    return NULL;
}

void msp_monitor_hook_tick(void)
{
    if (__atomic_load_n(&g_running, __ATOMIC_ACQUIRE) ||
        __atomic_load_n(&g_msp.attach_state, __ATOMIC_ACQUIRE) != MSP_ATTACH_DONE ||
        !g_msp.active)
        return;
    uint64_t now = msp_mono_ns();
    if (now - __atomic_load_n(&g_last_duty_ns, __ATOMIC_RELAXED) < PERIOD_NS ||
        pthread_mutex_trylock(&g_duty_mu) != 0)
        return;
    if (!__atomic_load_n(&g_running, __ATOMIC_ACQUIRE)) {
        __atomic_store_n(&g_last_duty_ns, now, __ATOMIC_RELAXED);
        int saved = errno;
        duties();
        errno = saved;
    }
    pthread_mutex_unlock(&g_duty_mu);
}

int msp_monitor_start(void)
{
    pthread_condattr_t a;
    pthread_condattr_init(&a);
    pthread_condattr_setclock(&a, CLOCK_MONOTONIC);
    pthread_cond_init(&g_mon_cv, &a);
    pthread_condattr_destroy(&a);
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    pthread_t t;
    int rc = pthread_create(&t, NULL, monitor_main, NULL);
    if (rc == 0) {
        pthread_detach(t);
        __atomic_store_n(&g_running, 1, __ATOMIC_RELEASE);
    }
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    return rc;
}

void msp_monitor_kick(void)
{
    if (!__atomic_load_n(&g_running, __ATOMIC_ACQUIRE))
        return;
    pthread_mutex_lock(&g_mon_mu);
    pthread_cond_signal(&g_mon_cv);
    pthread_mutex_unlock(&g_mon_mu);
}

void msp_monitor_reset(void)
{
    pthread_mutex_init(&g_mon_mu, NULL);
    pthread_mutex_init(&g_duty_mu, NULL);
    g_running = 0;
    g_last_duty_ns = 0;
    g_last_error_seq = 0;
}
