/* The bounded copy queue between the hook threads and the writer threads.
 * One mutex, one FIFO per writer (items of one layer scope go to one
 * writer, so dedup and write order are deterministic), and one global byte
 * budget shared by all of them. */
#ifndef MSP_QUEUE_H
#define MSP_QUEUE_H

#include <pthread.h>
#include <stdint.h>

#define MSP_MAX_WRITERS 32

enum msp_item_kind { MSP_ITEM_TENSOR, MSP_ITEM_PARAM };

/* One allocation: the struct, then the strings, then the payload. */
struct msp_item {
    struct msp_item *next;
    enum msp_item_kind kind;
    uint32_t task;         /* MSP_TASK_* of the snapshot at SaveTensor time */
    uint32_t save_child, filter_level;
    int dtype;             /* parsed dtype_s, for the statistics */
    uint64_t seq;
    uint64_t size;         /* payload bytes */
    uint64_t cost;         /* bytes charged to the budget */
    char *path, *format_s, *dtype_s, *dims;
    unsigned char *data;
};

struct msp_queue {
    pthread_mutex_t mu;
    pthread_cond_t space;   /* bytes went down / closed */
    pthread_cond_t idle;    /* depth+inflight reached 0 */
    pthread_cond_t work[MSP_MAX_WRITERS];
    struct msp_item *head[MSP_MAX_WRITERS], *tail[MSP_MAX_WRITERS];
    int nlists;
    uint64_t depth, bytes, inflight;
    int closed;
};

void msp_queue_init(struct msp_queue *q, int nlists);

enum { MSP_PUSH_OK = 0, MSP_PUSH_DROPPED = 1, MSP_PUSH_CLOSED = 2 };
/* Queues `it` on list `w`. When the budget would be exceeded: block waits
 * (an item larger than the whole budget is admitted once the queue is
 * empty, so nothing deadlocks); otherwise the item is refused (DROPPED).
 * The caller keeps ownership of a refused item. */
int msp_queue_push(struct msp_queue *q, int w, struct msp_item *it, uint64_t budget, int block);
/* Next item of list w; blocks; NULL once closed and list w is empty. */
struct msp_item *msp_queue_pop(struct msp_queue *q, int w);
/* The writer finished `it` (and freed it): releases its budget. */
void msp_queue_done(struct msp_queue *q, uint64_t cost);
/* Waits until nothing is queued or in flight, or until deadline
 * (CLOCK_MONOTONIC ns). Returns 1 if drained. */
int msp_queue_wait_idle(struct msp_queue *q, uint64_t deadline_mono_ns);
/* Closes the queue and hands back every queued item (a list via ->next);
 * *inflight gets the number of items writers are still working on. */
struct msp_item *msp_queue_close(struct msp_queue *q, uint64_t *inflight);
void msp_queue_stats(struct msp_queue *q, uint64_t *depth, uint64_t *bytes);

#endif
