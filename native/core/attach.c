#define _GNU_SOURCE
#include "attach.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "daemon.h"
#include "fsutil.h"
#include "record.h"
#include "snapshot.h"
#include "util.h"
#include "writer.h"

struct msp_state g_msp = {
    .attach_mu = PTHREAD_MUTEX_INITIALIZER,
    .snap_mu = PTHREAD_MUTEX_INITIALIZER,
    .rec_fd = -1,
    .data_fd = -1,
    .slot = -1,
    .host_abi = -1,
    .proc = &g_msp.dummy_proc,
};

/* ---- per-thread op counters ---- */

#define OP_SLOTS 64
struct op_slot {
    uint64_t v;
    char pad[56];
};
static struct op_slot g_ops[OP_SLOTS + 1]; /* the last one is shared by extra threads */
static uint32_t g_ops_next;
static __thread uint64_t *t_ops;

void msp_count_op(void)
{
    uint64_t *c = t_ops;
    if (__builtin_expect(!c, 0)) {
        uint32_t i = __atomic_fetch_add(&g_ops_next, 1, __ATOMIC_RELAXED);
        c = t_ops = &g_ops[i < OP_SLOTS ? i : OP_SLOTS].v;
    }
    if (c == &g_ops[OP_SLOTS].v)
        __atomic_fetch_add(c, 1, __ATOMIC_RELAXED);
    else /* single writer: no locked instruction */
        __atomic_store_n(c, __atomic_load_n(c, __ATOMIC_RELAXED) + 1, __ATOMIC_RELAXED);
}

uint64_t msp_ops_total(void)
{
    uint64_t sum = 0;
    for (int i = 0; i <= OP_SLOTS; i++)
        sum += __atomic_load_n(&g_ops[i].v, __ATOMIC_RELAXED);
    return sum;
}

/* ---- ACL device ---- */

typedef int (*acl_get_device_fn)(int32_t *);
static acl_get_device_fn g_acl_get_device;
static pthread_once_t g_acl_once = PTHREAD_ONCE_INIT;

static void find_acl(void)
{
    g_acl_get_device = (acl_get_device_fn)dlsym(RTLD_DEFAULT, "aclrtGetDevice");
}

int64_t msp_acl_device(void)
{
    pthread_once(&g_acl_once, find_acl);
    int32_t dev = -1;
    if (!g_acl_get_device || g_acl_get_device(&dev) != 0)
        return -1;
    return dev;
}

/* ---- ABI check ---- */

static const char *const SAVE_TENSOR[2] = {
    "_ZN3atb5Probe10SaveTensorERKSsS2_S2_PKvmS2_",
    "_ZN3atb5Probe10SaveTensorERKNSt7__cxx1112basic_stringIcSt11char_traitsIcESaIcEEES8_S8_PKvmS8_",
};

/* The host's libatb.so defines SaveTensor under one ABI's mangled name. If
 * it is the other ABI's, only the argument-free hooks reach us. */
static int detect_host_abi(void)
{
    int mine = msp_build_abi, other = 1 - mine;
    if (dlsym(RTLD_DEFAULT, SAVE_TENSOR[other]))
        return other;
    if (dlsym(RTLD_NEXT, SAVE_TENSOR[mine]))
        return mine;
    return -1;
}

static void report_abi_mismatch(int host)
{
    msp_log("ERROR: C++ ABI mismatch. This process's libatb.so is built with "
            "_GLIBCXX_USE_CXX11_ABI=%d (cxx_abi_%d), but LD_PRELOAD holds libatb_probe_abi%d.so. "
            "ATB's SaveTensor/IsTensorNeedSave calls cannot reach the probe, so NOTHING will be "
            "dumped from this process.",
            host, host, msp_build_abi);
    msp_log("Fix: source the set_env.sh of the ATB install whose ATB_HOME_PATH ends in "
            "cxx_abi_%d (or pass --cxx_abi=%d to it), then source unload_atb_probe.sh and "
            "load_atb_probe.sh again and restart this process.",
            host, host);
}

/* ---- monitor ---- */

static pthread_mutex_t g_mon_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t g_mon_cv;
static uint64_t g_last_error_seq;

static void reattach_if_removed(void);

/* queue_depth/queue_bytes are kept exact by the hooks and writers; only
 * the per-thread op counters need summing. */
static void flush_counters(void)
{
    __atomic_store_n(&g_msp.proc->ops_seen, msp_ops_total(), __ATOMIC_RELAXED);
}

