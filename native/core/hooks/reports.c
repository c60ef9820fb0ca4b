/* The hooks of ATB's reports: graph and topology JSON as raw records, and
 * ReportOverflowKernel (reports.h). */
#define _GNU_SOURCE
#include "reports.h"

#include "acl.h"
#include "attach.h"
#include "models.h"
#include "overflow_task.h"
#include "record.h"
#include "recorder.h"
#include "state.h"
#include "topo.h"

void msp_hook_report_overflow_kernel(msp_sv kernel)
{
    const struct msp_snap *s = msp_hook_awake_snapshot();
    if (s && !msp_ovf_task(s) && msp_recorder_overflow_wanted(&s->cfg))
        msp_recorder_overflow(&s->cfg, kernel.p, kernel.n);
    if (!s || !msp_ovf_task(s))
        return;
    msp_ovf_reported(s, kernel.p, kernel.n);
}

int msp_hook_report_graph_enable(void)
{
    msp_ensure_attached();
    return g_msp.active;
}

static void report_json(const char *kind, const char *name_key, msp_sv name, msp_sv json)
{
    msp_ensure_attached();
    if (!g_msp.active)
        return;
    struct jbuf b;
    msp_rec_begin(&b, kind);
    jb_kstr(&b, name_key, name.p, name.n);
    jb_ki64(&b, "dev", msp_acl_device());
    /* raw and unparsed: the control plane builds info/ from it and copes
     * with whatever it holds */
    jb_kstr(&b, "json", json.p, json.n);
    msp_rec_commit(&b);
}

void msp_hook_report_graph(msp_sv name, msp_sv json)
{
    report_json("graph", "name", name, json);
}

/* ATB-Models asks once per Model::Execute, after issuing every node. */
int msp_hook_is_report_topo(msp_sv model)
{
    msp_ensure_attached();
    if (!g_msp.active)
        return 0;
    const struct msp_snap *s = msp_hot_awake();
    msp_models_executed(s ? &s->cfg : NULL, model.p, model.n);
    return msp_topo_first(model.p, model.n);
}

void msp_hook_report_topo(msp_sv model, msp_sv json)
{
    report_json("topo", "model", model, json);
}
