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

#include "models.h"
#include "opcount.h"

#ifdef __cplusplus
extern "C" {
#endif

struct msp_snap;

#ifdef __cplusplus
typedef bool msp_bool;
static_assert(sizeof(msp_bool) == 1, "answers.c returns a byte as a bool");
#else
typedef _Bool msp_bool;
_Static_assert(sizeof(msp_bool) == 1, "answers.c returns a byte as a bool");
#endif

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
typedef msp_bool (*msp_answerer)(void);
typedef msp_bool (*msp_count_answerer)(uint64_t count);
struct msp_answerers {
    msp_answerer data, desc, before, after, param, overflow;
    msp_count_answerer count;
};

/* The hooks' answerers: for a process that has not attached (attach, then
 * answer as the snapshot says), and those whose answer depends on the call. */
struct msp_hook_answerers {
    struct msp_answerers unattached;
    msp_count_answerer count;     /* exec ranges, exec_range "next" */
    msp_answerer after, overflow; /* the overflow task */
};
/* Called once, when the library loads (a constructor in hooks.c); the
 * process attaches only after it (snapshot.c). */
void msp_hot_register(const struct msp_hook_answerers *hooks) MSP_HIDDEN;

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
    const uint8_t *selectable; /* the snapshot's verdicts per top-level op id below
                                  MSP_MODEL_OP_IDS; stored before `applied` */
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
/* 0 while the top-level op this thread set up last (IsTensorNeedSave with ids
 * of one element, awake) is one the filters in force then cannot select, else
 * 1: IsSaveTensorDesc, asked next in the same Setup (docs/atb_hooks.md §4), answers it
 * as is. Initial-exec, so the adapter reads it inline; 1 on a thread that never
 * set up a top-level op. */
extern __thread uint8_t msp_t_top_desc MSP_HIDDEN __attribute__((tls_model("initial-exec")));
/* Not a snapshot: `awake` until the process has attached, so a hook that
 * checks `awake` (hooks.c) attaches first. */
extern struct msp_snap msp_hot_unattached MSP_HIDDEN;
#define MSP_HOT_UNATTACHED (&msp_hot_unattached)

/* Slow paths: attach, or copy a config the daemon published. */
void msp_hot_refresh(void) MSP_HIDDEN;
/* IsTensorNeedSave's: msp_hot_refresh if the generation moved, and (awake) the
 * top-level op's setup counted for its model. */
void msp_hot_need_save_slow(const int64_t *ids, size_t n);
/* UpdateConfig's: msp_hot_refresh if the generation moved, and every MSP_OPS_BATCH ops
 * of a thread (and its first) register the thread's counter and run the
 * monitor's duties while no monitor thread exists (see monitor.h). */
void msp_hot_update_slow(void) MSP_HIDDEN;
static inline msp_bool msp_hot_is_awake(void)
{
    return MSP_HOT_LOAD(msp_hot.awake) != NULL;
}

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
 * config has not moved since generation g was applied, and the op's model
 * needs no note (models.h). Takes the op's verdict, as the slow path would.
 * ids: [ids, end). */
static inline msp_bool msp_hot_quiet_setup(uint64_t g, const int64_t *ids, const int64_t *end)
{
    /* awake `seen` is `applied` + 1, and a block's generations only grow:
     * below it, g is the applied one (the compare that told asleep from awake) */
    if (g >= MSP_HOT_LOAD(msp_hot.seen) || end != ids + 1)
        return 0;
    uint64_t id = (uint64_t)ids[0];
    if (id >= MSP_MODEL_OP_IDS || !msp_models_setup_quiet(id))
        return 0;
    msp_t_top_desc = MSP_HOT_LOAD(msp_hot.selectable)[id];
    return 1;
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
