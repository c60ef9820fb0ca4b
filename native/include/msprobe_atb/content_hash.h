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

#endif
