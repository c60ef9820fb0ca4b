/* The writer's one pass over a payload: statistics and content hash a piece
 * at a time (tensorscan.h). */
#include "tensorscan.h"

void msp_scan_begin(struct msp_scan *s, int dtype, uint64_t size, char *note, size_t notelen)
{
    s->has_stats = msp_stats_begin(&s->stats, dtype, size, note, notelen) == 0;
    msp_content_hash_init(&s->hash);
    s->size = size;
    s->done = 0;
}

/* A piece: the statistics' vector pass folds its whole stripes into the hash's
 * lanes; whatever it did not fold (all of it, for a dtype without a vector
 * pass) is hashed right after, from cache. */
static void scan_piece(struct msp_scan *s, const unsigned char *p, uint64_t len)
{
    uint64_t folded = 0;
    if (s->has_stats)
        folded = msp_stats_feed(&s->stats, p, len, msp_content_hash_lanes(&s->hash));
    msp_content_hash_folded(&s->hash, folded);
    msp_content_hash_update(&s->hash, p + folded, len - folded);
}

void msp_scan_through(struct msp_scan *s, const unsigned char *payload, uint64_t end)
{
    while (s->done < end && s->done < s->size) {
        uint64_t len = s->size - s->done < MSP_STATS_PIECE ? s->size - s->done : MSP_STATS_PIECE;
        scan_piece(s, payload + s->done, len);
        s->done += len;
    }
}

int msp_scan_end(const struct msp_scan *s, struct msp_stats *stats, uint64_t *hash)
{
    *hash = msp_content_hash_final(&s->hash);
    if (!s->has_stats)
        return -1;
    msp_stats_end(&s->stats, stats);
    return 0;
}
