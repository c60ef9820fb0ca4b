/* The models a process runs, by the names it reports: executions begun and
 * issued per model, and which top-level ops belong to which (models.h). */
#include "models.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "filter.h"
#include "opcount.h"
#include "slot.h"

struct model {
    char name[MSP_MODEL_NAME_LEN]; /* NUL-terminated, cut to fit */
    size_t n;                      /* the full name's length */
    uint64_t started, executed;    /* atomic */
    /* exec_range "next": rounds next_first.. of request next_req (atomic; next_first is
     * stored first, next_req with release) */
    uint64_t next_req, next_first;
    uint64_t said_req; /* the request whose rounds the console was told (monitor only) */
    /* The execution under way began at top-level op begin_op, set up by the thread
     * whose runner count (opcount.h) was then begin_ops at begin_thread (its TLS
     * word's address: a thread's identity without a syscall). Atomic; written by the
     * model's thread. */
    uint64_t begin_op, begin_ops;
    const void *begin_thread;
};

static struct model g_models[MSP_MAX_MODELS];
static uint32_t g_n; /* entries in use; atomic, grows under g_mu */
static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
struct msp_op_models msp_op_models;
static int g_exact;                               /* MSP_PROC_MODELS_EXACT is set */
/* exec_range "next": the request under which a top-level op of no known model was
 * set up in an execution begun after that edit (the op is then selected in every
 * round until it is mapped, at that execution's end), and how many threads run
 * such an execution now (IsExecuteCountInRange answers yes meanwhile). */
static uint64_t g_op_pick[MSP_MODEL_OP_IDS];
static uint32_t g_pickers;
/* The request under which this thread's current execution began (seen to begin:
 * msp_ops_unmoved at its first op), 0 if none or begun unseen; and whether it
 * counts in g_pickers. */
static __thread uint64_t msp_t_exec_req;
static __thread int msp_t_picking;
/* exec_range "next" and ATB's async execute, which reports an execution's end
 * before the worker ran its last ops: a top-level op set up in an execution the
 * config dumps, its directories built, is open until its Runner::Execute has asked
 * its own directory the ASKS times ATB asks it (before, after, param:
 * docs/atb_hooks.md §5.2), or its model's next execution begins. Per op id: the
 * asks left and the bucket it counts in (its msp_op_models.of value at its setup);
 * per bucket: the ops open. While a model's bucket (or that of ops of no model
 * known) has one, its config is held (msp_models_holding). */
#define ASKS 3
static uint8_t g_op_asks[MSP_MODEL_OP_IDS];
static uint8_t g_op_bucket[MSP_MODEL_OP_IDS];
static uint32_t g_open[256];
static uint64_t g_asked; /* directories asked by open ops: progress (msp_models_progress) */
/* The top-level op ids this thread set up since it last reported an execution's
 * end, of no known model: a bit each, within [lo, hi] (lo > hi: none). ATB-Models
 * sets up a model's nodes on the thread that then reports the execution. */
static __thread struct {
    uint64_t lo, hi;
    uint64_t bits[MSP_MODEL_OP_IDS / 64];
} t_unmapped = {.lo = UINT64_MAX};

/* Op id's model index + 1, 0 if none is known (pending or not). */
static int model_of(uint64_t id)
{
    uint8_t m = __atomic_load_n(&msp_op_models.of[id], __ATOMIC_RELAXED);
    return m == MSP_OP_PENDING ? 0 : m;
}

static int same(const struct model *m, const char *name, size_t n)
{
    size_t k = n < MSP_MODEL_NAME_LEN - 1 ? n : MSP_MODEL_NAME_LEN - 1;
    return m->n == n && memcmp(m->name, name, k) == 0;
}

static void to_slot(struct msp_proc *p, int i)
{
    if (!p)
        return;
    const struct model *m = &g_models[i];
    __atomic_store_n(&p->models[i].started, __atomic_load_n(&m->started, __ATOMIC_RELAXED),
                     __ATOMIC_RELAXED);
    __atomic_store_n(&p->models[i].executed, __atomic_load_n(&m->executed, __ATOMIC_RELAXED),
                     __ATOMIC_RELAXED);
    uint64_t req = __atomic_load_n(&m->next_req, __ATOMIC_ACQUIRE);
    __atomic_store_n(&p->models[i].next_first, __atomic_load_n(&m->next_first, __ATOMIC_RELAXED),
                     __ATOMIC_RELAXED);
    __atomic_store_n(&p->models[i].next_request, req, __ATOMIC_RELEASE);
}

