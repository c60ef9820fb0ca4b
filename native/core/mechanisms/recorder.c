/* The flight recorder: routes the items of an armed config into the per-round
 * ring, holds the rounds it keeps, scans the items for the shim's triggers
 * (rectrigger.c says which fires), claims incidents and flushes the held
 * rounds to the writers (recorder.h). */
#define _GNU_SOURCE
#include "recorder.h"

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "acl.h"
#include "dtype.h"
#include "filter.h"
#include "overflow_finding.h"
#include "pending.h"
#include "record.h"
#include "recstats.h"
#include "rectrigger.h"
#include "ring_overwrite.h"
#include "slot.h"
#include "stats.h"
#include "util.h"
#include "writer.h"

/* One lock over the ring and every scope's mode. Taken by the save hooks
 * (which already lock the copy queue), the monitor tick and the exit; the
 * order is always recorder, then queue. */
static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static struct msp_ow g_ring;
static int g_inited;        /* the ring belongs to the arming of g_base */
static uint64_t g_base;     /* cfg.rec_incident_base of that arming */
static uint32_t g_arming;   /* cfg.rec_arming of that arming */
static uint64_t g_applied;  /* every incident up to this one is applied to every scope */
static int g_small_said;    /* "budget too small" was said */

/* The overflow incident this process fired last, waiting for the kernel's
 * outputs: ATB reports the kernel before it saves them, and the report needs
 * the offending tensor and its statistics. seq 0: none. */
static struct {
    uint64_t seq;
    int64_t round;
    size_t n;
    char kernel[256];
} g_ovf;

#define CONTROL_PLANE_TRIGGERS (MSP_TRIG_GROWTH | MSP_TRIG_GOLDEN)

static uint64_t claimed(void)
{
    return msp_ctl_get_word(&msp_ctl_now()->rec_claimed);
}

/* No incident left to take: the recorder disarms once its windows end. */
static int exhausted(const struct msp_config *c)
{
    uint64_t k = claimed();
    return k >= g_base && k - g_base >= c->rec_max_incidents && g_applied >= k;
}

static void gauges(void)
{
    struct msp_proc *p = msp_proc_now();
    __atomic_store_n(&p->rec_rounds, g_ring.rounds, __ATOMIC_RELAXED);
    __atomic_store_n(&p->rec_bytes, g_ring.load.bytes, __ATOMIC_RELAXED);
    __atomic_store_n(&p->rec_peak_bytes, g_ring.load.peak, __ATOMIC_RELAXED);
    __atomic_store_n(&p->rec_incident, g_applied, __ATOMIC_RELAXED);
}

static void reset_scope(struct msp_ow_scope *s, void *arg)
{
    (void)arg;
    s->mode = MSP_SCOPE_HOLD;
    s->has_cur = 0;
    s->after_left = 0;
    s->wait_round = -1;
    s->cur_broken = 0;
}

/* Under g_mu: the ring follows the config's arming (a new arming, or a
 * disarming edit, drops what it holds). */
static void follow_arming(const struct msp_config *c)
{
    int armed = c->rec_armed != 0;
    if (g_inited && armed && g_base == c->rec_incident_base && g_arming == c->rec_arming)
        return;
    if (g_ring.rounds) {
        uint64_t n = msp_ow_clear(&g_ring);
        msp_log("recorder %s: dropped %llu held tensors", armed ? "re-armed" : "disarmed",
                (unsigned long long)n);
    }
    msp_ow_each(&g_ring, reset_scope, NULL);
    if (armed && (c->rec_triggers & CONTROL_PLANE_TRIGGERS))
        msp_recstats_open();
    else
        msp_recstats_close();
    g_inited = armed;
    g_ovf.seq = 0;
    g_base = c->rec_incident_base;
    g_arming = c->rec_arming;
    if (armed)
        g_applied = c->rec_incident_base; /* later incidents are applied next */
    __atomic_store_n(&msp_proc_now()->rec_state, armed ? MSP_REC_ARMED : MSP_REC_OFF,
                     __ATOMIC_RELAXED);
    gauges();
}

