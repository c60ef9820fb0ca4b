/* Writer threads: turn queued items into files and records (the records:
 * tensorrec.h; the data/ directory: datadir.h). */
#ifndef MSP_WRITER_H
#define MSP_WRITER_H

#include <stddef.h>
#include <stdint.h>

#include "queue.h"

/* Starts n writer threads on queue q (at the process's first wake), which
 * msp_item_queue then feeds. Returns how many started; errno says why when
 * fewer. */
int msp_writers_start(struct msp_queue *q, int n);

/* Hands a filled item to its writer, counted in the slot's queue gauges
 * (adopt: it was not reserved from the queue, see msp_queue_adopt). If the
 * queue is closed (exit), it is recorded as lost and released. */
void msp_item_queue(struct msp_item *it, int adopt);

/* The writer list an item of this path goes to. by_scope (the item is
 * deduplicated): items of one layer scope always share a writer (dedup order,
 * see dedup.h); otherwise each file goes its own way, so the files of one op
 * are written side by side (a disk takes several O_DIRECT streams faster
 * than one: 2 streams 1.75x, 4 streams 2.3x one stream's rate here). */
int msp_writer_for(const char *path, size_t n, int nwriters, int by_scope);

#endif
