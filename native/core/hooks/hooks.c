/* The hooks' own answerers of ATB's predicates (hot.h): those whose answer
 * depends on the call, and those that attach before the first attach (see
 * docs/contracts.md). The reports are reports.c, the saves save.c. */
#define _GNU_SOURCE
#include "hooks.h"

#include <stdint.h>

#include "attach.h"
#include "dirmemo.h"
#include "filter.h"
#include "models.h"
#include "overflow_task.h"
#include "recorder.h"
#include "selcache.h"
#include "snapshot.h"

/* The answerers whose answer depends on the call (hot.h). */

static __attribute__((noinline)) msp_bool count_selected(uint64_t count)
{
    const struct msp_snap *s = msp_hook_awake_snapshot();
    if (!s)
        return 0;
    return msp_ovf_task(s) || msp_exec_selected(&s->cfg, count) ||
           (s->cfg.next_request && msp_models_next_count(&s->cfg, count));
}

/* A runner past the exec ranges (most of a long service's) is told no after
 * a compare (count_selected apart, so this saves no registers). */
static msp_bool count_in_range(uint64_t count)
{
    return count < MSP_HOT_LOAD(msp_hot.count_end) && count_selected(count);
}

/* The overflow task: after saves for the kernel ATB just reported, and for
 * every kernel while the probe scans. */
static msp_bool save_after(void)
{
    const struct msp_snap *s = msp_hook_awake_snapshot();
    return s && (!msp_ovf_task(s) || msp_t_ovf_pending_n > 0 || msp_ovf_probe_scans(s));
}

static msp_bool overflow_check(void)
{
    const struct msp_snap *s = msp_hook_awake_snapshot();
    if (!s)
        return 0;
    if (!msp_ovf_task(s))
        return msp_recorder_overflow_wanted(&s->cfg);
    return msp_ovf_events_left(s);
}

/* Before the process attached, whichever predicate comes first (ATB's
 * context init asks IsOverflowCheck before any op) attaches, then answers
 * as the snapshot now says; still unattached (no memory), it says no. */
#define ATTACH_THEN_ANSWER(pred)                                                            \
    static msp_bool attach_then_##pred(void)                                                \
    {                                                                                       \
        msp_slow_refresh();                                                                  \
        msp_answerer now = MSP_HOT_LOAD(msp_hot.answer.pred);                               \
        return now != attach_then_##pred && now();                                          \
    }
ATTACH_THEN_ANSWER(data)
ATTACH_THEN_ANSWER(desc)
ATTACH_THEN_ANSWER(before)
ATTACH_THEN_ANSWER(after)
ATTACH_THEN_ANSWER(param)
ATTACH_THEN_ANSWER(overflow)

static msp_bool attach_then_count(uint64_t count)
{
    msp_slow_refresh();
    msp_count_answerer now = MSP_HOT_LOAD(msp_hot.answer.count);
    return now != attach_then_count && now(count);
}

/* Loading the library stores these pointers and does nothing else. */
__attribute__((constructor)) static void register_answerers(void)
{
    static const struct msp_hook_answerers answerers = {
        .unattached = {.data = attach_then_data, .desc = attach_then_desc,
                       .before = attach_then_before, .after = attach_then_after,
                       .param = attach_then_param, .overflow = attach_then_overflow,
                       .count = attach_then_count},
        .count = count_in_range,
        .after = save_after,
        .overflow = overflow_check};
    msp_hot_register(&answerers);
}

/* The device filter and exec_range "next" (a model's own rounds) on dir;
 * the overflow task: the kernel ATB just reported, and every kernel while
 * the probe scans. */
static msp_bool in_dir_checked(const struct msp_snap *s, msp_sv dir)
{
    uint64_t round;
    int64_t top;
    int shape = s->cfg.next_request ? msp_dir_round(dir.p, dir.n, &round, &top) : 0;
    if (shape == MSP_DIR_TOP) /* its execute's progress, whatever the answer (models.h) */
        msp_models_dir_asked(top);
    if (!msp_device_selected(&s->cfg, dir.p, dir.n))
        return 0;
    if (!msp_ovf_task(s) && s->cfg.next_request) {
        /* a model's own rounds; an op of no known model, the config's ranges */
        if (!shape)
            return 0;
        int picked = msp_models_next_selected(&s->cfg, top, round);
        if (picked == 0 || (picked < 0 && !msp_exec_selected(&s->cfg, round)))
            return 0;
    }
    if (!msp_ovf_task(s))
        return msp_selcache_op_selected(s->sel, s->sel_epoch, &s->cfg, dir.p, dir.n);
    if (msp_t_ovf_pending_n &&
        msp_kernel_dir_matches(msp_t_ovf_pending, msp_t_ovf_pending_n, dir.p, dir.n)) {
        msp_t_ovf_pending_n = 0; /* this kernel's after save is now allowed, once */
        msp_ovf_event_dir(dir.p, dir.n, msp_t_ovf_pending_seq);
        return 1;
    }
    return msp_ovf_probe_scans(s) && msp_kernel_dir(dir.p, dir.n);
}

/* Not in this thread's memo: asleep no; most configs, the op's verdict alone,
 * from the process's cache (selcache.h), kept in the memo; the others checked. */
static __attribute__((noinline)) msp_bool in_dir_unmemoized(msp_sv dir)
{
    const struct msp_snap *s = msp_hook_awake_snapshot();
    if (!s)
        return 0;
    if (!s->sel_plain)
        return in_dir_checked(s, dir);
    int verdict = msp_selcache_op_selected(s->sel, s->sel_epoch, &s->cfg, dir.p, dir.n);
    msp_dirmemo_put(s->sel_epoch, dir.p, dir.n, verdict);
    return verdict;
}

msp_bool msp_hook_in_dir(msp_sv dir)
{
    /* this thread's memo (dirmemo.h) under the epoch of the config in force:
     * 0 (never kept) unless awake with one whose verdict is the op's alone */
    int verdict = msp_dirmemo_get(MSP_HOT_LOAD(msp_hot.memo_epoch), dir.p, dir.n);
    return verdict >= 0 ? (msp_bool)verdict : in_dir_unmemoized(dir);
}