/* ---- writing out ---- */

/* The "{dev}_{pid}/{exec}/{op}" of an item path. */
static size_t round_dir_len(const char *path)
{
    int slashes = 0;
    size_t i = 0;
    for (; path[i]; i++)
        if (path[i] == '/' && ++slashes == 3)
            break;
    return i;
}

/* A `flush` record, built while one incident is applied, and the items of
 * the rounds it flushes, queued when it is committed. */
struct flushlog {
    struct jbuf b;
    int open;
    uint64_t seq;
    struct msp_item *items; /* in any order: queued by seq */
};

static void log_round(struct flushlog *f, const char *path, uint64_t n, const char *why)
{
    if (!f->open) {
        msp_rec_begin(&f->b, "flush");
        jb_ku64(&f->b, "incident", f->seq);
        jb_key(&f->b, "rounds");
        jb_open(&f->b, '[');
        f->open = 1;
    }
    jb_open(&f->b, '{');
    jb_kstr(&f->b, "dir", path, round_dir_len(path));
    jb_ku64(&f->b, "n", n);
    jb_kcstr(&f->b, "as", why);
    jb_close(&f->b, '}');
}

/* A list of items sorted by seq (a stable merge sort). */
static struct msp_item *by_seq(struct msp_item *list)
{
    if (!list || !list->next)
        return list;
    struct msp_item *slow = list, *fast = list->next;
    while (fast && fast->next) {
        slow = slow->next;
        fast = fast->next->next;
    }
    struct msp_item *b = by_seq(slow->next), *a = (slow->next = NULL, by_seq(list));
    struct msp_item *out = NULL, **tail = &out;
    while (a && b) {
        struct msp_item **low = b->seq < a->seq ? &b : &a;
        *tail = *low;
        tail = &(*low)->next;
        *low = (*low)->next;
    }
    *tail = a ? a : b;
    return out;
}

/* Queues a held item, counted pending (a tensor) and given its own seq only
 * now (pending.h): the seq it took when held kept its place among the held,
 * but a record with a higher one may be in the log already. */
static void queue_held(struct msp_item *it, int live)
{
    it->seq = it->kind == MSP_ITEM_TENSOR ? msp_pending_select(it->path, it->pathn, live)
                                          : msp_seq_take();
    msp_item_queue(it, 1);
}

/* Queues the flushed items in the order they were saved, then appends the
 * flush record. */
static void log_commit(struct flushlog *f)
{
    for (struct msp_item *it = by_seq(f->items), *next; it; it = next) {
        next = it->next;
        MSP_COUNT(rec_flushed, it->kind == MSP_ITEM_TENSOR);
        queue_held(it, 0);
    }
    f->items = NULL;
    if (!f->open)
        return;
    jb_close(&f->b, ']');
    msp_rec_commit(&f->b);
    f->open = 0;
}

/* Moves a held round to the writers (when the flush is committed). */
static void flush_round(struct msp_ow_round *rd, struct flushlog *f, const char *why)
{
    if (rd->head)
        log_round(f, rd->head->path, rd->n, why);
    struct msp_item *it = msp_ow_take(&g_ring, rd);
    if (!it)
        return;
    struct msp_item *last = it;
    while (last->next)
        last = last->next;
    last->next = f->items;
    f->items = it;
}

static void evict_round(struct msp_ow_round *rd)
{
    msp_ow_evict(&g_ring, rd);
    MSP_COUNT(rec_evicted, 1);
}

/* ---- applying an incident to one op ---- */

struct apply_ctx {
    const struct msp_config *cfg;
    const struct msp_incident *inc;
    struct flushlog *log;
};

/* The held round an incident cuts at: the one with the incident's {exec}
 * when this op holds it (ranks and ops that run in step), else the newest
 * that began before the trigger. NULL: none. */
