/* The config snapshot the hot path reads: copied from the block when its
 * generation moves, the hooks' words (hot.h) set from it, and the wake-up on the
 * first awake one (snapshot.h).
 *
 * One call goes up, through a pointer: the wake-up starts the monitor thread
 * (monitor.c's msp_monitor_start, handed over by attach.c through
 * msp_snap_on_wake), since the monitor follows the config through this file. */
#define _GNU_SOURCE
#include "snapshot.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "answers.h"
#include "datadir.h"
#include "filter.h"
#include "hot.h"
#include "models.h"
#include "record.h"
#include "recorder.h"
#include "util.h"
#include "writer.h"

/* "(pid N, device D)": a service with several processes prints one line each. */
static void say_state(const char *what)
{
    char line[MSP_MAX_MODELS * (MSP_MODEL_NAME_LEN + 64) + 256], who[64];
    msp_who(who, sizeof who);
    int n = snprintf(line, sizeof line, "%s%s (%s)\n", MSP_LOG_PREFIX, what, who);
    if (n > 0)
        msp_write_tty(STDOUT_FILENO, line, (size_t)n < sizeof line ? (size_t)n : sizeof line - 1);
}

/* exec_range "next": said once per edit, and again as each model's rounds are fixed. */
static void say_next(const struct msp_config *cfg)
{
    char text[160];
    unsigned long long n = cfg->next_count;
    snprintf(text, sizeof text, "exec_range next:%llu: dumping the next %s of each model, "
             "from its first execution to begin from now on", n, n == 1 ? "execution" : "executions");
    say_state(text);
}

void msp_snap_say_next(void)
{
    const struct msp_snap *s = msp_hot_awake();
    char text[MSP_MAX_MODELS * (MSP_MODEL_NAME_LEN + 48) + 32];
    size_t k = (size_t)snprintf(text, sizeof text, "exec_range next: dumping ");
    if (s && s->cfg.next_request && msp_models_next_news(&s->cfg, text + k, sizeof text - k))
        say_state(text);
}

/* Is snapshot s awake for the hooks? Awake but unable to select anything
 * (exec_range "none", unless the overflow task or the flight recorder's
 * overflow trigger answers IsOverflowCheck), every predicate would answer
 * no: such a snapshot is published to the hooks as asleep, decided here once
 * per publish, so an op's 15 hook calls take the asleep answerers (a jump to
 * a constant each) instead of reaching the core. Executions then begin unseen, as
 * asleep (models.h). The process is still awake for the rest (writers started,
 * Ready said, the next edit applied at the next op). */
static int hooks_awake(const struct msp_snap *s)
{
    return s->awake && (s->cfg.exec_mode != MSP_EXEC_NONE || (s->cfg.task & MSP_TASK_OVERFLOW) ||
                        msp_recorder_overflow_wanted(&s->cfg));
}

/* The predicates' answerers under an awake snapshot s (hot.h): constants
 * where the answer is the same for every call, else the hooks' own. */
static struct msp_answerers answerers_of(const struct msp_snap *s)
{
    int overflow = (s->cfg.task & MSP_TASK_OVERFLOW) != 0;
    const struct msp_hook_answerers *hooks = msp_hot_hooks();
    struct msp_answerers a = MSP_NO_ANSWERS;
    a.data = msp_answer_yes;
    if (overflow || s->cfg.exec_mode != MSP_EXEC_NONE) /* per top-level op: one its filters
                                                          exclude gets no directories */
        a.desc = s->n_tops >= 0 ? msp_answer_top_desc : msp_answer_yes;
    if (overflow || s->cfg.exec_mode == MSP_EXEC_ALL)
        a.count = msp_count_yes;
    else if (s->cfg.exec_mode != MSP_EXEC_NONE)
        a.count = hooks->count;
    if (overflow) { /* the overflowing kernel's after save; the overflow_nums limit */
        a.after = hooks->after;
        a.overflow = hooks->overflow;
    } else {
        a.before = a.after = a.param = msp_answer_yes;
        a.overflow = msp_recorder_overflow_wanted(&s->cfg) ? msp_answer_yes : msp_answer_no;
    }
    return a;
}

/* The hooks answer from snapshot s from now on (under snap_mu). */
static void publish_hot(const struct msp_snap *s)
{
    if (!hooks_awake(s)) {
        msp_hot_publish(s, NULL, 0);
        return;
    }
    /* exec_range "next" also selects each model's own rounds (models.h) */
    uint64_t end = s->cfg.exec_mode == MSP_EXEC_RANGES && !s->cfg.next_request
                       ? msp_exec_end(&s->cfg)
                       : UINT64_MAX;
    struct msp_answerers a = answerers_of(s);
    msp_hot_publish(s, &a, end);
}