static void pickers_to_slot(uint32_t n)
{
    struct msp_proc *p = msp_proc_now();
    if (p)
        __atomic_store_n(&p->next_picking, (uint64_t)n, __ATOMIC_RELAXED);
}

/* exec_range "next" request `req` dumps model i's rounds from `first` (once per
 * request); 1 if fixed now. */
static int fix_next(int i, uint64_t req, uint64_t first)
{
    struct model *m = &g_models[i];
    if (__atomic_load_n(&m->next_req, __ATOMIC_RELAXED) == req)
        return 0;
    __atomic_store_n(&m->next_first, first, __ATOMIC_RELAXED);
    __atomic_store_n(&m->next_req, req, __ATOMIC_RELEASE);
    return 1;
}

/* Is `round` of model m among the rounds fixed for cfg's exec_range "next" request? */
static int next_fixed(const struct model *m, const struct msp_config *cfg, uint64_t round)
{
    if (__atomic_load_n(&m->next_req, __ATOMIC_ACQUIRE) != cfg->next_request)
        return 0; /* its next execution has not begun yet */
    uint64_t first = __atomic_load_n(&m->next_first, __ATOMIC_RELAXED);
    return round >= first && round - first < cfg->next_count;
}

/* The index of the model, added the first time; -1 when the table is full. */
static int find_or_add(const char *name, size_t n)
{
    uint32_t have = __atomic_load_n(&g_n, __ATOMIC_ACQUIRE);
    for (uint32_t i = 0; i < have; i++)
        if (same(&g_models[i], name, n))
            return (int)i;
    pthread_mutex_lock(&g_mu);
    int found = -1;
    have = __atomic_load_n(&g_n, __ATOMIC_RELAXED);
    for (uint32_t i = 0; i < have && found < 0; i++)
        if (same(&g_models[i], name, n))
            found = (int)i;
    if (found < 0 && have < MSP_MAX_MODELS) {
        struct model *m = &g_models[have];
        size_t k = n < MSP_MODEL_NAME_LEN - 1 ? n : MSP_MODEL_NAME_LEN - 1;
        memcpy(m->name, name, k);
        m->name[k] = 0;
        m->n = n;
        struct msp_proc *p = msp_proc_now();
        if (p) {
            memcpy(p->models[have].name, m->name, sizeof m->name);
            __atomic_store_n(&p->n_models, (uint64_t)have + 1, __ATOMIC_RELEASE);
        }
        __atomic_store_n(&g_n, have + 1, __ATOMIC_RELEASE);
        found = (int)have;
    }
    pthread_mutex_unlock(&g_mu);
    return found;
}

/* Model i's execution under way began (seen), round `started` (the store's
 * news for the proc slot, out of line). */
static __attribute__((noinline)) void begun(int i, uint64_t started, uint64_t id)
{
    struct model *m = &g_models[i];
    __atomic_store_n(&m->begin_op, id, __ATOMIC_RELAXED);
    __atomic_store_n(&m->begin_ops, __atomic_load_n(&msp_t_ops, __ATOMIC_RELAXED),
                     __ATOMIC_RELAXED);
    __atomic_store_n(&m->begin_thread, (const void *)&msp_t_ops, __ATOMIC_RELAXED);
    __atomic_store_n(&m->started, started + 1, __ATOMIC_RELAXED);
    to_slot(msp_proc_now(), i);
}

/* 1 if this setup began an execution of model i. */
static inline int begin(int i, uint64_t id)
{
    struct model *m = &g_models[i];
    /* A model's ops are set up by the thread running its Model::Execute, which
     * also reports the execution's end: no other writer races these. */
    uint64_t started = __atomic_load_n(&m->started, __ATOMIC_RELAXED);
    if (started != __atomic_load_n(&m->executed, __ATOMIC_RELAXED))
        return 0; /* an execution is already under way */
    begun(i, started, id);
    return 1;
}

