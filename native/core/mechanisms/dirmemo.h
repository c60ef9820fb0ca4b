/* Each thread's memo of its last verdicts on op directories, in front of
 * selcache.h: ATB asks IsSaveTensorInSpecificDir several times per runner and
 * kernel with the same std::string, whose buffer changes between rounds only
 * in its round's digits. A memo entry is found by the buffer's address and
 * taken after a compare of the dir's bytes outside the round (the round only
 * has to hold no '/'), 16 at a time: no parsing and no hash at a repeated
 * call. The content is always compared, so a buffer reused for another dir
 * is a miss, never another op's verdict; an entry of another epoch (one per
 * config snapshot, selcache.h) is a miss, so an edit takes effect at the next
 * call, and epoch 0 is never kept, so it always misses. Every load lies in
 * [p, p + n). Per thread: no sharing, no atomics. Dirs shorter than
 * MSP_MEMO_BLOCK or longer than MSP_MEMO_BYTES bytes, or with a round longer
 * than 8 digits, are not kept. */
#ifndef MSP_DIRMEMO_H
#define MSP_DIRMEMO_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* 16 bytes: GCC's vector extension (SSE2 on x86_64, NEON on aarch64, word
 * pairs elsewhere). */
typedef uint8_t msp_memo_block __attribute__((vector_size(16)));
#define MSP_MEMO_BLOCK 16
#define MSP_MEMO_BLOCKS 6
#define MSP_MEMO_BYTES (MSP_MEMO_BLOCKS * MSP_MEMO_BLOCK)
#define MSP_MEMO_SLOT_BITS 4

/* A block of the dir: its bytes, and which of them are compared. */
struct msp_memo_block_of {
    msp_memo_block w; /* the dir's bytes, the round's 0 */
    msp_memo_block m; /* 0 on the round's bytes, else 0xFF */
};

struct msp_memo_entry {
    const char *p;
    uint64_t n;
    uint32_t epoch; /* 0: empty */
    uint32_t last;  /* the dir's blocks: b[i] at 16 i below it, b[last] ends at its end */
    uint64_t round_off;        /* the block that holds the round (within the dir) */
    uint8_t verdict;           /* 0 or 1 */
    msp_memo_block round_mask; /* 0xFF on the round's bytes in it */
    struct msp_memo_block_of b[MSP_MEMO_BLOCKS];
};
/* a slot is found with a shift */
_Static_assert(sizeof(struct msp_memo_entry) == 256, "a memo entry is 256 bytes");

extern __thread struct msp_memo_entry msp_memo[1 << MSP_MEMO_SLOT_BITS]
    __attribute__((tls_model("initial-exec")));

static inline struct msp_memo_entry *msp_memo_slot(const char *p)
{
    /* the address's top bits after a multiply: nearby buffers (a runner's
     * and its kernels' dirs) spread over the slots */
    return &msp_memo[((uint64_t)(uintptr_t)p * UINT64_C(0x9E3779B97F4A7C15)) >>
                     (64 - MSP_MEMO_SLOT_BITS)];
}

static inline msp_memo_block msp_memo_load(const char *p)
{
    msp_memo_block b;
    memcpy(&b, p, sizeof b);
    return b;
}

/* The verdict kept for dir [p, p + n) under `epoch`, or -1. */
static inline int msp_dirmemo_get(uint32_t epoch, const char *p, size_t n)
{
    const struct msp_memo_entry *e = msp_memo_slot(p);
    if (e->p != p || e->n != n || e->epoch != epoch)
        return -1;
    int verdict = e->verdict;
    const msp_memo_block slashes = {'/', '/', '/', '/', '/', '/', '/', '/',
                                    '/', '/', '/', '/', '/', '/', '/', '/'};
    /* a '/' in the round's bytes: 0xFF there (the round's bytes are
     * compared no other way) */
    msp_memo_block diff =
        (msp_memo_block)(msp_memo_load(p + e->round_off) == slashes) & e->round_mask;
    /* b[0] whatever the length (it is b[last] again at 16 bytes) */
    const struct msp_memo_block_of *b = e->b, *last = b + e->last;
    diff |= (msp_memo_load(p) ^ b->w) & b->m;
    for (const char *q = p + MSP_MEMO_BLOCK; ++b < last; q += MSP_MEMO_BLOCK)
        diff |= (msp_memo_load(q) ^ b->w) & b->m;
    diff |= (msp_memo_load(p + n - MSP_MEMO_BLOCK) ^ last->w) & last->m;
    uint64_t half[2];
    memcpy(half, &diff, sizeof half);
    return half[0] | half[1] ? -1 : verdict;
}

/* Keeps `verdict` on dir [p, p + n) under `epoch` (msp_op_selected's, on
 * this content), if the dir can be kept. */
void msp_dirmemo_put(uint32_t epoch, const char *p, size_t n, int verdict);

#endif
