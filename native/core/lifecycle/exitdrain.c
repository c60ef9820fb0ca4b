/* The atexit drain: empties the copy queue for a bounded time, records what
 * is left as lost (but statistics items, finished anyway under the block
 * policy), then waits, bounded, for the control plane to build this process's
 * derived files (exitdrain.h). */
#define _GNU_SOURCE
#include "exitdrain.h"

#include <signal.h>
#include <time.h>
#include <unistd.h>

#include "monitor.h"
#include "pending.h"
#include "record.h"
#include "recorder.h"
#include "snapshot.h"
#include "util.h"
#include "tensorrec.h"

static uint64_t g_drain_s, g_build_ms;
#define INFLIGHT_GRACE_NS 5000000000ULL
#define BUILD_POLL_NS 5000000ULL

void msp_exit_drain_configure(uint64_t seconds, uint64_t build_ms)
{
    g_drain_s = seconds;
    g_build_ms = build_ms;
}

/* Until the daemon says its derived files hold our whole log (`built`), at
 * most g_build_ms; said when it gives up. Nobody builds without a daemon. */
static void wait_built(void)
{
    struct msp_control *ctl = msp_ctl_now();
    struct msp_proc *p = msp_proc_now();
    uint64_t end = msp_rec_size();
    uint64_t daemon = ctl ? msp_ctl_get_word(&ctl->daemon_pid) : 0;
    if (!g_build_ms || !ctl || msp_slot.index < 0 || !daemon)
        return;
    uint64_t t0 = msp_mono_ns(), deadline = t0 + g_build_ms * 1000000ULL;
    /* the doorbell: the daemon reads the exit record now, not at its next poll
     * (up to 100 ms later). SIGWINCH, whose default action is to ignore it, so a
     * stale pid now naming another process of ours costs that process nothing. */
    if (__atomic_load_n(&p->built, __ATOMIC_ACQUIRE) < end)
        kill((pid_t)daemon, SIGWINCH);
    while (__atomic_load_n(&p->built, __ATOMIC_ACQUIRE) < end) {
        if (msp_mono_ns() >= deadline) {
            msp_log("process exit: the control plane has not written this process's "
                    "statistic.csv, info/ and round markers within %llu ms "
                    "(MSPROBE_ATB_EXIT_BUILD_MS); they follow once it has read the record "
                    "log (`msprobe-atb wait DIR` waits for them)",
                    (unsigned long long)g_build_ms);
            break;
        }
        struct timespec ts = {0, BUILD_POLL_NS};
        nanosleep(&ts, NULL);
    }
    MSP_COUNT(host_ns, msp_mono_ns() - t0);
}

static void exit_record(int drained, uint64_t lost)
{
    struct msp_proc *p = msp_slot.proc;
    struct jbuf b;
    msp_rec_begin(&b, "exit");
    jb_key(&b, "drained");
    jb_bool(&b, drained);
    jb_ku64(&b, "lost", lost);
    jb_ku64(&b, "ops_seen", __atomic_load_n(&p->ops_seen, __ATOMIC_RELAXED));
    jb_ku64(&b, "tensors_selected", __atomic_load_n(&p->tensors_selected, __ATOMIC_RELAXED));
    jb_ku64(&b, "tensors_written", __atomic_load_n(&p->tensors_written, __ATOMIC_RELAXED));
    jb_ku64(&b, "bytes_written", __atomic_load_n(&p->bytes_written, __ATOMIC_RELAXED));
    jb_ku64(&b, "drops", __atomic_load_n(&p->drops, __ATOMIC_RELAXED));
    jb_ku64(&b, "errors", __atomic_load_n(&p->errors, __ATOMIC_RELAXED));
    jb_ku64(&b, "overflow_events", __atomic_load_n(&p->overflow_events, __ATOMIC_RELAXED));
    /* selected tensors whose own record found no room (a full disk), per round */
    msp_pending_json(&b, "unrecorded", p);
    /* lost op_param.json files whose record found no room, likewise */
    uint64_t params = __atomic_load_n(&p->params_unrecorded, __ATOMIC_RELAXED);
    if (params)
        jb_ku64(&b, "params_unrecorded", params);
    if (msp_rec_commit_final(&b) == 0)
        msp_pending_clear(p);
    msp_rec_release_reserve();
}