/* A top-level op of no known model, set up on this thread. */
static inline void note_unmapped(uint64_t id)
{
    uint64_t bit = (uint64_t)1 << (id % 64);
    if (t_unmapped.bits[id / 64] & bit) /* noted since the last report: within [lo, hi] */
        return;
    t_unmapped.bits[id / 64] |= bit;
    uint8_t none = 0;
    __atomic_compare_exchange_n(&msp_op_models.of[id], &none, (uint8_t)MSP_OP_PENDING, 0,
                                __ATOMIC_RELAXED, __ATOMIC_RELAXED);
    if (id < t_unmapped.lo)
        t_unmapped.lo = id;
    if (id > t_unmapped.hi)
        t_unmapped.hi = id;
}

/* Op id, set up in an execution the config dumps, counts in `bucket` until its
 * execute has asked its directory ASKS times. */
static void open_op(uint64_t id, uint8_t bucket)
{
    if (__atomic_exchange_n(&g_op_asks[id], (uint8_t)ASKS, __ATOMIC_RELAXED)) {
        uint8_t was = __atomic_load_n(&g_op_bucket[id], __ATOMIC_RELAXED);
        if (was == bucket)
            return; /* set up again in the same execution */
        __atomic_sub_fetch(&g_open[was], 1, __ATOMIC_RELAXED);
    }
    __atomic_store_n(&g_op_bucket[id], bucket, __ATOMIC_RELAXED);
    __atomic_add_fetch(&g_open[bucket], 1, __ATOMIC_RELAXED);
}

static void close_op(uint64_t id)
{
    __atomic_sub_fetch(&g_open[__atomic_load_n(&g_op_bucket[id], __ATOMIC_RELAXED)], 1,
                       __ATOMIC_RELAXED);
}

void msp_models_dir_asked(int64_t top)
{
    if (top < 0 || top >= MSP_MODEL_OP_IDS)
        return;
    uint8_t left = __atomic_load_n(&g_op_asks[top], __ATOMIC_RELAXED);
    if (left)
        __atomic_add_fetch(&g_asked, 1, __ATOMIC_RELAXED);
    while (left && !__atomic_compare_exchange_n(&g_op_asks[top], &left, (uint8_t)(left - 1), 0,
                                                __ATOMIC_RELAXED, __ATOMIC_RELAXED))
        ;
    if (left == 1)
        close_op((uint64_t)top);
}

/* Model i's next execution begins: its ops (and ops picked then mapped to it) that
 * are still open did not ask their directories as ATB does (their execute failed,
 * or another ATB asks otherwise); ATB-Models waited for them, so they are done. */
static void close_model_ops(int i)
{
    uint8_t mine = (uint8_t)(i + 1);
    if (!__atomic_load_n(&g_open[mine], __ATOMIC_RELAXED) &&
        !__atomic_load_n(&g_open[MSP_OP_PENDING], __ATOMIC_RELAXED))
        return;
    for (uint64_t id = 0; id < MSP_MODEL_OP_IDS; id++) {
        if (!__atomic_load_n(&g_op_asks[id], __ATOMIC_RELAXED))
            continue;
        uint8_t b = __atomic_load_n(&g_op_bucket[id], __ATOMIC_RELAXED);
        if ((b == mine || (b == MSP_OP_PENDING && model_of(id) == i + 1)) &&
            __atomic_exchange_n(&g_op_asks[id], (uint8_t)0, __ATOMIC_RELAXED))
            close_op(id);
    }
}

/* note_setup under exec_range "next" request `req` (m: the op's model + 1, 0: none). */
static __attribute__((noinline)) void note_next(const struct msp_config *cfg, uint64_t id, int m,
                                                int dirs)
{
    uint64_t req = cfg->next_request;
    /* Nothing set up on this thread since its last execution ended: this op begins
     * one, seen whole (asleep or awake-idle, begins are not seen, but the thread's
     * setups are counted: opcount.h). */
    if (msp_ops_unmoved())
        msp_t_exec_req = req;
    int after_edit = msp_t_exec_req == req;
    if (m) {
        if (begin(m - 1, id))
            close_model_ops(m - 1);
        uint64_t round = __atomic_load_n(&g_models[m - 1].started, __ATOMIC_RELAXED) - 1;
        if (after_edit && fix_next(m - 1, req, round))
            to_slot(msp_proc_now(), m - 1);
        if (dirs && next_fixed(&g_models[m - 1], cfg, round))
            open_op(id, (uint8_t)m);
        return;
    }
    if (after_edit) {
        __atomic_store_n(&g_op_pick[id], req, __ATOMIC_RELAXED);
        if (!msp_t_picking) {
            msp_t_picking = 1;
            pickers_to_slot(__atomic_add_fetch(&g_pickers, 1, __ATOMIC_RELAXED));
        }
        if (dirs)
            open_op(id, MSP_OP_PENDING);
    }
    note_unmapped(id);
}

