/* The hooks' slow paths (slowpath.h): what a hook does when its fast path
 * cannot answer: attach on the first hook, follow a config the daemon
 * published, count a thread's ops into the monitor's duties, note a model's
 * setup (and the verdict on the top-level op IsSaveTensorDesc asks about
 * next). The lifecycle's entry from the hot path; the words the fast paths
 * read are hot.c's. */
#include "slowpath.h"

#include "attach.h"
#include "filter.h"
#include "hot.h"
#include "models.h"
#include "monitor.h"
#include "opcount.h"
#include "snapshot.h"
#include "state.h"

/* Out of line: the slow paths that call it run at many awake setups. */
__attribute__((noinline, cold)) void msp_slow_refresh(void)
{
    msp_ensure_attached();
    msp_snap_check();
}

void msp_slow_update(void)
{
    if ((__atomic_load_n(&msp_t_ops, __ATOMIC_RELAXED) & (MSP_OPS_BATCH - 1)) == 0) {
        msp_ops_tick();
        msp_monitor_hook_tick();
    }
    if (msp_hot_changed())
        msp_slow_refresh();
}

/* Can the filters of s select nothing of top-level op `top`? */
static inline int top_excluded(const struct msp_snap *s, int64_t top)
{
    if (top >= 0 && top < MSP_MODEL_OP_IDS)
        return !(s->top_verdicts[top] & MSP_TOP_DESC);
    if (s->n_tops < 0)
        return 0;
    for (int i = 0; i < s->n_tops; i++)
        if (s->tops[i] == top)
            return 0;
    return 1;
}

/* IsTensorNeedSave's answer for top-level op `top` named `name` under snapshot s
 * (NULL: as asleep): can the filters select its own directory? Decided once per op
 * and snapshot below MSP_MODEL_OP_IDS (an op keeps its id and its name: atb_hooks.md
 * §2), then the adapter answers from s->top_verdicts. */
static msp_bool top_own_selected(struct msp_snap *s, int64_t top, const char *name, size_t n)
{
    if (!s || !s->own_filtered)
        return MSP_HOT_LOAD(msp_hot.active);
    int own = msp_top_op_selected(&s->cfg, top, name, n);
    if (top >= 0 && top < MSP_MODEL_OP_IDS)
        __atomic_fetch_or(&s->top_verdicts[top], MSP_TOP_KNOWN | (own ? MSP_TOP_OWN : 0),
                          __ATOMIC_RELAXED);
    return own != 0;
}

/* Takes the verdict on top-level op `top` and notes its setup under the snapshot
 * in force; returns that snapshot (NULL: asleep, or no memory for one yet). */
static struct msp_snap *note_setup(int64_t top)
{
    struct msp_snap *s = msp_hot_awake();
    if (!s || s == MSP_HOT_UNATTACHED) {
        msp_t_top_desc = 1;
        return NULL;
    }
    msp_t_top_desc = (uint8_t)!top_excluded(s, top);
    msp_models_note_setup(&s->cfg, top, msp_t_top_desc);
    return s;
}

/* While a refresh does its few stores (no syscall). */
static inline void spin_pause(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ volatile("yield");
#endif
}

msp_bool msp_slow_need_save(const int64_t *ids, size_t n, const char *name, size_t namen)
{
    /* an execution that failed before its end holds no edit past its model's next
     * beginning: that ends it before the config is followed */
    if (n == 1)
        msp_models_restarted(ids[0]);
    if (__builtin_expect(msp_hot_changed(), 0))
        msp_slow_refresh();
    if (n != 1) /* a child or a kernel, asked once and cached by ATB */
        return MSP_HOT_LOAD(msp_hot.active);
    /* No lock: a setup that begins an execution must not fall between a refresh's
     * check that no execution it must finish runs and the publish of an edit
     * (snapshot.c: held). The note's stores, then a look at g_msp.deciding; the
     * refresh sets it odd, then checks: one of the two sees the other. A refresh
     * that decided meanwhile may have missed this note: once it is done, note again
     * under what it left in force (a second note of a setup changes nothing).
     * Awake, most setups of an op stay in the adapter (msp_hot_quiet_setup): this
     * is about once an execution, every top-level op under exec_range "next". */
    uint64_t before = __atomic_load_n(&g_msp.deciding, __ATOMIC_ACQUIRE);
    struct msp_snap *s = note_setup(ids[0]);
    MSP_DECIDING_FENCE();
    uint64_t now = __atomic_load_n(&g_msp.deciding, __ATOMIC_ACQUIRE);
    if (__builtin_expect(now != before || (now & 1), 0)) {
        while (__atomic_load_n(&g_msp.deciding, __ATOMIC_ACQUIRE) & 1) /* a few stores */
            spin_pause();
        if (msp_hot_awake() != s)
            s = note_setup(ids[0]);
    }
    return top_own_selected(s, ids[0], name, namen);
}
