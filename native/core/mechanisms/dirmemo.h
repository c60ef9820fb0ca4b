/* Each thread's memo of its last verdicts on op directories, in front of
 * selcache.h: ATB asks IsSaveTensorInSpecificDir several times per runner and
 * kernel with the same std::string, whose buffer changes between rounds only
 * in its round's digits. A memo entry is found by the buffer's address and
 * taken after a compare of the dir's words outside the round (the round only
 * has to hold no '/'): no parsing and no hash at a repeated call. The content
 * is always compared, so a buffer reused for another dir is a miss, never
 * another op's verdict; an entry of another epoch (one per config snapshot,
 * selcache.h) is a miss, so an edit takes effect at the next call. Per
 * thread: no sharing, no atomics. Dirs longer than MSP_MEMO_BYTES or with a
 * round longer than 8 digits are not kept. */
#ifndef MSP_DIRMEMO_H
#define MSP_DIRMEMO_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define MSP_MEMO_WORDS 12
#define MSP_MEMO_BYTES (MSP_MEMO_WORDS * 8)
#define MSP_MEMO_SLOT_BITS 4

struct msp_memo_entry {
    const char *p;
    uint64_t key;   /* n << 32 | epoch; epoch 0: empty */
    uint32_t words; /* how many of w[] the dir spans (the last ends at its end) */
    uint32_t verdict;
    uint64_t round_off, round_mask; /* the word ending at the round's end, its bytes */
    uint64_t w[MSP_MEMO_WORDS];     /* the dir's words, the round's bytes 0 */
    uint64_t m[MSP_MEMO_WORDS];     /* 0 on the round's bytes, else ~0 */
};

extern __thread struct msp_memo_entry msp_memo[1 << MSP_MEMO_SLOT_BITS]
    __attribute__((tls_model("initial-exec")));

static inline struct msp_memo_entry *msp_memo_slot(const char *p)
{
    /* the address's top bits after a multiply: nearby buffers (a runner's
     * and its kernels' dirs) spread over the slots */
    return &msp_memo[((uint64_t)(uintptr_t)p * UINT64_C(0x9E3779B97F4A7C15)) >>
                     (64 - MSP_MEMO_SLOT_BITS)];
}

static inline uint64_t msp_memo_load(const char *p)
{
    uint64_t w;
    memcpy(&w, p, 8);
    return w;
}

/* The verdict kept for dir [p, p + n) under `epoch`, or -1. */
static inline int msp_dirmemo_get(uint32_t epoch, const char *p, size_t n)
{
    const struct msp_memo_entry *e = msp_memo_slot(p);
    if (e->p != p || e->key != ((uint64_t)n << 32 | epoch))
        return -1;
    uint64_t diff = 0;
    for (uint32_t i = 0; i + 1 < e->words; i++)
        diff |= (msp_memo_load(p + 8 * i) ^ e->w[i]) & e->m[i];
    diff |= (msp_memo_load(p + n - 8) ^ e->w[e->words - 1]) & e->m[e->words - 1];
    /* a '/' in the round's bytes (the approximate zero-byte test: it may see
     * one that is not there, which is only a miss) */
    uint64_t r = msp_memo_load(p + e->round_off) ^ UINT64_C(0x2F2F2F2F2F2F2F2F);
    diff |= (r - UINT64_C(0x0101010101010101)) & ~r & e->round_mask;
    return diff ? -1 : (int)e->verdict;
}

/* Keeps `verdict` on dir [p, p + n) under `epoch` (msp_op_selected's, on
 * this content), if the dir can be kept. */
void msp_dirmemo_put(uint32_t epoch, const char *p, size_t n, int verdict);

#endif
