/* The words the hooks' fast paths read (hot.h), and every store to them:
 * the answerers the hooks register when the library loads, the words of a
 * process that has not attached or cannot dump, and the publish of a
 * snapshot (snapshot.c decides what it answers; this file stores it, in the
 * order the fast paths rely on). Stores happen under snap_mu. */
#include "hot.h"

#include "state.h"

/* gen before the first attach: never equal to seen (0), so the first
 * IsTensorNeedSave/UpdateConfig takes the slow path and attaches. */
static const uint64_t g_unattached_gen = 1;
/* gen of a process that attached without a usable block: equal to seen. */
static const uint64_t g_inactive_gen = 0;

static const struct msp_answerers g_no = MSP_NO_ANSWERS;

/* The hooks' answerers (msp_hot_register), NULL until the library's constructor ran. */
static const struct msp_hook_answerers *g_hooks;

struct msp_snap msp_hot_unattached;
struct msp_hot msp_hot = {.gen = &g_unattached_gen,
                          .awake = &msp_hot_unattached,
                          .answer = MSP_NO_ANSWERS,
                          .top_verdicts = msp_hot_unattached.top_verdicts,
                          .count_end = UINT64_MAX};

/* Field by field, each a word a hook loads on its own. */
static void set_answers(const struct msp_answerers *a)
{
    __atomic_store_n(&msp_hot.answer.data, a->data, __ATOMIC_RELEASE);
    __atomic_store_n(&msp_hot.answer.desc, a->desc, __ATOMIC_RELEASE);
    __atomic_store_n(&msp_hot.answer.before, a->before, __ATOMIC_RELEASE);
    __atomic_store_n(&msp_hot.answer.after, a->after, __ATOMIC_RELEASE);
    __atomic_store_n(&msp_hot.answer.param, a->param, __ATOMIC_RELEASE);
    __atomic_store_n(&msp_hot.answer.overflow, a->overflow, __ATOMIC_RELEASE);
    __atomic_store_n(&msp_hot.answer.count, a->count, __ATOMIC_RELEASE);
}

void msp_hot_register(const struct msp_hook_answerers *hooks)
{
    pthread_mutex_lock(&g_msp.snap_mu);
    __atomic_store_n(&g_hooks, hooks, __ATOMIC_RELEASE);
    if (MSP_HOT_LOAD(msp_hot.awake) == MSP_HOT_UNATTACHED)
        set_answers(&hooks->unattached);
    pthread_mutex_unlock(&g_msp.snap_mu);
}

int msp_hot_registered(void)
{
    return msp_hot_hooks() != NULL;
}

const struct msp_hook_answerers *msp_hot_hooks(void)
{
    return __atomic_load_n(&g_hooks, __ATOMIC_ACQUIRE);
}

void msp_hot_publish(const struct msp_snap *s, const struct msp_answerers *a, uint64_t count_end)
{
    /* a hook whose answerer is awake finds s (or a later snapshot) in
     * `awake`: stored before the answerers on the way up, after them on the way down */
    if (a) {
        __atomic_store_n(&msp_hot.awake, (struct msp_snap *)s, __ATOMIC_RELEASE);
        __atomic_store_n(&msp_hot.count_end, count_end, __ATOMIC_RELEASE);
        __atomic_store_n(&msp_hot.memo_epoch, s->sel_plain ? s->sel_epoch : 0, __ATOMIC_RELEASE);
        set_answers(a);
    } else {
        set_answers(&g_no);
        __atomic_store_n(&msp_hot.memo_epoch, 0, __ATOMIC_RELEASE);
        __atomic_store_n(&msp_hot.awake, NULL, __ATOMIC_RELEASE);
    }
    __atomic_store_n(&msp_hot.active, (msp_bool)1, __ATOMIC_RELAXED);
    /* before `applied`: IsTensorNeedSave's fast path takes verdicts from it */
    __atomic_store_n(&msp_hot.top_verdicts, (const uint8_t *)s->top_verdicts, __ATOMIC_RELEASE);
    __atomic_store_n(&msp_hot.applied, s->generation, __ATOMIC_RELEASE);
    /* generations are even (seqlock): an odd `seen` never matches, so awake
     * IsTensorNeedSave takes its awake path (it counts model executions); one
     * above `applied`, so a generation below it is the applied one (hot.h) */
    __atomic_store_n(&msp_hot.seen, a ? s->generation | 1 : s->generation, __ATOMIC_RELEASE);
    __atomic_store_n(&msp_hot.gen, (const uint64_t *)&s->ctl->generation, __ATOMIC_RELEASE);
}

void msp_hot_inactive(void)
{
    set_answers(&g_no);
    __atomic_store_n(&msp_hot.memo_epoch, 0, __ATOMIC_RELEASE);
    __atomic_store_n(&msp_hot.awake, NULL, __ATOMIC_RELEASE);
    __atomic_store_n(&msp_hot.active, (msp_bool)0, __ATOMIC_RELAXED);
    __atomic_store_n(&msp_hot.seen, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&msp_hot.applied, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&msp_hot.gen, &g_inactive_gen, __ATOMIC_RELEASE);
}

void msp_hot_forget(void)
{
    msp_hot_inactive();
    __atomic_store_n(&msp_hot.gen, &g_unattached_gen, __ATOMIC_RELEASE);
    __atomic_store_n(&msp_hot.awake, &msp_hot_unattached, __ATOMIC_RELEASE);
    __atomic_store_n(&msp_hot.count_end, UINT64_MAX, __ATOMIC_RELEASE);
    if (g_hooks) /* a forked child of a process that attached: registered */
        set_answers(&g_hooks->unattached);
}