static __attribute__((noinline)) void exact_from_now(void)
{
    __atomic_store_n(&g_exact, 1, __ATOMIC_RELAXED);
    __atomic_fetch_or(&msp_proc_now()->flags, (uint32_t)MSP_PROC_MODELS_EXACT, __ATOMIC_RELAXED);
}

void msp_models_note_setup(const struct msp_config *cfg, int64_t top, int dirs)
{
    if ((uint64_t)top >= MSP_MODEL_OP_IDS)
        return;
    if (__builtin_expect(!__atomic_load_n(&g_exact, __ATOMIC_RELAXED), 0))
        exact_from_now();
    uint64_t id = (uint64_t)top;
    int m = model_of(id);
    uint64_t req = cfg->next_request;
    if (__builtin_expect(req != 0, 0)) { /* every setup notes: no op is left quiet */
        note_next(cfg, id, m, dirs);
        return;
    }
    if (m) {
        begin(m - 1, id);
    } else {
        note_unmapped(id);
        m = __atomic_load_n(&msp_op_models.of[id], __ATOMIC_RELAXED);
        if (m != MSP_OP_PENDING) /* mapped meanwhile: its next setup begins it */
            return;
    }
    /* until the execution's end (or a new config) its ops' setups need no note */
    __atomic_store_n(&msp_op_models.quiet[m], 1, __ATOMIC_RELAXED);
}

/* This thread's execution ended (reported or abandoned): what the next begins from. */
static void thread_execution_over(void)
{
    if (msp_t_picking) {
        msp_t_picking = 0;
        pickers_to_slot(__atomic_sub_fetch(&g_pickers, 1, __ATOMIC_RELAXED));
    }
    msp_t_exec_req = 0;
    msp_ops_mark();
}

void msp_models_restarted(int64_t top)
{
    if (top < 0 || top >= MSP_MODEL_OP_IDS)
        return;
    int i = model_of((uint64_t)top) - 1;
    if (i < 0)
        return;
    struct model *m = &g_models[i];
    uint64_t started = __atomic_load_n(&m->started, __ATOMIC_RELAXED);
    if (started == __atomic_load_n(&m->executed, __ATOMIC_RELAXED) ||
        __atomic_load_n(&m->begin_op, __ATOMIC_RELAXED) != (uint64_t)top ||
        __atomic_load_n(&m->begin_thread, __ATOMIC_RELAXED) != (const void *)&msp_t_ops ||
        __atomic_load_n(&m->begin_ops, __ATOMIC_RELAXED) ==
            __atomic_load_n(&msp_t_ops, __ATOMIC_RELAXED))
        return;
    /* Its first op again, after other runners on its thread: the execution under way
     * failed before it reported its end. It is over; this setup begins the next. */
    __atomic_store_n(&m->executed, started, __ATOMIC_RELAXED);
    __atomic_store_n(&msp_op_models.quiet[i + 1], 0, __ATOMIC_RELAXED);
    close_model_ops(i);
    to_slot(msp_proc_now(), i);
    thread_execution_over();
}

void msp_models_quiet_reset(void)
{
    for (int m = 0; m < 256; m++)
        __atomic_store_n(&msp_op_models.quiet[m], 0, __ATOMIC_RELAXED);
}

void msp_models_asleep(void)
{
    __atomic_store_n(&g_exact, 0, __ATOMIC_RELAXED);
    __atomic_fetch_and(&msp_proc_now()->flags, ~(uint32_t)MSP_PROC_MODELS_EXACT,
                       __ATOMIC_RELAXED);
}

/* The execution that just ended on this thread was round `round` of model i: under
 * exec_range "next", the first of its rounds if it began after the edit, or, when the
 * process knew no model before (its ops were selected in the config's first N rounds),
 * the first N rounds if it was one of those. */
