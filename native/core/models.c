/* The models a process runs, by the names it reports: executions begun and
 * issued per model, and which top-level ops belong to which (models.h). */
#include "models.h"

#include <pthread.h>
#include <string.h>

#include "state.h"

struct model {
    char name[MSP_MODEL_NAME_LEN]; /* NUL-terminated, cut to fit */
    size_t n;                      /* the full name's length */
    uint64_t started, executed;    /* atomic */
};

static struct model g_models[MSP_MAX_MODELS];
static uint32_t g_n; /* entries in use; atomic, grows under g_mu */
static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static uint8_t msp_op_model[MSP_MODEL_OP_IDS]; /* model index + 1; 0: none known */
static int g_exact;                               /* MSP_PROC_MODELS_EXACT is set */
/* The top-level op ids this thread set up since it last reported an execution's
 * end, of no known model: a bit each, within [lo, hi] (lo > hi: none). ATB-Models
 * sets up a model's nodes on the thread that then reports the execution. */
static __thread uint64_t msp_t_unmapped[MSP_MODEL_OP_IDS / 64];
static __thread uint64_t msp_t_unmapped_lo = UINT64_MAX;
static __thread uint64_t msp_t_unmapped_hi = 0;

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

static void begin(int i)
{
    struct model *m = &g_models[i];
    /* A model's ops are set up by the thread running its Model::Execute, which
     * also reports the execution's end: no other writer races these. */
    uint64_t started = __atomic_load_n(&m->started, __ATOMIC_RELAXED);
    if (started != __atomic_load_n(&m->executed, __ATOMIC_RELAXED))
        return; /* an execution is already under way */
    __atomic_store_n(&m->started, started + 1, __ATOMIC_RELAXED);
    to_slot(msp_proc_now(), i);
}

void msp_models_note_setup(const int64_t *ids, size_t n)
{
    if (n != 1 || (uint64_t)ids[0] >= MSP_MODEL_OP_IDS || !msp_hot_is_awake())
        return;
    if (!__atomic_load_n(&g_exact, __ATOMIC_RELAXED)) {
        __atomic_store_n(&g_exact, 1, __ATOMIC_RELAXED);
        __atomic_fetch_or(&msp_proc_now()->flags, (uint32_t)MSP_PROC_MODELS_EXACT,
                          __ATOMIC_RELAXED);
    }
    uint64_t id = (uint64_t)ids[0];
    int m = __atomic_load_n(&msp_op_model[id], __ATOMIC_RELAXED);
    if (m) {
        begin(m - 1);
        return;
    }
    msp_t_unmapped[id / 64] |= (uint64_t)1 << (id % 64);
    if (id < msp_t_unmapped_lo)
        msp_t_unmapped_lo = id;
    if (id > msp_t_unmapped_hi)
        msp_t_unmapped_hi = id;
}

void msp_models_asleep(void)
{
    __atomic_store_n(&g_exact, 0, __ATOMIC_RELAXED);
    __atomic_fetch_and(&msp_proc_now()->flags, ~(uint32_t)MSP_PROC_MODELS_EXACT,
                       __ATOMIC_RELAXED);
}

void msp_models_executed(const char *name, size_t n)
{
    int i = find_or_add(name, n);
    uint64_t lo = msp_t_unmapped_lo, hi = msp_t_unmapped_hi;
    msp_t_unmapped_lo = UINT64_MAX;
    msp_t_unmapped_hi = 0;
    for (uint64_t w = lo / 64; lo <= hi && w <= hi / 64 && w < MSP_MODEL_OP_IDS / 64; w++) {
        uint64_t bits = msp_t_unmapped[w];
        msp_t_unmapped[w] = 0;
        for (; i >= 0 && bits; bits &= bits - 1) {
            uint8_t none = 0;
            __atomic_compare_exchange_n(&msp_op_model[w * 64 + (uint64_t)__builtin_ctzll(bits)],
                                        &none, (uint8_t)(i + 1), 0, __ATOMIC_RELAXED,
                                        __ATOMIC_RELAXED);
        }
    }
    if (i < 0)
        return; /* the table is full: this model is not counted */
    struct model *m = &g_models[i];
    uint64_t done = __atomic_add_fetch(&m->executed, 1, __ATOMIC_RELAXED);
    /* its first execution ran before its ops were known */
    if (__atomic_load_n(&m->started, __ATOMIC_RELAXED) < done)
        __atomic_store_n(&m->started, done, __ATOMIC_RELAXED);
    to_slot(msp_proc_now(), i);
}

const char *msp_models_of_op(int64_t id)
{
    if (id < 0 || id >= MSP_MODEL_OP_IDS)
        return NULL;
    int i = __atomic_load_n(&msp_op_model[id], __ATOMIC_RELAXED) - 1;
    return i < 0 ? NULL : g_models[i].name;
}

void msp_models_to_slot(struct msp_proc *p)
{
    uint32_t have = __atomic_load_n(&g_n, __ATOMIC_ACQUIRE);
    for (uint32_t i = 0; i < have; i++)
        memcpy(p->models[i].name, g_models[i].name, sizeof g_models[i].name);
    __atomic_store_n(&p->n_models, (uint64_t)have, __ATOMIC_RELEASE);
    for (uint32_t i = 0; i < have; i++)
        to_slot(p, (int)i);
}

void msp_models_reset(void)
{
    pthread_mutex_init(&g_mu, NULL);
    memset(g_models, 0, sizeof g_models);
    memset(msp_op_model, 0, sizeof msp_op_model);
    g_exact = 0;
    g_n = 0;
    memset(msp_t_unmapped, 0, sizeof msp_t_unmapped);
    msp_t_unmapped_lo = UINT64_MAX;
    msp_t_unmapped_hi = 0;
}
