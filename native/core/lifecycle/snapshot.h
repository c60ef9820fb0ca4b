/* The process-local config snapshot that the hot path reads. */
#ifndef MSP_SNAPSHOT_H
#define MSP_SNAPSHOT_H

#include "hot.h"
#include "state.h"

/* Copies the published config into a new snapshot if the block's
 * generation moved; on the first awake snapshot runs the wake-up (message,
 * data/ directory, `wake` record). */
void msp_snap_refresh(void);

static inline struct msp_snap *msp_snap_get(void)
{
    return __atomic_load_n(&g_msp.snap, __ATOMIC_ACQUIRE);
}

/* The first wake starts the writers, then start_monitor (the monitor thread,
 * monitor.h; 0 on success). Set once, before the first attach, by the
 * lifecycle above: the monitor follows the config through this file. */
void msp_snap_on_wake(int (*start_monitor)(void));

/* Does snapshot cur stay in force past an edit (an execution it dumps runs)? */
int msp_snap_held(const struct msp_snap *cur);

/* exec_range "next": says the rounds of each model fixed since the last call
 * (the monitor's duties). */
void msp_snap_say_next(void);

/* Opens <dump_root>/data, creating it if missing; -1 with errno on failure.
 * `path` receives its name for messages. */
int msp_data_dir_open(char *path, size_t cap);

/* Cheap block-and-generation compare; the copy happens only on a change. A
 * snapshot another thread is publishing is in g_msp.snap before the hooks' words
 * (hot.c) say it, `applied` last: until they do, this thread waits for that
 * publish in msp_snap_refresh, so that once it returns every hook answers by it. */
static inline void msp_snap_check(void)
{
    struct msp_control *ctl = msp_ctl_now();
    if (!ctl || !g_msp.active)
        return;
    struct msp_snap *s = msp_snap_get();
    if (__builtin_expect(!s || s->ctl != ctl || s->generation != msp_ctl_generation(ctl) ||
                             __atomic_load_n(&msp_hot.applied, __ATOMIC_ACQUIRE) != s->generation,
                         0))
        msp_snap_refresh();
}

#endif