static struct msp_ow_round *cut_of(struct msp_ow_scope *s, const struct msp_incident *inc)
{
    struct msp_ow_round *by_time = NULL;
    for (struct msp_ow_round *rd = s->oldest; rd; rd = rd->snext) {
        if (inc->round >= 0 && rd->exec == (uint64_t)inc->round)
            return rd;
        if (rd->start_ns <= inc->t_ns)
            by_time = rd;
    }
    return by_time;
}

/* Flushes the cut round, the keep_rounds before it and up to after_rounds
 * held after it; evicts the rest; the op then dumps directly until its
 * after_rounds are done. */
static void apply_scope(struct msp_ow_scope *s, void *arg)
{
    struct apply_ctx *a = arg;
    const struct msp_config *c = a->cfg;
    if (s->mode == MSP_SCOPE_OFF)
        return;
    if (s->mode != MSP_SCOPE_HOLD) {
        /* queued behind the window in progress: the window starts again */
        if (s->mode == MSP_SCOPE_DIRECT)
            s->after_left = c->rec_after_rounds;
        return;
    }
    /* This op is one round behind the trigger's {exec} (another rank that
     * has not begun it yet): the cut is that round, when it opens. */
    if (a->inc->round >= 0 && s->newest && s->newest->exec + 1 == (uint64_t)a->inc->round &&
        s->has_cur && !s->cur_broken) {
        s->wait_round = a->inc->round;
        return;
    }
    struct msp_ow_round *cut = cut_of(s, a->inc);
    uint64_t before = 0, after = 0;
    int seen_cut = cut == NULL, newest_kept = 0;
    for (struct msp_ow_round *rd = s->oldest; cut && rd != cut; rd = rd->snext)
        before++;
    uint64_t skip = before > c->rec_keep_rounds ? before - c->rec_keep_rounds : 0;
    for (struct msp_ow_round *rd = s->oldest, *next; rd; rd = next) {
        next = rd->snext;
        int is_newest = rd == s->newest;
        if (!seen_cut) {
            if (rd == cut) {
                seen_cut = 1;
                newest_kept |= is_newest;
                flush_round(rd, a->log, "trigger");
            } else if (skip) {
                skip--;
                evict_round(rd);
            } else {
                flush_round(rd, a->log, "before");
            }
        } else if (after < c->rec_after_rounds) {
            after++;
            newest_kept |= is_newest;
            flush_round(rd, a->log, "after");
        } else {
            evict_round(rd);
        }
    }
    s->after_left = (int64_t)c->rec_after_rounds - (int64_t)after;
    /* the round in progress, if it was evicted, is not dumped half */
    s->mode = !s->has_cur || newest_kept ? MSP_SCOPE_DIRECT : MSP_SCOPE_SKIP;
}

/* Under g_mu: applies every published incident not applied yet. */
static void apply_incidents(const struct msp_config *c)
{
    struct msp_control *ctl = msp_ctl_now();
    uint64_t top = claimed();
    while (g_applied < top) {
        struct msp_incident inc;
        if (!msp_ctl_read_incident(ctl, g_applied + 1, &inc))
            return; /* still being filled in: next time */
        struct flushlog f = {.seq = g_applied + 1};
        struct apply_ctx a = {c, &inc, &f};
        msp_ow_each(&g_ring, apply_scope, &a);
        log_commit(&f);
        g_applied++;
    }
    gauges();
}

/* ---- rounds ---- */

static void window_over(struct msp_ow_scope *s, const struct msp_config *c)
{
    s->mode = exhausted(c) ? MSP_SCOPE_OFF : MSP_SCOPE_HOLD;
}

/* Keeps keep_rounds + 1 rounds of the op (the round in progress and the
 * keep_rounds before it). With triggers the control plane evaluates, an
 * older round stays until the control plane has evaluated everything written
 * before the round that pushed it out (rec_eval_ns), so a late trigger still
 * finds the rounds before it; the budget caps that too. */