static void next_after(const struct msp_config *cfg, int i, uint64_t round, int first_model)
{
    uint64_t req = cfg ? cfg->next_request : 0;
    if (req && msp_t_exec_req == req)
        fix_next(i, req, round);
    else if (req && first_model && round < cfg->next_count)
        fix_next(i, req, 0);
}

void msp_models_executed(const struct msp_config *cfg, const char *name, size_t n)
{
    int first_model = __atomic_load_n(&g_n, __ATOMIC_ACQUIRE) == 0;
    int i = find_or_add(name, n);
    uint64_t lo = t_unmapped.lo, hi = t_unmapped.hi;
    t_unmapped.lo = UINT64_MAX;
    t_unmapped.hi = 0;
    if (i >= 0) {
        struct model *m = &g_models[i];
        /* its next setup begins the next execution */
        __atomic_store_n(&msp_op_models.quiet[i + 1], 0, __ATOMIC_RELAXED);
        uint64_t done = __atomic_add_fetch(&m->executed, 1, __ATOMIC_RELAXED);
        /* its first execution ran before its ops were known */
        if (__atomic_load_n(&m->started, __ATOMIC_RELAXED) < done)
            __atomic_store_n(&m->started, done, __ATOMIC_RELAXED);
        /* before its ops are mapped: they may still run (ATB's async execute) */
        next_after(cfg, i, done - 1, first_model);
    } /* else the table is full: this model is not counted */
    for (uint64_t w = lo / 64; lo <= hi && w <= hi / 64 && w < MSP_MODEL_OP_IDS / 64; w++) {
        uint64_t bits = t_unmapped.bits[w];
        t_unmapped.bits[w] = 0;
        /* this model's, or (the table full) of none known, noted again from now */
        for (; bits; bits &= bits - 1) {
            uint8_t *op = &msp_op_models.of[w * 64 + (uint64_t)__builtin_ctzll(bits)];
            uint8_t was = __atomic_load_n(op, __ATOMIC_RELAXED);
            if (was == 0 || was == MSP_OP_PENDING)
                __atomic_compare_exchange_n(op, &was, (uint8_t)(i + 1), 0, __ATOMIC_RELAXED,
                                            __ATOMIC_RELAXED);
        }
    }
    if (i >= 0)
        to_slot(msp_proc_now(), i);
    thread_execution_over();
}

int msp_models_next_selected(const struct msp_config *cfg, int64_t top, uint64_t round)
{
    if (top < 0 || top >= MSP_MODEL_OP_IDS)
        return -1;
    int i = model_of((uint64_t)top) - 1;
    if (i < 0 && __atomic_load_n(&g_op_pick[top], __ATOMIC_RELAXED) == cfg->next_request)
        return 1;
    if (i < 0) /* of a model not known yet (its execution began before the edit), or
                  of none: the config's ranges only while the process knows no model */
        return __atomic_load_n(&g_n, __ATOMIC_ACQUIRE) ? 0 : -1;
    return next_fixed(&g_models[i], cfg, round);
}

int msp_models_next_count(const struct msp_config *cfg, uint64_t count)
{
    if (__atomic_load_n(&g_pickers, __ATOMIC_RELAXED))
        return 1;
    uint32_t have = __atomic_load_n(&g_n, __ATOMIC_ACQUIRE);
    for (uint32_t i = 0; i < have; i++)
        if (next_fixed(&g_models[i], cfg, count))
            return 1;
    return 0;
}

/* Does model i's execution under way (or the ops of its last one still open) hold cfg? */
static int holds(int i, const struct msp_config *cfg)
{
    const struct model *m = &g_models[i];
    uint64_t started = __atomic_load_n(&m->started, __ATOMIC_RELAXED);
    /* none under way, nor ops of its last one still running (async execute):
     * else round started - 1 runs */
    if (started == __atomic_load_n(&m->executed, __ATOMIC_RELAXED) &&
        !(cfg->next_request && __atomic_load_n(&g_open[i + 1], __ATOMIC_RELAXED)))
        return 0;
    return cfg->next_request ? next_fixed(m, cfg, started - 1)
                             : msp_exec_selected(cfg, started - 1);
}

