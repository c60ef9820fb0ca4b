/* Lazy attach on the first hook call: environment, control block, slot,
 * record log, the daemon's first publish. */
#define _GNU_SOURCE
#include "attach.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "daemon.h"
#include "exitdrain.h"
#include "forkchild.h"
#include "fsutil.h"
#include "hostabi.h"
#include "hot.h"
#include "join.h"
#include "monitor.h"
#include "record.h"
#include "snapshot.h"
#include "util.h"

/* Absolute form of `in` (relative to the cwd), without trailing '/'.
 * Returns -1 if it does not fit. */
static int absolute(const char *in, char *out, size_t cap)
{
    char cwd[MSP_PATH_LEN];
    int n;
    if (in[0] == '/' || !getcwd(cwd, sizeof cwd))
        n = snprintf(out, cap, "%s", in);
    else if (strcmp(in, ".") == 0)
        n = snprintf(out, cap, "%s", cwd);
    else
        n = snprintf(out, cap, "%s/%s", cwd, in);
    if (n < 0 || (size_t)n >= cap)
        return -1;
    while (n > 1 && out[n - 1] == '/')
        out[--n] = 0;
    return 0;
}

/* Waits for a publish newer than `stale` (the count a dead or absent
 * daemon left behind; a daemon does not reset it when it starts). */
static int fresh_publish(uint64_t stale)
{
    uint64_t now = msp_ctl_get_word(&msp_slot.ctl->published);
    return now != 0 && now != stale;
}

static void wait_fresh_publish(uint64_t stale)
{
    long ms = msp_env_long("MSPROBE_ATB_ATTACH_WAIT_MS", 10000, 0, 600000);
    uint64_t deadline = msp_mono_ns() + (uint64_t)ms * 1000000ULL;
    int failed = 0;
    while (!fresh_publish(stale) && !(failed = msp_daemon_check()) && msp_mono_ns() < deadline) {
        struct timespec ts = {0, 5000000};
        nanosleep(&ts, NULL);
    }
    if (!fresh_publish(stale) && !failed && ms > 0)
        msp_log("the control plane has not published a config after %ld ms "
                "(MSPROBE_ATB_ATTACH_WAIT_MS); starting asleep, see %s/.probe/daemon.log",
                ms, g_msp.dump_root);
}