static void trim_scope(struct msp_ow_scope *s, const struct msp_config *c)
{
    uint64_t evaluated = (c->rec_triggers & CONTROL_PLANE_TRIGGERS)
                             ? msp_ctl_get_word(&msp_ctl_now()->rec_eval_ns)
                             : UINT64_MAX;
    while (s->nrounds > c->rec_keep_rounds + 1 && s->oldest) {
        struct msp_ow_round *pusher = s->oldest;
        for (uint32_t i = 0; i <= c->rec_keep_rounds; i++)
            pusher = pusher->snext;
        if (pusher->start_ns > evaluated)
            break;
        evict_round(s->oldest);
    }
}

/* A new {exec} of op s begins. */
static void round_opens(struct msp_ow_scope *s, uint64_t exec, const struct msp_config *c,
                        const char *path)
{
    s->cur_broken = 0;
    if (s->wait_round >= 0) {
        int64_t want = s->wait_round;
        s->wait_round = -1;
        if ((uint64_t)want == exec) {
            /* the trigger's round on this rank: what it holds is "before" */
            struct flushlog f = {.seq = g_applied};
            uint64_t n = s->nrounds, skip = n > c->rec_keep_rounds ? n - c->rec_keep_rounds : 0;
            while (s->oldest) {
                if (skip) {
                    skip--;
                    evict_round(s->oldest);
                } else {
                    flush_round(s->oldest, &f, "before");
                }
            }
            log_commit(&f);
            s->mode = MSP_SCOPE_DIRECT;
            s->after_left = c->rec_after_rounds;
            s->has_cur = 1;
            s->cur_exec = exec;
            struct flushlog g = {.seq = g_applied};
            log_round(&g, path, 0, "trigger");
            log_commit(&g);
            return;
        }
        struct msp_incident inc = {.t_ns = msp_now_ns(), .round = -1};
        struct flushlog f = {.seq = g_applied};
        struct apply_ctx a = {c, &inc, &f};
        apply_scope(s, &a);
        log_commit(&f);
    }
    if (s->mode == MSP_SCOPE_DIRECT) {
        if (s->after_left > 0) {
            s->after_left--;
            struct flushlog f = {.seq = g_applied};
            log_round(&f, path, 0, "after");
            log_commit(&f);
        } else {
            window_over(s, c);
        }
    } else if (s->mode == MSP_SCOPE_SKIP) {
        window_over(s, c);
    }
    s->has_cur = 1;
    s->cur_exec = exec;
    if (s->mode == MSP_SCOPE_HOLD) {
        if (!msp_ow_open(&g_ring, s, exec, msp_now_ns()))
            s->cur_broken = 1;
        trim_scope(s, c);
    }
}

int msp_recorder_route(const struct msp_config *c, const char *path, size_t n)
{
    pthread_mutex_lock(&g_mu);
    follow_arming(c);
    apply_incidents(c);
    uint64_t exec;
    struct msp_ow_scope *s = msp_ow_scope_of(&g_ring, path, n, &exec);
    int route = MSP_ROUTE_DROP;
    if (!s) {
        route = MSP_ROUTE_DIRECT; /* not a round of a top-level op: nothing to hold it by */
    } else {
        if (!s->has_cur || s->cur_exec != exec)
            round_opens(s, exec, c, path);
        if (s->mode == MSP_SCOPE_DIRECT)
            route = MSP_ROUTE_DIRECT;
        else if (s->mode == MSP_SCOPE_HOLD && !s->cur_broken)
            route = MSP_ROUTE_HOLD;
    }
    if (route == MSP_ROUTE_DROP && s && s->cur_broken)
        MSP_COUNT(rec_lost, 1);
    gauges();
    pthread_mutex_unlock(&g_mu);
    return route;
}

/* ---- triggers ---- */

/* Under g_mu: claims an incident for a trigger of this process and applies
 * it at once (this process's rounds are flushed before the hook returns).
 * Returns its seq, 0 if none was claimed. */
