/* Writer threads: turn queued items into files and records. */
#ifndef MSP_WRITER_H
#define MSP_WRITER_H

#include <stddef.h>
#include <stdint.h>

#include "queue.h"
#include "stats.h"

/* What a `tensor` record describes; strings are (pointer, length) views. */
struct msp_tensor_desc {
    uint64_t seq;
    const char *path, *dims, *format_s, *dtype_s;
    size_t pathn, dimsn, formatn, dtypen;
    uint64_t size;
    uint32_t task;
    int hashed;    /* the payload was hashed: `hash` goes in the record */
    uint64_t hash; /* msp_content_hash of the payload */
};

/* Starts n writer threads on queue q (at the process's first wake), which
 * msp_item_queue then feeds. Returns how many started; errno says why when
 * fewer. */
int msp_writers_start(struct msp_queue *q, int n);

/* The open data/ directory the writers write below (-1: none), and its epoch,
 * bumped when it names a new data/ tree: the writers then drop the
 * directories they hold open. Atomic. Set by the lifecycle: opened at the
 * first wake, swapped after the tree was removed, closed in a forked child. */
extern int msp_data_fd;
extern unsigned msp_tree_epoch;

/* A selected tensor that will not be written: record + log (counters are
 * the caller's, since drops and errors are counted apart). On a writer
 * thread its record joins the writer's batch (recbatch.h); elsewhere it is
 * appended at once. */
void msp_tensor_lost(const struct msp_tensor_desc *d, const char *note);
/* An op_param.json that will not be written. */
void msp_param_lost(uint64_t seq, const char *path, size_t pathn, const char *note);
/* The same for a queued item (tensor or param). */
void msp_item_lost(const struct msp_item *it, const char *note);

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
