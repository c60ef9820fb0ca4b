/* Each thread's memo of its last verdicts on op directories (dirmemo.h). */
#include "dirmemo.h"

#if __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "byte i of a word is bits 8i..8i+7"
#endif

__thread struct msp_memo_entry msp_memo[1 << MSP_MEMO_SLOT_BITS];

void msp_dirmemo_put(uint32_t epoch, const char *p, size_t n, int verdict)
{
    const char *s1 = n >= 8 && n <= MSP_MEMO_BYTES && epoch ? memchr(p, '/', n) : NULL;
    const char *s2 = s1 ? memchr(s1 + 1, '/', (size_t)(p + n - s1 - 1)) : NULL;
    /* the round: between the first two '/', 1 to 8 bytes */
    if (!s2 || s2 == s1 + 1 || s2 - s1 - 1 > 8)
        return;
    size_t lo = (size_t)(s1 + 1 - p), hi = (size_t)(s2 - p);
    struct msp_memo_entry *e = msp_memo_slot(p);
    e->p = p;
    e->key = (uint64_t)n << 32 | epoch;
    e->words = (uint32_t)((n + 7) / 8);
    e->verdict = verdict != 0;
    e->round_off = hi >= 8 ? hi - 8 : 0;
    e->round_mask = 0;
    for (size_t q = lo; q < hi; q++)
        e->round_mask |= UINT64_C(0x80) << 8 * (q - e->round_off);
    for (uint32_t i = 0; i < e->words; i++) {
        size_t off = i + 1 < e->words ? 8 * (size_t)i : n - 8;
        uint64_t m = ~UINT64_C(0);
        for (size_t j = 0; j < 8; j++)
            if (off + j >= lo && off + j < hi)
                m &= ~(UINT64_C(0xFF) << 8 * j);
        e->m[i] = m;
        e->w[i] = msp_memo_load(p + off) & m;
    }
}