static uint64_t fire(const struct msp_config *c, uint32_t kind, double value, const char *path,
                 size_t pathn, int64_t round, const struct msp_stats *st,
                 enum msp_ovf_finding finding)
{
    struct msp_incident inc;
    memset(&inc, 0, sizeof inc);
    inc.t_ns = msp_now_ns();
    inc.pid = msp_slot.pid;
    inc.start_ns = msp_slot.start_ns;
    /* the device is the path's "{dev}_" (the slot learns it only from writes) */
    char *end;
    long dev = strtol(path, &end, 10);
    inc.device = end != path && *end == '_' ? dev : msp_acl_device();
    inc.round = round;
    inc.kind = kind;
    inc.value = value;
    size_t n = pathn < sizeof inc.path - 1 ? pathn : sizeof inc.path - 1;
    memcpy(inc.path, path, n);
    uint64_t seq = msp_ctl_claim_incident(msp_ctl_now(), g_base, c->rec_max_incidents, g_applied,
                                          &inc);
    if (!seq)
        return 0; /* one is queued already, or max_incidents reached (counted) */
    msp_log("recorder: incident %llu, %s trigger in %.*s (round %lld); every process of this "
            "output dir writes its last %u rounds",
            (unsigned long long)seq, msp_trigger_name(kind), (int)(n > 300 ? 300 : n), path,
            (long long)round, c->rec_keep_rounds + 1);
    struct jbuf b;
    msp_rec_begin(&b, "incident");
    jb_ku64(&b, "seq", seq);
    jb_kcstr(&b, "trigger", msp_trigger_name(kind));
    jb_kf64(&b, "value", value);
    if (finding != MSP_OVF_NONE)
        jb_kcstr(&b, "finding", msp_ovf_finding_name(finding));
    jb_ki64(&b, "round", round);
    jb_ki64(&b, "dev", inc.device);
    jb_kstr(&b, "path", path, n);
    jb_ku64(&b, "trigger_ns", inc.t_ns);
    jb_key(&b, "stats");
    if (st)
        msp_stats_json(&b, st);
    else
        jb_null(&b);
    msp_rec_commit(&b);
    /* only this one if it is the next: a queued one waits for the windows */
    if (seq == g_applied + 1)
        apply_incidents(c);
    return seq;
}

/* Under g_mu: the item's statistics (published to the control plane when it
 * evaluates triggers) and the shim-side trigger they fire (0: none). */
struct scan {
    struct msp_stats st;
    int have;
    uint32_t kind;
    enum msp_ovf_finding finding; /* the overflow trigger's own find */
    double value;
    uint64_t exec;
    int64_t round;
};

static void scan_locked(const struct msp_config *c, const struct msp_item *it, struct scan *sc)
{
    sc->have = 0;
    sc->kind = 0;
    sc->finding = MSP_OVF_NONE;
    if (it->kind != MSP_ITEM_TENSOR || it->stats_in_data)
        return;
    char note[128];
    if (msp_stats_compute(it->dtype, it->data, it->size, &sc->st, note, sizeof note) != 0)
        return;
    sc->have = 1;
    sc->exec = 0;
    struct msp_ow_scope *s = msp_ow_scope_of(&g_ring, it->path, it->pathn, &sc->exec);
    sc->round = s ? (int64_t)sc->exec : -1;
    if (c->rec_triggers & CONTROL_PLANE_TRIGGERS)
        msp_recstats_put(msp_now_ns(), sc->exec, &sc->st, it->path);
    sc->kind = msp_trigger_fired(c, it, &sc->st, &sc->value, &sc->finding);
}

/* Under g_mu: an output of the kernel of the pending overflow incident, with
 * its statistics, as an `incident_tensor` record. */
static void overflow_tensor(const struct msp_item *it, const struct scan *sc)
{
    size_t n = it->pathn;
    if (!g_ovf.seq || sc->round != g_ovf.round ||
        !msp_kernel_output_matches(g_ovf.kernel, g_ovf.n, it->path, n))
        return;
    struct jbuf b;
    msp_rec_begin(&b, "incident_tensor");
    jb_ku64(&b, "seq", g_ovf.seq);
    jb_kstr(&b, "path", it->path, n);
    const char *dtype = msp_dtype_name(it->dtype);
    jb_kcstr(&b, "dtype", dtype ? dtype : "");
    jb_key(&b, "stats");
    msp_stats_json(&b, &sc->st);
    msp_rec_commit(&b);
}

