/* One pass over a tensor's payload for both things the writer reads it for:
 * its statistics (stats.h) and its content hash (msprobe_atb/content_hash.h),
 * each piece read once while it is in cache, the vector pass folding the
 * hash's stripes as it goes (stats_simd.h). The results equal
 * msp_stats_compute's and msp_content_hash's on the whole payload. */
#ifndef MSP_TENSORSCAN_H
#define MSP_TENSORSCAN_H

#include <stddef.h>
#include <stdint.h>

#include "msprobe_atb/content_hash.h"

#include "stats.h"

struct msp_scan {
    struct msp_stats_acc stats;
    int has_stats;              /* 0: the dtype or size has none (the note says why) */
    struct msp_hash_state hash;
    uint64_t size, done;        /* payload bytes, bytes scanned */
};

/* Starts the scan of `size` payload bytes of dtype; a note says why there
 * will be no statistics (as msp_stats_compute's). */
void msp_scan_begin(struct msp_scan *s, int dtype, uint64_t size, char *note, size_t notelen);

/* Scans the payload (which starts at `payload`) on from where it stopped
 * through byte `end` at least: to the next MSP_STATS_PIECE boundary or the
 * payload's end, so that a writer can scan what it is about to write. */
void msp_scan_through(struct msp_scan *s, const unsigned char *payload, uint64_t end);

/* Once the whole payload is scanned: its hash in *hash, and 0 with its
 * statistics in *stats, or -1 when it has none. */
int msp_scan_end(const struct msp_scan *s, struct msp_stats *stats, uint64_t *hash);

#endif
