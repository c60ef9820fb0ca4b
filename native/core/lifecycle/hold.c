/* Letting go of a hold whose executions went idle (hold.h). */
#include "hold.h"

#include <stdio.h>

#include "models.h"
#include "opcount.h"
#include "record.h"
#include "slot.h"
#include "snapshot.h"
#include "util.h"

static uint64_t g_progress;  /* what msp_hold_watch last saw */
static uint64_t g_still_ns;  /* since when it has not moved; 0: no edit held */
static uint64_t g_limit_ns;  /* MSPROBE_ATB_HOLD_IDLE_MS */
static uint64_t g_idle_ms;

static void cut(const char *model, uint64_t round)
{
    char key[96], why[256];
    snprintf(key, sizeof key, "%lld_%llu/%llu",
             (long long)__atomic_load_n(&msp_proc_now()->device, __ATOMIC_RELAXED),
             (unsigned long long)msp_slot.pid, (unsigned long long)round);
    snprintf(why, sizeof why, "its execution of model %s called no hook for %llu ms while it "
             "held an edit (it failed without reporting its end?): the edit was applied",
             model, (unsigned long long)g_idle_ms);
    struct jbuf b;
    msp_rec_begin(&b, "cut");
    jb_kcstr(&b, "round", key);
    jb_kcstr(&b, "why", why);
    msp_rec_commit(&b);
    msp_log("round %s cut: %s", key, why);
}

void msp_hold_watch(void)
{
    struct msp_snap *cur = msp_snap_get();
    struct msp_control *ctl = msp_ctl_now();
    if (!cur || !ctl || cur->ctl != ctl || cur->generation == msp_ctl_generation(ctl) ||
        !msp_snap_held(cur)) {
        g_still_ns = 0;
        return;
    }
    if (!g_limit_ns) {
        g_idle_ms = (uint64_t)msp_env_long("MSPROBE_ATB_HOLD_IDLE_MS", 5000, 1, 3600000);
        g_limit_ns = g_idle_ms * 1000000;
    }
    uint64_t now = msp_mono_ns(), progress = msp_ops_total() + msp_models_progress();
    if (!g_still_ns || progress != g_progress) {
        g_progress = progress;
        g_still_ns = now;
        return;
    }
    if (now - g_still_ns < g_limit_ns)
        return;
    msp_models_cut(&cur->cfg, cut);
    g_still_ns = 0;
    msp_snap_check();
}

void msp_hold_reset(void)
{
    g_still_ns = 0;
}
