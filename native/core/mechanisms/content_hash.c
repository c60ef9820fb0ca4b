/* XXH64 (seed 0) written from the xxHash specification: four 64-bit lanes
 * over 32-byte stripes, then the tail (under 32 bytes), then the avalanche.
 * Two multiplies per 8 bytes bound it (14 GB/s a core on the EPYC of `make
 * bench`), not memory: the writer folds the stripes into the statistics'
 * vector loop instead (stats_simd.c), whose ports they do not use. */
#include "msprobe_atb/content_hash.h"

#include <string.h>

#include "hash_lane.h"

#define P1 MSP_XXH_P1
#define P2 MSP_XXH_P2
#define P3 0x165667B19E3779F9ULL
#define P4 0x85EBCA77C2B2AE63ULL
#define P5 0x27D4EB2F165667C5ULL

static inline uint64_t rotl(uint64_t x, int r)
{
    return (x << r) | (x >> (64 - r));
}

/* Little-endian loads, unaligned (x86-64 and aarch64 are little-endian). */
static inline uint64_t load64(const unsigned char *p)
{
    uint64_t v;
    memcpy(&v, p, sizeof v);
    return v;
}

static inline uint32_t load32(const unsigned char *p)
{
    uint32_t v;
    memcpy(&v, p, sizeof v);
    return v;
}

static inline uint64_t merge_lane(uint64_t h, uint64_t lane)
{
    h ^= msp_hash_round(0, lane);
    return h * P1 + P4;
}

/* The 32-byte stripes of [p, p + n), n a multiple of 32. */
static void stripes(uint64_t v[4], const unsigned char *p, size_t n)
{
    uint64_t v1 = v[0], v2 = v[1], v3 = v[2], v4 = v[3];
    for (const unsigned char *end = p + n; p < end; p += 32) {
        v1 = msp_hash_lane(v1, p);
        v2 = msp_hash_lane(v2, p + 8);
        v3 = msp_hash_lane(v3, p + 16);
        v4 = msp_hash_lane(v4, p + 24);
    }
    v[0] = v1, v[1] = v2, v[2] = v3, v[3] = v4;
}

void msp_content_hash_init(struct msp_hash_state *s)
{
    s->v[0] = P1 + P2;
    s->v[1] = P2;
    s->v[2] = 0;
    s->v[3] = 0 - P1;
    s->len = 0;
    s->tailn = 0;
}

void msp_content_hash_update(struct msp_hash_state *s, const void *data, size_t len)
{
    const unsigned char *p = data;
    s->len += len;
    if (s->tailn) { /* complete the stripe a previous piece left open */
        size_t take = 32 - s->tailn < len ? 32 - s->tailn : len;
        memcpy(s->tail + s->tailn, p, take);
        s->tailn += take;
        p += take;
        len -= take;
        if (s->tailn < 32)
            return;
        stripes(s->v, s->tail, 32);
        s->tailn = 0;
    }
    size_t whole = len / 32 * 32;
    stripes(s->v, p, whole);
    memcpy(s->tail, p + whole, len - whole);
    s->tailn = len - whole;
}

uint64_t *msp_content_hash_lanes(struct msp_hash_state *s)
{
    return s->tailn ? NULL : s->v;
}

void msp_content_hash_folded(struct msp_hash_state *s, size_t n)
{
    s->len += n;
}

uint64_t msp_content_hash_final(const struct msp_hash_state *s)
{
    uint64_t h;
    if (s->len >= 32) {
        const uint64_t *v = s->v;
        h = rotl(v[0], 1) + rotl(v[1], 7) + rotl(v[2], 12) + rotl(v[3], 18);
        for (int i = 0; i < 4; i++)
            h = merge_lane(h, v[i]);
    } else {
        h = P5;
    }
    h += s->len;
    const unsigned char *p = s->tail, *end = p + s->tailn;
    for (; end - p >= 8; p += 8) {
        h ^= msp_hash_round(0, load64(p));
        h = rotl(h, 27) * P1 + P4;
    }
    if (end - p >= 4) {
        h ^= (uint64_t)load32(p) * P1;
        h = rotl(h, 23) * P2 + P3;
        p += 4;
    }
    for (; p < end; p++) {
        h ^= (uint64_t)*p * P5;
        h = rotl(h, 11) * P1;
    }
    h ^= h >> 33;
    h *= P2;
    h ^= h >> 29;
    h *= P3;
    h ^= h >> 32;
    return h;
}

uint64_t msp_content_hash(const void *data, size_t len)
{
    struct msp_hash_state s;
    msp_content_hash_init(&s);
    msp_content_hash_update(&s, data, len);
    return msp_content_hash_final(&s);
}
