/* Joining a control block: claiming our slot, and the `attach` record that
 * opens a record log (join.h). */
#define _GNU_SOURCE
#include "join.h"

#include <unistd.h>

#include "acl.h"
#include "record.h"
#include "util.h"

struct msp_proc *msp_join_slot(struct msp_control *ctl, int *slot)
{
    *slot = msp_ctl_claim_proc(ctl, msp_slot.pid, msp_slot.start_ns);
    if (*slot < 0)
        msp_log("the process table of %s is full (%d processes); dumping without live "
                "counters in `status`", g_msp.dump_root, MSP_MAX_PROCS);
    struct msp_proc *p = *slot >= 0 ? &ctl->procs[*slot] : &msp_slot.dummy;
    __atomic_store_n(&p->abi, (uint32_t)msp_build_abi, __ATOMIC_RELAXED);
    /* ATB sets the device before its first op, so `status` can show it from
     * attach instead of from the first dumped tensor */
    int64_t dev = msp_acl_device();
    if (dev >= 0)
        __atomic_store_n(&p->device, dev, __ATOMIC_RELAXED);
    if (g_msp.host_abi >= 0 && g_msp.host_abi != msp_build_abi)
        __atomic_fetch_or(&p->flags, (uint32_t)MSP_PROC_ABI_MISMATCH, __ATOMIC_RELAXED);
    return p;
}

void msp_join_record(void)
{
    char exe[MSP_PATH_LEN];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    exe[n > 0 ? n : 0] = 0;
    struct jbuf b;
    msp_rec_begin(&b, "attach");
    jb_ku64(&b, "pid", msp_slot.pid);
    jb_ku64(&b, "start_ns", msp_slot.start_ns);
    jb_ki64(&b, "abi", msp_build_abi);
    jb_ki64(&b, "host_abi", g_msp.host_abi);
    jb_kcstr(&b, "output", g_msp.out);
    jb_kcstr(&b, "config", g_msp.config);
    jb_kcstr(&b, "exe", exe);
    msp_rec_commit(&b);
}