/* Returns 1 if the process can dump (block, slot, record log, threads). */
static int attach(void)
{
    msp_slot.pid = (uint64_t)getpid();
    msp_slot.start_ns = msp_now_ns();
    msp_slot.proc = &msp_slot.dummy;
    msp_slot.dummy.device = -1;
    g_msp.host_abi = msp_detect_host_abi();
    int mismatch = g_msp.host_abi >= 0 && g_msp.host_abi != msp_build_abi;
    if (mismatch)
        msp_report_abi_mismatch(g_msp.host_abi);

    const char *cfg = getenv("ATB_DUMP_CONFIG");
    if (!cfg || !*cfg) {
        msp_log("ATB_DUMP_CONFIG is not set: this process will not dump "
                "(source load_atb_probe.sh to set it)");
        return 0;
    }
    const char *out = getenv("ATB_OUTPUT_DIR");
    if (absolute(out && *out ? out : ".", g_msp.out, sizeof g_msp.out) != 0 ||
        absolute(cfg, g_msp.config, sizeof g_msp.config) != 0) {
        msp_log("ATB_OUTPUT_DIR or ATB_DUMP_CONFIG is too long; this process will not dump");
        return 0;
    }
    const char *py = getenv("MSPROBE_ATB_PYTHON");
    snprintf(g_msp.python, sizeof g_msp.python, "%s", py && *py ? py : "python3");
    g_msp.nwriters = (int)msp_env_long("MSPROBE_ATB_WRITERS", 4, 1, MSP_MAX_WRITERS);
    msp_exit_drain_configure((uint64_t)msp_env_long("MSPROBE_ATB_EXIT_DRAIN_S", 30, 0, 86400),
                             (uint64_t)msp_env_long("MSPROBE_ATB_EXIT_BUILD_MS", 2000, 0, 60000));
    if (snprintf(g_msp.dump_root, sizeof g_msp.dump_root, "%s/atb_dump_data", g_msp.out) >=
        (int)sizeof g_msp.dump_root - 128) {
        msp_log("output dir %s is too long; this process will not dump", g_msp.out);
        return 0;
    }
    if (msp_mkdir_p(g_msp.out, 0750) != 0) {
        msp_log("cannot create the output dir %s: %s; this process will not dump", g_msp.out,
                strerror(errno));
        return 0;
    }
    /* resolved once, now: every later open is relative to the resolved
     * directory with O_NOFOLLOW, so a link swapped later leads nowhere */
    char link[MSP_PATH_LEN];
    memcpy(link, g_msp.dump_root, sizeof link);
    int resolved = msp_resolve_link(g_msp.dump_root, sizeof g_msp.dump_root - 128);
    if (resolved < 0) {
        msp_log("%s is a symlink that cannot be resolved; this process will not dump", link);
        return 0;
    }
    if (resolved)
        msp_log("%s is a symlink: dumping into its target %s (resolved once, at attach)", link,
                g_msp.dump_root);
    char err[512];
    struct msp_control *ctl;
    int rc = msp_ctl_open(g_msp.dump_root, 1, &ctl, err, sizeof err);
    if (rc != 0) {
        msp_log("%s; this process will not dump", err);
        return 0;
    }
    msp_slot.ctl = ctl;
    msp_slot.proc = msp_join_slot(ctl, &msp_slot.index);
    msp_rec_fd = msp_rec_open(g_msp.dump_root, msp_slot.pid, msp_slot.start_ns);
    if (msp_rec_fd < 0) {
        msp_log("cannot open the record log under %s/.probe/records: %s; this process will "
                "not dump",
                g_msp.dump_root, strerror(errno));
        goto fail;
    }
    msp_join_record();
    /* the writer and monitor threads start at the first wake (snapshot.c):
     * a process that never dumps gets no thread of ours */
    msp_queue_init(&g_msp.q, g_msp.nwriters);
    /* rounded up to whole trim periods */
    g_msp.q.keep_trims = ((uint64_t)msp_env_long("MSPROBE_ATB_RING_IDLE_S", 600, 0, 604800) +
                          MSP_QUEUE_TRIM_PERIOD_S - 1) / MSP_QUEUE_TRIM_PERIOD_S;
    /* No op may run on a config nobody vouches for: with no live daemon,
     * the block's config is whatever a killed daemon (or one before a
     * reboot) last published, so wait for the new daemon's first publish. */
    uint64_t seen = msp_ctl_get_word(&ctl->published);
    int started = msp_ensure_daemon();
    if (started > 0 || (started == 0 && seen == 0))
        wait_fresh_publish(seen); /* not after a start that failed: it said why */
    g_msp.active = 1;
    msp_snap_refresh();
    return 1;
fail:
    if (msp_slot.index >= 0)
        msp_ctl_release_proc(ctl, msp_slot.index);
    return 0;
}

void msp_attach_slow(void)
{
    static int registered;
    if (!msp_hot_registered()) /* a hook called before the library's constructor ran: not yet */
        return;
    pthread_mutex_lock(&g_msp.attach_mu);
    if (__atomic_load_n(&g_msp.attach_state, __ATOMIC_ACQUIRE) != MSP_ATTACH_DONE) {
        __atomic_store_n(&g_msp.attach_state, MSP_ATTACH_BUSY, __ATOMIC_RELAXED);
        if (!registered) {
            /* once per address space: a forked child inherits them */
            registered = 1;
            pthread_atfork(NULL, NULL, msp_fork_child);
            atexit(msp_exit_drain);
            msp_snap_on_wake(msp_monitor_start);
        }
        int saved = errno;
        if (!attach())
            msp_hot_inactive();
        errno = saved;
        __atomic_store_n(&g_msp.attach_state, MSP_ATTACH_DONE, __ATOMIC_RELEASE);
    }
    pthread_mutex_unlock(&g_msp.attach_mu);
}
