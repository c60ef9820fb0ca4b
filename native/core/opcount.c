#include "opcount.h"

#include <string.h>

#define OP_SLOTS 64
struct op_slot {
    uint64_t v;
    char pad[56];
};
static struct op_slot g_ops[OP_SLOTS + 1]; /* the last one is shared by extra threads */
static uint32_t g_ops_next;
static __thread uint64_t *t_ops;

void msp_count_op(void)
{
    uint64_t *c = t_ops;
    if (__builtin_expect(!c, 0)) {
        uint32_t i = __atomic_fetch_add(&g_ops_next, 1, __ATOMIC_RELAXED);
        c = t_ops = &g_ops[i < OP_SLOTS ? i : OP_SLOTS].v;
    }
    if (c == &g_ops[OP_SLOTS].v)
        __atomic_fetch_add(c, 1, __ATOMIC_RELAXED);
    else /* single writer: no locked instruction */
        __atomic_store_n(c, __atomic_load_n(c, __ATOMIC_RELAXED) + 1, __ATOMIC_RELAXED);
}

uint64_t msp_ops_total(void)
{
    uint64_t sum = 0;
    for (int i = 0; i <= OP_SLOTS; i++)
        sum += __atomic_load_n(&g_ops[i].v, __ATOMIC_RELAXED);
    return sum;
}

void msp_ops_reset(void)
{
    memset(g_ops, 0, sizeof g_ops);
}