static void check_config_error(void)
{
    struct msp_control *ctl = g_msp.ctl;
    uint64_t seq = msp_ctl_get_word(&ctl->error_seq);
    if (seq == g_last_error_seq)
        return;
    char text[MSP_ERROR_LEN];
    memcpy(text, (const char *)ctl->config_error, sizeof text);
    text[sizeof text - 1] = 0;
    if (msp_ctl_get_word(&ctl->error_seq) != seq)
        return; /* changing under us: next tick */
    g_last_error_seq = seq;
    if (text[0])
        msp_log("config rejected, keeping the previous one: %s", text);
}

static void *monitor_main(void *arg)
{
    (void)arg;
    unsigned tick = 0;
    pthread_mutex_lock(&g_mon_mu);
    while (!__atomic_load_n(&g_msp.closing, __ATOMIC_ACQUIRE)) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        ts.tv_nsec += 250000000L;
        if (ts.tv_nsec >= 1000000000L) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000L;
        }
        pthread_cond_timedwait(&g_mon_cv, &g_mon_mu, &ts);
        if (__atomic_load_n(&g_msp.closing, __ATOMIC_ACQUIRE))
            break;
        reattach_if_removed();
        flush_counters();
        msp_snap_check(); /* an idle process follows the config too */
        check_config_error();
        if (++tick % 2 == 0)
            msp_ensure_daemon();
        if (tick % 8 == 0)
            msp_queue_trim_idle(&g_msp.q); /* 2 s without a dump unmaps the copy ring */
    }
    pthread_mutex_unlock(&g_mon_mu);
    return NULL;
}

static int start_monitor(void)
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
    if (rc == 0)
        pthread_detach(t);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    return rc;
}

/* ---- exit ---- */

static uint64_t g_drain_s;
#define INFLIGHT_GRACE_NS 5000000000ULL

static void exit_record(int drained, uint64_t lost)
{
    struct msp_proc *p = g_msp.proc;
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
    msp_rec_commit(&b);
}

/* atexit: drain for a bounded time, then give up what is left, loudly. */
static void on_exit_drain(void)
{
    if (__atomic_load_n(&g_msp.attach_state, __ATOMIC_ACQUIRE) != MSP_ATTACH_DONE ||
        !g_msp.active || g_msp.pid != (uint64_t)getpid())
        return;
    __atomic_store_n(&g_msp.closing, 1, __ATOMIC_RELEASE);
    pthread_mutex_lock(&g_mon_mu);
    pthread_cond_signal(&g_mon_cv);
    pthread_mutex_unlock(&g_mon_mu);
    int drained = msp_queue_wait_idle(&g_msp.q, msp_mono_ns() + g_drain_s * 1000000000ULL);
    uint64_t inflight = 0, lost, bytes;
    struct msp_item *left = msp_queue_close(&g_msp.q, &inflight);
    if (inflight) {
        /* a writer in the middle of one file gets a short grace to finish
         * it, so its own record (written or lost) stays the truth */
        msp_queue_wait_idle(&g_msp.q, msp_mono_ns() + INFLIGHT_GRACE_NS);
        msp_queue_stats(&g_msp.q, &inflight, &bytes);
    }
    lost = inflight;
    while (left) {
        struct msp_item *next = left->next;
        msp_item_lost(left, "process exited before it was written");
        MSP_UNCOUNT(queue_depth, 1);
        MSP_UNCOUNT(queue_bytes, left->cost);
        lost += left->kind == MSP_ITEM_TENSOR;
        msp_queue_release(&g_msp.q, left);
        left = next;
    }
    if (lost) {
        MSP_COUNT(errors, lost);
        msp_log("process exit: %llu selected tensors were not written within %llu s "
                "(MSPROBE_ATB_EXIT_DRAIN_S); they are recorded as lost",
                (unsigned long long)lost, (unsigned long long)g_drain_s);
    }
    flush_counters();
    exit_record(drained && !lost, lost);
    if (g_msp.slot >= 0)
        msp_ctl_release_proc(g_msp.ctl, g_msp.slot);
}

/* ---- fork ---- */

static void topo_reset(void);

/* The child has none of the parent's threads: forget the attachment (the
 * parent keeps its slot, record log and queue) and attach again, as a new
 * process, on the child's first hook call. */