int msp_models_holding(const struct msp_config *cfg)
{
    if (cfg->next_request && (__atomic_load_n(&g_pickers, __ATOMIC_RELAXED) ||
                              __atomic_load_n(&g_open[MSP_OP_PENDING], __ATOMIC_RELAXED)))
        return 1; /* ops of a model not known yet, picked for this request */
    uint32_t have = __atomic_load_n(&g_n, __ATOMIC_ACQUIRE);
    for (uint32_t i = 0; i < have; i++)
        if (holds((int)i, cfg))
            return 1;
    return 0;
}

uint64_t msp_models_progress(void)
{
    uint64_t sum = __atomic_load_n(&g_asked, __ATOMIC_RELAXED);
    uint32_t have = __atomic_load_n(&g_n, __ATOMIC_ACQUIRE);
    for (uint32_t i = 0; i < have; i++)
        sum += __atomic_load_n(&g_models[i].started, __ATOMIC_RELAXED) +
               __atomic_load_n(&g_models[i].executed, __ATOMIC_RELAXED);
    return sum;
}

void msp_models_cut(const struct msp_config *cfg, void (*cut)(const char *model, uint64_t round))
{
    uint32_t have = __atomic_load_n(&g_n, __ATOMIC_ACQUIRE);
    for (uint32_t i = 0; i < have; i++) {
        if (!holds((int)i, cfg))
            continue;
        struct model *m = &g_models[i];
        uint64_t started = __atomic_load_n(&m->started, __ATOMIC_RELAXED);
        uint64_t executed = __atomic_load_n(&m->executed, __ATOMIC_RELAXED);
        /* unless its end was reported meanwhile */
        if (executed != started &&
            !__atomic_compare_exchange_n(&m->executed, &executed, started, 0, __ATOMIC_RELAXED,
                                         __ATOMIC_RELAXED))
            continue;
        __atomic_store_n(&msp_op_models.quiet[i + 1], 0, __ATOMIC_RELAXED);
        close_model_ops((int)i);
        to_slot(msp_proc_now(), (int)i);
        cut(m->name, started - 1);
    }
}

int msp_models_next_news(const struct msp_config *cfg, char *out, size_t cap)
{
    uint32_t have = __atomic_load_n(&g_n, __ATOMIC_ACQUIRE);
    size_t used = 0;
    int news = 0;
    for (uint32_t i = 0; i < have && used < cap; i++) {
        struct model *m = &g_models[i];
        if (__atomic_load_n(&m->next_req, __ATOMIC_ACQUIRE) != cfg->next_request ||
            m->said_req == cfg->next_request)
            continue;
        m->said_req = cfg->next_request;
        unsigned long long lo = __atomic_load_n(&m->next_first, __ATOMIC_RELAXED);
        unsigned long long hi = lo + cfg->next_count - 1;
        int k = lo == hi ? snprintf(out + used, cap - used, "%s%s round %llu", news ? ", " : "",
                                    m->name, lo)
                         : snprintf(out + used, cap - used, "%s%s rounds %llu-%llu",
                                    news ? ", " : "", m->name, lo, hi);
        used += k > 0 ? (size_t)k : 0;
        news = 1;
    }
    return news;
}

void msp_models_to_slot(struct msp_proc *p)
{
    uint32_t have = __atomic_load_n(&g_n, __ATOMIC_ACQUIRE);
    for (uint32_t i = 0; i < have; i++)
        memcpy(p->models[i].name, g_models[i].name, sizeof g_models[i].name);
    __atomic_store_n(&p->n_models, (uint64_t)have, __ATOMIC_RELEASE);
    for (uint32_t i = 0; i < have; i++)
        to_slot(p, (int)i);
    __atomic_store_n(&p->next_picking, (uint64_t)__atomic_load_n(&g_pickers, __ATOMIC_RELAXED),
                     __ATOMIC_RELAXED);
}

void msp_models_reset(void)
{
    pthread_mutex_init(&g_mu, NULL);
    memset(g_models, 0, sizeof g_models);
    memset(&msp_op_models, 0, sizeof msp_op_models);
    memset(g_op_pick, 0, sizeof g_op_pick);
    memset(g_op_asks, 0, sizeof g_op_asks);
    memset(g_open, 0, sizeof g_open);
    g_pickers = 0;
    msp_t_exec_req = 0;
    msp_t_picking = 0;
    g_exact = 0;
    g_n = 0;
    memset(t_unmapped.bits, 0, sizeof t_unmapped.bits);
    t_unmapped.lo = UINT64_MAX;
    t_unmapped.hi = 0;
}