static void fire_scan(const struct msp_config *c, const struct msp_item *it, const struct scan *sc)
{
    if (sc->have)
        overflow_tensor(it, sc);
    if (sc->kind)
        fire(c, sc->kind, sc->value, it->path, it->pathn, sc->round, &sc->st,
             sc->finding);
}

void msp_recorder_scan(const struct msp_config *c, const struct msp_item *it)
{
    struct scan sc;
    pthread_mutex_lock(&g_mu);
    scan_locked(c, it, &sc);
    fire_scan(c, it, &sc);
    pthread_mutex_unlock(&g_mu);
}

/* statistics task: only the statistics are kept, in place of the payload. A
 * fresh malloc, not a realloc, which keeps a page of a large (mmap'd) payload:
 * the item's cost is then what it holds. */
static void keep_stats_only(struct msp_item *it, const struct msp_stats *st)
{
    void *small = malloc(sizeof *st);
    if (!small)
        return;
    memcpy(small, st, sizeof *st);
    free(it->data);
    it->data = small;
    it->cost -= msp_malloc_cost(it->size); /* a tensor's payload is its size */
    it->cost += msp_malloc_cost(sizeof *st);
    it->stats_in_data = 1;
}

static void too_small(const struct msp_config *c, struct msp_ow_scope *s)
{
    __atomic_fetch_or(&msp_proc_now()->flags, (uint32_t)MSP_PROC_REC_TOO_SMALL, __ATOMIC_RELAXED);
    if (g_small_said++)
        return;
    msp_log("recorder: budget_mb %llu cannot hold one round of %s (round %llu) beside the "
            "rounds in progress of the other ops; that round is not kept. Raise "
            "recorder.budget_mb (or select fewer tensors)",
            (unsigned long long)(c->rec_budget_bytes >> 20), s->op,
            (unsigned long long)s->cur_exec);
}

void msp_recorder_hold(const struct msp_config *c, struct msp_item *it)
{
    pthread_mutex_lock(&g_mu);
    uint64_t exec = 0;
    struct msp_ow_scope *s = msp_ow_scope_of(&g_ring, it->path, it->pathn, &exec);
    struct msp_ow_round *rd = s ? s->newest : NULL;
    if (!s || s->mode != MSP_SCOPE_HOLD || s->cur_broken || !rd || rd->exec != exec) {
        /* an incident moved this round between routing and now */
        if (s && s->mode == MSP_SCOPE_DIRECT) {
            queue_held(it, 1);
        } else {
            MSP_COUNT(rec_lost, it->kind == MSP_ITEM_TENSOR);
            msp_item_heap_free(it);
        }
        pthread_mutex_unlock(&g_mu);
        return;
    }
    struct scan sc;
    scan_locked(c, it, &sc);
    if (sc.have && (it->task & MSP_TASK_TENSOR) == 0)
        keep_stats_only(it, &sc.st);
    /* room first, so the ring never holds more than the budget */
    int fits = it->cost <= c->rec_budget_bytes;
    if (fits)
        MSP_COUNT(rec_evicted, msp_ow_fit(&g_ring, it->cost, c->rec_budget_bytes, &fits));
    if (!fits) {
        /* only rounds in progress are left: this op's cannot be kept whole */
        MSP_COUNT(rec_lost, msp_ow_evict(&g_ring, rd) + 1);
        fire_scan(c, it, &sc); /* a trigger still fires */
        msp_item_heap_free(it);
        s->cur_broken = 1;
        too_small(c, s);
        gauges();
        pthread_mutex_unlock(&g_mu);
        return;
    }
    msp_ow_add(&g_ring, rd, it);
    fire_scan(c, it, &sc); /* flushes the round it was just added to */
    gauges();
    pthread_mutex_unlock(&g_mu);
}

