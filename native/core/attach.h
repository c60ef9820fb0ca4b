/* Lazy attach on the first hook call, the daemon, the monitor thread,
 * fork and exit handling. Loading the library does nothing at all. */
#ifndef MSP_ATTACH_H
#define MSP_ATTACH_H

#include <stddef.h>
#include <stdint.h>

#include "state.h"

void msp_attach_slow(void);

static inline void msp_ensure_attached(void)
{
    if (__builtin_expect(__atomic_load_n(&g_msp.attach_state, __ATOMIC_ACQUIRE) != MSP_ATTACH_DONE,
                         0))
        msp_attach_slow();
}

/* Device of the calling thread from the real ACL (aclrtGetDevice, looked
 * up once with dlsym), or -1. */
int64_t msp_acl_device(void);

/* Runner setups seen (UpdateConfig calls): per-thread counters, summed by
 * the monitor, so the hot path never writes a shared cache line. */
void msp_count_op(void);
uint64_t msp_ops_total(void);

/* IsReportModelTopoInfo: 1 the first time a model name is seen in this
 * process (lock-free fixed table of name hashes, no allocation). */
int msp_topo_first(const char *name, size_t n);

#endif