static void atfork_child(void)
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
    pthread_mutex_init(&g_mon_mu, NULL);
    g_msp.snap = NULL;
    g_msp.ctl = NULL;
    g_msp.active = 0;
    g_msp.awake_seen = 0;
    g_msp.closing = 0;
    g_msp.seq = 0;
    g_msp.overflow_events = 0;
    g_msp.slot = -1;
    g_msp.proc = &g_msp.dummy_proc;
    memset(g_ops, 0, sizeof g_ops);
    msp_daemon_reset();
    g_last_error_seq = 0;
    topo_reset();
    msp_log_reset();
    g_msp.attach_state = MSP_ATTACH_NONE;
}

/* ---- IsReportModelTopoInfo: first time per model name ---- */

#define TOPO_SLOTS 256
static uint64_t g_topo[TOPO_SLOTS];

static void topo_reset(void)
{
    memset(g_topo, 0, sizeof g_topo);
}

int msp_topo_first(const char *name, size_t n)
{
    uint64_t h = msp_fnv1a(MSP_FNV_SEED, name, n) | 1; /* 0 marks a free slot */
    for (unsigned i = 0; i < TOPO_SLOTS; i++) {
        uint64_t *slot = &g_topo[(h + i) % TOPO_SLOTS];
        uint64_t cur = __atomic_load_n(slot, __ATOMIC_ACQUIRE);
        if (cur == h)
            return 0;
        if (cur == 0) {
            if (__atomic_compare_exchange_n(slot, &cur, h, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
                return 1;
            if (cur == h)
                return 0;
        }
    }
    return 0; /* table full: 256 model names already reported */
}

/* ---- attach ---- */

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

static void attach_record(void)
{
    char exe[MSP_PATH_LEN];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    exe[n > 0 ? n : 0] = 0;
    struct jbuf b;
    msp_rec_begin(&b, "attach");
    jb_ku64(&b, "pid", g_msp.pid);
    jb_ku64(&b, "start_ns", g_msp.start_ns);
    jb_ki64(&b, "abi", msp_build_abi);
    jb_ki64(&b, "host_abi", g_msp.host_abi);
    jb_kcstr(&b, "output", g_msp.out);
    jb_kcstr(&b, "config", g_msp.config);
    jb_kcstr(&b, "exe", exe);
    msp_rec_commit(&b);
}

/* Waits for a publish newer than `stale` (the count a dead or absent
 * daemon left behind; a daemon does not reset it when it starts). */
static int fresh_publish(uint64_t stale)
{
    uint64_t now = msp_ctl_get_word(&g_msp.ctl->published);
    return now != 0 && now != stale;
}

static void wait_fresh_publish(uint64_t stale)
{
    long ms = msp_env_long("MSPROBE_ATB_ATTACH_WAIT_MS", 10000, 0, 600000);
    uint64_t deadline = msp_mono_ns() + (uint64_t)ms * 1000000ULL;
    while (!fresh_publish(stale) && msp_mono_ns() < deadline) {
        struct timespec ts = {0, 5000000};
        nanosleep(&ts, NULL);
    }
    if (!fresh_publish(stale) && ms > 0)
        msp_log("the control plane has not published a config after %ld ms "
                "(MSPROBE_ATB_ATTACH_WAIT_MS); starting asleep, see %s/.probe/daemon.log",
                ms, g_msp.dump_root);
}

/* ---- re-attach after the dump root was removed ---- */

/* Users `rm -rf <output>/atb_dump_data` between experiments while the
 * process keeps running. Our fds then name unlinked files: the monitor
 * notices (st_nlink 0 on the record log) and attaches to a fresh tree, or
 * (on data/ alone) opens data/ again. The hot path adds nothing: hooks
 * only see new pointers. */

static int unlinked(int fd)
{
    struct stat st;
    return fd >= 0 && fstat(fd, &st) == 0 && st.st_nlink == 0;
}

/* Points the fd number *fdp at newfd's file. dup3 keeps the number, so a
 * thread that loaded it before the swap reaches the new file, never an
 * unrelated one that reused a closed number. */
static void swap_fd(int *fdp, int newfd)
{
    int old = __atomic_load_n(fdp, __ATOMIC_ACQUIRE);
    if (newfd < 0)
        return;
    if (old < 0) {
        __atomic_store_n(fdp, newfd, __ATOMIC_RELEASE);
        return;
    }
    if (dup3(newfd, old, O_CLOEXEC) < 0)
        __atomic_store_n(fdp, newfd, __ATOMIC_RELEASE); /* the old number leaks: harmless */
    else
        close(newfd);
}

/* Claims a slot in ctl and fills what attach() sets at the first attach. */
static struct msp_proc *claim_slot(struct msp_control *ctl, int *slot)
{
    *slot = msp_ctl_claim_proc(ctl, g_msp.pid, g_msp.start_ns);
    if (*slot < 0)
        msp_log("the process table of %s is full (%d processes); dumping without live "
                "counters in `status`", g_msp.dump_root, MSP_MAX_PROCS);
    struct msp_proc *p = *slot >= 0 ? &ctl->procs[*slot] : &g_msp.dummy_proc;
    __atomic_store_n(&p->abi, (uint32_t)msp_build_abi, __ATOMIC_RELAXED);
    if (g_msp.host_abi >= 0 && g_msp.host_abi != msp_build_abi)
        __atomic_fetch_or(&p->flags, (uint32_t)MSP_PROC_ABI_MISMATCH, __ATOMIC_RELAXED);
    return p;
}

/* Moves the queue gauges (exact, not restarting like the counters) to the
 * new slot. A hook that loaded the old slot just before the swap may still
 * count there once: the gauges are then off by that one item. */
static void move_gauges(struct msp_proc *from, struct msp_proc *to)
{
    if (from == to)
        return;
    uint64_t depth = __atomic_exchange_n(&from->queue_depth, 0, __ATOMIC_RELAXED);
    uint64_t bytes = __atomic_exchange_n(&from->queue_bytes, 0, __ATOMIC_RELAXED);
    __atomic_fetch_add(&to->queue_depth, depth, __ATOMIC_RELAXED);
    __atomic_fetch_add(&to->queue_bytes, bytes, __ATOMIC_RELAXED);
}

static void attach_record(void);

/* data_fd names a new data/ tree: the writers drop their cached dirs. */
static void swap_data_fd(int data)
{
    swap_fd(&g_msp.data_fd, data);
    __atomic_fetch_add(&g_msp.tree_epoch, 1, __ATOMIC_RELEASE);
}

/* Only data/ was removed: the block and record log are still good. */
static void reopen_data(void)
{
    char path[MSP_PATH_LEN + 16];
    int data = msp_data_dir_open(path, sizeof path);
    if (data < 0)
        return; /* retried next tick; the tensors meanwhile are lost and logged */
    swap_data_fd(data);
    msp_log("%s was removed; dumping into a fresh one", path);
}

/* Opens everything of a fresh tree first and swaps only if all of it
 * opened, so a failed try (retried next tick) leaves nothing claimed. */
static void reattach_if_removed(void)
{
    static int failing;
    if (!g_msp.active)
        return;
    if (!unlinked(g_msp.rec_fd)) {
        if (unlinked(__atomic_load_n(&g_msp.data_fd, __ATOMIC_ACQUIRE)))
            reopen_data();
        return;
    }
    char err[MSP_PATH_LEN + 256] = "", data_path[MSP_PATH_LEN + 16];
    struct msp_control *ctl = NULL;
    int rec = -1, data = -1;
    if (msp_mkdir_p(g_msp.out, 0750) != 0 ||
        msp_ctl_open(g_msp.dump_root, 1, &ctl, err, sizeof err) != 0)
        goto fail;
    rec = msp_rec_open(g_msp.dump_root, g_msp.pid, g_msp.start_ns);
    if (rec < 0) {
        snprintf(err, sizeof err, "cannot open the record log under %s/.probe/records: %s",
                 g_msp.dump_root, strerror(errno));
        goto fail;
    }
    if (__atomic_load_n(&g_msp.awake_seen, __ATOMIC_ACQUIRE)) {
        data = msp_data_dir_open(data_path, sizeof data_path);
        if (data < 0) {
            snprintf(err, sizeof err, "cannot open %s: %s", data_path, strerror(errno));
            goto fail;
        }
    }
    failing = 0;
    struct msp_proc *old_proc = g_msp.proc;
    int slot;
    struct msp_proc *p = claim_slot(ctl, &slot);
    if (__atomic_load_n(&g_msp.awake_seen, __ATOMIC_ACQUIRE))
        __atomic_fetch_or(&p->flags, (uint32_t)MSP_PROC_AWAKE_SEEN, __ATOMIC_RELAXED);
    __atomic_store_n(&p->device, __atomic_load_n(&old_proc->device, __ATOMIC_RELAXED),
                     __ATOMIC_RELAXED);
    if (g_msp.slot >= 0)
        msp_ctl_release_proc(g_msp.ctl, g_msp.slot);
    /* The old block stays mapped: a hook may still read it through a
     * pointer loaded before the swap (56 KiB of address space per removal). */
    __atomic_store_n(&g_msp.proc, p, __ATOMIC_RELEASE);
    move_gauges(old_proc, p);
    g_msp.slot = slot;
    g_last_error_seq = 0; /* the new block's error_seq starts over */
    __atomic_store_n(&g_msp.ctl, ctl, __ATOMIC_RELEASE);
    swap_fd(&g_msp.rec_fd, rec);
    swap_data_fd(data);
    attach_record();
    msp_log("%s was removed; dumping into a fresh one", g_msp.dump_root);
    /* the old daemon serves the removed tree and exits; no back-off for
     * the new one (a pending one was for the old tree) */
    msp_daemon_reset();
    msp_ensure_daemon();
    msp_snap_refresh(); /* asleep until the new daemon publishes */
    return;
fail:
    if (!failing++)
        msp_log("%s was removed and cannot be created again (%s); selected tensors are lost "
                "until it can", g_msp.dump_root, err[0] ? err : strerror(errno));
    if (rec >= 0)
        close(rec);
    msp_ctl_close(ctl);
}

/* Returns 1 if the process can dump (block, slot, record log, threads). */
static int attach(void)
{
    g_msp.pid = (uint64_t)getpid();
    g_msp.start_ns = msp_now_ns();
    g_msp.proc = &g_msp.dummy_proc;
    g_msp.dummy_proc.device = -1;
    g_msp.host_abi = detect_host_abi();
    int mismatch = g_msp.host_abi >= 0 && g_msp.host_abi != msp_build_abi;
    if (mismatch)
        report_abi_mismatch(g_msp.host_abi);

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
    g_msp.nwriters = (int)msp_env_long("MSPROBE_ATB_WRITERS", 2, 1, MSP_MAX_WRITERS);
    g_drain_s = (uint64_t)msp_env_long("MSPROBE_ATB_EXIT_DRAIN_S", 30, 0, 86400);
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
    char err[512];
    struct msp_control *ctl;
    int rc = msp_ctl_open(g_msp.dump_root, 1, &ctl, err, sizeof err);
    if (rc != 0) {
        msp_log("%s; this process will not dump", err);
        return 0;
    }
    g_msp.ctl = ctl;
    g_msp.proc = claim_slot(ctl, &g_msp.slot);
    g_msp.rec_fd = msp_rec_open(g_msp.dump_root, g_msp.pid, g_msp.start_ns);
    if (g_msp.rec_fd < 0) {
        msp_log("cannot open the record log under %s/.probe/records: %s; this process will "
                "not dump",
                g_msp.dump_root, strerror(errno));
        goto fail;
    }
    attach_record();
    /* the writer threads start at the first wake (snapshot.c): a process
     * that never dumps gets only the monitor thread */
    msp_queue_init(&g_msp.q, g_msp.nwriters);
    /* No op may run on a config nobody vouches for: with no live daemon,
     * the block's config is whatever a killed daemon (or one before a
     * reboot) last published, so wait for the new daemon's first publish. */
    uint64_t seen = msp_ctl_get_word(&ctl->published);
    if (msp_ensure_daemon() || seen == 0)
        wait_fresh_publish(seen);
    g_msp.active = 1;
    msp_snap_refresh();
    if (start_monitor() != 0)
        msp_log("cannot start the monitor thread; live counters and daemon restarts are off");
    return 1;
fail:
    if (g_msp.slot >= 0)
        msp_ctl_release_proc(ctl, g_msp.slot);
    return 0;
}

void msp_attach_slow(void)
{
    static int registered;
    pthread_mutex_lock(&g_msp.attach_mu);
    if (__atomic_load_n(&g_msp.attach_state, __ATOMIC_ACQUIRE) != MSP_ATTACH_DONE) {
        __atomic_store_n(&g_msp.attach_state, MSP_ATTACH_BUSY, __ATOMIC_RELAXED);
        if (!registered) {
            /* once per address space: a forked child inherits both */
            registered = 1;
            pthread_atfork(NULL, NULL, atfork_child);
            atexit(on_exit_drain);
        }
        int saved = errno;
        attach();
        errno = saved;
        __atomic_store_n(&g_msp.attach_state, MSP_ATTACH_DONE, __ATOMIC_RELEASE);
    }
    pthread_mutex_unlock(&g_msp.attach_mu);
}
