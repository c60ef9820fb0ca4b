/* The overflow task on the hooks' side: this thread's event, and the
 * `overflow` and `overflow_output` records (overflow_task.h). */
#define _GNU_SOURCE
#include "overflow_task.h"

#include "acl.h"
#include "dtype.h"
#include "filter.h"
#include "overflow_finding.h"
#include "pending.h"
#include "record.h"
#include "slot.h"

__thread char msp_t_ovf_pending[512];
__thread size_t msp_t_ovf_pending_n;
__thread uint64_t msp_t_ovf_pending_seq;
__thread char msp_t_ovf_event_dir[512];
__thread size_t msp_t_ovf_event_dirn;
__thread uint64_t msp_t_ovf_event_seq;

/* Does check_mode keep an event of this finding? ATB's reports (MSP_OVF_NONE)
 * are of Inf, the probe's own findings of NaN or of an Inf ATB missed. */
static int mode_keeps(const struct msp_snap *s, enum msp_ovf_finding finding)
{
    switch (s->cfg.overflow_mode) {
    case MSP_OVERFLOW_INF:
        return finding != MSP_OVF_NAN;
    case MSP_OVERFLOW_NAN:
        return finding == MSP_OVF_NAN;
    default:
        return 1;
    }
}

/* An `overflow` record, ATB's report of `kernel` or the probe's `finding`
 * in the output `path`, if check_mode keeps it and it is within overflow_nums
 * (then 1, and its seq in *seq). */
static int overflow_event(const struct msp_snap *s, const char *kernel, size_t kerneln,
                          const char *path, size_t pathn, enum msp_ovf_finding finding,
                          uint64_t *seq)
{
    if (!mode_keeps(s, finding))
        return 0; /* not counted: overflow_nums counts the events kept */
    uint64_t n = __atomic_fetch_add(&g_msp.overflow_events, 1, __ATOMIC_RELAXED);
    if (s->cfg.overflow_nums >= 0 && n >= (uint64_t)s->cfg.overflow_nums)
        return 0;
    MSP_COUNT(overflow_events, 1);
    *seq = msp_seq_take();
    struct jbuf b;
    msp_rec_begin(&b, "overflow");
    jb_ku64(&b, "seq", *seq);
    jb_kstr(&b, "kernel", kernel, kerneln);
    jb_ki64(&b, "dev", msp_acl_device());
    if (finding != MSP_OVF_NONE) {
        jb_kcstr(&b, "finding", msp_ovf_finding_name(finding));
        jb_kstr(&b, "path", path, pathn);
    }
    msp_rec_commit(&b);
    return 1;
}

void msp_ovf_reported(const struct msp_snap *s, const char *kernel, size_t n)
{
    uint64_t seq;
    if (overflow_event(s, kernel, n, "", 0, MSP_OVF_NONE, &seq) && n < sizeof msp_t_ovf_pending) {
        memcpy(msp_t_ovf_pending, kernel, n);
        msp_t_ovf_pending_n = n;
        msp_t_ovf_pending_seq = seq;
    }
}

int msp_ovf_on_save(const struct msp_snap *s, const char *dtype, size_t dtypen, const void *host,
                    uint64_t size, const char *path, size_t pathn)
{
    size_t dirn = msp_after_output_dir(path, pathn);
    int code = -1;
    msp_enum_value(dtype, dtypen, &code);
    int ours = msp_t_ovf_event_dirn && pathn > msp_t_ovf_event_dirn &&
               path[msp_t_ovf_event_dirn] == '/' &&
               memcmp(path, msp_t_ovf_event_dir, msp_t_ovf_event_dirn) == 0;
    if (!ours && s->cfg.overflow_scan) {
        if (!dirn || !msp_ovf_nonfinite(code, host, size))
            return 0;
        enum msp_ovf_finding f = msp_ovf_classify(code, host, size);
        uint64_t seq;
        if (f == MSP_OVF_NONE || !overflow_event(s, "", 0, path, pathn, f, &seq))
            return 0; /* ATB's scan reports it, or past overflow_nums */
        msp_ovf_event_dir(path, dirn, seq);
    } else if (ours && dirn) {
        struct jbuf b;
        msp_rec_begin(&b, "overflow_output");
        jb_ku64(&b, "event", msp_t_ovf_event_seq);
        jb_kstr(&b, "path", path, pathn);
        const char *name = msp_dtype_name(code);
        jb_kcstr(&b, "dtype", name ? name : "");
        jb_key(&b, "nonfinite");
        jb_bool(&b, msp_ovf_nonfinite(code, host, size));
        msp_rec_commit(&b);
    }
    return 1;
}
