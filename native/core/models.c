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
static uint8_t g_op_model[MSP_MODEL_OP_IDS]; /* model index + 1; 0: none known */

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

/* Top-level ops this thread set up since it last reported an execution's end,
 * whose model is not known yet: ATB-Models sets up every node of a model (each
 * a top-level op) on the thread that then asks IsReportModelTopoInfo(model),
 * so they are that model's. */
#define UNMAPPED_MAX 256
static __thread int32_t t_unmapped[UNMAPPED_MAX];
static __thread int t_n_unmapped;

void msp_models_op_setup(int64_t id)
{
    if (id < 0 || id >= MSP_MODEL_OP_IDS)
        return;
    int i = __atomic_load_n(&g_op_model[id], __ATOMIC_RELAXED) - 1;
    if (i < 0) {
        if (t_n_unmapped < UNMAPPED_MAX)
            t_unmapped[t_n_unmapped++] = (int32_t)id;
        return;
    }
    struct model *m = &g_models[i];
    /* A model's ops are set up by the thread running its Model::Execute, which
     * also reports the execution's end: no other writer races these two. */
    uint64_t started = __atomic_load_n(&m->started, __ATOMIC_RELAXED);
    if (started != __atomic_load_n(&m->executed, __ATOMIC_RELAXED))
        return; /* an execution is already under way */
    __atomic_store_n(&m->started, started + 1, __ATOMIC_RELAXED);
    to_slot(msp_proc_now(), i);
}

void msp_models_executed(const char *name, size_t n)
{
    int i = find_or_add(name, n);
    int unmapped = t_n_unmapped;
    t_n_unmapped = 0;
    if (i < 0)
        return;
    for (int k = 0; k < unmapped; k++)
        __atomic_store_n(&g_op_model[t_unmapped[k]], (uint8_t)(i + 1), __ATOMIC_RELAXED);
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
    int i = __atomic_load_n(&g_op_model[id], __ATOMIC_RELAXED) - 1;
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
    memset(g_op_model, 0, sizeof g_op_model);
    g_n = 0;
    t_n_unmapped = 0;
}
