/* The words the hooks' fast paths read (C and C++: the adapter inlines
 * them). Asleep, a predicate is one load of its answer and a branch; the two
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
static_assert(sizeof(msp_bool) == 1, "msp_hot_said copies one byte");
#else
typedef _Bool msp_bool;
_Static_assert(sizeof(msp_bool) == 1, "msp_hot_said copies one byte");
#endif

/* The argument-free predicates (and IsExecuteCountInRange), whose answer
 * while awake is mostly a property of the config: decided once per publish
 * (snapshot.c) into msp_hot.answers, one byte each. MSP_NO and MSP_YES
 * answer for the whole snapshot, so a hook that selects nothing or
 * everything costs what a sleeping one does (asleep, every byte is MSP_NO:
 * the same load and branch serve both). MSP_ASK sends the call to its awake
 * half in the core (the answer depends on the call's argument, the thread
 * or a counter); MSP_PER_OP (IsSaveTensorDesc only) answers from the
 * verdict on this thread's current top-level op (msp_t_top_desc).
 * Before the first attach every predicate asks (the awake half attaches). */
enum msp_pred {
    MSP_PRED_DATA,
    MSP_PRED_DESC,
    MSP_PRED_COUNT,
    MSP_PRED_BEFORE,
    MSP_PRED_AFTER,
    MSP_PRED_PARAM,
    MSP_PRED_OVERFLOW,
};
enum { MSP_NO, MSP_YES, MSP_ASK, MSP_PER_OP };
#define MSP_ASK_ALL 0x0202020202020202ull

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
    union {                  /* per predicate: MSP_NO.. (all MSP_NO asleep); one
                                word, so a hook sees one snapshot's answers */
        uint8_t of[8];
        uint64_t word;
    } answers;
    msp_bool active;         /* attached with a config path (IsTensorNeedSave) */
    uint64_t count_end;      /* IsExecuteCountInRange asks: a count from here on is
                                in no exec range (UINT64_MAX: ask for every count);
                                stored before `answers` */
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
 * 1: IsSaveTensorDesc, asked next in the same Setup (callsites §4), answers it
 * as is. Initial-exec, so the adapter reads it inline; 1 on a thread that never
 * set up a top-level op. */
extern __thread uint8_t msp_t_top_desc MSP_HIDDEN __attribute__((tls_model("initial-exec")));
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
static inline msp_bool msp_hot_is_awake(void)
{
    return MSP_HOT_LOAD(msp_hot.awake) != NULL;
}

/* Predicate p's answer under the snapshot in force (MSP_NO asleep). */
static inline uint8_t msp_hot_answer(enum msp_pred p)
{
    return MSP_HOT_LOAD(msp_hot.answers.of[p]);
}

/* An answer of MSP_NO or MSP_YES as is: its byte is the bool's, so the
 * hook returns what it loaded (a conversion costs each hook an instruction). */
static inline msp_bool msp_hot_said(uint8_t a)
{
    msp_bool r;
    __builtin_memcpy(&r, &a, 1);
    return r;
}

/* The snapshot the awake halves answer from (NULL: asleep again). */
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
