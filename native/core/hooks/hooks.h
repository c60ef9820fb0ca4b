/* The C entry points behind the atb::Probe / atb_speed::SpeedProbe hooks.
 * The C++ adapter (native/adapter/hooks.cpp) forwards each hook here with
 * (pointer, length) views of its std::string / std::vector arguments, so
 * the core never touches a libstdc++ type and is compiled once for both
 * ABIs. Nothing here throws; bad input is logged, counted and survived.
 * This header: the predicates' fast paths, and the answerer behind them that
 * depends on the call (hooks.c); the saves are save.h, the reports
 * reports.h. */
#ifndef MSP_HOOKS_H
#define MSP_HOOKS_H

#include <stddef.h>
#include <stdint.h>

#include "filter.h"
#include "hot.h"
#include "slowpath.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
    const char *p;
    size_t n;
} msp_sv;

/* The predicates ATB asks per op jump to their answerer (hot.h): asleep,
 * and awake where the config decides alone, a constant function; only an
 * answer that depends on the call reaches the hooks' own (hooks.c).
 * IsSaveTensorInSpecificDir's, for a dir of the dump dirs' shape: asleep no. */
msp_bool msp_hook_in_dir(msp_sv dir);

/* The snapshot for an awake answerer or hook: NULL if asleep again since
 * the hook's check. Before the process attached (at its start, in a forked
 * child, or with no memory for a snapshot yet) `awake` holds
 * MSP_HOT_UNATTACHED, so IsSaveTensorInSpecificDir, ReportOverflowKernel or
 * an answerer loaded just before a fork attaches here. Inline: the
 * answerers (hooks.c) and the reports (reports.c) share it. */
static inline const struct msp_snap *msp_hook_awake_snapshot(void)
{
    const struct msp_snap *s = msp_hot_awake();
    if (__builtin_expect(s == MSP_HOT_UNATTACHED, 0)) {
        msp_slow_refresh();
        s = msp_hot_awake();
    }
    return s == MSP_HOT_UNATTACHED ? NULL : s; /* still: no memory for a snapshot */
}

/* IsTensorNeedSave: ATB caches the answer for children and kernels, so it
 * must not depend on the current config (the other predicates filter):
 * attached with a config path. It also follows the config, and awake a
 * top-level op's setup (ids of one element, asked at every Setup) counts the
 * start of its model's execution (models.h) and takes the verdict
 * IsSaveTensorDesc answers from next (msp_t_top_desc); inline unless its
 * model needs a note or its verdicts are not decided yet (msp_hot_quiet_setup).
 * That setup's answer gates only the top-level runner's own saves, and ATB asks
 * it again at the next Setup: awake, it is no for an op whose own directory the
 * filters cannot select (MSP_TOP_OWN), which spares ATB its runner's three
 * IsSaveTensorInSpecificDir per execute. In three parts, so that the adapter
 * reads ATB's vector and the name only awake (read before the branch, the
 * vector cost every sleeping call two loads):
 *   g = msp_hot_generation(); if (!msp_hook_need_save_asleep(g)) return msp_hook_need_save_awake(g, ..);
 *   return msp_hook_need_save_answer(); */
/* Asleep (and awake-idle) the block's generation g is `seen`: only the answer. */
static inline msp_bool msp_hook_need_save_asleep(uint64_t g)
{
    return g == MSP_HOT_LOAD(msp_hot.seen); /* awake, `seen` is an odd word */
}

/* ids: [ids, end); name: the op's. */
static inline msp_bool msp_hook_need_save_awake(uint64_t g, const int64_t *ids,
                                                const int64_t *end, msp_sv name)
{
    unsigned v = msp_hot_quiet_setup(g, ids, end);
    if (!v)
        return msp_slow_need_save(ids, (size_t)(end - ids), name.p, name.n);
    return (v & MSP_TOP_OWN) != 0;
}

static inline msp_bool msp_hook_need_save_answer(void)
{
    return MSP_HOT_LOAD(msp_hot.active);
}

/* Counts the op and follows the config (it counts no model execution, so
 * awake it need not take the slow path IsTensorNeedSave takes). */
static inline void msp_hook_update_config(void)
{
    if (__builtin_expect(msp_hot_count_op() || msp_hot_changed(), 0))
        msp_slow_update();
}

static inline msp_bool msp_hook_is_save_tensor_data(void)
{
    return MSP_HOT_LOAD(msp_hot.answer.data)();
}

/* Per top-level op while the filters can exclude one: its verdict was taken
 * by IsTensorNeedSave, which ATB asks just before, in the same Setup. */
static inline msp_bool msp_hook_is_save_tensor_desc(void)
{
    return MSP_HOT_LOAD(msp_hot.answer.desc)();
}

/* Under exec ranges, a runner past them (most of a long service's) is told no
 * after a compare. */
static inline msp_bool msp_hook_is_execute_count_in_range(uint64_t count)
{
    return MSP_HOT_LOAD(msp_hot.answer.count)(count);
}

static inline msp_bool msp_hook_is_save_tensor_before(void)
{
    return MSP_HOT_LOAD(msp_hot.answer.before)();
}

static inline msp_bool msp_hook_is_save_tensor_after(void)
{
    return MSP_HOT_LOAD(msp_hot.answer.after)();
}

static inline msp_bool msp_hook_is_save_param(void)
{
    return MSP_HOT_LOAD(msp_hot.answer.param)();
}

/* A dir of another shape (a runner's name: ATB passes those while
 * IsSaveTensorDesc says no) is no dump dir, told from its first byte before
 * anything else is loaded: dir.p[dir.n] must be readable (ATB's std::string
 * ends with a NUL, which no dump dir starts with). Asleep, the memo's epoch
 * (0) tells msp_hook_in_dir at its first compare. */
static inline msp_bool msp_hook_is_save_in_dir(msp_sv dir)
{
    return msp_dump_dir_head(dir.p[0]) && msp_hook_in_dir(dir);
}

static inline msp_bool msp_hook_is_overflow_check(void)
{
    return MSP_HOT_LOAD(msp_hot.answer.overflow)();
}

/* The saves: save.h; the reports: reports.h. */

#ifdef __cplusplus
}
#endif

#endif
