/* The hooks' slow paths (hot.h): what a hook does when its fast path cannot
 * answer: attach on the first hook, follow a config the daemon published,
 * count a thread's ops into the monitor's duties, note a model's setup (and
 * the top-level op IsSaveTensorDesc asks about next). The lifecycle's entry
 * from the hot path; the words themselves are set by snapshot.c. */
#include "hot.h"

#include "attach.h"
#include "models.h"
#include "monitor.h"
#include "opcount.h"
#include "snapshot.h"

/* The top-level op this thread last set up (IsTensorNeedSave with ids of one
 * element), -1 before any: ATB asks IsSaveTensorDesc in the same Setup, right
 * after (callsites §4). */
static __thread int64_t t_top __attribute__((tls_model("initial-exec"))) = -1;

void msp_hot_refresh(void)
{
    msp_ensure_attached();
    msp_snap_check();
}

void msp_hot_update_slow(void)
{
    if ((__atomic_load_n(&msp_t_ops, __ATOMIC_RELAXED) & (MSP_OPS_BATCH - 1)) == 0) {
        msp_ops_tick();
        msp_monitor_hook_tick();
    }
    if (msp_hot_changed())
        msp_hot_refresh();
}

void msp_hot_need_save_slow(const int64_t *ids, size_t n)
{
    if (msp_hot_changed())
        msp_hot_refresh();
    if (n == 1)
        t_top = ids[0];
    const struct msp_snap *s = msp_hot_awake();
    msp_models_note_setup(s ? &s->cfg : NULL, ids, n);
}

int msp_hot_op_excluded(const struct msp_snap *s)
{
    if (s->n_tops < 0 || t_top < 0)
        return 0;
    for (int i = 0; i < s->n_tops; i++)
        if (s->tops[i] == t_top)
            return 0;
    return 1;
}
