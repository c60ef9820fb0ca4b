/* The words the hooks' fast paths read (C and C++: the adapter inlines
 * them). Asleep, a predicate is one load of `awake` and a branch; the two
 * hooks that follow the config (IsTensorNeedSave, UpdateConfig) compare
 * the block's generation word with the one the snapshot holds. Before the
 * first attach `gen` points at a word that never matches, so that compare
 * is also the attach check. */
#ifndef MSP_HOT_H
#define MSP_HOT_H

#include <stddef.h>
#include <stdint.h>

#include "opcount.h"

#ifdef __cplusplus
extern "C" {
#endif

struct msp_snap;

#ifdef __cplusplus
typedef bool msp_bool;
#else
typedef _Bool msp_bool;
#endif

/* The argument-free predicates (and IsExecuteCountInRange), whose answer
 * while awake is mostly a property of the config: decided once per publish
 * (snapshot.c) into msp_hot.answers. A MSP_SAY bit answers yes for the whole
 * snapshot; a MSP_ASK bit sends the call to its awake half in the core (the
 * answer depends on the call's argument, the thread or a counter). Before the
 * first attach every predicate asks (the awake half attaches). */
enum msp_pred {
    MSP_PRED_DATA,
    MSP_PRED_DESC,
    MSP_PRED_COUNT,
    MSP_PRED_BEFORE,
    MSP_PRED_AFTER,
    MSP_PRED_PARAM,
    MSP_PRED_OVERFLOW,
};
#define MSP_SAY(p) (1u << (p))
#define MSP_ASK(p) (1u << ((p) + 16))
#define MSP_ASK_ALL 0xFFFF0000u

struct msp_hot {
    const uint64_t *gen;     /* the block's generation, or a private word */
    uint64_t seen;           /* the generation the hooks answer from; awake, a value
                                `gen` never holds, so the two hooks that follow the
                                config take their slow path (which counts each
                                model's executions, models.h) */
    uint64_t applied;        /* the generation the hooks answer from */
    struct msp_snap *awake;  /* the current snapshot while it is awake and can
                                select something, else NULL;
                                MSP_HOT_UNATTACHED before the first attach */
    uint32_t answers;        /* MSP_SAY / MSP_ASK bits of the awake snapshot; stored
                                before `awake` */
    msp_bool active;         /* attached with a config path (IsTensorNeedSave) */
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
/* Not a snapshot: makes every inline predicate take its slow path, which
 * attaches, until the process has attached. */
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
/* IsSaveTensorDesc's share: is the top-level op this thread is setting up
 * (its IsTensorNeedSave's slow path noted it) one that the filters of s cannot
 * select (so ATB need not build its directories)? */
int msp_hot_op_excluded(const struct msp_snap *s);

static inline msp_bool msp_hot_is_awake(void)
{
    return MSP_HOT_LOAD(msp_hot.awake) != NULL;
}

/* Awake: predicate p's answer for the whole snapshot (1 or 0), or -1: ask
 * its awake half. */
static inline int msp_hot_answer(enum msp_pred p)
{
    uint32_t a = MSP_HOT_LOAD(msp_hot.answers);
    if (__builtin_expect((a & MSP_ASK(p)) != 0, 0))
        return -1;
    return (a & MSP_SAY(p)) != 0;
}

/* The snapshot the awake halves answer from (NULL: asleep again). */
static inline struct msp_snap *msp_hot_awake(void)
{
    return __atomic_load_n(&msp_hot.awake, __ATOMIC_ACQUIRE);
}

/* The block's generation moved, the process has not attached yet, or it is
 * awake: the slow path is due. */
static inline msp_bool msp_hot_stale(void)
{
    const uint64_t *gen = MSP_HOT_LOAD(msp_hot.gen);
    return __atomic_load_n(gen, __ATOMIC_RELAXED) != MSP_HOT_LOAD(msp_hot.seen);
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