void msp_recorder_overflow(const struct msp_config *c, const char *kernel, size_t n)
{
    /* "<Type>_<id>[_<id>...]:<Kernel>": the round is the one in progress of
     * the top-level op <id> */
    pthread_mutex_lock(&g_mu);
    int64_t round = -1;
    const char *us = memchr(kernel, '_', n);
    if (us) {
        uint64_t id = strtoull(us + 1, NULL, 10);
        char want[32];
        int wn = snprintf(want, sizeof want, "%llu_", (unsigned long long)id);
        for (uint32_t i = 0; i < g_ring.cap; i++) {
            struct msp_ow_scope *s = g_ring.scopes[i];
            if (s && s->has_cur && strncmp(s->op, want, (size_t)wn) == 0)
                round = (int64_t)s->cur_exec;
        }
    }
    uint64_t seq = fire(c, MSP_TRIG_OVERFLOW, INFINITY, kernel, n, round, NULL, MSP_OVF_NONE);
    if (seq && n < sizeof g_ovf.kernel) {
        g_ovf.seq = seq;
        g_ovf.round = round;
        g_ovf.n = n;
        memcpy(g_ovf.kernel, kernel, n);
    }
    pthread_mutex_unlock(&g_mu);
}

/* ---- tick, exit, fork ---- */

static void state_of(struct msp_ow_scope *s, void *arg)
{
    int *st = arg;
    if (s->mode == MSP_SCOPE_DIRECT || s->mode == MSP_SCOPE_SKIP)
        *st = MSP_REC_FLUSHING;
    else if (s->mode == MSP_SCOPE_HOLD && *st == MSP_REC_DONE)
        *st = MSP_REC_ARMED;
}

void msp_recorder_tick(const struct msp_config *c, int awake)
{
    if (!c)
        return;
    int armed = awake && c->rec_armed;
    pthread_mutex_lock(&g_mu);
    if (!armed) {
        if (g_inited || g_ring.rounds) {
            struct msp_config off = *c;
            off.rec_armed = 0;
            follow_arming(&off);
        }
    } else {
        follow_arming(c);
        apply_incidents(c);
        int st = exhausted(c) ? MSP_REC_DONE : MSP_REC_ARMED;
        msp_ow_each(&g_ring, state_of, &st);
        __atomic_store_n(&msp_proc_now()->rec_state, (uint64_t)st, __ATOMIC_RELAXED);
    }
    pthread_mutex_unlock(&g_mu);
}

void msp_recorder_exit(const struct msp_config *c)
{
    pthread_mutex_lock(&g_mu);
    /* an incident claimed before the exit still gets this process's rounds */
    if (c && c->rec_armed && g_inited)
        apply_incidents(c);
    if (g_ring.rounds) {
        if (c && c->rec_flush_on_exit) {
            struct flushlog f = {.seq = 0};
            while (g_ring.oldest)
                flush_round(g_ring.oldest, &f, "exit");
            log_commit(&f);
        } else {
            uint64_t rounds = g_ring.rounds, n = msp_ow_clear(&g_ring);
            __atomic_fetch_or(&msp_proc_now()->flags, (uint32_t)MSP_PROC_REC_EXIT_DROP,
                              __ATOMIC_RELAXED);
            struct jbuf b;
            msp_rec_begin(&b, "recorder_exit");
            jb_ku64(&b, "dropped_rounds", rounds);
            jb_ku64(&b, "dropped_items", n);
            msp_rec_commit(&b);
            msp_log("process exit while the recorder was armed: %llu held rounds are not "
                    "written (set recorder.flush_on_exit to keep them)",
                    (unsigned long long)rounds);
        }
    }
    msp_recstats_close();
    gauges();
    pthread_mutex_unlock(&g_mu);
}

void msp_recorder_reset(void)
{
    pthread_mutex_init(&g_mu, NULL);
    /* the parent's items stay with the parent: forget them, do not free */
    memset(&g_ring, 0, sizeof g_ring);
    g_inited = 0;
    g_base = g_applied = 0;
    g_arming = 0;
    g_small_said = 0;
    g_ovf.seq = 0;
    msp_recstats_forget();
}
