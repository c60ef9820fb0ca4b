/* The content hash of a tensor's payload: XXH64 with seed 0, as published
 * in the xxHash specification, so `xxhsum -H64 <payload>` and Python's
 * `xxhash.xxh64_intdigest(payload)` give the same value. The manifest's
 * `hash` column holds it as 16 hex digits; the writer's dedup starts from it.
 * Not cryptographic: equal hashes mean the bytes are very likely equal. */
#ifndef MSPROBE_ATB_CONTENT_HASH_H
#define MSPROBE_ATB_CONTENT_HASH_H

#include <stddef.h>
#include <stdint.h>

uint64_t msp_content_hash(const void *data, size_t len);

/* The same hash fed in pieces (the writer's one pass over a payload,
 * native/core/mechanisms/tensorscan.h). */
struct msp_hash_state {
    uint64_t v[4];
    uint64_t len;
    unsigned char tail[32];
    size_t tailn;
};
void msp_content_hash_init(struct msp_hash_state *s);
void msp_content_hash_update(struct msp_hash_state *s, const void *data, size_t len);
uint64_t msp_content_hash_final(const struct msp_hash_state *s);
/* For a pass that folds whole stripes into the lanes itself (the statistics'
 * vector loop folds each 32 bytes it reads): the lanes, NULL while a partial
 * stripe is pending; then folded(s, n) counts the n bytes (a multiple of 32)
 * it folded, before the rest goes to update. */
uint64_t *msp_content_hash_lanes(struct msp_hash_state *s);
void msp_content_hash_folded(struct msp_hash_state *s, size_t n);

#endif