/* An item that writes no file: its record, with its statistics, is all of it
 * (task statistics). Small and quick, so under the block policy, where the user
 * chose waiting over losing tensors, it is finished after the deadline too. */
static int writes_no_file(const struct msp_item *it)
{
    return it->kind == MSP_ITEM_TENSOR && (it->task & (MSP_TASK_TENSOR | MSP_TASK_OVERFLOW)) == 0;
}

/* Records the items the closed queue handed back as lost; returns the tensors. */
static uint64_t give_up(struct msp_item *left)
{
    uint64_t tensors = 0;
    for (struct msp_item *it = left; it; it = it->next) {
        msp_item_lost(it, "process exited before it was written");
        MSP_UNCOUNT(queue_depth, 1);
        MSP_UNCOUNT(queue_bytes, it->cost);
        tensors += it->kind == MSP_ITEM_TENSOR;
    }
    msp_queue_forget(&g_msp.q, left); /* their records are in the log */
    return tensors;
}

/* The statistics items kept past the deadline: waits for the writers to finish
 * them, saying so once it has taken a second (a process that seems to hang at
 * its exit says why), and how long it took. */
static void finish_kept(uint64_t kept)
{
    uint64_t t0 = msp_mono_ns();
    if (msp_queue_wait_idle(&g_msp.q, t0 + 1000000000ULL))
        return;
    msp_log("process exit: %llu statistics items were still queued after %llu s "
            "(MSPROBE_ATB_EXIT_DRAIN_S); they write no file and are finished anyway "
            "(queue_full_policy block)",
            (unsigned long long)kept, (unsigned long long)g_drain_s);
    msp_queue_wait_idle(&g_msp.q, UINT64_MAX);
    msp_log("process exit: the %llu statistics items took %.1f s more", (unsigned long long)kept,
            (double)(msp_mono_ns() - t0) / 1e9);
}

void msp_exit_drain(void)
{
    if (__atomic_load_n(&g_msp.attach_state, __ATOMIC_ACQUIRE) != MSP_ATTACH_DONE ||
        !g_msp.active || msp_slot.pid != (uint64_t)getpid())
        return;
    uint64_t t0 = msp_mono_ns();
    struct msp_snap *snap = msp_snap_get();
    msp_recorder_exit(snap ? &snap->cfg : NULL); /* flush_on_exit: the ring goes in the queue first */
    __atomic_store_n(&g_msp.closing, 1, __ATOMIC_RELEASE);
    msp_monitor_kick();
    int drained = msp_queue_wait_idle(&g_msp.q, msp_mono_ns() + g_drain_s * 1000000000ULL);
    int keep = !drained && snap && snap->cfg.queue_policy == MSP_POLICY_BLOCK;
    uint64_t inflight = 0, kept = 0, bytes;
    struct msp_item *left = msp_queue_close(&g_msp.q, keep ? writes_no_file : NULL, &inflight, &kept);
    uint64_t lost = give_up(left);
    if (kept) {
        finish_kept(kept); /* the items in the writers' hands too */
    } else if (inflight) {
        /* a writer in the middle of one file gets a short grace to finish
         * it, so its own record (written or lost) stays the truth */
        msp_queue_wait_idle(&g_msp.q, msp_mono_ns() + INFLIGHT_GRACE_NS);
        msp_queue_stats(&g_msp.q, &inflight, &bytes);
        lost += inflight;
    }
    if (lost) {
        MSP_COUNT(errors, lost);
        msp_log("process exit: %llu selected tensors were not written within %llu s "
                "(MSPROBE_ATB_EXIT_DRAIN_S); they are recorded as lost",
                (unsigned long long)lost, (unsigned long long)g_drain_s);
    }
    MSP_COUNT(host_ns, msp_mono_ns() - t0);
    msp_monitor_flush_counters();
    /* drained: every selected tensor written, whether before the deadline, as a
     * kept statistics item, or in a writer's hands within the grace */
    exit_record(!lost, lost);
    wait_built();
    if (msp_slot.index >= 0)
        msp_ctl_release_proc(msp_slot.ctl, msp_slot.index);
}
