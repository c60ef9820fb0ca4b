/* filter_level's writing of a repeated tensor (dedup.h says why identity
 * is by content): a hard link to the scope's identical earlier file, so
 * every path reads the whole tensor with any reader; a data= stub where the
 * file system refuses links, and for a kernel's tensor at filter_level 2. */
#ifndef MSP_DEDUP_LINK_H
#define MSP_DEDUP_LINK_H

#include <stdint.h>

#include "dedup.h"
#include "queue.h"
#include "stats.h"
#include "tensorrec.h"

/* Dedup (filter_level) applies: child ops are saved (save_child) and the task
 * writes data. Its items are routed by layer scope (msp_writer_for); the
 * others, a statistics item (its record alone) among them, go to any writer
 * (msp_queue_push_near). */
static inline int msp_dedup_applies(const struct msp_item *it)
{
    return it->kind == MSP_ITEM_TENSOR && it->save_child && it->filter_level >= 1 &&
           msp_item_makes_file(it);
}

/* For a tensor msp_dedup_applies to, about to be written into dfd as `name`
 * (dir: its directory below data/) with this .bin header, its content hash
 * in d->hash (where d->hashed): a stub (filter_level 2 kernel tensor) or a link to
 * an identical earlier file of its scope in table dd, its record included:
 * 1. 0: the caller writes it in full, and remembers it in dd by *key once
 * its record is in (the real file is gone, has too many links, or the link
 * failed for another reason). */
int msp_dedup_repeat(struct msp_dedup *dd, struct msp_tensor_desc *d, const struct msp_item *it,
                     int dfd, const char *dir, const char *name, const char *header, int hlen,
                     const struct msp_stats *stats, const char *note, uint64_t *key);

#endif
