/* IsReportModelTopoInfo's memory: which model names this process reported
 * (a lock-free table of name hashes; topo.h). */
#include "topo.h"

#include <stdint.h>
#include <string.h>

#include "util.h"

#define TOPO_SLOTS 256
static uint64_t g_topo[TOPO_SLOTS];

void msp_topo_reset(void)
{
    memset(g_topo, 0, sizeof g_topo);
}

int msp_topo_first(const char *name, size_t n)
{
    uint64_t h = msp_fnv1a(MSP_FNV_SEED, name, n) | 1; /* 0 marks a free slot */
    for (unsigned i = 0; i < TOPO_SLOTS; i++) {
        uint64_t *slot = &g_topo[(h + i) % TOPO_SLOTS];
        uint64_t cur = __atomic_load_n(slot, __ATOMIC_ACQUIRE);
        if (cur == h)
            return 0;
        if (cur == 0) {
            if (__atomic_compare_exchange_n(slot, &cur, h, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
                return 1;
            if (cur == h)
                return 0;
        }
    }
    return 0; /* table full: 256 model names already reported */
}
