/* The words the hooks' fast paths read (C and C++: the adapter inlines
 * them). Asleep, a predicate jumps to a constant "no" (its answerer); the two
 * hooks that follow the config (IsTensorNeedSave, UpdateConfig) compare
 * the block's generation word with the one the snapshot holds. Before the
 * first attach `gen` points at a word that never matches, so that compare
 * is also the attach check. */
#ifndef MSP_HOT_H
#define MSP_HOT_H

#include <stddef.h>
#include <stdint.h>

#include "answers.h"
#include "models.h"
#include "opcount.h"

#ifdef __cplusplus
extern "C" {
#endif

struct msp_snap;

/* The hooks' answerers: for a process that has not attached (attach, then
 * answer as the snapshot says), and those whose answer depends on the call. */
struct msp_hook_answerers {
    struct msp_answerers unattached;
    msp_count_answerer count;     /* exec ranges, exec_range "next" */
    msp_answerer after, overflow; /* the overflow task */
};
/* Called once, when the library loads (a constructor in hooks.c); the
 * process attaches only after it (attach.c asks msp_hot_registered). */
void msp_hot_register(const struct msp_hook_answerers *hooks) MSP_HIDDEN;
int msp_hot_registered(void);
/* The hooks' answerers, NULL before msp_hot_register. */
const struct msp_hook_answerers *msp_hot_hooks(void);

/* What a predicate answers under the snapshot in force: the adapter
 * tail-jumps to its answerer through msp_hot.answer (one load and an
 * indirect jump), so a predicate whose answer is a property of the config,
 * decided once per publish (snapshot.c), costs a constant function's two
 * instructions, asleep or awake (asleep, every answerer is "no"): a hook
 * that selects nothing or everything costs what a sleeping one does. An
 * answer that depends on the call's argument, the thread or a counter is the
 * hooks' own answerer (hooks.c registers them when the library loads:
 * struct msp_hook_answerers); IsSaveTensorDesc answers, while the filters can
 * exclude a top-level op, from the verdict on this thread's current one
 * (msp_t_top_desc). Before the first attach every answerer attaches, once
 * the hooks registered theirs (until then, every one says no). */
struct msp_hot {
    const uint64_t *gen;     /* the block's generation, or a private word */
    uint64_t seen;           /* the generation the hooks answer from; awake, that
                                + 1 (odd: `gen` holds it only mid-write), so
                                IsTensorNeedSave takes its awake path (which
                                counts each model's executions, models.h) */
    uint64_t applied;        /* the generation the hooks answer from */
    struct msp_snap *awake;  /* the current snapshot while it is awake and can
                                select something, else NULL;
                                MSP_HOT_UNATTACHED before the first attach */
    struct msp_answerers answer; /* the predicates' answerers (all "no" asleep) */
    msp_bool active;         /* attached with a config path (IsTensorNeedSave) */
    uint64_t count_end;      /* IsExecuteCountInRange asks the hooks: a count from
                                here on is in no exec range (UINT64_MAX: ask for
                                every count); stored before `answer.count` */
    const uint8_t *top_verdicts; /* the snapshot's verdicts per top-level op id below
                                    MSP_MODEL_OP_IDS (MSP_TOP_*); stored before `applied` */
    uint32_t memo_epoch;     /* IsSaveTensorInSpecificDir's memo (dirmemo.h): the
                                snapshot's sel_epoch while it is awake and its verdict
                                is the op's alone (sel_plain), else 0 (never kept) */
} __attribute__((aligned(64)));

/* The fast paths read these words with plain loads: one word each, written
 * only under snap_mu, so a racing reader sees the old or the new value, and
 * a plain load is what lets the compiler fold it into the compare (an
 * atomic load costs each hook one more instruction). Under TSan they are
 * relaxed atomic loads, which is what they mean. */
#if defined(__SANITIZE_THREAD__)
#define MSP_HOT_LOAD(x) __atomic_load_n(&(x), __ATOMIC_RELAXED)
#else
#define MSP_HOT_LOAD(x) (x)
#endif

extern struct msp_hot msp_hot MSP_HIDDEN;
/* Not a snapshot: `awake` until the process has attached, so a hook that
 * checks `awake` (hooks.c) attaches first. */
extern struct msp_snap msp_hot_unattached MSP_HIDDEN;
#define MSP_HOT_UNATTACHED (&msp_hot_unattached)

/* Every word written under snap_mu, by the lifecycle only:
 * the hooks answer from snapshot s from now on; `a` its answerers, NULL if
 * its hooks are asleep (every predicate no); count_end as msp_hot's. */
void msp_hot_publish(const struct msp_snap *s, const struct msp_answerers *a, uint64_t count_end);
/* A process that cannot dump: every predicate no, no config followed. */
void msp_hot_inactive(void);
/* A process that has not attached (a forked child): the first hook attaches. */
void msp_hot_forget(void);

/* The snapshot the awake answerers answer from (NULL: asleep again). */
static inline struct msp_snap *msp_hot_awake(void)
{
    return __atomic_load_n(&msp_hot.awake, __ATOMIC_ACQUIRE);
}

/* The block's generation word. */
static inline uint64_t msp_hot_generation(void)
{
    return __atomic_load_n(MSP_HOT_LOAD(msp_hot.gen), __ATOMIC_RELAXED);
}

/* Awake, a top-level op's setup that needs no call (most of them): the
 * config has not moved since generation g was applied, the op's model
 * needs no note (models.h), and its verdicts are decided. Takes the verdict
 * IsSaveTensorDesc answers from, as the slow path would, and returns the
 * op's verdicts (MSP_TOP_*); 0: the slow path's to answer. ids: [ids, end). */
static inline unsigned msp_hot_quiet_setup(uint64_t g, const int64_t *ids, const int64_t *end)
{
    /* awake `seen` is `applied` + 1, and a block's generations only grow:
     * below it, g is the applied one. Loaded again (an atomic load is not merged
     * with the plain one), so the asleep compare keeps its memory operand. */
    if (g >= __atomic_load_n(&msp_hot.seen, __ATOMIC_RELAXED) || end != ids + 1)
        return 0;
    uint64_t id = (uint64_t)ids[0];
    if (id >= MSP_MODEL_OP_IDS || !msp_models_setup_quiet(id))
        return 0;
    /* another thread's first setup of an op may decide its MSP_TOP_OWN meanwhile */
    unsigned v = __atomic_load_n(&MSP_HOT_LOAD(msp_hot.top_verdicts)[id], __ATOMIC_RELAXED);
    if (!(v & MSP_TOP_KNOWN))
        return 0;
    msp_t_top_desc = v & MSP_TOP_DESC;
    return v;
}

/* The block's generation moved, or the process has not attached yet. */
static inline msp_bool msp_hot_changed(void)
{
    const uint64_t *gen = MSP_HOT_LOAD(msp_hot.gen);
    return __atomic_load_n(gen, __ATOMIC_RELAXED) != MSP_HOT_LOAD(msp_hot.applied);
}

/* Counts a runner setup; 1 when a batch is full (a tick is due). Single
 * writer: a relaxed load and store, read by the flusher. */
static inline msp_bool msp_hot_count_op(void)
{
    uint64_t n = __atomic_load_n(&msp_t_ops, __ATOMIC_RELAXED) + 1;
    __atomic_store_n(&msp_t_ops, n, __ATOMIC_RELAXED);
    return (n & (MSP_OPS_BATCH - 1)) == 0;
}

#ifdef __cplusplus
}
#endif

#endif