/* Starts the writer threads; 0 if none could start (the process then
 * stays asleep: ATB must not copy tensors nobody would write). */
static int start_writers(void)
{
    int started = msp_writers_start(&g_msp.q, g_msp.nwriters);
    if (started == 0) {
        msp_log("cannot start writer threads (%s); this process stays asleep until the next "
                "config change",
                strerror(errno));
        return 0;
    }
    /* published to the hooks by the awake_seen release below */
    g_msp.nwriters = started;
    msp_queue_set_lists(&g_msp.q, started);
    return 1;
}

int msp_data_dir_open(char *path, size_t cap)
{
    snprintf(path, cap, "%s/data", g_msp.dump_root);
    if (mkdir(path, 0750) != 0 && errno != EEXIST)
        return -1;
    return open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
}

static int (*g_start_monitor)(void);

void msp_snap_on_wake(int (*start_monitor)(void))
{
    g_start_monitor = start_monitor;
}

/* The first wake of this process. Returns 0 if it cannot dump after all. */
static int wake_up(uint64_t generation)
{
    /* attach already said loudly that nothing can be dumped: no Ready line */
    if (__atomic_load_n(&msp_proc_now()->flags, __ATOMIC_RELAXED) & MSP_PROC_ABI_MISMATCH)
        return 0;
    if (!start_writers())
        return 0;
    /* an asleep process has no thread of ours (monitor.h) */
    if (!g_start_monitor || g_start_monitor() != 0)
        msp_log("cannot start the monitor thread; its duties run from the hooks");
    say_state("Ready to dump ATB data, the running speed of the model will be affected");
    char path[MSP_PATH_LEN + 16];
    int fd = msp_data_dir_open(path, sizeof path);
    if (fd < 0)
        msp_log("cannot open %s: %s; selected tensors will be counted as lost", path,
                strerror(errno));
    __atomic_store_n(&msp_data_fd, fd, __ATOMIC_RELEASE);
    __atomic_store_n(&g_msp.awake_seen, 1, __ATOMIC_RELEASE);
    __atomic_fetch_or(&msp_proc_now()->flags, (uint32_t)MSP_PROC_AWAKE_SEEN, __ATOMIC_RELAXED);
    struct jbuf b;
    msp_rec_begin(&b, "wake");
    jb_ku64(&b, "generation", generation);
    msp_rec_commit(&b);
    return 1;
}

/* The verdicts IsSaveTensorInSpecificDir reaches for an awake snapshot
 * (selcache.h): one table for the process, made at the first such snapshot,
 * a new epoch for each (0 once they run out: not cached). */
static void give_sel_cache(struct msp_snap *s)
{
    static struct msp_selcache *cache;
    static uint32_t epoch;
    s->sel = NULL;
    s->sel_epoch = 0;
    s->sel_plain = 0;
    if (!hooks_awake(s) || (s->cfg.task & MSP_TASK_OVERFLOW))
        return;
    s->sel_plain = s->cfg.n_devices == 0 && !s->cfg.next_request;
    if (!cache)
        cache = msp_selcache_new(13);
    s->sel = cache;
    s->sel_epoch = cache && epoch < UINT32_MAX ? ++epoch : 0;
}

/* Does snapshot cur stay in force past an edit? While an execution it dumps runs
 * (its model's round selected, models.h), so that the execution is dumped whole,
 * under the config it began under (an edit between two of its ops, another
 * "next" or "none", once left the rest of its round unselected, and the round
 * was marked complete). The edit takes effect at the first hook after the
 * execution's end: until then each IsTensorNeedSave and UpdateConfig comes here
 * (the generation moved). A setup that begins an execution does so without a
 * lock (slowpath.c), so the last check and the publish are made while
 * g_msp.deciding is odd (state.h). */
int msp_snap_held(const struct msp_snap *cur)
{
    return hooks_awake(cur) && msp_models_holding(&cur->cfg);
}

/* The snapshot of the config the block holds now, not published yet; NULL
 * without memory. */
