/* Each thread's memo of its last verdicts on op directories (dirmemo.h). */
#include "dirmemo.h"

__thread struct msp_memo_entry msp_memo[1 << MSP_MEMO_SLOT_BITS];

void msp_dirmemo_put(uint32_t epoch, const char *p, size_t n, int verdict)
{
    const char *s1 = n >= MSP_MEMO_BLOCK && n <= MSP_MEMO_BYTES && epoch ? memchr(p, '/', n) : NULL;
    const char *s2 = s1 ? memchr(s1 + 1, '/', (size_t)(p + n - s1 - 1)) : NULL;
    /* the round: between the first two '/', 1 to 8 bytes */
    if (!s2 || s2 == s1 + 1 || s2 - s1 - 1 > 8)
        return;
    size_t lo = (size_t)(s1 + 1 - p), hi = (size_t)(s2 - p);
    struct msp_memo_entry *e = msp_memo_slot(p);
    e->p = p;
    e->n = n;
    e->epoch = epoch;
    e->last = (uint32_t)((n - 1) / MSP_MEMO_BLOCK);
    e->verdict = verdict != 0;
    /* the block ending at the round's end, or the first: it holds the round's 8 bytes at most */
    e->round_off = hi >= MSP_MEMO_BLOCK ? hi - MSP_MEMO_BLOCK : 0;
    for (size_t j = 0; j < MSP_MEMO_BLOCK; j++)
        e->round_mask[j] = e->round_off + j >= lo && e->round_off + j < hi ? 0xFF : 0;
    for (uint32_t i = 0; i <= e->last; i++) {
        size_t off = i < e->last ? MSP_MEMO_BLOCK * (size_t)i : n - MSP_MEMO_BLOCK;
        struct msp_memo_block_of *b = &e->b[i];
        for (size_t j = 0; j < MSP_MEMO_BLOCK; j++)
            b->m[j] = off + j >= lo && off + j < hi ? 0 : 0xFF;
        b->w = msp_memo_load(p + off) & b->m;
    }
}