static struct msp_snap *read_snapshot(struct msp_control *ctl)
{
    struct msp_snap *s = malloc(sizeof *s);
    if (!s)
        return NULL;
    s->ctl = ctl;
    s->generation = msp_ctl_read_config(ctl, &s->cfg);
    s->awake = s->cfg.state == MSP_STATE_AWAKE;
    s->n_tops = (s->cfg.task & MSP_TASK_OVERFLOW) || s->cfg.rec_armed
                    ? -1
                    : msp_top_ids(&s->cfg, s->tops, MSP_MAX_IDS);
    s->own_filtered = !(s->cfg.task & MSP_TASK_OVERFLOW) && !s->cfg.rec_armed &&
                      !s->cfg.next_request && (s->cfg.n_ids || s->cfg.n_op_names);
    uint8_t own = s->own_filtered ? 0 : MSP_TOP_OWN | MSP_TOP_KNOWN;
    /* any op (n_tops -1): every one */
    memset(s->top_verdicts, own | (s->n_tops < 0 ? MSP_TOP_DESC : 0), sizeof s->top_verdicts);
    for (int i = 0; i < s->n_tops; i++)
        if (s->tops[i] >= 0 && s->tops[i] < MSP_MODEL_OP_IDS)
            s->top_verdicts[s->tops[i]] |= MSP_TOP_DESC;
    if (s->cfg.queue_budget_bytes == 0)
        s->cfg.queue_budget_bytes = (uint64_t)1 << 30;
    return s;
}

/* Publishes s to the hooks unless cur must stay in force (held); 1 if published.
 * The setups' side of this handshake is msp_slow_need_save (slowpath.c): a setup
 * whose note the check may have missed sees the odd word, waits for it to be
 * even, and notes again under what is then in force. */
static int decide_and_publish(const struct msp_snap *cur, struct msp_snap *s)
{
    uint64_t d = __atomic_load_n(&g_msp.deciding, __ATOMIC_RELAXED);
    __atomic_store_n(&g_msp.deciding, d + 1, __ATOMIC_RELAXED);
    /* the odd word before the check: a setup noted after the check sees it */
    MSP_DECIDING_FENCE();
    int publish = !cur || cur->ctl != s->ctl || !msp_snap_held(cur);
    if (publish) {
        __atomic_store_n(&g_msp.snap, s, __ATOMIC_RELEASE);
        if (!hooks_awake(s)) /* executions begin unseen (models.h) */
            msp_models_asleep();
        msp_models_quiet_reset();
        publish_hot(s);
    }
    __atomic_store_n(&g_msp.deciding, d + 2, __ATOMIC_RELEASE);
    return publish;
}

/* Snapshots are leaked by design: the hot path reads a snapshot through a
 * plain pointer with no reference count or RCU, so a reader on another
 * thread may still use the old one. A new snapshot is made only when the
 * daemon publishes (on a config edit: human speed), so the leak is ~17 KiB
 * per edit. */
void msp_snap_refresh(void)
{
    pthread_mutex_lock(&g_msp.snap_mu);
    struct msp_snap *cur = msp_snap_get();
    struct msp_control *ctl = msp_ctl_now();
    struct msp_snap *s = NULL;
    if (!cur || cur->ctl != ctl ||
        (cur->generation != msp_ctl_generation(ctl) && !msp_snap_held(cur)))
        s = read_snapshot(ctl);
    if (s) {
        int was_awake = cur && cur->awake;
        /* not awake before: nothing holds cur, s will be published */
        if (s->awake && !g_msp.awake_seen && !wake_up(s->generation))
            s->awake = 0;
        give_sel_cache(s);
        if (decide_and_publish(cur, s)) {
            if (was_awake && !s->awake)
                say_state("Back asleep: dumping stopped (dump_enable is false or the config "
                          "is gone)");
            if (s->awake && s->cfg.next_request &&
                !(cur && cur->awake && cur->cfg.next_request == s->cfg.next_request))
                say_next(&s->cfg);
            /* payloads go through the copy ring from now on: have it warm (not
             * for exec_range "none", awake but selecting nothing) */
            int ring_dump = s->awake && (s->cfg.task & MSP_TASK_TENSOR) && !s->cfg.rec_armed &&
                            s->cfg.exec_mode != MSP_EXEC_NONE;
            msp_queue_expect(&g_msp.q, ring_dump ? s->cfg.queue_budget_bytes : 0, s->awake);
            msp_rec_budget(s->cfg.queue_budget_bytes);
            __atomic_store_n(&msp_proc_now()->config_generation, s->generation,
                             __ATOMIC_RELAXED);
            cur = s;
        } else {
            free(s); /* an execution began before the publish: never seen by a hook */
        }
    }
    if (cur && cur->ctl == ctl)
        publish_hot(cur);
    pthread_mutex_unlock(&g_msp.snap_mu);
}
